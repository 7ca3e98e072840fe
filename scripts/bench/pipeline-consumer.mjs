// The broker-side consumers of the pipeline suite (pipelines.mjs), in their own process so they never share an
// event loop with the publisher or the raw producers. Started with fork() and one JSON argument:
//   { amqpUrl, exchange, queues: [{ queue, key }], kafkaBootstrap, topics: [name] }
// It declares the exchange and the queues (durable, bound by their routing key) and consumes them (amqplib,
// no acks, prefetch 2,000), and consumes the Kafka topics from the beginning (kafkajs, one group, eachBatch);
// then reports { ready: true } over IPC (or { error }). Exits on SIGTERM/SIGINT or when the parent goes away.
//
// Messages are grouped by run: the `bench_run` field of the event data (the envelope is `{event_type, data:
// {..., bench_run, seq, sent_at}, user_id, ...}`, gzipped when content-encoding says so). Within a run a
// message is its seq: the first arrival time is kept (Date.now(), the same machine clock as the publisher),
// latency = first arrival - data.sent_at, later arrivals of the same seq count as duplicates, and a message
// whose seq is below one already received for the same user_id counts as out of order (seq order is publish
// order: ids are time-ordered in the publishing process).
//
// IPC requests { id, cmd: 'stats' | 'latency' | 'forget', run } are answered with { id, ...result }.
import { gunzipSync } from 'node:zlib';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import { answerParent } from './child-server.mjs';

const config = JSON.parse(process.argv[2] ?? '{}');
const runs = new Map();

function runState(name) {
  let r = runs.get(name);
  if (!r) {
    r = { messages: 0, duplicates: 0, outOfOrder: 0, first: new Map(), lastSeqOfUser: new Map(), latencies: [], firstAt: null, lastAt: null, bytes: 0 };
    runs.set(name, r);
  }
  return r;
}

function record(content, gzip, at) {
  const body = JSON.parse((gzip ? gunzipSync(content) : content).toString('utf8'));
  const { bench_run: run = '(untagged)', seq, sent_at: sentAt } = body.data ?? {};
  const r = runState(run);
  r.messages++;
  r.bytes += content.length;
  if (r.first.has(seq)) {
    r.duplicates++;
    return;
  }
  r.first.set(seq, at);
  r.firstAt ??= at;
  r.lastAt = r.lastAt === null ? at : Math.max(r.lastAt, at);
  if (Number.isFinite(sentAt)) r.latencies.push(at - sentAt);
  if (body.user_id) {
    const last = r.lastSeqOfUser.get(body.user_id);
    if (last !== undefined && seq < last) r.outOfOrder++;
    else r.lastSeqOfUser.set(body.user_id, seq);
  }
}

const closers = [];

async function startRabbitmq() {
  const connection = await amqp.connect(config.amqpUrl);
  closers.push(() => connection.close());
  const channel = await connection.createChannel();
  await channel.prefetch(2000);
  await channel.assertExchange(config.exchange, 'topic', { durable: true });
  for (const { queue, key } of config.queues) {
    await channel.assertQueue(queue, { durable: true });
    await channel.bindQueue(queue, config.exchange, key);
    await channel.consume(queue, (m) => m && record(m.content, m.properties.contentEncoding === 'gzip', Date.now()), { noAck: true });
  }
}

async function startKafka() {
  const kafka = new Kafka({ clientId: 'bench-pipeline-consumer', brokers: [config.kafkaBootstrap], logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `bench-pipelines-${process.pid}`, sessionTimeout: 10_000, heartbeatInterval: 1_000, maxWaitTimeInMs: 100 });
  closers.push(() => consumer.disconnect());
  const joined = new Promise((resolve) => consumer.on(consumer.events.GROUP_JOIN, resolve));
  await consumer.connect();
  await consumer.subscribe({ topics: config.topics, fromBeginning: true });
  await consumer.run({
    partitionsConsumedConcurrently: 8,
    eachBatch: async ({ batch }) => {
      const at = Date.now();
      for (const m of batch.messages) record(m.value, String(m.headers?.['content-encoding'] ?? '') === 'gzip', at);
    },
  });
  await joined;
}

answerParent(runs, (r) =>
  r
    ? { messages: r.messages, unique: r.first.size, duplicates: r.duplicates, outOfOrder: r.outOfOrder, firstAt: r.firstAt, lastAt: r.lastAt, bytes: r.bytes }
    : { messages: 0, unique: 0, duplicates: 0, outOfOrder: 0, firstAt: null, lastAt: null, bytes: 0 },
);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  setTimeout(() => process.exit(0), 5000).unref();
  await Promise.allSettled(closers.map((fn) => fn()));
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
process.once('disconnect', stop);

try {
  await Promise.all([startRabbitmq(), startKafka()]);
  process.send?.({ ready: true });
} catch (err) {
  process.send?.({ error: err.message });
  await stop();
}
