// Data from phones in `npm run bench` (BENCH_SUITES=phones), each against a baseline measured in the same run:
//   - uploads: BENCH_PHONES (50) phones, signed in with their own SDK tokens, each sending gzip chunks of
//     BENCH_PHONE_CHUNK (10,000) new heart-rate samples to POST /v2/timeseries/{user_id}/heartrate at once (a closed
//     loop: a phone sends its next chunk when the last is answered), vs raw appends of the same samples to the columns
//     of their day buckets in a scratch collection (the database work of storing them, without reading, checking or
//     counting). Target: the answer's p99 under 1 s, and samples stored per second at least 0.3 of the raw appends;
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
import { httpClient, measure, numberEnv } from './load.mjs';
import { peakMb, rawAppend } from './wearables.mjs';
import { repoRoot } from '../setup.mjs';

const settings = () => ({
  phones: numberEnv('BENCH_PHONES', 50, { integer: true, min: 1 }),
  chunk: numberEnv('BENCH_PHONE_CHUNK', 10_000, { integer: true, min: 1 }),
  seconds: numberEnv('BENCH_PHONE_SECONDS', 20, { min: 1 }),
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
  // Enough chunks per phone for the window, made before it (gzip on the phone is not the server's time).
  const perPhone = Math.max(4, Math.ceil(s.seconds / 2) + 2);
  log(`bench: phones: preparing ${perPhone} gzip chunks of ${s.chunk} samples per phone...`);
  const base = Math.floor(Date.now() / DAY) * DAY - DAY;
  for (const [p, phone] of phones.entries()) {
    phone.bodies = Array.from({ length: perPhone }, (_, k) =>
      gzipSync(
        JSON.stringify({
          stage: 'historical',
          provider: 'apple_health_kit',
          start_date: new Date(base - 400 * DAY).toISOString(),
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
  const upload = await measure({
    name: `POST /v2/timeseries/{user}/heartrate, ${s.phones} phones, ${s.chunk}-sample gzip chunks (${kb} KB)`,
    concurrency: s.phones,
    seconds: s.seconds,
    warmupSeconds: 2,
    log,
    fn: async ({ worker }) => {
      const phone = phones[worker];
      const body = phone.bodies[phone.next++ % phone.bodies.length];
      const res = await client.expect(200, 'POST', `/v2/timeseries/${phone.userId}/heartrate`, {
        body,
        headers: { authorization: `Bearer ${phone.token}`, 'content-encoding': 'gzip', 'x-service-api-key': '' },
        json: true,
      });
      if (phone.next > phone.bodies.length) return; // a resend of a chunk (all unchanged) once the made ones ran out
      if (res.json.samples.created !== s.chunk) throw new Error(`a new chunk stored ${JSON.stringify(res.json.samples)}`);
    },
  });
  const resent = phones.reduce((n, p) => n + Math.max(0, p.next - p.bodies.length), 0);

  const scratch = env.db.collection('bench_raw_phone_buckets');
  await scratch.createIndex({ team_id: 1, user_id: 1, resource: 1, day: 1 });
  const rawNext = phones.map(() => 0);
  const raw = await measure({
    name: `raw append of the same ${s.chunk} samples to their day buckets' columns, ${s.phones} at once`,
    concurrency: s.phones,
    seconds: s.seconds,
    warmupSeconds: 2,
    log,
    fn: async ({ worker }) => {
      const k = rawNext[worker]++;
      await rawAppend(scratch, { teamId: env.tenant.teamId, userId: `raw-${worker}`, timezoneOffset: 3600 }, chunkSamples(base, worker, k, s.chunk));
    },
  });
  await scratch.drop().catch(() => {});
  client.close();
  return { upload, raw, resent };
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
    // The raw baseline: inflate and a streaming XML parse of the same file (sax), nothing stored.
    const rawStarted = performance.now();
    const parser = sax.parser(false, { lowercase: false });
    let elements = 0;
    parser.onopentag = () => elements++;
    // Lenient mode goes on after an error (the export's malformed DTD, a stray control character).
    parser.onerror = () => {
      parser.error = null;
      parser.resume();
    };
    for await (const text of createReadStream(xmlFile, { encoding: 'utf8' })) parser.write(text);
    parser.close();
    const rawSeconds = (performance.now() - rawStarted) / 1000;

    const client = httpClient(env.apiUrl, { headers: { 'x-service-api-key': env.tenant.teamKey }, timeoutMs: 3_600_000 });
    const userId = (await client.expect(200, 'POST', '/v2/user/', { body: { client_user_id: `bench-export-${env.runId}` }, json: true })).json.user_id;
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
    for (;;) {
      view = (await client.expect(200, 'GET', `/v2/user/${userId}/import/apple_health/${id}`, { json: true })).json;
      if (view.status === 'completed' || view.status === 'failed') break;
      log(
        `bench: phones: importing: ${Math.round(view.progress.xml_bytes_read / 1048576)}/${Math.round(xmlBytes / 1048576)} MB read, ${view.progress.records_read} elements`,
      );
      await new Promise((r) => setTimeout(r, 5000));
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
  const { upload, raw, resent } = await uploadScenario(env, s, log);
  // BENCH_IMPORT_MB=0: the uploads alone.
  const imp = s.importMb > 0 ? await importScenario(env, s, log) : null;
  const perSecond = (r) => Math.round(r.rps * s.chunk);
  const mbps = (mb, seconds) => Math.round((mb / seconds) * 10) / 10;
  const uploadRatios = [
    { name: `phone uploads / raw column appends (samples/s), ${s.phones} phones`, of: upload, to: raw, target: 0.3 },
    { name: `phone upload p99 (ms), ${s.chunk}-sample chunks, ${s.phones} at once`, value: upload.p99Ms, target: 1000, unit: 'ms', atMost: true },
  ];
  const uploadNote = `uploads: ${perSecond(upload)} samples/s stored through the API (p50 ${upload.p50Ms} ms, p99 ${upload.p99Ms} ms per ${s.chunk}-sample chunk) vs ${perSecond(raw)} samples/s raw column appends; ${resent} resent chunks (all unchanged) once a phone's made chunks ran out`;
  if (!imp) return { results: [upload, raw], ratios: uploadRatios, notes: [uploadNote] };
  const importRate = { name: `Apple Health import, MB of export.xml/s (${Math.round(imp.xmlMb)} MB)`, rps: imp.xmlMb / imp.importSeconds };
  const rawParse = { name: 'raw streaming parse of the same export.xml (sax, from the unzipped file), MB/s', rps: imp.xmlMb / imp.rawSeconds };
  return {
    results: [upload, raw],
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
