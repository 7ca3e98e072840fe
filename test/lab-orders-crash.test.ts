import type { ChildProcess } from 'node:child_process';
import { courseTo } from '../lib/labs/statuses';
import { workflowIds } from '../workflows/ids';
import { createTenant, eventually, managementClient, startTestApp, teamClient, type TestApp } from './support/harness';
import { createUser, daysFromToday, labTestIds, lowOf, orderBody, orderReaches, orderWorkflowIdle } from './support/lab';
import { startReceiver, type Receiver } from './support/receiver';
import { privateDeployment, startWorker as startCrashWorker, stopWorker, workerEnded } from './support/worker';

/**
 * Crash test: this file runs its own worker on a private task queue, SIGKILLs it while orders wait on
 * activate_by timers and while simulations are walking orders through their statuses, starts it again, and
 * checks that every order ends where it should with each status recorded and published exactly once. Then a worker
 * that dies between storing a cancel and reporting it, while a simulation step's timer runs: the order's workflow
 * writes through recorded activities, so the write comes from a command already in the history (the cancel accepted,
 * the step's timer cancelled): the next worker retries that write and cannot decide otherwise. (With local activities,
 * as before, the lost task's write was replayed over by a task that also saw the step's timer fire.)
 */
const deployment = privateDeployment('lab-crash');
let worker: ChildProcess | null = null;
let app: TestApp;
let rx: Receiver;

const startWorker = (env: Record<string, string> = {}) =>
  startCrashWorker(deployment, { WEBHOOK_SWEEP_INTERVAL_MS: '1000', WEBHOOK_SWEEP_GRACE_MS: '2000', ...env });
const kill = stopWorker;

beforeAll(async () => {
  app = await startTestApp(deployment);
});
afterAll(async () => {
  if (worker) await kill(worker, 'SIGKILL');
  await rx?.close();
  await app.close();
});

test('SIGKILL of the worker during timers and simulations loses nothing and emits no status twice', async () => {
  const tenant = await createTenant(app.deps, 'Lab crash');
  const client = teamClient(app, tenant);
  rx = await startReceiver();
  const mgmt = managementClient(app, tenant);
  await mgmt.post(`/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`, {
    url: rx.url,
    filter_types: ['labtest.order.*'],
  });
  const tests = await labTestIds(client);
  const userId = await createUser(client);

  worker = startWorker();
  // Waiting on their activate_by timers (tomorrow: ~8.6 s on the test stack).
  const scheduled = await Promise.all(
    [1, 2, 3].map(async () => (await client.post('/v3/order', orderBody(userId, tests.walk_in_test, { activate_by: daysFromToday(1) }))).body.order),
  );
  // Mid-simulation: a kit walked to completion one status a second.
  const walking = await Promise.all([1, 2, 3].map(async () => (await client.post('/v3/order', orderBody(userId, tests.testkit))).body.order));
  for (const o of walking) await orderReaches(client, o.id, 'requisition_created');
  for (const o of walking) expect((await client.post(`/v3/order/${o.id}/test?final_status=completed.testkit.completed&delay=1`, {})).status).toBe(200);
  await orderReaches(client, walking[0].id, 'out_for_delivery', 20000);

  await kill(worker, 'SIGKILL');
  // The gap is the behaviour under test: two seconds with no worker while the orders' timers run on.
  await new Promise((r) => setTimeout(r, 2000));
  worker = startWorker();

  const course = ['ordered', 'requisition_created', ...courseTo('testkit', 'requisition_created', 'completed')!];
  for (const o of walking) {
    const done = await orderReaches(client, o.id, 'completed', 60000);
    expect(done.events.map((e: { status: string }) => lowOf(e.status))).toEqual(course);
  }
  for (const o of scheduled) {
    const done = await orderReaches(client, o.id, 'requisition_created', 60000);
    expect(done.events.map((e: { status: string }) => lowOf(e.status))).toEqual(['ordered', 'requisition_created']);
  }

  // Every status reached the receiver, each under one webhook-id (retries may repeat an id, never a status).
  const all = [...scheduled, ...walking];
  const expectedEvents = scheduled.length * 2 + walking.length * course.length;
  const statusEvents = await eventually(
    async () => {
      const byWebhookId = new Map<string, { order: string; eventId: number }>();
      for (const r of rx.requests) {
        const body = JSON.parse(r.body);
        byWebhookId.set(String(r.headers['webhook-id']), { order: body.data.id, eventId: body.data.last_event.id });
      }
      return byWebhookId.size >= expectedEvents ? byWebhookId : null;
    },
    60000,
    'every status webhook',
  );
  const perStatus = new Map<string, number>();
  for (const { order, eventId } of statusEvents.values()) perStatus.set(`${order}:${eventId}`, (perStatus.get(`${order}:${eventId}`) ?? 0) + 1);
  expect([...perStatus.values()].every((n) => n === 1)).toBe(true);
  expect(perStatus.size).toBe(expectedEvents);
  expect(new Set([...statusEvents.values()].map((e) => e.order))).toEqual(new Set(all.map((o) => o.id)));
}, 180000);

