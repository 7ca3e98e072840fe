import { Context } from '@temporalio/activity';
import type { ProviderCatalogue } from '../lib/wearables/provider-catalogue';
import type { Config } from '../lib/platform/config';
import type { Logger } from '../lib/platform/logger';
import type { Repositories } from '../lib/repositories';
import type { ConnectionDoc } from '../lib/wearables/connections-store';
import { historicalPullId, type HistoricalPullDoc, type PullErrorDetails } from '../lib/wearables/historical-pulls-store';
import type { UserDoc } from '../lib/users/store';
import type { TemporalDeps } from '../lib/platform/temporal';
import { addDays, datesBetween, localDate, zoneOffsetSeconds } from '../lib/platform/time';
import { ProviderFetchError, type AdapterRegistry, type ProviderAdapter } from '../lib/wearables/adapters';
export { providerTaskQueue, pullWindow, type PageOutcome, type PagedPlan } from './provider-pages';
import { connectionSettings, providerSummary } from '../lib/wearables/workflow-client';
import type { ConnectionSettings } from '../workflows/wearable-connection';
import { resourceAvailability } from '../lib/wearables/providers/scopes';
import { ingestProviderData } from '../lib/wearables/ingest';
import type { ProviderData } from '../lib/wearables/model';
import { createProviderPageActivities, type PagedPlan } from './provider-pages';
import type { EventPublisher } from '../lib/events/publisher';

export interface WearableActivityDeps {
  repos: Repositories;
  config: Config;
  logger: Logger;
  temporal: TemporalDeps;
  publisher: EventPublisher;
  providers: ProviderCatalogue;
  adapters: AdapterRegistry;
}

/** When Temporal scheduled the running activity attempt: the fence of its pull-state writes (HistoricalPullRepository.save). */
export const attemptScheduledAt = (): number => Context.current().info.currentAttemptScheduledTimestampMs;

/** Days fetched per provider request during a history pull (bounds memory and heartbeats between requests). */
const DAYS_PER_FETCH = 7;

export type Live = { connection: ConnectionDoc; user: UserDoc; adapter: ProviderAdapter };

/**
 * The activities of workflows/wearable-connection.ts. Each first checks that the connection is still live
 * (deregistration marks it before signalling the workflow) and returns `stopped` otherwise. Pull state
 * documents are written only from here, on behalf of the connection's workflow, their single owner.
 */
