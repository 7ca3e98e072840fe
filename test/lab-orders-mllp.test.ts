import type { ChildProcess } from 'node:child_process';
import { placerNumberOf } from '../lib/labs/placer-number';
import { workflowIds } from '../workflows/ids';
import { erasePatientDataUpdate } from '../workflows/lab-order';
import { createTenant, eventually, managementClient, startTestApp, teamClient, type HttpClient, type Tenant, type TestApp } from './support/harness';
import { pdfText } from './support/pdf';
import { createLabAccount, createUser, lowOf, orderBody, orderReaches, patientDetails, THYROID_ORDER_CODE } from './support/lab';
import { startFakeLab, type FakeLab } from './support/fake-lab';
import { startLabProxy, type LabProxy } from './support/lab-proxy';
import { startReceiver } from './support/receiver';
import { freePort } from './support/free-port';
import { privateDeployment, startWorker as startDeploymentWorker, stopWorker, workerEnded } from './support/worker';

/**
 * Orders to a real laboratory over HL7 v2 / MLLP, on the real stack: lab accounts made through the management API,
 * the fake laboratory (test/support/fake-lab.ts) checking what arrives, and a worker of this file's own (a private
 * task queue and database) so that one test can kill it. Where a fault must hit one message, or the lab must vanish
 * and come back on the same port, a relay (test/support/lab-proxy.ts) sits between the worker and the fake.
 */
const deployment = privateDeployment('lab-mllp');
let app: TestApp;
let worker: ChildProcess | null = null;
let tenant: Tenant;
let client: HttpClient;
let fake: FakeLab;
const closers: (() => Promise<void>)[] = [];

let metricsPort = 0;
const startWorker = (env: Record<string, string> = {}) => startDeploymentWorker(deployment, { WORKER_METRICS_PORT: String(metricsPort), ...env });

/** The worker's metrics: the sum of a series' samples whose labels include `labels` (0 when none). */
async function workerMetric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(m[3]);
  }
  return sum;
}

beforeAll(async () => {
  app = await startTestApp(deployment);
  tenant = await createTenant(app.deps, 'Lab over MLLP');
  client = teamClient(app, tenant);
  fake = await startFakeLab();
  metricsPort = await freePort();
  worker = startWorker();
}, 60_000);
afterAll(async () => {
  if (worker) await stopWorker(worker, 'SIGKILL');
  for (const close of closers.reverse()) await close().catch(() => undefined);
  await fake?.close();
  await app?.close();
});

/** A lab account at `port` and a test through it; its acks time out after 2 s (a lost ACK is resent within a test;
 * long enough that a loaded machine's ACK is not taken for a lost one). */
const labAccount = (port: number, settings: Record<string, unknown> = {}) => createLabAccount(app, tenant, client, port, { ack_timeout_ms: 2000, ...settings });

async function placeOrder(labTestId: string, patient: Partial<typeof patientDetails> = {}): Promise<{ id: string; placer: string }> {
  const res = await client.post('/v3/order', orderBody(await createUser(client), labTestId, { patient_details: { ...patientDetails, ...patient } }));
  expect(res.status).toBe(200);
  return { id: res.body.order.id, placer: placerNumberOf(res.body.order.id) };
}

const storedOrder = (orderId: string) => app.inspect.collection('lab_orders').findOne({ _id: orderId as never });
const lowStatus = async (orderId: string) => lowOf((await client.get(`/v3/order/${orderId}`)).body.last_event.status);
/** Every frame the fake received for this order's order message (resends included): one control id. */
const framesOf = (lab: FakeLab, placer: string) => lab.received.filter((r) => r.controlId.startsWith(placer));

async function relayed(): Promise<LabProxy> {
  const proxy = await startLabProxy({ port: fake.port });
  closers.push(() => proxy.close());
  return proxy;
}

