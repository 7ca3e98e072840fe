// Event-streaming pipeline scenarios of `npm run bench` (BENCH_SUITES=pipelines): events published through the
// service to a team's RabbitMQ or Kafka pipeline, received by a consumer on the broker, against a raw producer
// sending the same messages in the same run (pipeline-raw.mjs).
//
// The suite starts its own RabbitMQ (scripts/stack/rabbitmq.mjs) and Kafka (scripts/stack/kafka.mjs) with their
// state under the bench's state folder, and stops them at the end. The consumers (pipeline-consumer.mjs, a child
// process: a bound durable queue per scenario on RabbitMQ, a topic per scenario on Kafka) are the clock for
// "received". Events are published from this process through an EventPublisher of dist/ (the api's code and group
// commit, as the webhook suite does) to a team whose pipeline was created through the management API; the real
// worker's dispatcher sends them in batches of WEBHOOK_BATCH_SIZE.
//
// Per broker:
//   1. raw producer baseline: N messages, same envelope, properties and gzip rule, one confirmed batch of
//      WEBHOOK_BATCH_SIZE at a time (events/s from the first publish to the last confirm / acked produce);
//      the events' own inserts alone (baseline, publishAloneBaseline): the same publishers publishing the same
//      events through the same publisher to a team with no destination (no fan-out, no delivery): what the pipeline
//      cannot outrun; the insert beside the broker (baseline, pipeline-raw.mjs insertBesideBrokerBaseline); and,
//      with step 4, the raw driver doing the per-batch record's database work (pipeline-db-baseline.mjs);
//   2. per ordered_per_user mode (a team and pipeline each): a warm-up of a few events (the worker's broker
//      connection opens), then N events by BENCH_PIPELINE_PUBLISHERS closed-loop publishers, timed from the first
//      publish to the last message received (end-to-end events/s, and its ratio to 1);
//   3. a paced run: BENCH_PIPELINE_RATE events/s for BENCH_PIPELINE_PACED_SECONDS; latency = consumer arrival -
//      the time taken just before the publish call (data.sent_at), p50/p99;
//   4. the dispatcher alone (pipeline-diagnosis.mjs): a backlog of N drained by the worker, and a backlog of
//      BENCH_PIPELINE_PHASE_EVENTS drained by the same dispatcher code in this process with each phase timed.
// Events belong to BENCH_PIPELINE_USERS users in turn (Kafka key = user_id); the consumer counts messages that
// arrive out of their user's publish order. Where the time goes: the dispatcher's batches rebuilt from the
// attempt documents (webhook-measures.mjs dispatcherBatches: size, send time, gap between batches) and CPU per process.
//
//   BENCH_PIPELINE_EVENTS=20000            events per throughput run (and per raw baseline)
//   BENCH_PIPELINE_BROKERS=rabbitmq,kafka  BENCH_PIPELINE_ORDERED=false,true (ordered_per_user modes)
//   BENCH_PIPELINE_PUBLISHERS=64  BENCH_PIPELINE_USERS=100  BENCH_PIPELINE_KAFKA_PARTITIONS=3
//   BENCH_PIPELINE_RATE=50  BENCH_PIPELINE_PACED_SECONDS=20  BENCH_PIPELINE_TIMEOUT_SECONDS=300 (per throughput run)
//   BENCH_PIPELINE_BACKLOG=1 (0: no step 4)  BENCH_PIPELINE_PHASE_EVENTS=5000
//   BENCH_PIPELINE_RAW_SCALE=4  the raw producer's rounds send this many times the run's events (at 20,000 a round
//                            took 1-1.6 s, and its rate moved 12.6k-22.6k/s between full runs)
//   BENCH_PIPELINE_ROUNDS=3  rounds of steps 1 (the baselines) and 2 (each pipeline's throughput run) in turns
//                            (in one order, then in the reverse one, ...); every ratio among them is the median of
//                            its rounds' ratios, so a passing disturbance or drift moves none of them

