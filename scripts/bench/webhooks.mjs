// Webhook-delivery scenarios of `npm run bench` (issue #3 §4) and their baselines: events per second end to
// end, publish -> delivered latency p50/p99, with 1 and with 10 endpoints, against (a) plain HTTP POSTs of the
// same bodies from this process to the same receiver and (b) the raw-driver database work of the same
// deliveries (webhook-db-baseline.mjs: the event, delivery and attempt writes and the dispatcher's reads,
// batched by WEBHOOK_BATCH_SIZE, on scratch collections of the same database).
//
// The receiver (webhook-receiver.mjs) is a child process on 127.0.0.1 that answers 200 at once and keeps
// each delivery's first-arrival time; it is the clock for "delivered". Events are published from this
// process through an EventPublisher of dist/ (lib/events/publisher.ts, the same code and group commit the
// api uses; one instance for the suite) to a team whose endpoints were created through the management API;
// the real worker process delivers them through Temporal.
//
// Per endpoint count k (each on its own team, so runs never see each other's events):
//   0. before each throughput run (1 and 3), a warm-up of BENCH_WEBHOOK_WARMUP_EVENTS (1000, at most N) events through
//      the same path, not measured: both runs measure their path warm, not its JIT compilation (a cold worker spent
//      1.85 s of CPU on its first 5,000 events, 1.31 s after a warm-up; the plain POSTs' client, warmed only by the
//      machine reference, ran 15-25% below its warm rate);
//   1. baseline database work: N events x k deliveries with the raw driver (see above);
//   2. baseline throughput: 4N events x k POSTs (BENCH_WEBHOOK_BASELINE_SCALE), BENCH_WEBHOOK_BASELINE_CONCURRENCY (64) in closed loops;
//   3. delivery throughput: N events published by BENCH_WEBHOOK_PUBLISHERS (64) closed-loop publishers,
//      timed from the first publish to the last first-arrival (the latency of this run is "saturated");
//      2 and 3 in turns for BENCH_WEBHOOK_ROUNDS (3) rounds (2 first in odd rounds, last in even ones): the ratio of
//      3 to 2 is the median of the rounds' ratios, the figures shown are the median runs';
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
//   BENCH_WEBHOOK_WARMUP_EVENTS=1000  events of the warm-up before each throughput run (0: none)
//   BENCH_WEBHOOK_BASELINE_SCALE=4 the plain POST throughput baseline sends this many times the run's events
//   BENCH_WEBHOOK_ROUNDS=3         rounds of the plain POSTs and the delivery throughput run, in turns
//   BENCH_WEBHOOK_ENDPOINTS=1,10   endpoint counts to run
//   BENCH_WEBHOOK_TIMEOUT_SECONDS=180  per throughput run (paced runs: 60 s after the window); then the
//                                      partial figures are reported, and the next run waits up to
//   BENCH_WEBHOOK_DRAIN_SECONDS=120    for the backlog to drain (reported: whether the late deliveries came)

import { spawn } from 'node:child_process';
import os from 'node:os';
import { distModule } from './environment.mjs';
import { httpClient, medianRatio, medianRun, numberEnv } from './load.mjs';
import { EVENT_TYPE, USER_ID, logLineCounter, plural, procStatus, round, startReceiver, whereTheTimeGoes } from './webhook-measures.mjs';
import { endpointScenarios, recordBookkeeping } from './webhook-scenarios.mjs';

/** The suite's settings from BENCH_WEBHOOK_* (throws on a bad value: call it before starting anything). */
export function webhookSettings() {
  const counts = (process.env.BENCH_WEBHOOK_ENDPOINTS || '1,10').split(',').map((s) => Number(s.trim()));
  if (!counts.length || counts.some((k) => !Number.isInteger(k) || k < 1 || k > 50)) {
    throw new Error(`BENCH_WEBHOOK_ENDPOINTS=${process.env.BENCH_WEBHOOK_ENDPOINTS} must be a comma-separated list of integers 1..50`);
  }
  return {
    endpointCounts: counts,
    events1: numberEnv('BENCH_WEBHOOK_EVENTS', 5000, { integer: true, min: 1 }),
    warmupEvents: numberEnv('BENCH_WEBHOOK_WARMUP_EVENTS', 1000, { integer: true, min: 0 }),
    eventsMany: numberEnv('BENCH_WEBHOOK_EVENTS_10', 1000, { integer: true, min: 1 }),
    publishers: numberEnv('BENCH_WEBHOOK_PUBLISHERS', 64, { integer: true, min: 1 }),
    baselineConcurrency: numberEnv('BENCH_WEBHOOK_BASELINE_CONCURRENCY', 64, { integer: true, min: 1 }),
    baselineScale: numberEnv('BENCH_WEBHOOK_BASELINE_SCALE', 4, { integer: true, min: 1 }),
    rate: numberEnv('BENCH_WEBHOOK_RATE', 200, { min: 1 }),
    pacedSeconds: numberEnv('BENCH_WEBHOOK_PACED_SECONDS', 10, { min: 1 }),
    timeoutSeconds: numberEnv('BENCH_WEBHOOK_TIMEOUT_SECONDS', 180, { min: 5 }),
    drainSeconds: numberEnv('BENCH_WEBHOOK_DRAIN_SECONDS', 120, { min: 0 }),
    rounds: numberEnv('BENCH_WEBHOOK_ROUNDS', 3, { integer: true, min: 1 }),
  };
}

