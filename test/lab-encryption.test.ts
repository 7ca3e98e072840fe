import { randomBytes, randomUUID } from 'node:crypto';
import { Binary, type Db } from 'mongodb';
import { dataCipher } from '../lib/platform/config';
import { DecryptionError, FieldCipher, generateDataKey } from '../lib/platform/field-encryption';
import { createRepositories, reencryptAll } from '../lib/repositories';
import { LabOrderRepository, PATIENT_FIELDS, RESULT_FIELDS } from '../lib/labs/orders-store';
import type { LabOrderDoc, LabResultsDoc } from '../lib/labs/model';
import { placerNumberOf } from '../lib/labs/placer-number';
import { IdempotencyKeyRepository, type IdempotencyKeyDoc } from '../lib/platform/idempotency-store';
import { eventData } from '../lib/events/model';
import {
  createTenant,
  eventually,
  startTestApp,
  teamClient,
  uniqueId,
  type HttpClient,
  type Tenant,
  type TestApp,
  ownDatabase,
  type OwnDatabase,
} from './support/harness';
import { createUser, labTestIds, orderBody, orderReaches, registrationBody } from './support/lab';
import { pdfText } from './support/pdf';
import { rawText } from './support/raw';

/**
 * Patient data of lab orders at rest: the patient's identity, contact details, addresses, consents and notes
 * on the order, the results' measurements, and the stored response of an idempotency key are encrypted field
 * by field (DATA_ENCRYPTION_KEYS); the API, the PDFs and the webhook payloads show them as before. Orders of
 * earlier versions (plaintext) stay readable and are encrypted by the start-up migration; a data key rotation
 * keeps everything readable and `reencrypt` moves it to the new key. Real app, worker, database and Temporal.
 */

let app: TestApp;
let tenant: Tenant;
let client: HttpClient;
let tests: Awaited<ReturnType<typeof labTestIds>>;
let userId: string;

beforeAll(async () => {
  app = await startTestApp();
  tenant = await createTenant(app.deps, 'Lab encryption');
  client = teamClient(app, tenant);
  tests = await labTestIds(client);
  userId = await createUser(client);
});
afterAll(async () => {
  await app.close();
});

/** Letters only (names allow no digits), different in every run, so finding one in a document means it leaked. */
const letters = () => Array.from(randomBytes(8), (b) => String.fromCharCode(97 + (b % 26))).join('');

/** A patient nobody else has: every value is searched for in the stored documents. */
function uniquePatient() {
  const tag = letters();
  return {
    patient_details: {
      first_name: `Zelda${tag}`,
      last_name: `Quorn${tag}`,
      dob: '1961-07-23',
      gender: 'female',
      phone_number: `+1415${String(1_000_000 + Math.floor(Math.random() * 8_999_999))}`,
      email: `zq.${tag}@example.org`,
    },
    patient_address: {
      receiver_name: `Receiver ${tag}`,
      first_line: `77 ${tag} Lane`,
      second_line: `Unit ${tag}`,
      city: `Town${tag}`,
      state: 'OR',
      zip: '97201',
      country: 'US',
    },
    notes: `note ${tag}`,
    clinical_notes: `clinical ${tag}`,
  };
}
type Patient = ReturnType<typeof uniquePatient>;

/** What must not appear in a stored document in plaintext. */
const secretsOf = (p: Patient) => [
  p.patient_details.first_name,
  p.patient_details.last_name,
  p.patient_details.dob,
  p.patient_details.email,
  p.patient_details.phone_number,
  p.patient_address.first_line,
  p.patient_address.second_line,
  p.patient_address.city,
  p.patient_address.receiver_name,
  p.notes,
  p.clinical_notes,
];

function expectNoPlaintext(doc: unknown, secrets: string[]) {
  expect(doc).toBeTruthy();
  const text = rawText(doc);
  for (const secret of secrets) expect({ secret, found: text.includes(secret) }).toEqual({ secret, found: false });
}