test('an order reaches the lab as a valid message of each profile, with what the order said, in three scripts', async () => {
  const names = [
    { first_name: 'Zoë', last_name: 'Ångström-Núñez' },
    { first_name: 'Ελένη', last_name: 'Παπαδοπούλου' },
    { first_name: '花子', last_name: '山田' },
  ];
  for (const [profile, type, version, labels] of [
    ['ORM_2.3', 'ORM^O01', '2.3', 'separate_sheet'],
    ['LOI_2.5.1', 'OML^O21', '2.5.1', 'in_requisition'],
  ] as const) {
    const { labTestId } = await labAccount(fake.port, { profile, labels, account_number: `ACCT-${version}` });
    const orders = await Promise.all(names.map((name) => placeOrder(labTestId, name)));
    for (const [i, order] of orders.entries()) {
      const done = await orderReaches(client, order.id, 'requisition_created', 60_000);
      expect(done.events.map((e: { status: string }) => lowOf(e.status))).toEqual(['ordered', 'requisition_created']);
      const held = fake.orders().get(order.placer);
      expect(held).toBeDefined();
      // The fake checked it (an invalid message would have been refused with AE/AR and the order failed).
      expect(held!.type).toBe(type);
      expect(held!.controlId).toBe(`${order.placer}O`);
      expect(held!.text.split('\r')[0].split('|')[11]).toBe(version);
      expect(held!.patient).toMatchObject({ family: names[i].last_name, given: names[i].first_name, birthDate: '19880412', sex: 'F' });
      expect(held!.tests.map((t) => t.code)).toEqual([THYROID_ORDER_CODE]);
      // The ordering provider with the physician's NPI, in ORC-12 / OBR-16.
      expect(held!.text).toContain('1234567893^House^Gregory');
      const stored = await storedOrder(order.id);
      expect([order.placer, held!.fillerNumber]).toContain(stored?.lab_reference);
    }
    // The requisition names the order's account and carries its placer number (labels as the account places them).
    const res = await fetch(`${app.url}/v3/order/${orders[0].id}/requisition/pdf`, { headers: { 'x-service-api-key': tenant.teamKey } });
    expect(res.status).toBe(200);
    const text = await pdfText(Buffer.from(await res.arrayBuffer()));
    expect(text).toContain(`ACCT-${version}`);
    expect(text).toContain(orders[0].placer);
    expect(text).not.toContain('Sandbox lab');
  }
}, 180_000);

test('a dropped ACK, then a resend of the same message: the lab holds one order', async () => {
  const { labTestId } = await labAccount(fake.port);
  fake.inject('drop-ack', 1);
  const order = await placeOrder(labTestId);
  await orderReaches(client, order.id, 'requisition_created', 60_000);
  const held = fake.orders().get(order.placer)!;
  expect(held.sends).toBeGreaterThanOrEqual(2);
  expect(new Set(framesOf(fake, order.placer).map((r) => r.controlId))).toEqual(new Set([`${order.placer}O`]));
  // Every send carried the stored bytes.
  const frames = framesOf(fake, order.placer);
  expect(frames.every((f) => f.bytes.equals(frames[0].bytes))).toBe(true);
  const outbound = await app.inspect.collection('lab_outbound_messages').findOne({ _id: `${order.placer}O` as never });
  expect(outbound).toMatchObject({ state: 'answered', kind: 'order', answer: { code: 'AA' } });
  expect(outbound?.sends).toBeGreaterThanOrEqual(2);
}, 90_000);

test('an ACK that comes after our timeout is taken as the answer: the retry finds it and does not send again', async () => {
  const { labTestId } = await labAccount(fake.port);
  fake.inject({ type: 'late-ack', afterMs: 2800 }, 1); // our ack_timeout_ms is 2000; the retry comes 2 s after it
  const order = await placeOrder(labTestId);
  await orderReaches(client, order.id, 'requisition_created', 60_000);
  expect(fake.orders().get(order.placer)?.sends).toBe(1);
  const outbound = await app.inspect.collection('lab_outbound_messages').findOne({ _id: `${order.placer}O` as never });
  expect(outbound).toMatchObject({ state: 'answered', sends: 1, answer: { code: 'AA' } });
  const history = (await app.deps.temporal.client.workflow.getHandle(workflowIds.labOrder(order.id)).fetchHistory()).events ?? [];
  // A retried activity's started event carries its last attempt: the first one did time out.
  const scheduled = history.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'sendOrderToLab');
  const started = history.find((e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === String(scheduled?.eventId));
  const lastAttempt = started?.activityTaskStartedEventAttributes?.attempt;
  expect(lastAttempt).toBeGreaterThanOrEqual(2);
}, 90_000);

