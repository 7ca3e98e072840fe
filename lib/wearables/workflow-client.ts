import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { workflowIds } from '../../workflows/ids';
import { refreshConnectionSignal, stopConnectionSignal, wearableConnectionWorkflow, type ConnectionSettings } from '../../workflows/wearable-connection';
import { providerLogoUrl, type ProviderCatalogue } from './provider-catalogue';
import { publicBaseUrl, type Config } from '../platform/config';
import type { Repositories } from '../repositories';
import type { ConnectionDoc, SandboxFault } from './connections-store';
import type { TemporalDeps } from '../platform/temporal';
import { todayUtc } from '../platform/time';
import { crashPoint } from '../platform/failpoints';
import type { OAuthGrant } from './link-auth';

export interface ConnectionDeps {
  repos: Repositories;
  config: Config;
  temporal: TemporalDeps;
  providers: ProviderCatalogue;
}

/** `{name, slug, logo}` of a provider, as connection events and `connected_sources` carry it. */
export function providerSummary(deps: Pick<ConnectionDeps, 'providers' | 'config'>, slug: string) {
  return { name: deps.providers.find(slug)?.name ?? slug, slug, logo: providerLogoUrl(publicBaseUrl(deps.config), slug) };
}

/**
 * Connects a user to a provider: a unique insert (a second live connection to the same provider is the
 * `conflict`), then its steps (finishConnectionSteps): the user's connected_sources, and the connection's workflow
 * started, which announces it and pulls its history. A conflict runs them too, finishing a connect that crashed
 * in between; so does the worker's sweeper, for a connection whose steps stay pending past a grace period.
 */
export async function connectProvider(
  deps: ConnectionDeps,
  req: { teamId: string; userId: string; provider: string; adapter: ConnectionDoc['adapter']; faults?: SandboxFault[]; oauth?: OAuthGrant },
): Promise<{ created: ConnectionDoc } | { conflict: ConnectionDoc }> {
  const now = new Date();
  const connectionId = randomUUID();
  // A real provider's tokens are stored before the connection that uses them: a crash in between leaves only sealed
  // tokens that nothing references (never a connection without tokens).
  if (req.oauth) await deps.repos.providerAuth.saveInitial({ connectionId, teamId: req.teamId, userId: req.userId, provider: req.provider }, req.oauth.tokens);
  const result = await deps.repos.connections.create({
    _id: connectionId,
    team_id: req.teamId,
    user_id: req.userId,
    provider: req.provider,
    status: 'connected',
    adapter: req.adapter,
    created_on: now,
    updated_at: now,
    external_user_id: req.oauth?.externalUserId ?? null,
    ...(req.oauth ? { oauth_client_id: req.oauth.clientId } : {}),
    ...(req.oauth?.grantedScopes ? { granted_scopes: req.oauth.grantedScopes } : {}),
    ...(req.oauth?.region ? { provider_region: req.oauth.region } : {}),
    retrying_enabled: todayUtc(now) >= deps.config.HISTORICAL_PULL_RETRYING_SINCE,
    ...(req.faults?.length ? { sandbox_faults: req.faults } : {}),
    steps_pending_since: now,
  });
  if ('conflict' in result && req.oauth) await deps.repos.providerAuth.delete(connectionId);
  crashPoint('connection.created');
  await finishConnectionSteps(deps, 'created' in result ? result.created : result.conflict);
  return result;
}

/**
 * What follows a connection's write, each step idempotent: the user's `connected_sources` rebuilt, then the
 * connection's workflow started (live) or told to stop (deregistered; it would also stop at its next activity,
 * which finds the connection deregistered). Then the connection's `steps_pending_since` is cleared. The api runs
 * it right after the write; the sweeper (activities/maintenance.ts) runs it again for a connection still marked
 * past a grace period, so a crash between the write and its workflow leaves nothing behind.
 */
export async function finishConnectionSteps(deps: ConnectionDeps, connection: ConnectionDoc): Promise<void> {
  await refreshConnectedSources(deps, connection.team_id, connection.user_id);
  if (connection.status === 'deregistered') await signalConnection(deps, connection._id, 'stop');
  else await startConnectionWorkflow(deps, connection);
  if (connection.steps_pending_since) await deps.repos.connections.stepsDone(connection._id, connection.steps_pending_since);
}

/**
 * A connection's pull and sync settings from the configuration as it is now: its workflow asks for them (an activity)
 * at the start of each run and before each sync, so a changed value reaches running connections after a restart.
 */
export function connectionSettings(config: Config, connection: Pick<ConnectionDoc, 'retrying_enabled'>): ConnectionSettings {
  return {
    retry: {
      enabled: connection.retrying_enabled ?? true,
      initialMs: config.HISTORICAL_PULL_RETRY_INITIAL_SECONDS * 1000,
      maxMs: config.HISTORICAL_PULL_RETRY_MAX_SECONDS * 1000,
      quota: config.HISTORICAL_PULL_RETRY_QUOTA,
      giveUpAfterMs: config.HISTORICAL_PULL_GIVE_UP_SECONDS * 1000,
    },
    syncIntervalMs: config.WEARABLE_SYNC_INTERVAL_SECONDS * 1000,
    syncsPerRun: config.WEARABLE_SYNCS_PER_RUN,
  };
}

async function startConnectionWorkflow(deps: ConnectionDeps, connection: ConnectionDoc): Promise<void> {
  const { temporal } = deps;
  await temporal.client.workflow.start(wearableConnectionWorkflow, {
    workflowId: workflowIds.wearableConnection(connection._id),
    taskQueue: temporal.taskQueue,
    args: [{ connectionId: connection._id, phase: 'history' }],
    // One connection, one workflow: a repeated start (a retried connect) joins the running one.
    workflowIdConflictPolicy: 'USE_EXISTING',
    memo: { team_id: connection.team_id, user_id: connection.user_id, provider: connection.provider },
  });
}

/** Ends a connection: marked deregistered first (its workflow's activities then stop), then its steps. */
export async function deregisterConnection(deps: ConnectionDeps, connection: ConnectionDoc): Promise<void> {
  const now = new Date();
  await deps.repos.connections.deregister(connection._id, now);
  crashPoint('connection.deregistered');
  await finishConnectionSteps(deps, { ...connection, status: 'deregistered', steps_pending_since: now });
}

/** Signals a connection's workflow; a workflow already gone is fine (nothing left to stop or sync). */
export async function signalConnection(deps: Pick<ConnectionDeps, 'temporal'>, connectionId: string, what: 'stop' | 'refresh'): Promise<boolean> {
  try {
    await deps.temporal.client.workflow
      .getHandle(workflowIds.wearableConnection(connectionId))
      .signal(what === 'stop' ? stopConnectionSignal : refreshConnectionSignal);
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/** The user's `connected_sources`, rebuilt from the live connections. */
export async function refreshConnectedSources(deps: Pick<ConnectionDeps, 'repos' | 'providers' | 'config'>, teamId: string, userId: string): Promise<void> {
  await deps.repos.users.setConnectedSources(teamId, userId, async () =>
    (await deps.repos.connections.listLiveForUser(teamId, userId)).map((c) => ({ created_on: c.created_on, source: providerSummary(deps, c.provider) })),
  );
}
