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