test('the lab refuses an order (AE): the order fails with the lab’s reason in its event and its webhook', async () => {
  const rx = await startReceiver();
  closers.push(() => rx.close());
  const hook = await managementClient(app, tenant).post(`/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`, {
    url: rx.url,
    filter_types: ['labtest.order.updated'],
  });
  expect([200, 201]).toContain(hook.status);
  const { labTestId } = await labAccount(fake.port);
  fake.refuseNext('AE', 'Unknown client account 70012345 for this facility');
  const order = await placeOrder(labTestId);
  const failed = await orderReaches(client, order.id, 'sample_error', 60_000);
  expect(failed.last_event).toMatchObject({
    status: 'failed.walk_in_test.sample_error',
    status_detail: 'fulfillment_error',
    detail: expect.stringContaining('Unknown client account 70012345'),
  });
  expect(failed.events.map((e: { status: string }) => lowOf(e.status))).toEqual(['ordered', 'sample_error']);
  const [webhook] = await rx.waitFor(1, 30_000, (r) => JSON.parse(r.body).data?.id === order.id);
  expect(JSON.parse(webhook.body).data.last_event).toMatchObject({ status_detail: 'fulfillment_error', detail: failed.last_event.detail });
}, 90_000);

test('an order the lab’s character set cannot carry fails at once, naming the field, and nothing is sent', async () => {
  const { labTestId } = await labAccount(fake.port, { charset: '8859/1' });
  const order = await placeOrder(labTestId, { last_name: 'Παπαδοπούλου' });
  const failed = await orderReaches(client, order.id, 'sample_error', 60_000);
  expect(failed.last_event).toMatchObject({ status_detail: 'fulfillment_error', detail: expect.stringContaining('patient_details.last_name') });
  expect(fake.orders().get(order.placer)).toBeUndefined();
  expect(await app.inspect.collection('lab_outbound_messages').findOne({ _id: `${order.placer}O` as never })).toBeNull();
}, 90_000);

test('the lab down delays the order (the pending activity and the metrics say why), and once it is back the order goes on, once', async () => {
  const proxy = await relayed();
  const { labTestId, name } = await labAccount(proxy.port);
  const lab = app.deps.labCatalogue.labById(3)!.slug;
  const unansweredSends = async () =>
    (await workerMetric('healthbridge_lab_messages_sent_total', { lab, kind: 'order', outcome: 'timeout' })) +
    (await workerMetric('healthbridge_lab_messages_sent_total', { lab, kind: 'order', outcome: 'connection_error' }));
  const failedBefore = await unansweredSends();
  const resendsBefore = await workerMetric('healthbridge_lab_message_resends_total', { lab, kind: 'order' });
  await proxy.down();
  const order = await placeOrder(labTestId);
  const handle = app.deps.temporal.client.workflow.getHandle(workflowIds.labOrder(order.id));
  const pending = await eventually(
    async () => {
      const activity = (await handle.describe()).raw.pendingActivities?.find((a) => a.activityType?.name === 'sendOrderToLab');
      return activity && (activity.attempt ?? 0) >= 2 && activity.lastFailure ? activity : null;
    },
    60_000,
    'sendOrderToLab retrying after a failure',
  );
  expect(pending.lastFailure?.message).toContain(name);
  expect(pending.lastFailure?.message).toMatch(/no connection|did not answer/);
  expect(await lowStatus(order.id)).toBe('ordered');
  expect(fake.orders().get(order.placer)).toBeUndefined();
  expect(await unansweredSends()).toBeGreaterThanOrEqual(failedBefore + 1);
  expect(await workerMetric('healthbridge_lab_messages_unanswered')).toBeGreaterThanOrEqual(1);
  // The retry (2 s after the first failure) is a resend of the stored message.
  await eventually(
    async () => (await workerMetric('healthbridge_lab_message_resends_total', { lab, kind: 'order' })) >= resendsBefore + 1,
    30_000,
    'a resend counted',
  );
  expect(await lowStatus(order.id)).toBe('ordered');

  await proxy.up();
  await orderReaches(client, order.id, 'requisition_created', 120_000);
  expect(fake.orders().get(order.placer)?.controlId).toBe(`${order.placer}O`);
  expect(new Set(framesOf(fake, order.placer).map((r) => r.controlId)).size).toBe(1);
}, 180_000);

