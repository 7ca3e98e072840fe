import {
  ActivityCancellationType,
  ActivityFailure,
  CancellationScope,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  isCancellation,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { PageOutcome, WearableActivities } from '../activities/wearables';
import type { PageCursor } from '../lib/wearables/providers/contract';

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

/** What the configuration says about a connection's pulls and syncs (read through an activity, never carried in input). */
export interface ConnectionSettings {
  retry: PullRetryPolicy;
  syncIntervalMs: number;
  /** Syncs before continue-as-new. */
  syncsPerRun: number;
}

export interface WearableConnectionInput {
  connectionId: string;
  /** `history` on connect; `sync` after continue-as-new. */
  phase: 'history' | 'sync';
  /** A refresh asked for in the run before (carried through continue-as-new, so it is not lost). */
  refreshRequested?: boolean;
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
  let refreshRequested = input.refreshRequested ?? false;
  let stopRequested = false;
  setHandler(refreshConnectionSignal, () => void (refreshRequested = true));
  setHandler(stopConnectionSignal, () => void (stopRequested = true));
  const { connectionId } = input;

  const stopped = () => stopRequested;
  // A stopped real connection's access is revoked at the provider.
  const end = async (): Promise<{ stopped: true }> => {
    await acts.revokeProviderAccess({ connectionId });
    return { stopped: true };
  };

  // Settings come from the configuration as it is now, at the start of each run and before each sync.
  let settings = await acts.connectionSettings({ connectionId });
  if (input.phase === 'history') {
    const plan = await acts.startHistoricalPull({ connectionId, traceId: workflowInfo().runId });
    if (plan.stopped) return end();
    for (const resource of plan.resources) {
      if (stopRequested) return end();
      if (plan.pages) await pullResourcePages(connectionId, plan.pages.taskQueue, resource, settings.retry, stopped);
      else await pullResource(connectionId, resource, settings.retry, stopped);
    }
  }

  for (let syncs = 0; syncs < settings.syncsPerRun; syncs++) {
    if (syncs > 0) settings = await acts.connectionSettings({ connectionId });
    await condition(() => refreshRequested || stopRequested, settings.syncIntervalMs);
    if (stopRequested) return end();
    refreshRequested = false;
    const outcome = await acts.syncConnection({ connectionId });
    if (outcome.stopped) return end();
    for (const resource of outcome.pages?.resources ?? []) {
      if (stopRequested) return end();
      await followPages(outcome.pages!.taskQueue, stopped, (cursor) => ({ connectionId, resource, cursor }));
    }
    if (workflowInfo().continueAsNewSuggested) break;
  }
  // A stop or refresh that came in during the last sync is acted on, not left behind with this run.
  if (stopRequested) return end();
  return continueAsNew<typeof wearableConnectionWorkflow>({ connectionId, phase: 'sync', refreshRequested });
}

/**
 * Page activities of a real provider, on its own task queue (each request drawing from its app's budget). A
 * cancelled page is waited for until the server confirms it: one still queued ends at once, one running finishes.
 */
const pageActivities = (taskQueue: string, scheduleToCloseMs?: number) =>
  proxyActivities<WearableActivities>({
    startToCloseTimeout: '2 minutes',
    ...(scheduleToCloseMs ? { scheduleToCloseTimeout: scheduleToCloseMs } : {}),
    taskQueue,
    retry: activityOptions.retry,
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });

const never = () => false;

/**
 * One page activity of a connection that a stop may end. A page can wait a long time for its app's budget (Strava's:
 * about one read every ~10 s for the whole app), so with many users a page can wait for minutes: a stop cancels
 * it in the queue, and the connection revokes its access without waiting its turn. A page already running finishes
 * first (pageActivities), so nothing is fetched or stored after the workflow moved on.
 */
async function pageUnlessStopped<T>(stopped: () => boolean, page: () => Promise<T>): Promise<T | 'stopped'> {
  const pageScope = new CancellationScope();
  const watch = new CancellationScope();
  const running = pageScope.run(page);
  watch
    .run(() => condition(stopped))
    .then(
      () => pageScope.cancel(),
      () => undefined, // the page ended first: its watch was cancelled
    );
  try {
    return await running;
  } catch (err) {
    if (isCancellation(err) && stopped()) return 'stopped';
    throw err;
  } finally {
    watch.cancel();
  }
}

/**
 * A real provider's history of one resource, one provider request per activity: pages follow their cursor; a 429 waits
 * (a workflow timer) until the time the provider named and asks the same page again; a retriable failure retries the
 * same page with backoff until the quota; a failure on our side that outlasts giveUpAfterMs ends the resource.
 */
async function pullResourcePages(connectionId: string, taskQueue: string, resource: string, retry: PullRetryPolicy, stopped: () => boolean): Promise<void> {
  const pages = pageActivities(taskQueue, retry.giveUpAfterMs ?? DEFAULT_GIVE_UP_AFTER_MS);
  let cursor: PageCursor | null = null;
  for (let attempt = 1; ; ) {
    const retriesLeft = retry.enabled && attempt < retry.quota;
    let outcome: Awaited<ReturnType<WearableActivities['pullHistoricalPage']>>;
    try {
      const result = await pageUnlessStopped(stopped, () =>
        pages.pullHistoricalPage({ connectionId, resource, cursor, attempt, retriesLeft, retryingEnabled: retry.enabled }),
      );
      if (result === 'stopped') return;
      outcome = result;
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err;
      await acts.giveUpHistoricalPull({ connectionId, resource, message: err.cause?.message ?? err.message });
      return;
    }
    if (outcome === 'failure') return;
    if (outcome === 'retrying') {
      if (await condition(stopped, Math.min(retry.initialMs * 2 ** (attempt - 1), retry.maxMs))) return;
      attempt++;
      continue;
    }
    if (outcome.status === 'page') cursor = outcome.next;
    else if (outcome.status === 'rate_limited') {
      if (await condition(stopped, Math.max(outcome.waitMs, 1))) return;
    } else return;
  }
}

/** Follows a sync's pages (a stop ends it) or a push's (`stopped` null) to the end; a 429 waits until the time the provider named. */
async function followPages(
  taskQueue: string,
  stopped: (() => boolean) | null,
  request: (cursor: PageCursor | null) => Parameters<WearableActivities['syncPage']>[0],
): Promise<void> {
  const pages = pageActivities(taskQueue);
  let cursor: PageCursor | null = null;
  for (;;) {
    const outcome: PageOutcome | 'stopped' = stopped
      ? await pageUnlessStopped(stopped, () => pages.syncPage(request(cursor)))
      : await pages.syncPage(request(cursor));
    if (outcome === 'stopped') return;
    if (outcome.status === 'page') cursor = outcome.next;
    else if (outcome.status === 'rate_limited') {
      if (await condition(stopped ?? never, Math.max(outcome.waitMs, 1))) return;
    } else return;
  }
}

/** What one push names: an object by the provider's id, or a window of days, of one pull unit. */
export interface PushedItem {
  resource: string;
  objectId?: string;
  window?: { startDate: string; endDate: string };
}

export interface ProviderPushInput extends PushedItem {
  connectionId: string;
  taskQueue: string;
}

/**
 * What a signed push named (id `provider-push:<provider>:<notification>`, so the same notification twice fetches
 * once): the object by its id, or the window's pages, stored and announced as `daily.data.*`.
 */
export async function providerPushWorkflow(input: ProviderPushInput): Promise<void> {
  await fetchPushed(input.connectionId, input.taskQueue, input);
}

async function fetchPushed(connectionId: string, taskQueue: string, item: PushedItem): Promise<void> {
  if (item.objectId) {
    const pages = pageActivities(taskQueue);
    for (;;) {
      const outcome: PageOutcome = await pages.fetchPushedObject({ connectionId, resource: item.resource, objectId: item.objectId });
      if (outcome.status !== 'rate_limited') return;
      await condition(never, Math.max(outcome.waitMs, 1));
    }
  }
  await followPages(taskQueue, null, (cursor) => ({ connectionId, resource: item.resource, cursor, window: item.window }));
}

/** An unsigned push's hint: fetch what it names, or confirm that the user removed our access (`from`: the sender). */
export type PushHint = (({ kind: 'data' } & PushedItem) | { kind: 'deauthorized'; from?: string }) & {
  /** The notification's own id (a provider's retry repeats it): the same one twice is acted on once. */
  dedupeKey: string;
};

export const pushHintSignal = defineSignal<[PushHint]>('pushHint');
/** What the hints workflow holds: hints waiting, and hints acted on in this run and the runs it continued. */
export const pushHintsStateQuery = defineQuery<{ pending: number; handled: number }>('pushHintsState');

export interface ProviderHintsInput {
  connectionId: string;
  taskQueue: string;
  /** What the run before carried into continue-as-new. */
  carried?: { pending: [string, PushHint][]; seen: string[]; handled: number };
}

/** Distinct objects waiting at once per connection; more are dropped (the next sync fetches what they named). */
const MAX_PENDING_HINTS = 50;
/** Notification ids remembered, so a provider's retry of one already acted on is not acted on again. */
const SEEN_HINTS = 500;
/** How long the workflow waits for more hints before it ends (a provider retries a notification within minutes). */
const HINTS_LINGER_MS = 15 * 60_000;

/**
 * The unsigned pushes of one connection (Withings, Strava; id `provider-hints:<connectionId>`, started or signalled
 * with signal-with-start). Nothing proves who sent them, so they are hints, acted on one at a time and coalesced: a
 * data notification seen before is dropped, the same object twice waits once, windows of one resource merge into one, a
 * deauthorization waits once, and at most MAX_PENDING_HINTS objects wait, so a flood costs the app's budget one
 * request at a time, not one per forged post. A deauthorization is confirmed with the provider's API under the user's
 * token before the connection ends (activities/provider-pages.ts confirmDeauthorization).
 */
export async function providerHintsWorkflow(input: ProviderHintsInput): Promise<void> {
  const pending = new Map<string, PushHint>(input.carried?.pending ?? []);
  const seen = new Set<string>(input.carried?.seen ?? []);
  let handled = input.carried?.handled ?? 0;
  const add = (hint: PushHint) => {
    // A deauthorization is checked again each time it comes (a forged one may have come first), once while it waits.
    if (hint.kind === 'deauthorized') {
      if (!pending.has('deauthorized')) pending.set('deauthorized', hint);
      return;
    }
    if (seen.has(hint.dedupeKey)) return;
    seen.add(hint.dedupeKey);
    if (seen.size > SEEN_HINTS) seen.delete(seen.values().next().value!);
    if (hint.window) {
      const key = `${hint.resource}:window`;
      const was = pending.get(key);
      const merged =
        was?.kind === 'data' && was.window
          ? { startDate: minDate(was.window.startDate, hint.window.startDate), endDate: maxDate(was.window.endDate, hint.window.endDate) }
          : hint.window;
      pending.set(key, { ...hint, window: merged });
      return;
    }
    const key = `${hint.resource}:${hint.objectId ?? ''}`;
    if (!pending.has(key) && pending.size < MAX_PENDING_HINTS) pending.set(key, hint);
  };
  setHandler(pushHintSignal, add);
  setHandler(pushHintsStateQuery, () => ({ pending: pending.size, handled }));
  const pages = pageActivities(input.taskQueue);
  while (await condition(() => pending.size > 0, HINTS_LINGER_MS)) {
    // A deauthorization goes first: fetching for a user who removed our access is wasted.
    const key = pending.has('deauthorized') ? 'deauthorized' : pending.keys().next().value!;
    const hint = pending.get(key)!;
    pending.delete(key);
    if (hint.kind === 'data') await fetchPushed(input.connectionId, input.taskQueue, hint);
    else {
      for (;;) {
        const outcome = await pages.confirmDeauthorization({ connectionId: input.connectionId, from: hint.from });
        if (outcome.status !== 'rate_limited') break;
        await condition(never, Math.max(outcome.waitMs, 1));
      }
    }
    handled++;
    if (workflowInfo().continueAsNewSuggested) {
      return continueAsNew<typeof providerHintsWorkflow>({ ...input, carried: { pending: [...pending.entries()], seen: [...seen], handled } });
    }
  }
}

const minDate = (a: string, b: string) => (a < b ? a : b);
const maxDate = (a: string, b: string) => (a > b ? a : b);

async function pullResource(connectionId: string, resource: string, retry: PullRetryPolicy, stopped: () => boolean): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const retriesLeft = retry.enabled && attempt < retry.quota;
    const request = { connectionId, resource, attempt, retriesLeft, retryingEnabled: retry.enabled };
    let outcome: Awaited<ReturnType<WearableActivities['pullHistoricalResource']>>;
    const bounded = proxyActivities<WearableActivities>({ ...activityOptions, scheduleToCloseTimeout: retry.giveUpAfterMs ?? DEFAULT_GIVE_UP_AFTER_MS });
    try {
      outcome = await bounded.pullHistoricalResource(request);
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err;
      await acts.giveUpHistoricalPull({ connectionId, resource, message: err.cause?.message ?? err.message });
      return;
    }
    if (outcome !== 'retrying') return;
    const waitMs = Math.min(retry.initialMs * 2 ** (attempt - 1), retry.maxMs);
    if (await condition(stopped, waitMs)) return;
  }
}
