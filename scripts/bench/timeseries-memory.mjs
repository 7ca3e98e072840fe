// Memory and time of large timeseries reads in `npm run bench` (BENCH_SUITES=timeseries-memory). One user holds
// 300 days of minute heart rate (432,000 samples, stored as the api stores them: day buckets of columns); the flat
// read GET /v2/timeseries/{user_id}/heartrate is made over 3, 30 and 300 days (4,320 / 43,200 / 432,000 samples),
// each size by a fresh api process of its own (so its peak, VmHWM in /proc, belongs to that size alone), warmed up
// by a one-day read and then read BENCH_TIMESERIES_READS times (default 3) by a client that takes the body as fast
// as it comes. Reported per size: the api's peak RSS above its idle RSS (after the warm-up), time per read, and the
// ratio to the baseline of the same run: the raw driver reading the same buckets and turning them into the same JSON.
// For reference, a fresh process also does what the api did before it streamed (the whole array built in
// memory: the repository's read, then JSON.stringify, no HTTP) for each size, with its peak above idle.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { startNode, stopChild, waitForHttp } from '../setup.mjs';
import { freePort } from '../stack.mjs';
import { distModule } from './environment.mjs';
import { medianRatio, numberEnv } from './load.mjs';
import { heartRateBucket, samplesJson } from './wearables.mjs';

const settings = () => ({ reads: numberEnv('BENCH_TIMESERIES_READS', 3, { integer: true, min: 1 }) });
export const timeseriesMemorySettings = () => void settings();

const DAY = 86_400_000;
const PER_DAY = 1440;
const SIZES_DAYS = [3, 30, 300];
const STORED_DAYS = Math.max(...SIZES_DAYS);
const fmtInt = (n) => n.toLocaleString('en-US');

/** VmRSS and VmHWM (peak RSS since start) of a process, in MB. */
function memoryMb(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name) => Math.round(Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)[1]) / 102.4) / 10;
  return { rss: field('VmRSS'), hwm: field('VmHWM') };
}

/** GET, reading the body as it comes (counted, not kept, except its ends); resolves with the time and the byte count. */
function timedRead(baseUrl, path, teamKey) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = http.get(`${baseUrl}${path}`, { headers: { 'x-service-api-key': teamKey } }, (res) => {
      let bytes = 0;
      let head = '';
      let tail = '';
      res.on('data', (chunk) => {
        bytes += chunk.length;
        if (head.length < 64) head += chunk.toString('utf8', 0, 64);
        tail = (tail + chunk.toString('utf8', Math.max(0, chunk.length - 16))).slice(-16);
      });
      res.once('end', () => {
        const ms = performance.now() - started;
        if (res.statusCode !== 200 || !res.complete) return reject(new Error(`GET ${path}: status ${res.statusCode}, complete ${res.complete}: ${head}`));
        resolve({ ms, bytes, head, tail });
      });
      res.once('error', reject);
    });
    req.once('error', reject);
    req.setTimeout(120_000, () => req.destroy(new Error(`GET ${path}: no answer within 120 s`)));
  });
}

/** Summary of read times (ms) as a bench result row: reads/s over the time spent reading, p50 and max as p99. */
function readResult(name, times) {
  const sorted = [...times].sort((a, b) => a - b);
  const total = sorted.reduce((a, b) => a + b, 0);
  const r = (x) => Math.round(x * 100) / 100;
  return {
    name,
    concurrency: 1,
    ok: sorted.length,
    rps: r((sorted.length * 1000) / total),
    p50Ms: r(sorted[Math.floor((sorted.length - 1) / 2)]),
    p90Ms: r(sorted.at(-1)),
    p99Ms: r(sorted.at(-1)),
    meanMs: r(total / sorted.length),
    maxMs: r(sorted.at(-1)),
    errors: 0,
  };
}

/**
 * The read before streaming, in a fresh process (this file run with `in-memory-read`): the repository's whole
 * array of samples, then JSON.stringify of their views, as the api's handler did. Prints its memory as JSON.
 */
