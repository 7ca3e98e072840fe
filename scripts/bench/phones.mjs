// Data from phones in `npm run bench` (BENCH_SUITES=phones), each against a baseline measured in the same run:
//   - uploads: BENCH_PHONES (50) phones, signed in with their own SDK tokens, each sending gzip chunks of
//     BENCH_PHONE_CHUNK (10,000) new heart-rate samples to POST /v2/timeseries/{user_id}/heartrate, vs raw appends of
//     the same samples to the columns of their day buckets in a scratch collection (the database work of storing them,
//     without reading, checking or counting). Three runs of the uploads:
//       1. a closed loop on the one api process (a phone sends its next chunk when the last is answered): what one
//          process does (for the record);
//       2. the same closed loop with BENCH_PHONE_API_REPLICAS (2: one per core, as a host runs them) api replicas
//          sharing the port (API_REUSE_PORT): samples stored per second, target at least 0.3 of the raw appends,
//          measured in turns with them (4 rounds; the ratio is the median of the rounds');
//       3. paced as phones upload: each phone a chunk every BENCH_PHONE_PACE_SECONDS (5; 50 phones: 10 chunks,
//          100,000 samples a second), to the same replicas: the answer's p99, target under 1 s. (A closed loop's
//          answer time is the queue, 50 chunks deep: its p99 is 50 times the service time, whatever the path; the raw
//          appends' own closed-loop p99 is near a second.)
//   - the Apple Health export import: an export.zip of BENCH_IMPORT_MB (256) MB of export.xml
//     (test/support/apple-health-export.ts), uploaded and imported by the worker, in MB of export.xml per second from
//     the end of the upload to the import's end, vs a raw streaming parse of the same file (inflate + sax, no storing).
//     Target ≥ 0.5; the worker's peak memory during the import (VmHWM, reset before) less its size before (VmRSS: its
//     workflow sandboxes and caches, there whatever it does) under 300 MB. BENCH_IMPORT_MB=1024
//     measures the 1 GB export of the issue (about four times as long).
import { createReadStream, createWriteStream, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import sax from 'sax';
import { distModule } from './environment.mjs';
import { httpClient, measure, measureInRounds, numberEnv, settle } from './load.mjs';
import { pacedLoop, percentiles } from './webhook-measures.mjs';
import { peakMb, rawAppend } from './wearables.mjs';
import { repoRoot, startNode, stopChild } from '../setup.mjs';

const settings = () => ({
  phones: numberEnv('BENCH_PHONES', 50, { integer: true, min: 1 }),
  chunk: numberEnv('BENCH_PHONE_CHUNK', 10_000, { integer: true, min: 1 }),
  seconds: numberEnv('BENCH_PHONE_SECONDS', 20, { min: 1 }),
  replicas: numberEnv('BENCH_PHONE_API_REPLICAS', 2, { integer: true, min: 1 }),
  paceSeconds: numberEnv('BENCH_PHONE_PACE_SECONDS', 5, { min: 0.1 }),
  importMb: numberEnv('BENCH_IMPORT_MB', 256, { min: 0 }),
});
export const phoneSettings = () => void settings();

const DAY = 86_400_000;
const MINUTE = 60_000;

/** Linux resets a process's peak resident size (VmHWM) on `5` written to its clear_refs. */
const rssMb = (pid) => {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 102.4) / 10 : null;
  } catch {
    return null;
  }
};
const resetPeak = (pid) => {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
};

async function signIn(client, userId) {
  const token = (await client.expect(200, 'POST', `/v2/user/${userId}/sign_in_token`, { json: true })).json.sign_in_token;
  const form = new URLSearchParams({
    grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
    subject_token: token,
    subject_token_type: 'urn:healthbridge:sign-in-token',
  }).toString();
  const res = await client.expect(200, 'POST', '/v2/sdk/token', {
    body: form,
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-service-api-key': '' },
    json: true,
  });
  return res.json.access_token;
}

/** Chunk `k` of phone `p`: `size` minute heart-rate samples of its own, older for each chunk (new buckets every time). */
function chunkSamples(base, p, k, size) {
  const start = base - (k + 1) * size * MINUTE;
  return Array.from({ length: size }, (_, i) => ({ t: start + i * MINUTE, value: 55 + ((i + p) % 45) }));
}

