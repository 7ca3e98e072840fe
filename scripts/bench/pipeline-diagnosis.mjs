// Where a pipeline's time goes (pipelines.mjs): the dispatcher alone, without the publisher in front of it.
//
//   backlog drain: N events are queued for the pipeline by a second EventPublisher whose Temporal wake is a no-op
//     (events, deliveries and outbox written as usual; the worker's dispatcher is not woken), then the real
//     publisher wakes the dispatcher: events/s from the wake to the last message received is what the worker's
//     dispatcher sends with full batches (the sweeper could wake it earlier for deliveries over
//     WEBHOOK_SWEEP_GRACE_MS old: reported when the first message came before the wake).
//   phase timing: another, smaller backlog is delivered by the same dispatcher code (DestinationDispatcher and
//     PipelineSender of dist/) run in this process instead of the worker, with every store call and the broker
//     send timed (the worker is not woken, so it does not take part; checked from the messages sent here).
//     Batch k's recording (insertAttempts, changeDeliveries) overlaps batch k+1's reads and send; the cycle's
//     remainder is waiting for that recording, the destination re-read and the loop itself.
import { performance } from 'node:perf_hooks';
import { distModule } from './environment.mjs';
import { rawBatchWork } from './pipeline-db-baseline.mjs';
import { CLIENT_USER_ID, EVENT_TYPE, closedLoop, dispatcherBatches, round, sleep } from './webhook-measures.mjs';

const FILL_PUBLISHERS = 256;
const RECORDING = ['insertAttempts', 'changeDeliveries', 'recordHealth', 'finish'];
const STORE_CALLS = [
  'dueDeliveries',
  'dueInUserOrder',
  'getEvents',
  'deleteDeliveries',
  'openSendWindow',
  'insertAttempts',
  'changeDeliveries',
  'startRun',
  'resumeRun',
  'endRun',
  'markDispatcherIdle',
  'nextDueAt',
];

/** A pipeline's queued batches and their log (lib/events/destinations/pipeline/batches-store.ts). */
const BATCH_CALLS = ['dueBatches', 'pendingInOrder', 'logged', 'finish', 'anyDue'];

/** `obj` with the methods `names` timed into `calls` ({ name, start, ms, items }; items: the result's or the array argument's length). */
function timed(obj, names, calls) {
  return new Proxy(obj, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (typeof v !== 'function') return v;
      if (!names.includes(prop)) return v.bind(target);
      return async (...args) => {
        const start = performance.now();
        const result = await v.apply(target, args);
        const items = Array.isArray(result) ? result.length : result instanceof Set ? result.size : (args.find(Array.isArray)?.length ?? 0);
        calls.push({ name: prop, start, ms: performance.now() - start, items });
        return result;
      };
    },
  });
}

/**
 * ctx: { env, config, consumer, publisher (real), publishWith(publisher, teamId, run, seq), received, settle, meter,
 * logLines, log, results, EventPublisher, createLogger }.
 */