/** The stored shape of an encrypted value, under the key `keyId`. */
function expectEncrypted(value: unknown, keyId: string) {
  expect(value).toEqual({ key_id: keyId, iv: expect.any(Binary), tag: expect.any(Binary), ciphertext: expect.any(Binary) });
}

/** A collection as stored, without the repository (documents exactly as the driver returns them). */
const rawCollection = (db: Db, name: string) => db.collection<{ _id: string; [field: string]: any }>(name);
const raw = (db: Db, collection: string, id: string) => rawCollection(db, collection).findOne({ _id: id });
const pdf = async (path: string) => {
  const res = await fetch(`${app.url}${path}`, { headers: { 'x-service-api-key': tenant.teamKey } });
  expect(res.status).toBe(200);
  return pdfText(Buffer.from(await res.arrayBuffer()));
};
const simulate = (orderId: string, finalStatus: string) => client.post(`/v3/order/${orderId}/test?final_status=${finalStatus}&delay=0`, {});

describe('patient data is encrypted at rest and shown as before', () => {
  test('an order created through the API: no patient data in the stored order, its results or its idempotency key; API, list, webhook payload and PDFs show it', async () => {
    const p = uniquePatient();
    const currentKey = dataCipher(app.deps.config).currentKeyId;
    const key = uniqueId('enc');
    const created = await client.post('/v3/order', { ...orderBody(userId, tests.walk_in_test), ...p }, { 'X-Idempotency-Key': key });
    expect(created.status).toBe(200);
    const order = created.body.order;
    expect(order.patient_details).toEqual(p.patient_details);
    expect(order.patient_address).toMatchObject({ ...p.patient_address, country: 'United States' });
    expect(order.notes).toBe(p.notes);

    // The stored order: patient fields encrypted under the current key, the rest plain and queryable.
    const stored = await raw(app.inspect, 'lab_orders', order.id);
    expectNoPlaintext(stored, secretsOf(p));
    for (const field of ['patient_details', 'patient_address', 'consents', 'notes', 'clinical_notes']) expectEncrypted(stored![field], currentKey);
    expect(stored!.shipping_details).toBeNull(); // a walk-in test ships nothing
    expect(stored).toMatchObject({
      team_id: tenant.teamId,
      user_id: userId,
      sample_id: order.sample_id,
      method: 'walk_in_test',
      physician: { last_name: 'House' },
    });

    // The replayable response of the idempotency key holds the whole order: encrypted too; the replay shows it.
    const keyDoc = await rawCollection(app.inspect, 'idempotency_keys').findOne({ resource_id: order.id });
    expectNoPlaintext(keyDoc, secretsOf(p));
    expectEncrypted(keyDoc!.response_body, currentKey);
    const replay = await client.post('/v3/order', { ...orderBody(userId, tests.walk_in_test), ...p }, { 'X-Idempotency-Key': key });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body.order.patient_details).toEqual(p.patient_details);

    // Reads: by id, in the list (with a filter), in the webhook payload of its events.
    expect((await client.get(`/v3/order/${order.id}`)).body.patient_details).toEqual(p.patient_details);
    const listed = (await client.get(`/v3/orders?user_id=${userId}&order_ids=${order.id}&status=ordered&status=requisition_created`)).body.orders;
    expect(listed.map((o: { id: string }) => o.id)).toEqual([order.id]);
    expect(listed[0].patient_details).toEqual(p.patient_details);
    expect(listed[0].clinical_notes).toBe(p.clinical_notes);
    await orderReaches(client, order.id, 'requisition_created');
    // The stored event (its signed body carries the order) is encrypted too; the store reads it back whole.
    const storedEvent = await eventually(
      () => app.inspect.collection('webhook_events').findOne({ team_id: tenant.teamId, idempotency_key: `lab-order:${order.id}:event:1` }),
      10000,
      'the order.created event',
    );
    const eventId = storedEvent!._id as unknown as string;
    expectEncrypted(storedEvent!.body, currentKey);
    expectNoPlaintext(storedEvent, secretsOf(p));
    expect(eventData((await app.deps.repos.webhookStore.getEvent(eventId))!)).toMatchObject({
      id: order.id,
      patient_details: p.patient_details,
      notes: p.notes,
    });

    const requisition = await pdf(`/v3/order/${order.id}/requisition/pdf`);
    for (const needle of [
      p.patient_details.first_name,
      p.patient_details.last_name,
      p.patient_details.dob,
      p.patient_details.email,
      p.patient_address.first_line,
    ]) {
      expect(requisition).toContain(needle);
    }

    // Results: the measurements are encrypted; the API and the report show them.
    expect((await simulate(order.id, 'completed.walk_in_test.completed')).status).toBe(200);
    await orderReaches(client, order.id, 'completed');
    const results = (await client.get(`/v3/order/${order.id}/result`)).body;
    expect(results.results.length).toBeGreaterThan(0);
    expect(results.metadata.patient).toBe(`${p.patient_details.first_name} ${p.patient_details.last_name}`);
    const storedResults = await raw(app.inspect, 'lab_results', order.id);
    // A lab's own report PDF is sealed too; the sandbox lab sends none (null, nothing to seal).
    for (const field of RESULT_FIELDS) {
      if (field === 'lab_pdf') expect(storedResults![field] ?? null).toBeNull();
      else expectEncrypted(storedResults![field], currentKey);
    }
    expectNoPlaintext(storedResults, [results.results[0].slug, order.sample_id]);
    const report = await pdf(`/v3/order/${order.id}/result/pdf`);
    for (const needle of [p.patient_details.last_name, results.results[0].name, results.results[0].result]) expect(report).toContain(needle);
    expectNoPlaintext(await raw(app.inspect, 'lab_orders', order.id), secretsOf(p)); // still, after every workflow write
  }, 60000);

  test('a registered test kit: patient and shipping address encrypted; the API shows both', async () => {
    const p = uniquePatient();
    const res = await client.post('/v3/order/testkit/register', {
      ...registrationBody(userId),
      patient_details: p.patient_details,
      patient_address: p.patient_address,
    });
    expect(res.status).toBe(200);
    const order = res.body.order;
    const stored = await raw(app.inspect, 'lab_orders', order.id);
    expectNoPlaintext(
      stored,
      secretsOf(p).filter((s) => s !== p.notes && s !== p.clinical_notes),
    );
    for (const field of ['patient_details', 'patient_address', 'shipping_details', 'consents'])
      expectEncrypted(stored![field], dataCipher(app.deps.config).currentKeyId);
    const shown = (await client.get(`/v3/order/${order.id}`)).body;
    expect(shown.patient_details).toEqual(p.patient_details);
    expect(shown.shipping_details).toMatchObject({ first_line: p.patient_address.first_line, city: p.patient_address.city });
  });

  test('a value copied into another order does not decrypt (each is bound to its order and field)', async () => {
    const [a, b] = await Promise.all(
      [1, 2].map(async () => (await client.post('/v3/order', { ...orderBody(userId, tests.walk_in_test), ...uniquePatient() })).body.order),
    );
    const stolen = (await raw(app.inspect, 'lab_orders', a.id))!.patient_details;
    const copyId = randomUUID();
    const copy = {
      ...(await raw(app.inspect, 'lab_orders', b.id))!,
      _id: copyId,
      sample_id: uniqueId('copy'),
      placer_number: placerNumberOf(copyId),
      patient_details: stolen,
    };
    await rawCollection(app.inspect, 'lab_orders').insertOne(copy);
    await expect(app.deps.repos.labOrders.findById(copy._id)).rejects.toThrow(DecryptionError);
    await rawCollection(app.inspect, 'lab_orders').deleteOne({ _id: copy._id });
  });
});

