import type { PushNotification, PushRequest, PushSecrets, PushSpec } from '../contract';
import { freshWithin, hmacSha256, pushHeader, sameText } from '../push-kit';
import { WHOOP_WEBHOOK_TYPES, type WhoopWebhookType } from './api-types';

/**
 * WHOOP webhooks (developer.whoop.com/docs/developing/webhooks; api-evangelist/whoop-co
 * `examples/whoop-webhook-sleep-updated-example.json`; the-momentum/open-wearables
 * `backend/app/services/providers/whoop/webhook_handler.py`):
 * - the URL is set per app in the developer dashboard: no registration API, no handshake;
 * - a POST with JSON `{user_id, id, type, trace_id}`; v2 ids are UUIDs, and a recovery event's `id` is the UUID of
 *   the recovery's sleep;
 * - `X-WHOOP-Signature` = base64(HMAC-SHA256(client_secret, X-WHOOP-Signature-Timestamp + raw body)), the timestamp
 *   in milliseconds since the epoch.
 *
 * A notification only names what changed; the data is fetched (fetchObject). `*.updated` for a sleep or its recovery
 * fetches the sleep (which joins its recovery); `workout.updated` the workout. `*.deleted` events yield nothing: our
 * contract has no deletion, and fetching a deleted object only finds a 404, so they are acknowledged and dropped.
 */
export const WHOOP_SIGNATURE_HEADER = 'x-whoop-signature';
export const WHOOP_TIMESTAMP_HEADER = 'x-whoop-signature-timestamp';

/** The signature WHOOP puts in X-WHOOP-Signature for a body sent with `timestampMs`. */
export function whoopSignature(clientSecret: string, timestampMs: string, rawBody: Buffer | string): string {
  return hmacSha256(clientSecret, [timestampMs, rawBody], 'base64');
}

function verify(req: PushRequest, secrets: PushSecrets, now: Date): boolean {
  const signature = pushHeader(req, WHOOP_SIGNATURE_HEADER)?.trim();
  const timestamp = pushHeader(req, WHOOP_TIMESTAMP_HEADER)?.trim();
  if (!signature || !timestamp || !/^\d{1,16}$/.test(timestamp) || !secrets.clientSecret) return false;
  // Pushes older (or further in the future) than 5 minutes are refused: a replayed capture cannot be re-sent later.
  if (!freshWithin(now, Number(timestamp))) return false;
  // Compared as text: decoding would skip stray characters and accept a signature that is not the one WHOOP sent.
  return sameText(signature, whoopSignature(secrets.clientSecret, timestamp, req.rawBody));
}

/** The pull unit an update event's object belongs to. */
const RESOURCE_OF: Partial<Record<WhoopWebhookType, string>> = { 'sleep.updated': 'sleep', 'recovery.updated': 'sleep', 'workout.updated': 'workouts' };

function parse(req: PushRequest): PushNotification[] {
  let body: unknown;
  try {
    body = JSON.parse(req.rawBody.toString('utf8'));
  } catch {
    return [];
  }
  if (!body || typeof body !== 'object') return [];
  const { user_id: userId, id, type, trace_id: traceId } = body as Record<string, unknown>;
  if ((typeof userId !== 'number' && typeof userId !== 'string') || String(userId) === '') return [];
  if ((typeof id !== 'string' && typeof id !== 'number') || String(id) === '') return [];
  if (typeof type !== 'string' || !(WHOOP_WEBHOOK_TYPES as readonly string[]).includes(type)) return [];
  const resource = RESOURCE_OF[type as WhoopWebhookType];
  if (!resource) return []; // *.deleted: see above
  // trace_id names the event; WHOOP's retries of it carry the same one.
  const eventKey = typeof traceId === 'string' && traceId ? traceId : (pushHeader(req, WHOOP_TIMESTAMP_HEADER) ?? '');
  return [{ kind: 'data', externalUserId: String(userId), resource, objectId: String(id), dedupeKey: `whoop_v2:${type}:${String(id)}:${eventKey}` }];
}

export const whoopPush: PushSpec = { signed: true, verify, parse };
