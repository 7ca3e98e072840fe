// Wearable-data scenarios of `npm run bench` (BENCH_SUITES=wearables), each against the raw driver doing the
// same database work in the same run. Samples are stored in day buckets of columns (lib/wearables/sample-buckets.ts).
//   - ingestion: POST /v2/ingest/{user_id} with batches of BENCH_WEARABLE_BATCH (1000) new minute heartrate samples,
//     validated, stored and announced (daily.data.heartrate.created events published), vs a raw append of the
//     same samples to the columns of the same day buckets of a scratch collection with the same index;
//   - reads: GET /v2/timeseries/{user_id}/heartrate over 30 days for one of BENCH_WEARABLE_USERS (100) users whose
//     data is stored (BENCH_WEARABLE_SAMPLES_PER_DAY per user and day, default 1440: minute heart rate, 4,320,000
//     stored), vs a raw find of the same buckets (without their ingest marks, as the API reads them) turned into
//     the same JSON array, one reader at a time (BENCH_WEARABLE_READ_CONCURRENCY).
// Also reports the api's and the worker's peak memory (VmHWM).
import { readFileSync } from 'node:fs';
import { benchDefaults, httpClient, measureInRounds, numberEnv } from './load.mjs';

const settings = () => ({
  batch: numberEnv('BENCH_WEARABLE_BATCH', 1000, { integer: true, min: 1 }),
  users: numberEnv('BENCH_WEARABLE_USERS', 100, { integer: true, min: 1 }),
  perDay: numberEnv('BENCH_WEARABLE_SAMPLES_PER_DAY', 1440, { integer: true, min: 1 }),
  concurrency: numberEnv('BENCH_WEARABLE_CONCURRENCY', 4, { integer: true, min: 1 }),
  readConcurrency: numberEnv('BENCH_WEARABLE_READ_CONCURRENCY', 1, { integer: true, min: 1 }),
});
export const wearableSettings = () => void settings();

const DAY = 86_400_000;
/** Ingested samples are a minute apart (minute heart rate), as the stored ones. */
const MINUTE = 60_000;
/** A process's peak resident memory (VmHWM), MB. */
export const peakMb = (pid) => {
  try {
    const m = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 102.4) / 10 : null;
  } catch {
    return null;
  }
};

/**
 * The raw baseline of storing heart-rate samples: appended to the columns of their day buckets, one upsert per bucket
 * and no read (what lib/wearables/sample-buckets.ts writes, without reading, checking or counting).
 */
export async function rawAppend(scratch, { teamId, userId, timezoneOffset, mark = {} }, samples) {
  const byBucket = new Map();
  for (const { t, value } of samples) {
    const day = Math.floor(t / DAY) * DAY;
    if (!byBucket.has(day)) byBucket.set(day, { offsets: [], value: [] });
    byBucket.get(day).offsets.push(t - day);
    byBucket.get(day).value.push(value);
  }
  await Promise.all(
    [...byBucket].map(([day, columns]) =>
      scratch.updateOne(
        { _id: `${userId}:heartrate:apple_health_kit:watch:${new Date(day).toISOString().slice(0, 10)}` },
        {
          $push: { offsets: { $each: columns.offsets }, value: { $each: columns.value } },
          $set: { unit: 'bpm', timezone_offset: timezoneOffset, ...mark },
          $inc: { version: 1 },
          $setOnInsert: { team_id: teamId, user_id: userId, resource: 'heartrate', provider: 'apple_health_kit', source_type: 'watch', day: new Date(day) },
        },
        { upsert: true },
      ),
    ),
  );
}

/** What one bench batch marks its samples with (the repository's ingest marks): a 24-character key, 'created'. */
const INGEST_MARK = { ingest_key: 'bench0123456789abcdef0123', change: 'created' };

/**
 * A day bucket of one user's heart rate as lib/wearables/sample-buckets.ts writes one batch's (SampleBucketDoc):
 * `offsets` and `value` columns, the fields every sample shares stored once, a null `type` left out.
 */
export function heartRateBucket(teamId, userId, dayStart, perDay) {
  const step = DAY / perDay;
  const offsets = [];
  const value = [];
  for (let k = 0; k < perDay; k++) {
    offsets.push(Math.round(k * step));
    value.push(60 + (k % 40));
  }
  const now = new Date();
  return {
    _id: `${userId}:heartrate:apple_health_kit:watch:${new Date(dayStart).toISOString().slice(0, 10)}`,
    team_id: teamId,
    user_id: userId,
    resource: 'heartrate',
    provider: 'apple_health_kit',
    source_type: 'watch',
    day: new Date(dayStart),
    offsets,
    value,
    unit: 'bpm',
    timezone_offset: 0,
    ...INGEST_MARK,
    version: 1,
    created_at: now,
    updated_at: now,
  };
}

/** Entry `i` of a bucket column: one value for every sample, or an array of one per sample. */
const columnAt = (column, i) => (Array.isArray(column) ? column[i] : (column ?? null));

/** What a reader does with buckets: the samples of [from, to] in time order, as the API's JSON (sampleView). */
export function samplesJson(buckets, from, to) {
  const out = [];
  for (const b of buckets) {
    const base = b.day.getTime();
    for (let i = 0; i < b.offsets.length; i++) {
      const t = base + b.offsets[i];
      if (t < from || t > to) continue;
      out.push({
        timestamp: new Date(t).toISOString().replace('Z', '+00:00'),
        timezone_offset: columnAt(b.timezone_offset, i),
        type: columnAt(b.type, i),
        unit: columnAt(b.unit, i),
        value: columnAt(b.value, i),
      });
    }
  }
  return JSON.stringify(out); // buckets in day order, offsets ascending: already in time order
}