export function createWearableActivities(deps: WearableActivityDeps) {
  const { repos } = deps;

  async function live(connectionId: string): Promise<Live | null> {
    const connection = await repos.connections.find(connectionId);
    if (!connection || connection.status === 'deregistered') return null;
    const user = await repos.users.find(connection.team_id, connection.user_id);
    const adapter = deps.adapters.forConnection(connection);
    if (user?.status !== 'active' || !adapter) return null;
    return { connection, user, adapter };
  }

  const userClock = (user: UserDoc, now = new Date()) => {
    const offset = zoneOffsetSeconds(user.fallback_time_zone?.id, now);
    return { now, offset, today: localDate(now, offset) };
  };
  /** The instant a local day starts at a fixed offset. */
  const dayStart = (day: string, offset: number) => new Date(Date.parse(`${day}T00:00:00Z`) - offset * 1000);

  async function publishConnectionError(l: Live, err: ProviderFetchError): Promise<void> {
    const details = { error_type: err.errorType, error_message: err.message, errored_at: new Date() };
    await repos.connections.recordError(l.connection, details);
    await deps.publisher.publish({
      teamId: l.connection.team_id,
      userId: l.user._id,
      clientUserId: l.user.client_user_id,
      eventType: 'provider.connection.error',
      data: {
        user_id: l.user._id,
        provider: providerSummary(deps, l.connection.provider),
        source: providerSummary(deps, l.connection.provider),
        message: err.message,
        error_type: err.errorType,
        error_details: { ...details, errored_at: details.errored_at.toISOString() },
      },
      idempotencyKey: `connection-error:${l.connection._id}:${err.errorType}`,
    });
  }

  /** Fetches and stores `days` of one resource in runs of consecutive days; returns the merged outcome. */
  async function fetchDays(l: Live, resource: string, days: string[], attempt: number, announce: boolean, offset: number) {
    const merged = { days: new Set<string>(), sent: 0, oldest: null as Date | null, newest: null as Date | null };
    for (const run of consecutiveRuns(days, DAYS_PER_FETCH)) {
      const data = await l.adapter.fetch({
        connection: l.connection,
        resource,
        startDate: run[0],
        endDate: run[run.length - 1],
        until: new Date(),
        timezoneOffsetSeconds: offset,
        attempt,
        purpose: announce ? 'sync' : 'history',
      });
      const result = await storePage(l, data, announce);
      for (const d of result.days) merged.days.add(d);
      merged.sent += result.sent;
      if (result.oldest && (!merged.oldest || result.oldest < merged.oldest)) merged.oldest = result.oldest;
      if (result.newest && (!merged.newest || result.newest > merged.newest)) merged.newest = result.newest;
      await progressed(l, run[run.length - 1]);
    }
    return merged;
  }

  /**
   * Between two runs of days: heartbeat, then stop if this attempt is no longer wanted. Temporal cancels an
   * attempt it has given up on (its heartbeat timed out, e.g. while Temporal or the database was down, and a
   * new attempt runs) or that a stopping worker cancels; one that went on would pull beside its successor and
   * load the database for nothing. A connection deregistered meanwhile stops it too.
   */
  async function progressed(l: Live, lastDay: string): Promise<void> {
    const context = Context.current();
    context.heartbeat(lastDay);
    context.cancellationSignal.throwIfAborted();
    const connection = await repos.connections.find(l.connection._id);
    if (!connection || connection.status === 'deregistered') throw new ConnectionStopped();
  }

  /**
   * The days with data that a later history pull can still ask for: those inside the provider's history window
   * (`historyDays` back from the user's today). Older ones are dropped, so `data_days` holds at most
   * historyDays + 1 entries however long a connection lives.
   */
  function recentDays(l: Live, days: Iterable<string>): string[] {
    const horizon = addDays(userClock(l.user).today, -l.adapter.historyDays);
    return [...new Set(days)].filter((d) => d >= horizon).sort();
  }

  function withStats(
    l: Live,
    doc: HistoricalPullDoc,
    got: { days: Set<string>; sent: number; oldest: Date | null; newest: Date | null },
    ok: boolean,
  ): HistoricalPullDoc {
    const now = new Date();
    return {
      ...doc,
      data_days: recentDays(l, [...doc.data_days, ...got.days]),
      oldest_data: got.oldest && (!doc.oldest_data || got.oldest < doc.oldest_data) ? got.oldest : doc.oldest_data,
      newest_data: got.newest && (!doc.newest_data || got.newest > doc.newest_data) ? got.newest : doc.newest_data,
      sent_count: doc.sent_count + got.sent,
      last_attempt: { status: ok ? 'success' : 'failure', timestamp: now },
      updated_at: now,
    };
  }

  async function storePage(l: Live, data: ProviderData, announce: boolean) {
    const result = await ingestProviderData(deps, { teamId: l.connection.team_id, user: l.user, provider: l.connection.provider, data, announce });
    const sent =
      result.summaries.created +
      result.summaries.updated +
      result.samples.created +
      result.samples.updated +
      result.workout_streams.created +
      result.workout_streams.updated;
    return { days: new Set(result.days), sent, oldest: result.oldest, newest: result.newest };
  }

  async function publishHistoricalDone(l: Live, resource: string, doc: HistoricalPullDoc): Promise<void> {
    await deps.publisher.publish({
      teamId: l.connection.team_id,
      userId: l.user._id,
      clientUserId: l.user.client_user_id,
      eventType: `historical.data.${resource}.created`,
      data: {
        user_id: l.user._id,
        start_date: (doc.range_start ?? new Date()).toISOString(),
        end_date: (doc.range_end ?? new Date()).toISOString(),
        is_final: true,
        provider: l.connection.provider,
      },
      idempotencyKey: `historical:${l.connection._id}:${resource}`,
    });
  }

  /** A provider failure of one history attempt: `retrying` while retries are left, else `failure` (and a broken connection's event). */
  async function recordPullFailure(
    l: Live,
    started: HistoricalPullDoc,
    input: { resource: string; attempt: number; retriesLeft: boolean; retryingEnabled: boolean },
    err: ProviderFetchError,
  ): Promise<'retrying' | 'failure'> {
    const errored_at = new Date();
    const retrying = err.retriable && input.retriesLeft;
    // A retriable failure that used up its quota is `retry_quota_exhausted`; connections made before the
    // retrying cut-over fail at once with the provider's error.
    const errorType = err.retriable && !retrying && input.retryingEnabled ? 'retry_quota_exhausted' : err.errorType;
    const details: PullErrorDetails = { error_type: errorType, error_message: err.message, errored_at };
    const failed = withStats(l, started, { days: new Set(), sent: 0, oldest: null, newest: null }, false);
    await repos.historicalPulls.save(attemptScheduledAt(), {
      ...failed,
      status: retrying ? 'retrying' : 'failure',
      error_details: details,
      timeline: { ...failed.timeline, ended_at: retrying ? null : errored_at },
    });
    if (err.breaksConnection) await publishConnectionError(l, err);
    deps.logger.warn(
      { connectionId: l.connection._id, resource: input.resource, attempt: input.attempt, errorType },
      retrying ? 'historical pull failed; retrying' : 'historical pull failed',
    );
    return retrying ? 'retrying' : 'failure';
  }

  const pages = createProviderPageActivities(deps, { live, userClock, withStats, storePage, publishConnectionError, publishHistoricalDone, recordPullFailure });

  return {
    ...pages.activities,
    /**
     * Announces the connection (`provider.connection.created`, once per connection) and schedules the history
     * pull of each resource: the provider's default window, limited by the user's ingestion bounds, minus the
     * days that already have data (a reconnected provider pulls only the gap).
     */
    /** The connection's pull and sync settings from the current configuration (a deregistered one's too: it is ending). */
    async connectionSettings(input: { connectionId: string }): Promise<ConnectionSettings> {
      const connection = await repos.connections.find(input.connectionId);
      return connectionSettings(deps.config, connection ?? {});
    },

    async startHistoricalPull(input: { connectionId: string; traceId: string }): Promise<{ stopped: boolean; resources: string[]; pages?: PagedPlan }> {
      const l = await live(input.connectionId);
      if (!l) return { stopped: true, resources: [] };
      const { connection, user, adapter } = l;
      const provider = providerSummary(deps, connection.provider);
      await deps.publisher.publish({
        teamId: connection.team_id,
        userId: user._id,
        clientUserId: user.client_user_id,
        eventType: 'provider.connection.created',
        data: {
          user_id: user._id,
          provider,
          source: provider,
          external_user_id: connection.external_user_id ?? null,
          resource_availability: resourceAvailability(adapter.integration, adapter.resources, connection.granted_scopes),
        },
        idempotencyKey: `connection-created:${connection._id}`,
      });
      if (adapter.mode === 'push') return { stopped: false, resources: [] };
      if (adapter.integration) await pages.subscribeToPushes(l);

      const { now, offset, today } = userClock(user);
      const start = [addDays(today, -adapter.historyDays), user.ingestion_start].filter(Boolean).sort().pop() as string;
      const end = [today, user.ingestion_end].filter(Boolean).sort()[0] as string;
      const windowDays = datesBetween(start, end);
      for (const resource of adapter.resources) {
        const id = historicalPullId(connection.team_id, user._id, connection.provider, resource);
        const previous = await repos.historicalPulls.get(id);
        const held = new Set(previous?.data_days ?? []);
        const gap = windowDays.filter((d) => !held.has(d));
        await repos.historicalPulls.save(attemptScheduledAt(), {
          _id: id,
          team_id: connection.team_id,
          user_id: user._id,
          provider: connection.provider,
          resource,
          connection_id: connection._id,
          status: 'scheduled',
          range_start: gap.length ? dayStart(gap[0], offset) : null,
          range_end: gap.length ? new Date(dayStart(gap[gap.length - 1], offset).getTime() + 86_399_999) : null,
          timeline: { scheduled_at: now, started_at: null, ended_at: null },
          days_requested: gap,
          data_days: recentDays(l, previous?.data_days ?? []),
          attempts: 0,
          error_details: null,
          trace_id: input.traceId,
          last_attempt: previous?.last_attempt ?? null,
          oldest_data: previous?.oldest_data ?? null,
          newest_data: previous?.newest_data ?? null,
          sent_count: previous?.sent_count ?? 0,
          updated_at: now,
        });
      }
      return { stopped: false, resources: adapter.resources, pages: pages.plan(l) };
    },

    /**
     * One attempt at one resource's history. A retriable provider failure with retries left is `retrying` (the
     * workflow waits and calls again); otherwise a failure is final. Success publishes
     * `historical.data.<resource>.created`.
     */
    async pullHistoricalResource(input: {
      connectionId: string;
      resource: string;
      attempt: number;
      retriesLeft: boolean;
      retryingEnabled: boolean;
    }): Promise<'success' | 'retrying' | 'failure' | 'stopped'> {
      const l = await live(input.connectionId);
      if (!l) return 'stopped';
      const { connection, user } = l;
      const id = historicalPullId(connection.team_id, user._id, connection.provider, input.resource);
      const scheduled = await repos.historicalPulls.get(id);
      if (!scheduled || scheduled.connection_id !== connection._id) return 'stopped';
      const started: HistoricalPullDoc = {
        ...scheduled,
        status: 'in_progress',
        attempts: input.attempt,
        timeline: { ...scheduled.timeline, started_at: scheduled.timeline.started_at ?? new Date() },
        updated_at: new Date(),
      };
      await repos.historicalPulls.save(attemptScheduledAt(), started);
      const { offset } = userClock(user);
      try {
        const got = await fetchDays(l, input.resource, started.days_requested, input.attempt, false, offset);
        const done = withStats(l, started, got, true);
        await repos.historicalPulls.save(attemptScheduledAt(), {
          ...done,
          status: 'success',
          error_details: null,
          timeline: { ...done.timeline, ended_at: new Date() },
        });
        await publishHistoricalDone(l, input.resource, started);
        return 'success';
      } catch (err) {
        if (err instanceof ConnectionStopped) return 'stopped';
        if (!(err instanceof ProviderFetchError)) throw err; // our own fault: Temporal retries the activity
        return recordPullFailure(l, started, input, err);
      }
    },

    /**
     * A resource whose pull kept failing on our side (PULL_GIVE_UP_AFTER in workflows/wearable-connection.ts) is
     * recorded as failed with `unexpected_error`, so it no longer shows in progress and the connection goes on.
     */
    async giveUpHistoricalPull(input: { connectionId: string; resource: string; message: string }): Promise<void> {
      const l = await live(input.connectionId);
      if (!l) return;
      const id = historicalPullId(l.connection.team_id, l.user._id, l.connection.provider, input.resource);
      const doc = await repos.historicalPulls.get(id);
      if (!doc || doc.connection_id !== l.connection._id || doc.status === 'success' || doc.status === 'failure') return;
      const errored_at = new Date();
      const failed = withStats(l, doc, { days: new Set(), sent: 0, oldest: null, newest: null }, false);
      await repos.historicalPulls.save(attemptScheduledAt(), {
        ...failed,
        status: 'failure',
        error_details: { error_type: 'unexpected_error', error_message: input.message, errored_at },
        timeline: { ...failed.timeline, ended_at: errored_at },
      });
      deps.logger.error({ connectionId: l.connection._id, resource: input.resource, err: input.message }, 'historical pull gave up after failing on our side');
    },

    /** Fetches yesterday and today of every resource and publishes what is new or revised (`daily.data.*`). */
    async syncConnection(input: { connectionId: string }): Promise<{ stopped: boolean; pages?: PagedPlan }> {
      const l = await live(input.connectionId);
      if (!l) return { stopped: true };
      if (l.adapter.mode === 'push') return { stopped: false };
      // A real provider syncs page by page from the workflow (syncPage), one provider request per activity.
      if (l.adapter.integration) return { stopped: false, pages: pages.plan(l) };
      const { connection, user } = l;
      const { offset, today } = userClock(user);
      for (const resource of l.adapter.resources) {
        const id = historicalPullId(connection.team_id, user._id, connection.provider, resource);
        const days = [addDays(today, -1), today].filter(
          (d) => (!user.ingestion_start || d >= user.ingestion_start) && (!user.ingestion_end || d <= user.ingestion_end),
        );
        let got = { days: new Set<string>(), sent: 0, oldest: null as Date | null, newest: null as Date | null };
        let ok = true;
        try {
          got = await fetchDays(l, resource, days, 1, true, offset);
        } catch (err) {
          if (err instanceof ConnectionStopped) return { stopped: true };
          if (!(err instanceof ProviderFetchError)) throw err;
          ok = false;
          if (err.breaksConnection) await publishConnectionError(l, err);
          deps.logger.warn({ connectionId: connection._id, resource, errorType: err.errorType }, 'sync failed for a resource; the next sync tries again');
        }
        const doc = await repos.historicalPulls.get(id);
        if (doc && doc.connection_id === connection._id) await repos.historicalPulls.save(attemptScheduledAt(), withStats(l, doc, got, ok));
      }
      return { stopped: false };
    },
  };
}

/** The connection was deregistered while its data was being fetched. */
class ConnectionStopped extends Error {}

/** `days` (sorted) split into runs of consecutive dates, at most `max` long. */
function consecutiveRuns(days: string[], max: number): string[][] {
  const runs: string[][] = [];
  for (const day of days) {
    const run = runs[runs.length - 1];
    if (run && run.length < max && addDays(run[run.length - 1], 1) === day) run.push(day);
    else runs.push([day]);
  }
  return runs;
}

export type WearableActivities = ReturnType<typeof createWearableActivities>;