describe('orders stored in plaintext by an earlier version', () => {
  test('are readable (API and PDF) before and after the migration, which encrypts them', async () => {
    const p = uniquePatient();
    const order = (await client.post('/v3/order', { ...orderBody(userId, tests.walk_in_test), ...p })).body.order;
    await orderReaches(client, order.id, 'requisition_created');
    // The same order as the previous version stored it: every field plain, none of the fields lab accounts brought
    // (no workflow runs for it).
    const {
      lab_account_id: _account,
      placer_number: _placer,
      icd_codes: _icd,
      aoe_answers: _aoe,
      ...earlier
    } = (await app.deps.repos.labOrders.findById(order.id))!;
    const legacy = {
      ...earlier,
      _id: randomUUID(),
      sample_id: uniqueId('legacy'),
      order_transaction_id: randomUUID(),
    };
    await rawCollection(app.inspect, 'lab_orders').insertOne({ ...legacy });
    expect(rawText(await raw(app.inspect, 'lab_orders', legacy._id))).toContain(p.patient_details.last_name);

    const before = (await client.get(`/v3/order/${legacy._id}`)).body;
    expect(before.patient_details).toEqual(p.patient_details);
    expect(await pdf(`/v3/order/${legacy._id}/requisition/pdf`)).toContain(p.patient_details.last_name);

    // What the start-up migration runs (this database ran it at its first start; the own-database test below
    // runs the migration itself).
    expect(await app.deps.repos.labOrders.reencrypt()).toBeGreaterThanOrEqual(1);
    expectNoPlaintext(await raw(app.inspect, 'lab_orders', legacy._id), secretsOf(p));
    const after = (await client.get(`/v3/order/${legacy._id}`)).body;
    expect(after.patient_details).toEqual(p.patient_details);
    // What it did not store reads as the sandbox lab, its derived placer number and no diagnoses.
    expect(after).toMatchObject({ lab_account_id: null, placer_number: placerNumberOf(legacy._id), icd_codes: [], aoe_answers: [] });
    expect(after.patient_address).toEqual(before.patient_address);
    expect(await pdf(`/v3/order/${legacy._id}/requisition/pdf`)).toContain(p.patient_details.last_name);
  });
});

