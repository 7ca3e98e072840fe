import {
  ApplicationFailure,
  condition,
  defineQuery,
  defineUpdate,
  log,
  proxyActivities,
  setHandler,
} from '@temporalio/workflow';
import type { UserDeletionActivities } from '../activities/user-deletion';

export interface UserDeletionInput {
  teamId: string;
  userId: string;
  /** Identifies this deletion request; undo and erasure act only on the user state it created. */
  deletionId: string;
  graceSeconds: number;
}

export type UserDeletionPhase = 'grace' | 'restoring' | 'restored' | 'erasing' | 'erased';
export interface UserDeletionResult {
  outcome: 'restored' | 'erased';
  erased?: Record<string, number>;
}

/** Undo within the grace period. Rejected (not queued) once erasure has begun. */
export const undoUserDeletionUpdate = defineUpdate<{ restored: true }>('undoUserDeletion');
export const userDeletionPhaseQuery = defineQuery<UserDeletionPhase>('userDeletionPhase');

export const USER_DELETION_FAILURES = {
  graceEnded: 'UserDeletionGraceEnded',
  clientUserIdTaken: 'ClientUserIdTaken',
} as const;

const { deregisterUserConnections, listUserDataDomains, eraseUserDataDomain, markUserErased } =
  proxyActivities<UserDeletionActivities>({
    startToCloseTimeout: '1 minute',
    // Our own transient faults only (database hiccups); business outcomes come back as values.
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
  });
// An undo has a caller waiting on the other end: give up after a few tries instead of hanging it.
const { restoreDeletedUser } = proxyActivities<UserDeletionActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', maximumAttempts: 5 },
});

/**
 * One deletion of one user (id `user-deletion:<userId>`): deregister connections at once, wait out the
 * grace period (a Temporal timer), then erase every registered data domain and leave a tombstone.
 */
export async function userDeletionWorkflow(input: UserDeletionInput): Promise<UserDeletionResult> {
  const { teamId, userId, deletionId } = input;
  let phase = 'grace' as UserDeletionPhase;

  setHandler(userDeletionPhaseQuery, () => phase);
  setHandler(
    undoUserDeletionUpdate,
    async () => {
      phase = 'restoring';
      let outcome;
      try {
        outcome = await restoreDeletedUser({ teamId, userId, deletionId });
      } catch (err) {
        phase = 'grace';
        throw err;
      }
      if (outcome.outcome === 'restored') {
        phase = 'restored';
        return { restored: true as const };
      }
      phase = 'grace';
      if (outcome.outcome === 'client_user_id_taken') {
        throw ApplicationFailure.create({
          type: USER_DELETION_FAILURES.clientUserIdTaken,
          message: `client_user_id is now held by user ${outcome.holderUserId ?? 'another user'}`,
          details: [outcome.holderUserId],
          nonRetryable: true,
        });
      }
      throw ApplicationFailure.create({ type: USER_DELETION_FAILURES.graceEnded, message: 'The user is no longer restorable', nonRetryable: true });
    },
    {
      validator: () => {
        if (phase !== 'grace') {
          throw ApplicationFailure.create({
            type: USER_DELETION_FAILURES.graceEnded,
            message: `Deletion can no longer be undone (phase: ${phase})`,
            nonRetryable: true,
          });
        }
      },
    },
  );

  await deregisterUserConnections({ teamId, userId });

  const restored = await condition(() => phase === 'restored', input.graceSeconds * 1000);
  if (!restored) {
    // The timer may fire while an undo is mid-flight; its outcome decides.
    await condition(() => phase !== 'restoring');
  }
  if (phase === 'restored') {
    log.info('user deletion undone', { userId });
    return { outcome: 'restored' };
  }

  phase = 'erasing';
  const erased: Record<string, number> = {};
  for (const domain of await listUserDataDomains()) {
    erased[domain] = await eraseUserDataDomain({ teamId, userId, domain });
  }
  await markUserErased({ teamId, userId, deletionId });
  phase = 'erased';
  log.info('user data erased', { userId, erased });
  return { outcome: 'erased', erased };
}
