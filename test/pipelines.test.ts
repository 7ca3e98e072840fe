import { randomUUID } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import amqp from 'amqplib';
import { Kafka, logLevel, type Consumer } from 'kafkajs';
import { publishEvent } from '../lib/events/publisher';
import { deliveryPolicyFrom } from '../lib/events/fan-out';
import { envelopeOf, type EventDoc } from '../lib/events/model';
import { batchesOf } from '../lib/events/destinations/pipeline/batches';
import { timeOrderedUuid } from '../lib/platform/keys';
import { eraseUserWebhookData } from '../lib/events/dispatcher-commands';
import { Pipeline, PipelineList } from '../schemas/pipeline';
import { boundQueue, startTestBrokers, type TestBrokers } from './support/brokers';
import { createTenant, eventually, expectSchema, managementClient, startTestApp, type HttpClient, type Tenant, type TestApp } from './support/harness';
import { rawText } from './support/raw';

/**
 * Event-streaming pipelines end to end: the real app publishes, the shared worker (scripts/test.mjs) sends
 * through Temporal to a real RabbitMQ and a real Kafka started for this file (test/support/brokers.ts), and the
 * test reads what arrived with amqplib and kafkajs consumers, as a customer's data team would.
 */

// Retries every second for ~40 s: a broker stopped for 30 s is waited out.
const RETRY = { WEBHOOK_RETRY_SCHEDULE_MS: ['0', ...Array(40).fill('1000')].join(','), WEBHOOK_ATTEMPT_TIMEOUT_MS: 3000, WEBHOOK_THROTTLE_FLOOR_MS: 500 };

let app: TestApp;
let tenant: Tenant;
let mgmt: HttpClient;
let brokers: TestBrokers;
let base: string;
let amqpConnection: amqp.ChannelModel;
let kafka: Kafka;
const consumers: Consumer[] = [];

beforeAll(async () => {
  [app, brokers] = await Promise.all([startTestApp(RETRY), startTestBrokers('pipelines')]);
  tenant = await createTenant(app.deps, 'Pipelines');
  mgmt = managementClient(app, tenant);
  base = `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/pipeline`;
  amqpConnection = await amqp.connect(brokers.amqpUrl);
  amqpConnection.on('error', () => undefined); // the outage test stops the broker under it
  kafka = new Kafka({ clientId: 'pipelines-test', brokers: [brokers.kafkaBootstrap], logLevel: logLevel.NOTHING });
}, 300_000);

afterAll(async () => {
  await Promise.all(consumers.map((c) => c.disconnect().catch(() => undefined)));
  await amqpConnection?.close().catch(() => undefined);
  if (brokers) expect(await brokers.stop()).toBe(true);
  await app?.close();
}, 60_000);

const amqpParts = () => {
  const u = new URL(brokers.amqpUrl);
  return { url: `amqp://${u.host}`, username: decodeURIComponent(u.username), password: decodeURIComponent(u.password) };
};

async function createPipeline(body: Record<string, unknown>): Promise<Pipeline> {
  const res = await mgmt.post(base, body);
  expect(res.status).toBe(200);
  expectSchema(Pipeline, res.body);
  return res.body;
}

const queueOf = (exchange: string, routingKey: string) => boundQueue(amqpConnection, exchange, routingKey);

const bodyOf = (m: { content: Buffer; encoding?: string }) => JSON.parse((m.encoding === 'gzip' ? gunzipSync(m.content) : m.content).toString('utf8'));
const amqpBody = (m: amqp.ConsumeMessage) => bodyOf({ content: m.content, encoding: m.properties.contentEncoding });

const publish = (eventType: string, userId: string | null, data: Record<string, unknown> = {}) =>
  publishEvent(app.deps, { teamId: tenant.teamId, eventType, data, userId, clientUserId: userId && `client-${userId}` });