test('a cancel whose write outlived its worker, then a simulation step that fired meanwhile: one cancelled event, no step', async () => {
  if (worker) await kill(worker, 'SIGKILL');
  const client = teamClient(app, await createTenant(app.deps, 'Lab crash, cancel'));
  const tests = await labTestIds(client);
  const userId = await createUser(client);
  worker = startWorker();
  const order = (await client.post('/v3/order', orderBody(userId, tests.walk_in_test))).body.order;
  await orderReaches(client, order.id, 'requisition_created');
  // The simulation's first step waits on a 20 s timer; it fires while no worker runs (below).
  const stepDue = Date.now() + 20_000;
  expect((await client.post(`/v3/order/${order.id}/test?final_status=completed.walk_in_test.completed&delay=20`, {})).status).toBe(200);
  await orderWorkflowIdle(app, order.id);
  await kill(worker, 'SIGKILL');

  // The next worker takes the cancel, stores `cancelled` and dies before its workflow task completes.
  const cancel = client.post(`/v3/order/${order.id}/cancel`);
  worker = startWorker({ HB_FAILPOINTS: 'lab-order.event-recorded' });
  expect(await workerEnded(worker)).toBe('SIGKILL');
  const stored = await app.inspect.collection('lab_orders').findOne({ _id: order.id });
  expect(stored?.events.map((e: { status: string }) => lowOf(e.status))).toEqual(['ordered', 'requisition_created', 'cancelled']);
  expect(Date.now()).toBeLessThan(stepDue); // the step's timer has not fired yet

  // Its replacement starts after the timer fired: its task carries the cancel again and the fired timer.
  await new Promise((r) => setTimeout(r, stepDue - Date.now() + 1_000));
  worker = startWorker();
  const answered = await cancel;
  expect(answered.status).toBe(200);
  await orderReaches(client, order.id, 'cancelled', 60_000);
  await orderWorkflowIdle(app, order.id);
  const after = (await client.get(`/v3/order/${order.id}`)).body;
  expect(after.events.map((e: { status: string }) => lowOf(e.status))).toEqual(['ordered', 'requisition_created', 'cancelled']);
  // The write the dead worker made came from a recorded command: the history accepted the cancel and cancelled the
  // step's timer before it scheduled the write, so the timer that fired meanwhile never reached the workflow.
  const history = (await app.deps.temporal.client.workflow.getHandle(workflowIds.labOrder(order.id)).fetchHistory()).events ?? [];
  const cancelAccepted = history.findIndex((e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name === 'cancelOrder');
  const timerCancelled = history.findIndex((e) => e.timerCanceledEventAttributes);
  const cancelledWrite = history.findIndex((e, i) => i > cancelAccepted && e.activityTaskScheduledEventAttributes?.activityType?.name === 'recordOrderEvent');
  expect(cancelAccepted).toBeGreaterThan(-1);
  expect(timerCancelled).toBeGreaterThan(-1);
  expect(cancelledWrite).toBeGreaterThan(Math.max(cancelAccepted, timerCancelled));
  expect(history.some((e) => e.timerFiredEventAttributes)).toBe(false);
}, 180000);
