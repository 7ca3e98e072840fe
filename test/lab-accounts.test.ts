import { makeTestAuthority } from './support/tls-certificates';
import { FieldCipher, generateDataKey } from '../lib/platform/field-encryption';
import { LabOrderRepository } from '../lib/labs/orders-store';
import { placerNumberOf } from '../lib/labs/placer-number';
import { allowsResultsFrom } from '../lib/labs/lab-accounts';
import { LabAccount, LabAccountList } from '../schemas/lab-accounts';
import { PostOrderResponse } from '../schemas/lab-order';
import {
  createTenant,
  expectSchema,
  httpClient,
  managementClient,
  ownDatabase,
  startTestApp,
  teamClient,
  type HttpClient,
  type Tenant,
  type TestApp,
} from './support/harness';
import { createUser, orderBody } from './support/lab';

/**
 * Lab accounts (management API), what the labs listing says about them, lab tests naming one, and what orders carry
 * (lab account, placer number, ICD codes, AoE answers), on the real stack.
 */
let app: TestApp;
let tenant: Tenant;
let mgmt: HttpClient;
let team: HttpClient;
let userId: string;
let base: string;
/** Two certificates and their keys (a throwaway CA's, made with openssl for this run). */
let pairA: { cert: string; key: string };
let pairB: { cert: string; key: string };

// Quest (lab 2) in the shipped catalogue: cmp 2040, cbc 2041; a Lipid panel of US Specialty Labs (lab 1) is 1009.
const CMP = 2040;
const CBC = 2041;
const CMP_WALK_IN = '1f2e3d4c-5b6a-4978-8a6b-5c4d3e2f1a55';
const WELLNESS_WALK_IN = '2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d77';

const accountBody = (extra: Record<string, unknown> = {}) => ({
  lab_slug: 'quest',
  name: 'Quest (east)',
  account_number: '97512345',
  mllp: { host: '127.0.0.1', port: 9, tls: { ca: pairA.cert, cert: pairA.cert, key: pairA.key } },
  msh: { sending_application: 'HEALTHBRIDGE', sending_facility: 'HB^2.16.840.1.113883.3.9999^ISO', receiving_application: 'QUEST', receiving_facility: 'QDI' },
  profile: 'LOI_2.5.1',
  results_from: ['203.0.113.0/24', '2001:db8::1', `sha256:${'ab'.repeat(32)}`],
  order_codes: { [CMP]: { code: '10231', loinc: '24323-8' } },
  ...extra,
});

async function createAccount(client: HttpClient, extra: Record<string, unknown> = {}) {
  const res = await client.post(base, accountBody(extra));
  expect(res.status).toBe(200);
  expectSchema(LabAccount, res.body);
  return res.body as LabAccount;
}

const locs = (res: { body: { detail: { loc: (string | number)[] }[] } }) => res.body.detail.map((d) => d.loc);

beforeAll(async () => {
  const authority = makeTestAuthority('Lab accounts test CA');
  pairA = authority.server;
  pairB = authority.client;
  app = await startTestApp();
  tenant = await createTenant(app.deps, 'Lab accounts');
  mgmt = managementClient(app, tenant);
  team = teamClient(app, tenant);
  userId = await createUser(team);
  base = `/v1/org/${tenant.orgId}/lab_account/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/${app.deps.config.DEPLOYMENT_REGION}`;
}, 60000);
afterAll(async () => {
  await app?.close();
});