test('an account changed to where the lab listens: the worker connects there, and the waiting order goes on', async () => {
  const nowhere = await freePort(); // nothing listens here
  const { accountId, labTestId, name } = await labAccount(nowhere);
  const order = await placeOrder(labTestId);
  const handle = app.deps.temporal.client.workflow.getHandle(workflowIds.labOrder(order.id));
  const pending = await eventually(
    async () => (await handle.describe()).raw.pendingActivities?.find((a) => a.activityType?.name === 'sendOrderToLab' && a.lastFailure),
    60_000,
    'sendOrderToLab failing',
  );
  expect(pending.lastFailure?.message).toContain(`${name} (`);
  expect(pending.lastFailure?.message).toContain(`127.0.0.1:${nowhere}`);
  const { DEPLOYMENT_ENVIRONMENT: env, DEPLOYMENT_REGION: region } = app.deps.config;
  const changed = await managementClient(app, tenant).patch(`/v1/org/${tenant.orgId}/lab_account/${env}/${region}/${accountId}`, {
    mllp: { port: fake.port },
  });
  expect(changed.status).toBe(200);
  await orderReaches(client, order.id, 'requisition_created', 120_000);
  expect(fake.orders().get(order.placer)?.controlId).toBe(`${order.placer}O`);
}, 180_000);

test('erasing the patient data of an order that waits on a lab that is down does not wait for the lab', async () => {
  const { labTestId } = await labAccount(await freePort()); // nothing listens there
  const order = await placeOrder(labTestId);
  const handle = app.deps.temporal.client.workflow.getHandle(workflowIds.labOrder(order.id));
  await eventually(
    async () => (await handle.describe()).raw.pendingActivities?.find((a) => a.activityType?.name === 'sendOrderToLab' && a.lastFailure),
    60_000,
    'sendOrderToLab failing',
  );
  expect(await app.inspect.collection('lab_outbound_messages').findOne({ _id: `${order.placer}O` as never })).not.toBeNull();
  expect(await handle.executeUpdate(erasePatientDataUpdate)).toEqual({ erased: true });
  expect(await handle.result()).toEqual({ final: 'erased' });
  expect(await app.inspect.collection('lab_outbound_messages').findOne({ _id: `${order.placer}O` as never })).toBeNull();
  expect((await storedOrder(order.id))?.patient_data_erased_at).toBeInstanceOf(Date);
}, 120_000);

test('one message the lab never answers does not hold back the next order to the same lab', async () => {
  const proxy = await relayed();
  const { labTestId } = await labAccount(proxy.port);
  // Aimed before the order exists: every reply to a message naming this patient is lost on the way.
  proxy.swallowRepliesToMessagesWith('Stuckmann');
  const stuck = await placeOrder(labTestId, { last_name: 'Stuckmann' });
  await eventually(async () => (proxy.swallowed.get(`${stuck.placer}O`) ?? 0) >= 1, 30_000, 'the first reply swallowed');
  expect(await lowStatus(stuck.id)).toBe('ordered');

  const next = await placeOrder(labTestId);
  await orderReaches(client, next.id, 'requisition_created', 60_000);
  // The stuck one kept timing out meanwhile (sent again, still unanswered), and is still waiting.
  await eventually(async () => (proxy.swallowed.get(`${stuck.placer}O`) ?? 0) >= 2, 60_000, 'a second unanswered send');
  expect(await lowStatus(stuck.id)).toBe('ordered');

  proxy.swallowRepliesToMessagesWith(null);
  await orderReaches(client, stuck.id, 'requisition_created', 120_000);
  expect(fake.orders().get(stuck.placer)?.sends).toBeGreaterThanOrEqual(2);
  expect(new Set(framesOf(fake, stuck.placer).map((r) => r.controlId))).toEqual(new Set([`${stuck.placer}O`]));
}, 240_000);