/**
 * Starts `count` more api processes on the api's port (SO_REUSEPORT: the kernel spreads new connections over them),
 * resolving once each says it listens; returns a stop for them.
 */
async function startReplicas(env, count, log) {
  const replicas = [];
  for (let k = 2; k <= count + 1; k++) {
    const child = startNode('api/main.js', env.moreApiEnv({ LOG_LEVEL: 'info' }), `api-${k}`, { pipe: 'stdout' });
    replicas.push(child);
    await new Promise((resolve, reject) => {
      let seen = '';
      const onData = (chunk) => {
        seen = (seen + chunk).slice(-4096);
        if (seen.includes('"api listening"')) {
          child.stdout.off('data', onData);
          child.stdout.resume(); // its later lines are read and dropped
          resolve();
        }
      };
      child.stdout.on('data', onData);
      child.once('exit', (code) => reject(new Error(`api replica ${k} exited (${code}) before listening`)));
    });
    log(`bench: phones: api replica ${k} listening on the same port (pid ${child.pid})`);
  }
  return () => Promise.all(replicas.map((child) => stopChild(child)));
}

async function uploadScenario(env, s, log) {
  const client = httpClient(env.apiUrl, { headers: { 'x-service-api-key': env.tenant.teamKey }, timeoutMs: 120_000 });
  const phones = [];
  log(`bench: phones: signing in and connecting ${s.phones} phones...`);
  for (let p = 0; p < s.phones; p++) {
    const userId = (await client.expect(200, 'POST', '/v2/user/', { body: { client_user_id: `bench-phone-${env.runId}-${p}` }, json: true })).json.user_id;
    const token = await signIn(client, userId);
    await client.expect(200, 'POST', '/v2/link/provider/manual/apple_health_kit', {
      body: { user_id: userId },
      headers: { authorization: `Bearer ${token}`, 'x-service-api-key': '' },
    });
    phones.push({ userId, token, next: 0 });
  }
  client.close();
  // Enough chunks per phone for the three runs (up to ~30 chunks a second in the closed loops), made before them (gzip
  // on the phone is not the server's time). Every chunk is new samples, older each time (new buckets).
  const perPhone = Math.ceil(((s.seconds + 2) * 70) / s.phones) + Math.ceil((s.seconds + 2) / s.paceSeconds) + 2;
  log(`bench: phones: preparing ${perPhone} gzip chunks of ${s.chunk} samples per phone...`);
  const base = Math.floor(Date.now() / DAY) * DAY - DAY;
  for (const [p, phone] of phones.entries()) {
    phone.bodies = Array.from({ length: perPhone }, (_, k) =>
      gzipSync(
        JSON.stringify({
          stage: 'historical',
          provider: 'apple_health_kit',
          start_date: new Date(base - 4000 * DAY).toISOString(),
          time_zone: 'Europe/Berlin',
          data: chunkSamples(base, p, k, s.chunk).map(({ t, value }) => ({
            value,
            start_date: new Date(t).toISOString(),
            end_date: new Date(t).toISOString(),
            unit: 'bpm',
            type: 'watch',
          })),
        }),
      ),
    );
  }
  const kb = Math.round(phones[0].bodies[0].length / 1024);
  let resent = 0;
  /** Phone `p`'s next chunk, answered; a resend (all unchanged) once its made chunks ran out. */
  const send = async (uploads, p) => {
    const phone = phones[p];
    const k = phone.next++;
    if (k >= phone.bodies.length) resent++;
    const res = await uploads.expect(200, 'POST', `/v2/timeseries/${phone.userId}/heartrate`, {
      body: phone.bodies[k % phone.bodies.length],
      headers: { authorization: `Bearer ${phone.token}`, 'content-encoding': 'gzip', 'x-service-api-key': '' },
      json: true,
    });
    if (k < phone.bodies.length && res.json.samples.created !== s.chunk) throw new Error(`a new chunk stored ${JSON.stringify(res.json.samples)}`);
  };
  const uploadName = (replicas) =>
    `POST /v2/timeseries/{user}/heartrate, ${s.phones} phones, ${s.chunk}-sample gzip chunks (${kb} KB), ${replicas} api process${replicas > 1 ? 'es' : ''}`;
  // A client per run: its connections are made now, so they spread over the replicas listening now.
  const uploadsTo = (replicas, uploads) => ({ name: uploadName(replicas), fn: ({ worker }) => send(uploads, worker) });
  const scratch = env.db.collection('bench_raw_phone_buckets');
  await scratch.createIndex({ team_id: 1, user_id: 1, resource: 1, day: 1 });
  const rawNext = phones.map(() => 0);
  const rawAppends = {
    name: `raw append of the same ${s.chunk} samples to their day buckets' columns, ${s.phones} at once`,
    fn: async ({ worker }) => {
      const k = rawNext[worker]++;
      await rawAppend(scratch, { teamId: env.tenant.teamId, userId: `raw-${worker}`, timezoneOffset: 3600 }, chunkSamples(base, worker, k, s.chunk));
    },
  };
  const loopOpts = { concurrency: s.phones, seconds: s.seconds, warmupSeconds: 2, log };

  // Each run starts on a settled machine: the database's work after the last one's writes (checkpoints, vacuum) must
  // not count in the next (the raw appends, last, were measured at 0.65 of their pace without this).
  await settle(log);
  const singleClient = httpClient(env.apiUrl, { timeoutMs: 120_000 });
  const single = await measure({ ...uploadsTo(1, singleClient), ...loopOpts }).finally(() => singleClient.close());
  const stopReplicas = s.replicas > 1 ? await startReplicas(env, s.replicas - 1, log) : async () => {};
  let upload;
  let raw;
  let uploadRatio;
  let paced;
  try {
    await settle(log);
    // The uploads through every replica and the raw appends in turns (measureInRounds): their ratio compares
    // windows seconds apart, on the same machine with the same processes up.
    const uploads = httpClient(env.apiUrl, { timeoutMs: 120_000 });
    // Four rounds of 5 s (at the default 20 s), each after a 2 s ramp: an upload is answered in about a second with
    // 50 phones at once, and a round counts the uploads answered in it.
    const inTurns = await measureInRounds({ scenarios: [uploadsTo(s.replicas, uploads), rawAppends], ...loopOpts, rounds: 4, rampSeconds: 2 }).finally(() =>
      uploads.close(),
    );
    [upload, raw] = inTurns.results;
    uploadRatio = inTurns.ratio(0, 1);
    const rate = s.phones / s.paceSeconds;
    const name = `the same, paced: each phone a chunk every ${s.paceSeconds} s (${Math.round(rate * 10) / 10} chunks/s), ${s.replicas} api processes`;
    await settle(log);
    log(`bench: ${name} ... ${s.seconds} s`);
    const pacedUploads = httpClient(env.apiUrl, { timeoutMs: 120_000 });
    const out = await pacedLoop(rate, s.seconds, (seq) => send(pacedUploads, seq % s.phones));
    pacedUploads.close();
    if (out.errors) throw new Error(`paced uploads: ${out.errors} failed, first: ${out.firstError}`);
    paced = {
      name,
      concurrency: s.phones,
      seconds: s.seconds,
      ok: out.ok,
      rps: Math.round((out.ok / s.seconds) * 10) / 10,
      ...percentiles(out.latencies),
      errors: 0,
    };
    log(`bench: ${name}: p50 ${paced.p50Ms} ms, p99 ${paced.p99Ms} ms, max ${paced.maxMs} ms`);
  } finally {
    await stopReplicas();
  }
  await scratch.drop().catch(() => {});
  return { single, upload, uploadRatio, paced, raw, resent };
}

