import { randomUUID } from 'node:crypto';
import type { Db } from 'mongodb';
import { FieldCipher, generateDataKey } from '../lib/platform/field-encryption';
import { timeOrderedUuid } from '../lib/platform/keys';
import { createLogger } from '../lib/platform/logger';
import { InsuranceRepository, type InsuranceDoc } from '../lib/insurance/store';
import { InsuranceRecord, PayorSearchResults } from '../schemas/insurance';
import {
  createTenant,
  expectSchema,
  managementClient,
  startTestApp,
  teamClient,
  uniqueId,
  type HttpClient,
  type Tenant,
  type TestApp,
  ownDatabase,
  type OwnDatabase,
} from './support/harness';
import { rawText } from './support/raw';

let app: TestApp;
let tenant: Tenant;
let client: HttpClient;

/** Enables the closed beta for a team as an org admin does, through the management API. */
async function enableInsuranceBeta(t: Tenant): Promise<void> {
  const res = await managementClient(app, t).patch(`/v1/org/${t.orgId}/team/${t.teamId}`, { feature_flags: { insurance: true } });
  expect(res.body.feature_flags).toEqual({ insurance: true });
}

beforeAll(async () => {
  app = await startTestApp();
  tenant = await createTenant(app.deps, 'Insurance');
  await enableInsuranceBeta(tenant);
  client = teamClient(app, tenant);
});
afterAll(() => app.close());

const address = { first_line: '1 Main Street', country: 'US', zip: '60601', city: 'Chicago', state: 'IL' };
const insured = {
  first_name: 'Marta',
  last_name: 'Quinlivan',
  gender: 'female' as const,
  address,
  dob: '1984-03-02',
  email: 'marta.quinlivan@example.com',
  phone_number: '+13125550142',
};
const guarantor = { first_name: 'Piet', last_name: 'Quinlivan', address, phone_number: '+13125550143', household_income: 52000, household_size: 3 };
const record = (extra: Record<string, unknown> = {}) => ({ payor_code: 'MEDFED', member_id: 'MBR-0042-7781', relationship: 'Self', insured, ...extra });

async function newUser(c: HttpClient = client): Promise<string> {
  const res = await c.post('/v2/user/', { client_user_id: uniqueId('insured') });
  expect(res.status).toBe(200);
  return res.body.user_id;
}

describe('creating and reading insurance records', () => {
  it('fills company from the payor catalogue, defaults second_line, and returns the latest record of each primacy', async () => {
    const userId = await newUser();
    const first = await client.post(`/v2/user/${userId}/insurance`, record());
    expect(first.status).toBe(200);
    expectSchema(InsuranceRecord, first.body);
    expect(first.body).toMatchObject({ payor_code: 'MEDFED', relationship: 'Self', is_primary: true, group_id: null, guarantor: null });
    expect(first.body.company).toEqual({ name: 'Medicare', address: expect.objectContaining({ city: 'Baltimore', state: 'MD', zip: '21244' }) });
    expect(first.body.insured.address.second_line).toBe('');

    const newer = await client.post(`/v2/user/${userId}/insurance`, record({ member_id: 'MBR-NEWER', group_id: 'GRP-1' }));
    expect(newer.status).toBe(200);
    const secondary = await client.post(`/v2/user/${userId}/insurance`, record({ payor_code: 'maidfed', member_id: 'MBR-SECOND', is_primary: false }));
    expect(secondary.body).toMatchObject({ payor_code: 'MAIDFED', is_primary: false, company: { name: 'Medicaid' } });

    const latest = await client.get(`/v2/user/${userId}/insurance/latest`);
    expect(latest.status).toBe(200);
    expectSchema(InsuranceRecord, latest.body);
    expect(latest.body).toMatchObject({ member_id: 'MBR-NEWER', group_id: 'GRP-1', is_primary: true, insured: { first_name: 'Marta', gender: 'female' } });
    expect((await client.get(`/v2/user/${userId}/insurance/latest?is_primary=true`)).body.member_id).toBe('MBR-NEWER');
    expect((await client.get(`/v2/user/${userId}/insurance/latest?is_primary=false`)).body.member_id).toBe('MBR-SECOND');
  });

  it('returns the last of records created back to back (ids are time-ordered, so a shared created_at still sorts)', async () => {
    const userId = await newUser();
    for (let i = 1; i <= 5; i++) {
      expect((await client.post(`/v2/user/${userId}/insurance`, record({ member_id: `MBR-SEQ-${i}` }))).status).toBe(200);
    }
    expect((await client.get(`/v2/user/${userId}/insurance/latest`)).body.member_id).toBe('MBR-SEQ-5');
    // Within one millisecond the ids alone keep creation order.
    const sameMs = Date.now();
    const ids = Array.from({ length: 500 }, () => timeOrderedUuid(sameMs));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(500);
  });

  it('answers 404 without a record, 422 {detail} for a bad is_primary, and 404 across teams', async () => {
    const userId = await newUser();
    const none = await client.get(`/v2/user/${userId}/insurance/latest`);
    expect(none.status).toBe(404);
    expect(none.body.detail).toMatch(/no primary insurance record/);
    const bad = await client.get(`/v2/user/${userId}/insurance/latest?is_primary=maybe`);
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(['query', 'is_primary']);

    expect((await client.post(`/v2/user/${userId}/insurance`, record())).status).toBe(200);
    const other = await createTenant(app.deps, 'Insurance elsewhere');
    await enableInsuranceBeta(other);
    const stranger = teamClient(app, other);
    expect((await stranger.get(`/v2/user/${userId}/insurance/latest`)).status).toBe(404);
    expect((await stranger.post(`/v2/user/${userId}/insurance`, record())).status).toBe(404);
  });

  it('takes a payor the catalogue lacks only with its company, and names both options when it is missing', async () => {
    const userId = await newUser();
    const unknown = await client.post(`/v2/user/${userId}/insurance`, record({ payor_code: 'ACME_HEALTH' }));
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail.map((d: any) => d.loc)).toEqual([
      ['body', 'payor_code'],
      ['body', 'company'],
    ]);
    expect(unknown.body.detail[0].msg).toMatch(/search\/payor.*company/);
    const company = { name: 'Acme Health Plan', address: { ...address, first_line: '9 Acme Way' } };
    const withCompany = await client.post(`/v2/user/${userId}/insurance`, record({ payor_code: 'ACME_HEALTH', company }));
    expect(withCompany.status).toBe(200);
    expect(withCompany.body.company).toEqual({ ...company, address: { ...company.address, second_line: '', access_notes: null } });
  });
});

