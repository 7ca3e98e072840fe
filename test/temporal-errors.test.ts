import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { isWorkflowGone } from '../lib/platform/temporal';
import { destinationChanged } from '../lib/events/dispatcher-commands';
import { workflowIds } from '../workflows/ids';
import { runDispatcherCommandUpdate, wakeDispatcherSignal, destinationDispatchWorkflow } from '../workflows/destination-dispatch';
import { startTestApp, type TestApp } from './support/harness';

/**
 * What Temporal answers when a workflow is not running, as the code tells it (by the client's error types, not by
 * message text): an Update to a workflow never started, and to one that has closed. Real Temporal server and worker.
 */
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
});

const updateOf = (workflowId: string) =>
  app.deps.temporal.client.workflow.getHandle(workflowId).executeUpdate(runDispatcherCommandUpdate, { args: [{ kind: 'destination_changed' }] });

test('an Update to a workflow never started is WorkflowNotFoundError, which isWorkflowGone names', async () => {
  const err = await updateOf(workflowIds.destinationDispatch(randomUUID())).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(WorkflowNotFoundError);
  expect(isWorkflowGone(err)).toBe(true);
});

test('an Update to a closed workflow is named gone too; destinationChanged then has nothing to wait for', async () => {
  // The dispatcher of a destination that does not exist finds nothing to send and ends.
  const destinationId = randomUUID();
  const workflowId = workflowIds.destinationDispatch(destinationId);
  const { client, taskQueue } = app.deps.temporal;
  const handle = await client.workflow.signalWithStart(destinationDispatchWorkflow, {
    workflowId,
    taskQueue,
    args: [{ destinationId }],
    signal: wakeDispatcherSignal,
  });
  await handle.result();
  const err = await updateOf(workflowId).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(Error);
  expect(isWorkflowGone(err)).toBe(true);
  await expect(destinationChanged(app.deps.temporal, destinationId)).resolves.toBeUndefined();
});

test('any other error is not "gone"', () => {
  expect(isWorkflowGone(new Error('workflow not found'))).toBe(false);
  expect(isWorkflowGone(undefined)).toBe(false);
});
