import { sampleKey, WearableDataRepository, type SampleDoc } from '../lib/repositories/wearable-data';
import { indexBoundFields, indexesUsed } from './support/explain';
import { ownDatabase, startTestApp, type OwnDatabase, type TestApp } from './support/harness';

/**
 * Timeseries samples are stored in day buckets (one document per user, resource, provider, source type and UTC
 * day; architecture rule 2). These tests hold the bucket store to the rules of single documents: concurrent
 * writers lose nothing, a later value replaces its timestamp's slot, reads come from the index, and the
 * one-document-per-sample collection of earlier versions moves into buckets once.
 */
let app: TestApp;
let own: OwnDatabase;
let repo: WearableDataRepository;

beforeAll(async () => {
  app = await startTestApp();
  own = await ownDatabase(app, 'buckets');
  repo = new WearableDataRepository(own.db);
  await repo.ensureIndexes();
});
afterAll(async () => {
  await own.drop();
  await app.close();
});

const DAY = '2026-03-10';
function sample(userId: string, minute: number, value: number, ingestKey = 'k1'): SampleDoc {
  const timestamp = new Date(Date.parse(`${DAY}T00:00:00Z`) + minute * 60_000);
  const now = new Date();
  return {
    _id: sampleKey(userId, 'heartrate', 'oura', 'ring', timestamp),
    team_id: 'team',
    user_id: userId,
    resource: 'heartrate',
    provider: 'oura',
    source_type: 'ring',
    timestamp,
    value,
    unit: 'bpm',
    type: null,
    timezone_offset: 0,
    ingest_key: ingestKey,
    change: 'created',
    created_at: now,
    updated_at: now,
  };
}
const replaceIfChanged = (stored: SampleDoc, incoming: SampleDoc) => (stored.value === incoming.value ? null : { ...incoming, change: 'updated' as const });
const read = (userId: string) =>
  repo.findSamples({ teamId: 'team', userId, resource: 'heartrate', from: new Date(`${DAY}T00:00:00Z`), to: new Date(`${DAY}T23:59:59.999Z`) });

test('a day of minute samples is one document; a later value replaces its slot; a repeat changes nothing', async () => {
  const day = Array.from({ length: 1440 }, (_, m) => sample('u-day', m, 60 + (m % 40)));
  const first = await repo.writeSlots(day, replaceIfChanged);
  expect(first.filter((w) => w.outcome === 'created')).toHaveLength(1440);
  expect(await repo.buckets.countDocuments({ user_id: 'u-day' })).toBe(1);

  const again = await repo.writeSlots(day, replaceIfChanged);
  expect(again.every((w) => w.outcome === 'unchanged')).toBe(true);
  const revised = await repo.writeSlots([sample('u-day', 600, 150, 'k2')], replaceIfChanged);
  expect(revised.map((w) => w.outcome)).toEqual(['updated']);

  const samples = await read('u-day');
  expect(samples).toHaveLength(1440);
  expect(samples.map((s) => s.timestamp.getTime())).toEqual(day.map((s) => s.timestamp.getTime()));
  expect(samples[600]).toMatchObject({ value: 150, ingest_key: 'k2', _id: day[600]._id, user_id: 'u-day', source_type: 'ring' });
  expect(samples[599].value).toBe(day[599].value);
});

test('20 writers of one day bucket at once: every sample lands (each write is conditional on the version it read)', async () => {
  const writers = Array.from({ length: 20 }, (_, w) => repo.writeSlots(Array.from({ length: 10 }, (_, i) => sample('u-race', w * 10 + i, 70 + w)), replaceIfChanged));
  const results = await Promise.all(writers);
  expect(results.flat().filter((w) => w.outcome === 'created')).toHaveLength(200);
  expect(await read('u-race')).toHaveLength(200);
  const bucket = await repo.buckets.findOne({ user_id: 'u-race' });
  expect(Object.keys(bucket!.samples)).toHaveLength(200);
  expect(bucket!.version).toBe(20); // one insert and 19 updates, none lost
});

test('two writers of one timestamp at once: one value wins, stored whole, and each writer was told what it did', async () => {
  await repo.writeSlots([sample('u-same', 5, 50)], replaceIfChanged);
  const [a, b] = await Promise.all([repo.writeSlots([sample('u-same', 5, 51)], replaceIfChanged), repo.writeSlots([sample('u-same', 5, 52)], replaceIfChanged)]);
  expect([a[0].outcome, b[0].outcome]).toEqual(['updated', 'updated']);
  const [stored] = await read('u-same');
  expect([51, 52]).toContain(stored.value);
  expect((await repo.buckets.findOne({ user_id: 'u-same' }))!.version).toBe(3);
});

test('reads select the buckets of the range through the index', async () => {
  const plan = await repo.buckets
    .find({ team_id: 'team', user_id: 'u-day', resource: 'heartrate', day: { $gte: new Date(`${DAY}T00:00:00Z`), $lte: new Date(`${DAY}T00:00:00Z`) } })
    .sort({ day: 1 })
    .explain('queryPlanner');
  expect(indexesUsed(plan)).toEqual(['team_id_1_user_id_1_resource_1_day_1']);
  expect(indexBoundFields(plan)).toEqual(expect.arrayContaining(['day', 'resource', 'team_id', 'user_id']));
});

test('samples stored one per document by earlier versions move into buckets once, never over a newer value', async () => {
  const legacy = await ownDatabase(app, 'legacy_samples');
  try {
    const older = new WearableDataRepository(legacy.db);
    const docs = Array.from({ length: 30 }, (_, m) => sample('u-old', m, 80));
    await legacy.db.collection('samples').insertMany(docs as never[]);
    // Written by this version before the move ran (say, by another process): kept over the old value.
    await older.writeSlots([sample('u-old', 3, 99, 'new')], replaceIfChanged);
    await older.ensureIndexes();
    const moved = await older.findSamples({ teamId: 'team', userId: 'u-old', resource: 'heartrate', from: new Date(`${DAY}T00:00:00Z`), to: new Date(`${DAY}T23:59:59Z`) });
    expect(moved).toHaveLength(30);
    expect(moved.map((s) => s._id)).toEqual(docs.map((d) => d._id));
    expect(moved[3]).toMatchObject({ value: 99, ingest_key: 'new' });
    expect(moved[4]).toMatchObject({ value: 80, ingest_key: 'k1', unit: 'bpm', timezone_offset: 0 });
    expect(await legacy.db.listCollections({ name: 'samples' }).toArray()).toEqual([]);
  } finally {
    await legacy.drop();
  }
});

test('a write reports its slots in the order given, bucket by bucket, whatever order the buckets finished in', async () => {
  const days = [2, 0, 1].map((d) => sample('u-order', d * 1440 + 7, 60)); // three days, the first given is the latest
  const writes = await repo.writeSlots(days, replaceIfChanged);
  expect(writes.map((w) => w.sample._id)).toEqual(days.map((d) => d._id));
  const again = await repo.writeSlots([...days].reverse(), replaceIfChanged);
  expect(again.map((w) => w.sample._id)).toEqual([...days].reverse().map((d) => d._id));
});
