import type { ChildProcess } from 'node:child_process';
import { createTenant, eventually, startTestApp, teamClient, type Tenant, type TestApp } from './support/harness';
import { createUser } from './support/lab';
import { privateDeployment, startWorker, stopWorker } from './support/worker';
import { workflowIds } from '../workflows/ids';

/**
 * Configuration reaches what is already running: a worker restarted with a new value is followed by the running
 * workflows and Schedules it concerns (nothing keeps a setting in a workflow's input). Real worker processes on a
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
  await eventually(async () => (await activitiesScheduled(workflowId, 'connectionSettings')) >= 1 && (await activitiesScheduled(workflowId, 'startHistoricalPull')) >= 1, 60_000, 'the connection running');
  expect(await activitiesScheduled(workflowId, 'syncConnection')).toBe(0);

  // Restarted with a one-second interval; a refresh wakes the hour-long wait, and from then on it syncs every second.
  await restartWorker({ WEARABLE_SYNC_INTERVAL_SECONDS: '1' });
  expect((await client.post(`/v2/user/refresh/${userId}`, {})).status).toBe(200);
  await eventually(async () => (await activitiesScheduled(workflowId, 'syncConnection')) >= 4, 60_000, 'syncs every second');
}, 180_000);

test('the stranded-work sweep is a Schedule whose interval follows WEBHOOK_SWEEP_INTERVAL_MS after a worker restart', async () => {
  const handle = app.deps.temporal.client.schedule.getHandle(workflowIds.strandedWorkSweepSchedule(deployment.TEMPORAL_TASK_QUEUE));
  const everyMs = async () => {
    const spec = (await handle.describe()).spec as { intervals?: { every: number | string }[] };
    return Number(spec.intervals?.[0]?.every);
  };
  await restartWorker({ WEBHOOK_SWEEP_INTERVAL_MS: '7000' });
  await eventually(async () => (await everyMs().catch(() => 0)) === 7000, 60_000, 'the schedule at 7 s');
  await restartWorker({ WEBHOOK_SWEEP_INTERVAL_MS: '9000' });
  await eventually(async () => (await everyMs()) === 9000, 60_000, 'the schedule at 9 s');
  // Triggered by hand (as from the Temporal UI), it runs a sweep to completion.
  const before = (await handle.describe()).info.recentActions.length;
  await handle.trigger();
  await eventually(async () => (await handle.describe()).info.recentActions.length > before, 60_000, 'a triggered sweep');
}, 180_000);