describe('data key rotation and the start-up migration (own database)', () => {
  let own: OwnDatabase;
  let db: Db;
  const keyA = generateDataKey('A');
  const keyB = generateDataKey('B');
  const repo = (keys: string) => new LabOrderRepository(db, FieldCipher.fromSpec(keys));
  const keyRepo = (keys: string) => new IdempotencyKeyRepository(db, FieldCipher.fromSpec(keys));
  /** A completed order of the running stack, as the repository reads it (plaintext), and its results. */
  let template: { order: LabOrderDoc; results: LabResultsDoc; patient: Patient };

  /** A copy of the template order under a new id, with its results and a completed idempotency key. */
  function aggregate() {
    const id = randomUUID();
    const order: LabOrderDoc = { ...template.order, _id: id, sample_id: uniqueId('rot'), order_transaction_id: randomUUID() };
    const results: LabResultsDoc = { ...template.results, _id: id };
    const key: IdempotencyKeyDoc = {
      _id: uniqueId('rot-key'),
      team_id: order.team_id,
      route: 'POST /v3/order',
      request_sha256: 'x',
      resource_id: id,
      state: 'done',
      claim: randomUUID(),
      claimed_at: new Date(),
      response_status: 200,
      response_body: { order: { id, patient_details: order.patient_details } },
      created_at: new Date(),
      completed_at: new Date(),
    };
    return { order, results, key };
  }
  type Aggregate = ReturnType<typeof aggregate>;

  async function write(keys: string, a: Aggregate) {
    await repo(keys).insert(a.order);
    await repo(keys).saveResults(a.results);
    await keyRepo(keys).claim(a.key);
  }

  /** The key ids of every encrypted field of the aggregate, as stored. */
  async function keyIds(a: Aggregate): Promise<string[]> {
    const order = await raw(db, 'lab_orders', a.order._id);
    const results = await raw(db, 'lab_results', a.order._id);
    const key = await raw(db, 'idempotency_keys', a.key._id);
    return [...PATIENT_FIELDS.map((f) => order![f]), ...RESULT_FIELDS.map((f) => results![f]), key!.response_body]
      .filter((v) => v !== null && v !== undefined)
      .map((v) => v.key_id ?? 'plaintext');
  }

  async function expectReadable(keys: string, a: Aggregate) {
    expect(await repo(keys).findById(a.order._id)).toEqual(a.order);
    expect(await repo(keys).findResults(a.order.team_id, a.order._id)).toEqual(a.results);
    expect(await keyRepo(keys).claim(a.key)).toEqual({ existing: a.key });
  }

  beforeAll(async () => {
    const p = uniquePatient();
    const created = (await client.post('/v3/order', { ...orderBody(userId, tests.at_home_phlebotomy), ...p })).body.order;
    await orderReaches(client, created.id, 'requisition_created');
    await simulate(created.id, 'completed.at_home_phlebotomy.completed');
    await orderReaches(client, created.id, 'completed');
    template = {
      order: (await app.deps.repos.labOrders.findById(created.id))!,
      results: (await app.deps.repos.labOrders.findResults(tenant.teamId, created.id))!,
      patient: p,
    };
    // A database of its own: re-encrypting under test keys must not touch what the worker reads.
    own = await ownDatabase(app, 'labenc');
    db = own.db;
  }, 60000);
  afterAll(() => own?.drop());

  test('records written under key A read under "B,A"; reencrypt moves them to B; then A can go', async () => {
    for (const name of ['lab_orders', 'lab_results', 'idempotency_keys']) await db.collection(name).deleteMany({}); // count this test's documents only
    const old = aggregate();
    await write(keyA, old);
    expect(new Set(await keyIds(old))).toEqual(new Set(['A']));

    // Rotation step 1: B first, A kept for reading. New writes use B; old records read as before.
    const rotated = `${keyB},${keyA}`;
    await expectReadable(rotated, old);
    const fresh = aggregate();
    await write(rotated, fresh);
    expect(new Set(await keyIds(fresh))).toEqual(new Set(['B']));
    // Without A, the old records cannot be read: the error names the missing key.
    await expect(repo(keyB).findById(old.order._id)).rejects.toThrow(/data key "A"/);

    // An order erased under A stays erased through the rewrite (nothing brings its patient data back).
    const erased = aggregate();
    await write(keyA, erased);
    await repo(keyA).erasePatientData(erased.order._id);

    // Rotation step 2: `npm run reencrypt` (scripts/reencrypt.ts runs exactly this).
    const outcome = await reencryptAll(createRepositories(db, FieldCipher.fromSpec(`${keyB},${keyA}`)));
    // `old`: its order and results, and its key; `erased`: its order (the emptied consents are encrypted too), and its key.
    expect(outcome.labOrders).toBe(3);
    expect(outcome.idempotencyKeys).toBe(2);
    for (const a of [old, fresh]) expect(new Set(await keyIds(a))).toEqual(new Set(['B']));

    // Rotation step 3: A removed. Everything reads; running again changes nothing.
    const onlyB = repo(keyB);
    for (const a of [old, fresh]) await expectReadable(keyB, a);
    expect(await onlyB.findById(erased.order._id)).toMatchObject({ patient_details: null, patient_address: null, notes: null, consents: [] });
    expect(await onlyB.findResults(erased.order.team_id, erased.order._id)).toBeNull();
    expect(await onlyB.reencrypt()).toBe(0);
    expect(await keyRepo(keyB).reencrypt()).toBe(0);
  });
});
