import { sampleKey } from '../lib/wearables/sample-buckets';
import { WearableDataRepository, type SampleDoc } from '../lib/wearables/data-store';
import { indexBoundFields, indexesUsed } from './support/explain';
import { ownDatabase, startTestApp, type OwnDatabase, type TestApp } from './support/harness';

/**
 * Timeseries samples are stored in day buckets (one document per user, resource, provider, source type and UTC
 * day; architecture rule 2), each field a column parallel to the samples' offsets in the day. These tests hold
 * the bucket store to the rules of single documents: concurrent writers lose nothing, a later value replaces
 * its timestamp's, a retried batch recognises its own writes, and reads come from the index.
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

test("a day of minute samples is one document of columns; a later value replaces its timestamp's; a repeat changes nothing", async () => {
  const day = Array.from({ length: 1440 }, (_, m) => sample('u-day', m, 60 + (m % 40)));
  const first = await repo.writeSamples(day, replaceIfChanged);
  expect(first.filter((w) => w.outcome === 'created')).toHaveLength(1440);
  expect(await repo.buckets.countDocuments({ user_id: 'u-day' })).toBe(1);

  const again = await repo.writeSamples(day, replaceIfChanged);
  expect(again.every((w) => w.outcome === 'unchanged')).toBe(true);
  const revised = await repo.writeSamples([sample('u-day', 600, 150, 'k2')], replaceIfChanged);
  expect(revised.map((w) => w.outcome)).toEqual(['updated']);

  const samples = await read('u-day');
  expect(samples).toHaveLength(1440);
  expect(samples.map((s) => s.timestamp.getTime())).toEqual(day.map((s) => s.timestamp.getTime()));
  expect(samples[600]).toMatchObject({ value: 150, _id: day[600]._id, user_id: 'u-day', source_type: 'ring', unit: 'bpm', type: null, timezone_offset: 0 });
  expect(samples[599].value).toBe(day[599].value);

  // Two columns of 1,440 numbers; what every sample shares is stored once; the replaced one carries its batch's mark.
  const bucket = (await repo.buckets.findOne({ user_id: 'u-day' }))!;
  expect(bucket.offsets).toEqual(day.map((_, m) => m * 60_000));
  expect(bucket.value).toEqual(day.map((s, m) => (m === 600 ? 150 : s.value)));
  expect({ unit: bucket.unit, timezone_offset: bucket.timezone_offset, type: bucket.type }).toEqual({ unit: 'bpm', timezone_offset: 0, type: undefined });
  expect([
    (bucket.ingest_key as string[])[600],
    (bucket.change as string[])[600],
    (bucket.ingest_key as string[])[599],
    (bucket.change as string[])[599],
  ]).toEqual(['k2', 'updated', 'k1', 'created']);
  expect(bucket.version).toBe(2);
});

test('20 writers of one day bucket at once: every sample lands (each write is conditional on the version it read)', async () => {
  const writers = Array.from({ length: 20 }, (_, w) =>
    repo.writeSamples(
      Array.from({ length: 10 }, (_, i) => sample('u-race', w * 10 + i, 70 + w)),
      replaceIfChanged,
    ),
  );
  const results = await Promise.all(writers);
  expect(results.flat().filter((w) => w.outcome === 'created')).toHaveLength(200);
  expect(await read('u-race')).toHaveLength(200);
  const bucket = await repo.buckets.findOne({ user_id: 'u-race' });
  expect(bucket!.offsets).toEqual(Array.from({ length: 200 }, (_, m) => m * 60_000)); // in time order, whatever order they landed in
  expect(bucket!.version).toBe(20); // one insert and 19 updates, none lost
});

test('two writers of one timestamp at once: one value wins, stored whole, and each writer was told what it did', async () => {
  await repo.writeSamples([sample('u-same', 5, 50)], replaceIfChanged);
  const [a, b] = await Promise.all([
    repo.writeSamples([sample('u-same', 5, 51)], replaceIfChanged),
    repo.writeSamples([sample('u-same', 5, 52)], replaceIfChanged),
  ]);
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

test('a write reports its samples in the order given, bucket by bucket, whatever order the buckets finished in', async () => {
  const days = [2, 0, 1].map((d) => sample('u-order', d * 1440 + 7, 60)); // three days, the first given is the latest
  const writes = await repo.writeSamples(days, replaceIfChanged);
  expect(writes.map((w) => w.sample._id)).toEqual(days.map((d) => d._id));
  const again = await repo.writeSamples([...days].reverse(), replaceIfChanged);
  expect(again.map((w) => w.sample._id)).toEqual([...days].reverse().map((d) => d._id));
});

test('a field all samples share is stored once, a rare one is a column only while some sample has it', async () => {
  const typed = { ...sample('u-rare', 3, 61), type: 'resting' };
  const interval = { ...sample('u-rare', 5, 62), start: new Date(`${DAY}T00:04:00Z`), end: new Date(`${DAY}T00:05:00Z`) };
  const series = [...[0, 1, 2, 4].map((m) => sample('u-rare', m, 60)), typed, interval];
  await repo.writeSamples(series, replaceIfChanged);
  let bucket = (await repo.buckets.findOne({ user_id: 'u-rare' }))!;
  expect(bucket.type).toEqual([null, null, null, 'resting', null, null]);
  expect(bucket.start).toEqual([null, null, null, null, null, interval.start]);
  expect({ unit: bucket.unit, systolic: bucket.systolic, diastolic: bucket.diastolic }).toEqual({ unit: 'bpm', systolic: undefined, diastolic: undefined });
  const samples = await read('u-rare');
  expect(samples.map((s) => s.type)).toEqual([null, null, null, 'resting', null, null]);
  expect(samples[5]).toMatchObject({ start: interval.start, end: interval.end, value: 62 });
  expect(samples[4].start).toBeUndefined();

  // The typed sample replaced by an untyped one: no sample has a type, so the column goes.
  await repo.writeSamples([{ ...sample('u-rare', 3, 63), type: null }], replaceIfChanged);
  bucket = (await repo.buckets.findOne({ user_id: 'u-rare' }))!;
  expect(bucket.type).toBeUndefined();
  expect(bucket.value).toEqual([60, 60, 60, 63, 60, 62]);

  // Blood pressure: systolic and diastolic, no value (no value column either).
  const pressure = [0, 1].map((m) => ({ ...sample('u-bp', m, 0), value: undefined, systolic: 120 + m, diastolic: 80, unit: 'mmHg' }));
  await repo.writeSamples(pressure, replaceIfChanged);
  bucket = (await repo.buckets.findOne({ user_id: 'u-bp' }))!;
  expect({ value: bucket.value, systolic: bucket.systolic, diastolic: bucket.diastolic, unit: bucket.unit }).toEqual({
    value: undefined,
    systolic: [120, 121],
    diastolic: 80,
    unit: 'mmHg',
  });
  const [first] = await read('u-bp');
  expect(first).toMatchObject({ systolic: 120, diastolic: 80, unit: 'mmHg' });
  expect(first.value).toBeUndefined();
});

test('a retried batch recognises its own writes: its samples come back unchanged, marked with its key and what it did', async () => {
  const batchA = Array.from({ length: 5 }, (_, m) => sample('u-retry', m, 60, 'k-a'));
  expect((await repo.writeSamples(batchA, replaceIfChanged)).map((w) => w.outcome)).toEqual(Array(5).fill('created'));
  const retryA = await repo.writeSamples(batchA, replaceIfChanged);
  expect(retryA.map((w) => [w.outcome, w.stored?.ingest_key, w.stored?.change])).toEqual(Array(5).fill(['unchanged', 'k-a', 'created']));

  const batchB = [sample('u-retry', 2, 70, 'k-b'), sample('u-retry', 3, 60, 'k-b'), sample('u-retry', 9, 65, 'k-b')];
  expect((await repo.writeSamples(batchB, replaceIfChanged)).map((w) => w.outcome)).toEqual(['updated', 'unchanged', 'created']);
  const retryB = await repo.writeSamples(batchB, replaceIfChanged);
  // What B wrote carries B's key (announced again by ingestion); the sample B left alone still carries A's.
  expect(retryB.map((w) => [w.outcome, w.stored?.ingest_key, w.stored?.change])).toEqual([
    ['unchanged', 'k-b', 'updated'],
    ['unchanged', 'k-a', 'created'],
    ['unchanged', 'k-b', 'created'],
  ]);
  expect((await repo.buckets.findOne({ user_id: 'u-retry' }))!.version).toBe(2); // retries wrote nothing
});
