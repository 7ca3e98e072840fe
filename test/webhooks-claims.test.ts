import type { ChildProcess } from 'node:child_process';
import { publishEvent } from '../lib/events/publisher';
import type { DeliveryDoc } from '../lib/events/model';
import { createTenant, eventually, managementClient, startTestApp, type TestApp } from './support/harness';
import { startReceiver, type Receiver } from './support/receiver';
import { privateDeployment, startWorker, stopWorker } from './support/worker';

/**
 * A dispatcher run that Temporal gives up on while it is still sending (it missed its heartbeat: here its worker
 * is stopped with SIGSTOP mid-batch, past the 20 s heartbeat timeout) is retried on another worker. The retry must
 * not send the batch inside the first run's send window, yet delivers events published later; the first run, once
 * it resumes, records its own outcomes and sends nothing more: every event reaches the receiver exactly once, with
 * one attempt record. (Without the fence, the retry sent the stalled batch again: the duplicates the 10-endpoint
 * benchmark counted under CPU load.)
 */
const deployment = privateDeployment('webhook-claims');
const workers: ChildProcess[] = [];
let app: TestApp;
let rx: Receiver;

beforeAll(async () => {
  // The stalled run's attempts outlast the stall (the takeover can take a minute: Temporal first hands the retry
  // to the stalled worker's open poll, which times out too), so they end in answers, not timeouts.
  app = await startTestApp({ ...deployment, WEBHOOK_ATTEMPT_TIMEOUT_MS: 180_000, WEBHOOK_RETRY_SCHEDULE_MS: '0,60000' });
});
afterAll(async () => {
  for (const w of workers) {
    if (w.signalCode === null && w.exitCode === null) w.kill('SIGCONT');
    await stopWorker(w, 'SIGKILL');
  }
  await rx?.close();
  await app.close();
});

test('a stalled dispatcher and the run that replaced it never send the same delivery twice', async () => {
  const tenant = await createTenant(app.deps, 'Claims');
  const base = `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`;
  let held = true;
  rx = await startReceiver(() => (held ? { status: 200, delayMs: 3_000 } : { status: 200 }));
  const endpointId = (await managementClient(app, tenant).post(base, { url: rx.url })).body.id as string;

  const first = startWorker(deployment, { LOG_LEVEL: 'error' });
  workers.push(first);
  const publish = (i: number) => publishEvent(app.deps, { teamId: tenant.teamId, eventType: 'labtest.order.updated', data: { i } });
  const stalled = await Promise.all(Array.from({ length: 20 }, (_, i) => publish(i)));
  await rx.waitFor(1, 60_000); // the first worker's batch is in flight: the receiver holds each answer 3 s
  first.kill('SIGSTOP');
  const stoppedAt = Date.now();
  held = false;

  // A second worker takes the dispatcher over once Temporal times the stalled run out, and delivers new events.
  workers.push(startWorker(deployment, { LOG_LEVEL: 'error' }));
  const later = await Promise.all(Array.from({ length: 5 }, (_, i) => publish(100 + i)));
  await eventually(async () => later.every((e) => rx.requests.some((r) => r.headers['webhook-id'] === e.id)), 90_000, 'the second worker to deliver');
  expect(Date.now() - stoppedAt).toBeGreaterThan(20_000); // taken over only after the 20 s heartbeat timeout
  first.kill('SIGCONT'); // the stalled run resumes: its answers are waiting for it

  // Read through the test's own connection (app.inspect): these queries are not the product's.
  const deliveriesOf = () => app.inspect.collection<DeliveryDoc>('webhook_deliveries').find({ destination_id: endpointId }).toArray();
  const all = [...stalled, ...later];
  await eventually(
    async () => {
      const deliveries = await deliveriesOf();
      return deliveries.length === all.length && deliveries.every((d) => d.status === 'succeeded');
    },
    90_000,
    'every delivery recorded as succeeded',
  );
  const sent = rx.requests.map((r) => String(r.headers['webhook-id']));
  expect(sent.filter((id, i) => sent.indexOf(id) !== i)).toEqual([]); // no duplicate
  expect(new Set(sent)).toEqual(new Set(all.map((e) => e.id)));
  const deliveries = await deliveriesOf();
  expect(deliveries.map((d) => d.attempts)).toEqual(all.map(() => 1));
  // The stalled run, superseded, ended: no send window of it is left to hold the endpoint's deliveries back.
  await eventually(
    async () => {
      const state = await app.inspect.collection<{ _id: string; sending?: Record<string, unknown> }>('webhook_dispatchers').findOne({ _id: endpointId });
      return Object.keys(state?.sending ?? {}).length === 0;
    },
    30_000,
    'the stalled run to close its send window',
  );
  expect(await app.inspect.collection('webhook_attempts').countDocuments({ destination_id: endpointId })).toBe(all.length);
}, 240_000);
