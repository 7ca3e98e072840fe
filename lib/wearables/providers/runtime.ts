import { setTimeout as sleep } from 'node:timers/promises';
import { providerSetting, publicBaseUrl, type Config } from '../../platform/config';
import type { Repositories } from '../../repositories';
import { ProviderFetchError } from '../provider-errors';
import type { ConnectionDoc } from '../connections-store';
import { OAuthError, RateLimitedError, type ProviderCallContext, type ProviderHttp, type ProviderIntegration, type TokenSet } from './contract';
import { createProviderHttp, type RateLimitGate } from './http';
import { takeFromBudget } from './budget';
import { refreshTokens } from './oauth-client';
import { connectionRegion, oauthInRegion } from './regions';
import { integrationFor } from './registry';

/**
 * The running side of the real integrations, shared by the api (link page, push intake) and the worker (pulls,
 * refreshes, revokes): which OAuth app a team connects with, and the HTTP client of one connection with its token
 * kept fresh (one refresh at a time across workers) and its app's rate-limit block honoured.
 */
export interface ProviderApp {
  provider: string;
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  /** PROVIDER_<SLUG>_BASE_URL: every URL of the provider rebased onto it. */
  baseUrl?: string;
  source: 'team' | 'deployment';
  /** A connection's region at a provider with regions (Dexcom): where its tokens and data are (appOfConnection). */
  region?: string | null;
}

export type RuntimeDeps = { repos: Repositories; config: Config };

/** The task queue of a provider's page activities (one per provider; each request draws from its app's budget, providers/budget.ts). */
export const providerTaskQueue = (mainQueue: string, slug: string) => `${mainQueue}-provider-${slug}`;

export const oauthCallbackUrl = (config: Config, slug: string) => `${publicBaseUrl(config)}/v2/link/oauth/callback/${slug}`;
export const pushUrl = (config: Config, slug: string) => `${publicBaseUrl(config)}/v2/providers/${slug}/webhook`;
export const providerBaseUrl = (config: Config, slug: string): string | undefined => providerSetting(config, slug, 'BASE_URL');

/** The deployment's own app at `slug` (PROVIDER_<SLUG>_CLIENT_ID / _CLIENT_SECRET), or null. */
export function deploymentApp(config: Config, slug: string): ProviderApp | null {
  const clientId = providerSetting(config, slug, 'CLIENT_ID');
  const clientSecret = providerSetting(config, slug, 'CLIENT_SECRET');
  if (!clientId || !clientSecret || !integrationFor(slug)) return null;
  return { provider: slug, clientId, clientSecret, redirectUri: oauthCallbackUrl(config, slug), baseUrl: providerBaseUrl(config, slug), source: 'deployment' };
}

/** The app a team's users connect `slug` with: the team's own credentials, else the deployment's; null: none (demo-only). */
export async function resolveApp(deps: RuntimeDeps, teamId: string, slug: string): Promise<ProviderApp | null> {
  if (!integrationFor(slug)) return null;
  const own = await deps.repos.customCredentials.findForTeam(teamId, slug);
  if (own) {
    return {
      provider: slug,
      clientId: own.client_id,
      clientSecret: deps.repos.customCredentials.revealSecret(own),
      redirectUri: own.redirect_url_override ?? oauthCallbackUrl(deps.config, slug),
      baseUrl: providerBaseUrl(deps.config, slug),
      source: 'team',
    };
  }
  return deploymentApp(deps.config, slug);
}

/** Every app this deployment has at `slug`: its own, and each team's own credentials (pushes, subscriptions). */
export async function appsOf(deps: RuntimeDeps, slug: string): Promise<ProviderApp[]> {
  const own = deploymentApp(deps.config, slug);
  const apps: ProviderApp[] = own ? [own] : [];
  for (const doc of await deps.repos.customCredentials.listForProvider(slug)) {
    if (apps.some((a) => a.clientId === doc.client_id)) continue;
    apps.push({
      provider: slug,
      clientId: doc.client_id,
      clientSecret: deps.repos.customCredentials.revealSecret(doc),
      redirectUri: doc.redirect_url_override ?? oauthCallbackUrl(deps.config, slug),
      baseUrl: providerBaseUrl(deps.config, slug),
      source: 'team',
    });
  }
  return apps;
}

/**
 * The app-wide 429 block and request budget every request of the app honours (shared by every worker and the api);
 * `bookAheadMs`: a sign-in books its requests in the budget's next slots (budget.ts takeFromBudget).
 */