describe('validation', () => {
  let userId: string;
  beforeAll(async () => {
    userId = await newUser();
  });
  const post = (body: unknown) => client.post(`/v2/user/${userId}/insurance`, body);
  const without = <T extends Record<string, unknown>>(obj: T, key: string) => Object.fromEntries(Object.entries(obj).filter(([k]) => k !== key));

  it('names each missing required field by its location', async () => {
    const cases: [unknown, (string | number)[]][] = [
      ...['payor_code', 'member_id', 'relationship', 'insured'].map((f): [unknown, (string | number)[]] => [without(record(), f), ['body', f]]),
      ...Object.keys(insured).map((f): [unknown, (string | number)[]] => [record({ insured: without(insured, f) }), ['body', 'insured', f]]),
      ...Object.keys(address).map((f): [unknown, (string | number)[]] => [
        record({ insured: { ...insured, address: without(address, f) } }),
        ['body', 'insured', 'address', f],
      ]),
      ...['first_name', 'last_name', 'address', 'phone_number'].map((f): [unknown, (string | number)[]] => [
        record({ relationship: 'Spouse', guarantor: without(guarantor, f) }),
        ['body', 'guarantor', f],
      ]),
      [record({ company: { name: 'Acme' } }), ['body', 'company', 'address']],
      [record({ company: { address } }), ['body', 'company', 'name']],
      ...Object.keys(address).map((f): [unknown, (string | number)[]] => [
        record({ relationship: 'Other', guarantor: { ...guarantor, address: without(address, f) } }),
        ['body', 'guarantor', 'address', f],
      ]),
    ];
    for (const [body, loc] of cases) {
      const res = await post(body);
      expect({ loc, status: res.status }).toEqual({ loc, status: 422 });
      expect(res.body.detail.map((d: any) => d.loc)).toContainEqual(loc);
    }
    expect(await app.inspect.collection('insurance_records').countDocuments({ user_id: userId })).toBe(0);
  });

  it('takes the schema spelling, not the original sample response (lower-case gender, zip)', async () => {
    const capitalised = await post(record({ insured: { ...insured, gender: 'Female' } }));
    expect(capitalised.status).toBe(422);
    expect(capitalised.body.detail[0].loc).toEqual(['body', 'insured', 'gender']);
    const zipCode = await post(record({ insured: { ...insured, address: { ...without(address, 'zip'), zip_code: '60601' } } }));
    expect(zipCode.status).toBe(422);
    expect(zipCode.body.detail.map((d: any) => d.loc)).toContainEqual(['body', 'insured', 'address', 'zip']);
  });

  it('takes access_notes of 1000 characters and refuses 1001', async () => {
    const notes = (n: number) => record({ insured: { ...insured, address: { ...address, access_notes: 'x'.repeat(n) } } });
    const ok = await post(notes(1000));
    expect(ok.status).toBe(200);
    expect(ok.body.insured.address.access_notes).toHaveLength(1000);
    const tooLong = await post(notes(1001));
    expect(tooLong.status).toBe(422);
    expect(tooLong.body.detail[0].loc).toEqual(['body', 'insured', 'address', 'access_notes']);
  });

  it('requires a guarantor unless the relationship is Self', async () => {
    for (const relationship of ['Spouse', 'Other', 'Child']) {
      const res = await post(record({ relationship }));
      expect({ relationship, status: res.status }).toEqual({ relationship, status: 422 });
      expect(res.body.detail[0].loc).toEqual(['body', 'guarantor']);
      expect((await post(record({ relationship, guarantor: null }))).status).toBe(422);
    }
    const spouse = await post(record({ relationship: 'Spouse', guarantor }));
    expect(spouse.status).toBe(200);
    expect(spouse.body.guarantor).toMatchObject({ first_name: 'Piet', household_income: 52000, household_size: 3, email: null });
  });
});

