import { randomUUID } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { publishEvent } from '../lib/events/publisher';
import { deliveryPolicyFrom, newDelivery } from '../lib/events/fan-out';
import { envelopeOf } from '../lib/events/model';
import { createTenant, eventually, managementClient, startTestApp, uniqueId, type TestApp } from './support/harness';
import { startReceiver, type Receiver } from './support/receiver';
import { privateDeployment, startWorker as startCrashWorker, stopWorker } from './support/worker';
import { workflowIds } from '../workflows/ids';

/**
 * Crash test: this file runs its own worker process on a private task queue, kills it with SIGKILL while
 * deliveries are in flight and more are queued, starts it again, and checks that every event arrives, any
 * duplicate carrying the same webhook-id (the killed run's batch, sent again when its send window lapses).
 */
const deployment = privateDeployment('webhook-crash');
let worker: ChildProcess | null = null;
let app: TestApp;
let rx: Receiver;

const startWorker = () =>
  startCrashWorker(deployment, { LOG_LEVEL: process.env.CRASH_WORKER_LOG_LEVEL ?? 'error', WEBHOOK_SWEEP_INTERVAL_MS: '1000', WEBHOOK_SWEEP_GRACE_MS: '2000' });
const kill = stopWorker;

beforeAll(async () => {
  app = await startTestApp({ ...deployment, WEBHOOK_RETRY_SCHEDULE_MS: '0,200,200,200,200,200', WEBHOOK_ATTEMPT_TIMEOUT_MS: 5000 });
});
afterAll(async () => {
  if (worker) await kill(worker, 'SIGTERM');
  await rx?.close();
  await app.close();
});

test('SIGKILL of the worker mid-delivery loses nothing; duplicates keep their webhook-id', async () => {
  const tenant = await createTenant(app.deps, 'Crash');
  const mgmt = managementClient(app, tenant);
  const base = `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`;
  let slow = true;
  rx = await startReceiver(() => (slow ? { status: 200, delayMs: 3000 } : { status: 200 }));
  const hook = (await mgmt.post(base, { url: rx.url })).body;
  const secret = (await mgmt.get(`${base}/${hook.id}/secret`)).body.key;

  worker = startWorker();
  const publish = (i: number) => publishEvent(app.deps, { teamId: tenant.teamId, eventType: 'labtest.order.updated', data: { i } });
  const first = await Promise.all(Array.from({ length: 20 }, (_, i) => publish(i)));
  await rx.waitFor(1, 30000); // a batch is in flight (the receiver holds each answer for 3 s)
  await kill(worker, 'SIGKILL');
  // Published while no worker runs: stored and queued, delivered after the restart.
  const second = await Promise.all(Array.from({ length: 10 }, (_, i) => publish(100 + i)));
  slow = false;
  worker = startWorker();

  const expected = new Set([...first, ...second].map((e) => e.id));
  await rx.waitFor(expected.size, 60000, () => true);
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline && !isSubset(expected, new Set(rx.requests.map((r) => String(r.headers['webhook-id']))))) {
    await new Promise((r) => setTimeout(r, 200));
  }
  const seen = new Set(rx.requests.map((r) => String(r.headers['webhook-id'])));
  expect([...expected].filter((id) => !seen.has(id))).toEqual([]);
  // The batch in flight at the kill is sent again once the dead run's send window lapses (its attempts' timeout
  // plus a margin): duplicates, never a new webhook-id.
  await eventually(async () => rx.requests.length > expected.size, 90_000, 'the killed batch sent again');
  const verifier = new StandardWebhook(secret);
  for (const r of rx.requests) {
    expect(expected.has(String(r.headers['webhook-id']))).toBe(true);
    verifier.verify(r.body, r.headers as Record<string, string>);
  }
}, 150000);

function isSubset(a: Set<string>, b: Set<string>): boolean {
  for (const x of a) if (!b.has(x)) return false;
  return true;
}

