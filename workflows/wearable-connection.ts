import { ActivityFailure, condition, continueAsNew, defineSignal, patched, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { WearableActivities } from '../activities/wearables';

export interface PullRetryPolicy {
  /** Business retries of a resource whose pull failed retriably (Temporal retries cover our own faults). */
  enabled: boolean;
  initialMs: number;
  maxMs: number;
  /** Attempts per resource, the first included. */
  quota: number;
  /**
   * How long one resource's pull may keep failing on our side (the database or Temporal down, a stalled adapter;
   * Temporal retries those) before it is recorded as failed and the connection goes on, instead of retrying for
   * ever. Absent in inputs of runs started before it existed: an hour.
   */
  giveUpAfterMs?: number;
}

export interface WearableConnectionInput {
  connectionId: string;
  retry: PullRetryPolicy;
  syncIntervalMs: number;
  /** Syncs before continue-as-new (absent in inputs of runs started before it was configurable: 100). */
  syncsPerRun?: number;
  /** `history` on connect; `sync` after continue-as-new. */
  phase: 'history' | 'sync';
}

/** POST /v2/user/refresh/{user_id}: sync now. */
export const refreshConnectionSignal = defineSignal('refreshConnection');
/** Deregistration: stop pulling (the api has already marked the connection deregistered). */
export const stopConnectionSignal = defineSignal('stopConnection');

const activityOptions = {
  startToCloseTimeout: '10 minutes',
  // A pull heartbeats after each run of days it stores (seconds apart): a pull on a worker that died is retried
  // elsewhere this long after its last heartbeat.
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
} as const;
const acts = proxyActivities<WearableActivities>(activityOptions);

const DEFAULT_GIVE_UP_AFTER_MS = 3_600_000;


/**
 * One provider connection (id `wearable-connection:<connectionId>`), the single owner of its pull state:
 * announces the connection, pulls its history resource by resource (scheduled → in_progress → success, or
 * retrying with backoff until the quota, then failure), then syncs new data periodically and on refresh
 * until the connection is deregistered.
 */
export async function wearableConnectionWorkflow(input: WearableConnectionInput): Promise<{ stopped: true }> {
  let refreshRequested = false;
  let stopRequested = false;
  setHandler(refreshConnectionSignal, () => void (refreshRequested = true));
  setHandler(stopConnectionSignal, () => void (stopRequested = true));
  const { connectionId } = input;

  if (input.phase === 'history') {
    const plan = await acts.startHistoricalPull({ connectionId, traceId: workflowInfo().runId });
    if (plan.stopped) return { stopped: true };
    for (const resource of plan.resources) {
      if (stopRequested) return { stopped: true };
      await pullResource(connectionId, resource, input.retry, () => stopRequested);
    }
  }

  for (let syncs = 0; syncs < (input.syncsPerRun ?? 100); syncs++) {
    await condition(() => refreshRequested || stopRequested, input.syncIntervalMs);
    if (stopRequested) return { stopped: true };
    refreshRequested = false;
    const outcome = await acts.syncConnection({ connectionId });
    if (outcome.stopped) return { stopped: true };
    if (workflowInfo().continueAsNewSuggested) break;
  }
  return continueAsNew<typeof wearableConnectionWorkflow>({ ...input, phase: 'sync' });
}

async function pullResource(connectionId: string, resource: string, retry: PullRetryPolicy, stopped: () => boolean): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const retriesLeft = retry.enabled && attempt < retry.quota;
    const request = { connectionId, resource, attempt, retriesLeft, retryingEnabled: retry.enabled };
    let outcome: Awaited<ReturnType<WearableActivities['pullHistoricalResource']>>;
    // Patch `pull-gives-up` (README "Changing a workflow"): runs started before it retry for ever.
    if (patched('pull-gives-up')) {
      const bounded = proxyActivities<WearableActivities>({ ...activityOptions, scheduleToCloseTimeout: retry.giveUpAfterMs ?? DEFAULT_GIVE_UP_AFTER_MS });
      try {
        outcome = await bounded.pullHistoricalResource(request);
      } catch (err) {
        if (!(err instanceof ActivityFailure)) throw err;
        await acts.giveUpHistoricalPull({ connectionId, resource, message: err.cause?.message ?? err.message });
        return;
      }
    } else {
      outcome = await acts.pullHistoricalResource(request);
    }
    if (outcome !== 'retrying') return;
    const waitMs = Math.min(retry.initialMs * 2 ** (attempt - 1), retry.maxMs);
    if (await condition(stopped, waitMs)) return;
  }
}