async function inMemoryReadChild([teamId, userId, from, to]) {
  const { connectMongo } = await distModule('lib/platform/database/mongo.js');
  const { WearableDataRepository } = await distModule('lib/wearables/data-store.js');
  const { sampleView } = await distModule('lib/wearables/views.js');
  const mongo = await connectMongo(process.env.MONGO_URL, process.env.MONGO_DB);
  const repo = new WearableDataRepository(mongo.db);
  const read = async (fromMs, toMs) =>
    JSON.stringify((await repo.findSamples({ teamId, userId, resource: 'heartrate', from: new Date(fromMs), to: new Date(toMs) })).map(sampleView));
  await read(Number(from), Number(from) + DAY - 1); // warm-up: a day
  const idle = memoryMb(process.pid);
  const started = performance.now();
  const json = await read(Number(from), Number(to));
  const ms = performance.now() - started;
  const peak = memoryMb(process.pid);
  process.stdout.write(`${JSON.stringify({ idleRss: idle.rss, hwm: peak.hwm, ms, bytes: Buffer.byteLength(json) })}\n`);
  await mongo.close();
}

function runInMemoryRead(childEnv, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), 'in-memory-read', ...args.map(String)], {
      env: { ...process.env, ...childEnv },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.once('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1))) : reject(new Error(`the in-memory read exited with ${code}`)),
    );
  });
}