describe('the sweeper repairs what a crash left behind', () => {
  let tenant: Awaited<ReturnType<typeof createTenant>>;
  let sweepRx: Receiver;
  let endpointId: string;

  beforeAll(async () => {
    if (!worker || worker.exitCode !== null || worker.signalCode !== null) worker = startWorker();
    tenant = await createTenant(app.deps, 'Sweeper');
    sweepRx = await startReceiver();
    const base = `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`;
    endpointId = (await managementClient(app, tenant).post(base, { url: sweepRx.url })).body.id;
  });
  afterAll(() => sweepRx.close());

  test('a publish that died after storing the event (outbox span left, nothing queued) is fanned out and delivered', async () => {
    const w = app.deps.repos.webhookStore;
    const id = `00000000-0000-4000-8000-${Date.now().toString().padStart(12, '0').slice(-12)}`;
    const createdAt = new Date(Date.now() - 10_000);
    const outboxId = `crashed-publish-${uniqueId()}`;
    // The process wrote the outbox entry of its publish span and one event, then died.
    await w.insertOutbox({ _id: outboxId, events_from: createdAt, events_until: new Date(createdAt.getTime() + 1000), created_at: createdAt });
    const envelope = { event_type: 'labtest.order.created', data: { crashed: true }, team_id: tenant.teamId, user_id: null, client_user_id: null };
    await w.insertEvents([{ _id: id, idempotency_key: id, ...envelope, body: envelopeOf(envelope), created_at: createdAt, only_destination_id: null }]);
    await sweepRx.waitFor(1, 90000);
    expect(sweepRx.requests.map((r) => r.headers['webhook-id'])).toContain(id);
    expect(JSON.parse(sweepRx.requests.find((r) => r.headers['webhook-id'] === id)!.body)).toEqual(envelope);
    await eventually(async () => (await w.outbox.findOne({ _id: outboxId })) === null, 10000, 'outbox entry removed');
    // Recorded after the POST was answered: wait for it.
    await eventually(async () => (await w.deliveries.findOne({ _id: `${id}:${endpointId}` }))?.status === 'succeeded', 20000, 'delivery recorded');
    expect(await w.deliveries.findOne({ _id: `${id}:${endpointId}` })).toMatchObject({ status: 'succeeded', attempts: 1 });
  }, 120000);

  test('a queued delivery whose dispatcher was never woken is delivered', async () => {
    const w = app.deps.repos.webhookStore;
    const before = sweepRx.requests.length;
    const past = new Date(Date.now() - 10_000);
    const envelope = { event_type: 'labtest.order.updated', data: {}, team_id: tenant.teamId, user_id: null, client_user_id: null };
    const id = randomUUID();
    const event = { _id: id, idempotency_key: id, ...envelope, body: envelopeOf(envelope), created_at: past, only_destination_id: null };
    // Stored and queued directly: no signal reaches the dispatcher, as when the publisher died right after queueing.
    await w.insertEvents([event]);
    await w.insertDeliveries([newDelivery(event, endpointId, deliveryPolicyFrom(app.deps.config), past)]);
    await sweepRx.waitFor(before + 1, 90000);
    expect(sweepRx.requests.slice(before).map((r) => r.headers['webhook-id'])).toContain(event._id);
  }, 120000);

  test('a dispatcher left marked active by a dead worker does not strand new events', async () => {
    const w = app.deps.repos.webhookStore;
    const before = sweepRx.requests.length;
    // The dispatcher has finished with earlier tests' deliveries (it marks itself idle as it hands back).
    await eventually(async () => !(await w.activeDispatchers([endpointId])).has(endpointId), 30000, 'dispatcher idle');
    // ...and its delivery run has handed back to the workflow (nothing in flight would mark it active again).
    const dispatcher = app.deps.temporal.client.workflow.getHandle(workflowIds.destinationDispatch(endpointId));
    await eventually(
      async () => ((await dispatcher.describe().catch(() => null))?.raw.pendingActivities ?? []).length === 0,
      30000,
      'the delivery run handed back',
    );
    // As if a worker died mid-activity: the mark says "delivering" for another minute, so publishers skip
    // the wake signal; the sweeper wakes endpoints with overdue deliveries whatever the mark says.
    await w.markDispatcherActive(endpointId, new Date(Date.now() + 60_000));
    expect(await w.activeDispatchers([endpointId])).toEqual(new Set([endpointId]));
    const event = await publishEvent(app.deps, { teamId: tenant.teamId, eventType: 'labtest.order.updated', data: { stale_mark: true } });
    await sweepRx.waitFor(before + 1, 90000);
    expect(sweepRx.requests.slice(before).map((r) => r.headers['webhook-id'])).toContain(event.id);
  }, 120000);
});
