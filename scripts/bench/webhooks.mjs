// Webhook-delivery scenarios of `npm run bench` (issue #3 §4) and their baselines: events per second end to
// end, publish -> delivered latency p50/p99, with 1 and with 10 endpoints, against (a) plain HTTP POSTs of the
// same bodies from this process to the same receiver and (b) the raw-driver database work of the same
// deliveries (webhook-db-baseline.mjs: the event, delivery and attempt writes and the dispatcher's reads,
// batched by WEBHOOK_BATCH_SIZE, on scratch collections of the same database).
//
// The receiver (webhook-receiver.mjs) is a child process on 127.0.0.1 that answers 200 at once and keeps
// each delivery's first-arrival time; it is the clock for "delivered". Events are published from this
// process through an EventPublisher of dist/ (lib/webhooks/publisher.ts, the same code and group commit the
// api uses; one instance for the suite) to a team whose endpoints were created through the management API;
// the real worker process delivers them through Temporal.
//
// Per endpoint count k (each on its own team, so runs never see each other's events):
//   1. baseline throughput: N events x k POSTs, BENCH_WEBHOOK_BASELINE_CONCURRENCY (64) in closed loops;
//   2. baseline database work: N events x k deliveries with the raw driver (see above);
//   3. delivery throughput: N events published by BENCH_WEBHOOK_PUBLISHERS (64) closed-loop publishers,
//      timed from the first publish to the last first-arrival (the latency of this run is "saturated");
//   4. delivery latency: a paced run for BENCH_WEBHOOK_PACED_SECONDS (10) at BENCH_WEBHOOK_RATE events/s (200,
//      the rate of the issue's p99 target) with one endpoint, whatever 3 measured (a store that cannot keep up
//      shows it as a saturated run and a missed target); with more endpoints at most half the rate measured
//      in 3, so the system is not saturated; latency = first arrival - the time taken just before publishing
//      (data.sent_at);
//   5. baseline latency: the same pacing with plain POSTs;
//   6. with the most endpoints: 3 again while one competing process per core spins (CPU starvation: dispatcher
//      activities miss heartbeats and are retried while still sending; duplicates would show here).
// Then the bookkeeping from the store's own documents (webhook_deliveries by status, webhook_attempts per
// delivery: a delivery with more than one attempt was sent again) next to the receiver's duplicate count.
// Where the time goes: the dispatcher batches, rebuilt from the attempt documents (one batch's attempts share
// their recording time, timestamp + duration_ms), the CPU time each process used during the run
// (/proc/<pid>/stat), the publish calls' own latency; and the worker's peak memory (VmHWM).
//
//   BENCH_WEBHOOK_EVENTS=5000      events of the 1-endpoint throughput run (and of its database baseline)
//   BENCH_WEBHOOK_EVENTS_10=1000   events of the throughput run with more endpoints (x10 deliveries with 10)
//   BENCH_WEBHOOK_ENDPOINTS=1,10   endpoint counts to run
//   BENCH_WEBHOOK_TIMEOUT_SECONDS=180  per throughput run (paced runs: 60 s after the window); then the
//                                      partial figures are reported, and the next run waits up to
//   BENCH_WEBHOOK_DRAIN_SECONDS=120    for the backlog to drain (reported: whether the late deliveries came)
import { fork, spawn } from 'node:child_process';
import os from 'node:os';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { repoRoot, stopChild } from '../setup.mjs';
import { distModule } from './environment.mjs';
import { rawDeliveryWork } from './webhook-db-baseline.mjs';
import { httpClient, numberEnv } from './load.mjs';

const EVENT_TYPE = 'daily.data.steps.created';
const USER_ID = '3f6c2a9e-7d41-4b0a-9c3e-5a8b1d2e4f60';
const CLIENT_USER_ID = 'bench-client-user';
const PROGRESS_EVERY_MS = 5000;
const POLL_MS = 200;
const SETTLE_TIMEOUT_MS = 30_000;
const PACED_TIMEOUT_MS = 60_000; // after the pacing window
const CLK_TCK = 100; // Linux USER_HZ

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const round = (x, digits = 2) => (x === null || x === undefined || !Number.isFinite(x) ? null : Math.round(x * 10 ** digits) / 10 ** digits);
const plural = (k) => `${k} endpoint${k === 1 ? '' : 's'}`;

/** The suite's settings from BENCH_WEBHOOK_* (throws on a bad value: call it before starting anything). */
export function webhookSettings() {
  const counts = (process.env.BENCH_WEBHOOK_ENDPOINTS || '1,10').split(',').map((s) => Number(s.trim()));
  if (!counts.length || counts.some((k) => !Number.isInteger(k) || k < 1 || k > 50)) {
    throw new Error(`BENCH_WEBHOOK_ENDPOINTS=${process.env.BENCH_WEBHOOK_ENDPOINTS} must be a comma-separated list of integers 1..50`);
  }
  return {
    endpointCounts: counts,
    events1: numberEnv('BENCH_WEBHOOK_EVENTS', 5000, { integer: true, min: 1 }),
    eventsMany: numberEnv('BENCH_WEBHOOK_EVENTS_10', 1000, { integer: true, min: 1 }),
    publishers: numberEnv('BENCH_WEBHOOK_PUBLISHERS', 64, { integer: true, min: 1 }),
    baselineConcurrency: numberEnv('BENCH_WEBHOOK_BASELINE_CONCURRENCY', 64, { integer: true, min: 1 }),
    rate: numberEnv('BENCH_WEBHOOK_RATE', 200, { min: 1 }),
    pacedSeconds: numberEnv('BENCH_WEBHOOK_PACED_SECONDS', 10, { min: 1 }),
    timeoutSeconds: numberEnv('BENCH_WEBHOOK_TIMEOUT_SECONDS', 180, { min: 5 }),
    drainSeconds: numberEnv('BENCH_WEBHOOK_DRAIN_SECONDS', 120, { min: 0 }),
  };
}

