import { ApplicationFailure, Context } from '@temporalio/activity';
import type { HistoricalPullDoc } from '../lib/wearables/historical-pulls-store';
import { historicalPullId } from '../lib/wearables/historical-pulls-store';
import { addDays } from '../lib/platform/time';
import { ProviderFetchError } from '../lib/wearables/adapters';
import type { ProviderData } from '../lib/wearables/model';
import { RateLimitedError, type PageCursor, type PullWindow } from '../lib/wearables/providers/contract';
import { integrationFor } from '../lib/wearables/providers/registry';
import { appOfConnection, connectionContext, providerTaskQueue } from '../lib/wearables/providers/runtime';
import { ensureSubscriptions, subscribeUser, type SubscriptionOutcome } from '../lib/wearables/providers/subscriptions';
import { deregisterConnection } from '../lib/wearables/workflow-client';
import { attemptScheduledAt, type Live, type WearableActivityDeps } from './wearables';

type Stats = { days: Set<string>; sent: number; oldest: Date | null; newest: Date | null };

/** What the page activities share with the connection's other activities (activities/wearables.ts). */
export interface PageKit {
  live(connectionId: string): Promise<Live | null>;
  userClock(user: Live['user']): { now: Date; offset: number; today: string };
  withStats(l: Live, doc: HistoricalPullDoc, got: Stats, ok: boolean): HistoricalPullDoc;
  storePage(l: Live, data: ProviderData, announce: boolean): Promise<Stats>;
  publishConnectionError(l: Live, err: ProviderFetchError): Promise<void>;
  publishHistoricalDone(l: Live, resource: string, doc: HistoricalPullDoc): Promise<void>;
  recordPullFailure(
    l: Live,
    started: HistoricalPullDoc,
    input: { resource: string; attempt: number; retriesLeft: boolean; retryingEnabled: boolean },
    err: ProviderFetchError,
  ): Promise<'retrying' | 'failure'>;
}

/**
 * The activities of a real provider's connection (lib/wearables/providers/<slug>/), each one provider request: they run
 * on the provider's own task queue, each request drawing from its app's budget first (providers/budget.ts), and are
 * driven page by page by workflows/wearable-connection.ts. Also: revoking access when a connection ends, and the
 * providers' push subscriptions.
 */
