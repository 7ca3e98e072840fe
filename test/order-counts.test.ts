import { placerNumberOf } from '../lib/labs/placer-number';
import { randomUUID } from 'node:crypto';
import { dataCipher } from '../lib/platform/config';
import { timeOrderedNameBasedUuid, timeOrderedUuid } from '../lib/platform/keys';
import { LabOrderRepository } from '../lib/labs/orders-store';
import type { OrderCountDoc } from '../lib/labs/order-counts-store';
import type { LabOrderDoc } from '../lib/labs/model';
import { createTenant, ownDatabase, startTestApp, teamClient, type HttpClient, type TestApp } from './support/harness';
import { createUser, labTestIds, orderBody, today } from './support/lab';

// The `total` of an unfiltered order list comes from the team's checkpoint in `lab_order_counts` plus a count of the
// orders past it (order-counts-store.ts). These tests hold it to the exact count through every way the checkpoint
// can go stale: new orders, orders settling past it, an order stored with an old id, a checkpoint gone wrong.

let app: TestApp;
let client: HttpClient;
let template: LabOrderDoc;
let teamId: string;
/** The api's repository, with a settle time of 4 s (10 minutes in production; an order noted as old after 2 s, which a loaded machine leaves fresh orders well within) so orders settle within a test. */
let repo: LabOrderRepository;

const HOUR = 3_600_000;
const SETTLE_MS = 4_000;

beforeAll(async () => {
  app = await startTestApp();
  const tenant = await createTenant(app.deps, 'Order counts');
  teamId = tenant.teamId;
  client = teamClient(app, tenant);
  const tests = await labTestIds(client);
  const user = await createUser(client);
  const first = (await client.post('/v3/order', orderBody(user, tests.walk_in_test))).body.order.id;
  template = (await app.deps.repos.labOrders.findById(first))!;
  repo = new LabOrderRepository(app.deps.db, dataCipher(app.deps.config), { settleMs: SETTLE_MS, recountMs: HOUR, advanceAt: 3 });
});
afterAll(() => app.close());

let seq = 0;
/** A copy of the template order for `team`, its id minted at `mintedAt` (an old id: a redraw, a retried request). */
const orderOf = (team: string, mintedAt?: number): LabOrderDoc => {
  // (timeOrderedUuid never goes back in time: an old id is minted as a redraw's is.)
  const id = mintedAt === undefined ? timeOrderedUuid() : timeOrderedNameBasedUuid(mintedAt, [randomUUID()]);
  return {
    ...template,
    _id: id,
    // Unique across orders (a unique index): each copy has its own, derived from its id as every order's is.
    placer_number: placerNumberOf(id),
    team_id: team,
    sample_id: `COUNT${String(++seq).padStart(8, '0')}${randomUUID().slice(0, 6)}`,
    order_transaction_id: randomUUID(),
    details_id: randomUUID(),
  };
};
const storeAll = (docs: LabOrderDoc[]) => Promise.all(docs.map((d) => repo.insert(d)));
const totalOf = (team: string) => repo.counts.teamTotal(team);
const exactCount = (team: string) => repo.orders.countDocuments({ team_id: team });
const checkpoint = (team: string) => repo.counts.counts.findOne({ _id: team }) as Promise<OrderCountDoc | null>;

