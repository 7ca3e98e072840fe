import { randomUUID } from 'node:crypto';
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
} from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { ApiError, badRequest, notFound } from '../../lib/errors';
import type { UserDoc } from '../../lib/repositories/users';
import { workflowIds } from '../../workflows/ids';
import {
  undoUserDeletionUpdate,
  USER_DELETION_FAILURES,
  userDeletionWorkflow,
  type UserDeletionInput,
} from '../../workflows/user-deletion';
import type { AppDeps } from '../deps';

export const SCHEDULED_FOR_DELETION = 'The user has been scheduled for deletion as per your previous request.';

/**
 * DELETE /v2/user/{id}: hides the user at once (status precondition), then starts `user-deletion:<id>`,
 * which deregisters connections and erases after the grace period. Starting is idempotent, so a retried
 * DELETE after a crash between the two steps completes the job.
 */
export async function scheduleUserDeletion(deps: AppDeps, teamId: string, userId: string, requestId: string): Promise<void> {
  const { repos, config } = deps;
  const now = new Date();
  const deletion = {
    id: randomUUID(),
    requested_at: now,
    erase_after: new Date(now.getTime() + config.USER_DELETION_GRACE_SECONDS * 1000),
  };
  const marked = await repos.users.markPendingDeletion(teamId, userId, deletion);
  if (marked) {
    await startDeletionWorkflow(deps, marked, requestId);
    return;
  }
  const existing = await repos.users.find(teamId, userId);
  if (existing?.status === 'pending_deletion') {
    await startDeletionWorkflow(deps, existing, requestId);
    throw notFound(SCHEDULED_FOR_DELETION);
  }
  throw notFound('User not found.');
}

async function startDeletionWorkflow(deps: AppDeps, user: UserDoc, requestId: string): Promise<void> {
  const { temporal } = deps;
  const deletion = user.deletion!;
  // A retried DELETE resumes the remaining grace, not a fresh one.
  const graceSeconds = Math.max(0, Math.ceil((deletion.erase_after.getTime() - Date.now()) / 1000));
  const input: UserDeletionInput = { teamId: user.team_id, userId: user._id, deletionId: deletion.id, graceSeconds };
  const workflowId = workflowIds.userDeletion(user._id);
  for (let attempt = 0; ; attempt++) {
    try {
      await temporal.client.workflow.start(userDeletionWorkflow, {
        workflowId,
        taskQueue: temporal.taskQueue,
        args: [input],
        // Not USE_EXISTING: the running workflow may belong to an earlier deletion that was just undone.
        workflowIdConflictPolicy: 'FAIL',
        workflowIdReusePolicy: 'ALLOW_DUPLICATE',
        // Operators can match a workflow in the Temporal UI to the api's request log line.
        memo: { request_id: requestId, team_id: user.team_id, deletion_id: deletion.id },
      });
      return;
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      const handle = temporal.client.workflow.getHandle(workflowId);
      const running = await handle.describe();
      if (running.memo?.deletion_id === deletion.id) return; // this deletion's workflow already runs
      if (attempt >= 2) throw new ApiError(503, 'An earlier deletion of this user is still finishing; retry the request.');
      await withinMs(handle.result(), 10_000);
    }
  }
}

/** Waits for `promise` at most `ms`; its outcome is not needed, only that it is (probably) done. */
async function withinMs(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise.catch(() => undefined), new Promise((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

/** POST /v2/user/undo_delete: restores a user within its grace period (through the workflow). */
export async function undoUserDeletion(
  deps: AppDeps,
  teamId: string,
  by: { user_id?: string; client_user_id?: string },
): Promise<void> {
  const { repos } = deps;
  const user = by.user_id
    ? await repos.users.find(teamId, by.user_id)
    : ((await repos.users.findPendingByClientUserId(teamId, by.client_user_id!)) ??
      (await repos.users.findLatestByClientUserId(teamId, by.client_user_id!)));
  const who = by.user_id ? `User ${by.user_id}` : `The user with client_user_id '${by.client_user_id}'`;
  if (!user) throw notFound(`${who} was not found.`);
  if (user.status === 'active') throw badRequest(`${who} is not scheduled for deletion; nothing to undo.`);
  if (user.status === 'erased' || !user.deletion) {
    throw badRequest(
      `${who} cannot be restored: its grace period ended${user.erased_at ? ` on ${user.erased_at.toISOString()}` : ''} and its data has been erased.`,
    );
  }
  const handle = deps.temporal.client.workflow.getHandle(workflowIds.userDeletion(user._id));
  try {
    await handle.executeUpdate(undoUserDeletionUpdate);
    // The user is already restored; let the run finish so a new DELETE starts a fresh one.
    await withinMs(handle.result(), 10_000);
  } catch (err) {
    throw translateUndoFailure(err, who, user);
  }
}

function translateUndoFailure(err: unknown, who: string, user: UserDoc): Error {
  const cause = err instanceof WorkflowUpdateFailedError ? err.cause : err;
  if (cause instanceof ApplicationFailure) {
    if (cause.type === USER_DELETION_FAILURES.clientUserIdTaken) {
      const holder = cause.details?.[0];
      return badRequest(
        `${who} cannot be restored: a new user${holder ? ` (${holder})` : ''} now holds client_user_id '${user.client_user_id}'. ` +
          'Delete or rename that user first, then undo again.',
      );
    }
    if (cause.type === USER_DELETION_FAILURES.graceEnded) {
      return badRequest(`${who} cannot be restored: its grace period has ended and erasure has started.`);
    }
  }
  if (err instanceof WorkflowNotFoundError) {
    return new ApiError(409, `${who} is pending deletion but its deletion workflow is not running; retry the DELETE to resume it.`);
  }
  if (err instanceof WorkflowUpdateRPCTimeoutOrCancelledError) {
    return new ApiError(503, 'The undo did not complete in time; it is safe to retry.');
  }
  return err as Error;
}
