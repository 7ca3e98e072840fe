import type { ChildProcess } from 'node:child_process';
import { createTenant, eventually, startTestApp, teamClient, type Tenant, type TestApp } from './support/harness';
import { createUser } from './support/lab';
import { privateDeployment, startWorker, stopWorker } from './support/worker';
import { workflowIds } from '../workflows/ids';
import { sweepNowSignal } from '../workflows/stranded-work-sweep';

/**
 * Configuration reaches what is already running: a worker restarted with a new value is followed by the running
 * workflows it concerns (a setting a workflow carries is sent again by every worker at boot). Real worker processes on a
 * deployment of this file's own.
 */
const deployment = privateDeployment('config-reach');
let app: TestApp;
let tenant: Tenant;
let worker: ChildProcess | null = null;

beforeAll(async () => {
  app = await startTestApp(deployment);
  tenant = await createTenant(app.deps, 'Config reach');
});
afterAll(async () => {
  if (worker) await stopWorker(worker, 'SIGKILL');
  await app.close();
});

async function restartWorker(env: Record<string, string>): Promise<void> {
  if (worker) await stopWorker(worker, 'SIGTERM');
  worker = startWorker(deployment, env);
}

/** How many times the workflow has scheduled `activityType` so far. */
async function activitiesScheduled(workflowId: string, activityType: string): Promise<number> {
  const history = await app.deps.temporal.client.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === activityType).length;
}

test('a running connection follows WEARABLE_SYNC_INTERVAL_SECONDS after a worker restart', async () => {
  await restartWorker({ WEARABLE_SYNC_INTERVAL_SECONDS: '3600' });
  const client = teamClient(app, tenant);
  const userId = await createUser(client);
  expect((await client.post('/v2/link/connect/demo', { user_id: userId, provider: 'fitbit' })).status).toBe(200);
  const [connection] = await app.deps.repos.connections.listForUser(tenant.teamId, userId);
  const workflowId = workflowIds.wearableConnection(connection._id);
  // Its history pulled, it waits an hour for its first sync.
  await eventually(
    async () => (await activitiesScheduled(workflowId, 'connectionSettings')) >= 1 && (await activitiesScheduled(workflowId, 'startHistoricalPull')) >= 1,
    60_000,
    'the connection running',
  );
  expect(await activitiesScheduled(workflowId, 'syncConnection')).toBe(0);

  // Restarted with a one-second interval; a refresh wakes the hour-long wait, and from then on it syncs every second.
  await restartWorker({ WEARABLE_SYNC_INTERVAL_SECONDS: '1' });
  expect((await client.post(`/v2/user/refresh/${userId}`, {})).status).toBe(200);
  await eventually(async () => (await activitiesScheduled(workflowId, 'syncConnection')) >= 4, 60_000, 'syncs every second');
}, 180_000);

test('the stranded-work sweep is one long-lived run whose interval follows WEBHOOK_SWEEP_INTERVAL_MS after a worker restart', async () => {
  const workflowId = workflowIds.strandedWorkSweep(deployment.TEMPORAL_TASK_QUEUE);
  const history = async () => (await app.deps.temporal.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  /** The duration of the sweep's latest timer, in ms. */
  const waitingMs = async () => {
    const timers = (await history().catch(() => [])).filter((e) => e.timerStartedEventAttributes);
    const timeout = timers.at(-1)?.timerStartedEventAttributes?.startToFireTimeout;
    return timeout ? Number(timeout.seconds ?? 0) * 1000 + Math.round((timeout.nanos ?? 0) / 1e6) : 0;
  };
  const sweeps = async () => (await history()).filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'sweepWebhooks').length;

  await restartWorker({ WEBHOOK_SWEEP_INTERVAL_MS: '7000' });
  await eventually(async () => (await waitingMs()) === 7000, 60_000, 'the sweep waiting 7 s');
  // Unset (an empty value: the run's environment sets one), the interval is the longer grace period: a minute by default.
  await restartWorker({ WEBHOOK_SWEEP_INTERVAL_MS: '', WEBHOOK_SWEEP_GRACE_MS: '', CONNECTION_STEPS_GRACE_MS: '' });
  await eventually(async () => (await waitingMs()) === 60_000, 60_000, 'the sweep waiting a minute');
  // Signalled by hand (as from the Temporal UI: `sweepNow` with `{}`), it sweeps at once, not a minute later.
  const before = await sweeps();
  await app.deps.temporal.client.workflow.getHandle(workflowId).signal(sweepNowSignal, {});
  await eventually(async () => (await sweeps()) > before, 20_000, 'a sweep on the signal');
  // All of it was one run: no completed run per sweep in the workflow list.
  const query = `WorkflowType = 'strandedWorkSweepWorkflow' AND TaskQueue = '${deployment.TEMPORAL_TASK_QUEUE}'`;
  const runs: string[] = [];
  for await (const run of app.deps.temporal.client.workflow.list({ query })) runs.push(run.status.name);
  expect(runs).toEqual(['RUNNING']);
}, 180_000);
