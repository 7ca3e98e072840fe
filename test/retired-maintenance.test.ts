import { deleteRetiredMaintenanceSchedule } from '../worker/maintenance-schedule';
import { eventually, startTestApp, uniqueId, type TestApp } from './support/harness';

/**
 * Earlier versions ran `maintenanceWorkflow` from a Schedule; this worker no longer hosts it, so a run left over from
 * before an upgrade fails its workflow task every few seconds for ever. Every worker's boot step ends such runs.
 */
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

test('a worker boot terminates runs of the retired maintenance workflow on its task queue', async () => {
  const { client, taskQueue } = app.deps.temporal;
  const handle = await client.workflow.start('maintenanceWorkflow', { workflowId: uniqueId('maintenance-left-over'), taskQueue, args: [] });
  // Visible to list queries (the boot step finds runs through visibility), as it would be after an upgrade.
  await eventually(async () => {
    for await (const run of client.workflow.list({ query: `WorkflowId = '${handle.workflowId}' AND ExecutionStatus = 'Running'` })) return run;
    return null;
  }, 30_000, 'the left-over run to be listed');

  await deleteRetiredMaintenanceSchedule(app.deps.temporal, app.deps.logger);
  expect((await handle.describe()).status.name).toBe('TERMINATED');
});
