import { allHandlersFinished, condition, defineQuery, defineUpdate, log, proxyActivities, proxyLocalActivities, setHandler, uuid4 } from '@temporalio/workflow';
import type { RestoreResult, UserDeletionActivities } from '../activities/user-deletion';

export interface UserDeletionInput {
  teamId: string;
  userId: string;
}

/**
 * `active`: the user is visible (never deleted in this run, or restored); `grace`: hidden, restorable;
 * `restoring`: an undo is being applied; `erasing` / `erased`: past the grace period; `missing`: no such user.
 */
export type UserDeletionPhase = 'loading' | 'active' | 'grace' | 'restoring' | 'erasing' | 'erased' | 'missing';
export interface UserDeletionResult {
  outcome: 'restored' | 'erased' | 'untouched';
  erased?: Record<string, number>;
}

export interface RequestDeletionInput {
  /** The grace period of the api that took the request (USER_DELETION_GRACE_SECONDS). */
  graceSeconds: number;
  requestId: string;
}
export type RequestDeletionOutcome = { outcome: 'scheduled' | 'already_scheduled' | 'not_found' };
export type UndoDeletionOutcome =
  | { outcome: 'restored' | 'not_scheduled' | 'erased' | 'not_found' | 'team_deleting' }
  | { outcome: 'client_user_id_taken'; holderUserId: string | null };

/** DELETE /v2/user/{id}: hide the user and start the grace period, unless already done. */
export const requestUserDeletionUpdate = defineUpdate<RequestDeletionOutcome, [RequestDeletionInput]>('requestUserDeletion');
/** POST /v2/user/undo_delete: restore within the grace period. */
export const undoUserDeletionUpdate = defineUpdate<UndoDeletionOutcome, []>('undoUserDeletion');
export const userDeletionPhaseQuery = defineQuery<UserDeletionPhase>('userDeletionPhase');
/** The deletion this run owns (its id is what the user document carries while pending). */
export const userDeletionStateQuery = defineQuery<{ phase: UserDeletionPhase; deletionId: string | null; eraseAfter: string | null }>('userDeletionState');

