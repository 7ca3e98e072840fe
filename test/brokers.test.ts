import { randomUUID } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import { startTestBrokers, type TestBrokers } from './support/brokers';
import { eventually } from './support/harness';

/**
 * The real brokers the event-streaming pipelines (issue 19) will deliver to, started the way the stack starts
 * its servers: RabbitMQ from Debian's packages (scripts/stack/rabbitmq.mjs) and Kafka in KRaft mode from its
 * jars on Maven Central (scripts/stack/kafka.mjs). What a pipeline needs of each is checked with the client
 * it will use: publisher confirms and persistent messages with their properties (AMQP), and an idempotent
 * producer keyed by user whose messages come back in order per user, with their headers (Kafka).
 */
describe('the brokers of the test stack', () => {
  let brokers: TestBrokers;

  beforeAll(async () => {
    brokers = await startTestBrokers('brokers');
  }, 300_000);

  afterAll(async () => {
    if (brokers) expect(await brokers.stop()).toBe(true);
  }, 30_000);

  it('RabbitMQ: confirmed, persistent messages through a durable topic exchange keep their id, headers and encoding', async () => {
    const connection = await amqp.connect(brokers.amqpUrl);
    try {
      const channel = await connection.createConfirmChannel();
      const exchange = `events-${randomUUID()}`;
      await channel.assertExchange(exchange, 'topic', { durable: true });
      const { queue } = await channel.assertQueue(`labs-${randomUUID()}`, { durable: true });
      await channel.bindQueue(queue, exchange, 'labs');
      const body = gzipSync(Buffer.from(JSON.stringify({ event_type: 'labtest.order.updated', data: { n: 'x'.repeat(2000) } })));
      const ids = Array.from({ length: 20 }, () => randomUUID());
      for (const id of ids) {
        channel.publish(exchange, 'labs', body, {
          persistent: true,
          messageId: id,
          contentType: 'application/json',
          contentEncoding: 'gzip',
          headers: { event_type: 'labtest.order.updated', team_id: 'team-1', user_id: 'user-1' },
        });
      }
      await channel.waitForConfirms();
      const received: amqp.ConsumeMessage[] = [];
      await channel.consume(queue, (m) => m && received.push(m), { noAck: true });
      await eventually(async () => received.length === ids.length, 10_000, 'the published messages');
      expect(received.map((m) => m.properties.messageId)).toEqual(ids);
      expect(received[0].properties).toMatchObject({
        deliveryMode: 2,
        contentEncoding: 'gzip',
        headers: { event_type: 'labtest.order.updated', team_id: 'team-1', user_id: 'user-1' },
      });
      expect(JSON.parse(gunzipSync(received[0].content).toString()).event_type).toBe('labtest.order.updated');
      await channel.close();
    } finally {
      await connection.close();
    }
  });

  it('Kafka: an idempotent producer keyed by user; each user reads its messages back in order, with their headers', async () => {
    const kafka = new Kafka({ clientId: 'brokers-test', brokers: [brokers.kafkaBootstrap], logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    const consumer = kafka.consumer({ groupId: `brokers-test-${randomUUID()}`, sessionTimeout: 6_000, heartbeatInterval: 1_000 });
    const topic = `wearables-${randomUUID()}`;
    try {
      await admin.connect();
      await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
      await producer.connect();
      const users = ['user-a', 'user-b', 'user-c', 'user-d'];
      const sent = users.flatMap((user) => Array.from({ length: 25 }, (_, seq) => ({ user, seq })));
      await producer.send({
        topic,
        acks: -1,
        messages: sent.map(({ user, seq }) => ({
          key: user,
          value: JSON.stringify({ user, seq }),
          headers: { event_id: randomUUID(), event_type: 'daily.data.steps.created', team_id: 'team-1', user_id: user },
        })),
      });
      const byUser = new Map<string, number[]>();
      const partitionsOf = new Map<string, Set<number>>();
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run({
        eachMessage: async ({ partition, message }) => {
          const user = message.key!.toString();
          expect(message.headers?.user_id?.toString()).toBe(user);
          byUser.set(user, [...(byUser.get(user) ?? []), JSON.parse(message.value!.toString()).seq]);
          partitionsOf.set(user, new Set([...(partitionsOf.get(user) ?? []), partition]));
        },
      });
      await eventually(async () => [...byUser.values()].reduce((n, s) => n + s.length, 0) === sent.length, 60_000, 'the produced messages');
      for (const user of users) {
        expect({ user, seqs: byUser.get(user) }).toEqual({ user, seqs: Array.from({ length: 25 }, (_, i) => i) });
        expect(partitionsOf.get(user)?.size).toBe(1); // one user, one partition: the order Kafka keeps
      }
    } finally {
      await consumer.disconnect().catch(() => undefined);
      await producer.disconnect().catch(() => undefined);
      await admin.disconnect().catch(() => undefined);
    }
  }, 90_000);
});