/** An export.zip of about `mb` MB of export.xml, written to `file` a slice of days at a time (never whole in memory). */
async function writeExport(file, mb, log) {
  const { generateExport, zipOf } = await distModule('test/support/apple-health-export.js');
  const xmlFile = `${file}.xml`;
  const out = createWriteStream(xmlFile);
  const write = (text) => new Promise((resolve) => (out.write(text) ? resolve() : out.once('drain', resolve)));
  let bytes = 0;
  let slice = 0;
  let header = true;
  const lastDay = Date.parse('2026-06-30T00:00:00Z');
  while (bytes < mb * 1024 * 1024) {
    const { xml } = generateExport({ days: 200, lastDay: new Date(lastDay - slice * 200 * DAY).toISOString().slice(0, 10), seed: slice + 1 });
    // The first slice's head (prolog, DTD, HealthData, ExportDate, Me), every slice's records, the root's end once.
    const body = xml.slice(header ? 0 : xml.indexOf('<Record'), xml.lastIndexOf('</HealthData>'));
    header = false;
    await write(body);
    bytes += Buffer.byteLength(body);
    slice++;
    if (slice % 10 === 0) log(`bench: phones: export ${Math.round(bytes / 1048576)}/${mb} MB written`);
  }
  await write('</HealthData>\n');
  await new Promise((resolve) => out.end(resolve));
  // The zip's one entry, deflated whole: zipOf takes buffers, so the bench's export is bounded by memory here (not in the server).
  const xml = readFileSync(xmlFile);
  writeFileSync(file, zipOf([{ name: 'apple_health_export/export.xml', data: xml }]));
  return { xmlBytes: xml.length, xmlFile };
}