describe('the closed beta', () => {
  it('answers teams not enabled with a JSON 403 naming the feature on both endpoints', async () => {
    const outsider = await createTenant(app.deps, 'No beta');
    const c = teamClient(app, outsider);
    const userId = await newUser(c);
    for (const res of [await c.post(`/v2/user/${userId}/insurance`, record()), await c.get(`/v2/user/${userId}/insurance/latest`)]) {
      expect(res.status).toBe(403);
      expect(res.headers.get('content-type')).toMatch(/application\/json/);
      expect(res.body.detail).toMatch(/closed beta.*insurance/);
    }
    expect(await app.inspect.collection('insurance_records').countDocuments({ user_id: userId })).toBe(0);

    // An org admin enables the beta for the team: the same calls now work.
    await enableInsuranceBeta(outsider);
    expect((await c.post(`/v2/user/${userId}/insurance`, record())).status).toBe(200);
    expect((await c.get(`/v2/user/${userId}/insurance/latest`)).body.member_id).toBe('MBR-0042-7781');
  });
});

describe('payor search', () => {
  it('finds payors by name or alias and by clearing-house id, in both the GET and the older POST form', async () => {
    const byName = await client.get('/v3/insurance/search/payor?insurance_name=MEDICARE');
    expect(byName.status).toBe(200);
    expectSchema(PayorSearchResults, byName.body);
    // Medicare itself, and Humana by its alias "Humana Medicare Advantage".
    expect(byName.body.map((p: any) => p.payor_code).sort()).toEqual(['HUMANA', 'MEDFED']);
    expect((await client.get('/v3/insurance/search/payor?insurance_name=medicaid')).body.map((p: any) => p.payor_code)).toEqual(['MAIDFED']);
    expect(byName.body[0]).toMatchObject({ source: 'platform', org_address: expect.objectContaining({ country: 'US' }) });
    expect((await client.get('/v3/insurance/search/payor?insurance_name=united%20health')).body.map((p: any) => p.payor_code)).toEqual(['UHC']);
    expect((await client.get('/v3/insurance/search/payor?provider=availity&provider_payor_id=60054')).body.map((p: any) => p.payor_code)).toEqual(['AETNA']);
    expect((await client.get('/v3/insurance/search/payor?insurance_name=nonesuch')).body).toEqual([]);
    const old = await client.post('/v3/insurance/search/payor', { insurance_name: 'cigna' });
    expect(old.body).toEqual([expect.objectContaining({ code: 'CIGNA', name: 'Cigna Healthcare' })]);
  });
});

