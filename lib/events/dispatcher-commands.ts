import { WithStartWorkflowOperation } from '@temporalio/client';
import { isWorkflowGone, type TemporalDeps } from '../platform/temporal';
import { workflowIds } from '../../workflows/ids';
import { runDispatcherCommandUpdate, destinationDispatchWorkflow, type DispatcherCommand } from '../../workflows/destination-dispatch';
import type { Repositories } from '../repositories';

const withStart = (temporal: TemporalDeps, destinationId: string) =>
  new WithStartWorkflowOperation(destinationDispatchWorkflow, {
    workflowId: workflowIds.destinationDispatch(destinationId),
    taskQueue: temporal.taskQueue,
    args: [{ destinationId }],
    workflowIdConflictPolicy: 'USE_EXISTING',
  });

/**
 * Runs a command inside an endpoint's dispatcher workflow (update-with-start: it is started if not running)
 * and waits until it has run between two batches (up to one delivery run, seconds). Returns how many
 * deliveries it changed.
 */
export async function runDispatcherCommand(temporal: TemporalDeps, destinationId: string, command: DispatcherCommand): Promise<number> {
  return temporal.client.workflow.executeUpdateWithStart(runDispatcherCommandUpdate, {
    args: [command],
    startWorkflowOperation: withStart(temporal, destinationId),
  });
}

/**
 * Hands a command to an endpoint's dispatcher and returns once the workflow has accepted it (recorded in its
 * history: it will run even if every process restarts), without waiting for the batch in flight.
 */
export async function queueDispatcherCommand(temporal: TemporalDeps, destinationId: string, command: DispatcherCommand): Promise<void> {
  await temporal.client.workflow.startUpdateWithStart(runDispatcherCommandUpdate, {
    args: [command],
    waitForStage: 'ACCEPTED',
    startWorkflowOperation: withStart(temporal, destinationId),
  });
}

/**
 * Tells a destination's running dispatcher that the destination changed, and returns once no delivery run that read
 * it before the change is still sending: every delivery sent after this returns is sent with the change. A
 * dispatcher that is not running has nothing in flight (its next run reads the destination afresh): none is started.
 */
export async function destinationChanged(temporal: TemporalDeps, destinationId: string): Promise<void> {
  try {
    await temporal.client.workflow
      .getHandle(workflowIds.destinationDispatch(destinationId))
      .executeUpdate(runDispatcherCommandUpdate, { args: [{ kind: 'destination_changed' }] });
  } catch (err) {
    if (!isWorkflowGone(err)) throw err;
  }
}

/**
 * Tells a deleted destination's dispatcher, starting it if it is not running: it finds the destination gone and ends
 * every pending delivery to it (cancelled, `endpoint_deleted`, then expired with the delivery log), instead of leaving
 * them pending until their next attempt is due. Returns once the dispatcher took the command; the drain follows at once.
 */
export async function destinationDeleted(temporal: TemporalDeps, destinationId: string): Promise<void> {
  await runDispatcherCommand(temporal, destinationId, { kind: 'destination_changed' });
}

/**
 * Erases a user's webhook and pipeline data so that no batch in flight can write it back: the events first (a dispatcher
 * drops deliveries whose event is gone, and fan-out finds nothing to queue), then each endpoint's dispatcher
 * removes the user's deliveries and attempts between its batches (so a batch that was sending has finished
 * recording), then a team-wide pass catches endpoints deleted meanwhile. Idempotent.
 */
export async function eraseUserWebhookData(deps: { repos: Repositories; temporal: TemporalDeps }, teamId: string, userId: string): Promise<number> {
  const { repos, temporal } = deps;
  let n = await repos.webhookStore.eraseUserEvents(teamId, userId);
  // Pipelines' pending messages too (what already reached the team's broker is the team's to erase).
  const destinations = [...(await repos.webhooks.endpointIdsOfTeam(teamId)), ...(await repos.pipelines.pipelineIdsOfTeam(teamId))];
  for (const destinationId of destinations) {
    n += await runDispatcherCommand(temporal, destinationId, { kind: 'erase_user', teamId, userId });
  }
  return n + (await repos.webhookStore.eraseUser(teamId, userId)) + (await repos.pipelineBatches.eraseUser(teamId, userId));
}