describe('pipelines: routing to RabbitMQ by event-type prefix', () => {
  let pipeline: Pipeline;
  let labs: amqp.ConsumeMessage[];
  let wearables: amqp.ConsumeMessage[];
  const exchange = `hb-${randomUUID()}`;

  beforeAll(async () => {
    pipeline = await createPipeline({
      description: 'data team',
      destination: { type: 'rabbitmq', ...amqpParts(), exchange, exchange_type: 'topic' },
      routes: [
        { event_type_prefix: 'labtest.', target: 'labs' },
        { event_type_prefix: 'daily.data.', target: 'wearables' },
      ],
    });
    labs = (await queueOf(exchange, 'labs')).messages;
    wearables = (await queueOf(exchange, 'wearables')).messages;
  });

  test('an event takes the first matching route; an event no route takes is not sent (nor queued)', async () => {
    const user = randomUUID();
    const lab = await publish('labtest.order.updated', user, { order_id: 'o-1' });
    const steps = await publish('daily.data.steps.created', user, { n: 1 });
    const none = await publish('provider.connection.created', user, {});
    await eventually(
      async () => labs.some((m) => m.properties.messageId === lab.id) && wearables.some((m) => m.properties.messageId === steps.id),
      30_000,
      'routed messages',
    );
    const m = labs.find((x) => x.properties.messageId === lab.id)!;
    expect(m.properties).toMatchObject({
      deliveryMode: 2,
      contentType: 'application/json',
      type: 'labtest.order.updated',
      headers: { event_type: 'labtest.order.updated', team_id: tenant.teamId, user_id: user },
    });
    expect(m.properties.contentEncoding).toBeUndefined(); // small: not compressed
    expect(amqpBody(m)).toEqual({
      event_type: 'labtest.order.updated',
      data: { order_id: 'o-1' },
      team_id: tenant.teamId,
      user_id: user,
      client_user_id: `client-${user}`,
    });
    const noneDelivery = await app.inspect.collection('webhook_deliveries').findOne({ _id: `${none.id}:${pipeline.id}` } as never);
    expect(noneDelivery).toBeNull();
    const attempts = await mgmt.get(`${base}/${pipeline.id}/attempts?event_id=${lab.id}`);
    expect(attempts.status).toBe(200);
    expect(attempts.body.data).toEqual([
      expect.objectContaining({ event_id: lab.id, webhook_id: pipeline.id, attempt: 1, status_code: null, error_class: null }),
    ]);
  });

  test('an event over 1 KiB is gzipped with content-encoding: gzip; the message id is the event id', async () => {
    const big = await publish('labtest.result.critical', randomUUID(), { note: 'x'.repeat(4000) });
    const m = await eventually(async () => labs.find((x) => x.properties.messageId === big.id), 30_000, 'the large message');
    expect(m.properties.contentEncoding).toBe('gzip');
    expect(m.content.length).toBeLessThan(1024);
    expect(amqpBody(m).data.note).toHaveLength(4000);
  });

  test('test-send publishes pipeline.test by the first route', async () => {
    const res = await mgmt.post(`${base}/${pipeline.id}/test`, {});
    expect(res.status).toBe(202);
    const m = await eventually(async () => labs.find((x) => x.properties.messageId === res.body.event_id), 30_000, 'the test message');
    expect(amqpBody(m)).toMatchObject({ event_type: 'pipeline.test', data: { pipeline_id: pipeline.id } });
    const unrouted = await mgmt.post(`${base}/${pipeline.id}/test`, { event_type: 'provider.connection.created' });
    expect(unrouted.status).toBe(422);
    expect(unrouted.body.detail[0].loc).toEqual(['body', 'event_type']);
  });

  test('an unroutable message (no queue bound for its routing key) is a failed attempt, not a silent loss', async () => {
    const other = await createPipeline({
      destination: { type: 'rabbitmq', ...amqpParts(), exchange },
      routes: [{ event_type_prefix: '', target: `nobody-${randomUUID()}` }],
    });
    const e = await publish('provider.connection.created', randomUUID());
    const attempts = await eventually(
      async () => {
        const res = await mgmt.get(`${base}/${other.id}/attempts?event_id=${e.id}`);
        return res.body.data.length ? res.body.data : null;
      },
      30_000,
      'an attempt',
    );
    expect(attempts[0]).toMatchObject({ error_class: 'unroutable' });
    expect(await mgmt.del(`${base}/${other.id}`)).toMatchObject({ status: 204 });
  });
});