describe('order count checkpoints', () => {
  it('counts a team exactly while orders arrive, settle past the checkpoint and move it on', async () => {
    const team = `count-team-${randomUUID()}`;
    expect(await totalOf(team)).toBe(0);
    await storeAll(Array.from({ length: 5 }, () => orderOf(team, Date.now() - HOUR)));
    // Every old id dropped the checkpoint: the next count is taken whole and kept.
    expect(await checkpoint(team)).toMatchObject({ epoch: 5 });
    expect((await checkpoint(team))?.below).toBeUndefined();
    expect(await totalOf(team)).toBe(5);
    expect(await checkpoint(team)).toMatchObject({ epoch: 5, count: 5 });

    // New orders are counted past the checkpoint and leave it alone.
    const before = await checkpoint(team);
    await storeAll(Array.from({ length: 4 }, () => orderOf(team)));
    expect(await totalOf(team)).toBe(9);
    expect(await checkpoint(team)).toEqual(before);

    // Once settled, they move it on (4 ≥ advanceAt 3), and the total stays exact.
    await new Promise((r) => setTimeout(r, SETTLE_MS + 100));
    expect(await totalOf(team)).toBe(9);
    const moved = await checkpoint(team);
    expect(moved).toMatchObject({ epoch: 5, count: 9 });
    expect(moved!.below! > before!.below!).toBe(true);
    expect(await exactCount(team)).toBe(9);
  });

  it('counts an order stored with an old id, which sorts before the checkpoint', async () => {
    const team = `count-team-${randomUUID()}`;
    await storeAll(Array.from({ length: 3 }, () => orderOf(team, Date.now() - HOUR)));
    expect(await totalOf(team)).toBe(3);
    expect((await checkpoint(team))?.count).toBe(3);
    await repo.insert(orderOf(team, Date.now() - 2 * HOUR)); // before `below`
    expect(await totalOf(team)).toBe(4);
    // A retry of that insert (it exists) notes it again: a crash between insert and note is repaired by the retry.
    const late = orderOf(team, Date.now() - 3 * HOUR);
    await repo.orders.insertOne({ ...(await sealedCopy(late)) });
    expect(await totalOf(team)).toBe(4); // the raw insert skipped the note, as a crash would
    expect('exists' in (await repo.insert(late))).toBe(true);
    expect(await totalOf(team)).toBe(5);
  });

  it('retakes a checkpoint counted whole longer ago than recountMs, so a wrong one does not last', async () => {
    const team = `count-team-${randomUUID()}`;
    await storeAll(Array.from({ length: 3 }, () => orderOf(team, Date.now() - HOUR)));
    expect(await totalOf(team)).toBe(3);
    await repo.counts.counts.updateOne({ _id: team }, { $set: { count: 42 } });
    expect(await totalOf(team)).toBe(42); // trusted while fresh
    await repo.counts.counts.updateOne({ _id: team }, { $set: { recounted_at: new Date(Date.now() - 2 * HOUR) } });
    expect(await totalOf(team)).toBe(3);
    expect(await checkpoint(team)).toMatchObject({ count: 3 });
  });

  it("tells a list the checkpoint's count as soon as it is read (none to use: null), and the page read beside the count is the team's", async () => {
    const team = `count-team-${randomUUID()}`;
    await storeAll(Array.from({ length: 3 }, () => orderOf(team, Date.now() - HOUR)));
    const heard: (number | null)[] = [];
    expect(await repo.counts.teamTotal(team, (n) => heard.push(n))).toBe(3); // no checkpoint yet: counted whole
    await repo.insert(orderOf(team)); // recent: past the checkpoint the count took
    expect(await repo.counts.teamTotal(team, (n) => heard.push(n))).toBe(4);
    expect(heard).toEqual([null, 3]);
    const listed = await repo.list({ teamId: team, today: today(), direction: -1 }, { skip: 0, size: 2, countTotal: true });
    expect(listed.total).toBe(4);
    expect(listed.more).toBe(true);
    expect(listed.orders.map((o) => o.team_id)).toEqual([team, team]);
    expect(listed.orders[0]).not.toHaveProperty('consents'); // a list page never shows them: not read
    expect(listed.orders[0]).not.toHaveProperty('patient_name_tokens');
  });

  it("plans a steady client's page by the team's size as last read (no wait on the checkpoint), while its total stays exact", async () => {
    const team = `count-team-${randomUUID()}`;
    await storeAll(Array.from({ length: 3 }, () => orderOf(team, Date.now() - HOUR)));
    const first = repo.counts.teamCount(team);
    expect(await first.total).toBe(3);
    expect(await first.plannedSize).toBe(3); // nothing seen yet: the (whole) count
    await storeAll(Array.from({ length: 2 }, () => orderOf(team)));
    let settled = false;
    const second = repo.counts.teamCount(team);
    second.total.then(() => (settled = true));
    expect(await second.plannedSize).toBe(3); // the size seen before, at once: the total is still being counted
    expect(settled).toBe(false);
    expect(await second.total).toBe(5); // exact all the same
    // A count that fails (its connection closed): the list fails with it, its page plan too (nothing left waiting).
    const closed = await ownDatabase(app, 'counts');
    await closed.drop();
    const broken = new LabOrderRepository(closed.db, dataCipher(app.deps.config)).counts.teamCount(team);
    const failure = await broken.total.catch((err: Error) => err);
    expect(failure).toBeInstanceOf(Error);
    await expect(broken.plannedSize).rejects.toBe(failure);
  });

  it('stays exact with counts and old-id inserts racing (each write under the epoch it read)', async () => {
    const team = `count-team-${randomUUID()}`;
    await storeAll(Array.from({ length: 10 }, () => orderOf(team, Date.now() - HOUR)));
    const lates = Array.from({ length: 30 }, (_, i) => orderOf(team, Date.now() - HOUR - i * 1000));
    const fresh = Array.from({ length: 30 }, () => orderOf(team));
    const counted = await Promise.all([
      ...lates.map((d) => repo.insert(d).then(() => null)),
      ...fresh.map((d) => repo.insert(d).then(() => null)),
      ...Array.from({ length: 30 }, () => totalOf(team)),
    ]);
    for (const n of counted) if (n !== null) expect(n).toBeGreaterThanOrEqual(10);
    expect(await exactCount(team)).toBe(70);
    expect(await totalOf(team)).toBe(70);
    await new Promise((r) => setTimeout(r, SETTLE_MS + 100));
    expect(await totalOf(team)).toBe(70); // settled and moved on
    expect(await checkpoint(team)).toMatchObject({ count: 70 });
  });

  it('filtered lists count their matches directly and leave the checkpoint alone', async () => {
    const team = `count-team-${randomUUID()}`;
    await storeAll([orderOf(team), orderOf(team, Date.now() - HOUR)]);
    const list = { teamId: team, today: today(), direction: -1 as const };
    const page = { skip: 0, size: 10, countTotal: true };
    expect((await repo.list({ ...list, lowLevelStatuses: [template.low_level_status] }, page)).total).toBe(2);
    expect(await checkpoint(team)).toMatchObject({ epoch: 1 }); // the old id's drop only; no checkpoint taken
    expect((await checkpoint(team))?.below).toBeUndefined();
    expect((await repo.list(list, page)).total).toBe(2); // the unfiltered list takes one
    expect(await checkpoint(team)).toMatchObject({ epoch: 1, count: 1 }); // the old order settled, the new one recent
  });
});

