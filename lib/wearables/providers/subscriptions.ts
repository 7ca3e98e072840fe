import type { Logger } from '../../platform/logger';
import type { ProviderCallContext } from './contract';
import { createSubscription, listSubscriptions, renewSubscription } from './oura/subscriptions';
import type { OuraDataType, OuraEventType } from './oura/api-types';
import { createWebhook, deleteWebhook, getWebhook } from './polar/webhooks';
import { createPushSubscription, deletePushSubscription, listPushSubscriptions } from './strava/push';
import { subscribeAll } from './withings/push';
import { integrationFor } from './registry';
import { appsOf, connectionHttp, pushUrl, type ProviderApp, type RuntimeDeps } from './runtime';

/**
 * Providers' push subscriptions, kept in place by the `provider-subscriptions` Temporal Schedule (worker/
 * provider-subscriptions-schedule.ts; operators see, pause and trigger it in the Temporal UI) for every app of the
 * deployment (its own, and teams' own credentials):
 * - Oura: one subscription per (event type, data type) through its API; they expire, so each is renewed
 *   PROVIDER_SUBSCRIPTION_RENEW_DAYS before its `expiration_time`.
 * - Polar: one webhook per client; its signature secret is returned once, at creation, and stored sealed. A webhook
 *   whose secret we do not hold (created elsewhere) is replaced.
 * - Strava: one push subscription per app; its id is what pushes are checked against.
 * WHOOP's webhook URL is set in its developer dashboard; Withings subscribes per user, at connect
 * (subscribeUser); Dexcom has no pushes.
 */
export type SubscriptionDeps = RuntimeDeps & { logger: Logger };

const OURA_DATA_TYPES: OuraDataType[] = ['sleep', 'daily_sleep', 'daily_activity', 'workout', 'daily_spo2'];
const OURA_EVENT_TYPES: OuraEventType[] = ['create', 'update'];

export interface SubscriptionOutcome {
  provider: string;
  clientId: string;
  created: number;
  renewed: number;
  error?: string;
}

/** Providers whose push subscriptions are made through their API. */
const WITH_SUBSCRIPTION_API = ['oura', 'polar', 'strava'];

const appContext = (deps: SubscriptionDeps, app: ProviderApp): ProviderCallContext => ({
  http: connectionHttp(deps, integrationFor(app.provider)!, app, null),
  externalUserId: null,
  tokenExtras: {},
  client: { clientId: app.clientId, clientSecret: app.clientSecret },
});

/** Creates what is missing and renews what expires soon, for every app; one app's failure does not stop the others. */
export async function ensureSubscriptions(deps: SubscriptionDeps, now = new Date()): Promise<SubscriptionOutcome[]> {
  const outcomes: SubscriptionOutcome[] = [];
  const apps = (await Promise.all(WITH_SUBSCRIPTION_API.filter((slug) => integrationFor(slug)).map((slug) => appsOf(deps, slug)))).flat();
  for (const app of apps) {
    const outcome: SubscriptionOutcome = { provider: app.provider, clientId: app.clientId, created: 0, renewed: 0 };
    try {
      const ctx = appContext(deps, app);
      const callbackUrl = pushUrl(deps.config, app.provider);
      const verifyToken = await deps.repos.providerAuth.verifyToken(app.provider, app.clientId);
      if (app.provider === 'oura') await ensureOura(deps, app, ctx, callbackUrl, verifyToken, now, outcome);
      if (app.provider === 'polar') await ensurePolar(deps, app, ctx, callbackUrl, outcome);
      if (app.provider === 'strava') await ensureStrava(deps, app, ctx, callbackUrl, verifyToken, outcome);
    } catch (err) {
      outcome.error = (err as Error).message;
      deps.logger.warn({ provider: app.provider, clientId: app.clientId, err: outcome.error }, 'provider subscriptions could not be ensured; the next scheduled run tries again');
    }
    outcomes.push(outcome);
  }
  return outcomes;
}

async function ensureOura(deps: SubscriptionDeps, app: ProviderApp, ctx: ProviderCallContext, callbackUrl: string, verifyToken: string, now: Date, outcome: SubscriptionOutcome): Promise<void> {
  const renewBefore = now.getTime() + deps.config.PROVIDER_SUBSCRIPTION_RENEW_DAYS * 86_400_000;
  const existing = (await listSubscriptions(ctx)).filter((s) => s.callback_url === callbackUrl);
  const kept: { id: string; key: string; expires_at: Date | null }[] = [];
  for (const dataType of OURA_DATA_TYPES) {
    for (const eventType of OURA_EVENT_TYPES) {
      const key = `${eventType}.${dataType}`;
      let sub = existing.find((s) => s.data_type === dataType && s.event_type === eventType);
      if (!sub) {
        sub = await createSubscription(ctx, { callbackUrl, verificationToken: verifyToken, eventType, dataType });
        outcome.created++;
      } else if (Date.parse(sub.expiration_time) <= renewBefore) {
        sub = { ...sub, ...(await renewSubscription(ctx, sub.id)) };
        outcome.renewed++;
      }
      kept.push({ id: sub.id, key, expires_at: new Date(sub.expiration_time) });
    }
  }
  await deps.repos.providerAuth.updateApp(app.provider, app.clientId, { subscriptions: kept });
}

async function ensurePolar(deps: SubscriptionDeps, app: ProviderApp, ctx: ProviderCallContext, callbackUrl: string, outcome: SubscriptionOutcome): Promise<void> {
  const stored = await deps.repos.providerAuth.getApp(app.provider, app.clientId);
  const current = await getWebhook(ctx);
  if (current && stored?.webhook_secret && stored.webhook_id === current.id && current.url === callbackUrl) return;
  // The secret is returned only when a webhook is created: one we cannot verify is replaced.
  if (current) await deleteWebhook(ctx, current.id);
  const created = await createWebhook(ctx, { url: callbackUrl });
  await deps.repos.providerAuth.updateApp(app.provider, app.clientId, { webhook_id: created.id, webhook_secret: created.signature_secret_key });
  outcome.created++;
}

async function ensureStrava(deps: SubscriptionDeps, app: ProviderApp, ctx: ProviderCallContext, callbackUrl: string, verifyToken: string, outcome: SubscriptionOutcome): Promise<void> {
  const current = (await listPushSubscriptions(ctx))[0];
  let id = current && current.callback_url === callbackUrl ? String(current.id) : null;
  if (!id) {
    // Strava allows one subscription per app (one elsewhere goes first) and checks our handshake before answering.
    if (current) await deletePushSubscription(ctx, String(current.id));
    id = (await createPushSubscription(ctx, { callbackUrl, verifyToken })).id;
    outcome.created++;
  }
  // The subscription id is what Strava's events are checked against: kept sealed only (webhook_secret), never in plaintext.
  await deps.repos.providerAuth.updateApp(app.provider, app.clientId, { webhook_id: null, webhook_secret: id });
}

/** A new Withings connection's notify subscriptions (Withings subscribes per user, with the user's token). */
export async function subscribeUser(deps: SubscriptionDeps, ctx: ProviderCallContext, provider: string): Promise<number[]> {
  if (provider !== 'withings') return [];
  return subscribeAll(ctx, pushUrl(deps.config, provider));
}