export async function wearableSuite(env, { log = console.log } = {}) {
  const s = settings();
  const client = httpClient(env.apiUrl, { headers: { 'x-service-api-key': env.tenant.teamKey } });
  const teamId = env.tenant.teamId;
  const now = Date.now();
  const today = Math.floor(now / DAY) * DAY;
  const start = today - 30 * DAY;
  try {
    log(`bench: wearables: creating ${s.users} users and storing 30 day buckets of ${s.perDay} samples each (raw insertMany, not measured)...`);
    const users = [];
    for (let i = 0; i < s.users; i++) {
      const res = await client.expect(200, 'POST', '/v2/user/', { body: { client_user_id: `bench-wearer-${env.runId}-${i}` }, json: true });
      users.push(res.json.user_id);
      const docs = Array.from({ length: 30 }, (_, d) => heartRateBucket(teamId, users[i], start + d * DAY, s.perDay));
      await env.db.collection('sample_buckets').insertMany(docs, { ordered: false });
      if ((i + 1) % 20 === 0) log(`bench: wearables: ${i + 1}/${s.users} users stored`);
    }
    const scratch = env.db.collection('bench_raw_sample_buckets');
    await scratch.createIndex({ team_id: 1, user_id: 1, resource: 1, day: 1 });

    // Reads first, on exactly the data seeded above (ingestion adds more).
    const pick = () => users[Math.floor(Math.random() * users.length)];
    const startDate = new Date(start).toISOString().slice(0, 10);
    // Twice the default window: an ingest or a read takes tens to hundreds of ms, and a round counts whole operations.
    const seconds = 2 * benchDefaults().seconds;
    const reads = await measureInRounds({
      concurrency: s.readConcurrency,
      seconds,
      log,
      scenarios: [
        {
          name: `GET /v2/timeseries/{user}/heartrate, 30 days (${30 * s.perDay} samples)`,
          fn: () => client.expect(200, 'GET', `/v2/timeseries/${pick()}/heartrate?start_date=${startDate}`),
        },
        {
          name: 'raw find of the same 30 day buckets, turned into the same JSON',
          fn: async () => {
            const to = today + DAY - 1;
            const buckets = await env.db
              .collection('sample_buckets')
              // As the repository reads: without the ingest marks, which reads do not return.
              .find(
                { team_id: teamId, user_id: pick(), resource: 'heartrate', day: { $gte: new Date(start), $lte: new Date(today) } },
                { projection: { ingest_key: 0, change: 0 } },
              )
              .sort({ day: 1 })
              .toArray();
            return samplesJson(buckets, start, to);
          },
        },
      ],
    });
    const [read, rawFind] = reads.results;
    const ingestUser = (await client.expect(200, 'POST', '/v2/user/', { body: { client_user_id: `bench-ingest-${env.runId}` }, json: true })).json.user_id;
    const rawUser = `raw-${env.runId}`;
    const base = now - 120 * DAY; // room for the batches of the run, a minute apart, before today
    const writes = await measureInRounds({
      concurrency: s.concurrency,
      seconds,
      log,
      scenarios: [
        {
          name: `POST /v2/ingest, ${s.batch} new samples per batch`,
          fn: ({ seq }) => {
            const samples = Array.from({ length: s.batch }, (_, i) => ({
              resource: 'heartrate',
              timestamp: new Date(base + (seq * s.batch + i) * MINUTE).toISOString(),
              value: 60 + (i % 40),
            }));
            return client.expect(200, 'POST', `/v2/ingest/${ingestUser}`, { body: { provider: 'apple_health_kit', source_type: 'watch', samples } });
          },
        },
        {
          name: `raw append of ${s.batch} samples to their day buckets' columns (one update per bucket, no read)`,
          fn: async ({ seq }) => {
            const samples = Array.from({ length: s.batch }, (_, i) => ({ t: base + (seq * s.batch + i) * MINUTE, value: 60 + (i % 40) }));
            await rawAppend(scratch, { teamId, userId: rawUser, timezoneOffset: 0, mark: INGEST_MARK }, samples);
          },
        },
      ],
    });
    const [ingest, rawInsert] = writes.results;

    await scratch.drop().catch(() => {});
    const events = await env.db.collection('webhook_events').countDocuments({ user_id: ingestUser });
    const samplesPerSecond = (r) => Math.round(r.rps * s.batch);
    return {
      results: [ingest, rawInsert, read, rawFind],
      ratios: [
        { name: 'SDK ingestion / raw column appends (samples/s)', of: ingest, to: rawInsert, ratio: writes.ratio(0, 1), target: 0.5 },
        { name: '30-day timeseries read / raw find + JSON', of: read, to: rawFind, ratio: reads.ratio(0, 1), target: 0.5 },
        { name: '30-day read p99 (ms), raw find p99 in the notes', value: read.p99Ms, target: null, unit: 'ms', kind: 'info' },
      ],
      notes: [
        `ingestion: ${samplesPerSecond(ingest)} samples/s through the API vs ${samplesPerSecond(rawInsert)} samples/s raw column appends; ${events} daily.data events published for the ingested user`,
        `30-day read of ${30 * s.perDay} samples: p50 ${read.p50Ms} ms, p99 ${read.p99Ms} ms vs raw find + JSON p50 ${rawFind.p50Ms} ms, p99 ${rawFind.p99Ms} ms (${s.users} users' data stored: ${s.users * 30} buckets, ${s.users * 30 * s.perDay} samples)`,
        `peak memory (VmHWM): api ${peakMb(env.children.api.pid)} MB, worker ${peakMb(env.children.worker.pid)} MB`,
      ],
    };
  } finally {
    client.close();
  }
}