describe('the management API', () => {
  it('creates, lists, reads, changes and deletes an account, auditing each change; the TLS key is sealed and never returned', async () => {
    const created = await createAccount(mgmt);
    expect(created).toMatchObject({
      org_id: tenant.orgId,
      lab_slug: 'quest',
      lab_id: 2,
      mllp: { host: '127.0.0.1', port: 9, tls: { ca: pairA.cert, cert: pairA.cert, has_key: true } },
      // Defaults
      ack_mode: 'original',
      charset: 'UNICODE UTF-8',
      labels: 'separate_sheet',
      ack_timeout_ms: 30000,
      bill_types: ['client_bill'],
      order_codes: { [CMP]: { code: '10231', loinc: '24323-8' } },
    });
    expect(JSON.stringify(created)).not.toContain('PRIVATE KEY');

    // At rest: the key is ciphertext in a field of its own; the worker's read opens it.
    const stored = await app.inspect.collection('lab_accounts').findOne({ _id: created.id as never });
    expect(stored?.mllp.tls.key).toBeNull();
    expect(JSON.stringify(stored)).not.toContain('PRIVATE KEY');
    expect(stored?.tls_key).toHaveProperty('key_id');
    expect((await app.deps.repos.labAccounts.findById(created.id))?.mllp.tls?.key).toBe(pairA.key);
    expect((await app.deps.repos.labAccounts.listAll()).find((a) => a._id === created.id)?.mllp.tls?.key).toBe(pairA.key);

    const list = await mgmt.get(base);
    expect(list.status).toBe(200);
    expectSchema(LabAccountList, list.body);
    expect(list.body.data.map((a: LabAccount) => a.id)).toContain(created.id);
    expect(JSON.stringify(list.body)).not.toContain('PRIVATE KEY');
    const read = await mgmt.get(`${base}/${created.id}`);
    expect(read.status).toBe(200);
    expect(read.body).toEqual(created);

    // A change of the port keeps the rest; TLS given without its key keeps the stored key.
    const patched = await mgmt.patch(`${base}/${created.id}`, { name: 'Quest (west)', mllp: { port: 2575, tls: { ca: pairA.cert, cert: pairA.cert } } });
    expect(patched.status).toBe(200);
    expectSchema(LabAccount, patched.body);
    expect(patched.body).toMatchObject({ name: 'Quest (west)', mllp: { host: '127.0.0.1', port: 2575, tls: { has_key: true } }, account_number: '97512345' });
    expect(new Date(patched.body.updated_at).getTime()).toBeGreaterThan(new Date(created.updated_at).getTime());
    expect((await app.deps.repos.labAccounts.findById(created.id))?.mllp.tls?.key).toBe(pairA.key);
    // Another pair replaces both; null TLS drops it (plain TCP, e.g. in a VPN).
    const rotated = await mgmt.patch(`${base}/${created.id}`, { mllp: { tls: { cert: pairB.cert, key: pairB.key } } });
    expect(rotated.body.mllp.tls).toEqual({ ca: null, cert: pairB.cert, has_key: true });
    expect((await app.deps.repos.labAccounts.findById(created.id))?.mllp.tls?.key).toBe(pairB.key);
    const plain = await mgmt.patch(`${base}/${created.id}`, { mllp: { tls: null } });
    expect(plain.body.mllp.tls).toBeNull();
    expect((await app.inspect.collection('lab_accounts').findOne({ _id: created.id as never }))?.tls_key).toBeNull();

    expect((await mgmt.del(`${base}/${created.id}`)).status).toBe(204);
    expect((await mgmt.get(`${base}/${created.id}`)).status).toBe(404);
    expect((await mgmt.del(`${base}/${created.id}`)).status).toBe(404);

    const audit = (await mgmt.get(`/v1/org/${tenant.orgId}/audit_log?limit=100`)).body.data.filter(
      (e: { target: { id: string } }) => e.target.id === created.id,
    );
    const summary = audit.map((e: { action: string; status: string; changes: string[]; error: { status: number } | null }) => [
      e.action,
      e.status,
      e.error?.status ?? null,
    ]);
    expect(summary.sort()).toEqual(
      [
        ['lab_account.create', 'succeeded', null],
        ['lab_account.update', 'succeeded', null],
        ['lab_account.update', 'succeeded', null],
        ['lab_account.update', 'succeeded', null],
        ['lab_account.delete', 'succeeded', null],
        ['lab_account.delete', 'failed', 404],
      ].sort(),
    );
    const creation = audit.find((e: { action: string }) => e.action === 'lab_account.create');
    expect(creation.target).toEqual({ type: 'lab_account', id: created.id });
    expect(creation.changes).toEqual(expect.arrayContaining(['lab_slug', 'mllp', 'order_codes']));
    expect(JSON.stringify(audit)).not.toContain('PRIVATE KEY');
  });

  it('answers bad input with 422 naming each field', async () => {
    const bad = async (body: Record<string, unknown>) => {
      const res = await mgmt.post(base, body);
      expect(res.status).toBe(422);
      return locs(res);
    };
    expect(await bad(accountBody({ lab_slug: 'nolab' }))).toEqual([['body', 'lab_slug']]);
    expect(await bad(accountBody({ order_codes: { 1009: { code: 'X' }, abc: { code: 'Y' }, [CBC]: { code: '6399' } } }))).toEqual([
      ['body', 'order_codes', '1009'],
      ['body', 'order_codes', 'abc'],
    ]);
    expect(await bad(accountBody({ mllp: { host: '127.0.0.1', port: 70000 } }))).toEqual([['body', 'mllp', 'port']]);
    expect(await bad(accountBody({ results_from: ['10.0.0.0/8', 'lab.example.com', '10.0.0.0/33', 'sha256:XYZ'] }))).toEqual([
      ['body', 'results_from', 1],
      ['body', 'results_from', 2],
      ['body', 'results_from', 3],
    ]);
    expect(await bad(accountBody({ charset: 'EBCDIC' }))).toEqual([['body', 'charset']]);
    expect(await bad(accountBody({ profile: 'HL7_2.9' }))).toEqual([['body', 'profile']]);
    expect(await bad(accountBody({ msh: { sending_application: 'A|B', sending_facility: 'F', receiving_application: 'R', receiving_facility: 'Q' } }))).toEqual(
      [['body', 'msh', 'sending_application']],
    );
    // TLS: a key of another certificate, a certificate without its key, text that is no PEM.
    expect(await bad(accountBody({ mllp: { host: 'lab.example.com', port: 2575, tls: { cert: pairA.cert, key: pairB.key } } }))).toEqual([
      ['body', 'mllp', 'tls', 'key'],
    ]);
    expect(await bad(accountBody({ mllp: { host: 'lab.example.com', port: 2575, tls: { cert: pairA.cert } } }))).toEqual([['body', 'mllp', 'tls', 'key']]);
    expect(await bad(accountBody({ mllp: { host: 'lab.example.com', port: 2575, tls: { ca: 'not a certificate' } } }))).toEqual([
      ['body', 'mllp', 'tls', 'ca'],
    ]);
    const { msh: _msh, ...withoutMsh } = accountBody();
    expect(await bad(withoutMsh)).toEqual([['body', 'msh']]);

    const account = await createAccount(mgmt);
    const patch = await mgmt.patch(`${base}/${account.id}`, { lab_slug: 'labcorp' });
    expect(patch.status).toBe(422);
    expect(locs(patch)).toEqual([['body', 'lab_slug']]);
    const codes = await mgmt.patch(`${base}/${account.id}`, { order_codes: { 3040: { code: 'X' } } });
    expect(locs(codes)).toEqual([['body', 'order_codes', '3040']]);
    expect((await mgmt.get(`${base}/${account.id}`)).body).toEqual(account); // refused changes change nothing
  });

  it("finds no other organisation's account (404), serves only this deployment (400) and lets only org keys change accounts", async () => {
    const account = await createAccount(mgmt);
    const other = await createTenant(app.deps, 'Other lab org');
    const otherMgmt = managementClient(app, other);
    const otherBase = base.replace(tenant.orgId, other.orgId);
    expect((await otherMgmt.get(`${otherBase}/${account.id}`)).status).toBe(404);
    expect((await otherMgmt.patch(`${otherBase}/${account.id}`, { name: 'mine now' })).status).toBe(404);
    expect((await otherMgmt.del(`${otherBase}/${account.id}`)).status).toBe(404);
    expect((await otherMgmt.get(otherBase)).body.data).toEqual([]);
    expect((await mgmt.get(`${base}/${account.id}`)).body.name).toBe(account.name);

    const elsewhere = base.replace(`/${app.deps.config.DEPLOYMENT_REGION}`, app.deps.config.DEPLOYMENT_REGION === 'us' ? '/eu' : '/us');
    expect((await mgmt.get(elsewhere)).status).toBe(400);

    const scopedKey = (
      await mgmt.post(`/v1/org/${tenant.orgId}/management_key`, { role: 'team_admin', label: 'scoped', team_role_bindings: [{ team_id: tenant.teamId }] })
    ).body.value;
    const scoped = httpClient(app.url, { 'X-Management-Key': scopedKey });
    expect((await scoped.get(`${base}/${account.id}`)).status).toBe(200);
    expect((await scoped.post(base, accountBody())).status).toBe(403);
    expect((await scoped.patch(`${base}/${account.id}`, { name: 'x' })).status).toBe(403);
    expect((await scoped.del(`${base}/${account.id}`)).status).toBe(403);
  });
});