export async function webhookSuite(env, { log = console.log } = {}) {
  const settings = webhookSettings();
  const [{ EventPublisher, publishEvent }, { loadConfig }, { connectTemporal }, { createLogger }, catalogue, { workflowIds }] = await Promise.all([
    distModule('lib/events/publisher.js'),
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
    const publisher = new EventPublisher({
      config,
      repos,
      temporal: { client: temporal.client, taskQueue: temporal.taskQueue },
      logger: createLogger('warn', 'bench-publisher'),
    });
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

    /** What the scenarios of each endpoint count share (webhook-scenarios.mjs). */
    const ctx = {
      env,
      settings,
      config,
      repos,
      receiver,
      mgmt,
      post,
      deps,
      publishEvent,
      sample,
      pids,
      logLines,
      log,
      results,
      notes,
      sampleMemory,
      temporal,
      workflowIds,
    };

    for (const k of settings.endpointCounts) {
      const { team, endpointIds, warmUp, runBaselineThroughput, runDbBaseline, runDeliveryThroughput, runPaced, drain } = await endpointScenarios(ctx, k);
      await warmUp({ baseline: true });
      const baseDb = await runDbBaseline();
      const warmedUp = await warmUp({ baseline: false });
      // The plain POSTs and the delivery in turns (the POSTs first in odd rounds, last in even ones): the ratio is the
      // median of the rounds' ratios, each of two runs seconds apart (one run of each, a minute apart, put the
      // ratio at 0.24-0.30 over three full runs with the POSTs' own rate at 7.4k-10.8k/s).
      const baseTputs = [];
      const tputs = [];
      for (let roundNo = 1; roundNo <= settings.rounds; roundNo++) {
        const inRound = settings.rounds > 1 ? { tag: `-r${roundNo}`, label: `round ${roundNo} of ${settings.rounds}` } : {};
        const plainPosts = async () => baseTputs.push(await runBaselineThroughput(inRound));
        const delivery = async () => {
          const run = await runDeliveryThroughput(inRound);
          await drain([run]);
          tputs.push(run);
        };
        if (roundNo % 2) await plainPosts();
        await delivery();
        if (!(roundNo % 2)) await plainPosts();
      }
      const baseTput = medianRun(baseTputs);
      const tput = medianRun(tputs);
      const deliveryRatio = medianRatio(
        tputs.map((t) => t.rps),
        baseTputs.map((b) => b.rps),
      );
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
      for (const r of [...baseTputs, ...tputs, paced, basePaced, starved].filter(Boolean)) await receiver.ask('forget', r.run);

      await recordBookkeeping(ctx, k, { team, endpointIds, warmedUp, tputs, tput, paced, starved });

      ratios.push({
        name: `webhook delivery / plain POST, ${plural(k)} (deliveries/s)`,
        of: tput,
        to: baseTput,
        ratio: deliveryRatio,
        target: k === 1 ? 0.4 : null,
        note: 'pipeline cost over raw HTTP',
      });
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
      ratios.push({
        kind: 'target',
        name: `first-attempt latency p99 ms, ${plural(k)} (paced ${round(rate, 0)}/s${paced.saturated ? ', saturated' : ''})`,
        value: paced.p99Ms,
        target: 1000,
        atMost: true,
        unit: ' ms',
      });
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
    notes.push(
      ...whereTheTimeGoes(results),
      `worker peak memory: VmHWM ${workerMemory.vmHwmMb} MB (RSS now ${workerMemory.vmRssMb} MB, sampled peak during the runs ${workerMemory.sampledRssPeakMb} MB)`,
    );
    for (const r of results.filter((x) => x.eventually)) {
      const e = r.eventually;
      notes.push(
        `late: ${r.name}: ${r.delivered}/${r.expectedDeliveries} delivered within its timeout; ` +
          (e.complete
            ? `the rest arrived within ${e.afterDrainSeconds} s more`
            : `still ${r.expectedDeliveries - e.delivered} missing ${e.afterDrainSeconds} s later`),
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
      target: 0,
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
