import { ProviderFetchError } from '../../provider-errors';
import type { AppSubscriptionOutcome, AppSubscriptionState, ProviderCallContext } from '../contract';
import type { OuraDataType, OuraEventType, OuraWebhookSubscription } from './api-types';

/**
 * Oura's webhook subscription API (openapi-1.29 "Webhook Subscription Routes"; 1.37 tag text "Step 2"): the app,
 * not a user, authenticates with the `x-client-id` and `x-client-secret` headers (securitySchemes ClientIdAuth /
 * ClientSecretAuth), so these calls go out with `auth: 'none'` and those two headers. One subscription per
 * (event_type, data_type); on creation Oura verifies the callback with a GET `?verification_token&challenge` that
 * must echo `{"challenge": …}` (push.ts handshake). Subscriptions expire (`expiration_time`) and are renewed with
 * `PUT /v2/webhook/subscription/renew/{id}` (open-wearables renews monthly against a 90-day expiry).
 */
const API = 'https://api.ouraring.com';
const PATH = '/v2/webhook/subscription';

export type SubscriptionContext = Pick<ProviderCallContext, 'http' | 'client'>;

const appHeaders = (ctx: SubscriptionContext) => ({ 'x-client-id': ctx.client.clientId, 'x-client-secret': ctx.client.clientSecret });

function subscriptionOf(body: unknown, what: string): OuraWebhookSubscription {
  const s = body as Partial<OuraWebhookSubscription> | undefined;
  if (!s || typeof s !== 'object' || typeof s.id !== 'string' || typeof s.expiration_time !== 'string') {
    throw new ProviderFetchError('provider_unavailable', `oura: ${what} answered without a subscription (id, expiration_time)`);
  }
  return s as OuraWebhookSubscription;
}

export interface NewSubscription {
  callbackUrl: string;
  /** Echoed back in Oura's verification GET; the push handshake checks it (PushSecrets.verifyToken). */
  verificationToken: string;
  eventType: OuraEventType;
  dataType: OuraDataType;
}

/** `POST /v2/webhook/subscription` (201 WebhookSubscriptionModel). Oura verifies the callback before answering. */
export async function createSubscription(ctx: SubscriptionContext, sub: NewSubscription): Promise<OuraWebhookSubscription> {
  const res = await ctx.http.request({
    method: 'POST',
    url: `${API}${PATH}`,
    auth: 'none',
    headers: appHeaders(ctx),
    json: { callback_url: sub.callbackUrl, verification_token: sub.verificationToken, event_type: sub.eventType, data_type: sub.dataType },
  });
  return subscriptionOf(res.body, 'POST /v2/webhook/subscription');
}

/** `GET /v2/webhook/subscription`: the app's subscriptions. */
export async function listSubscriptions(ctx: SubscriptionContext): Promise<OuraWebhookSubscription[]> {
  const res = await ctx.http.request({ url: `${API}${PATH}`, auth: 'none', headers: appHeaders(ctx) });
  if (!Array.isArray(res.body)) throw new ProviderFetchError('provider_unavailable', 'oura: GET /v2/webhook/subscription answered without a list');
  return (res.body as unknown[]).map((s) => subscriptionOf(s, 'GET /v2/webhook/subscription'));
}

/** `PUT /v2/webhook/subscription/renew/{id}`: the subscription with its new `expiration_time`. */
export async function renewSubscription(ctx: SubscriptionContext, id: string): Promise<{ id: string; expiration_time: string }> {
  const res = await ctx.http.request({ method: 'PUT', url: `${API}${PATH}/renew/${encodeURIComponent(id)}`, auth: 'none', headers: appHeaders(ctx) });
  const s = subscriptionOf(res.body, 'PUT /v2/webhook/subscription/renew');
  return { id: s.id, expiration_time: s.expiration_time };
}

/** `DELETE /v2/webhook/subscription/{id}` (204). An unknown id is a 404 (non_retriable_error). */
export async function deleteSubscription(ctx: SubscriptionContext, id: string): Promise<void> {
  await ctx.http.request({ method: 'DELETE', url: `${API}${PATH}/${encodeURIComponent(id)}`, auth: 'none', headers: appHeaders(ctx) });
}

const SUBSCRIBED_DATA_TYPES: OuraDataType[] = ['sleep', 'daily_sleep', 'daily_activity', 'workout', 'daily_spo2'];
const SUBSCRIBED_EVENT_TYPES: OuraEventType[] = ['create', 'update'];

/** One subscription per (event type, data type) we fetch on: created where missing, renewed before it expires. */
export async function ensureAppSubscriptions(ctx: ProviderCallContext, app: AppSubscriptionState): Promise<AppSubscriptionOutcome> {
  const outcome: AppSubscriptionOutcome = { created: 0, renewed: 0 };
  const existing = (await listSubscriptions(ctx)).filter((s) => s.callback_url === app.callbackUrl);
  const kept: { id: string; key: string; expires_at: Date | null }[] = [];
  for (const dataType of SUBSCRIBED_DATA_TYPES) {
    for (const eventType of SUBSCRIBED_EVENT_TYPES) {
      let sub = existing.find((s) => s.data_type === dataType && s.event_type === eventType);
      if (!sub) {
        sub = await createSubscription(ctx, { callbackUrl: app.callbackUrl, verificationToken: app.verifyToken, eventType, dataType });
        outcome.created++;
      } else if (Date.parse(sub.expiration_time) <= app.renewBefore.getTime()) {
        sub = { ...sub, ...(await renewSubscription(ctx, sub.id)) };
        outcome.renewed++;
      }
      kept.push({ id: sub.id, key: `${eventType}.${dataType}`, expires_at: new Date(sub.expiration_time) });
    }
  }
  return { ...outcome, keep: { subscriptions: kept } };
}
