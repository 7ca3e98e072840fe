// The webhook suite's scenarios for one endpoint count (webhooks.mjs runs them for 1 and for 10 endpoints),
// and the store's bookkeeping after them.

import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { rawDeliveryWork } from './webhook-db-baseline.mjs';
import {
  CLIENT_USER_ID,
  EVENT_TYPE,
  PACED_TIMEOUT_MS,
  SETTLE_TIMEOUT_MS,
  USER_ID,
  closedLoop,
  cpuMeter,
  dispatcherBatches,
  dispatcherRetries,
  pacedLoop,
  percentiles,
  plural,
  round,
  sleep,
  waitDelivered,
} from './webhook-measures.mjs';

/**
 * The scenarios of one endpoint count `k`: a team with `k` endpoints at the receiver, and the runs measured against it
 * (plain POSTs, the raw database work, delivery throughput, paced latency), each recording its result in `ctx.results`.
 */
export async function endpointScenarios(ctx, k) {
  const { env, settings, config, repos, receiver, mgmt, post, deps, publishEvent, sample, pids, logLines, log, results, sampleMemory } = ctx;
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

  // One event's body and headers as the worker sends them (lib/events/model.ts envelopeOf; signing per Standard Webhooks).
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
  const queueEmpty = async () => !(await env.db.collection('webhook_deliveries').findOne({ team_id: team._id, status: 'pending' }, { projection: { _id: 1 } }));
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
      r.eventually = {
        delivered: stats[i].unique,
        duplicates: stats[i].duplicates,
        complete: stats[i].unique >= r.expectedDeliveries - r.errors * k,
        afterDrainSeconds: waited,
      };
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

  const runBaselineThroughput = async ({ tag = '', label = '' } = {}) => {
    const run = `base-tput${tag}-${k}`;
    const name = `plain POST baseline, ${plural(k)}${label ? `, ${label}` : ''}`;
    // More events than ours: at n they took under a second, and a window that short moved ±20% from run to run.
    const events = n * settings.baselineScale;
    log(`bench: ${name} ... ${events} events x ${k} POSTs, ${settings.baselineConcurrency} concurrent`);
    const t0 = Date.now();
    const cpu = cpuMeter(pids);
    // Flattened so the concurrency counts requests, like the worker's batches do. (With k > 1 each request
    // has its own webhook-id; the receiver keys by path + id, so every request is one delivery.)
    const load = await closedLoop(events * k, settings.baselineConcurrency, async (i) => {
      const { body, headers } = baselineRequest(run, Math.floor(i / k));
      return post.expect(200, 'POST', paths[i % k], { headers, body });
    });
    const stats = await waitDelivered({
      receiver,
      run,
      expected: () => events * k - load.errors,
      deadline: t0 + settings.timeoutSeconds * 1000,
      label: name,
      log,
      progress: () => '',
      sampleMemory,
    });
    return finish({ name, run, kind: 'throughput', events, load, t0, stats, extra: { cpu: cpu() } });
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
        events: n,
        endpoints: k,
        batchSize,
        teamId: team._id,
        eventType: EVENT_TYPE,
        userId: USER_ID,
        clientUserId: CLIENT_USER_ID,
        config,
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
          `ms per operation kind, summed: ${Object.entries(r.opMs)
            .map(([op, ms]) => `${op} ${ms}`)
            .join(', ')}`,
      );
    }
    results.push(result);
    return result;
  };

  /**
   * Before a throughput run, not measured: BENCH_WEBHOOK_WARMUP_EVENTS events through the same path (published and
   * delivered, or POSTed), so the run measures the steady state rather than the processes' JIT compilation of that
   * path (the machine reference warms up likewise). Returns how many events were published (the bookkeeping counts them).
   */
  const warmUp = async ({ baseline }) => {
    const events = Math.min(settings.warmupEvents, n);
    if (!events) return 0;
    const run = `${baseline ? 'base-' : ''}warm-${k}`;
    const t0 = Date.now();
    const load = await closedLoop(events, baseline ? settings.baselineConcurrency : settings.publishers, (seq) =>
      baseline ? baselineEvent(run, seq) : publishOne(run, seq),
    );
    const stats = await waitDelivered({
      receiver,
      run,
      deadline: t0 + settings.timeoutSeconds * 1000,
      label: `warm-up, ${plural(k)}`,
      log,
      sampleMemory,
      expected: () => load.ok * k,
      progress: () => '',
    });
    if (!baseline) await settle();
    await receiver.ask('forget', run);
    log(
      `bench: warm-up${baseline ? ' (plain POSTs)' : ''}, ${plural(k)}: ${stats.unique}/${load.ok * k} delivered in ${round((Date.now() - t0) / 1000, 1)} s (not measured)`,
    );
    return baseline ? 0 : load.ok;
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
      receiver,
      run,
      deadline: t0 + settings.timeoutSeconds * 1000,
      label: name,
      log,
      sampleMemory,
      expected: () => (load ? load.ok * k : n * k),
      progress: () => (load ? '' : `published ${published}/${n}, `),
    });
    load = await loadPromise;
    await settle();
    const cpuUsed = cpu();
    const wallMs = stats.lastAt !== null ? stats.lastAt - t0 : Date.now() - t0;
    const worker = await dispatcherBatches(env.db, team._id, t0, wallMs, logLines.take());
    return finish({
      name,
      run,
      kind: 'throughput',
      events: n,
      load,
      t0,
      stats,
      extra: {
        publishSeconds: round((publishedAt - t0) / 1000, 2),
        publishPerSec: round(load.ok / ((publishedAt - t0) / 1000), 1),
        // The run's fixed costs: waking an idle dispatcher (first publish -> first arrival) and the last batch.
        firstArrivalMs: stats.firstAt !== null ? stats.firstAt - t0 : null,
        afterLastPublishMs: stats.lastAt !== null ? Math.max(0, stats.lastAt - publishedAt) : null,
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
      receiver,
      run,
      deadline: t0 + settings.pacedSeconds * 1000 + PACED_TIMEOUT_MS,
      label: name,
      log,
      sampleMemory,
      expected: () => (load ? load.ok * k : total * k),
      progress: () => (load ? '' : `${baseline ? 'sent' : 'published'} ${sent}/${total}, `),
    });
    load = await loadPromise;
    const events = load.ok + load.errors;
    if (!baseline) await settle();
    const cpuUsed = cpu();
    const worker = baseline
      ? null
      : await dispatcherBatches(env.db, team._id, t0, stats.lastAt !== null ? stats.lastAt - t0 : Date.now() - t0, logLines.take());
    // Saturated: deliveries fell behind the offered rate (first to last arrival took over 1.2 x the pacing
    // window, i.e. under ~83% of the offered rate), so the latency includes queueing.
    const span = stats.lastAt !== null ? stats.lastAt - stats.firstAt : Infinity;
    const saturated = span > 1.2 * settings.pacedSeconds * 1000 || stats.unique < load.ok * k;
    return finish({
      name: saturated ? `${name} (saturated)` : name,
      run,
      kind: 'latency',
      events,
      load,
      t0,
      stats,
      extra: { rate: round(rate, 1), saturated, ...(worker ? { worker } : {}), cpu: cpuUsed },
    });
  };

  return { n, team, endpointIds, warmUp, runBaselineThroughput, runDbBaseline, runDeliveryThroughput, runPaced, drain };
}