test('cancel: the lab’s CR cancels the order; its UC refuses the cancel with its reason and the order carries on', async () => {
  const { labTestId } = await labAccount(fake.port, { profile: 'ORM_2.3' });
  const cancelled = await placeOrder(labTestId);
  const refused = await placeOrder(labTestId);
  await orderReaches(client, cancelled.id, 'requisition_created', 60_000);
  await orderReaches(client, refused.id, 'requisition_created', 60_000);

  const cr = await client.post(`/v3/order/${cancelled.id}/cancel`);
  expect(cr.status).toBe(200);
  expect(cr.body.order.last_event.status).toBe('cancelled.walk_in_test.cancelled');
  expect(fake.orders().get(cancelled.placer)?.cancelled).toBe(true);
  expect(fake.received.filter((r) => r.controlId === `${cancelled.placer}C`).length).toBeGreaterThanOrEqual(1);

  fake.setSpecimenState(refused.placer, 'received');
  const uc = await client.post(`/v3/order/${refused.id}/cancel`);
  expect(uc.status).toBe(400);
  expect(uc.body.detail).toMatch(/The lab could not cancel the order: .+/);
  expect(fake.orders().get(refused.placer)?.cancelled).toBe(false);
  const after = (await client.get(`/v3/order/${refused.id}`)).body;
  expect(after.events.map((e: { status: string }) => lowOf(e.status))).toEqual(['ordered', 'requisition_created']);
}, 120_000);

test('enhanced acknowledgement: once the lab has committed the message, a retry waits for its application ACK instead of resending', async () => {
  const enhanced = await startFakeLab({ ackMode: 'enhanced', lateAckMs: 3000 });
  closers.push(() => enhanced.close());
  const { labTestId } = await labAccount(enhanced.port, { ack_mode: 'enhanced' });
  enhanced.inject('late-ack', 1); // the accept ACK at once, the application ACK after our 2 s timeout
  const order = await placeOrder(labTestId);
  await orderReaches(client, order.id, 'requisition_created', 60_000);
  expect(enhanced.orders().get(order.placer)?.sends).toBe(1);
  const outbound = await app.inspect.collection('lab_outbound_messages').findOne({ _id: `${order.placer}O` as never });
  expect(outbound).toMatchObject({ state: 'answered', sends: 1, answer: { code: 'AA' } });
}, 90_000);

test('a worker killed after the send, before it took the ACK: one order at the lab, and the order goes on once a worker is back', async () => {
  const { labTestId } = await labAccount(fake.port);
  if (worker) await stopWorker(worker, 'SIGKILL');
  worker = startWorker({ HB_FAILPOINTS: 'lab-message.reply-received' });
  const order = await placeOrder(labTestId);
  expect(await workerEnded(worker)).toBe('SIGKILL');
  // The lab has it and answered; we never took the answer.
  expect(fake.orders().get(order.placer)?.sends).toBe(1);
  expect(await lowStatus(order.id)).toBe('ordered');

  worker = startWorker();
  const done = await orderReaches(client, order.id, 'requisition_created', 90_000);
  expect(done.events.map((e: { status: string }) => lowOf(e.status))).toEqual(['ordered', 'requisition_created']);
  const held = fake.orders().get(order.placer)!;
  expect(held.sends).toBeGreaterThanOrEqual(2); // the same message again, de-duplicated by the lab
  expect(new Set(framesOf(fake, order.placer).map((r) => r.controlId))).toEqual(new Set([`${order.placer}O`]));
}, 180_000);