// The writes of the user document are activities, not local activities: Temporal schedules each one from a
// command it has recorded, so no write can come from a workflow task that was then lost. A local activity's can:
// its worker may write and die before the task completes, and the next worker, replaying the history, runs the
// handlers again over what the lost task wrote (CI saw it: an undo replayed after a DELETE the lost task had
// already applied found a deletion it did not know, and the user was left pending out of the workflow's reach).
// Idempotent by deletion id; retried on our faults.
const stateOptions = {
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 5 },
} as const;
const { markUserPendingDeletion, restoreDeletedUser } = proxyActivities<UserDeletionActivities>(stateOptions);
// The run's first step, a read, stays local: it comes before any write of the run, so a replay reads what a lost
// task read.
const { loadUserDeletionState } = proxyLocalActivities<UserDeletionActivities>(stateOptions);
const { deregisterUserConnections, listUserDataDomains, eraseUserDataDomain } = proxyActivities<UserDeletionActivities>({
  startToCloseTimeout: '1 minute',
  // Our own transient faults only (database hiccups); business outcomes come back as values.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});
// Erasure is past the point of no return: its final write keeps trying.
const erasedOptions = {
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
} as const;
const { markUserErased } = proxyActivities<UserDeletionActivities>(erasedOptions);

/**
 * The single owner of a user's deletion state (id `user-deletion:<userId>`). The api never writes the
 * deletion itself: DELETE and undo reach this workflow as Updates (update-with-start), which it applies one
 * at a time, so racing requests are ordered here and the user document always carries the deletion this
 * run is timing. A run adopts whatever state the document has when it starts, waits out the grace period
 * on a Temporal timer, then erases every registered data domain and leaves a tombstone. It ends once the
 * user is visible again (restored) and no request is in flight, or after erasure; a request that arrives
 * later starts a new run.
 */
export async function userDeletionWorkflow(input: UserDeletionInput): Promise<UserDeletionResult> {
  const { teamId, userId } = input;
  let phase = 'loading' as UserDeletionPhase;
  let deletion: { id: string; eraseAfterMs: number; deregistered: boolean } | null = null;
  let restoredOnce = false;

  // One state change at a time; the initial load goes first.
  let chain: Promise<unknown> = Promise.resolve();
  const serialized = <T>(step: () => Promise<T>): Promise<T> => {
    const next = chain.then(step);
    chain = next.catch(() => undefined);
    return next;
  };

  const loaded = serialized(async () => {
    const current = await loadUserDeletionState({ teamId, userId });
    if (current.status === 'active') phase = 'active';
    else if (current.status === 'pending_deletion') {
      // Left pending by an earlier run or release: this run times the same deletion.
      phase = 'grace';
      deletion = { id: current.deletion.id, eraseAfterMs: current.deletion.eraseAfterMs, deregistered: false };
    } else if (current.status === 'erased') phase = 'erased';
    else phase = 'missing';
  });

  setHandler(userDeletionPhaseQuery, () => phase);
  setHandler(userDeletionStateQuery, () => ({
    phase,
    deletionId: deletion?.id ?? null,
    eraseAfter: deletion ? new Date(deletion.eraseAfterMs).toISOString() : null,
  }));

  setHandler(requestUserDeletionUpdate, ({ graceSeconds, requestId }) =>
    serialized(async (): Promise<RequestDeletionOutcome> => {
      if (phase === 'grace' || phase === 'restoring' || phase === 'erasing') return { outcome: 'already_scheduled' };
      if (phase !== 'active') return { outcome: 'not_found' };
      const now = new Date().getTime(); // workflow time here (deterministic on replay)
      const next = { id: uuid4(), requestedAtMs: now, eraseAfterMs: now + graceSeconds * 1000 };
      const res = await markUserPendingDeletion({ teamId, userId, deletion: next });
      if (res.outcome !== 'marked') {
        // Only this workflow changes the deletion state, so this means the user was removed by other means.
        phase = 'missing';
        return { outcome: 'not_found' };
      }
      deletion = { id: next.id, eraseAfterMs: next.eraseAfterMs, deregistered: false };
      phase = 'grace';
      log.info('user deletion scheduled', { userId, deletionId: next.id, requestId });
      return { outcome: 'scheduled' };
    }),
  );

  setHandler(undoUserDeletionUpdate, () =>
    serialized(async (): Promise<UndoDeletionOutcome> => {
      if (phase === 'active') return { outcome: 'not_scheduled' };
      if (phase === 'erasing' || phase === 'erased') return { outcome: 'erased' };
      if (phase !== 'grace' || !deletion) return { outcome: 'not_found' };
      phase = 'restoring';
      let res: RestoreResult;
      try {
        res = await restoreDeletedUser({ teamId, userId, deletionId: deletion.id });
      } catch (err) {
        phase = 'grace';
        throw err;
      }
      if (res.outcome === 'restored') {
        phase = 'active';
        deletion = null;
        restoredOnce = true;
        log.info('user deletion undone', { userId });
        return { outcome: 'restored' };
      }
      phase = 'grace';
      if (res.outcome === 'client_user_id_taken') return { outcome: 'client_user_id_taken', holderUserId: res.holderUserId };
      if (res.outcome === 'team_deleting') return { outcome: 'team_deleting' };
      return { outcome: 'not_found' };
    }),
  );

  await loaded;
  for (;;) {
    if (phase === 'grace' && deletion) {
      const current: { id: string; eraseAfterMs: number; deregistered: boolean } = deletion;
      if (!current.deregistered) {
        await serialized(async () => {
          // Skipped if an undo came first; connections are not restored by an undo either way.
          if (deletion === current && phase === 'grace') await deregisterUserConnections({ teamId, userId });
        });
        current.deregistered = true;
        continue;
      }
      const left = current.eraseAfterMs - new Date().getTime(); // workflow time
      if (left > 0 && (await condition(() => phase !== 'grace', left))) continue;
      // Grace over: erasure begins unless an undo got in first (its outcome decides).
      const erase = await serialized(async () => {
        if (phase !== 'grace' || deletion !== current) return false;
        phase = 'erasing';
        return true;
      });
      if (!erase) continue;
      const erased: Record<string, number> = {};
      for (const domain of await listUserDataDomains()) {
        erased[domain] = await eraseUserDataDomain({ teamId, userId, domain });
      }
      await markUserErased({ teamId, userId, deletionId: current.id });
      phase = 'erased';
      log.info('user data erased', { userId, erased });
      await condition(allHandlersFinished);
      return { outcome: 'erased', erased };
    }
    if (phase === 'restoring') {
      await condition(() => phase !== 'restoring');
      continue;
    }
    // Nothing to time (visible, erased or unknown user): finish once no request is being handled. A request
    // arriving after that is answered by a new run (the server retries an update-with-start that a closing
    // run did not accept).
    await condition(() => allHandlersFinished() || phase === 'grace');
    if (phase !== 'grace') break;
  }
  return { outcome: restoredOnce ? 'restored' : 'untouched' };
}