// ------------------------------------------------------------------------------------------ receiver

async function startReceiver() {
  const child = fork(path.join(repoRoot, 'scripts', 'bench', 'webhook-receiver.mjs'), [], {
    cwd: repoRoot,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pending = new Map();
  let nextId = 0;
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the webhook receiver did not report its port within 20 s')), 20_000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the webhook receiver exited during start-up (${signal ?? `exit code ${code}`})`));
    });
    child.on('message', (msg) => {
      if (msg && msg.port !== undefined) {
        clearTimeout(timer);
        resolve(msg.port);
      } else if (msg && msg.id !== undefined) {
        pending.get(msg.id)?.(msg);
        pending.delete(msg.id);
      }
    });
  });
  const ask = (cmd, run) =>
    new Promise((resolve, reject) => {
      if (child.exitCode !== null || child.signalCode !== null) return reject(new Error('the webhook receiver has exited'));
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`the webhook receiver did not answer '${cmd}' within 10 s`));
      }, 10_000);
      pending.set(id, (msg) => {
        clearTimeout(timer);
        if (msg.error) reject(new Error(`webhook receiver: ${msg.error}`));
        else resolve(msg);
      });
      child.send({ id, cmd, run });
    });
  return { url: `http://127.0.0.1:${port}`, pid: child.pid, child, ask, stop: () => stopChild(child, 5000) };
}

// ------------------------------------------------------------------------------------------ /proc readings

function procStatus(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
    return { rssMb: round(kb('VmRSS') / 1024, 1), hwmMb: round(kb('VmHWM') / 1024, 1) };
  } catch {
    return null;
  }
}

/** CPU seconds (user + system) a process has used so far, or null. */
function ownCpuSeconds(stat) {
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(rest[1]), seconds: (Number(rest[11]) + Number(rest[12])) / CLK_TCK };
}

/** CPU seconds of a process and its live children (PostgreSQL's work is done by the postmaster's children). */
function cpuSeconds(pid) {
  try {
    let total = ownCpuSeconds(readFileSync(`/proc/${pid}/stat`, 'utf8')).seconds;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const child = ownCpuSeconds(readFileSync(`/proc/${entry}/stat`, 'utf8'));
        if (child.ppid === pid) total += child.seconds;
      } catch {}
    }
    return total;
  } catch {
    return null;
  }
}

/** Starts measuring the CPU of named processes; the returned function reads seconds used and % of one core. */
export function cpuMeter(pids) {
  const read = () => Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, pid ? cpuSeconds(pid) : null]));
  const before = read();
  const started = performance.now();
  return () => {
    const after = read();
    const seconds = (performance.now() - started) / 1000;
    const out = { wallSeconds: round(seconds, 2) };
    for (const name of Object.keys(pids)) {
      if (before[name] === null || after[name] === null) continue;
      const used = after[name] - before[name];
      out[name] = { cpuSeconds: round(used, 2), pctOfOneCore: round((used / seconds) * 100, 0) };
    }
    return out;
  };
}

// ------------------------------------------------------------------------------------------ dispatcher batches

/** Counts the worker's log lines (it runs at the level bench.mjs asks for this suite). */
function logLineCounter(env) {
  let lines = 0;
  const off = env.onWorkerLog(() => {
    lines++;
  });
  return {
    /** Lines since the last take(). */
    take() {
      const n = lines;
      lines = 0;
      return n;
    },
    close: off,
  };
}

/**
 * The dispatcher batches of a run, rebuilt from the team's attempt documents since `since`: the attempts of one
 * batch are recorded with one clock reading (lib/webhooks/dispatcher.ts outcomesOf: timestamp = that reading -
 * duration_ms), so timestamp + duration_ms identifies the batch.
 */
async function dispatcherBatches(db, teamId, since, wallMs, workerLogLines) {
  const docs = await db
    .collection('webhook_attempts')
    .find({ team_id: teamId, timestamp: { $gte: new Date(since) } }, { projection: { endpoint_id: 1, timestamp: 1, duration_ms: 1 } })
    .toArray();
  if (!docs.length) return { workerLogLines, batches: 0 };
  const byEndpoint = new Map();
  let postMs = 0;
  let postMaxMs = 0;
  for (const d of docs) {
    const at = d.timestamp.getTime() + d.duration_ms;
    if (!byEndpoint.has(d.endpoint_id)) byEndpoint.set(d.endpoint_id, new Map());
    const m = byEndpoint.get(d.endpoint_id);
    m.set(at, (m.get(at) ?? 0) + 1);
    postMs += d.duration_ms;
    postMaxMs = Math.max(postMaxMs, d.duration_ms);
  }
  const sizes = [];
  let gapMs = 0;
  let gaps = 0;
  for (const m of byEndpoint.values()) {
    const times = [...m.keys()].sort((x, y) => x - y);
    for (const t of times) sizes.push(m.get(t));
    for (let i = 1; i < times.length; i++) {
      gapMs += times[i] - times[i - 1];
      gaps++;
    }
  }
  return {
    workerLogLines,
    batches: sizes.length,
    deliveries: docs.length,
    meanBatch: round(docs.length / sizes.length, 1),
    maxBatch: Math.max(...sizes),
    // One dispatcher's consecutive batches: find due, read events, send, (the previous batch's recording overlaps).
    meanMsBetweenBatches: gaps ? round(gapMs / gaps, 1) : null,
    batchesPerSecPerEndpoint: wallMs > 0 ? round(sizes.length / byEndpoint.size / (wallMs / 1000), 1) : null,
    postMs: { mean: round(postMs / docs.length, 1), max: postMaxMs },
  };
}