export const appGate = (deps: RuntimeDeps, slug: string, clientId: string, bookAheadMs = 0): RateLimitGate => ({
  blockedUntil: () => deps.repos.providerAuth.blockedUntil(slug, clientId),
  block: (until, reason) => deps.repos.providerAuth.block(slug, clientId, until, reason),
  take: async (method, now, requests = 1) => {
    const budget = integrationFor(slug)?.budget;
    return budget ? takeFromBudget(deps.repos, { slug, clientId, budget }, method, now, bookAheadMs, requests) : null;
  },
});

/** The app a connection was made with (its `oauth_client_id`): the team's credentials if they still match, else the deployment's. */
export async function appOfConnection(
  deps: RuntimeDeps,
  connection: Pick<ConnectionDoc, 'team_id' | 'provider' | 'oauth_client_id' | 'provider_region'>,
): Promise<ProviderApp | null> {
  const inRegion = (app: ProviderApp) => ({ ...app, region: connectionRegion(integrationFor(connection.provider)!, connection.provider_region) });
  const app = await resolveApp(deps, connection.team_id, connection.provider);
  if (app && (!connection.oauth_client_id || app.clientId === connection.oauth_client_id)) return inRegion(app);
  const deployment = deploymentApp(deps.config, connection.provider);
  return deployment && deployment.clientId === connection.oauth_client_id ? inRegion(deployment) : null;
}

/**
 * The connection's access token, refreshed first when it expires within PROVIDER_TOKEN_REFRESH_SKEW_SECONDS (or when
 * `rejected`, the token a 401 just refused, is still the stored one). Only one refresh of a connection runs anywhere:
 * it holds the lease (ProviderAuthRepository.claimRefresh); any other caller waits for the new version and uses the
 * winner's token. A refresh the provider refuses (`invalid_grant`) is `token_refresh_failed` (the connection breaks);
 * a network error or 5xx is `provider_unavailable` (retried, never a revocation).
 */
export async function accessToken(
  deps: RuntimeDeps,
  integration: ProviderIntegration,
  app: ProviderApp,
  connectionId: string,
  rejected?: string,
  now: () => Date = () => new Date(),
): Promise<string> {
  const store = deps.repos.providerAuth;
  const skewMs = deps.config.PROVIDER_TOKEN_REFRESH_SKEW_SECONDS * 1000;
  for (let waited = 0; waited < 120; waited++) {
    const doc = await store.get(connectionId);
    if (!doc)
      throw new ProviderFetchError('provider_credential_error', `No ${integration.slug} tokens are stored for connection ${connectionId}; reconnect the user.`);
    const stale = rejected !== undefined ? doc.access_token === rejected : doc.expires_at !== null && doc.expires_at.getTime() - skewMs <= now().getTime();
    if (!stale) return doc.access_token;
    if (!integration.oauth.refreshable || !doc.refresh_token) {
      if (rejected !== undefined)
        throw new ProviderFetchError(
          'token_refresh_failed',
          `${integration.slug} refused the access token and issues no refresh token; the user must reconnect.`,
        );
      return doc.access_token;
    }
    const lease = await store.claimRefresh(connectionId, doc.version, now());
    if (!lease) {
      // Another worker is refreshing this connection: wait for its new version.
      await sleep(250);
      continue;
    }
    const refreshed = await refreshUnderLease(deps, integration, app, { connectionId, version: doc.version, refreshToken: doc.refresh_token, lease }, now);
    if (refreshed !== 'superseded') return refreshed;
    // Another refresh stored a newer version first: read what it stored.
  }
  throw new ProviderFetchError(
    'resource_contention',
    `The ${integration.slug} token refresh of connection ${connectionId} did not settle; trying again later.`,
  );
}

/** Tries of one refresh token while its answers are lost, then how long the claim is kept before anyone tries it again. */
const UNANSWERED_REFRESH_TRIES = 3;
const UNANSWERED_REFRESH_HOLD_MS = 10_000;
/** Tries of storing tokens the provider has just issued: the old refresh token may already be spent. */
const SAVE_REFRESHED_TRIES = 6;

/**
 * One refresh under its lease. The provider's answer decides:
 * - new tokens: stored before anything else, over the version they came from (ProviderAuthRepository.saveRefreshed),
 *   the save tried again while it fails, since a rotating provider has already spent the old refresh token;
 * - a refusal (`invalid_grant`): the lease goes back, the connection breaks (unless a refresh landed meanwhile);
 * - the app's budget spent (RateLimitedError, nothing sent): the lease goes back (kept, after an unanswered try);
 * - no answer (timeout, network, 5xx): the request may have rotated the token at the provider, so the lease is kept
 *   and the same refresh token is sent again (Withings keeps a rotated-out refresh token valid for 8 hours; for one
 *   already rotated away, WHOOP's or Oura's, the provider's answer to the retry decides). It is never released to a
 *   second refresher that would send the old token beside ours.
 */
