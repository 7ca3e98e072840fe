import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';
import { Binary, type Db } from 'mongodb';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { ConfigError, dataCipher, loadConfig } from '../lib/platform/config';
import { DecryptionError, FieldCipher, generateDataKey, parseDataKeys } from '../lib/platform/field-encryption';
import { WebhookRepository, type EndpointDoc } from '../lib/events/destinations/webhook/endpoints-store';
import { generateSecret } from '../lib/events/destinations/webhook/signing';
import { WebhookStore } from '../lib/events/store';
import { createTenant, managementClient, startTestApp, type HttpClient, type Tenant, type TestApp, ownDatabase, type OwnDatabase } from './support/harness';
import { startReceiver, type ReceivedRequest, type Receiver } from './support/receiver';
import { rawText } from './support/raw';

/**
 * Webhook signing secrets at rest: encrypted with AES-256-GCM under DATA_ENCRYPTION_KEYS (never plaintext in the
 * database), readable across a data key rotation; and secret rotation that keeps every secret inside its overlap, with a capped rate (429).
 * Real app, worker (scripts/test.mjs), database and receivers.
 */

const ROTATIONS_PER_DAY = 12;
const DAY_MS = 24 * 60 * 60 * 1000;

let app: TestApp;
let tenant: Tenant;
let mgmt: HttpClient;
let base: string;
const receivers: Receiver[] = [];

beforeAll(async () => {
  // The default 24 h overlap, and a cap above the 10 secrets the previous version kept.
  app = await startTestApp({ WEBHOOK_SECRET_ROTATIONS_PER_DAY: ROTATIONS_PER_DAY });
  tenant = await createTenant(app.deps, 'Webhook secrets');
  mgmt = managementClient(app, tenant);
  base = `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`;
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await app.close();
});

async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}

async function createWebhook(url: string, extra: Record<string, unknown> = {}): Promise<{ id: string; secret: string }> {
  const res = await mgmt.post(base, { url, ...extra });
  expect(res.status).toBe(200);
  const secret = await mgmt.get(`${base}/${res.body.id}/secret`);
  expect(secret.status).toBe(200);
  return { id: res.body.id, secret: secret.body.key };
}

/** Sends a test event to the endpoint and returns the request its receiver got. */
async function testDelivery(rx: Receiver, webhookId: string): Promise<ReceivedRequest> {
  const before = rx.requests.length;
  const sent = await mgmt.post(`${base}/${webhookId}/test`, {});
  expect(sent.status).toBe(202);
  return (await rx.waitFor(before + 1))[before];
}

