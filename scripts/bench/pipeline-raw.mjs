// The raw producer baselines of the pipeline suite (pipelines.mjs): the messages a pipeline sends, built by the same
// code (the envelope of lib/events/model.ts; bytes, gzip rule, properties and headers by
// lib/events/destinations/pipeline/brokers.ts amqpMessageOf / kafkaMessageOf), published straight from this process with the clients the worker uses, one batch
// of WEBHOOK_BATCH_SIZE at a time (as one dispatcher sends them), with no database and no Temporal in between:
//   RabbitMQ: amqplib confirm channel, persistent + mandatory, publish a batch then waitForConfirms;
//   Kafka: kafkajs idempotent producer (maxInFlightRequests 1), sendBatch with acks -1, key = user_id.
// Timed from the first publish to the last confirm / acknowledged produce (connecting is not timed: the
// service's connection is warm too). The consumers (pipeline-consumer.mjs) receive these messages as well.
// And the events' own inserts alone (publishAloneBaseline): what the pipeline cannot outrun.
import { performance } from 'node:perf_hooks';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import { closedLoop, percentiles } from './webhook-measures.mjs';

const round = (x, digits = 2) => (x === null || x === undefined || !Number.isFinite(x) ? null : Math.round(x * 10 ** digits) / 10 ** digits);

function batchStats(batchMs) {
  const sorted = Float64Array.from(batchMs).sort();
  const at = (p) => (sorted.length ? round(sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1], 1) : null);
  return { batches: sorted.length, p50Ms: at(50), p99Ms: at(99), maxMs: at(100) };
}

/**
 * `n` messages (`makeMessage(seq)` -> { eventId, eventType, teamId, userId, body, createdAt }) to `exchange` with
 * routing key `key`, in confirmed batches of `batchSize`. Returns { t0 (epoch ms), seconds, eventsPerSec, returned, batch }.
 * `ready(count)`, if given, is awaited before each batch (it resolves once `count` messages may be sent).
 */
export async function rawRabbitmq({ url, exchange, key, n, batchSize, makeMessage, amqpMessageOf, ready = async () => undefined }) {
  const connection = await amqp.connect(url);
  try {
    const channel = await connection.createConfirmChannel();
    await channel.assertExchange(exchange, 'topic', { durable: true });
    let returned = 0;
    channel.on('return', () => returned++);
    const batchMs = [];
    const t0 = Date.now();
    const started = performance.now();
    for (let from = 0; from < n; from += batchSize) {
      await ready(Math.min(n, from + batchSize));
      const b = performance.now();
      for (let seq = from; seq < Math.min(n, from + batchSize); seq++) {
        const { content, options } = amqpMessageOf(makeMessage(seq));
        channel.publish(exchange, key, content, options);
      }
      await channel.waitForConfirms();
      batchMs.push(performance.now() - b);
    }
    const seconds = (performance.now() - started) / 1000;
    return { t0, seconds: round(seconds, 3), eventsPerSec: round(n / seconds, 1), returned, batch: batchStats(batchMs) };
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** `n` messages to `topic` with the idempotent producer, one sendBatch (acks -1) of `batchSize` at a time. Same result shape. */
export async function rawKafka({ bootstrap, topic, n, batchSize, makeMessage, kafkaMessageOf, ready = async () => undefined }) {
  const kafka = new Kafka({ clientId: 'bench-raw-producer', brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false, retry: { retries: 2, maxRetryTime: 2_000 } });
  await producer.connect();
  try {
    const batchMs = [];
    const t0 = Date.now();
    const started = performance.now();
    for (let from = 0; from < n; from += batchSize) {
      await ready(Math.min(n, from + batchSize));
      const b = performance.now();
      const messages = [];
      for (let seq = from; seq < Math.min(n, from + batchSize); seq++) messages.push(kafkaMessageOf(makeMessage(seq)));
      await producer.sendBatch({ acks: -1, timeout: 15_000, topicMessages: [{ topic, messages }] });
      batchMs.push(performance.now() - b);
    }
    const seconds = (performance.now() - started) / 1000;
    return { t0, seconds: round(seconds, 3), eventsPerSec: round(n / seconds, 1), returned: 0, batch: batchStats(batchMs) };
  } finally {
    await producer.disconnect().catch(() => undefined);
  }
}

/**
 * The events' own inserts as the service makes them: `n` events through the pipeline suite's publisher
 * (`publish(teamId, seq)`), `publishers` at once in closed loops, to a new team with no destination (no fan-out, no
 * delivery). Its ratio to the raw producer is the ceiling of the pipeline's. Returns a bench result (events/s).
 */
export async function publishAloneBaseline({
  env,
  n,
  publishers,
  publish,
  meter,
  log,
  /** Where the run is recorded, if given. */
  results,
  name = `publish alone (the events' own inserts, no destination), ${n} events (baseline)`,
}) {
  const team = await env.repos.tenancy.createTeam(env.tenant.orgId, 'Bench publish alone', 'sandbox', 'us');
  log(`bench: ${name} ... ${publishers} concurrent publishers`);
  const cpu = meter();
  const t0 = performance.now();
  const load = await closedLoop(n, publishers, (seq) => publish(team._id, seq));
  const seconds = (performance.now() - t0) / 1000;
  if (load.errors) throw new Error(`bench: ${name}: ${load.errors} publishes failed (${load.firstError})`);
  const lat = percentiles(load.latencies);
  log(`bench: ${name}: ${round(n / seconds, 1)} events/s, publish p50 ${lat.p50Ms} ms p99 ${lat.p99Ms} ms`);
  const result = {
    name,
    suite: 'pipelines',
    shape: 'throughput',
    endpoints: 0,
    events: n,
    seconds: round(seconds, 2),
    eventsPerSec: round(n / seconds, 1),
    rps: round(n / seconds, 1),
    ok: load.ok,
    ...lat,
    errors: 0,
    cpu: cpu(),
  };
  results?.push(result);
  return result;
}

/**
 * The events' own inserts with the broker doing its part beside them on the same cores: the same publishes as
 * publish alone while the raw producer (`produce({ name, ready })`, pipelines.mjs runRaw) sends each batch once that
 * many are published and the consumer reads them; events/s from the start to the last message received. What any
 * pipeline here can at best reach: it adds only our dispatcher's work to this.
 */
export async function insertBesideBrokerBaseline({ env, n, publishers, publish, produce, broker, round = '', meter, log, results }) {
  let published = 0;
  const waiting = [];
  const ready = (count) => (count <= published ? Promise.resolve() : new Promise((resolve) => waiting.push({ count, resolve })));
  const publishedOne = () => {
    published++;
    for (const w of waiting.filter((w) => w.count <= published)) {
      waiting.splice(waiting.indexOf(w), 1);
      w.resolve();
    }
  };
  const name = `insert beside the broker: publish alone while the raw producer sends the published events, ${broker} (baseline)${round}`;
  const [, raw] = await Promise.all([
    publishAloneBaseline({ env, n, publishers, publish: (teamId, seq) => publish(teamId, seq).then(publishedOne), meter, log, name: `${name}: the publishes` }),
    produce({ name: `${name}: the producer`, ready }),
  ]);
  const result = { ...raw, name, eventsPerSec: raw.receivedPerSec, rps: raw.receivedPerSec };
  log(`bench: ${name}: ${result.eventsPerSec} events/s end to end`);
  results.push(result);
  return result;
}