async function refreshUnderLease(
  deps: RuntimeDeps,
  integration: ProviderIntegration,
  app: ProviderApp,
  claim: { connectionId: string; version: number; refreshToken: string; lease: string },
  now: () => Date,
): Promise<string | 'superseded'> {
  const store = deps.repos.providerAuth;
  const timeoutMs = deps.config.PROVIDER_REQUEST_TIMEOUT_MS;
  for (let attempt = 1; ; attempt++) {
    let tokens: TokenSet;
    try {
      tokens = await refreshTokens(oauthInRegion(integration, app.region ?? null), app, claim.refreshToken, {
        baseUrl: app.baseUrl,
        now: now(),
        timeoutMs,
        gate: appGate(deps, integration.slug, app.clientId),
      });
    } catch (err) {
      // The app's budget is spent: nothing was sent this time, and the caller waits like for a 429. The lease goes back,
      // unless an earlier try went unanswered: then it is kept until the budget has room, as for any unanswered try.
      if (err instanceof RateLimitedError) {
        if (attempt === 1) await store.releaseRefresh(claim.connectionId, claim.lease);
        else await store.holdRefresh(claim.connectionId, claim.lease, err.retryAt);
        throw err;
      }
      if (err instanceof OAuthError) {
        await store.releaseRefresh(claim.connectionId, claim.lease);
        const current = await store.get(claim.connectionId);
        if (current && current.version !== claim.version) return 'superseded';
        throw new ProviderFetchError(
          'token_refresh_failed',
          `${integration.slug} refused to refresh the connection's token (${err.error}); the user must reconnect.`,
        );
      }
      if (attempt >= UNANSWERED_REFRESH_TRIES) {
        await store.holdRefresh(claim.connectionId, claim.lease, new Date(now().getTime() + UNANSWERED_REFRESH_HOLD_MS));
        throw err;
      }
      // Kept for the next try and its answer: nobody else sends this refresh token meanwhile.
      await store.holdRefresh(claim.connectionId, claim.lease, new Date(now().getTime() + 2 * timeoutMs + 1000 * 2 ** attempt));
      await sleep(1000 * 2 ** (attempt - 1));
      continue;
    }
    for (let saveTry = 1; ; saveTry++) {
      try {
        return (await store.saveRefreshed(claim.connectionId, claim.version, tokens)) ? tokens.access_token : 'superseded';
      } catch (err) {
        if (saveTry >= SAVE_REFRESHED_TRIES) throw err;
        await sleep(250 * 2 ** (saveTry - 1));
      }
    }
  }
}

/** The HTTP client of one connection's calls (bearer token kept fresh, app-wide 429 block shared by every worker). */
export function connectionContext(
  deps: RuntimeDeps,
  integration: ProviderIntegration,
  app: ProviderApp,
  connection: Pick<ConnectionDoc, '_id' | 'external_user_id'>,
  extras: Record<string, unknown>,
  now: () => Date = () => new Date(),
): ProviderCallContext {
  return {
    http: connectionHttp(deps, integration, app, connection._id, now),
    externalUserId: connection.external_user_id ?? null,
    tokenExtras: extras,
    client: { clientId: app.clientId, clientSecret: app.clientSecret },
    accessToken: () => accessToken(deps, integration, app, connection._id, undefined, now),
    region: app.region ?? null,
  };
}

export function connectionHttp(
  deps: RuntimeDeps,
  integration: ProviderIntegration,
  app: ProviderApp,
  connectionId: string | null,
  now: () => Date = () => new Date(),
  /** Book the app's next budget slots up to this far ahead (appGate): for rare calls that must not starve behind pages. */
  bookAheadMs = 0,
): ProviderHttp {
  return createProviderHttp({
    integration,
    baseUrl: app.baseUrl,
    client: { clientId: app.clientId, clientSecret: app.clientSecret },
    ...(connectionId
      ? {
          accessToken: () => accessToken(deps, integration, app, connectionId, undefined, now),
          refreshAfterUnauthorized: (rejected: string) => accessToken(deps, integration, app, connectionId, rejected, now),
        }
      : {}),
    gate: appGate(deps, integration.slug, app.clientId, bookAheadMs),
    timeoutMs: deps.config.PROVIDER_REQUEST_TIMEOUT_MS,
    now,
  });
}