import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { startKafka } from '../stack/kafka.mjs';
import { RABBITMQ_PASSWORD, RABBITMQ_USER, startRabbitmq } from '../stack/rabbitmq.mjs';
import { distModule } from './environment.mjs';
import { httpClient, medianRatio, medianRun, numberEnv } from './load.mjs';
import { diagnosisScenarios, pipelineNotes } from './pipeline-diagnosis.mjs';
import { processMeter, startConsumer } from './pipeline-harness.mjs';
import { insertBesideBrokerBaseline, publishAloneBaseline, rawKafka, rawRabbitmq } from './pipeline-raw.mjs';
import {
  CLIENT_USER_ID,
  EVENT_TYPE,
  PACED_TIMEOUT_MS,
  SETTLE_TIMEOUT_MS,
  closedLoop,
  dispatcherBatches,
  logLineCounter,
  pacedLoop,
  percentiles,
  round,
  sleep,
  waitDelivered,
} from './webhook-measures.mjs';

const EXCHANGE = 'bench.pipelines';
const WARMUP_EVENTS = 20;
const list = (name, fallback, allowed) => {
  const raw = process.env[name] || fallback;
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (!items.length || items.some((s) => !allowed.includes(s))) throw new Error(`${name}=${raw} must be a comma-separated list of ${allowed.join(', ')}`);
  return [...new Set(items)];
};

/** The suite's settings from BENCH_PIPELINE_* (throws on a bad value: call it before starting anything). */
export function pipelineSettings() {
  return {
    events: numberEnv('BENCH_PIPELINE_EVENTS', 20000, { integer: true, min: 1 }),
    brokers: list('BENCH_PIPELINE_BROKERS', 'rabbitmq,kafka', ['rabbitmq', 'kafka']),
    ordered: list('BENCH_PIPELINE_ORDERED', 'false,true', ['false', 'true']).map((s) => s === 'true'),
    publishers: numberEnv('BENCH_PIPELINE_PUBLISHERS', 64, { integer: true, min: 1 }),
    users: numberEnv('BENCH_PIPELINE_USERS', 100, { integer: true, min: 1 }),
    partitions: numberEnv('BENCH_PIPELINE_KAFKA_PARTITIONS', 3, { integer: true, min: 1 }),
    rate: numberEnv('BENCH_PIPELINE_RATE', 50, { min: 1 }),
    pacedSeconds: numberEnv('BENCH_PIPELINE_PACED_SECONDS', 20, { min: 1 }),
    timeoutSeconds: numberEnv('BENCH_PIPELINE_TIMEOUT_SECONDS', 300, { min: 5 }),
    backlog: numberEnv('BENCH_PIPELINE_BACKLOG', 1, { integer: true }) > 0,
    phaseEvents: numberEnv('BENCH_PIPELINE_PHASE_EVENTS', 5000, { integer: true, min: 1 }),
    rounds: numberEnv('BENCH_PIPELINE_ROUNDS', 3, { integer: true, min: 1 }),
    rawScale: numberEnv('BENCH_PIPELINE_RAW_SCALE', 4, { integer: true, min: 1 }),
  };
}

