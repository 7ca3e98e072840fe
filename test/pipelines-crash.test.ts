import { randomUUID } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { gunzipSync } from 'node:zlib';
import amqp from 'amqplib';
import { Kafka, logLevel, type Consumer } from 'kafkajs';
import { publishEvent } from '../lib/events/publisher';
import { startTestBrokers, type TestBrokers } from './support/brokers';
import { createTenant, eventually, managementClient, startTestApp, type HttpClient, type Tenant, type TestApp } from './support/harness';
import { privateDeployment, startWorker as startCrashWorker, stopWorker } from './support/worker';

/**
 * Crash test for pipelines (test/webhooks-crash.test.ts for brokers): this file runs its own worker process on a
 * private deployment and its own RabbitMQ and Kafka, streams events of several users to a Kafka pipeline that
 * keeps each user's order and to a RabbitMQ pipeline, kills the worker with SIGKILL while batches are in flight,
 * starts it again, and checks what the brokers received: every event, duplicates only under the event's own id
 * (the killed run's batches, sent again when their send window lapses), and each user's Kafka events in publish order
 * (by first occurrence).
 */
const deployment = privateDeployment('pipelines-crash');
// A run's send window outlasts its batch by ceil(batch / 100) × the attempt timeout + 30 s: small batches and a
// short timeout keep the wait for the killed run's batches (sent again once its send window lapses) near 35 s.
const DELIVERY = { WEBHOOK_RETRY_SCHEDULE_MS: ['0', ...Array(60).fill('500')].join(','), WEBHOOK_ATTEMPT_TIMEOUT_MS: 3000, WEBHOOK_THROTTLE_FLOOR_MS: 500 };
const WORKER_ENV = {
  LOG_LEVEL: process.env.CRASH_WORKER_LOG_LEVEL ?? 'error',
  WEBHOOK_SWEEP_INTERVAL_MS: '1000',
  WEBHOOK_SWEEP_GRACE_MS: '2000',
  WEBHOOK_BATCH_SIZE: '100',
  ...Object.fromEntries(Object.entries(DELIVERY).map(([k, v]) => [k, String(v)])),
};
const USERS = 12;
const ROUNDS = 250; // 3000 events, one per user per round

let worker: ChildProcess | null = null;
let app: TestApp;
let tenant: Tenant;
let mgmt: HttpClient;
let brokers: TestBrokers;
let amqpConnection: amqp.ChannelModel;
let kafka: Kafka;
let consumer: Consumer | null = null;

const startWorker = () => startCrashWorker(deployment, WORKER_ENV);

beforeAll(async () => {
  [app, brokers] = await Promise.all([startTestApp({ ...deployment, ...DELIVERY }), startTestBrokers('pipelines-crash')]);
  tenant = await createTenant(app.deps, 'Pipelines crash');
  mgmt = managementClient(app, tenant);
  amqpConnection = await amqp.connect(brokers.amqpUrl);
  amqpConnection.on('error', () => undefined);
  kafka = new Kafka({ clientId: 'pipelines-crash-test', brokers: [brokers.kafkaBootstrap], logLevel: logLevel.NOTHING });
}, 300_000);

afterAll(async () => {
  if (worker) {
    // Left running only if a test failed first: SIGTERM, then SIGKILL after 15 s.
    const exited = await Promise.race([
      stopWorker(worker, 'SIGTERM').then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), 15_000).unref()),
    ]);
    if (!exited) await stopWorker(worker, 'SIGKILL');
  }
  await consumer?.disconnect().catch(() => undefined);
  await amqpConnection?.close().catch(() => undefined);
  if (brokers) expect(await brokers.stop()).toBe(true);
  await app?.close();
}, 60_000);

const bodyOf = (content: Buffer, encoding: string | undefined) => JSON.parse((encoding === 'gzip' ? gunzipSync(content) : content).toString('utf8'));

interface Received {
  id: string;
  user: string;
  seq: number;
}