/** The store's bookkeeping after the runs of one endpoint count, as a note (and on the throughput result). */
export async function recordBookkeeping(ctx, k, { team, endpointIds, warmedUp, tputs, tput, paced, starved }) {
  const { env, log, notes, temporal, workflowIds } = ctx;
  // Bookkeeping after both runs, from the store's documents: one delivery document per (event, endpoint)
  // with its status and attempt counter, one attempt document per attempt. Every delivery should have
  // succeeded at its first attempt, with one attempt document and a counter of 1. A batch sent again (its
  // activity retried before the outcome was recorded) writes attempt documents with the same ids, which
  // are dropped: it shows as a counter above the attempt documents, and at the receiver as duplicates.
  const w = env.db;
  const [deliveryDocs, attemptDocs] = await Promise.all([
    w
      .collection('webhook_deliveries')
      .find({ team_id: team._id }, { projection: { status: 1, attempts: 1 } })
      .toArray(),
    w
      .collection('webhook_attempts')
      .find({ team_id: team._id }, { projection: { event_id: 1, destination_id: 1, status_code: 1 } })
      .toArray(),
  ]);
  const byStatus = { pending: 0, succeeded: 0, failed: 0, cancelled: 0 };
  for (const d of deliveryDocs) byStatus[d.status] = (byStatus[d.status] ?? 0) + 1;
  const succeeded = byStatus.succeeded;
  const queued = byStatus.pending;
  const attempts = attemptDocs.length;
  const failedAttempts = attemptDocs.filter((a) => !(a.status_code >= 200 && a.status_code <= 299)).length;
  const attemptsPer = new Map();
  for (const a of attemptDocs) {
    const id = `${a.event_id}:${a.destination_id}`;
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
  const published = warmedUp + [...tputs, paced, starved].filter(Boolean).reduce((sum, r) => sum + r.events - r.errors, 0);
  let temporalRetries = null;
  try {
    temporalRetries = await dispatcherRetries(
      temporal.client,
      endpointIds.map((id) => workflowIds.destinationDispatch(id)),
    );
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
  const reasons = temporalRetries
    ? Object.entries(temporalRetries.reasons)
        .map(([m, c]) => `${c}x ${m}`)
        .join('; ')
    : '';
  const retryText = temporalRetries
    ? `${temporalRetries.activities} dispatcher activities finished, ${temporalRetries.retried} of them retries` +
      (temporalRetries.running ? `, ${temporalRetries.running} still running (${temporalRetries.runningRetried} of them retries)` : '') +
      (reasons ? ` (${reasons})` : '')
    : 'dispatcher histories not read';
  const statusText = `${deliveryDocs.length} delivery documents (${Object.entries(byStatus)
    .map(([st, c]) => `${c} ${st}`)
    .join(', ')})`;
  const resentText = resent.deliveries
    ? `${resent.deliveries} deliveries with more than one attempt document (${resent.extraAttempts} extra)`
    : 'no delivery has more than one attempt document';
  const counterText =
    counterMismatches || counters.succeededWithoutAttempt
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
}
