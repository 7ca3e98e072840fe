import { randomBytes, randomUUID } from 'node:crypto';
import { OrderList } from '../schemas/lab-order';
import { nameTokens } from '../lib/labs/blind-index';
import { createTenant, expectSchema, startTestApp, teamClient, type HttpClient, type Tenant, type TestApp } from './support/harness';
import { indexesUsed } from './support/explain';
import { createUser, labTestIds, orderBody, patientDetails, today } from './support/lab';
import { rawText } from './support/raw';

/**
 * `GET /v3/orders` with `search_input` (an order, sample or user id, or the patient's name) and `patient_name`,
 * although names are encrypted at rest: they are found through a keyed blind index of their words (blind-index.ts),
 * which holds no name in plaintext. Real app, worker, database and Temporal.
 */

let app: TestApp;
let tenant: Tenant;
let client: HttpClient;
let tests: Awaited<ReturnType<typeof labTestIds>>;

beforeAll(async () => {
  app = await startTestApp();
  tenant = await createTenant(app.deps, 'Lab search');
  client = teamClient(app, tenant);
  tests = await labTestIds(client);
});
afterAll(async () => {
  await app.close();
});

/** Letters only, different in every run: a surname nobody else in the shared database has. */
const letters = () => Array.from(randomBytes(8), (b) => String.fromCharCode(97 + (b % 26))).join('');
const capitalised = (s: string) => s[0].toUpperCase() + s.slice(1);

async function orderFor(userId: string, firstName: string, lastName: string, team = client) {
  const res = await team.post(
    '/v3/order',
    orderBody(userId, tests.walk_in_test, { patient_details: { ...patientDetails, first_name: firstName, last_name: lastName } }),
  );
  if (res.status !== 200) throw new Error(`order: ${res.status} ${res.text}`);
  return res.body.order as { id: string; sample_id: string; user_id: string };
}

async function found(query: string, team = client): Promise<string[]> {
  const res = await team.get(`/v3/orders?${query}`);
  expect({ query, status: res.status }).toEqual({ query, status: 200 });
  expectSchema(OrderList, res.body);
  return res.body.orders.map((o: { id: string }) => o.id);
}
const q = (params: Record<string, string>) => new URLSearchParams(params).toString();

describe('normalised name tokens', () => {
  it('fold case and accents and split at every non-letter', () => {
    expect(nameTokens("Ana-María O'Neil")).toEqual(['ana', 'maria', 'o', 'neil']);
    expect(nameTokens('  JOSÉ  Núñez-García ')).toEqual(['jose', 'nunez', 'garcia']);
    expect(nameTokens('Zoë Zoe')).toEqual(['zoe']);
    expect(nameTokens('12 34')).toEqual([]);
  });
});