async function importScenario(env, s, log) {
  const dir = path.join(repoRoot, '.devstack');
  const file = path.join(dir, `bench-export-${env.runId}.zip`);
  log(`bench: phones: writing an export of ${s.importMb} MB of export.xml...`);
  const { xmlBytes, xmlFile } = await writeExport(file, s.importMb, log);
  const zipBytes = statSync(file).size;
  try {
    // The raw baseline: a streaming XML parse of the same file (sax), nothing stored; the faster of two passes (the
    // first also warms the parser up, and a single pass varied 12-32 MB/s between runs here).
    const saxPass = async () => {
      const started = performance.now();
      const parser = sax.parser(false, { lowercase: false });
      let count = 0;
      parser.onopentag = () => count++;
      // Lenient mode goes on after an error (the export's malformed DTD, a stray control character).
      parser.onerror = () => {
        parser.error = null;
        parser.resume();
      };
      for await (const text of createReadStream(xmlFile, { encoding: 'utf8' })) parser.write(text);
      parser.close();
      return { seconds: (performance.now() - started) / 1000, count };
    };
    await settle(log);
    const passes = [await saxPass(), await saxPass()];
    const rawSeconds = Math.min(...passes.map((p) => p.seconds));
    const elements = passes[0].count;

    const client = httpClient(env.apiUrl, { headers: { 'x-service-api-key': env.tenant.teamKey }, timeoutMs: 3_600_000 });
    const userId = (await client.expect(200, 'POST', '/v2/user/', { body: { client_user_id: `bench-export-${env.runId}` }, json: true })).json.user_id;
    await settle(log);
    const workerPid = env.children.worker.pid;
    const reset = resetPeak(workerPid);
    // The worker's own size before (its workflow sandboxes, connections, caches): the import's share is what it adds.
    const workerBeforeMb = rssMb(workerPid);
    log(`bench: phones: uploading the ${Math.round(zipBytes / 1048576)} MB export.zip...`);
    const uploadStarted = performance.now();
    const res = await fetch(`${env.apiUrl}/v2/user/${userId}/import/apple_health`, {
      method: 'POST',
      headers: { 'x-service-api-key': env.tenant.teamKey, 'content-type': 'application/zip', 'content-length': String(zipBytes) },
      body: createReadStream(file),
      duplex: 'half',
    });
    if (res.status !== 201) throw new Error(`the export upload answered ${res.status}: ${await res.text()}`);
    const { id } = await res.json();
    const uploaded = performance.now();
    let view;
    // Polled often (its end is the clock: a 5 s poll made every time a multiple of 5 s), progress printed every 5 s.
    let printed = 0;
    for (;;) {
      view = (await client.expect(200, 'GET', `/v2/user/${userId}/import/apple_health/${id}`, { json: true })).json;
      if (view.status === 'completed' || view.status === 'failed') break;
      if (performance.now() - printed >= 5000) {
        printed = performance.now();
        log(
          `bench: phones: importing: ${Math.round(view.progress.xml_bytes_read / 1048576)}/${Math.round(xmlBytes / 1048576)} MB read, ${view.progress.records_read} elements`,
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    if (view.status !== 'completed') throw new Error(`the import failed: ${view.error}`);
    const importSeconds = (performance.now() - uploaded) / 1000;
    client.close();
    return {
      xmlMb: xmlBytes / 1048576,
      zipMb: zipBytes / 1048576,
      uploadSeconds: (uploaded - uploadStarted) / 1000,
      importSeconds,
      rawSeconds,
      elements,
      records: view.progress.records_read,
      samples: view.progress.samples,
      workerPeakMb: reset ? peakMb(workerPid) : null,
      workerBeforeMb,
    };
  } finally {
    rmSync(file, { force: true });
    rmSync(`${file}.xml`, { force: true });
  }
}

export async function phoneSuite(env, { log }) {
  const s = settings();
  const { single, upload, uploadRatio, paced, raw, resent } = await uploadScenario(env, s, log);
  // BENCH_IMPORT_MB=0: the uploads alone.
  const imp = s.importMb > 0 ? await importScenario(env, s, log) : null;
  const perSecond = (r) => Math.round(r.rps * s.chunk);
  const mbps = (mb, seconds) => Math.round((mb / seconds) * 10) / 10;
  const uploadRatios = [
    {
      name: `phone uploads / raw column appends (samples/s), ${s.phones} phones, ${s.replicas} api process${s.replicas > 1 ? 'es' : ''}`,
      of: upload,
      to: raw,
      ratio: uploadRatio,
      target: 0.3,
    },
    { name: `phone uploads / raw column appends (samples/s), ${s.phones} phones, one api process`, of: single, to: raw, target: null },
    {
      name: `phone upload p99 (ms), ${s.chunk}-sample chunks, ${s.phones} phones each every ${s.paceSeconds} s`,
      value: paced.p99Ms,
      target: 1000,
      unit: 'ms',
      atMost: true,
    },
  ];
  const uploadNote =
    `uploads: ${perSecond(upload)} samples/s stored through ${s.replicas} api processes (closed loop: p50 ${upload.p50Ms} ms, p99 ${upload.p99Ms} ms per ${s.chunk}-sample chunk; ` +
    `one process: ${perSecond(single)} samples/s, p99 ${single.p99Ms} ms) vs ${perSecond(raw)} samples/s raw column appends (p99 ${raw.p99Ms} ms); ` +
    `paced at ${paced.rps} chunks/s: p50 ${paced.p50Ms} ms, p99 ${paced.p99Ms} ms, max ${paced.maxMs} ms; ${resent} resent chunks (all unchanged) once a phone's made chunks ran out`;
  const results = [single, upload, paced, raw];
  if (!imp) return { results, ratios: uploadRatios, notes: [uploadNote] };
  const importRate = { name: `Apple Health import, MB of export.xml/s (${Math.round(imp.xmlMb)} MB)`, rps: imp.xmlMb / imp.importSeconds };
  const rawParse = { name: 'raw streaming parse of the same export.xml (sax, from the unzipped file), MB/s', rps: imp.xmlMb / imp.rawSeconds };
  return {
    results,
    ratios: [
      ...uploadRatios,
      { name: 'Apple Health import / raw streaming parse (MB/s)', of: importRate, to: rawParse, target: 0.5 },
      {
        name: `import: the worker's growth in peak memory (MB), ${Math.round(imp.xmlMb)} MB export`,
        value: imp.workerPeakMb === null || imp.workerBeforeMb === null ? null : Math.round(imp.workerPeakMb - imp.workerBeforeMb),
        target: 300,
        unit: 'MB',
        atMost: true,
      },
    ],
    notes: [
      uploadNote,
      `import: ${Math.round(imp.xmlMb)} MB export.xml (${Math.round(imp.zipMb)} MB zip, ${imp.records} elements) uploaded in ${Math.round(imp.uploadSeconds)} s, imported in ${Math.round(imp.importSeconds)} s = ${mbps(imp.xmlMb, imp.importSeconds)} MB/s; raw sax parse ${mbps(imp.xmlMb, imp.rawSeconds)} MB/s (${imp.elements} elements); samples ${JSON.stringify(imp.samples)}; worker ${imp.workerBeforeMb} MB before the import, peak ${imp.workerPeakMb} MB during it`,
    ],
  };
}
