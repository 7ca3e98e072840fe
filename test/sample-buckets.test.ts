import { SampleBuckets, sampleKey, type SampleBucketDoc } from '../lib/wearables/sample-buckets';
import { WearableDataRepository, type SampleDoc } from '../lib/wearables/data-store';
import { indexBoundFields, indexesUsed } from './support/explain';
import { ownDatabase, startTestApp, type OwnDatabase, type TestApp } from './support/harness';

/**
 * Timeseries samples are stored in day buckets (one document per user, resource, provider, source type and UTC
 * day; architecture rule 2), each field a column parallel to the samples' offsets in the day. These tests hold
 * the bucket store to the rules of single documents: concurrent writers lose nothing, a later value replaces
 * its timestamp's, a retried batch recognises its own writes, reads come from the index, and the layouts of
 * earlier versions (one document per sample, then one subdocument per sample) move into columns once.
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

test('a day of minute samples is one document of columns; a later value replaces its timestamp\'s; a repeat changes nothing', async () => {
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
  expect({ unit: bucket.unit, timezone_offset: bucket.timezone_offset, type: bucket.type, samples: bucket.samples }).toEqual({ unit: 'bpm', timezone_offset: 0, type: undefined, samples: undefined });
  expect([(bucket.ingest_key as string[])[600], (bucket.change as string[])[600], (bucket.ingest_key as string[])[599], (bucket.change as string[])[599]]).toEqual(['k2', 'updated', 'k1', 'created']);
  expect(bucket.version).toBe(2);
});

test('20 writers of one day bucket at once: every sample lands (each write is conditional on the version it read)', async () => {
  const writers = Array.from({ length: 20 }, (_, w) => repo.writeSamples(Array.from({ length: 10 }, (_, i) => sample('u-race', w * 10 + i, 70 + w)), replaceIfChanged));
  const results = await Promise.all(writers);
  expect(results.flat().filter((w) => w.outcome === 'created')).toHaveLength(200);
  expect(await read('u-race')).toHaveLength(200);
  const bucket = await repo.buckets.findOne({ user_id: 'u-race' });
  expect(bucket!.offsets).toEqual(Array.from({ length: 200 }, (_, m) => m * 60_000)); // in time order, whatever order they landed in
  expect(bucket!.version).toBe(20); // one insert and 19 updates, none lost
});

test('two writers of one timestamp at once: one value wins, stored whole, and each writer was told what it did', async () => {
  await repo.writeSamples([sample('u-same', 5, 50)], replaceIfChanged);
  const [a, b] = await Promise.all([repo.writeSamples([sample('u-same', 5, 51)], replaceIfChanged), repo.writeSamples([sample('u-same', 5, 52)], replaceIfChanged)]);
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
    await older.writeSamples([sample('u-old', 3, 99, 'new')], replaceIfChanged);
    await older.ensureIndexes();
    const moved = await older.findSamples({ teamId: 'team', userId: 'u-old', resource: 'heartrate', from: new Date(`${DAY}T00:00:00Z`), to: new Date(`${DAY}T23:59:59Z`) });
    expect(moved).toHaveLength(30);
    expect(moved.map((s) => s._id)).toEqual(docs.map((d) => d._id));
    expect(moved[3]).toMatchObject({ value: 99 });
    expect(moved[4]).toMatchObject({ value: 80, unit: 'bpm', timezone_offset: 0 });
    const bucket = (await older.buckets.findOne({ user_id: 'u-old' }))!;
    expect([(bucket.ingest_key as string[])[3], (bucket.ingest_key as string[])[4]]).toEqual(['new', 'k1']);
    expect(await legacy.db.listCollections({ name: 'samples' }).toArray()).toEqual([]);
  } finally {
    await legacy.drop();
  }
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
  expect({ value: bucket.value, systolic: bucket.systolic, diastolic: bucket.diastolic, unit: bucket.unit }).toEqual({ value: undefined, systolic: [120, 121], diastolic: 80, unit: 'mmHg' });
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

/** A bucket as the previous version stored it: one subdocument per sample, keyed by its offset in the day (ms). */
function slotMapBucket(userId: string, slots: Record<number, Record<string, unknown>>): SampleBucketDoc {
  const now = new Date();
  const samples = Object.fromEntries(Object.entries(slots).map(([minute, slot]) => [String(Number(minute) * 60_000), slot]));
  return { _id: `${userId}:heartrate:oura:ring:${DAY}`, team_id: 'team', user_id: userId, resource: 'heartrate', provider: 'oura', source_type: 'ring', day: new Date(`${DAY}T00:00:00Z`), samples, version: 1, created_at: now, updated_at: now } as SampleBucketDoc;
}
const oldSlot = (value: number, extra: Record<string, unknown> = {}) => ({ value, unit: 'bpm', timezone_offset: 3600, ingest_key: 'old', ...extra });