export async function pipelineSuite(env, { log = console.log } = {}) {
  const settings = pipelineSettings();
  const [
    { EventPublisher, publishEvent },
    { loadConfig },
    { connectTemporal },
    { createLogger },
    catalogue,
    { amqpMessageOf, kafkaMessageOf },
    { envelopeOf },
    { timeOrderedUuid },
  ] = await Promise.all([
    distModule('lib/events/publisher.js'),
    distModule('lib/platform/config.js'),
    distModule('lib/platform/temporal.js'),
    distModule('lib/platform/logger.js'),
    distModule('schemas/event-catalogue.js'),
    distModule('lib/events/destinations/pipeline/brokers.js'),
    distModule('lib/events/model.js'),
    distModule('lib/platform/keys.js'),
  ]);
  const sample = catalogue.findEventType(EVENT_TYPE)?.sample ?? {};
  const config = loadConfig({ ...process.env, ...env.childEnv });
  const batchSize = config.WEBHOOK_BATCH_SIZE;
  const users = Array.from({ length: settings.users }, () => randomUUID());
  const userOf = (seq) => users[seq % users.length];
  const n = settings.events;
  const results = [];
  const ratios = [];
  const notes = [];
  const cleanups = [];
  const modeOf = (ordered) => (ordered ? 'ordered' : 'unordered');
  const label = (broker, ordered) => `pipeline ${broker}, ${ordered ? 'ordered per user' : 'unordered'}`;
  const roundOf = (roundNo) => (settings.rounds > 1 ? `, round ${roundNo} of ${settings.rounds}` : '');

  try {
    // ---------------------------------------------------------------- brokers, topics, consumers
    const stateDir = path.join(env.stateDir, 'pipelines');
    const brokerLog = (m) => log(`bench: pipelines: ${m}`);
    const [rabbitmq, kafka] = await Promise.all([
      startRabbitmq({ stateDir: path.join(stateDir, 'rabbitmq'), log: brokerLog }).then((b) => (cleanups.push(() => b.stop()), b)),
      startKafka({ stateDir: path.join(stateDir, 'kafka'), log: brokerLog }).then((b) => (cleanups.push(() => b.stop()), b)),
    ]);
    const targets = ['raw', 'unordered', 'ordered'].map((s) => `bench.${s}`);
    const admin = new Kafka({ clientId: 'bench-admin', brokers: [kafka.bootstrap], logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    await admin.createTopics({ topics: targets.map((topic) => ({ topic, numPartitions: settings.partitions })), waitForLeaders: true });
    await admin.disconnect();
    const consumer = await startConsumer({
      amqpUrl: rabbitmq.url,
      exchange: EXCHANGE,
      queues: targets.map((t) => ({ queue: t, key: t })),
      kafkaBootstrap: kafka.bootstrap,
      topics: targets,
    });
    cleanups.push(() => consumer.stop());

    const temporal = await connectTemporal(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE, config.TEMPORAL_TASK_QUEUE);
    cleanups.push(() => temporal.connection.close());
    const publisher = new EventPublisher({
      config,
      repos: env.repos,
      temporal: { client: temporal.client, taskQueue: temporal.taskQueue },
      logger: createLogger('warn', 'bench-publisher'),
    });
    cleanups.push(() => publisher.settle());
    const logLines = logLineCounter(env);
    cleanups.push(() => logLines.close());
    const mgmtKey = await env.repos.tenancy.createManagementKey(env.tenant.orgId, 'bench-pipelines', 'org_admin', []);
    const mgmt = httpClient(env.apiUrl, { headers: { 'x-management-key': mgmtKey.value } });
    cleanups.push(() => mgmt.close());
    const pids = {
      consumer: consumer.pid,
      worker: env.children.worker.pid,
      api: env.children.api.pid,
      ferretdb: env.stackPids?.mongo,
      postgres: env.stackPids?.postgres,
      temporal: env.stackPids?.temporal,
      rabbitmq: rabbitmq.pid,
      kafka: kafka.pid,
    };
    const meter = processMeter(pids);
    log(
      `bench: pipelines: RabbitMQ 127.0.0.1:${rabbitmq.port} (pid ${rabbitmq.pid}), Kafka ${kafka.bootstrap} (pid ${kafka.pid}, ${settings.partitions} partitions a topic); ` +
        `${n} events a run, batches of ${batchSize} (WEBHOOK_BATCH_SIZE), ${settings.publishers} publishers, ${settings.users} users`,
    );

    const dataOf = (run, seq) => ({ ...sample, bench_run: run, seq, sent_at: Date.now() });
    const settle = async (teamId) => {
      const deadline = Date.now() + SETTLE_TIMEOUT_MS;
      while (
        Date.now() < deadline &&
        (await env.db.collection('webhook_deliveries').findOne({ team_id: teamId, status: 'pending' }, { projection: { _id: 1 } }))
      )
        await sleep(500);
    };
    const received = (run, expected, deadline, name, progress = () => '') =>
      waitDelivered({ receiver: consumer, run, expected, deadline, label: name, log, progress, sampleMemory: () => undefined });

    // ---------------------------------------------------------------- 1. raw producer
    // `ready`: the producer sends each batch once it may (the insert-beside baseline paces it by the publishes).
    const runRaw = async (broker, { run = `raw-${broker}`, name = `raw producer ${broker} (baseline)`, ready, count = n } = {}) => {
      log(`bench: ${name} ... ${count} messages, confirmed batches of ${batchSize}`);
      const makeMessage = (seq) => {
        const userId = userOf(seq);
        const body = envelopeOf({
          event_type: EVENT_TYPE,
          data: dataOf(run, seq),
          team_id: env.tenant.teamId,
          user_id: userId,
          client_user_id: CLIENT_USER_ID,
        });
        return { eventId: timeOrderedUuid(), eventType: EVENT_TYPE, teamId: env.tenant.teamId, userId, body, createdAt: new Date() };
      };
      const cpu = meter();
      const common = { n: count, batchSize, makeMessage, amqpMessageOf, kafkaMessageOf, ready };
      const r =
        broker === 'rabbitmq'
          ? await rawRabbitmq({ ...common, url: rabbitmq.url, exchange: EXCHANGE, key: 'bench.raw' })
          : await rawKafka({ ...common, bootstrap: kafka.bootstrap, topic: 'bench.raw' });
      const cpuUsed = cpu();
      const stats = await received(run, () => count, Date.now() + 60_000, name);
      const e2eSeconds = stats.lastAt !== null ? (stats.lastAt - r.t0) / 1000 : null;
      const result = {
        name,
        suite: 'pipelines',
        kind: 'webhook',
        shape: 'throughput',
        broker,
        endpoints: 1,
        events: count,
        expectedDeliveries: count,
        delivered: stats.unique,
        complete: stats.unique >= count,
        seconds: r.seconds,
        eventsPerSec: r.eventsPerSec,
        deliveriesPerSec: r.eventsPerSec,
        rps: r.eventsPerSec,
        ok: count,
        p50Ms: null,
        p90Ms: null,
        p99Ms: null,
        maxMs: null,
        meanMs: null,
        duplicates: stats.duplicates,
        errors: r.returned,
        outOfOrder: stats.outOfOrder,
        receivedPerSec: e2eSeconds ? round(stats.unique / e2eSeconds, 1) : null,
        batchMs: r.batch,
        bytesPerMessage: stats.unique ? round(stats.bytes / stats.messages, 0) : null,
        cpu: cpuUsed,
      };
      log(
        `bench: ${name}: ${count} confirmed in ${r.seconds} s = ${r.eventsPerSec} events/s (batch p50 ${r.batch.p50Ms} ms p99 ${r.batch.p99Ms} ms); ` +
          `consumer got ${stats.unique}/${count} (${result.receivedPerSec}/s end to end), ${result.bytesPerMessage} bytes a message, ${r.returned} returned`,
      );
      await consumer.ask('forget', run);
      results.push(result);
      return result;
    };

    // ---------------------------------------------------------------- 2./3. through the service
    const createPipeline = async (broker, ordered) => {
      const team = await env.repos.tenancy.createTeam(env.tenant.orgId, `Bench pipeline ${broker} ${modeOf(ordered)}`, 'sandbox', 'us');
      const target = `bench.${modeOf(ordered)}`;
      const destination =
        broker === 'rabbitmq'
          ? {
              type: 'rabbitmq',
              url: `amqp://127.0.0.1:${rabbitmq.port}`,
              username: RABBITMQ_USER,
              password: RABBITMQ_PASSWORD,
              exchange: EXCHANGE,
              exchange_type: 'topic',
            }
          : { type: 'kafka', bootstrap_servers: [kafka.bootstrap] };
      const res = await mgmt.expect(200, 'POST', `/v1/org/${env.tenant.orgId}/team/${team._id}/sandbox/pipeline`, {
        body: { description: `bench ${broker} ${modeOf(ordered)}`, destination, routes: [{ event_type_prefix: '', target }], ordered_per_user: ordered },
        json: true,
      });
      log(`bench: ${label(broker, ordered)}: team ${team._id}, pipeline ${res.json.id} -> ${target}`);
      return { teamId: team._id, pipelineId: res.json.id };
    };
    const publishWith = (through, teamId, run, seq) =>
      publishEvent(
        { publisher: through },
        { teamId, eventType: EVENT_TYPE, data: dataOf(run, seq), userId: userOf(seq), clientUserId: CLIENT_USER_ID, idempotencyKey: `${run}-${seq}` },
      );
    const publishOne = (teamId, run, seq) => publishWith(publisher, teamId, run, seq);
    const failedAttempts = (teamId, since) =>
      env.db.collection('webhook_attempts').countDocuments({ team_id: teamId, timestamp: { $gte: new Date(since) }, error_class: { $ne: null } });

    const finish = async ({ name, run, broker, ordered, shape, teamId, load, t0, stats, extra }) => {
      await settle(teamId);
      const lat = await consumer.ask('latency', run);
      const wallMs = stats.lastAt !== null ? stats.lastAt - t0 : Date.now() - t0;
      const worker = await dispatcherBatches(env.db, teamId, t0, wallMs, logLines.take());
      const events = load.ok + load.errors;
      const seconds = stats.lastAt !== null ? (stats.lastAt - t0) / 1000 : null;
      const result = {
        name,
        suite: 'pipelines',
        kind: 'webhook',
        shape,
        broker,
        ordered,
        endpoints: 1,
        events,
        expectedDeliveries: load.ok,
        delivered: stats.unique,
        complete: stats.unique >= load.ok,
        seconds: round(seconds, 2),
        eventsPerSec: seconds ? round(stats.unique / seconds, 1) : null,
        deliveriesPerSec: seconds ? round(stats.unique / seconds, 1) : null,
        rps: seconds ? round(stats.unique / seconds, 1) : 0,
        ok: stats.unique,
        p50Ms: lat.p50Ms,
        p90Ms: lat.p90Ms,
        p99Ms: lat.p99Ms,
        maxMs: lat.maxMs,
        meanMs: lat.meanMs,
        duplicates: stats.duplicates,
        outOfOrder: stats.outOfOrder,
        errors: load.errors,
        firstError: load.firstError,
        failedAttempts: await failedAttempts(teamId, t0),
        sendCallMs: percentiles(load.latencies),
        worker,
        ...extra,
      };
      log(
        `bench: ${name}: ${stats.unique}/${load.ok} received in ${result.seconds} s = ${result.eventsPerSec} events/s, latency p50 ${lat.p50Ms} ms p99 ${lat.p99Ms} ms, ` +
          `${stats.duplicates} duplicates, ${stats.outOfOrder} out of user order, ${result.failedAttempts} failed attempts, ${load.errors} publish errors` +
          (result.complete ? '' : ' -- INCOMPLETE'),
      );
      if (load.firstError) log(`bench: ${name}: first publish error: ${load.firstError}`);
      await consumer.ask('forget', run);
      results.push(result);
      return result;
    };

    const runThroughput = async (broker, ordered, teamId, roundNo) => {
      const run = `tput-${broker}-${modeOf(ordered)}-${roundNo}`;
      const name = `${label(broker, ordered)}, ${n} events${roundOf(roundNo)}`;
      log(`bench: ${name} ... ${settings.publishers} concurrent publishers`);
      logLines.take();
      const t0 = Date.now();
      const cpu = meter();
      let published = 0;
      let publishedAt = null;
      let load = null;
      const loadPromise = closedLoop(n, settings.publishers, async (seq) => {
        await publishOne(teamId, run, seq);
        published++;
      }).then((l) => ((publishedAt = Date.now()), (load = l)));
      const stats = await received(
        run,
        () => (load ? load.ok : n),
        t0 + settings.timeoutSeconds * 1000,
        name,
        () => (load ? '' : `published ${published}/${n}, `),
      );
      await loadPromise;
      const cpuUsed = cpu();
      return finish({
        name,
        run,
        broker,
        ordered,
        shape: 'throughput',
        teamId,
        load,
        t0,
        stats,
        extra: { publishSeconds: round((publishedAt - t0) / 1000, 2), publishPerSec: round(load.ok / ((publishedAt - t0) / 1000), 1), cpu: cpuUsed },
      });
    };

    const runPaced = async (broker, ordered, teamId) => {
      const run = `paced-${broker}-${modeOf(ordered)}`;
      const name = `${label(broker, ordered)}, paced ${settings.rate}/s`;
      log(`bench: ${name} ... ${settings.pacedSeconds} s`);
      logLines.take();
      const t0 = Date.now();
      const cpu = meter();
      const total = Math.max(1, Math.round(settings.rate * settings.pacedSeconds));
      let sent = 0;
      let load = null;
      const loadPromise = pacedLoop(settings.rate, settings.pacedSeconds, async (seq) => {
        await publishOne(teamId, run, seq);
        sent++;
      }).then((l) => (load = l));
      const stats = await received(
        run,
        () => (load ? load.ok : total),
        t0 + settings.pacedSeconds * 1000 + PACED_TIMEOUT_MS,
        name,
        () => (load ? '' : `published ${sent}/${total}, `),
      );
      await loadPromise;
      const span = stats.lastAt !== null ? stats.lastAt - stats.firstAt : Infinity;
      const saturated = span > 1.2 * settings.pacedSeconds * 1000 || stats.unique < load.ok;
      return finish({
        name: saturated ? `${name} (saturated)` : name,
        run,
        broker,
        ordered,
        shape: 'latency',
        teamId,
        load,
        t0,
        stats,
        extra: { rate: settings.rate, saturated, cpu: cpu() },
      });
    };

    const warmUp = async (broker, ordered, teamId) => {
      const run = `warm-${broker}-${modeOf(ordered)}`;
      await Promise.all(Array.from({ length: WARMUP_EVENTS }, (_, seq) => publishOne(teamId, run, seq)));
      const stats = await received(run, () => WARMUP_EVENTS, Date.now() + 60_000, `${label(broker, ordered)}, warm-up`);
      if (stats.unique < WARMUP_EVENTS) log(`bench: ${label(broker, ordered)}: warm-up got only ${stats.unique}/${WARMUP_EVENTS} within 60 s`);
      await settle(teamId);
      await consumer.ask('forget', run);
    };

    const diagnosis = settings.backlog
      ? await diagnosisScenarios({
          env,
          config,
          consumer,
          publisher,
          publishWith,
          received,
          settle,
          meter,
          logLines,
          log,
          results,
          EventPublisher,
          createLogger,
        })
      : null;
    if (diagnosis) cleanups.push(() => diagnosis.close());
    const publishAloneRun = (broker, roundNo) =>
      publishAloneBaseline({
        env,
        n,
        publishers: settings.publishers,
        publish: (teamId, seq) => publishOne(teamId, `publish-alone-${broker}-${roundNo}`, seq),
        meter,
        log,
        results,
        name: `publish alone (the events' own inserts, no destination), ${n} events (baseline), ${broker}${roundOf(roundNo)}`,
      });
    // The events' own inserts with the broker and consumer beside them (pipeline-raw.mjs): the pipeline's ceiling here.
    const insertBesideBrokerRun = (broker, roundNo) =>
      insertBesideBrokerBaseline({
        env,
        n,
        publishers: settings.publishers,
        publish: (teamId, seq) => publishOne(teamId, `publish-beside-${broker}-${roundNo}`, seq),
        produce: (options) => runRaw(broker, { run: `beside-${broker}-${roundNo}`, ...options }),
        broker,
        round: roundOf(roundNo),
        meter,
        log,
        results,
      });
    for (const broker of settings.brokers) {
      const pipelines = [];
      for (const ordered of settings.ordered) {
        const created = await createPipeline(broker, ordered);
        await warmUp(broker, ordered, created.teamId);
        pipelines.push({ ordered, ...created, runs: [] });
      }
      // Rounds of the baselines and each pipeline in turns (in one order, then in the reverse one): every ratio among
      // them is the median of its rounds' ratios, each of runs seconds apart (the raw producer's own median moved from
      // 12.6k to 22.6k events/s between full runs, and a single publish-alone run 15-30%: a ratio of medians caught that).
      const raws = [];
      const alones = [];
      const besides = [];
      const rawDbs = [];
      for (let roundNo = 1; roundNo <= settings.rounds; roundNo++) {
        const steps = [
          async () =>
            raws.push(
              await runRaw(broker, {
                run: `raw-${broker}-${roundNo}`,
                name: `raw producer ${broker} (baseline)${roundOf(roundNo)}`,
                count: n * settings.rawScale,
              }),
            ),
          async () => alones.push(await publishAloneRun(broker, roundNo)),
          async () => besides.push(await insertBesideBrokerRun(broker, roundNo)),
          ...(diagnosis
            ? [
                async () =>
                  rawDbs.push(await diagnosis.runDbBaseline(n, env.tenant.teamId, (seq) => dataOf('raw-db', seq), userOf, `, ${broker}${roundOf(roundNo)}`)),
              ]
            : []),
          ...pipelines.map((p) => async () => p.runs.push(await runThroughput(broker, p.ordered, p.teamId, roundNo))),
        ];
        for (const step of roundNo % 2 ? steps : steps.reverse()) await step();
      }
      const rateOf = (r) => r.eventsPerSec;
      const roundsRatio = (runs, to = raws) => medianRatio(runs.map(rateOf), to.map(rateOf));
      const raw = medianRun(raws, rateOf);
      const publishAlone = medianRun(alones, rateOf);
      const rawDb = rawDbs.length ? medianRun(rawDbs, rateOf) : null;
      const logMedian = (what, runs, median) =>
        settings.rounds > 1 && log(`bench: ${what}: median of ${runs.map(rateOf).join(', ')} events/s: ${median.eventsPerSec}`);
      logMedian(`raw producer ${broker}`, raws, raw);
      logMedian(`publish alone, ${broker}`, alones, publishAlone);
      for (const [what, runs, note] of [
        ["publish alone (the events' own inserts)", alones, 'the ceiling of the pipeline ratio'],
        ['insert beside the broker', besides, 'the ceiling with the broker and consumer on the same cores'],
      ])
        ratios.push({
          name: `${what} / raw producer, ${broker} (events/s)`,
          of: medianRun(runs, rateOf),
          to: raw,
          ratio: roundsRatio(runs),
          target: null,
          note,
        });
      for (const { ordered, teamId, pipelineId, runs } of pipelines) {
        const tput = medianRun(runs, rateOf);
        logMedian(label(broker, ordered), runs, tput);
        const paced = await runPaced(broker, ordered, teamId);
        const what = `${broker}, ${modeOf(ordered)}`;
        ratios.push({ name: `pipeline / raw producer, ${what} (events/s)`, of: tput, to: raw, ratio: roundsRatio(runs), target: 0.3 });
        ratios.push({
          name: `pipeline / publish alone, ${what} (events/s)`,
          of: tput,
          to: publishAlone,
          ratio: roundsRatio(runs, alones),
          target: null,
          note: 'what delivery costs on top of the insert',
        });
        if (rawDb)
          ratios.push({
            name: `pipeline / raw driver database work, ${what} (events/s)`,
            of: tput,
            to: rawDb,
            ratio: roundsRatio(runs, rawDbs),
            target: null,
            note: 'publish included',
          });
        if (diagnosis) {
          const backlog = await diagnosis.runBacklog(what, teamId, pipelineId, n);
          await diagnosis.runPhases(what, teamId, pipelineId, settings.phaseEvents);
          ratios.push({
            name: `dispatcher alone (backlog) / raw producer, ${what} (events/s)`,
            of: backlog,
            to: raw,
            target: null,
            note: 'no publisher in front',
          });
          ratios.push({
            name: `dispatcher alone (backlog) / raw driver database work, ${what} (events/s)`,
            of: backlog,
            to: rawDb,
            target: null,
            note: 'the overhead over the database work',
          });
        }
        if (broker === 'kafka')
          ratios.push({ kind: 'target', name: `pipeline events/s end to end, ${what}`, value: tput.eventsPerSec, target: 2000, unit: '/s' });
        for (const p of [50, 99]) {
          ratios.push({
            kind: 'info',
            name: `first-event latency p${p}, ${what} (paced ${settings.rate}/s${paced.saturated ? ', saturated' : ''})`,
            value: paced[`p${p}Ms`],
            target: null,
            unit: ' ms',
            note: 'publish call -> consumer',
          });
        }
        if (ordered) {
          ratios.push({
            kind: 'target',
            name: `messages out of user order, ${what} (every run)`,
            value: [...runs, paced].reduce((sum, r) => sum + r.outOfOrder, 0),
            target: 0,
            atMost: true,
          });
        }
      }
    }
    notes.push(...pipelineNotes(results));
    return { results, ratios, notes, details: { settings, batchSize } };
  } finally {
    for (const fn of cleanups.reverse()) {
      try {
        await fn();
      } catch (err) {
        log(`bench: pipelines cleanup: ${err.message}`);
      }
    }
  }
}