// ------------------------------------------------------------------------------------------ Temporal history

/**
 * Activity attempts of the endpoints' dispatcher workflows (every run, incl. continued-as-new ones): how many
 * batches ran, how many were retries, and why the previous attempt failed (e.g. a heartbeat timeout: the
 * batch may then have run twice). Reads the histories, so call it when the runs are over.
 */
async function dispatcherRetries(client, workflowIds) {
  const out = { workflowRuns: 0, activities: 0, retried: 0, reasons: {}, running: 0, runningRetried: 0 };
  for (const workflowId of workflowIds) {
    const runIds = [];
    try {
      for await (const wf of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runIds.push(wf.runId);
    } catch {
      // visibility unavailable: the latest run only
    }
    if (!runIds.length) runIds.push(undefined);
    // An activity enters the history when it finishes: the ones still running are read from the latest run.
    try {
      const { raw } = await client.workflow.getHandle(workflowId).describe();
      for (const a of raw.pendingActivities ?? []) {
        out.running++;
        if ((a.attempt ?? 1) > 1) {
          out.runningRetried++;
          const reason = a.lastFailure?.message ?? 'unknown';
          out.reasons[reason] = (out.reasons[reason] ?? 0) + 1;
        }
      }
    } catch {
      // not started, or gone
    }
    for (const runId of runIds) {
      const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
      out.workflowRuns++;
      for (const e of history.events ?? []) {
        const started = e.activityTaskStartedEventAttributes;
        if (!started) continue;
        out.activities++;
        if ((started.attempt ?? 1) > 1) {
          out.retried++;
          const reason = started.lastFailure?.message ?? 'unknown';
          out.reasons[reason] = (out.reasons[reason] ?? 0) + 1;
        }
      }
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------ load shapes

/** `count` operations in `concurrency` closed loops; returns { ok, errors, firstError, latencies (ms) }. */
async function closedLoop(count, concurrency, op) {
  let next = 0;
  const out = { ok: 0, errors: 0, firstError: null, latencies: [] };
  const loop = async () => {
    while (next < count) {
      const seq = next++;
      const started = performance.now();
      try {
        await op(seq);
        out.ok++;
        out.latencies.push(performance.now() - started);
      } catch (err) {
        out.errors++;
        out.firstError ??= err?.message ?? String(err);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, loop));
  return out;
}

/** `rate` operations per second for `seconds` (open loop: started on schedule, whatever is in flight). */
async function pacedLoop(rate, seconds, op) {
  const total = Math.max(1, Math.round(rate * seconds));
  const out = { ok: 0, errors: 0, firstError: null, latencies: [] };
  const inFlight = new Set();
  const started = performance.now();
  let launched = 0;
  while (launched < total) {
    const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * rate) + 1);
    while (launched < due) {
      const seq = launched++;
      const t = performance.now();
      const p = op(seq).then(
        () => {
          out.ok++;
          out.latencies.push(performance.now() - t);
        },
        (err) => {
          out.errors++;
          out.firstError ??= err?.message ?? String(err);
        },
      );
      inFlight.add(p);
      p.finally(() => inFlight.delete(p));
    }
    await sleep(2);
  }
  await Promise.all(inFlight);
  return out;
}

function percentiles(values) {
  const sorted = Float64Array.from(values).sort();
  const at = (p) => (sorted.length ? sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1] : null);
  return { p50Ms: round(at(50)), p99Ms: round(at(99)), maxMs: round(sorted.length ? sorted[sorted.length - 1] : null) };
}

// ------------------------------------------------------------------------------------------ the suite

/**
 * Waits until the receiver has seen `expected()` deliveries of `run` (or the deadline), printing progress.
 * `sampleMemory` is called at each poll.
 */
async function waitDelivered({ receiver, run, expected, deadline, label, log, progress, sampleMemory }) {
  let stats = await receiver.ask('stats', run);
  let lastLog = performance.now();
  let lastCount = 0;
  while (stats.unique < expected() && Date.now() < deadline) {
    await sleep(POLL_MS);
    sampleMemory();
    stats = await receiver.ask('stats', run);
    if (performance.now() - lastLog >= PROGRESS_EVERY_MS) {
      const rate = (stats.unique - lastCount) / ((performance.now() - lastLog) / 1000);
      log(`bench: ${label}: ${progress()}delivered ${stats.unique}/${expected()} (${Math.round(rate)}/s now)`);
      lastLog = performance.now();
      lastCount = stats.unique;
    }
  }
  return { ...stats, polledAt: Date.now() };
}

export async function webhookSuite(env, { log = console.log } = {}) {
  const settings = webhookSettings();
  const [{ EventPublisher, publishEvent }, { loadConfig }, { connectTemporal }, { createLogger }, catalogue, { workflowIds }] = await Promise.all([
    distModule('lib/webhooks/publisher.js'),
    distModule('lib/platform/config.js'),
    distModule('lib/platform/temporal.js'),
    distModule('lib/platform/logger.js'),
    distModule('schemas/event-catalogue.js'),
    distModule('workflows/ids.js'),
  ]);
  const sample = catalogue.findEventType(EVENT_TYPE)?.sample ?? { user_id: USER_ID };
  const config = loadConfig({ ...process.env, ...env.childEnv });
  const repos = env.repos;

  const cleanups = [];
  const results = [];
  const ratios = [];
  const notes = [];
  const workerPid = env.children.worker.pid;
  let workerRssPeakMb = 0;
  const sampleMemory = () => {
    const s = procStatus(workerPid);
    if (s?.rssMb > workerRssPeakMb) workerRssPeakMb = s.rssMb;
    return s;
  };

  try {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.stop());
    const temporal = await connectTemporal(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE, config.TEMPORAL_TASK_QUEUE);
    cleanups.push(() => temporal.connection.close());
    // One publisher for the suite, as the api has one per process (group commit of concurrent publishes).
    const publisher = new EventPublisher({ config, repos, temporal: { client: temporal.client, taskQueue: temporal.taskQueue }, logger: createLogger('warn', 'bench-publisher') });
    cleanups.push(() => publisher.settle()); // runs before the Temporal connection closes (cleanups run in reverse)
    const deps = { publisher };
    const logLines = logLineCounter(env);
    cleanups.push(() => logLines.close());

    const mgmtKey = await repos.tenancy.createManagementKey(env.tenant.orgId, 'bench-webhooks', 'org_admin', []);
    const mgmt = httpClient(env.apiUrl, { headers: { 'x-management-key': mgmtKey.value } });
    cleanups.push(() => mgmt.close());
    const post = httpClient(receiver.url);
    cleanups.push(() => post.close());

    const pids = {
      bench: process.pid,
      receiver: receiver.pid,
      worker: workerPid,
      api: env.children.api.pid,
      ferretdb: env.stackPids?.mongo,
      postgres: env.stackPids?.postgres,
      temporal: env.stackPids?.temporal,
    };
    log(
      `bench: webhooks: receiver ${receiver.url} (pid ${receiver.pid}); worker pid ${workerPid} ` +
        `(LOG_LEVEL=${env.workerLogLevel}); ${settings.publishers} publishers, baseline ${settings.baselineConcurrency} concurrent`,
    );

    for (const k of settings.endpointCounts) {
      const n = k === 1 ? settings.events1 : settings.eventsMany;
      const team = await repos.tenancy.createTeam(env.tenant.orgId, `Bench webhooks ${k}`, 'sandbox', 'us');
      const hooksPath = `/v1/org/${env.tenant.orgId}/team/${team._id}/sandbox/webhook`;
      const paths = [];
      const endpointIds = [];
      for (let i = 0; i < k; i++) {
        paths.push(`/hook/${k}/${i}`);
        const res = await mgmt.expect(200, 'POST', hooksPath, { body: { url: `${receiver.url}/hook/${k}/${i}`, description: `bench ${k}/${i}` }, json: true });
        endpointIds.push(res.json.id);
      }
      log(`bench: webhooks: team ${team._id} with ${plural(k)} -> ${receiver.url}/hook/${k}/*`);

      // One event's body and headers as the worker sends them (lib/webhooks/model.ts envelopeOf; signing per Standard Webhooks).
      const secret = randomBytes(32);
      const baselineRequest = (run, seq) => {
        const body = JSON.stringify({
          event_type: EVENT_TYPE,
          data: { ...sample, bench_run: run, seq, sent_at: Date.now() },
          team_id: team._id,
          user_id: USER_ID,
          client_user_id: CLIENT_USER_ID,
        });
        const id = randomUUID();
        const ts = String(Math.floor(Date.now() / 1000));
        const sig = `v1,${createHmac('sha256', secret).update(`${id}.${ts}.${body}`).digest('base64')}`;
        const headers = {
          'user-agent': 'Healthbridge-Webhooks/1.0',
          'content-type': 'application/json',
          'webhook-id': id,
          'webhook-timestamp': ts,
          'webhook-signature': sig,
          'svix-id': id,
          'svix-timestamp': ts,
          'svix-signature': sig,
        };
        return { body, headers };
      };
      /** One baseline "event": the same body POSTed to every endpoint path (k requests at once). */
      const baselineEvent = async (run, seq) => {
        const { body, headers } = baselineRequest(run, seq);
        await Promise.all(paths.map((p) => post.expect(200, 'POST', p, { headers, body })));
      };
      // The last batch's attempts and delivery updates are written after the receiver has seen its POSTs: wait
      // until none of the team's deliveries is pending before reading the figures from the store.
      const queueEmpty = async () =>
        !(await env.db.collection('webhook_deliveries').findOne({ team_id: team._id, status: 'pending' }, { projection: { _id: 1 } }));
      const settle = async () => {
        const deadline = Date.now() + SETTLE_TIMEOUT_MS;
        while (Date.now() < deadline && !(await queueEmpty())) await sleep(1000);
        await sleep(500);
      };
      /**
       * After a run that did not complete in time: waits (receiver counts; the queue) until every delivery of
       * `runs` has arrived or BENCH_WEBHOOK_DRAIN_SECONDS passed, so the next run starts from an empty queue,
       * and records on each result whether and when its late deliveries came.
       */
      const drain = async (runs) => {
        const late = runs.filter((r) => !r.complete);
        if (!late.length || settings.drainSeconds === 0) return;
        const started = Date.now();
        const deadline = started + settings.drainSeconds * 1000;
        log(`bench: webhooks ${plural(k)}: waiting up to ${settings.drainSeconds} s for the backlog to drain before going on...`);
        let lastLog = Date.now();
        let stats = [];
        for (;;) {
          stats = await Promise.all(late.map((r) => receiver.ask('stats', r.run)));
          const arrived = stats.every((st, i) => st.unique >= late[i].expectedDeliveries - late[i].errors * k);
          if ((arrived && (await queueEmpty())) || Date.now() >= deadline) break;
          if (Date.now() - lastLog >= 10_000) {
            log(`bench: webhooks ${plural(k)}: draining: ${late.map((r, i) => `${r.name} ${stats[i].unique}/${r.expectedDeliveries}`).join(', ')}`);
            lastLog = Date.now();
          }
          await sleep(1000);
        }
        late.forEach((r, i) => {
          const waited = round((Date.now() - (r.gaveUpAt ?? started)) / 1000, 1);
          r.eventually = { delivered: stats[i].unique, duplicates: stats[i].duplicates, complete: stats[i].unique >= r.expectedDeliveries - r.errors * k, afterDrainSeconds: waited };
          delete r.gaveUpAt;
          log(
            `bench: ${r.name}: ${r.eventually.complete ? 'all' : 'still only'} ${stats[i].unique}/${r.expectedDeliveries} delivered after ` +
              `${waited} s more (${stats[i].duplicates} duplicates in all)`,
          );
        });
      };

      const publishOne = (run, seq) =>
        publishEvent(deps, {
          teamId: team._id,
          eventType: EVENT_TYPE,
          data: { ...sample, bench_run: run, seq, sent_at: Date.now() },
          userId: USER_ID,
          clientUserId: CLIENT_USER_ID,
          idempotencyKey: `${run}-${seq}`,
        });

      const finish = async ({ name, run, kind, events, load, t0, stats, extra = {} }) => {
        const lat = await receiver.ask('latency', run);
        const expected = events * k;
        const elapsedS = stats.lastAt !== null ? (stats.lastAt - t0) / 1000 : null;
        const delivered = stats.unique;
        const result = {
          name,
          suite: 'webhooks',
          kind: 'webhook',
          shape: kind,
          endpoints: k,
          events,
          expectedDeliveries: expected,
          delivered,
          complete: delivered >= expected,
          seconds: round(elapsedS, 2),
          eventsPerSec: elapsedS ? round(delivered / k / elapsedS, 1) : null,
          deliveriesPerSec: elapsedS ? round(delivered / elapsedS, 1) : null,
          rps: elapsedS ? round(delivered / elapsedS, 1) : 0,
          ok: delivered,
          p50Ms: lat.p50Ms,
          p90Ms: lat.p90Ms,
          p99Ms: lat.p99Ms,
          maxMs: lat.maxMs,
          meanMs: lat.meanMs,
          duplicates: stats.duplicates,
          errors: load.errors,
          firstError: load.firstError,
          sendCallMs: percentiles(load.latencies),
          ...extra,
        };
        if (!result.complete) result.gaveUpAt = stats.polledAt;
        result.run = run; // the receiver keeps its figures until this endpoint count is done (drain)
        log(
          `bench: ${name}: ${delivered}/${expected} delivered in ${result.seconds} s = ${result.eventsPerSec} events/s ` +
            `(${result.deliveriesPerSec} deliveries/s), latency p50 ${result.p50Ms} ms p99 ${result.p99Ms} ms, ` +
            `${stats.duplicates} duplicates, ${load.errors} send errors` +
            (result.complete ? '' : ` -- INCOMPLETE after ${round((stats.polledAt - t0) / 1000, 0)} s`),
        );
        if (load.firstError) log(`bench: ${name}: first error: ${load.firstError}`);
        results.push(result);
        return result;
      };

      const runBaselineThroughput = async () => {
        const run = `base-tput-${k}`;
        const name = `plain POST baseline, ${plural(k)}`;
        log(`bench: ${name} ... ${n} events x ${k} POSTs, ${settings.baselineConcurrency} concurrent`);
        const t0 = Date.now();
        const cpu = cpuMeter(pids);
        // Flattened so the concurrency counts requests, like the worker's batches do. (With k > 1 each request
        // has its own webhook-id; the receiver keys by path + id, so every request is one delivery.)
        const load = await closedLoop(n * k, settings.baselineConcurrency, async (i) => {
          const { body, headers } = baselineRequest(run, Math.floor(i / k));
          return post.expect(200, 'POST', paths[i % k], { headers, body });
        });
        const stats = await waitDelivered({
          receiver, run, expected: () => (n * k) - load.errors, deadline: t0 + settings.timeoutSeconds * 1000, label: name, log,
          progress: () => '', sampleMemory,
        });
        return finish({ name, run, kind: 'throughput', events: n, load, t0, stats, extra: { cpu: cpu() } });
      };

      /** The raw-driver database work of the same deliveries (webhook-db-baseline.mjs). */
      const runDbBaseline = async () => {
        const name = `raw driver database work, ${plural(k)} (baseline)`;
        const batchSize = config.WEBHOOK_BATCH_SIZE;
        log(`bench: ${name} ... ${n} events x ${k} deliveries, batches of ${batchSize} (WEBHOOK_BATCH_SIZE)`);
        const cpu = cpuMeter(pids);
        let r;
        try {
          r = await rawDeliveryWork(env, {
            events: n, endpoints: k, batchSize, teamId: team._id, eventType: EVENT_TYPE, userId: USER_ID, clientUserId: CLIENT_USER_ID, config,
            makeData: (seq) => ({ ...sample, bench_run: 'raw-db', seq, sent_at: Date.now() }),
          });
        } catch (err) {
          // Reported (its ratio is n/a), not fatal: the delivery runs still say what they measure.
          log(`bench: ${name}: FAILED: ${err.message}`);
          r = { failed: err.message, seconds: null, eventsPerSec: null, deliveriesPerSec: 0, delivered: 0, batches: 0, opMs: {} };
        }
        const result = {
          name,
          suite: 'webhooks',
          kind: 'webhook',
          shape: 'throughput',
          endpoints: k,
          events: n,
          expectedDeliveries: n * k,
          delivered: r.delivered,
          complete: true,
          seconds: r.seconds,
          eventsPerSec: r.eventsPerSec,
          deliveriesPerSec: r.deliveriesPerSec,
          rps: r.deliveriesPerSec,
          ok: r.delivered,
          p50Ms: null,
          p90Ms: null,
          p99Ms: null,
          maxMs: null,
          meanMs: null,
          duplicates: 0,
          errors: r.failed ? 1 : 0,
          firstError: r.failed ?? null,
          batchSize,
          dbBatches: r.batches,
          dbOpMs: r.opMs,
          cpu: cpu(),
        };
        if (!r.failed) {
          log(
            `bench: ${name}: ${r.delivered} deliveries in ${r.seconds} s = ${r.eventsPerSec} events/s (${r.deliveriesPerSec} deliveries/s); ` +
              `ms per operation kind, summed: ${Object.entries(r.opMs).map(([op, ms]) => `${op} ${ms}`).join(', ')}`,
          );
        }
        results.push(result);
        return result;
      };

      const runDeliveryThroughput = async ({ tag = '', label = '' } = {}) => {
        const run = `tput${tag}-${k}`;
        const name = `webhook delivery, ${plural(k)}${label ? `, ${label}` : ''}`;
        log(`bench: ${name} ... ${n} events (${n * k} deliveries), ${settings.publishers} concurrent publishers`);
        logLines.take();
        const t0 = Date.now();
        const cpu = cpuMeter(pids);
        let published = 0;
        let publishedAt = null;
        const loadPromise = closedLoop(n, settings.publishers, async (seq) => {
          await publishOne(run, seq);
          published++;
        }).then((load) => {
          publishedAt = Date.now();
          return load;
        });
        let load = null;
        loadPromise.then((l) => (load = l));
        const stats = await waitDelivered({
          receiver, run, deadline: t0 + settings.timeoutSeconds * 1000, label: name, log, sampleMemory,
          expected: () => (load ? load.ok * k : n * k),
          progress: () => (load ? '' : `published ${published}/${n}, `),
        });
        load = await loadPromise;
        await settle();
        const cpuUsed = cpu();
        const wallMs = stats.lastAt !== null ? stats.lastAt - t0 : Date.now() - t0;
        const worker = await dispatcherBatches(env.db, team._id, t0, wallMs, logLines.take());
        return finish({
          name, run, kind: 'throughput', events: n, load, t0, stats,
          extra: {
            publishSeconds: round((publishedAt - t0) / 1000, 2),
            publishPerSec: round(load.ok / ((publishedAt - t0) / 1000), 1),
            worker,
            cpu: cpuUsed,
          },
        });
      };

      const runPaced = async ({ rate, baseline }) => {
        const run = `${baseline ? 'base-' : ''}paced-${k}`;
        const name = `${baseline ? 'plain POST baseline' : 'webhook delivery'}, ${plural(k)}, paced ${round(rate, 0)}/s`;
        log(`bench: ${name} ... ${settings.pacedSeconds} s`);
        logLines.take();
        const t0 = Date.now();
        const cpu = cpuMeter(pids);
        const total = Math.max(1, Math.round(rate * settings.pacedSeconds));
        let sent = 0;
        let load = null;
        const loadPromise = pacedLoop(rate, settings.pacedSeconds, async (seq) => {
          await (baseline ? baselineEvent(run, seq) : publishOne(run, seq));
          sent++;
        });
        loadPromise.then((l) => (load = l));
        const stats = await waitDelivered({
          receiver, run, deadline: t0 + settings.pacedSeconds * 1000 + PACED_TIMEOUT_MS, label: name, log, sampleMemory,
          expected: () => (load ? load.ok * k : total * k),
          progress: () => (load ? '' : `${baseline ? 'sent' : 'published'} ${sent}/${total}, `),
        });
        load = await loadPromise;
        const events = load.ok + load.errors;
        if (!baseline) await settle();
        const cpuUsed = cpu();
        const worker = baseline ? null : await dispatcherBatches(env.db, team._id, t0, stats.lastAt !== null ? stats.lastAt - t0 : Date.now() - t0, logLines.take());
        // Saturated: deliveries fell behind the offered rate (first to last arrival took over 1.2 x the pacing
        // window, i.e. under ~83% of the offered rate), so the latency includes queueing.
        const span = stats.lastAt !== null ? stats.lastAt - stats.firstAt : Infinity;
        const saturated = span > 1.2 * settings.pacedSeconds * 1000 || stats.unique < load.ok * k;
        return finish({
          name: saturated ? `${name} (saturated)` : name,
          run, kind: 'latency', events, load, t0, stats,
          extra: { rate: round(rate, 1), saturated, ...(worker ? { worker } : {}), cpu: cpuUsed },
        });
      };

      const baseTput = await runBaselineThroughput();
      const baseDb = await runDbBaseline();
      const tput = await runDeliveryThroughput();
      await drain([tput]);
      // One endpoint: the target's rate. More: not saturated, at most half the rate just measured (and at most BENCH_WEBHOOK_RATE).
      const rate = k === 1 ? settings.rate : Math.max(1, Math.min(settings.rate, tput.eventsPerSec ? tput.eventsPerSec / 2 : settings.rate));
      const paced = await runPaced({ rate, baseline: false });
      await drain([paced]);
      const basePaced = await runPaced({ rate, baseline: true });
      // Under CPU starvation dispatcher activities miss their heartbeats and Temporal retries them while they
      // are still sending: the run that counts duplicates. A competing process per core spins meanwhile.
      let starved = null;
      if (k === Math.max(...settings.endpointCounts)) {
        const burners = os.cpus().map(() => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
        try {
          starved = await runDeliveryThroughput({ tag: '-starved', label: `CPU saturated by ${burners.length} competing processes` });
        } finally {
          for (const b of burners) b.kill('SIGKILL');
        }
        await drain([starved]);
      }
      for (const r of [baseTput, tput, paced, basePaced, starved].filter(Boolean)) await receiver.ask('forget', r.run);

      // Bookkeeping after both runs, from the store's documents: one delivery document per (event, endpoint)
      // with its status and attempt counter, one attempt document per attempt. Every delivery should have
      // succeeded at its first attempt, with one attempt document and a counter of 1. A batch sent again (its
      // activity retried before the outcome was recorded) writes attempt documents with the same ids, which
      // are dropped: it shows as a counter above the attempt documents, and at the receiver as duplicates.
      const w = env.db;
      const [deliveryDocs, attemptDocs] = await Promise.all([
        w.collection('webhook_deliveries').find({ team_id: team._id }, { projection: { status: 1, attempts: 1 } }).toArray(),
        w.collection('webhook_attempts').find({ team_id: team._id }, { projection: { event_id: 1, endpoint_id: 1, status_code: 1 } }).toArray(),
      ]);
      const byStatus = { pending: 0, succeeded: 0, failed: 0, cancelled: 0 };
      for (const d of deliveryDocs) byStatus[d.status] = (byStatus[d.status] ?? 0) + 1;
      const succeeded = byStatus.succeeded;
      const queued = byStatus.pending;
      const attempts = attemptDocs.length;
      const failedAttempts = attemptDocs.filter((a) => !(a.status_code >= 200 && a.status_code <= 299)).length;
      const attemptsPer = new Map();
      for (const a of attemptDocs) {
        const id = `${a.event_id}:${a.endpoint_id}`;
        attemptsPer.set(id, (attemptsPer.get(id) ?? 0) + 1);
      }
      const repeated = [...attemptsPer.values()].filter((c) => c > 1);
      const resent = { deliveries: repeated.length, extraAttempts: repeated.reduce((x, c) => x + c - 1, 0) };
      // The attempt counter on each delivery against its attempt documents.
      const counters = { aboveDocuments: 0, belowDocuments: 0, succeededWithoutAttempt: 0 };
      for (const d of deliveryDocs) {
        const docs = attemptsPer.get(d._id) ?? 0;
        if (d.attempts > docs) counters.aboveDocuments++;
        else if (d.attempts < docs) counters.belowDocuments++;
        if (d.status === 'succeeded' && docs === 0) counters.succeededWithoutAttempt++;
      }
      const counterMismatches = counters.aboveDocuments + counters.belowDocuments;
      const published = [tput, paced, starved].filter(Boolean).reduce((sum, r) => sum + r.events - r.errors, 0);
      let temporalRetries = null;
      try {
        temporalRetries = await dispatcherRetries(temporal.client, endpointIds.map((id) => workflowIds.webhookDispatch(id)));
      } catch (err) {
        log(`bench: webhooks: could not read the dispatcher histories: ${err.message}`);
      }
      const bookkeeping = {
        published,
        expectedDeliveries: published * k,
        deliveryDocuments: deliveryDocs.length,
        byStatus,
        attempts,
        failedAttempts,
        resent,
        counters,
        temporalRetries,
      };
      tput.bookkeeping = bookkeeping;
      const reasons = temporalRetries ? Object.entries(temporalRetries.reasons).map(([m, c]) => `${c}x ${m}`).join('; ') : '';
      const retryText = temporalRetries
        ? `${temporalRetries.activities} dispatcher activities finished, ${temporalRetries.retried} of them retries` +
          (temporalRetries.running ? `, ${temporalRetries.running} still running (${temporalRetries.runningRetried} of them retries)` : '') +
          (reasons ? ` (${reasons})` : '')
        : 'dispatcher histories not read';
      const statusText = `${deliveryDocs.length} delivery documents (${Object.entries(byStatus).map(([st, c]) => `${c} ${st}`).join(', ')})`;
      const resentText = resent.deliveries
        ? `${resent.deliveries} deliveries with more than one attempt document (${resent.extraAttempts} extra)`
        : 'no delivery has more than one attempt document';
      const counterText = counterMismatches || counters.succeededWithoutAttempt
        ? `attempt counter above the attempt documents on ${counters.aboveDocuments} deliveries (recorded twice: sent again), ` +
          `below on ${counters.belowDocuments}; ${counters.succeededWithoutAttempt} succeeded deliveries without any attempt document (record lost)`
        : 'every attempt counter matches its attempt documents';
      log(
        `bench: webhooks ${plural(k)}: ${published} events published, ${statusText}, ${attempts} attempt documents ` +
          `(${failedAttempts} failed), ${resentText}; ${counterText}; ${retryText}`,
      );
      notes.push(
        `bookkeeping, ${plural(k)}: ${succeeded}/${published * k} deliveries succeeded, ${queued} still pending` +
          (byStatus.failed || byStatus.cancelled ? `, ${byStatus.failed} failed, ${byStatus.cancelled} cancelled` : '') +
          `; ${attempts} attempts, ` +
          (failedAttempts ? `${failedAttempts} FAILED (their latency includes the retry delay)` : 'none failed (every latency above is a first attempt)') +
          `; ${resentText}; ${counterText}; ${retryText}`,
      );

      ratios.push({ name: `webhook delivery / plain POST, ${plural(k)} (deliveries/s)`, of: tput, to: baseTput, target: null, note: 'pipeline cost over raw HTTP' });
      ratios.push({
        name: `webhook delivery / raw driver database work, ${plural(k)} (events/s)`,
        of: tput,
        to: baseDb,
        target: null,
        note: 'pipeline cost over the database work it needs',
      });
      if (k === 1) {
        ratios.push({ kind: 'target', name: `delivered events/s, ${plural(k)}`, value: tput.eventsPerSec, target: 1000, unit: '/s' });
      }
      ratios.push({ kind: 'target', name: `first-attempt latency p99 ms, ${plural(k)} (paced ${round(rate, 0)}/s${paced.saturated ? ', saturated' : ''})`, value: paced.p99Ms, target: 1000, atMost: true, unit: ' ms' });
      ratios.push({
        name: `latency p50 over plain POST, ${plural(k)} (paced, ms)`,
        value: paced.p50Ms !== null && basePaced.p50Ms !== null ? round(paced.p50Ms - basePaced.p50Ms, 1) : null,
        target: null,
        kind: 'info',
        unit: ' ms',
        note: 'added latency',
      });
    }

    // Where the time goes, and the worker's memory.
    const mem = procStatus(workerPid);
    const workerMemory = { vmHwmMb: mem?.hwmMb ?? null, vmRssMb: mem?.rssMb ?? null, sampledRssPeakMb: workerRssPeakMb || null };
    notes.push(...whereTheTimeGoes(results), `worker peak memory: VmHWM ${workerMemory.vmHwmMb} MB (RSS now ${workerMemory.vmRssMb} MB, sampled peak during the runs ${workerMemory.sampledRssPeakMb} MB)`);
    for (const r of results.filter((x) => x.eventually)) {
      const e = r.eventually;
      notes.push(
        `late: ${r.name}: ${r.delivered}/${r.expectedDeliveries} delivered within its timeout; ` +
          (e.complete ? `the rest arrived within ${e.afterDrainSeconds} s more` : `still ${r.expectedDeliveries - e.delivered} missing ${e.afterDrainSeconds} s later`),
      );
    }
    const dupsOf = (r) => r.eventually?.duplicates ?? r.duplicates;
    const dups = results.filter((r) => dupsOf(r) > 0);
    notes.push(dups.length ? `duplicates seen (same webhook-id again): ${dups.map((r) => `${r.name}: ${dupsOf(r)}`).join('; ')}` : 'duplicates seen: none');
    const delivery = results.filter((r) => r.name.startsWith('webhook delivery'));
    ratios.push({
      kind: 'target',
      name: 'duplicate deliveries seen by the receiver (all delivery runs)',
      value: delivery.reduce((x, r) => x + (dupsOf(r) ?? 0), 0),
      target: 1,
      atMost: true,
    });
    return { results, ratios, notes, details: { settings, workerMemory } };
  } finally {
    for (const fn of cleanups.reverse()) {
      try {
        await fn();
      } catch (err) {
        log(`bench: webhooks cleanup: ${err.message}`);
      }
    }
  }
}

function whereTheTimeGoes(results) {
  const lines = [];
  for (const r of results) {
    if (!r.worker && !r.cpu) continue;
    const parts = [];
    if (r.worker?.batches === 0) parts.push(`dispatcher: no attempt documents in the run's window; worker ${r.worker.workerLogLines} log lines`);
    else if (r.worker) {
      const b = r.worker;
      parts.push(
        `dispatcher (from the attempt documents): ${b.batches} batches, mean ${b.meanBatch} deliveries (max ${b.maxBatch}), ` +
          `${b.meanMsBetweenBatches ?? '-'} ms between one endpoint's batches (${b.batchesPerSecPerEndpoint}/s per endpoint); ` +
          `POST mean ${b.postMs.mean} ms (max ${b.postMs.max}); ${b.workerLogLines} worker log lines`,
      );
    }
    if (r.firstError && r.dbOpMs) parts.push(`FAILED: ${r.firstError}`);
    else if (r.dbOpMs) {
      const total = Object.values(r.dbOpMs).reduce((x, v) => x + v, 0);
      parts.push(
        `database work in ${r.dbBatches} dispatcher batches of up to ${r.batchSize}, ms summed per operation (% of ${total} ms): ` +
          Object.entries(r.dbOpMs).map(([op, ms]) => `${op} ${ms} (${total ? Math.round((ms / total) * 100) : 0}%)`).join(', '),
      );
    }
    if (r.publishSeconds !== undefined) parts.push(`publish: all ${r.events} returned after ${r.publishSeconds} s (${r.publishPerSec}/s; call p50 ${r.sendCallMs.p50Ms} p99 ${r.sendCallMs.p99Ms} ms)`);
    if (r.cpu) {
      const cpu = Object.entries(r.cpu)
        .filter(([k, v]) => k !== 'wallSeconds' && v && v.cpuSeconds > 0.05)
        .sort((a, b) => b[1].cpuSeconds - a[1].cpuSeconds)
        .map(([k, v]) => `${k} ${v.cpuSeconds} s (${v.pctOfOneCore}%)`);
      parts.push(`cpu over ${r.cpu.wallSeconds} s: ${cpu.join(', ')}`);
    }
    lines.push(`${r.name}:\n    ${parts.join('\n    ')}`);
  }
  return lines.length ? ['where the time goes (cpu % of one core; 2 cores = 200%):', ...lines.map((l) => `  ${l}`)] : [];
}