describe('GET /v3/orders total', () => {
  it("is the exact number of the team's orders, also after an order stored with an old id", async () => {
    const page = async () => (await client.get('/v3/orders?page=1&size=2')).body;
    const first = await page();
    expect(first.total).toBe(await exactCount(teamId));
    expect(await app.deps.repos.labOrders.counts.counts.findOne({ _id: teamId })).toMatchObject({ count: expect.any(Number) });
    // Through the api's own repository (production settings): an old id drops the checkpoint, the total follows.
    await app.deps.repos.labOrders.insert(orderOf(teamId, Date.now() - HOUR));
    const second = await page();
    expect(second.total).toBe(first.total + 1);
    expect(second.orders).toHaveLength(2);
    expect(second.total).toBe(await exactCount(teamId));
    // Unchanged on a list filtered by status: counted directly.
    const byStatus = (await client.get(`/v3/orders?page=1&size=2&status=${template.low_level_status}`)).body;
    expect(byStatus.total).toBe(await repo.orders.countDocuments({ team_id: teamId, low_level_status: template.low_level_status }));
  });
});

/** The order as the repository stores it (sealed), for a raw insert that skips the repository's note. */
async function sealedCopy(doc: LabOrderDoc) {
  const probeTeam = `count-probe-${randomUUID()}`;
  const probe = { ...doc, team_id: probeTeam, _id: doc._id };
  await repo.insert(probe);
  const stored = await repo.orders.findOne({ _id: doc._id });
  await repo.orders.deleteOne({ _id: doc._id });
  return { ...stored!, team_id: doc.team_id };
}