export function createProviderPageActivities(deps: WearableActivityDeps, kit: PageKit) {
  const { repos } = deps;
  const { live, userClock, withStats, storePage, publishConnectionError, publishHistoricalDone, recordPullFailure } = kit;

  /** The task queue a real provider's page activities run on (worker/worker.ts createProviderWorkers). */
  function plan(l: Live): PagedPlan | undefined {
    return l.adapter.integration
      ? { taskQueue: providerTaskQueue(deps.config.TEMPORAL_TASK_QUEUE, l.adapter.slug), resources: l.adapter.resources }
      : undefined;
  }

  /** The connection's provider calls: its app (team's or deployment's), its tokens kept fresh, the app's rate block. */
  async function callContext(l: Live) {
    const integration = l.adapter.integration!;
    const app = await appOfConnection(deps, l.connection);
    if (!app)
      throw new ProviderFetchError(
        'provider_credential_error',
        `The ${integration.slug} OAuth app this connection was made with is no longer configured (team custom credentials or PROVIDER_${integration.slug.toUpperCase()}_CLIENT_ID); reconnect the user.`,
      );
    const tokens = await repos.providerAuth.get(l.connection._id);
    return connectionContext(deps, integration, app, l.connection, tokens?.extras ?? {});
  }

  /** A provider that subscribes per user (Withings) is told to push this user's changes; a failure only costs pushes (syncs go on). */
  async function subscribeToPushes(l: Live): Promise<void> {
    try {
      await subscribeUser(deps, await callContext(l), l.connection.provider);
    } catch (err) {
      if (!(err instanceof ProviderFetchError) && !(err instanceof RateLimitedError)) throw err;
      deps.logger.warn(
        { connectionId: l.connection._id, provider: l.connection.provider, err: err.message },
        'push subscription for the user failed; syncs still fetch their data',
      );
    }
  }

  async function fetchAndAnnounce(l: Live, resource: string, fetchPage: () => Promise<{ data: ProviderData; next: PageCursor | null }>): Promise<PageOutcome> {
    try {
      const page = await fetchPage();
      await storePage(l, page.data, true);
      return page.next ? { status: 'page', next: page.next } : { status: 'done' };
    } catch (err) {
      if (err instanceof RateLimitedError) return { status: 'rate_limited', waitMs: Math.max(0, err.retryAt.getTime() - Date.now()) };
      if (!(err instanceof ProviderFetchError)) throw err;
      if (err.breaksConnection) await publishConnectionError(l, err);
      deps.logger.warn({ connectionId: l.connection._id, resource, errorType: err.errorType }, 'provider fetch failed; the next sync tries again');
      return { status: 'failed' };
    }
  }

  return {
    plan,
    subscribeToPushes,
    activities: {
      /**
       * One page of a real provider's history pull of one resource: the first call (no cursor) starts the attempt over
       * the window the plan scheduled; each call sends one request to the provider (and a token refresh when one is due),
       * stores what came back and says where to go next. A spent budget (a day's quota) or a 429 is a wait, not a
       * failure: the pull shows `retrying` with `provider_rate_limit_exceeded` and why (`error_message`), and the workflow
       * sleeps until the reset (every worker of the app waits until then, providers/http.ts).
       */
      async pullHistoricalPage(input: {
        connectionId: string;
        resource: string;
        cursor: PageCursor | null;
        attempt: number;
        retriesLeft: boolean;
        retryingEnabled: boolean;
      }): Promise<PageOutcome | 'retrying' | 'failure'> {
        const l = await live(input.connectionId);
        if (!l?.adapter.integration) return { status: 'stopped' };
        const integration = l.adapter.integration;
        const { connection, user } = l;
        const id = historicalPullId(connection.team_id, user._id, connection.provider, input.resource);
        const scheduled = await repos.historicalPulls.get(id);
        if (!scheduled || scheduled.connection_id !== connection._id) return { status: 'stopped' };
        const { offset } = userClock(user);
        let doc: HistoricalPullDoc = {
          ...scheduled,
          status: 'in_progress',
          attempts: input.attempt,
          timeline: { ...scheduled.timeline, started_at: scheduled.timeline.started_at ?? new Date() },
          updated_at: new Date(),
        };
        const finish = async (): Promise<PageOutcome> => {
          await repos.historicalPulls.save(attemptScheduledAt(), {
            ...doc,
            status: 'success',
            error_details: null,
            timeline: { ...doc.timeline, ended_at: new Date() },
          });
          await publishHistoricalDone(l, input.resource, doc);
          return { status: 'done' };
        };
        let cursor = input.cursor;
        if (!cursor) {
          const days = doc.days_requested;
          cursor = days.length ? integration.firstPage(input.resource, pullWindow(days[0], days[days.length - 1], offset)) : null;
          if (!cursor) return finish();
        }
        try {
          const page = await integration.fetchPage(await callContext(l), input.resource, cursor);
          const got = await storePage(l, page.data, false);
          doc = withStats(l, doc, got, true);
          if (!page.next) return await finish();
          await repos.historicalPulls.save(attemptScheduledAt(), { ...doc, error_details: null });
          return { status: 'page', next: page.next };
        } catch (err) {
          if (err instanceof RateLimitedError) {
            const waitMs = Math.max(0, err.retryAt.getTime() - Date.now());
            await repos.historicalPulls.save(attemptScheduledAt(), {
              ...doc,
              status: 'retrying',
              error_details: { error_type: 'provider_rate_limit_exceeded', error_message: err.message, errored_at: new Date() },
            });
            deps.logger.info({ connectionId: connection._id, resource: input.resource, waitMs }, 'provider rate limit: waiting before the next page');
            return { status: 'rate_limited', waitMs };
          }
          if (!(err instanceof ProviderFetchError)) throw err;
          return (await recordPullFailure(l, doc, input, err)) as 'retrying' | 'failure';
        }
      },

      /**
       * One page of a real provider's sync (`purpose: sync`, yesterday and today) or of a push's window (`purpose: push`):
       * stores and announces what is new or revised (`daily.data.*`). A failure is logged (and breaks the connection when
       * it is a credential failure); the next sync tries again.
       */
      async syncPage(input: {
        connectionId: string;
        resource: string;
        cursor: PageCursor | null;
        window?: { startDate: string; endDate: string };
      }): Promise<PageOutcome> {
        const l = await live(input.connectionId);
        if (!l?.adapter.integration) return { status: 'stopped' };
        const integration = l.adapter.integration;
        const { offset, today } = userClock(l.user);
        const window = input.window ?? { startDate: addDays(today, -1), endDate: today };
        const cursor = input.cursor ?? integration.firstPage(input.resource, pullWindow(window.startDate, window.endDate, offset));
        if (!cursor) return { status: 'done' };
        return fetchAndAnnounce(l, input.resource, async () => integration.fetchPage(await callContext(l), input.resource, cursor));
      },

      /** A pushed object fetched by its id (WHOOP, Strava, Oura name objects), stored and announced once. */
      async fetchPushedObject(input: { connectionId: string; resource: string; objectId: string }): Promise<PageOutcome> {
        const l = await live(input.connectionId);
        const integration = l?.adapter.integration;
        if (!l || !integration?.fetchObject) return { status: 'stopped' };
        const { offset } = userClock(l.user);
        return fetchAndAnnounce(l, input.resource, async () => ({
          data: await integration.fetchObject!(await callContext(l), input.resource, input.objectId, offset),
          next: null,
        }));
      },

      /**
       * An unsigned push said the user removed our access (Withings `unlink`, Strava `authorized=false`): a hint, never
       * an instruction. The provider is asked with the user's token (ProviderIntegration.confirmAccess): a revoked grant
       * (401 / `invalid_token`, then a refused refresh) ends the connection with `deregistered_per_provider`; a grant
       * that still answers means the notification was forged or stale, and it is logged with its sender and ignored.
       */
      async confirmDeauthorization(input: { connectionId: string; from?: string }): Promise<PageOutcome> {
        const l = await live(input.connectionId);
        const integration = l?.adapter.integration;
        if (!l || !integration) return { status: 'stopped' };
        const slug = integration.slug;
        try {
          if (!integration.confirmAccess) throw new Error(`${slug} has unsigned deauthorizations but no confirmAccess`);
          await integration.confirmAccess(await callContext(l));
        } catch (err) {
          if (err instanceof RateLimitedError) return { status: 'rate_limited', waitMs: Math.max(0, err.retryAt.getTime() - Date.now()) };
          if (!(err instanceof ProviderFetchError)) throw err;
          if (err.errorType === 'token_refresh_failed' || err.errorType === 'provider_credential_error') {
            deps.logger.info(
              { connectionId: l.connection._id, provider: slug, from: input.from },
              'deauthorization confirmed: the provider refuses our grant; the connection ends',
            );
            await publishConnectionError(l, new ProviderFetchError('deregistered_per_provider', `The user removed access at ${slug}.`));
            await deregisterConnection(deps, l.connection);
            return { status: 'done' };
          }
          if (err.retriable) throw ApplicationFailure.retryable(err.message, 'ProviderUnavailable');
          deps.logger.warn(
            { connectionId: l.connection._id, provider: slug, from: input.from, err: err.message },
            'deauthorization could not be confirmed (the provider answered neither yes nor no); the connection stays',
          );
          return { status: 'failed' };
        }
        deps.logger.warn(
          { connectionId: l.connection._id, provider: slug, from: input.from },
          'deauthorization NOT confirmed: the provider still accepts our grant for this user; the notification (forged or stale) was ignored',
        );
        return { status: 'done' };
      },

      /**
       * After a connection ended (deregistered by the customer, the user's deletion, or the provider): revokes our access
       * at the provider where it has an API for it, then forgets the tokens. Best effort at the provider: a provider down
       * or busy (a 5xx, no answer, a 429) gets the revocation again, up to REVOCATION_ATTEMPTS; a revocation it refuses,
       * or still cannot take then, is logged, and the tokens are deleted all the same.
       */
      async revokeProviderAccess(input: { connectionId: string }): Promise<{ revoked: boolean }> {
        // Ended means no longer live, not only deregistered: a user's deletion hides the user before it deregisters
        // the connection, and a workflow that meets the hidden user in between stops and ends here first.
        if (await live(input.connectionId)) return { revoked: false };
        const connection = await repos.connections.find(input.connectionId);
        const tokens = await repos.providerAuth.get(input.connectionId);
        if (!tokens) return { revoked: false };
        const integration = integrationFor(tokens.provider);
        let revoked = false;
        if (integration?.revoke && connection) {
          const app = await appOfConnection(deps, connection);
          if (app) {
            try {
              await integration.revoke(connectionContext(deps, integration, app, connection, tokens.extras));
              revoked = true;
            } catch (err) {
              if (!(err instanceof ProviderFetchError) && !(err instanceof RateLimitedError)) throw err;
              retryRevocationIfTransient(err);
              deps.logger.warn(
                { connectionId: input.connectionId, provider: tokens.provider, err: (err as Error).message },
                'provider revocation failed; the tokens are deleted all the same',
              );
            }
          }
        }
        await repos.providerAuth.delete(input.connectionId);
        return { revoked };
      },

      /** The providers' push subscriptions: created where missing, renewed before they expire (providers/subscriptions.ts). */
      async ensureProviderSubscriptions(): Promise<SubscriptionOutcome[]> {
        const outcomes = await ensureSubscriptions(deps);
        // An app whose budget was spent is tried again when it has room (the run's retry), not at the next run.
        const retryAt = outcomes.flatMap((o) => (o.retryAt ? [o.retryAt.getTime()] : []));
        if (retryAt.length) {
          throw ApplicationFailure.create({
            message: 'a provider app had no request budget left for its subscriptions',
            type: 'ProviderSubscriptionsRateLimited',
            nextRetryDelay: Math.max(Math.min(...retryAt) - Date.now(), 1000),
          });
        }
        return outcomes;
      },
    },
  };
}