describe('labs, lab tests and orders', () => {
  it('GET /v3/lab_tests/labs says which labs take orders through an account of the organisation and which are simulated', async () => {
    const fresh = await createTenant(app.deps, 'Labs listing');
    const freshTeam = teamClient(app, fresh);
    const before = await freshTeam.get('/v3/lab_tests/labs');
    expect(before.status).toBe(200);
    expect(before.body.map((l: { slug: string; connection: string; lab_account_ids: string[] }) => [l.slug, l.connection, l.lab_account_ids])).toEqual([
      ['ussl', 'sandbox', []],
      ['quest', 'sandbox', []],
      ['labcorp', 'sandbox', []],
    ]);
    // Every field the reference has is kept.
    expect(Object.keys(before.body[0])).toEqual(
      expect.arrayContaining(['id', 'slug', 'name', 'first_line_address', 'city', 'zipcode', 'collection_methods', 'sample_types']),
    );
    const freshBase = base.replace(tenant.orgId, fresh.orgId);
    const account = (await managementClient(app, fresh).post(freshBase, accountBody())).body;
    const after = (await freshTeam.get('/v3/lab_tests/labs')).body;
    expect(after.map((l: { slug: string; connection: string; lab_account_ids: string[] }) => [l.slug, l.connection, l.lab_account_ids])).toEqual([
      ['ussl', 'sandbox', []],
      ['quest', 'lab_account', [account.id]],
      ['labcorp', 'sandbox', []],
    ]);
    // Another organisation's account changes nothing for this one.
    expect((await createTenant(app.deps, 'Labs listing 2').then((t) => teamClient(app, t).get('/v3/lab_tests/labs'))).body[1].connection).toBe('sandbox');
  });

  it('refuses a lab test naming a lab account that lacks a code for one of its markers, naming the marker', async () => {
    const account = await createAccount(mgmt);
    const test = { name: 'Metabolic via account', method: 'walk_in_test', description: 'CMP and CBC', lab_account_id: account.id };
    const refused = await team.post('/v3/lab_tests', { ...test, marker_ids: [CMP, CBC] });
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toEqual([
      expect.objectContaining({ loc: ['body', 'marker_ids', 1], type: 'value_error.marker_not_covered', msg: expect.stringContaining(`Marker ${CBC} (cbc)`) }),
    ]);
    const otherLab = await team.post('/v3/lab_tests', { ...test, marker_ids: [CMP], lab_slug: 'labcorp' });
    expect(locs(otherLab)).toEqual([['body', 'lab_account_id']]);
    const otherOrg = await createTenant(app.deps, 'Foreign account');
    const foreignAccount = (await managementClient(app, otherOrg).post(base.replace(tenant.orgId, otherOrg.orgId), accountBody())).body;
    const notOurs = await team.post('/v3/lab_tests', { ...test, marker_ids: [CMP], lab_account_id: foreignAccount.id });
    expect(locs(notOurs)).toEqual([['body', 'lab_account_id']]);

    const created = await team.post('/v3/lab_tests', { ...test, marker_ids: [CMP] });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ lab_account_id: account.id, lab: { slug: 'quest' } });
    expect((await team.get(`/v3/lab_tests/${created.body.id}`)).body.lab_account_id).toBe(account.id);
    // A test naming the account keeps it from being deleted.
    const del = await mgmt.del(`${base}/${account.id}`);
    expect(del.status).toBe(409);
    expect(del.body.detail).toContain(created.body.id);
  });

  it("orders carry their test's lab account, their placer number, ICD codes and AoE answers (sealed, erased with the patient)", async () => {
    const account = await createAccount(mgmt, { bill_types: ['client_bill', 'commercial_insurance'] });
    const test = (
      await team.post('/v3/lab_tests', { name: 'CMP via account', method: 'walk_in_test', description: 'CMP', marker_ids: [CMP], lab_account_id: account.id })
    ).body;
    const extra = { icd_codes: ['E11.9', 'Z0000'], aoe_answers: [{ marker_id: CMP, question_id: 1234, answer: 'Y' }] };
    const res = await team.post('/v3/order', orderBody(userId, test.id, extra));
    expect(res.status).toBe(200);
    expectSchema(PostOrderResponse, res.body);
    const { order } = res.body;
    expect(order).toMatchObject({
      lab_account_id: account.id,
      placer_number: placerNumberOf(order.id),
      icd_codes: ['E11.9', 'Z0000'],
      aoe_answers: [{ marker_id: CMP, question_id: '1234', answer: 'Y' }],
      lab_test: { id: test.id, lab_account_id: account.id },
    });
    expect((await team.get(`/v3/order/${order.id}`)).body).toMatchObject({ lab_account_id: account.id, icd_codes: ['E11.9', 'Z0000'] });

    const stored = await app.inspect.collection('lab_orders').findOne({ _id: order.id as never });
    expect(stored).toMatchObject({ lab_account_id: account.id, placer_number: placerNumberOf(order.id) });
    expect(stored?.icd_codes).toHaveProperty('key_id'); // patient data: sealed
    expect(stored?.aoe_answers).toHaveProperty('key_id');
    // One order per placer number.
    const { _id, ...copy } = stored!;
    await expect(app.inspect.collection('lab_orders').insertOne({ ...copy, sample_id: `${copy.sample_id}-copy` })).rejects.toThrow(/duplicate key/i);

    // Erasure removes them with the rest of the patient data (a store of its own: the live order belongs to its workflow).
    const own = await ownDatabase(app, 'labacct');
    try {
      const repo = new LabOrderRepository(own.db, FieldCipher.fromSpec(generateDataKey('erase')));
      const opened = (await app.deps.repos.labOrders.findById(order.id))!;
      await repo.insert(opened);
      await repo.erasePatientData(order.id);
      expect(await repo.findById(order.id)).toMatchObject({ icd_codes: [], aoe_answers: [], patient_details: null, lab_account_id: account.id });
    } finally {
      await own.drop();
    }

    // The catalogue's test has no account: the sandbox lab, unless the order names an account that covers it.
    const sandbox = (await team.post('/v3/order', orderBody(userId, CMP_WALK_IN))).body.order;
    expect(sandbox).toMatchObject({ lab_account_id: null, placer_number: placerNumberOf(sandbox.id), icd_codes: [], aoe_answers: [] });
    const named = await team.post('/v3/order', orderBody(userId, CMP_WALK_IN, { lab_account_id: account.id }));
    expect(named.status).toBe(200);
    expect(named.body.order.lab_account_id).toBe(account.id);
    const inOrderSet = await team.post('/v3/order', orderBody(userId, CMP_WALK_IN, { order_set: { lab_test_ids: [CMP_WALK_IN], lab_account_id: account.id } }));
    expect(inOrderSet.body.order.lab_account_id).toBe(account.id);
  });

  it('refuses orders the account cannot take, naming the field', async () => {
    const account = await createAccount(mgmt);
    const other = await createAccount(mgmt, { name: 'Quest (second)' });
    const test = (
      await team.post('/v3/lab_tests', { name: 'CMP via first', method: 'walk_in_test', description: 'CMP', marker_ids: [CMP], lab_account_id: account.id })
    ).body;
    const refused = async (body: Record<string, unknown>) => {
      const res = await team.post('/v3/order', body);
      expect(res.status).toBe(422);
      return res.body.detail as { loc: (string | number)[]; msg: string }[];
    };
    // The test's account is the order's: another one is refused.
    expect((await refused(orderBody(userId, test.id, { lab_account_id: other.id }))).map((d) => d.loc)).toEqual([['body', 'lab_account_id']]);
    // A catalogue test with markers the account has no code for.
    const uncovered = await refused(orderBody(userId, WELLNESS_WALK_IN, { lab_account_id: account.id }));
    expect(uncovered.map((d) => d.loc)).toEqual(uncovered.map(() => ['body', 'lab_account_id']));
    expect(uncovered.map((d) => d.msg).join(' ')).toContain(`Marker ${CBC} (cbc)`);
    // Another lab's test; an account of no one's; a billing type the lab does not take.
    const kit = '5b0f6c1e-2a41-4c8e-9d3b-7a1e0c2f4b11';
    expect((await refused(orderBody(userId, kit, { lab_account_id: account.id }))).map((d) => d.loc)).toEqual([['body', 'lab_account_id']]);
    expect((await refused(orderBody(userId, CMP_WALK_IN, { lab_account_id: '00000000-0000-4000-8000-000000000000' }))).map((d) => d.loc)).toEqual([
      ['body', 'lab_account_id'],
    ]);
    expect((await refused(orderBody(userId, test.id, { billing_type: 'patient_bill' }))).map((d) => d.loc)).toEqual([['body', 'billing_type']]);
    // ICD codes and AoE answers are checked too.
    expect((await refused(orderBody(userId, test.id, { icd_codes: ['diabetes'] }))).map((d) => d.loc)).toEqual([['body', 'icd_codes', 0]]);
    expect((await refused(orderBody(userId, test.id, { aoe_answers: [{ marker_id: CBC, question_id: 'q', answer: 'a' }] }))).map((d) => d.loc)).toEqual([
      ['body', 'aoe_answers', 0, 'marker_id'],
    ]);
    // The account's codes changed after the test was made: its orders are refused until they cover it again.
    expect((await mgmt.patch(`${base}/${account.id}`, { order_codes: { [CBC]: { code: '6399' } } })).status).toBe(200);
    const lost = await refused(orderBody(userId, test.id));
    expect(lost).toEqual([expect.objectContaining({ loc: ['body', 'order_set', 'lab_test_ids'], msg: expect.stringContaining(`Marker ${CMP} (cmp)`) })]);
  });
});

describe('results_from', () => {
  it('admits listed addresses, blocks and certificate fingerprints only', () => {
    const account = { results_from: ['203.0.113.0/24', '2001:db8::1', `sha256:${'ab'.repeat(32)}`] };
    const from = (remoteAddress: string, certificateFingerprint256: string | null = null) =>
      allowsResultsFrom(account, { remoteAddress, certificateFingerprint256 });
    expect(from('203.0.113.77')).toBe(true);
    expect(from('::ffff:203.0.113.77')).toBe(true);
    expect(from('2001:db8::1')).toBe(true);
    expect(from('198.51.100.1')).toBe(false);
    expect(from('2001:db8::2')).toBe(false);
    expect(from('198.51.100.1', `sha256:${'ab'.repeat(32)}`)).toBe(true);
    expect(from('198.51.100.1', `sha256:${'cd'.repeat(32)}`)).toBe(false);
  });
});
