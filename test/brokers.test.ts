import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { gunzipSync, gzipSync } from 'node:zlib';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import { PipelineSender, type BrokerMessage } from '../lib/events/destinations/pipeline/brokers';
import type { PipelineDoc } from '../lib/events/destinations/pipeline/model';
import { startTestBrokers, type TestBrokers } from './support/brokers';
import { eventually } from './support/harness';

/** A fresh durable topic exchange and a durable queue bound to it for routing key `labs`. */
async function labsQueue(channel: amqp.Channel): Promise<{ exchange: string; queue: string }> {
  const exchange = `events-${randomUUID()}`;
  await channel.assertExchange(exchange, 'topic', { durable: true });
  const { queue } = await channel.assertQueue(`labs-${randomUUID()}`, { durable: true });
  await channel.bindQueue(queue, exchange, 'labs');
  return { exchange, queue };
}

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
      const { exchange, queue } = await labsQueue(channel);
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

  it('RabbitMQ through the pipeline sender: a batch of 500 leaves in a few socket writes, each message with its own confirm or refusal', async () => {
    const connection = await amqp.connect(brokers.amqpUrl);
    const sender = new PipelineSender({ requireHttps: false, allowLoopback: true, allowlist: [] });
    const writes = { count: 0 };
    const port = Number(new URL(brokers.amqpUrl).port);
    const countWrites = (method: '_write' | '_writev') => {
      const original = net.Socket.prototype[method] as (...args: unknown[]) => unknown;
      return jest.spyOn(net.Socket.prototype, method).mockImplementation(function (this: net.Socket, ...args: unknown[]) {
        if (this.remotePort === port) writes.count++;
        return original.apply(this, args);
      } as never);
    };
    try {
      const channel = await connection.createChannel();
      const { exchange, queue } = await labsQueue(channel);
      const now = new Date();
      const pipeline = {
        _id: randomUUID(),
        team_id: 'team-1',
        destination: { type: 'rabbitmq', url: brokers.amqpUrl, username: null, exchange, exchange_type: 'topic' },
        credentials: null,
        routes: [],
        ordered_per_user: false,
        disabled: false,
        disabled_reason: null,
        failing_since: null,
        created_at: now,
        updated_at: now,
        description: '',
        version: 1,
      } as PipelineDoc;
      // Every 50th message has no queue bound for its routing key; every 7th is large enough to be gzipped.
      const messages: BrokerMessage[] = Array.from({ length: 500 }, (_, i) => ({
        eventId: `event-${String(i).padStart(3, '0')}`,
        eventType: 'labtest.order.updated',
        teamId: 'team-1',
        userId: `user-${i % 10}`,
        target: i % 50 === 49 ? 'nowhere' : 'labs',
        body: JSON.stringify({ event_type: 'labtest.order.updated', data: { i, note: i % 7 === 0 ? 'x'.repeat(1500) : '' } }),
        createdAt: now,
      }));
      await sender.send(pipeline, messages.slice(0, 1), 10_000); // the connection opens outside the count
      const spies = [countWrites('_write'), countWrites('_writev')];
      const results = await sender.send(pipeline, messages, 10_000).finally(() => spies.forEach((s) => s.mockRestore()));
      // amqplib alone writes each message on its own (500 writes); corked, the batch leaves in a handful.
      expect(writes.count).toBeGreaterThan(0);
      expect(writes.count).toBeLessThan(20);
      expect(results.map((r) => (r.ok ? 'ok' : r.errorClass))).toEqual(messages.map((m) => (m.target === 'nowhere' ? 'unroutable' : 'ok')));
      const received: amqp.ConsumeMessage[] = [];
      await channel.consume(queue, (m) => m && received.push(m), { noAck: true });
      const routed = messages.filter((m) => m.target === 'labs');
      await eventually(async () => received.length === routed.length + 1, 10_000, 'the routed messages');
      expect(received.slice(1).map((m) => m.properties.messageId)).toEqual(routed.map((m) => m.eventId));
      const big = received.find((m) => m.properties.messageId === 'event-007')!;
      expect(big.properties.contentEncoding).toBe('gzip');
      expect(JSON.parse(gunzipSync(big.content).toString()).data.i).toBe(7);
      await channel.close();
    } finally {
      await sender.close();
      await connection.close();
    }
  }, 60_000);

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