describe('GET /v3/orders?search_input= and ?patient_name=', () => {
  it('finds an order by its id, its sample id, its user id, or its patient name (any case, accents, whole words)', async () => {
    const tag = letters();
    const surname = `Núñez${tag}`;
    const user = await createUser(client);
    const other = await createUser(client);
    const jose = await orderFor(user, 'José María', `${surname}-García`);
    const ana = await orderFor(other, 'Ana', `Smith${tag}`);

    expect(await found(q({ search_input: jose.id }))).toEqual([jose.id]);
    expect(await found(q({ search_input: jose.id.toUpperCase() }))).toEqual([jose.id]);
    expect(await found(q({ search_input: ana.sample_id }))).toEqual([ana.id]);
    expect(await found(q({ search_input: other }))).toEqual([ana.id]);
    // The whole name, one word of it, other cases and accents: the same order.
    for (const name of [`José María ${surname}-García`, surname, `nunez${tag}`, `NÚÑEZ${tag.toUpperCase()} jose`, `garcia ${surname} maria`]) {
      expect({ name, found: await found(q({ search_input: name })) }).toEqual({ name, found: [jose.id] });
      expect({ name, found: await found(q({ patient_name: name })) }).toEqual({ name, found: [jose.id] });
    }
    // Every word must match, and whole words only (no prefixes).
    expect(await found(q({ patient_name: `${surname} Smith${tag}` }))).toEqual([]);
    expect(await found(q({ patient_name: surname.slice(0, 6) }))).toEqual([]);
    expect(await found(q({ search_input: `smith${tag}` }))).toEqual([ana.id]);
    // Combined with the other filters.
    expect(await found(q({ patient_name: surname, user_id: other }))).toEqual([]);
    expect(await found(q({ search_input: surname, user_id: user, order_activation_types: 'current' }))).toEqual([jose.id]);
    expect(await found(q({ search_input: surname, status: 'cancelled' }))).toEqual([]);
  });

  it("keeps another team's orders out of reach, even with the same name", async () => {
    const tag = letters();
    const user = await createUser(client);
    const mine = await orderFor(user, 'Kim', `Lee${tag}`);
    const otherTenant = await createTenant(app.deps, 'Lab search (other team)');
    const otherTeam = teamClient(app, otherTenant);
    const theirs = await orderFor(await createUser(otherTeam), 'Kim', `Lee${tag}`, otherTeam);
    expect(await found(q({ patient_name: `Lee${tag}` }))).toEqual([mine.id]);
    expect(await found(q({ patient_name: `Lee${tag}` }), otherTeam)).toEqual([theirs.id]);
    expect(await found(q({ search_input: mine.id }), otherTeam)).toEqual([]);
    expect(await found(q({ search_input: mine.sample_id }), otherTeam)).toEqual([]);
    // Tokens are bound to the team: the same name is indexed differently in each.
    const tokensOf = async (id: string) => (await app.deps.db.collection('lab_orders').findOne({ _id: id as never }))!.patient_name_tokens as string[];
    const [a, b] = [await tokensOf(mine.id), await tokensOf(theirs.id)];
    expect(a).toHaveLength(2);
    expect(a.filter((t) => b.includes(t))).toEqual([]);
  });

  it('pages a search by page and by next_cursor, newest first', async () => {
    const surname = capitalised(letters());
    const user = await createUser(client);
    const created: string[] = [];
    for (const first of ['Ava', 'Bea', 'Cy', 'Di', 'Ed']) created.push((await orderFor(user, first, surname)).id);
    const newestFirst = [...created].reverse();
    const pages = [(await client.get(`/v3/orders?${q({ search_input: surname, size: '2' })}`)).body];
    while (pages[pages.length - 1].next_cursor) {
      pages.push((await client.get(`/v3/orders?${q({ search_input: surname, size: '2', next_cursor: pages[pages.length - 1].next_cursor })}`)).body);
    }
    expect(pages.map((p) => [p.page, p.total, p.orders.length])).toEqual([
      [1, 5, 2],
      [2, 5, 2],
      [3, 5, 1],
    ]);
    expect(pages.flatMap((p) => p.orders.map((o: { id: string }) => o.id))).toEqual(newestFirst);
    expect(await found(q({ patient_name: surname, size: '2', page: '2' }))).toEqual(newestFirst.slice(2, 4));
    expect(await found(q({ patient_name: `${surname} cy`, order_direction: 'asc' }))).toEqual([created[2]]);
  });

  it('stores no name in plaintext: only keyed tokens, one per word of the name', async () => {
    const [first, last] = [`Quinta${letters()}`, `Rowe${letters()}`];
    const order = await orderFor(await createUser(client), first, last);
    const stored = await app.deps.db.collection('lab_orders').findOne({ _id: order.id as never });
    const text = rawText(stored).toLowerCase();
    for (const word of [first, last]) expect({ word, found: text.includes(word.toLowerCase()) }).toEqual({ word, found: false });
    expect(stored!.patient_name_tokens).toHaveLength(2);
    expect(stored!.patient_name_tokens.every((t: string) => /^[A-Za-z0-9_-]{22}$/.test(t))).toBe(true);
    // The API still shows the name (decrypted on read).
    expect((await client.get(`/v3/order/${order.id}`)).body.patient_details).toMatchObject({ first_name: first, last_name: last });
  });

  it('answers 422 at the field for a patient_name without letters and for empty terms', async () => {
    const res = await client.get('/v3/orders?patient_name=1234');
    expect(res.status).toBe(422);
    expect(res.body.detail[0]).toMatchObject({ loc: ['query', 'patient_name'] });
    const empty = await client.get('/v3/orders?search_input=');
    expect(empty.status).toBe(422);
    expect(empty.body.detail[0].loc).toEqual(['query', 'search_input']);
  });

  // The planner weighs a team's size: on a team of a few orders, walking all of them through any team index costs
  // nothing, and that is what it picks. So the plans are read on a team of many orders (seeded directly, as stored
  // documents: the index entries are what matters), where a walk of the team would cost, as it would in production.
  it('reads a name search through the name index, and each search_input branch through an index, on a team of many orders (explain on the real store)', async () => {
    const repo = app.deps.repos.labOrders;
    const teamId = `search-plan-${randomUUID()}`;
    const orders = app.inspect.collection('lab_orders');
    const seeded = Array.from({ length: 5_000 }, (_, i) => ({
      _id: randomUUID(),
      team_id: teamId,
      user_id: randomUUID(),
      sample_id: `S${i}${letters()}`,
      order_transaction_id: randomUUID(),
      patient_name_tokens: [randomBytes(16).toString('hex'), randomBytes(16).toString('hex')],
      low_level_status: 'ordered',
      activate_by: null,
      created_at: new Date(Date.now() - i * 60_000),
    }));
    try {
      for (let i = 0; i < seeded.length; i += 1_000) await orders.insertMany(seeded.slice(i, i + 1_000) as never[]);
      const target = seeded[1234];
      const base = { teamId, today: today(), direction: -1 as const };
      const page = { skip: 0, size: 50 };

      const byName = await repo.listQuery({ ...base, patientNameTokens: target.patient_name_tokens }, page).explain('queryPlanner');
      expect(indexesUsed(byName)).toEqual(['team_id_1_patient_name_tokens_1__id_-1']);

      // search_input: one query per alternative, each through its own index (an $or of them DocumentDB reads by
      // walking the team's orders through another team index, even on this team of 5,000).
      const plans = async (text: string, nameTokens: string[]) =>
        Promise.all(repo.searchQueries({ ...base, search: { text, nameTokens } }, page).map(async (q) => indexesUsed(await q.explain('queryPlanner'))));
      expect(await plans('surname', [target.patient_name_tokens[0]])).toEqual([['team_id_1_sample_id_1'], ['team_id_1_patient_name_tokens_1__id_-1']]);
      // An id may be an order's or a user's: the order by its id, then the user index and the sample index.
      const byId = await plans(target._id, []);
      expect(byId.slice(1)).toEqual([['team_id_1_user_id_1__id_-1'], ['team_id_1_sample_id_1']]);
      expect(byId[0]).toEqual([expect.stringMatching(/^(_id_|team_id_1__id_-1)$/)]);
      // And the page they make: the seeded order found by its sample id, its user id and its name.
      for (const text of [target.sample_id, target.user_id]) {
        const { orders: found, total } = await repo.list({ ...base, search: { text, nameTokens: [] } }, { ...page, countTotal: true });
        expect({ text, ids: found.map((o) => o._id), total }).toEqual({ text, ids: [target._id], total: 1 });
      }
    } finally {
      await orders.deleteMany({ team_id: teamId });
    }
  });
});
