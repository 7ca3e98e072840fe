import { randomUUID } from 'node:crypto';
import { FieldCipher } from '../lib/platform/field-encryption';
import { createRepositories, ensureIndexes } from '../lib/repositories';
import type { Retention } from '../lib/platform/database/indexes';
import { ownDatabase, startTestApp, type OwnDatabase, type TestApp } from './support/harness';

/**
 * "Expire N after field X" is a TTL index: the database deletes the documents itself (every minute, on MongoDB
 * and on DocumentDB). Here every retention is shortened to one second on a database of the test's own; what is
 * past it goes, what is not (younger documents, a pending delivery) stays.
 */
const SHORT: Retention = {
  idempotencyKeys: 1,
  webhookHistory: 1,
  linkTokensAfterExpiry: 1,
  sdkTokensAfterExpiry: 1,
  workerHeartbeats: 1,
  auditLog: 1,
  userTombstones: 1,
  endedConnections: 1,
  dispatcherMarks: 1,
  providerBudgetWindows: 1,
  labInboundMessages: 1,
  importUploads: 1,
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('retention by TTL index', () => {
  let app: TestApp;
  let own: OwnDatabase;

  beforeAll(async () => {
    app = await startTestApp();
    own = await ownDatabase(app, 'retention');
  });
  afterAll(async () => {
    await own.drop();
    await app.close();
  });

  it('creates each TTL index with the configured retention, and changes it in place when that changes', async () => {
    const repos = createRepositories(own.db, FieldCipher.fromSpec(process.env.DATA_ENCRYPTION_KEYS!));
    const ttlOf = async (collection: string, field: string) =>
      (await own.db.collection(collection).indexes()).find((i) => Object.keys(i.key).join() === field)?.expireAfterSeconds;
    await ensureIndexes(repos, { ...SHORT, webhookHistory: 7 * 86_400 });
    expect(await ttlOf('webhook_events', 'created_at')).toBe(7 * 86_400);
    await ensureIndexes(repos, SHORT); // a deployment that changed WEBHOOK_RETENTION_DAYS
    const expected: [string, string][] = [
      ['idempotency_keys', 'created_at'],
      ['webhook_events', 'created_at'],
      ['webhook_deliveries', 'finished_at'],
      ['webhook_attempts', 'timestamp'],
      ['link_tokens', 'expires_at'],
      ['worker_heartbeats', 'last_seen_at'],
      ['audit_log', 'created_at'],
      ['users', 'erased_at'],
      ['connections', 'deregistered_at'],
      ['connection_errors', 'deregistered_at'],
      ['webhook_dispatchers', 'active_until'],
    ];
    for (const [collection, field] of expected) expect([collection, await ttlOf(collection, field)]).toEqual([collection, 1]);
  });

  it('deletes what is past its retention and keeps the rest', async () => {
    const db = own.db;
    const past = new Date(Date.now() - 60_000);
    const future = new Date(Date.now() + 3_600_000); // stays past the test however long the TTL pass takes
    const twin = (doc: Record<string, unknown>, field: string, expired: boolean) => {
      const id = `${expired ? 'old' : 'new'}-${randomUUID()}`;
      // An event is its own idempotency key when its producer gave none (one per team and key: a unique index).
      // Users and connections are unique per team by a key of their own: each twin gets its own.
      const uniqueKeys = Object.fromEntries(['client_user_key', 'connection_key'].filter((k) => k in doc).map((k) => [k, id]));
      return { ...doc, _id: id, ...('event_type' in doc ? { idempotency_key: id } : {}), ...uniqueKeys, [field]: expired ? past : future };
    };
    const seed: [string, Record<string, unknown>, string][] = [
      ['idempotency_keys', { team_id: 't', route: 'POST /v3/order', state: 'done' }, 'created_at'],
      ['webhook_events', { team_id: 't', event_type: 'x', body: '{}' }, 'created_at'],
      ['webhook_deliveries', { team_id: 't', destination_id: 'e', status: 'succeeded' }, 'finished_at'],
      ['webhook_attempts', { team_id: 't', destination_id: 'e', attempt: 1 }, 'timestamp'],
      ['link_tokens', { team_id: 't', user_id: 'u' }, 'expires_at'],
      ['worker_heartbeats', { task_queue: 'q', host: 'h', pid: 1 }, 'last_seen_at'],
      ['audit_log', { org_id: 'o', team_id: 't', action: 'webhook.create' }, 'created_at'],
      ['users', { team_id: 't', status: 'erased', client_user_key: '' }, 'erased_at'],
      ['connections', { team_id: 't', user_id: 'u', status: 'deregistered', connection_key: '' }, 'deregistered_at'],
      ['connection_errors', { team_id: 't', user_id: 'u', error_details: { error_type: 'provider_credential_error' } }, 'deregistered_at'],
      ['webhook_dispatchers', {}, 'active_until'],
    ];
    for (const [collection, doc, field] of seed) {
      await db.collection(collection).insertMany([twin(doc, field, true), twin(doc, field, false)] as never[]);
    }
    // An active user and a live connection carry no erased_at / deregistered_at: they never expire.
    await db.collection('users').insertOne({ _id: `user-${randomUUID()}`, team_id: 't', status: 'active', client_user_key: randomUUID() } as never);
    await db
      .collection('connections')
      .insertOne({ _id: `live-${randomUUID()}`, team_id: 't', user_id: 'u2', connection_key: 'oura', status: 'connected' } as never);
    // The error of a live connection has no deregistered_at either: it stays while its connection does.
    await db
      .collection('connection_errors')
      .insertOne({ _id: `live-${randomUUID()}`, team_id: 't', user_id: 'u2', error_details: { error_type: 'provider_credential_error' } } as never);
    // Never finished, so never expires, however old.
    await db
      .collection('webhook_deliveries')
      .insertOne({ _id: `pending-${randomUUID()}`, team_id: 't', destination_id: 'e', status: 'pending', created_at: past, finished_at: null } as never);

    const remaining = async () => {
      const out: Record<string, string[]> = {};
      for (const [collection] of seed)
        out[collection] = (
          await db
            .collection(collection)
            .find({}, { projection: { _id: 1 } })
            .toArray()
        )
          .map((d) => String(d._id).split('-')[0])
          .sort();
      return out;
    };
    const deadline = Date.now() + 150_000; // a TTL pass runs every 60 s
    let now = await remaining();
    while (Object.values(now).some((ids) => ids.includes('old')) && Date.now() < deadline) {
      await sleep(2_000);
      now = await remaining();
    }
    expect(now).toEqual({
      idempotency_keys: ['new'],
      webhook_events: ['new'],
      webhook_deliveries: ['new', 'pending'],
      webhook_attempts: ['new'],
      link_tokens: ['new'],
      worker_heartbeats: ['new'],
      audit_log: ['new'],
      users: ['new', 'user'],
      connections: ['live', 'new'],
      connection_errors: ['live', 'new'],
      webhook_dispatchers: ['new'],
    });
  }, 180_000);
});