test("SIGKILL of the worker mid-stream loses nothing at either broker; duplicates keep their event id; Kafka keeps each user's order", async () => {
  const base = `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/pipeline`;
  const create = async (body: Record<string, unknown>) => {
    const res = await mgmt.post(base, body);
    expect(res.status).toBe(200);
    return res.body.id as string;
  };

  // Kafka: a topic of a few partitions, read from the beginning by a consumer of its own group.
  const topic = `crash-${randomUUID()}`;
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 4 }], waitForLeaders: true });
  await admin.disconnect();
  const kafkaPipeline = await create({
    destination: { type: 'kafka', bootstrap_servers: [brokers.kafkaBootstrap] },
    routes: [{ event_type_prefix: '', target: topic }],
    ordered_per_user: true,
  });
  const fromKafka: (Received & { partition: number; key: string | undefined })[] = [];
  consumer = kafka.consumer({ groupId: `pipelines-crash-${randomUUID()}`, sessionTimeout: 6_000, heartbeatInterval: 1_000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      const headers = Object.fromEntries(Object.entries(message.headers ?? {}).map(([k, v]) => [k, String(v)]));
      const body = bodyOf(message.value!, headers['content-encoding']);
      fromKafka.push({ id: headers['message-id'], user: body.user_id, seq: body.data.seq, partition, key: message.key?.toString() });
    },
  });

  // RabbitMQ: a durable queue bound to the pipeline's exchange.
  const u = new URL(brokers.amqpUrl);
  const exchange = `crash-${randomUUID()}`;
  const channel = await amqpConnection.createChannel();
  await channel.assertExchange(exchange, 'topic', { durable: true });
  const { queue } = await channel.assertQueue(`all-${randomUUID()}`, { durable: true });
  await channel.bindQueue(queue, exchange, 'all');
  const fromRabbit: Received[] = [];
  await channel.consume(
    queue,
    (m) => {
      if (!m) return;
      const body = bodyOf(m.content, m.properties.contentEncoding);
      fromRabbit.push({ id: String(m.properties.messageId), user: body.user_id, seq: body.data.seq });
    },
    { noAck: true },
  );
  const rabbitPipeline = await create({
    destination: { type: 'rabbitmq', url: `amqp://${u.host}`, username: decodeURIComponent(u.username), password: decodeURIComponent(u.password), exchange },
    routes: [{ event_type_prefix: '', target: 'all' }],
  });

  // The stream: one event per user per round, each user's events published one after another.
  const users = Array.from({ length: USERS }, () => randomUUID());
  const sent: Received[] = [];
  let delivering = false;
  const stream = (async () => {
    for (let seq = 0; seq < ROUNDS; seq++) {
      const ids = await Promise.all(
        users.map((user) =>
          publishEvent(app.deps, { teamId: tenant.teamId, eventType: 'daily.data.steps.created', data: { seq }, userId: user, clientUserId: `client-${user}` }),
        ),
      );
      ids.forEach((e, i) => sent.push({ id: e.id, user: users[i], seq }));
      // The first rounds wait for the worker to start delivering, so the kill falls inside the stream.
      if (seq === 10) await eventually(async () => delivering, 60_000, 'the first deliveries');
      await new Promise((r) => setTimeout(r, 15));
    }
  })();
  const total = USERS * ROUNDS;

  worker = startWorker();
  await eventually(async () => fromKafka.length > 0 && fromRabbit.length > 0, 60_000, 'the first messages at both brokers');
  delivering = true;
  // Kill once both brokers have a good part of the stream and both pipelines have batches in flight: queued batches
  // (or pending deliveries) behind an open send window (lib/events/dispatcher.ts), which a later run must leave until it lapses.
  const behindWindow = async (pipelineId: string) => {
    const state = await app.inspect
      .collection<{ _id: string; sending?: Record<string, { picked_at: Date; until: Date }> }>('webhook_dispatchers')
      .findOne({ _id: pipelineId });
    const open = Object.values(state?.sending ?? {}).filter((w) => w.until.getTime() > Date.now());
    if (!open.length) return 0;
    const pickedAt = new Date(Math.max(...open.map((w) => w.picked_at.getTime())));
    // Queued batches (a pipeline's deliveries: lib/events/destinations/pipeline/batches.ts) and delivery documents.
    const batches = await app.inspect
      .collection<{ events: unknown[] }>('pipeline_batches')
      .find({ destination_id: pipelineId, next_attempt_at: { $lte: pickedAt } } as never, { projection: { 'events.id': 1 } })
      .toArray();
    const documents = await app.inspect
      .collection('webhook_deliveries')
      .countDocuments({ destination_id: pipelineId, status: 'pending', next_attempt_at: { $lte: pickedAt } } as never);
    return documents + batches.reduce((n, b) => n + b.events.length, 0);
  };
  const threshold = total / 5;
  const killDeadline = Date.now() + 60_000;
  /** Waits for a moment both pipelines have batches in flight, SIGKILLs the worker, and says what it left behind a send window. */
  const killMidBatch = async () => {
    for (;;) {
      if (Date.now() > killDeadline) throw new Error(`no moment to kill: ${fromKafka.length} at Kafka, ${fromRabbit.length} at RabbitMQ of ${total}`);
      if (fromKafka.length >= threshold && fromRabbit.length >= threshold) {
        const [k, r] = await Promise.all([behindWindow(kafkaPipeline), behindWindow(rabbitPipeline)]);
        if (k > 0 && r > 0) break;
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    const atKill = { published: sent.length, kafka: fromKafka.length, rabbit: fromRabbit.length };
    await stopWorker(worker!, 'SIGKILL');
    // Nothing runs now: what is still behind a window was the dead run's, in flight or unrecorded.
    return { atKill, heldAtKill: { kafka: await behindWindow(kafkaPipeline), rabbit: await behindWindow(rabbitPipeline) } };
  };
  // The batches seen in flight may finish in the milliseconds before the signal lands; then the kill is tried again
  // (the worker restarted), so that it does fall inside a batch.
  const first = await killMidBatch();
  let kill = first;
  for (let tries = 1; tries < 5 && kill.heldAtKill.kafka + kill.heldAtKill.rabbit === 0; tries++) {
    worker = startWorker();
    kill = await killMidBatch();
  }
  const { heldAtKill } = kill;
  // At the first kill: mid-stream, both brokers part-way.
  expect(first.atKill.published).toBeLessThan(total); // the stream goes on while no worker runs
  for (const n of [first.atKill.kafka, first.atKill.rabbit]) {
    expect(n).toBeGreaterThan(0);
    expect(n).toBeLessThan(total);
  }
  expect(heldAtKill.kafka + heldAtKill.rabbit).toBeGreaterThan(0);

  // The gap is the behaviour under test: two seconds with no worker while the stream goes on.
  await new Promise((r) => setTimeout(r, 2000));
  worker = startWorker();
  await stream;
  expect(sent).toHaveLength(total);

  // Everything is delivered (recorded as such) and has arrived: the killed run's batches included, once their
  // send window lapsed.
  const deliveries = app.inspect.collection('webhook_deliveries');
  const pipelineIds = [kafkaPipeline, rabbitPipeline];
  const expected = new Set(sent.map((s) => s.id));
  const arrived = (list: Received[]) => {
    const seen = new Set(list.map((m) => m.id));
    return [...expected].every((id) => seen.has(id));
  };
  const queued = app.inspect.collection('pipeline_batches');
  await eventually(
    async () =>
      (await queued.countDocuments({ destination_id: { $in: pipelineIds } } as never)) === 0 &&
      (await deliveries.countDocuments({ destination_id: { $in: pipelineIds }, status: { $ne: 'succeeded' } } as never)) === 0 &&
      arrived(fromKafka) &&
      arrived(fromRabbit),
    150_000,
    'every event at both brokers',
  );
  // Each event recorded as delivered once per pipeline: by its batch's log document, or by a delivery document of
  // its own where the batch handed it on.
  for (const pipelineId of pipelineIds) {
    const logs = await app.inspect
      .collection<{ events: { id: string }[]; split: string[] }>('pipeline_batch_log')
      .find({ destination_id: pipelineId } as never)
      .toArray();
    const byBatch = logs.flatMap((l) => l.events.map((e) => e.id).filter((id) => !l.split.includes(id)));
    const byDocument = (await deliveries.find({ destination_id: pipelineId, status: 'succeeded' } as never, { projection: { event_id: 1 } }).toArray()).map(
      (d) => d.event_id as string,
    );
    expect([...byBatch, ...byDocument].sort()).toEqual([...expected].sort());
  }
  // A window for what must not come: a duplicate of a last send would arrive within it (absence has no event to wait on).
  await new Promise((r) => setTimeout(r, 1000));

  const bySent = new Map(sent.map((s) => [s.id, s]));
  for (const list of [fromKafka, fromRabbit]) {
    const seen = new Set(list.map((m) => m.id));
    expect([...expected].filter((id) => !seen.has(id))).toEqual([]); // nothing lost
    // Every message is one of the events, under its own id: a duplicate is the same event sent again.
    for (const m of list) expect({ id: m.id, user: m.user, seq: m.seq }).toEqual(bySent.get(m.id));
  }

  // Kafka, ordered per user: each user's events in publish order by first occurrence, all on one partition.
  const orderViolations: string[] = [];
  for (const user of users) {
    const mine = fromKafka.filter((m) => m.user === user);
    const firsts: number[] = [];
    const seen = new Set<string>();
    for (const m of mine) {
      if (seen.has(m.id)) continue;
      seen.add(m.id);
      firsts.push(m.seq);
    }
    if (firsts.some((seq, i) => seq !== i)) orderViolations.push(`${user}: ${firsts.join(',')}`);
    expect(new Set(mine.map((m) => m.partition)).size).toBe(1);
    expect(mine.filter((m) => m.key !== user)).toEqual([]);
  }
  expect(orderViolations).toEqual([]);
}, 300_000);

test('the worker stops on SIGTERM within its shutdown timeout while it holds broker connections (it closes them)', async () => {
  expect(worker).not.toBeNull();
  const started = Date.now();
  const exited = await Promise.race([stopWorker(worker!, 'SIGTERM').then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 15_000).unref())]);
  expect({ exited, within15s: Date.now() - started < 15_000 }).toEqual({ exited: true, within15s: true });
  worker = null;
}, 30_000);