export async function diagnosisScenarios(ctx) {
  const { env, config, consumer, publisher, publishWith, received, settle, meter, logLines, log, results, EventPublisher, createLogger } = ctx;
  const [{ DestinationDispatcher }, { PipelineSender }, { brokerPolicyFromConfig }] = await Promise.all([
    distModule('lib/events/dispatcher.js'),
    distModule('lib/events/destinations/pipeline/brokers.js'),
    distModule('lib/platform/url-safety.js'),
  ]);
  const noWake = { client: { workflow: { signalWithStart: async () => undefined } }, taskQueue: 'bench-no-wake' };
  const quiet = new EventPublisher({ config, repos: env.repos, temporal: noWake, logger: createLogger('warn', 'bench-backlog-publisher') });

  const fill = async (teamId, run, n) => {
    const started = Date.now();
    const load = await closedLoop(n, FILL_PUBLISHERS, (seq) => publishWith(quiet, teamId, run, seq));
    await quiet.settle();
    if (load.errors) throw new Error(`backlog: ${load.errors} publishes failed: ${load.firstError}`);
    return (Date.now() - started) / 1000;
  };

  const record = (r) => (results.push(r), r);
  const base = (name, n, stats, seconds, extra) => ({
    name,
    suite: 'pipelines',
    kind: 'webhook',
    shape: 'throughput',
    endpoints: 1,
    events: n,
    expectedDeliveries: n,
    delivered: stats.unique,
    complete: stats.unique >= n,
    seconds: round(seconds, 2),
    eventsPerSec: seconds ? round(stats.unique / seconds, 1) : null,
    deliveriesPerSec: seconds ? round(stats.unique / seconds, 1) : null,
    rps: seconds ? round(stats.unique / seconds, 1) : 0,
    ok: stats.unique,
    p50Ms: null,
    p90Ms: null,
    p99Ms: null,
    maxMs: null,
    meanMs: null,
    duplicates: stats.duplicates,
    outOfOrder: stats.outOfOrder,
    errors: 0,
    ...extra,
  });

  /** The worker's dispatcher on a backlog of `n`. */
  const runBacklog = async (what, teamId, pipelineId, n) => {
    const run = `backlog-${what.replace(/\W+/g, '-')}`;
    const name = `pipeline ${what}, backlog of ${n} (dispatcher only)`;
    log(`bench: ${name} ... queueing ${n} events without waking the dispatcher`);
    await sleep(1000); // the dispatcher's linger after the previous run is over
    const fillSeconds = await fill(teamId, run, n);
    logLines.take();
    const cpu = meter();
    const t0 = Date.now();
    await publisher.wake(pipelineId);
    const stats = await received(run, () => n, t0 + 300_000, name);
    const cpuUsed = cpu();
    await settle(teamId);
    const seconds = stats.lastAt !== null ? (stats.lastAt - t0) / 1000 : null;
    const worker = await dispatcherBatches(env.db, teamId, t0, seconds ? seconds * 1000 : 0, logLines.take());
    const early = stats.firstAt !== null && stats.firstAt < t0;
    const r = record(base(name, n, stats, seconds, { fillSeconds: round(fillSeconds, 1), sweptEarly: early, worker, cpu: cpuUsed }));
    log(
      `bench: ${name}: queued in ${r.fillSeconds} s; ${stats.unique}/${n} received ${r.seconds} s after the wake = ${r.eventsPerSec} events/s; ` +
        `${worker.batches} batches of mean ${worker.meanBatch}${early ? '; NOTE: the first message came before the wake (sweeper)' : ''}`,
    );
    await consumer.ask('forget', run);
    return r;
  };

  /** The dispatcher's code in this process on a backlog of `n`, every phase timed. */
  const runPhases = async (what, teamId, pipelineId, n) => {
    const run = `phases-${what.replace(/\W+/g, '-')}`;
    const name = `pipeline ${what}, backlog of ${n}, dispatcher code in the bench process (phase timing)`;
    log(`bench: ${name} ...`);
    await sleep(1000);
    await fill(teamId, run, n);
    const calls = [];
    const repos = {
      ...env.repos,
      webhookStore: timed(env.repos.webhookStore, STORE_CALLS, calls),
      pipelineBatches: timed(env.repos.pipelineBatches, BATCH_CALLS, calls),
      pipelines: timed(env.repos.pipelines, ['getPipeline', 'recordHealth'], calls),
      webhooks: timed(env.repos.webhooks, ['getEndpoint'], calls),
    };
    const sender = new PipelineSender(brokerPolicyFromConfig(config));
    const senders = { webhook: null, pipeline: timed(sender, ['send'], calls) };
    const dispatcher = new DestinationDispatcher({ repos, config, logger: createLogger('warn', 'bench-dispatcher') }, senders);
    const cpu = meter();
    const t0 = performance.now();
    const at0 = Date.now();
    let activities = 0;
    try {
      for (;;) {
        activities++;
        const r = await dispatcher.deliverDue(pipelineId, { heartbeat: () => undefined, superseded: () => false });
        if (!r.more) break;
        if (r.waitMs) await sleep(r.waitMs);
      }
    } finally {
      await sender.close();
    }
    const wallMs = performance.now() - t0;
    const cpuUsed = cpu();
    const stats = await received(run, () => n, Date.now() + 30_000, name);
    await settle(teamId);
    // The batches' window: to the end of the last send (later calls are the idle look and linger, not batches);
    // the recording of each batch (after its send) counts whenever it ran.
    const sends = calls.filter((c) => c.name === 'send');
    const batches = sends.length;
    const sentHere = sends.reduce((a, c) => a + c.items, 0);
    const lastSendEnd = Math.max(t0, ...sends.map((c) => c.start + c.ms));
    const phases = {};
    for (const c of calls.filter((x) => x.start <= lastSendEnd || RECORDING.includes(x.name))) {
      const p = (phases[c.name] ??= { calls: 0, totalMs: 0, items: 0 });
      p.calls++;
      p.totalMs += c.ms;
      p.items += c.items;
    }
    for (const p of Object.values(phases))
      Object.assign(p, {
        perBatchMs: batches ? round(p.totalMs / batches, 1) : null,
        meanMs: round(p.totalMs / p.calls, 1),
        meanItems: round(p.items / p.calls, 0),
        totalMs: round(p.totalMs, 0),
      });
    const seconds = stats.lastAt !== null ? (stats.lastAt - at0) / 1000 : null;
    const r = record(
      base(name, n, stats, seconds, {
        cycleMs: batches ? round((lastSendEnd - t0) / batches, 1) : null,
        wallMs: round(wallMs, 0),
        batches,
        sentHere,
        activities,
        phases,
        cpu: cpuUsed,
      }),
    );
    log(
      `bench: ${name}: ${stats.unique}/${n} received in ${r.seconds} s = ${r.eventsPerSec} events/s; ${batches} batches (${sentHere} messages sent here), ` +
        `cycle ${r.cycleMs} ms a batch; per batch: ${Object.entries(phases)
          .filter(([, p]) => p.totalMs > 0)
          .map(([k, p]) => `${k} ${p.perBatchMs} ms`)
          .join(', ')}`,
    );
    await consumer.ask('forget', run);
    return r;
  };

  /**
   * The raw driver doing a delivery's database work (webhook-db-baseline.mjs: event and delivery inserts, the
   * due read, send window, events read, attempt insert and outcome update) for `n` events to one destination: what the
   * database allows for a pipeline's share of the work, so the pipeline's overhead over it can be told apart from
   * the database's cost.
   */
  const runDbBaseline = async (n, teamId, makeData, userOf, round = '') => {
    const name = `raw driver, the database work of ${n} events' per-batch record (baseline)${round}`;
    log(`bench: ${name} ... batches of ${config.WEBHOOK_BATCH_SIZE}`);
    const r = await rawBatchWork(env, {
      events: n,
      batchSize: config.WEBHOOK_BATCH_SIZE,
      teamId,
      eventType: EVENT_TYPE,
      userOf,
      clientUserId: CLIENT_USER_ID,
      makeData,
      config,
    });
    log(
      `bench: ${name}: ${r.eventsPerSec} events/s (${Object.entries(r.opMs)
        .map(([k, ms]) => `${k} ${ms} ms`)
        .join(', ')})`,
    );
    return record({ ...base(name, n, { unique: r.delivered, duplicates: 0, outOfOrder: 0 }, r.seconds, { opMs: r.opMs }), eventsPerSec: r.eventsPerSec });
  };

  return { runBacklog, runPhases, runDbBaseline, close: () => quiet.settle() };
}

