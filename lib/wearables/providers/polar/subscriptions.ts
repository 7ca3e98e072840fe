/**
 * Polar's webhook management API (docs "Webhooks", newpush/coach docs/apis/polar.md; tryAGI/Polar openapi.yaml
 * `/v3/webhooks`), authenticated with the app's client credentials (HTTP Basic), never a user token. One webhook per
 * client. Creating it makes Polar POST a PING to the URL, which must answer 200 or creation fails (400); the answer
 * holds `signature_secret_key` — the only time Polar ever shows it: store it as PushSecrets.webhookSecret.
 */
import { ProviderFetchError } from '../../provider-errors';
import type { AppSubscriptionOutcome, AppSubscriptionState, ProviderCallContext } from '../contract';
import type { PolarWebhookEvent } from './api-types';

export const POLAR_API = 'https://www.polaraccesslink.com';

/** The events we subscribe to: the ones whose data we pull (SleepWise™ is not pulled). */
export const POLAR_WEBHOOK_EVENTS: PolarWebhookEvent[] = ['EXERCISE', 'SLEEP', 'CONTINUOUS_HEART_RATE', 'ACTIVITY_SUMMARY'];

export interface PolarCreatedWebhook {
  id: string;
  events: PolarWebhookEvent[];
  url: string;
  signature_secret_key: string;
}

export interface PolarWebhookInfo {
  id: string;
  events: PolarWebhookEvent[];
  url: string;
  active: boolean;
}

type Ctx = Pick<ProviderCallContext, 'http'>;

/** POST /v3/webhooks → 201 `{data: {id, events, url, signature_secret_key}}`; 409 when the client already has one. */
export async function createWebhook(ctx: Ctx, opts: { url: string; events?: PolarWebhookEvent[] }): Promise<PolarCreatedWebhook> {
  const res = await ctx.http.request<{ data?: Partial<PolarCreatedWebhook> }>({
    method: 'POST',
    url: `${POLAR_API}/v3/webhooks`,
    auth: 'client-basic',
    json: { events: opts.events ?? POLAR_WEBHOOK_EVENTS, url: opts.url },
  });
  const data = res.body?.data;
  if (!data?.id || !data.signature_secret_key)
    throw new ProviderFetchError('provider_unavailable', `polar: POST /v3/webhooks answered ${res.status} without a webhook id and signature key`);
  return {
    id: data.id,
    events: data.events ?? opts.events ?? POLAR_WEBHOOK_EVENTS,
    url: data.url ?? opts.url,
    signature_secret_key: data.signature_secret_key,
  };
}

/** GET /v3/webhooks → the client's webhook (`data` is a list of at most one), or null when it has none. */
export async function getWebhook(ctx: Ctx): Promise<PolarWebhookInfo | null> {
  const res = await ctx.http.request<{ data?: PolarWebhookInfo[] | PolarWebhookInfo }>({
    url: `${POLAR_API}/v3/webhooks`,
    auth: 'client-basic',
    accept: [204],
  });
  const data = res.body?.data;
  const hook = Array.isArray(data) ? data[0] : data;
  return hook?.id ? { id: hook.id, events: hook.events ?? [], url: hook.url, active: hook.active !== false } : null;
}

/**
 * POST /v3/webhooks/activate: re-activates a webhook Polar deactivated after seven days of failed deliveries (it
 * PINGs the URL first). True when activated, false when the client has no webhook (204).
 */
export async function activateWebhook(ctx: Ctx): Promise<boolean> {
  const res = await ctx.http.request({ method: 'POST', url: `${POLAR_API}/v3/webhooks/activate`, auth: 'client-basic', accept: [204] });
  return res.status === 200;
}

/** POST /v3/webhooks/deactivate: true when deactivated, false when there is no webhook (204). */
export async function deactivateWebhook(ctx: Ctx): Promise<boolean> {
  const res = await ctx.http.request({ method: 'POST', url: `${POLAR_API}/v3/webhooks/deactivate`, auth: 'client-basic', accept: [204] });
  return res.status === 200;
}

/** DELETE /v3/webhooks/{webhook-id}; a webhook already gone (404) counts as deleted. */
export async function deleteWebhook(ctx: Ctx, id: string): Promise<void> {
  await ctx.http.request({ method: 'DELETE', url: `${POLAR_API}/v3/webhooks/${encodeURIComponent(id)}`, auth: 'client-basic', accept: [404] });
}

/** The client's one webhook, pointing at us and with a secret we hold; one we cannot verify (created elsewhere) is replaced. */
export async function ensureAppSubscriptions(ctx: Ctx, app: AppSubscriptionState): Promise<AppSubscriptionOutcome> {
  const current = await getWebhook(ctx);
  if (current && app.stored?.webhook_secret && app.stored.webhook_id === current.id && current.url === app.callbackUrl) return { created: 0, renewed: 0 };
  // The secret is returned only when a webhook is created.
  if (current) await deleteWebhook(ctx, current.id);
  const created = await createWebhook(ctx, { url: app.callbackUrl });
  return { created: 1, renewed: 0, keep: { webhook_id: created.id, webhook_secret: created.signature_secret_key } };
}