describe('pipelines: Kafka', () => {
  test('keyed by user_id with the event id and type in headers; each user reads its events in order', async () => {
    const topic = `wearables-${randomUUID()}`;
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
    await admin.disconnect();
    const pipeline = await createPipeline({
      destination: { type: 'kafka', bootstrap_servers: [brokers.kafkaBootstrap] },
      routes: [{ event_type_prefix: 'daily.data.', target: topic }],
      ordered_per_user: true,
    });
    expect(pipeline.destination).toEqual({ type: 'kafka', bootstrap_servers: [brokers.kafkaBootstrap], tls: false, sasl: null, has_password: false });
    const users = [randomUUID(), randomUUID(), randomUUID()];
    const sent: { id: string; user: string; seq: number }[] = [];
    for (let seq = 0; seq < 20; seq++) {
      for (const user of users)
        sent.push({ id: (await publish('daily.data.steps.created', user, { seq, pad: seq === 5 ? 'y'.repeat(2000) : '' })).id, user, seq });
    }
    const got = new Map<string, { seq: number; id: string; partition: number }[]>();
    const consumer = kafka.consumer({ groupId: `pipelines-${randomUUID()}`, sessionTimeout: 6_000, heartbeatInterval: 1_000 });
    consumers.push(consumer);
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        const headers = Object.fromEntries(Object.entries(message.headers ?? {}).map(([k, v]) => [k, String(v)]));
        const body = bodyOf({ content: message.value!, encoding: headers['content-encoding'] });
        expect(message.key!.toString()).toBe(body.user_id);
        expect(headers).toMatchObject({
          event_type: 'daily.data.steps.created',
          team_id: tenant.teamId,
          user_id: body.user_id,
          'content-type': 'application/json',
        });
        got.set(body.user_id, [...(got.get(body.user_id) ?? []), { seq: body.data.seq, id: headers['message-id'], partition }]);
      },
    });
    await eventually(async () => [...got.values()].reduce((n, l) => n + l.length, 0) >= sent.length, 60_000, 'the produced events');
    for (const user of users) {
      const mine = got.get(user)!;
      expect(mine.map((m) => m.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i));
      expect(mine.map((m) => m.id)).toEqual(sent.filter((s) => s.user === user).map((s) => s.id));
      expect(new Set(mine.map((m) => m.partition)).size).toBe(1);
    }
    // Each batch's log keeps where Kafka wrote it: the partitions' first offsets.
    const logs = (await app.inspect.collection('pipeline_batch_log').find({ destination_id: pipeline.id }).toArray()).filter((l) => l.attempt);
    expect(logs.length).toBeGreaterThan(0);
    for (const l of logs) expect(l.attempt.broker).toMatch(new RegExp(`^(${topic}/\\d+@\\d+ ?)+$`));
  }, 120_000);
});

describe('pipelines: Kafka with SASL', () => {
  test('logs in with the stored (encrypted) password; a wrong one is an auth_error attempt', async () => {
    const topic = `sasl-${randomUUID()}`;
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic }], waitForLeaders: true });
    await admin.disconnect();
    const { bootstrap, username, password } = brokers.kafkaSasl;
    const destination = (pw: string) => ({ type: 'kafka', bootstrap_servers: [bootstrap], sasl: { mechanism: 'plain', username, password: pw } });
    const good = await createPipeline({ destination: destination(password), routes: [{ event_type_prefix: 'provider.', target: topic }] });
    expect(good.destination).toMatchObject({ sasl: { mechanism: 'plain', username }, has_password: true });
    const raw = await app.inspect.collection('pipelines').findOne({ _id: good.id } as never);
    expect(rawText(raw)).not.toContain(password);
    const bad = await createPipeline({ destination: destination('wrong-password'), routes: [{ event_type_prefix: 'provider.', target: topic }] });
    const event = await publish('provider.connection.created', randomUUID(), { provider: 'demo' });
    const received: string[] = [];
    const consumer = kafka.consumer({ groupId: `sasl-${randomUUID()}`, sessionTimeout: 6_000, heartbeatInterval: 1_000 });
    consumers.push(consumer);
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void received.push(String(message.headers?.['message-id'])) });
    await eventually(async () => received.includes(event.id), 60_000, 'the message through SASL');
    const refused = await eventually(
      async () => (await mgmt.get(`${base}/${bad.id}/attempts?event_id=${event.id}`)).body.data[0],
      30_000,
      'the refused attempt',
    );
    expect(refused).toMatchObject({ error_class: 'auth_error' });
    for (const p of [good, bad]) expect((await mgmt.del(`${base}/${p.id}`)).status).toBe(204);
  }, 90_000);
});

