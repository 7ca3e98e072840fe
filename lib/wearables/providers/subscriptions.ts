import type { Logger } from '../../platform/logger';
import type { ProviderCallContext } from './contract';
import { DAY_MS } from '../../platform/time';
import { RateLimitedError, type ProviderIntegration } from './contract';
import { integrationFor, realIntegrations } from './registry';
import { appsOf, connectionHttp, pushUrl, type ProviderApp, type RuntimeDeps } from './runtime';

/**
 * Providers' push subscriptions, kept in place by the `provider-subscriptions` Temporal Schedule (worker/
 * provider-subscriptions-schedule.ts; operators see, pause and trigger it in the Temporal UI) for every app of the
 * deployment (its own, and teams' own credentials), through each integration's `ensureAppSubscriptions` (Oura: one
 * subscription per event and data type, renewed PROVIDER_SUBSCRIPTION_RENEW_DAYS before it expires; Polar: one
 * webhook per client, its secret returned once and stored sealed; Strava: one subscription per app, its id what
 * events are checked against). WHOOP's webhook URL is set in its developer dashboard; Withings subscribes per user, at
 * connect (subscribeUser); Dexcom has no pushes.
 */
export type SubscriptionDeps = RuntimeDeps & { logger: Logger };

export interface SubscriptionOutcome {
  provider: string;
  clientId: string;
  created: number;
  renewed: number;
  error?: string;
  /** The app's request budget was spent: when to try its subscriptions again (not 12 hours later, at the next run). */
  retryAt?: Date;
}

/**
 * Subscription calls are rare and a missing subscription loses every push: they book the app's budget up to this far
 * ahead instead of waiting behind the pages of a backfill (Strava's slots are ~24 s).
 */
const SUBSCRIPTION_BOOK_AHEAD_MS = 60_000;

const appContext = (deps: SubscriptionDeps, integration: ProviderIntegration, app: ProviderApp): ProviderCallContext => ({
  http: connectionHttp(deps, integration, app, null, undefined, SUBSCRIPTION_BOOK_AHEAD_MS),
  externalUserId: null,
  tokenExtras: {},
  client: { clientId: app.clientId, clientSecret: app.clientSecret },
});

/** Creates what is missing and renews what expires soon, for every app; one app's failure does not stop the others. */
export async function ensureSubscriptions(deps: SubscriptionDeps, now = new Date()): Promise<SubscriptionOutcome[]> {
  const outcomes: SubscriptionOutcome[] = [];
  const renewBefore = new Date(now.getTime() + deps.config.PROVIDER_SUBSCRIPTION_RENEW_DAYS * DAY_MS);
  for (const integration of realIntegrations()) {
    if (!integration.ensureAppSubscriptions) continue;
    for (const app of await appsOf(deps, integration.slug)) {
      const outcome: SubscriptionOutcome = { provider: app.provider, clientId: app.clientId, created: 0, renewed: 0 };
      try {
        const done = await integration.ensureAppSubscriptions(appContext(deps, integration, app), {
          callbackUrl: pushUrl(deps.config, app.provider),
          verifyToken: await deps.repos.providerAuth.verifyToken(app.provider, app.clientId),
          stored: await deps.repos.providerAuth.getApp(app.provider, app.clientId),
          renewBefore,
        });
        Object.assign(outcome, { created: done.created, renewed: done.renewed });
        if (done.keep) await deps.repos.providerAuth.updateApp(app.provider, app.clientId, done.keep);
      } catch (err) {
        outcome.error = (err as Error).message;
        if (err instanceof RateLimitedError) outcome.retryAt = err.retryAt;
        deps.logger.warn(
          { provider: app.provider, clientId: app.clientId, err: outcome.error },
          'provider subscriptions could not be ensured; the next scheduled run tries again',
        );
      }
      outcomes.push(outcome);
    }
  }
  return outcomes;
}

/** A new connection's pushes, where the provider subscribes per user (Withings), with the user's token. */
export async function subscribeUser(deps: SubscriptionDeps, ctx: ProviderCallContext, provider: string): Promise<void> {
  await integrationFor(provider)?.subscribeUser?.(ctx, pushUrl(deps.config, provider));
}