export async function timeseriesMemorySuite(env, { log = console.log } = {}) {
  const s = settings();
  const teamId = env.tenant.teamId;
  const teamKey = env.tenant.teamKey;
  const today = Math.floor(Date.now() / DAY) * DAY;
  const firstDay = today - STORED_DAYS * DAY;
  const created = await fetch(`${env.apiUrl}/v2/user/`, {
    method: 'POST',
    headers: { 'x-service-api-key': teamKey, 'content-type': 'application/json' },
    body: JSON.stringify({ client_user_id: `bench-timeseries-${env.runId}` }),
  });
  if (created.status !== 200) throw new Error(`creating the bench user: ${created.status} ${await created.text()}`);
  const userId = (await created.json()).user_id;

  log(
    `bench: timeseries-memory: storing ${STORED_DAYS} day buckets of ${PER_DAY} samples (${fmtInt(STORED_DAYS * PER_DAY)}) for one user (raw insertMany, not measured)...`,
  );
  for (let d = 0; d < STORED_DAYS; d += 50) {
    const docs = Array.from({ length: Math.min(50, STORED_DAYS - d) }, (_, i) => heartRateBucket(teamId, userId, firstDay + (d + i) * DAY, PER_DAY));
    await env.db.collection('sample_buckets').insertMany(docs, { ordered: false });
    log(`bench: timeseries-memory: ${d + docs.length}/${STORED_DAYS} days stored`);
  }

  const results = [];
  const ratios = [];
  const notes = [];
  const sizes = [];
  for (const days of SIZES_DAYS) {
    const samples = days * PER_DAY;
    const from = today - days * DAY;
    const to = today - 1;
    const range = `start_date=${new Date(from).toISOString().slice(0, 10)}&end_date=${new Date(to).toISOString().slice(0, 10)}`;
    const path = `/v2/timeseries/${userId}/heartrate?${range}`;

    const port = await freePort();
    const apiUrl = `http://127.0.0.1:${port}`;
    const api = startNode('api/main.js', env.moreApiEnv({ API_PORT: String(port), PUBLIC_BASE_URL: apiUrl }), `api (${fmtInt(samples)} samples)`);
    try {
      await waitForHttp(`${apiUrl}/health`, { timeoutMs: 60_000 });
      const warm = await timedRead(
        apiUrl,
        `/v2/timeseries/${userId}/heartrate?start_date=${new Date(from).toISOString().slice(0, 10)}&end_date=${new Date(from).toISOString().slice(0, 10)}`,
        teamKey,
      );
      if (!warm.head.startsWith('[{"timestamp"')) throw new Error(`warm-up read: ${warm.head}`);
      const idle = memoryMb(api.pid);
      log(
        `bench: timeseries-memory: ${fmtInt(samples)} samples: fresh api (pid ${api.pid}), idle RSS ${idle.rss} MB after a one-day read; ${s.reads} reads...`,
      );
      // Each api read followed by the raw driver's same read (one at a time, so their times are taken moments apart; the
      // raw reads run in this process, so the api's peak memory is its own reads').
      const rawRead = async () => {
        const started = performance.now();
        const buckets = await env.db
          .collection('sample_buckets')
          .find(
            { team_id: teamId, user_id: userId, resource: 'heartrate', day: { $gte: new Date(from), $lte: new Date(Math.floor(to / DAY) * DAY) } },
            { projection: { ingest_key: 0, change: 0 } },
          )
          .sort({ day: 1 })
          .toArray();
        const json = samplesJson(buckets, from, to);
        return { ms: performance.now() - started, bytes: Buffer.byteLength(json) };
      };
      const times = [];
      const rawTimes = [];
      let bytes = 0;
      for (let i = 0; i < s.reads; i++) {
        const read = await timedRead(apiUrl, path, teamKey);
        if (!read.tail.endsWith('}]')) throw new Error(`read of ${samples} samples ended with ${read.tail}`);
        times.push(read.ms);
        bytes = read.bytes;
        const rawOne = await rawRead();
        if (rawOne.bytes !== bytes) throw new Error(`raw read: ${rawOne.bytes} bytes, the api's ${bytes}`);
        rawTimes.push(rawOne.ms);
      }
      const peak = memoryMb(api.pid);
      const api1 = readResult(`GET /v2/timeseries/{user}/heartrate, ${days} days (${fmtInt(samples)} samples, ${(bytes / 2 ** 20).toFixed(1)} MB)`, times);
      log(
        `bench: timeseries-memory: ${fmtInt(samples)} samples: p50 ${api1.p50Ms} ms, api peak RSS ${peak.hwm} MB (${(peak.hwm - idle.rss).toFixed(1)} MB above idle)`,
      );

      const raw = readResult(`raw driver: the same ${days} buckets turned into the same JSON`, rawTimes);
      const inMemory = await runInMemoryRead(env.childEnv, [teamId, userId, from, to]);
      if (inMemory.bytes !== bytes) throw new Error(`in-memory read: ${inMemory.bytes} bytes, the api's ${bytes}`);
      const size = {
        samples,
        bytes,
        idleRssMb: idle.rss,
        peakRssMb: peak.hwm,
        aboveIdleMb: Math.round((peak.hwm - idle.rss) * 10) / 10,
        apiP50Ms: api1.p50Ms,
        rawP50Ms: raw.p50Ms,
        inMemory: { ...inMemory, aboveIdleMb: Math.round((inMemory.hwm - inMemory.idleRss) * 10) / 10 },
      };
      sizes.push(size);
      results.push(api1, raw);
      ratios.push(
        {
          name: `${fmtInt(samples)} samples: streamed read / raw driver + JSON (time)`,
          of: api1,
          to: raw,
          // The median of each api read's against the raw read just after it.
          ratio: medianRatio(rawTimes, times),
          target: null,
        },
        {
          name: `${fmtInt(samples)} samples: api peak RSS above idle`,
          value: size.aboveIdleMb,
          unit: ' MB',
          target: null,
          kind: 'info',
          note: `idle ${idle.rss} MB, peak ${peak.hwm} MB`,
        },
      );
      notes.push(
        `${fmtInt(samples)} samples (${(bytes / 2 ** 20).toFixed(1)} MB): api peak ${size.aboveIdleMb} MB above idle (${idle.rss} -> ${peak.hwm} MB), p50 ${api1.p50Ms} ms vs raw driver + JSON ${raw.p50Ms} ms; ` +
          `the array built in memory (before streaming, no HTTP) peaks ${size.inMemory.aboveIdleMb} MB above idle in ${Math.round(inMemory.ms)} ms`,
      );
    } finally {
      await stopChild(api);
    }
  }
  const [small, , large] = sizes;
  ratios.push({
    name: `peak above idle, ${fmtInt(large.samples)} vs ${fmtInt(small.samples)} samples (flat: about 1)`,
    value: Math.round((large.aboveIdleMb / Math.max(small.aboveIdleMb, 0.1)) * 10) / 10,
    unit: 'x',
    target: null,
    kind: 'info',
    note: `${large.aboveIdleMb} vs ${small.aboveIdleMb} MB`,
  });
  return { results, ratios, notes, details: { sizes } };
}

if (process.argv[2] === 'in-memory-read') {
  inMemoryReadChild(process.argv.slice(3)).catch((err) => {
    console.error(`in-memory read failed: ${err.message}`);
    process.exit(1);
  });
}
