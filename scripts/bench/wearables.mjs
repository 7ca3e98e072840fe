// Wearable-data scenarios of `npm run bench` (BENCH_SUITES=wearables), each against the raw driver doing the
// same database work in the same run:
//   - ingestion: POST /v2/ingest/{user_id} with batches of BENCH_WEARABLE_BATCH (1000) new heartrate samples,
//     validated, stored and announced (daily.data.heartrate.created events published), vs a raw insertMany of the
//     same documents into a scratch collection with the same index;
//   - reads: GET /v2/timeseries/{user_id}/heartrate over 30 days for one of BENCH_WEARABLE_USERS (100) users whose
//     data is stored (BENCH_WEARABLE_SAMPLES_PER_DAY per user and day, default 48: 144,000 stored), vs a raw find of
//     the same filter, one reader at a time (BENCH_WEARABLE_READ_CONCURRENCY). 1440 is minute heart rate.
// Also reports the api's and the worker's peak memory (VmHWM).
import { readFileSync } from 'node:fs';
import { httpClient, measure, numberEnv } from './load.mjs';

const settings = () => ({
  batch: numberEnv('BENCH_WEARABLE_BATCH', 1000, { integer: true, min: 1 }),
  users: numberEnv('BENCH_WEARABLE_USERS', 100, { integer: true, min: 1 }),
  perDay: numberEnv('BENCH_WEARABLE_SAMPLES_PER_DAY', 48, { integer: true, min: 1 }),
  concurrency: numberEnv('BENCH_WEARABLE_CONCURRENCY', 4, { integer: true, min: 1 }),
  readConcurrency: numberEnv('BENCH_WEARABLE_READ_CONCURRENCY', 1, { integer: true, min: 1 }),
});
export const wearableSettings = () => void settings();

const DAY = 86_400_000;
const peakMb = (pid) => {
  try {
    const m = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 102.4) / 10 : null;
  } catch {
    return null;
  }
};

/** A stored sample as lib/wearables/ingest.ts writes it (SampleDoc). */
function sampleDoc(teamId, userId, ms, value) {
  const now = new Date();
  return {
    _id: `${userId}:heartrate:apple_health_kit:watch:${ms}`,
    team_id: teamId,
    user_id: userId,
    resource: 'heartrate',
    provider: 'apple_health_kit',
    source_type: 'watch',
    timestamp: new Date(ms),
    value,
    unit: 'bpm',
    type: null,
    timezone_offset: 0,
    ingest_key: 'bench',
    change: 'created',
    created_at: now,
    updated_at: now,
  };
}

export async function wearableSuite(env, { log = console.log } = {}) {
  const s = settings();
  const client = httpClient(env.apiUrl, { headers: { 'x-service-api-key': env.tenant.teamKey } });
  const teamId = env.tenant.teamId;
  const now = Date.now();
  const start = now - 30 * DAY;
  try {
    log(`bench: wearables: creating ${s.users} users and storing ${30 * s.perDay} samples each (raw insertMany, not measured)...`);
    const users = [];
    for (let i = 0; i < s.users; i++) {
      const res = await client.expect(200, 'POST', '/v2/user/', { body: { client_user_id: `bench-wearer-${env.runId}-${i}` }, json: true });
      users.push(res.json.user_id);
      const step = DAY / s.perDay;
      const docs = Array.from({ length: 30 * s.perDay }, (_, k) => sampleDoc(teamId, users[i], start + k * step, 60 + (k % 40)));
      await env.db.collection('samples').insertMany(docs, { ordered: false });
      if ((i + 1) % 20 === 0) log(`bench: wearables: ${i + 1}/${s.users} users stored`);
    }
    const scratch = env.db.collection('bench_raw_samples');
    await scratch.createIndex({ team_id: 1, user_id: 1, resource: 1, timestamp: 1, _id: 1 });

    // Reads first, on exactly the data seeded above (ingestion adds more).
    const pick = () => users[Math.floor(Math.random() * users.length)];
    const startDate = new Date(start).toISOString().slice(0, 10);
    const read = await measure({
      name: `GET /v2/timeseries/{user}/heartrate, 30 days (${30 * s.perDay} samples)`,
      concurrency: s.readConcurrency,
      log,
      fn: () => client.expect(200, 'GET', `/v2/timeseries/${pick()}/heartrate?start_date=${startDate}`),
    });
    const rawFind = await measure({
      name: 'raw find of the same 30 days',
      concurrency: s.readConcurrency,
      log,
      fn: () =>
        env.db
          .collection('samples')
          .find({ team_id: teamId, user_id: pick(), resource: 'heartrate', timestamp: { $gte: new Date(`${startDate}T00:00:00Z`), $lte: new Date(now + DAY) } })
          .sort({ timestamp: 1, _id: 1 })
          .toArray(),
    });
    const ingestUser = (await client.expect(200, 'POST', '/v2/user/', { body: { client_user_id: `bench-ingest-${env.runId}` }, json: true })).json.user_id;
    const rawUser = `raw-${env.runId}`;
    const base = now - 20 * DAY;
    const ingest = await measure({
      name: `POST /v2/ingest, ${s.batch} new samples per batch`,
      concurrency: s.concurrency,
      log,
      fn: ({ seq }) => {
        const samples = Array.from({ length: s.batch }, (_, i) => ({ resource: 'heartrate', timestamp: new Date(base + (seq * s.batch + i) * 1000).toISOString(), value: 60 + (i % 40) }));
        return client.expect(200, 'POST', `/v2/ingest/${ingestUser}`, { body: { provider: 'apple_health_kit', source_type: 'watch', samples } });
      },
    });
    const rawInsert = await measure({
      name: `raw insertMany of ${s.batch} sample documents`,
      concurrency: s.concurrency,
      log,
      fn: ({ seq }) => scratch.insertMany(Array.from({ length: s.batch }, (_, i) => sampleDoc(teamId, rawUser, base + (seq * s.batch + i) * 1000, 60 + (i % 40))), { ordered: false }),
    });

    await scratch.drop().catch(() => {});
    const events = await env.db.collection('webhook_events').countDocuments({ user_id: ingestUser });
    const samplesPerSecond = (r) => Math.round(r.rps * s.batch);
    return {
      results: [ingest, rawInsert, read, rawFind],
      ratios: [
        { name: 'SDK ingestion / raw insertMany (samples/s)', of: ingest, to: rawInsert, target: 0.5 },
        { name: '30-day timeseries read / raw find', of: read, to: rawFind, target: 0.5 },
        { name: '30-day read p99 (ms), raw find p99 in the notes', value: read.p99Ms, target: null, unit: 'ms', kind: 'info' },
      ],
      notes: [
        `ingestion: ${samplesPerSecond(ingest)} samples/s through the API vs ${samplesPerSecond(rawInsert)} samples/s raw insertMany; ${events} daily.data events published for the ingested user`,
        `30-day read: p50 ${read.p50Ms} ms, p99 ${read.p99Ms} ms vs raw find p50 ${rawFind.p50Ms} ms, p99 ${rawFind.p99Ms} ms (${s.users} users' data stored)`,
        `peak memory (VmHWM): api ${peakMb(env.children.api.pid)} MB, worker ${peakMb(env.children.worker.pid)} MB`,
      ],
    };
  } finally {
    client.close();
  }
}
