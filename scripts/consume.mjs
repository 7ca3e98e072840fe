// Prints the events a pipeline sends, one line each: `node scripts/consume.mjs rabbitmq [routing-key-pattern]` or
// `node scripts/consume.mjs kafka <topic>...`. Reads the broker addresses `npm run dev` wrote to
// .devstack/brokers.json (override with AMQP_URL, PIPELINE_EXCHANGE or KAFKA_BOOTSTRAP). RabbitMQ: a temporary
// queue bound to the exchange (default healthbridge.events) with the pattern (default '#': everything). Kafka: a
// consumer group of its own, from the beginning (topics that do not exist yet are created). Gzipped messages (over 1 KiB) are unzipped. Ctrl-C stops.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const [kind, ...args] = process.argv.slice(2);
let known = {};
try {
  known = JSON.parse(readFileSync(path.join(repoRoot, '.devstack', 'brokers.json'), 'utf8'));
} catch {
  // no dev brokers recorded: the variables must say where
}
const line = (props, content, encoding) => {
  const body = (encoding === 'gzip' ? gunzipSync(content) : content).toString('utf8');
  console.log(`${new Date().toISOString()} ${JSON.stringify(props)} ${body.length > 500 ? `${body.slice(0, 500)}…` : body}`);
};

if (kind === 'rabbitmq') {
  const url = process.env.AMQP_URL ?? known.amqpUrl;
  if (!url) throw new Error('consume: no RabbitMQ address: start `DEV_BROKERS=rabbitmq npm run dev`, or set AMQP_URL.');
  const exchange = process.env.PIPELINE_EXCHANGE ?? 'healthbridge.events';
  const connection = await amqp.connect(url);
  const channel = await connection.createChannel();
  await channel.assertExchange(exchange, 'topic', { durable: true });
  const { queue } = await channel.assertQueue('', { exclusive: true });
  await channel.bindQueue(queue, exchange, args[0] ?? '#');
  console.log(`consume: reading exchange ${exchange} with routing key pattern ${args[0] ?? '#'} (Ctrl-C stops)`);
  await channel.consume(
    queue,
    (m) =>
      m && line({ routing_key: m.fields.routingKey, message_id: m.properties.messageId, ...m.properties.headers }, m.content, m.properties.contentEncoding),
    { noAck: true },
  );
  process.on('SIGINT', () => connection.close().finally(() => process.exit(0)));
} else if (kind === 'kafka') {
  const bootstrap = process.env.KAFKA_BOOTSTRAP ?? known.kafkaBootstrap;
  if (!bootstrap) throw new Error('consume: no Kafka address: start `DEV_BROKERS=kafka npm run dev`, or set KAFKA_BOOTSTRAP.');
  if (!args.length) throw new Error('consume: name the topic(s): node scripts/consume.mjs kafka <topic>...');
  const kafka = new Kafka({ clientId: 'healthbridge-consume', brokers: [bootstrap], logLevel: logLevel.NOTHING }); // its transient errors are noise here; real ones throw
  // Pipelines do not create topics: make the ones to read (three partitions; existing ones are left as they are).
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({ topics: args.map((topic) => ({ topic, numPartitions: 3 })), waitForLeaders: true });
  await admin.disconnect();
  if (created) console.log(`consume: created topic(s) ${args.join(', ')}`);
  const consumer = kafka.consumer({ groupId: `consume-${process.pid}-${Date.now()}` });
  await consumer.connect();
  for (const topic of args) await consumer.subscribe({ topic, fromBeginning: true });
  console.log(`consume: reading ${args.join(', ')} from ${bootstrap} (Ctrl-C stops)`);
  await consumer.run({
    eachMessage: async ({ topic, partition, message }) => {
      const headers = Object.fromEntries(Object.entries(message.headers ?? {}).map(([k, v]) => [k, String(v)]));
      line({ topic, partition, key: message.key?.toString(), ...headers }, message.value, headers['content-encoding']);
    },
  });
  process.on('SIGINT', () => consumer.disconnect().finally(() => process.exit(0)));
} else {
  console.error('usage: node scripts/consume.mjs rabbitmq [routing-key-pattern] | kafka <topic>...');
  process.exit(2);
}
