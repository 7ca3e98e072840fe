// What the webhook suite (webhooks.mjs) measures with: the receiver process, CPU from /proc, the dispatcher's
// batches and Temporal retries from the store and the histories, closed and paced load, and the closing notes.

import { fork } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { repoRoot, stopChild } from '../setup.mjs';

export const EVENT_TYPE = 'daily.data.steps.created';
export const USER_ID = '3f6c2a9e-7d41-4b0a-9c3e-5a8b1d2e4f60';
export const CLIENT_USER_ID = 'bench-client-user';
const PROGRESS_EVERY_MS = 5000;
const POLL_MS = 200;
export const SETTLE_TIMEOUT_MS = 30_000;
export const PACED_TIMEOUT_MS = 60_000; // after the pacing window
const CLK_TCK = 100; // Linux USER_HZ

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const round = (x, digits = 2) => (x === null || x === undefined || !Number.isFinite(x) ? null : Math.round(x * 10 ** digits) / 10 ** digits);
export const plural = (k) => `${k} endpoint${k === 1 ? '' : 's'}`;

// ------------------------------------------------------------------------------------------ receiver

export async function startReceiver() {
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

export function procStatus(pid) {
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

/**
 * CPU seconds of a process and its live children (PostgreSQL's work is done by the postmaster's children), but
 * not of the children measured on their own (`separate`: the bench process starts the api, the worker and the stack).
 */
function cpuSeconds(pid, separate = new Set()) {
  try {
    let total = ownCpuSeconds(readFileSync(`/proc/${pid}/stat`, 'utf8')).seconds;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry) || separate.has(Number(entry))) continue;
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
  const separate = new Set(Object.values(pids).filter(Boolean));
  const read = () => Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, pid ? cpuSeconds(pid, separate) : null]));
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
export function logLineCounter(env) {
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
 * batch are recorded with one clock reading (lib/events/dispatcher.ts outcomesOf: timestamp = that reading -
 * duration_ms), so timestamp + duration_ms identifies the batch.
 */
export async function dispatcherBatches(db, teamId, since, wallMs, workerLogLines) {
  const docs = await db
    .collection('webhook_attempts')
    .find({ team_id: teamId, timestamp: { $gte: new Date(since) } }, { projection: { destination_id: 1, timestamp: 1, duration_ms: 1 } })
    .toArray();
  // A pipeline's batches record their one attempt on their log document (lib/events/destinations/pipeline/batches.ts).
  const logged = await db
    .collection('pipeline_batch_log')
    .find({ team_id: teamId, 'attempt.timestamp': { $gte: new Date(since) } }, { projection: { destination_id: 1, attempt: 1, 'events.id': 1 } })
    .toArray();
  for (const l of logged)
    for (const _ of l.events) docs.push({ destination_id: l.destination_id, timestamp: l.attempt.timestamp, duration_ms: l.attempt.duration_ms });
  if (!docs.length) return { workerLogLines, batches: 0 };
  const byEndpoint = new Map();
  let postMs = 0;
  let postMaxMs = 0;
  for (const d of docs) {
    const at = d.timestamp.getTime() + d.duration_ms;
    if (!byEndpoint.has(d.destination_id)) byEndpoint.set(d.destination_id, new Map());
    const m = byEndpoint.get(d.destination_id);
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
    // A pipeline's queued batches (one a fan-out each), one log document each.
    ...(logged.length ? { queuedBatches: logged.length } : {}),
  };
}

// ------------------------------------------------------------------------------------------ Temporal history

/**
 * Activity attempts of the endpoints' dispatcher workflows (every run, incl. continued-as-new ones): how many
 * batches ran, how many were retries, and why the previous attempt failed (e.g. a heartbeat timeout: the
 * batch may then have run twice). Reads the histories, so call it when the runs are over.
 */
export async function dispatcherRetries(client, workflowIds) {
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
export async function closedLoop(count, concurrency, op) {
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
export async function pacedLoop(rate, seconds, op) {
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

export function percentiles(values) {
  const sorted = Float64Array.from(values).sort();
  const at = (p) => (sorted.length ? sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1] : null);
  return { p50Ms: round(at(50)), p95Ms: round(at(95)), p99Ms: round(at(99)), maxMs: round(sorted.length ? sorted[sorted.length - 1] : null) };
}

/**
 * Waits until the receiver has seen `expected()` deliveries of `run` (or the deadline), printing progress.
 * `sampleMemory` is called at each poll.
 */
export async function waitDelivered({ receiver, run, expected, deadline, label, log, progress, sampleMemory }) {
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

export function whereTheTimeGoes(results) {
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
          Object.entries(r.dbOpMs)
            .map(([op, ms]) => `${op} ${ms} (${total ? Math.round((ms / total) * 100) : 0}%)`)
            .join(', '),
      );
    }
    if (r.publishSeconds !== undefined)
      parts.push(
        `publish: all ${r.events} returned after ${r.publishSeconds} s (${r.publishPerSec}/s; call p50 ${r.sendCallMs.p50Ms} p99 ${r.sendCallMs.p99Ms} ms)`,
      );
    if (r.firstArrivalMs !== undefined)
      parts.push(`first arrival ${r.firstArrivalMs} ms after the first publish, last ${r.afterLastPublishMs} ms after the last`);
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