test('slot-map buckets of the previous version are read as they are, then rewritten into columns once, by two processes at once, with a writer racing them', async () => {
  const legacy = await ownDatabase(app, 'slot_maps');
  try {
    const older = new WearableDataRepository(legacy.db);
    const buckets = Array.from({ length: 120 }, (_, u) => slotMapBucket(`u-map-${u}`, Object.fromEntries(Array.from({ length: 30 }, (_, m) => [m, oldSlot(50 + u)]))));
    // Every field the slot map could hold: a type, an interval, an update mark, blood pressure.
    const start = new Date(`${DAY}T00:01:00Z`);
    buckets[0] = slotMapBucket('u-map-0', { 0: oldSlot(50, { type: 'resting', change: 'updated' }), 2: oldSlot(51, { start, end: start }), 5: { systolic: 120, diastolic: 80, unit: 'mmHg', timezone_offset: 3600, ingest_key: 'old' } });
    await legacy.db.collection('sample_buckets').insertMany(buckets as never[]);
    const readOf = (userId: string) => older.findSamples({ teamId: 'team', userId, resource: 'heartrate', from: new Date(`${DAY}T00:00:00Z`), to: new Date(`${DAY}T23:59:59Z`) });

    const fields = (samples: SampleDoc[] | Awaited<ReturnType<typeof readOf>>) =>
      samples.map(({ _id, timestamp, value, systolic, diastolic, unit, type, timezone_offset, start, end }) => ({ _id, timestamp, value, systolic, diastolic, unit, type, timezone_offset, start, end }));
    const before = fields(await readOf('u-map-0'));
    expect(before.map((s) => [s.timestamp.getTime() % 86_400_000, s.value, s.type, s.start, s.systolic])).toEqual([
      [0, 50, 'resting', undefined, undefined],
      [120_000, 51, null, start, undefined],
      [300_000, undefined, null, undefined, 120],
    ]);
    // A write into a slot-map bucket (before the move got to it) rewrites it into columns, keeping its other samples.
    await older.writeSamples([sample('u-map-1', 40, 99, 'new')], replaceIfChanged);
    expect(Object.keys((await older.buckets.findOne({ user_id: 'u-map-1' }))!)).not.toContain('samples');
    expect(await readOf('u-map-1')).toHaveLength(31);

    // Two processes move the buckets at once while a third writes into one of them.
    const [a, b] = [new SampleBuckets(older.buckets), new SampleBuckets(older.buckets)];
    const [, , racing] = await Promise.all([a.moveSlotMapsIntoColumns(), b.moveSlotMapsIntoColumns(), older.writeSamples([sample('u-map-77', 3, 200, 'new'), sample('u-map-77', 45, 201, 'new')], replaceIfChanged)]);
    expect(racing.map((w) => w.outcome)).toEqual(['updated', 'created']);
    expect(await older.buckets.countDocuments({ samples: { $exists: true } })).toBe(0);
    for (const bucket of await older.buckets.find({ user_id: { $nin: ['u-map-1', 'u-map-77'] } }).toArray()) {
      expect({ id: bucket._id, version: bucket.version }).toEqual({ id: bucket._id, version: 2 }); // rewritten once, not twice
    }
    expect((await readOf('u-map-77')).map((s) => s.value)).toEqual([...Array(3).fill(127), 200, ...Array(26).fill(127), 201]);
    const moved = (await older.buckets.findOne({ user_id: 'u-map-5' }))!;
    expect(moved).toMatchObject({ offsets: Array.from({ length: 30 }, (_, m) => m * 60_000), value: 55, unit: 'bpm', timezone_offset: 3600, ingest_key: 'old', change: 'created' });
    expect(fields(await readOf('u-map-0'))).toEqual(before);
    expect((await older.buckets.findOne({ user_id: 'u-map-0' }))!).toMatchObject({ type: ['resting', null, null], change: ['updated', 'created', 'created'], systolic: [null, null, 120], unit: ['bpm', 'bpm', 'mmHg'] });

    // Repeatable (after a crash, or a bucket an earlier version still running wrote since): only slot maps are touched.
    await legacy.db.collection('sample_buckets').insertOne(slotMapBucket('u-map-late', { 0: oldSlot(70) }) as never);
    await older.ensureIndexes();
    await a.moveSlotMapsIntoColumns();
    expect((await older.buckets.findOne({ user_id: 'u-map-late' }))!).toMatchObject({ offsets: [0], value: 70, version: 2 });
    expect((await older.buckets.findOne({ user_id: 'u-map-5' }))!.version).toBe(2);
  } finally {
    await legacy.drop();
  }
});