/** Attempts at a revocation the provider could not take just then (down, 5xx, a 429), before the tokens go without it. */
const REVOCATION_ATTEMPTS = 5;
/** A 429 asking for a longer wait than this is not waited for: the connection has ended, its workflow should too. */
const REVOCATION_MAX_WAIT_MS = 15 * 60_000;

/**
 * Has Temporal run the revocation again (its backoff: 1, 2, 4, 8 s; or the time a 429 named) while the failure is
 * the provider's passing state, so a provider briefly down still gets the grant revoked. Returns (to give up) on a
 * refusal, after the last attempt, or when a 429 asks for more than REVOCATION_MAX_WAIT_MS.
 */
function retryRevocationIfTransient(err: ProviderFetchError | RateLimitedError): void {
  if (Context.current().info.attempt >= REVOCATION_ATTEMPTS) return;
  if (err instanceof RateLimitedError) {
    const waitMs = err.retryAt.getTime() - Date.now();
    if (waitMs > REVOCATION_MAX_WAIT_MS) return;
    throw ApplicationFailure.create({ message: err.message, type: 'ProviderRevocationRateLimited', nextRetryDelay: Math.max(waitMs, 1000) });
  }
  if (err.retriable) throw ApplicationFailure.retryable(err.message, 'ProviderRevocationUnavailable');
}

/** Where a paged pull goes next (workflows/wearable-connection.ts loops on it). */
export type PageOutcome =
  | { status: 'page'; next: PageCursor }
  | { status: 'done' }
  | { status: 'rate_limited'; waitMs: number }
  | { status: 'failed' }
  | { status: 'stopped' };

/** A real provider's connection: its pages run on the provider's task queue. */
export interface PagedPlan {
  taskQueue: string;
  resources: string[];
}

export { providerTaskQueue };

/** A window of local dates as instants at a fixed offset (start of the first day, end of the last). */
export function pullWindow(startDate: string, endDate: string, offset: number): PullWindow {
  const start = new Date(Date.parse(`${startDate}T00:00:00Z`) - offset * 1000);
  const end = new Date(Date.parse(`${addDays(endDate, 1)}T00:00:00Z`) - offset * 1000);
  return { startDate, endDate, start, end, timezoneOffsetSeconds: offset };
}