/** A note line for a phase-timing result. */
export function phaseNote(r) {
  const critical = [
    'startRun',
    'getEndpoint',
    'getPipeline',
    'dueBatches',
    'pendingInOrder',
    'logged',
    'dueDeliveries',
    'dueInUserOrder',
    'getEvents',
    'deleteDeliveries',
    'openSendWindow',
    'send',
  ];
  const p = r.phases;
  const onPath = critical.reduce((s, k) => s + (p[k]?.perBatchMs ?? 0), 0);
  const fmt = (k) => (p[k] ? `${k} ${p[k].perBatchMs} ms (${p[k].calls} calls, mean ${p[k].meanItems} items)` : null);
  return (
    `in-process dispatcher: ${r.batches} batches, cycle ${r.cycleMs} ms a batch (${round(r.sentHere / r.batches, 0)} messages); on the critical path per batch: ` +
    critical.map(fmt).filter(Boolean).join(', ') +
    `; overlapped (previous batch's recording): ${RECORDING.map(fmt).filter(Boolean).join(', ')}; ` +
    `rest of the cycle (waiting for that recording, the loop) ${round(r.cycleMs - onPath, 1)} ms; ${r.activities} deliverDue calls; ${r.sentHere}/${r.events} sent here`
  );
}

/** Where the time goes, per run (cpu % of one core; 2 cores = 200%). */
export function pipelineNotes(results) {
  const lines = ['pipelines: where the time goes (cpu % of one core):'];
  for (const r of results) {
    const parts = [];
    if (r.batchMs)
      parts.push(
        `raw: ${r.batchMs.batches} batches, each publish + confirm p50 ${r.batchMs.p50Ms} ms p99 ${r.batchMs.p99Ms} ms; received end to end at ${r.receivedPerSec}/s; ${r.bytesPerMessage} bytes a message`,
      );
    const b = r.worker;
    if (b?.batches) {
      parts.push(
        `dispatcher (attempt documents and batch logs): ${b.batches} batches, mean ${b.meanBatch} messages (max ${b.maxBatch}), broker send mean ${b.postMs.mean} ms (max ${b.postMs.max}), ` +
          `${b.meanMsBetweenBatches ?? '-'} ms from one batch's send to the next (${b.batchesPerSecPerEndpoint} batches/s)` +
          (b.queuedBatches ? `; ${b.queuedBatches} queued batches (fan-outs)` : '') +
          (r.failedAttempts !== undefined ? `; ${r.failedAttempts} failed attempts` : ''),
      );
    }
    if (r.publishSeconds !== undefined)
      parts.push(
        `publish: all ${r.events} returned after ${r.publishSeconds} s (${r.publishPerSec}/s; call p50 ${r.sendCallMs.p50Ms} p99 ${r.sendCallMs.p99Ms} ms)`,
      );
    if (r.cpu) {
      const cpu = Object.entries(r.cpu)
        .filter(([k, v]) => k !== 'wallSeconds' && v && v.cpuSeconds > 0.05)
        .sort((x, y) => y[1].cpuSeconds - x[1].cpuSeconds)
        .map(([k, v]) => `${k} ${v.cpuSeconds} s (${v.pctOfOneCore}%)`);
      // The machine's CPU per event: what a run can afford per event is (cores x 1 s) / its events per second.
      const perEvent = r.cpu.all && r.events ? `; the machine's cpu per event ${round((r.cpu.all.cpuSeconds / r.events) * 1e6, 0)} µs` : '';
      parts.push(`cpu over ${r.cpu.wallSeconds} s: ${cpu.join(', ')}${perEvent}`);
    }
    if (r.phases) parts.push(phaseNote(r));
    if (parts.length) lines.push(`  ${r.name}:\n    ${parts.join('\n    ')}`);
  }
  return lines.length > 1 ? lines : [];
}
