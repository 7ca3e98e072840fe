import { WithStartWorkflowOperation, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError } from '@temporalio/client';
import { ApplicationFailure, type UpdateDefinition } from '@temporalio/common';
import { ApiError, badRequest, notFound } from '../platform/errors';
import type { UserDoc } from './store';
import { workflowIds } from '../../workflows/ids';
import { requestUserDeletionUpdate, undoUserDeletionUpdate, userDeletionWorkflow, type UserDeletionInput } from '../../workflows/user-deletion';
import type { Config } from '../platform/config';
import type { Logger } from '../platform/logger';
import type { TemporalDeps } from '../platform/temporal';
import type { Repositories } from '../repositories';

/** What a user's deletion and its undo use. */
export interface UserDeletionDeps {
  repos: Repositories;
  temporal: TemporalDeps;
  config: Config;
  logger: Logger;
}

export const SCHEDULED_FOR_DELETION = 'The user has been scheduled for deletion as per your previous request.';

/**
 * Sends one request to the user's deletion workflow, starting it if no run is open (update-with-start).
 * The workflow is the only writer of the deletion state and applies requests one at a time, so a DELETE
 * and an undo racing each other are ordered there. A run that is closing when the request arrives makes
 * the server answer with a retryable error, and the client retries into a new run.
 */
async function toDeletionWorkflow<Ret, Args extends unknown[]>(
  deps: UserDeletionDeps,
  user: UserDoc,
  update: UpdateDefinition<Ret, Args>,
  args: Args,
  requestId: string,
): Promise<Ret> {
  const { temporal } = deps;
  const input: UserDeletionInput = { teamId: user.team_id, userId: user._id };
  // An operation is single-use: a fresh one for each attempt.
  const startWorkflowOperation = () =>
    new WithStartWorkflowOperation(userDeletionWorkflow, {
      workflowId: workflowIds.userDeletion(user._id),
      taskQueue: temporal.taskQueue,
      args: [input],
      // The open run owns the user's deletion state; a closed one is followed by a new run.
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      // Operators can match a workflow in the Temporal UI to the api's request log line.
      memo: { request_id: requestId, team_id: user.team_id },
    });
  for (let attempt = 1; ; attempt++) {
    try {
      return await temporal.client.workflow.executeUpdateWithStart(update, { args, startWorkflowOperation: startWorkflowOperation() });
    } catch (err) {
      if (err instanceof WorkflowUpdateFailedError && runClosedBeforeAnswering(err) && attempt < RUN_CLOSED_RETRIES) continue;
      if (err instanceof WorkflowUpdateRPCTimeoutOrCancelledError) {
        throw new ApiError(503, 'The request did not complete in time; it is safe to retry.', { 'Retry-After': '1' });
      }
      if (err instanceof WorkflowUpdateFailedError) {
        // Our own fault persisted through the workflow's retries (e.g. the database was unavailable).
        const cause = err.cause as (Error & { type?: string }) | undefined;
        deps.logger.warn(
          { workflowId: workflowIds.userDeletion(user._id), cause: cause?.name, causeType: cause?.type, causeMessage: cause?.message },
          'user deletion update failed',
        );
        throw new ApiError(503, 'The change could not be applied right now; it is safe to retry.', { 'Retry-After': '1' });
      }
      throw err;
    }
  }
}

/** How often a request that met a closing run is sent again (each time a new run answers it). */
const RUN_CLOSED_RETRIES = 3;

/**
 * The server failed the update because the run it reached was completing: the workflow ended before the
 * update's handler finished (AcceptedUpdateCompletedWorkflow), or its last task completed without taking the
 * update (UnprocessedUpdate). Either way the request changed nothing that the next run does not see when it
 * loads the user's state, so sending it again, into a new run, is safe.
 */
function runClosedBeforeAnswering(err: WorkflowUpdateFailedError): boolean {
  const cause = err.cause;
  return cause instanceof ApplicationFailure && (cause.type === 'AcceptedUpdateCompletedWorkflow' || cause.type === 'UnprocessedUpdate');
}

/**
 * DELETE /v2/user/{id}: the user's deletion workflow hides the user at once (deterministic deletion id),
 * deregisters its connections and erases after the grace period. A second DELETE finds it scheduled.
 */
export async function scheduleUserDeletion(deps: UserDeletionDeps, teamId: string, userId: string, requestId: string): Promise<void> {
  const user = await deps.repos.users.find(teamId, userId);
  if (!user || user.status === 'erased') throw notFound('User not found.');
  const res = await toDeletionWorkflow(
    deps,
    user,
    requestUserDeletionUpdate,
    [{ graceSeconds: deps.config.USER_DELETION_GRACE_SECONDS, requestId }],
    requestId,
  );
  if (res.outcome === 'scheduled') return;
  if (res.outcome === 'already_scheduled') throw notFound(SCHEDULED_FOR_DELETION);
  throw notFound('User not found.');
}

/** POST /v2/user/undo_delete: restores a user within its grace period (through its deletion workflow). */
export async function undoUserDeletion(
  deps: UserDeletionDeps,
  teamId: string,
  by: { user_id?: string; client_user_id?: string },
  requestId: string,
): Promise<void> {
  const { repos } = deps;
  const user = by.user_id
    ? await repos.users.find(teamId, by.user_id)
    : ((await repos.users.findPendingByClientUserId(teamId, by.client_user_id!)) ?? (await repos.users.findLatestByClientUserId(teamId, by.client_user_id!)));
  const who = by.user_id ? `User ${by.user_id}` : `The user with client_user_id '${by.client_user_id}'`;
  if (!user) throw notFound(`${who} was not found.`);
  const notScheduled = () => badRequest(`${who} is not scheduled for deletion; nothing to undo.`);
  const erased = (at?: Date) =>
    badRequest(`${who} cannot be restored: its grace period ended${at ? ` on ${at.toISOString()}` : ''} and its data has been erased.`);
  // Read before the workflow is asked: an undo seen here as "nothing to undo" came before any racing DELETE.
  if (user.status === 'active') throw notScheduled();
  if (user.status === 'erased' || !user.deletion) throw erased(user.erased_at);

  const res = await toDeletionWorkflow(deps, user, undoUserDeletionUpdate, [], requestId);
  switch (res.outcome) {
    case 'restored':
      return;
    case 'not_scheduled':
      throw notScheduled();
    case 'erased':
      throw badRequest(`${who} cannot be restored: its grace period has ended and erasure has started.`);
    case 'team_deleting':
      throw new ApiError(409, `${who} was not restored: your team is being deleted.`);
    case 'client_user_id_taken':
      throw badRequest(
        `${who} cannot be restored: a new user${res.holderUserId ? ` (${res.holderUserId})` : ''} now holds client_user_id '${user.client_user_id}'. ` +
          'Delete or rename that user first, then undo again.',
      );
    default:
      throw notFound(`${who} was not found.`);
  }
}