describe('in the logs', () => {
  it('no member, insured or guarantor detail reaches a log line, at debug level, for accepted and refused records', async () => {
    const lines: string[] = [];
    const logged = await startTestApp({}, { logger: createLogger('debug', 'api-test', { write: (line: string) => void lines.push(line) }) });
    try {
      const c = teamClient(logged, tenant);
      const userId = await newUser(c);
      const body = record({ relationship: 'Spouse', guarantor, group_id: 'GRP-LOGGED-3' });
      expect((await c.post(`/v2/user/${userId}/insurance`, body)).status).toBe(200);
      expect((await c.post(`/v2/user/${userId}/insurance`, { ...body, insured: { ...insured, dob: 'not-a-date' } })).status).toBe(422);
      expect((await c.get(`/v2/user/${userId}/insurance/latest`)).status).toBe(200);
      expect(lines.length).toBeGreaterThan(0);
      const text = lines.join('');
      for (const plaintext of [
        'MBR-0042-7781',
        'GRP-LOGGED-3',
        'Marta',
        'Quinlivan',
        '1984-03-02',
        'marta.quinlivan@example.com',
        '+13125550142',
        '1 Main Street',
        'Piet',
      ]) {
        expect({ plaintext, found: text.includes(plaintext) }).toEqual({ plaintext, found: false });
      }
    } finally {
      await logged.close();
    }
  });
});

describe('at rest', () => {
  it('stores member, insured and guarantor details only encrypted', async () => {
    const userId = await newUser();
    const created = await client.post(`/v2/user/${userId}/insurance`, record({ relationship: 'Spouse', guarantor, group_id: 'GRP-SECRET-9' }));
    expect(created.status).toBe(200);
    const raw = await app.inspect.collection('insurance_records').findOne({ user_id: userId });
    const text = rawText(raw);
    for (const plaintext of [
      'MBR-0042-7781',
      'GRP-SECRET-9',
      'Marta',
      'Quinlivan',
      '1984-03-02',
      'marta.quinlivan@example.com',
      '+13125550142',
      '1 Main Street',
      'Piet',
    ]) {
      expect({ plaintext, found: text.includes(plaintext) }).toEqual({ plaintext, found: false });
    }
    expect(raw).toMatchObject({
      team_id: tenant.teamId,
      payor_code: 'MEDFED',
      is_primary: true,
      member_id: { key_id: expect.any(String) },
      insured: { key_id: expect.any(String) },
    });
  });

  it('erases the records when the deletion grace period ends', async () => {
    const shortGrace = await startTestApp({ USER_DELETION_GRACE_SECONDS: 2 });
    try {
      const c = teamClient(shortGrace, tenant);
      const userId = await newUser(c);
      expect((await c.post(`/v2/user/${userId}/insurance`, record())).status).toBe(200);
      expect((await c.del(`/v2/user/${userId}`)).status).toBe(200);
      const result = await shortGrace.deps.temporal.client.workflow.getHandle(`user-deletion:${userId}`).result();
      expect(result.erased.insurance).toBe(1);
      expect(await shortGrace.inspect.collection('insurance_records').countDocuments({ user_id: userId })).toBe(0);
    } finally {
      await shortGrace.close();
    }
  });
});

describe('data key rotation (own database)', () => {
  let own: OwnDatabase;
  let db: Db;
  const oldKey = generateDataKey('old');
  const newKey = generateDataKey('new');
  const repo = (keys: string) => new InsuranceRepository(db, FieldCipher.fromSpec(keys));
  const doc = (): InsuranceDoc => ({
    _id: randomUUID(),
    team_id: 'team-rotation',
    user_id: randomUUID(),
    member_id: 'MBR-ROTATE',
    payor_code: 'MEDFED',
    relationship: 'Self',
    insured: { ...insured, address: { ...address, second_line: '', access_notes: null } },
    company: { name: 'Medicare', address: { ...address, second_line: '' } },
    group_id: null,
    guarantor: null,
    is_primary: true,
    created_at: new Date(),
  });

  beforeAll(async () => {
    own = await ownDatabase(app, 'insurance');
    db = own.db;
    await repo(oldKey).ensureIndexes();
  });
  afterAll(() => own?.drop());

  it('keeps old records readable after a new key becomes current, and reencrypt moves them to it', async () => {
    const before = doc();
    await repo(oldKey).create(before);
    const stored = () => db.collection('insurance_records').findOne({ _id: before._id as never });
    expect((await stored())!.member_id.key_id).toBe('old');

    const rotated = repo(`${newKey},${oldKey}`);
    expect(await rotated.latest(before.team_id, before.user_id, true)).toMatchObject({ member_id: 'MBR-ROTATE', insured: { first_name: 'Marta' } });
    await expect(repo(newKey).latest(before.team_id, before.user_id, true)).rejects.toThrow(/data key "old"/);

    expect(await rotated.reencrypt()).toBe(1);
    expect((await stored())!.member_id.key_id).toBe('new');
    expect(await repo(newKey).latest(before.team_id, before.user_id, true)).toMatchObject({ member_id: 'MBR-ROTATE' });
    expect(await repo(newKey).reencrypt()).toBe(0);
  });
});
