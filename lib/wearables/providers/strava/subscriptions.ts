import { ProviderFetchError } from '../../provider-errors';
import type { AppSubscriptionOutcome, AppSubscriptionState, ProviderCallContext } from '../contract';
import type { StravaPushSubscription } from './api-types';

/**
 * Strava's push subscription API (developers.strava.com/docs/webhooks): one subscription per application, managed
 * with the app's client id and secret, never a user token. Creating one makes Strava run the hub.challenge handshake
 * (push.ts) before it answers.
 */
export const PUSH_SUBSCRIPTIONS_URL = 'https://www.strava.com/api/v3/push_subscriptions';

const appCredentials = (ctx: ProviderCallContext) => ({ client_id: ctx.client.clientId, client_secret: ctx.client.clientSecret });

/**
 * Creates the app's one subscription (form fields client_id, client_secret, callback_url, verify_token). Strava
 * validates the callback with the hub.challenge GET during this request and answers `{"id": …}`; a second
 * subscription, or a callback that fails the challenge, is a 400 (ProviderFetchError non_retriable_error).
 * The returned id is what `verify` expects as PushSecrets.webhookSecret.
 */
export async function createPushSubscription(ctx: ProviderCallContext, opts: { callbackUrl: string; verifyToken: string }): Promise<{ id: string }> {
  const res = await ctx.http.request<{ id?: unknown }>({
    method: 'POST',
    url: PUSH_SUBSCRIPTIONS_URL,
    auth: 'none',
    form: { ...appCredentials(ctx), callback_url: opts.callbackUrl, verify_token: opts.verifyToken },
  });
  const id = res.body?.id;
  if (typeof id !== 'number' && typeof id !== 'string') throw new ProviderFetchError('unexpected_error', 'strava: push subscription created without an id');
  return { id: String(id) };
}

/** The app's subscriptions (zero or one): GET /push_subscriptions?client_id&client_secret. */
export async function listPushSubscriptions(ctx: ProviderCallContext): Promise<StravaPushSubscription[]> {
  const res = await ctx.http.request<StravaPushSubscription[]>({ url: PUSH_SUBSCRIPTIONS_URL, auth: 'none', query: appCredentials(ctx) });
  return Array.isArray(res.body) ? res.body : [];
}

/** Deletes a subscription (204; changelog Nov 9, 2023: DELETE takes the credentials as query parameters). A 404 means already gone. */
export async function deletePushSubscription(ctx: ProviderCallContext, id: string): Promise<void> {
  await ctx.http.request({
    method: 'DELETE',
    url: `${PUSH_SUBSCRIPTIONS_URL}/${encodeURIComponent(id)}`,
    auth: 'none',
    query: appCredentials(ctx),
    accept: [404],
  });
}

/** The app's one subscription, pointing at us (one elsewhere goes first); its id is what events are checked against. */
export async function ensureAppSubscriptions(ctx: ProviderCallContext, app: AppSubscriptionState): Promise<AppSubscriptionOutcome> {
  const current = (await listPushSubscriptions(ctx))[0];
  let id = current && current.callback_url === app.callbackUrl ? String(current.id) : null;
  let created = 0;
  if (!id) {
    // Strava allows one subscription per app and checks our handshake before answering.
    if (current) await deletePushSubscription(ctx, String(current.id));
    id = (await createPushSubscription(ctx, { callbackUrl: app.callbackUrl, verifyToken: app.verifyToken })).id;
    created = 1;
  }
  // Kept sealed only (webhook_secret), never in plaintext: it is all that tells a genuine event from a forged one.
  return { created, renewed: 0, keep: { webhook_id: null, webhook_secret: id } };
}