describe('pipelines: the resource', () => {
  test('credentials are stored encrypted and never returned; list, get, patch, disable and enable', async () => {
    const { url, username, password } = amqpParts();
    const created = await createPipeline({
      destination: { type: 'rabbitmq', url: url.replace('amqp://', `amqp://${username}:${encodeURIComponent(password)}@`) },
      routes: [{ event_type_prefix: '', target: 'all' }],
    });
    expect(created.destination).toEqual({
      type: 'rabbitmq',
      url: `${url}`,
      username,
      exchange: 'healthbridge.events',
      exchange_type: 'topic',
      has_password: true,
    });
    expect(JSON.stringify(created)).not.toContain(password);
    const raw = await app.inspect.collection('pipelines').findOne({ _id: created.id } as never);
    expect(raw).not.toBeNull();
    expect(rawText(raw)).not.toContain(password);
    expect((raw as any).credentials).toMatchObject({ ciphertext: expect.anything() });

    const list = await mgmt.get(base);
    expectSchema(PipelineList, list.body);
    expect(list.body.data.map((p: Pipeline) => p.id)).toContain(created.id);
    // PATCH without a password keeps the stored one.
    const patched = await mgmt.patch(`${base}/${created.id}`, { destination: { type: 'rabbitmq', url, username, exchange: 'other' }, ordered_per_user: true });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ ordered_per_user: true, destination: { exchange: 'other', has_password: true } });
    expect(await mgmt.post(`${base}/${created.id}/disable`, {})).toMatchObject({ status: 200, body: { disabled: true, disabled_reason: 'manual' } });
    expect(await mgmt.post(`${base}/${created.id}/enable`, {})).toMatchObject({ status: 200, body: { disabled: false, disabled_reason: null } });
    expect((await mgmt.del(`${base}/${created.id}`)).status).toBe(204);
    expect((await mgmt.get(`${base}/${created.id}`)).status).toBe(404);
  });

  test.each([
    ['a private broker address', { type: 'rabbitmq', url: 'amqp://10.1.2.3:5672' }, ['body', 'destination', 'url'], /private network/],
    ['a cloud metadata address', { type: 'rabbitmq', url: 'amqp://169.254.169.254' }, ['body', 'destination', 'url'], /metadata/],
    [
      'a private Kafka server',
      { type: 'kafka', bootstrap_servers: ['127.0.0.1:9092', '192.168.1.5:9092'] },
      ['body', 'destination', 'bootstrap_servers', 1],
      /private network/,
    ],
    ['a non-amqp url', { type: 'rabbitmq', url: 'http://example.com' }, ['body', 'destination', 'url'], /amqp or amqps/],
    ['a missing url', { type: 'rabbitmq' }, ['body', 'destination', 'url'], /needs its url/],
    ['a field of the other type', { type: 'kafka', bootstrap_servers: ['127.0.0.1:9092'], exchange: 'x' }, ['body', 'destination', 'exchange'], /not a field/],
  ])('refuses %s with a 422 naming the field', async (_name, destination, loc, message) => {
    const res = await mgmt.post(base, { destination, routes: [{ event_type_prefix: '', target: 'all' }] });
    expect(res.status).toBe(422);
    expect(res.body.detail[0].loc).toEqual(loc);
    expect(res.body.detail[0].msg).toMatch(message);
  });

  test('a pipeline whose broker fails for the (shortened) window is disabled, and the team is told by a pipeline.disabled event', async () => {
    const slowApp = await startTestApp({ ...RETRY, WEBHOOK_RETRY_SCHEDULE_MS: Array(30).fill(150).join(','), WEBHOOK_DISABLE_AFTER_MS: 1000 });
    try {
      const dead = await createPipeline({
        destination: { type: 'rabbitmq', url: 'amqp://127.0.0.1:1' },
        routes: [{ event_type_prefix: 'labtest.', target: 'x' }],
      });
      await publishEvent(slowApp.deps, { teamId: tenant.teamId, eventType: 'labtest.order.updated', data: {} });
      const disabled = await eventually(
        async () => {
          const got = await mgmt.get(`${base}/${dead.id}`);
          return got.body.disabled && got.body;
        },
        20_000,
        'the pipeline disabled',
      );
      expect(disabled).toMatchObject({ disabled_reason: 'failing', failing_since: expect.any(String) });
      const events = base.replace(/pipeline$/, 'webhook/events?event_type=pipeline.disabled');
      const told = await eventually(
        async () => (await mgmt.get(events)).body.data.find((e: { data: { pipeline_id: string } }) => e.data.pipeline_id === dead.id),
        20_000,
        'the event',
      );
      expect(told.data.reason).toBe('failing');
      expect(new Date(told.data.failing_since).getTime()).toBe(new Date(disabled.failing_since).getTime());
      const attempts = await mgmt.get(`${base}/${dead.id}/attempts`);
      expect(attempts.body.data[0]).toMatchObject({
        error_class: 'broker_error',
        status_code: null,
        error: expect.stringMatching(/RabbitMQ: could not connect: .*ECONNREFUSED/),
      });
      expect((await mgmt.del(`${base}/${dead.id}`)).status).toBe(204);
    } finally {
      await slowApp.close();
    }
  }, 60_000);

  test('replay of a time range: failed deliveries (no queue was bound) are sent again with the same message id once one is', async () => {
    const quickApp = await startTestApp({ ...RETRY, WEBHOOK_RETRY_SCHEDULE_MS: '0,100' });
    try {
      const exchange = `replay-${randomUUID()}`;
      const pipeline = await createPipeline({
        destination: { type: 'rabbitmq', ...amqpParts(), exchange },
        routes: [{ event_type_prefix: 'labtest.', target: 'late' }],
      });
      const since = new Date(Date.now() - 1000).toISOString();
      const events = [];
      for (let i = 0; i < 3; i++)
        events.push(await publishEvent(quickApp.deps, { teamId: tenant.teamId, eventType: 'labtest.order.updated', data: { i }, userId: randomUUID() }));
      await eventually(
        async () => {
          const res = await mgmt.get(`${base}/${pipeline.id}/deliveries?status=failed`);
          return res.body.data.length === 3;
        },
        30_000,
        'three failed deliveries',
      );
      const { messages } = await queueOf(exchange, 'late');
      const replay = await mgmt.post(`${base}/${pipeline.id}/recover`, { since });
      expect(replay).toMatchObject({ status: 202, body: { resent: 3 } });
      await eventually(async () => messages.length === 3, 30_000, 'the replayed messages');
      expect(messages.map((m) => m.properties.messageId).sort()).toEqual(events.map((e) => e.id).sort());
      const attempts = await mgmt.get(`${base}/${pipeline.id}/attempts?event_id=${events[0].id}`);
      expect(attempts.body.data.map((a: { trigger: string; error_class: string | null }) => [a.trigger, a.error_class])).toEqual([
        ['manual', null],
        ['scheduled', 'unroutable'],
        ['scheduled', 'unroutable'],
      ]);
    } finally {
      await quickApp.close();
    }
  }, 60_000);

  test('PIPELINE_BROKER_ALLOWLIST admits private subnets and host:port entries; cloud metadata stays refused', async () => {
    const open = await startTestApp({ PIPELINE_BROKER_ALLOWLIST: '10.20.0.0/16, 169.254.0.0/16, 10.30.0.5:5672' });
    try {
      const client = managementClient(open, tenant);
      const create = (url: string) =>
        client.post(base, { destination: { type: 'rabbitmq', url }, routes: [{ event_type_prefix: 'labtest.', target: 'labs' }] });
      const inside = await create('amqp://10.20.3.4:5672');
      expect(inside.status).toBe(200);
      expect((await client.del(`${base}/${inside.body.id}`)).status).toBe(204);
      const entry = await create('amqp://10.30.0.5:5672');
      expect(entry.status).toBe(200);
      expect((await client.del(`${base}/${entry.body.id}`)).status).toBe(204);
      expect((await create('amqp://10.30.0.5:5673')).status).toBe(422); // another port of that host is not listed
      const outside = await create('amqp://10.21.0.1:5672');
      expect(outside.status).toBe(422);
      expect(outside.body.detail[0].msg).toMatch(/private network/);
      const metadata = await create('amqp://169.254.169.254:5672');
      expect(metadata.status).toBe(422);
      expect(metadata.body.detail[0].msg).toMatch(/metadata/);
    } finally {
      await open.close();
    }
  });

  test('refuses a Kafka topic name in a route and an empty route list with field locations', async () => {
    const kafkaDest = { type: 'kafka', bootstrap_servers: [brokers.kafkaBootstrap] };
    const badTopic = await mgmt.post(base, {
      destination: kafkaDest,
      routes: [
        { event_type_prefix: 'a.', target: 'ok' },
        { event_type_prefix: '', target: 'not a topic!' },
      ],
    });
    expect(badTopic.status).toBe(422);
    expect(badTopic.body.detail[0].loc).toEqual(['body', 'routes', 1, 'target']);
    const none = await mgmt.post(base, { destination: kafkaDest, routes: [] });
    expect(none.status).toBe(422);
    expect(none.body.detail[0].loc).toEqual(['body', 'routes']);
  });
});

