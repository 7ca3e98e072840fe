import { connectMongo, type Mongo } from '../lib/platform/database/mongo';
import { keysetFilter, walksIdIndex } from '../lib/platform/database/pages';
import { detectStore, pageStrategy, useStore } from '../lib/platform/database/store-strategy';

/**
 * The page strategy is chosen by the store the process is connected to (buildInfo), in one place: on the embedded
 * store (FerretDB + DocumentDB) every `_id` page is bounded and dense lists walk the `_id` index; on MongoDB 7 the
 * list's compound index serves each page as the product sends it, without sentinel, hint or probe.
 */
let mongo: Mongo;
beforeAll(async () => {
  mongo = await connectMongo(process.env.MONGO_URL!, `strategy_${Date.now()}`);
});
afterAll(async () => {
  useStore(await detectStore(mongo.db));
  await mongo.db.dropDatabase();
  await mongo.close();
});

test('connecting to the embedded store (FerretDB names itself in buildInfo) picks the DocumentDB strategy', async () => {
  const info = await mongo.db.admin().command({ buildInfo: 1 });
  expect(info.ferretdb).toBeDefined();
  expect(await detectStore(mongo.db)).toBe('documentdb');
  expect(pageStrategy().store).toBe('documentdb');
  expect(keysetFilter({ team_id: 't' }, -1)).toEqual({ team_id: 't', _id: { $lt: '~' } });
});

test('on MongoDB a first page carries no sentinel and no list walks the _id index; a later page is bounded by its cursor', async () => {
  const coll = mongo.db.collection('strategy_probe');
  await coll.insertOne({ _id: 'x' } as never);
  useStore('mongodb');
  expect(keysetFilter({ team_id: 't' }, -1)).toEqual({ team_id: 't' });
  expect(keysetFilter({ team_id: 't' }, 1, 'abc')).toEqual({ team_id: 't', _id: { $gt: 'abc' } });
  expect(await walksIdIndex(coll, 1_000_000)).toBe(false);
  useStore('documentdb');
  expect(await walksIdIndex(coll, 1)).toBe(true); // the whole collection matches: the _id walk
});

test('the migration machinery (runOnce, kept for the first real migration) runs a migration once, however many processes start together', async () => {
  const { runOnce } = await import('../lib/platform/database/migrations');
  let runs = 0;
  const migrate = async () => {
    runs++;
  };
  await Promise.all([runOnce(mongo.db, 'probe', migrate), runOnce(mongo.db, 'probe', migrate)]);
  await runOnce(mongo.db, 'probe', migrate);
  // Two that start together may both run it (a migration must be idempotent); a later start-up never does.
  expect(runs).toBeGreaterThanOrEqual(1);
  expect(runs).toBeLessThanOrEqual(2);
  expect(await mongo.db.collection('migrations').countDocuments({ _id: 'probe' as never })).toBe(1);
});

describe('a historical pull state is written only by the newest attempt', () => {
  const state = (status: 'in_progress' | 'success' | 'retrying', connectionId = 'conn-new') => ({
    _id: 'pull-1',
    team_id: 't',
    user_id: 'u',
    provider: 'oura',
    resource: 'sleep',
    connection_id: connectionId,
    status,
    range_start: null,
    range_end: null,
    timeline: { scheduled_at: null, started_at: null, ended_at: null },
    days_requested: [],
    data_days: [],
    attempts: 1,
    error_details: null,
    trace_id: null,
    last_attempt: null,
    oldest_data: null,
    newest_data: null,
    sent_count: 0,
    updated_at: new Date(),
  });

  test('an attempt Temporal superseded, or a pull of an earlier connection, cannot overwrite a newer state; the newest wins whatever the order', async () => {
    const { HistoricalPullRepository } = await import('../lib/wearables/historical-pulls-store');
    const repo = new HistoricalPullRepository(mongo.db);
    // The retry (scheduled at 2,000) wrote success; the first attempt (scheduled at 1,000), still running, writes late.
    expect(await repo.save(2_000, state('success'))).toBe(true);
    expect(await repo.save(1_000, state('retrying', 'conn-old'))).toBe(false);
    expect(await repo.get('pull-1')).toMatchObject({ status: 'success', connection_id: 'conn-new', fence: 2_000 });
    // The same attempt writes again (in progress, then done); a later attempt takes over.
    expect(await repo.save(2_000, state('success'))).toBe(true);
    expect(await repo.save(3_000, state('in_progress'))).toBe(true);
    // Concurrent writers: the newest attempt's state stays, in either order.
    await Promise.all([repo.save(5_000, state('success')), repo.save(4_000, state('retrying'))]);
    expect(await repo.get('pull-1')).toMatchObject({ status: 'success', fence: 5_000 });
  });
});