const signaturesOf = (r: ReceivedRequest) => String(r.headers['webhook-signature']).split(' ');
/** Whether `secret` produced one of the request's signatures (standardwebhooks accepts any one match). */
const signs = (secret: string, r: ReceivedRequest) => {
  try {
    new StandardWebhook(secret).verify(r.body, r.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
};

/** The stored document exactly as the driver returns it (no repository in between). */
const rawEndpoint = (db: Db, id: string) => db.collection<Record<string, any>>('webhook_endpoints').findOne({ _id: id as any });

/** The raw document as text, binary fields included (base64), to search for any trace of a secret. */
describe('configuration of the data encryption keys', () => {
  test('production refuses to start without DATA_ENCRYPTION_KEYS; a malformed key is refused without echoing it', () => {
    expect(() => loadConfig({ DEPLOYMENT_ENVIRONMENT: 'production' })).toThrow(/DATA_ENCRYPTION_KEYS: required in production/);
    expect(() => loadConfig({ DEPLOYMENT_ENVIRONMENT: 'production' })).toThrow(ConfigError);
    expect(() =>
      loadConfig({
        DEPLOYMENT_ENVIRONMENT: 'production',
        DATA_ENCRYPTION_KEYS: generateDataKey('k1'),
        PUBLIC_BASE_URL: 'https://api.example.com',
        METRICS_TOKEN: 'metrics-token',
      }),
    ).not.toThrow();

    const short = `k1:${randomBytes(16).toString('base64')}`;
    let message = '';
    try {
      loadConfig({ DATA_ENCRYPTION_KEYS: short });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      message = (err as Error).message;
    }
    expect(message).toMatch(/DATA_ENCRYPTION_KEYS .*"k1" is 16 bytes; AES-256 needs 32/);
    expect(message).not.toContain(short.slice(3));
    expect(() => loadConfig({ DATA_ENCRYPTION_KEYS: `${generateDataKey('a')},${generateDataKey('a')}` })).toThrow(/appears twice/);
  });

  test('sandbox processes need a key too (npm run dev and npm test generate one); the first key is the current one', () => {
    expect(() => dataCipher(loadConfig({}))).toThrow(ConfigError);
    const keys = `${generateDataKey('new')}, ${generateDataKey('old')}`;
    expect(parseDataKeys(keys).map((k) => k.id)).toEqual(['new', 'old']);
    expect(dataCipher(loadConfig({ DATA_ENCRYPTION_KEYS: keys })).currentKeyId).toBe('new');
  });

  test('a value does not decrypt in another context, nor after tampering', () => {
    const cipher = FieldCipher.fromSpec(generateDataKey('k'));
    const value = cipher.encrypt('whsec_abc', 'webhook_endpoints:a:secrets.key');
    expect(cipher.decryptString(value, 'webhook_endpoints:a:secrets.key')).toBe('whsec_abc');
    expect(() => cipher.decrypt(value, 'webhook_endpoints:b:secrets.key')).toThrow(DecryptionError);
    const tampered = Buffer.from(value.ciphertext.buffer);
    tampered[0] ^= 1;
    expect(() => cipher.decrypt({ ...value, ciphertext: new Binary(tampered) }, 'webhook_endpoints:a:secrets.key')).toThrow(DecryptionError);
  });
});

describe('signing secrets are encrypted at rest', () => {
  test('the stored document holds no plaintext secret; the API shows it and deliveries are signed with it', async () => {
    const rx = await receiver();
    const chosen = generateSecret();
    const hook = await createWebhook(rx.url, { secret: chosen });
    expect(hook.secret).toBe(chosen);

    const doc = await rawEndpoint(app.deps.db, hook.id);
    const text = rawText(doc);
    expect(text).not.toContain('whsec_');
    expect(text).not.toContain(chosen.slice('whsec_'.length));
    expect(doc!.secrets).toHaveLength(1);
    const stored = doc!.secrets[0].key;
    expect(Object.keys(stored).sort()).toEqual(['ciphertext', 'iv', 'key_id', 'tag']);
    expect(stored.key_id).toBe(dataCipher(app.deps.config).currentKeyId);
    for (const field of ['iv', 'tag', 'ciphertext']) expect(stored[field]).toBeInstanceOf(Binary);

    const req = await testDelivery(rx, hook.id);
    expect(signaturesOf(req)).toHaveLength(1);
    expect(signs(chosen, req)).toBe(true);
    expect(signs(generateSecret(), req)).toBe(false);
  });

  test('after a rotation the stored document still holds no plaintext, and GET secret returns the new current secret', async () => {
    const rx = await receiver();
    const hook = await createWebhook(rx.url);
    const rotated = await mgmt.post(`${base}/${hook.id}/secret/rotate`, {});
    expect(rotated.status).toBe(200);
    expect((await mgmt.get(`${base}/${hook.id}/secret`)).body.key).toBe(rotated.body.key);
    const text = rawText(await rawEndpoint(app.deps.db, hook.id));
    for (const secret of [hook.secret, rotated.body.key]) expect(text).not.toContain(secret.slice('whsec_'.length));
    expect(text).not.toContain('whsec_');
  });
});

describe('secret rotation keeps every secret inside its overlap and caps the rate', () => {
  test(`${ROTATIONS_PER_DAY} rotations in a day (3 of them concurrent): all ${ROTATIONS_PER_DAY + 1} secrets sign; one more is a 429 with Retry-After`, async () => {
    const rx = await receiver();
    const hook = await createWebhook(rx.url);
    const secrets = [hook.secret];

    // Concurrent rotations: each is written under the version it read (else read again), so none loses another's secret.
    const concurrent = await Promise.all([1, 2, 3].map(() => mgmt.post(`${base}/${hook.id}/secret/rotate`, {})));
    for (const r of concurrent) {
      expect(r.status).toBe(200);
      secrets.push(r.body.key);
    }
    for (let i = concurrent.length; i < ROTATIONS_PER_DAY; i++) {
      const r = await mgmt.post(`${base}/${hook.id}/secret/rotate`, {});
      expect(r.status).toBe(200);
      secrets.push(r.body.key);
    }
    expect(new Set(secrets).size).toBe(ROTATIONS_PER_DAY + 1);
    expect((await mgmt.get(`${base}/${hook.id}/secret`)).body.key).toBe(secrets[secrets.length - 1]);

    const limited = await mgmt.post(`${base}/${hook.id}/secret/rotate`, {});
    expect(limited.status).toBe(429);
    expect(limited.body.detail).toMatch(
      new RegExp(`rotated ${ROTATIONS_PER_DAY} times in the last 24 hours.*next rotation is allowed at \\d{4}-\\d\\d-\\d\\dT`),
    );
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(DAY_MS / 1000 - 600);
    expect(retryAfter).toBeLessThanOrEqual(DAY_MS / 1000);
    // The refused rotation changed nothing.
    expect((await mgmt.get(`${base}/${hook.id}/secret`)).body.key).toBe(secrets[secrets.length - 1]);

    // One signature per live secret (more than the 10 the previous version kept), each verifying.
    const req = await testDelivery(rx, hook.id);
    expect(signaturesOf(req)).toHaveLength(ROTATIONS_PER_DAY + 1);
    for (const secret of secrets) expect(signs(secret, req)).toBe(true);
  });
});

describe('a change to an endpoint applies to every delivery sent after the API answered', () => {
  // The delivery run in flight read the endpoint before the change; the API answers once no such run is sending
  // (lib/events/dispatcher-commands.ts, destinationChanged), so the next delivery is sent with the change.
  const held = (ms: number) => (_r: ReceivedRequest, index: number) => (index === 0 ? { status: 200, delayMs: ms } : { status: 200 });

  test('rotate the secret while a delivery is in flight, then send a test event at once: it is signed with the new secret', async () => {
    const rx = await receiver();
    const hook = await createWebhook(rx.url);
    rx.behave(held(300));
    const first = mgmt.post(`${base}/${hook.id}/test`, {});
    await rx.waitFor(1); // a delivery run is sending, with the endpoint as it read it
    const rotated = await mgmt.post(`${base}/${hook.id}/secret/rotate`, {});
    expect(rotated.status).toBe(200);
    const sent = await mgmt.post(`${base}/${hook.id}/test`, {});
    expect(sent.status).toBe(202);
    expect((await first).status).toBe(202);
    const [, second] = await rx.waitFor(2);
    expect(second.headers['webhook-id']).toBe(sent.body.event_id);
    expect(signs(rotated.body.key, second)).toBe(true);
    expect(signs(hook.secret, second)).toBe(true); // the old secret is inside its overlap: it signs too
  });

  test('change the custom headers while a delivery is in flight, then send a test event at once: it carries the new headers', async () => {
    const rx = await receiver();
    const hook = await createWebhook(rx.url);
    rx.behave(held(300));
    const first = mgmt.post(`${base}/${hook.id}/test`, {});
    await rx.waitFor(1);
    expect((await mgmt.put(`${base}/${hook.id}/headers`, { headers: { 'x-tenant': 'after' } })).status).toBe(200);
    const sent = await mgmt.post(`${base}/${hook.id}/test`, {});
    expect((await first).status).toBe(202);
    const [, second] = await rx.waitFor(2);
    expect(second.headers['webhook-id']).toBe(sent.body.event_id);
    expect(second.headers['x-tenant']).toBe('after');
  });
});

describe('stored secrets across data key rotation and versions (own database)', () => {
  let own: OwnDatabase;
  let db: Db;
  const oldKey = generateDataKey('old');
  const newKey = generateDataKey('new');
  const repo = (keys: string) => new WebhookRepository(db, FieldCipher.fromSpec(keys));

  const endpoint = (secret: string, created = new Date()): EndpointDoc => ({
    _id: randomUUID(),
    team_id: 'team-secrets',
    url: 'https://example.com/hook',
    description: '',
    filter_types: [],
    disabled: false,
    disabled_reason: null,
    rate_limit: null,
    headers: {},
    secrets: [{ key: secret, created_at: created, expires_at: null }],
    failing_since: null,
    created_at: created,
    updated_at: created,
  });

  beforeAll(async () => {
    // A database of its own: re-encrypting under test keys must not touch the endpoints the worker delivers to.
    own = await ownDatabase(app, 'secrets');
    db = own.db;
  });
  afterAll(() => own?.drop());

  test('after a new key becomes current, old records stay readable; `npm run reencrypt` moves them to the new key', async () => {
    const secret = generateSecret();
    const before = endpoint(secret);
    await repo(oldKey).createEndpoint(before);
    expect((await rawEndpoint(db, before._id))!.secrets[0].key.key_id).toBe('old');

    // Rotation step 1: the new key first, the old one kept for reading.
    const rotated = repo(`${newKey},${oldKey}`);
    expect((await rotated.findEndpoint(before.team_id, before._id))!.secrets[0].key).toBe(secret);
    const after = endpoint(generateSecret());
    await rotated.createEndpoint(after);
    expect((await rawEndpoint(db, after._id))!.secrets[0].key.key_id).toBe('new');
    // Without the old key the old record cannot be read: the error names the missing key.
    await expect(repo(newKey).getEndpoint(before._id)).rejects.toThrow(/data key "old"/);

    // Rotation step 2: the re-encryption script, as an operator runs it (compiled, real process).
    const output = await runScript('scripts/reencrypt.js', { MONGO_DB: own.name, DATA_ENCRYPTION_KEYS: `${newKey},${oldKey}` });
    expect(JSON.parse(output.trim().split('\n').pop()!)).toMatchObject({ current_key_id: 'new', rewritten: { webhooks: 1 } });
    const ids = [before._id, after._id];
    for (const id of ids) expect((await rawEndpoint(db, id))!.secrets[0].key.key_id).toBe('new');

    // Rotation step 3: the old key removed; everything still reads. Running again changes nothing.
    expect((await repo(newKey).getEndpoint(before._id))!.secrets[0].key).toBe(secret);
    expect(await repo(newKey).reencrypt()).toBe(0);
  });

  test('event bodies are stored encrypted; plaintext bodies of earlier versions read as they are until reencrypt', async () => {
    const store = (keys: string) => new WebhookStore(db, FieldCipher.fromSpec(keys));
    const event = (id: string) => ({
      _id: id,
      team_id: 'team-secrets',
      idempotency_key: id,
      event_type: 'labtest.order.created',
      user_id: null,
      client_user_id: null,
      body: JSON.stringify({ event_type: 'labtest.order.created', data: { patient_details: { last_name: 'Abernathy-Quist' } } }),
      created_at: new Date(),
      only_destination_id: null,
    });
    const sealed = event(randomUUID());
    await store(oldKey).insertEvents([sealed]);
    expect(rawText(await db.collection('webhook_events').findOne({ _id: sealed._id as never }))).not.toContain('Abernathy-Quist');
    const legacy = event(randomUUID());
    await db.collection('webhook_events').insertOne({ ...legacy } as never);

    const rotated = store(`${newKey},${oldKey}`);
    for (const e of [sealed, legacy]) expect((await rotated.getEvent(e._id))!.body).toBe(e.body);
    expect(await rotated.reencrypt()).toBe(2);
    for (const e of [sealed, legacy]) {
      expect((await db.collection('webhook_events').findOne({ _id: e._id as never }))!.body.key_id).toBe('new');
      expect((await store(newKey).getEvent(e._id))!.body).toBe(e.body);
    }
    expect(await store(newKey).reencrypt()).toBe(0);
  });

  test('the cap counts rotations in a sliding 24 h; expired secrets are dropped, live ones all kept', async () => {
    const t0 = new Date('2030-01-01T00:00:00Z');
    const repository = repo(oldKey);
    const hook = endpoint(generateSecret(), t0);
    await repository.createEndpoint(hook);
    const rotate = (at: Date, overlapMs = DAY_MS) => repository.rotateSecret(hook.team_id, hook._id, generateSecret(), { overlapMs, maxPerWindow: 3, now: at });
    const hours = (h: number) => new Date(t0.getTime() + h * 3600_000);

    for (const h of [1, 2, 3]) expect(await rotate(hours(h))).toHaveProperty('endpoint');
    expect(await rotate(hours(4))).toEqual({ rate_limited: { next_allowed_at: hours(25) } });
    expect(await rotate(new Date(hours(25).getTime() - 1))).toEqual({ rate_limited: { next_allowed_at: hours(25) } });
    const secretsAt = async (at: Date) => {
      const outcome = await rotate(at);
      if (!outcome || !('endpoint' in outcome)) throw new Error(`rotation at ${at.toISOString()} was refused`);
      return outcome.endpoint.secrets;
    };
    // At 25 h the first rotation has left the window. The creation secret, replaced at 1 h, expired at 25 h:
    // dropped; the ones replaced at 2 h and 3 h (expiring at 26 h, 27 h) and the one current until now are kept.
    const at25 = await secretsAt(hours(25));
    expect(at25).toHaveLength(4);
    expect(at25.map((s) => s.key)).not.toContain(hook.secrets[0].key);
    expect(at25.filter((s) => s.expires_at === null)).toHaveLength(1);
    // At 27 h (two rotations in the window): those of 26 h and 27 h are gone too.
    expect(await secretsAt(hours(27))).toHaveLength(3);
    expect(await repository.rotateSecret(hook.team_id, 'missing', generateSecret(), { overlapMs: 1, maxPerWindow: 3 })).toBeNull();
  });
});

/** Runs a compiled script with the test stack's environment plus `env`; resolves with its stdout. */
function runScript(entry: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.resolve(__dirname, '..', 'dist', entry)], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${entry} exited ${code}: ${err}`))));
  });
}