describe('pipelines: deliveries recorded per batch', () => {
  /** Every page of `path` (limit `limit`), following next_cursor. */
  async function allPages<T>(path: string, limit: number): Promise<T[]> {
    const items: T[] = [];
    let cursor: string | null = null;
    do {
      const sep = path.includes('?') ? '&' : '?';
      const page: { status: number; body: { data: T[]; next_cursor: string | null } } = await mgmt.get(
        `${path}${sep}limit=${limit}${cursor ? `&next_cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expect(page.status).toBe(200);
      items.push(...page.body.data);
      cursor = page.body.next_cursor;
    } while (cursor);
    return items;
  }

  test('concurrent events cost one log document per batch, no delivery or attempt document each, and the log lists each event once', async () => {
    const exchange = `batches-${randomUUID()}`;
    const { messages } = await queueOf(exchange, 'all');
    const pipeline = await createPipeline({ destination: { type: 'rabbitmq', ...amqpParts(), exchange }, routes: [{ event_type_prefix: '', target: 'all' }] });
    const user = randomUUID();
    const events = await Promise.all(Array.from({ length: 30 }, (_, seq) => publish('daily.data.steps.created', user, { seq })));
    const ids = events.map((e) => e.id).sort();
    await eventually(async () => ids.every((id) => messages.some((m) => m.properties.messageId === id)), 30_000, 'the 30 messages');
    await eventually(
      async () => (await app.inspect.collection('pipeline_batches').countDocuments({ destination_id: pipeline.id })) === 0,
      10_000,
      'the queue emptied',
    );
    expect(messages.filter((m) => ids.includes(m.properties.messageId)).length).toBe(30);

    const logs = await app.inspect.collection('pipeline_batch_log').find({ destination_id: pipeline.id }).toArray();
    expect(logs.length).toBeLessThan(30);
    expect(logs.flatMap((l) => l.events.map((e: { id: string }) => e.id)).sort()).toEqual(ids);
    expect(logs.every((l) => l.attempt && l.split.length === 0)).toBe(true);
    expect(await app.inspect.collection('webhook_deliveries').countDocuments({ destination_id: pipeline.id })).toBe(0);
    expect(await app.inspect.collection('webhook_attempts').countDocuments({ destination_id: pipeline.id })).toBe(0);

    // The delivery log pages through them newest first, each once, as deliveries and attempts of their own.
    const listed = await allPages<{ event_id: string; status: string; attempts: number }>(`${base}/${pipeline.id}/deliveries`, 7);
    expect(listed.map((d) => d.event_id)).toEqual([...ids].reverse());
    expect(listed.every((d) => d.status === 'succeeded' && d.attempts === 1)).toBe(true);
    const attempts = await allPages<{ event_id: string; attempt: number }>(`${base}/${pipeline.id}/attempts`, 9);
    expect(attempts.map((a) => a.event_id).sort()).toEqual(ids);
    const teamPath = `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}`;
    const one = await mgmt.get(`${teamPath}/webhook/events/${ids[3]}/deliveries`);
    expect(one.status).toBe(200);
    // The team's other pipelines (of earlier tests) take it too: each its own delivery.
    const mine = <T extends { webhook_id: string }>(list: T[]) => list.filter((d) => d.webhook_id === pipeline.id);
    expect(new Set(one.body.data.map((d: { webhook_id: string }) => d.webhook_id)).size).toBe(one.body.data.length);
    expect(mine(one.body.data)).toEqual([expect.objectContaining({ event_id: ids[3], status: 'succeeded', attempts: 1 })]);
    const itsAttempts = await mgmt.get(`${teamPath}/webhook/events/${ids[3]}/attempts`);
    expect(mine(itsAttempts.body.data)).toEqual([expect.objectContaining({ event_id: ids[3], attempt: 1, status_code: null })]);
  });

  test('a fan-out repeated with other neighbours (repeated producer keys) sends nothing twice', async () => {
    const exchange = `repeats-${randomUUID()}`;
    const { messages } = await queueOf(exchange, 'all');
    const pipeline = await createPipeline({ destination: { type: 'rabbitmq', ...amqpParts(), exchange }, routes: [{ event_type_prefix: '', target: 'all' }] });
    const keys = Array.from({ length: 10 }, () => randomUUID());
    const once = (key: string, seq: number) =>
      publishEvent(app.deps, { teamId: tenant.teamId, eventType: 'daily.data.steps.created', data: { seq }, userId: null, idempotencyKey: key });
    const first = await Promise.all(keys.map((k, seq) => once(k, seq)));
    // The same keys again, among new events: each repeated event's fan-out runs again, grouped with other events.
    const again = await Promise.all([...keys.map((k, seq) => once(k, seq)), ...Array.from({ length: 10 }, (_, seq) => once(randomUUID(), 100 + seq))]);
    expect(again.slice(0, 10).map((e) => e.id)).toEqual(first.map((e) => e.id));
    const ids = new Set(again.map((e) => e.id));
    await eventually(async () => [...ids].every((id) => messages.some((m) => m.properties.messageId === id)), 30_000, 'the 20 events');
    await eventually(
      async () => (await app.inspect.collection('pipeline_batches').countDocuments({ destination_id: pipeline.id })) === 0,
      10_000,
      'the queue emptied',
    );
    expect(messages.length).toBe(20);
    expect(new Set(messages.map((m) => m.properties.messageId)).size).toBe(20);
  });

  test('an event queued in two batches (read together or one after the other) is sent once and logged once', async () => {
    const exchange = `twice-${randomUUID()}`;
    const { messages } = await queueOf(exchange, 'all');
    const created = await createPipeline({ destination: { type: 'rabbitmq', ...amqpParts(), exchange }, routes: [{ event_type_prefix: '', target: 'all' }] });
    const pipeline = (await app.deps.repos.pipelines.getPipeline(created.id))!;
    const events: EventDoc[] = Array.from({ length: 4 }, (_, seq) => {
      const id = timeOrderedUuid();
      const body = envelopeOf({ event_type: 'daily.data.steps.created', data: { seq }, team_id: tenant.teamId, user_id: null, client_user_id: null });
      return {
        _id: id,
        team_id: tenant.teamId,
        idempotency_key: id,
        event_type: 'daily.data.steps.created',
        user_id: null,
        client_user_id: null,
        body,
        created_at: new Date(),
        only_destination_id: null,
      };
    });
    const policy = deliveryPolicyFrom(app.deps.config);
    // Two fan-outs of overlapping events, the second marked as a repeat, queued before the dispatcher is woken.
    await app.deps.repos.pipelineBatches.insertBatches([
      ...batchesOf(events.slice(0, 3), [pipeline], policy, new Date()),
      ...batchesOf(events.slice(1), [pipeline], policy, new Date(), true),
    ]);
    await app.deps.publisher.wake(pipeline._id);
    const ids = events.map((e) => e._id);
    await eventually(async () => ids.every((id) => messages.some((m) => m.properties.messageId === id)), 30_000, 'the 4 events');
    await eventually(
      async () => (await app.inspect.collection('pipeline_batches').countDocuments({ destination_id: pipeline._id })) === 0,
      10_000,
      'the queue emptied',
    );
    await new Promise((r) => setTimeout(r, 500)); // a second copy would arrive within this
    expect(messages.map((m) => m.properties.messageId).sort()).toEqual([...ids].sort());
    const logs = await app.inspect.collection('pipeline_batch_log').find({ destination_id: pipeline._id }).toArray();
    expect(logs.flatMap((l) => l.events.map((e: { id: string }) => e.id)).sort()).toEqual([...ids].sort());
  });

  test("erasure takes a user's events out of the logged batches (a batch of only theirs goes)", async () => {
    const exchange = `erase-${randomUUID()}`;
    const { messages } = await queueOf(exchange, 'all');
    const pipeline = await createPipeline({ destination: { type: 'rabbitmq', ...amqpParts(), exchange }, routes: [{ event_type_prefix: '', target: 'all' }] });
    const [kept, erased] = [randomUUID(), randomUUID()];
    const mixed = await Promise.all([
      ...Array.from({ length: 5 }, () => publish('daily.data.steps.created', kept)),
      ...Array.from({ length: 5 }, () => publish('daily.data.steps.created', erased)),
    ]);
    const alone = await publish('daily.data.steps.created', erased);
    await eventually(async () => messages.length >= 11, 30_000, 'the 11 messages');
    await eventually(
      async () => (await app.inspect.collection('pipeline_batches').countDocuments({ destination_id: pipeline.id })) === 0,
      10_000,
      'the queue emptied',
    );
    await eraseUserWebhookData(app.deps, tenant.teamId, erased);
    const logs = await app.inspect.collection('pipeline_batch_log').find({ destination_id: pipeline.id }).toArray();
    const logged = logs.flatMap((l) => l.events.map((e: { id: string; user_id: string }) => e));
    expect(logged.filter((e) => e.user_id === erased)).toEqual([]);
    expect(logged.map((e) => e.id).sort()).toEqual(
      mixed
        .slice(0, 5)
        .map((e) => e.id)
        .sort(),
    );
    expect(logs.every((l) => l.events.length > 0)).toBe(true);
    expect(logs.some((l) => String(l._id).startsWith(alone.id))).toBe(false);
  });
});

describe('pipelines: a broker stopped for 30 s, and erasure', () => {
  test("RabbitMQ stopped while events flow: nothing lost, each user in order, no duplicate; an erased user's pending messages are not sent", async () => {
    const exchange = `outage-${randomUUID()}`;
    const { messages, queue } = await queueOf(exchange, 'all');
    const pipeline = await createPipeline({
      destination: { type: 'rabbitmq', ...amqpParts(), exchange },
      routes: [{ event_type_prefix: '', target: 'all' }],
      ordered_per_user: true,
    });
    const users = Array.from({ length: 5 }, () => randomUUID());
    const erased = randomUUID();
    const sent: { id: string; user: string; seq: number }[] = [];
    const round = async (seq: number) => {
      for (const user of users) sent.push({ id: (await publish('daily.data.steps.created', user, { seq })).id, user, seq });
    };
    for (let seq = 0; seq < 5; seq++) await round(seq);
    await brokers.command('stop rabbitmq');
    const stoppedAt = Date.now();
    for (let seq = 5; seq < 15; seq++) {
      await round(seq);
      await publish('daily.data.steps.created', erased, { seq });
      await new Promise((r) => setTimeout(r, 1000)); // the pace of the scenario: a round a second while the broker is down
    }
    // While the broker is down the erased user's messages wait; erasure removes them.
    await eraseUserWebhookData(app.deps, tenant.teamId, erased);
    expect(await app.inspect.collection('webhook_deliveries').countDocuments({ team_id: tenant.teamId, user_id: erased })).toBe(0);
    const failing = await mgmt.get(`${base}/${pipeline.id}`);
    expect(failing.body.failing_since).not.toBeNull();
    await new Promise((r) => setTimeout(r, Math.max(0, 30_000 - (Date.now() - stoppedAt))));
    await brokers.command('start rabbitmq');
    // The consumer's connection died with the broker: read the durable queue again (it kept what arrived meanwhile).
    const again = await amqp.connect(brokers.amqpUrl);
    try {
      const channel = await again.createChannel();
      await channel.consume(queue, (m) => m && messages.push(m), { noAck: true });
      for (let seq = 15; seq < 18; seq++) await round(seq);
      const ids = new Set(sent.map((s) => s.id));
      await eventually(async () => sent.every((s) => messages.some((m) => m.properties.messageId === s.id)), 90_000, 'every event after the restart');
      const received = messages.filter((m) => ids.has(m.properties.messageId));
      const byId = new Map<string, number>();
      for (const m of received) byId.set(m.properties.messageId, (byId.get(m.properties.messageId) ?? 0) + 1);
      expect([...byId.values()].filter((n) => n > 1)).toEqual([]); // no duplicate
      for (const user of users) {
        const seqs = received.filter((m) => m.properties.headers?.user_id === user).map((m) => amqpBody(m).data.seq);
        expect(seqs).toEqual(Array.from({ length: 18 }, (_, i) => i));
      }
      expect(messages.filter((m) => m.properties.headers?.user_id === erased)).toEqual([]);
      const healthy = await eventually(
        async () => {
          const res = await mgmt.get(`${base}/${pipeline.id}`);
          return res.body.failing_since === null ? res.body : null;
        },
        30_000,
        'the failure clock reset',
      );
      expect(healthy.disabled).toBe(false);
    } finally {
      await again.close().catch(() => undefined);
    }
  }, 240_000);
});
