/**
 * Polar AccessLink webhooks (docs "Accesslink webhooks" and "Webhooks", newpush/coach docs/apis/polar.md):
 * - every POST carries `Polar-Webhook-Event` (the event) and `Polar-Webhook-Signature` = hex HMAC-SHA256 of the raw
 *   body keyed with the `signature_secret_key` Polar returned — once — when the webhook was created;
 * - the body names the event, the Polar `user_id`, the object (`entity_id` for EXERCISE, `date` for SLEEP,
 *   CONTINUOUS_HEART_RATE and ACTIVITY_SUMMARY, `from`/`to` for SLEEP_WISE_*) and the `timestamp` it was sent at;
 * - a PING (`{"timestamp", "event": "PING"}`) is sent when the webhook is created, updated or re-activated, and must
 *   be answered 200 or the webhook is not created.
 * Polar documents no deauthorization event: a user who removes our access shows up as 401s on the next pull.
 */
import type { PushNotification, PushRequest, PushSecrets, PushSpec } from '../contract';
import { freshWithin, hmacSha256, pushHeader, sameText } from '../push-kit';
import type { PolarWebhookPayload } from './api-types';

export const SIGNATURE_HEADER = 'polar-webhook-signature';
export const EVENT_HEADER = 'polar-webhook-event';

function payloadOf(req: PushRequest): PolarWebhookPayload | null {
  try {
    const body: unknown = JSON.parse(req.rawBody.toString('utf8'));
    return body && typeof body === 'object' && !Array.isArray(body) ? (body as PolarWebhookPayload) : null;
  } catch {
    return null;
  }
}

/** hex HMAC-SHA256(secret, body): how Polar signs (docs "Verifying payload signature"). */
export const polarSignature = (secret: string, body: Buffer | string) => hmacSha256(secret, [body], 'hex');

const isPing = (req: PushRequest, body: PolarWebhookPayload) =>
  body.event === 'PING' && (pushHeader(req, EVENT_HEADER) ?? 'PING') === 'PING' && body.user_id === undefined;

export function verifyPolarPush(req: PushRequest, secrets: PushSecrets, now: Date): boolean {
  const body = payloadOf(req);
  if (!body) return false;
  // The creation PING arrives before Polar has told us the secret it is signed with (the secret is in the answer to
  // the very request that triggers the PING), so it cannot be verified; it names nothing and triggers nothing, and
  // refusing it would make creating the webhook impossible (open-wearables answers it before verification too).
  if (isPing(req, body)) return true;
  const secret = secrets.webhookSecret;
  const signature = pushHeader(req, SIGNATURE_HEADER)?.trim().toLowerCase();
  if (!secret || !signature || !/^[0-9a-f]{64}$/.test(signature)) return false;
  if (!sameText(signature, polarSignature(secret, req.rawBody))) return false;
  // The event header, when present, must name the signed body's event.
  const event = pushHeader(req, EVENT_HEADER);
  if (event !== undefined && event !== body.event) return false;
  const sentAt = typeof body.timestamp === 'string' ? Date.parse(body.timestamp) : Number.NaN;
  // A push whose `timestamp` is further than 5 minutes from now is refused (a replayed or stale push).
  return freshWithin(now, sentAt);
}

/** Which pull unit an event makes us fetch (SleepWise™ data is not pulled, so its events are ignored). */
const RESOURCE_OF: Record<string, string[]> = {
  EXERCISE: ['workouts'],
  // Nightly Recharge (HRV) has no event of its own; it is computed from the night a SLEEP event announces.
  SLEEP: ['sleep', 'hrv'],
  CONTINUOUS_HEART_RATE: ['heartrate'],
  ACTIVITY_SUMMARY: ['activity'],
  // Not in Polar's documented event list, but open-wearables lists it (schemas/providers/polar/webhook.py).
  PHYSICAL_INFORMATION: ['body'],
};

export function parsePolarPush(req: PushRequest): PushNotification[] {
  const body = payloadOf(req);
  if (!body) return [];
  if (isPing(req, body)) return [{ kind: 'ping' }];
  const event = String(body.event ?? '');
  const resources = RESOURCE_OF[event];
  const user = body.user_id;
  if (!resources || user === undefined || user === null || user === '') return [];
  const externalUserId = String(user);
  // The same notification delivered twice has the same key; a later one for the same object (new timestamp) does
  // not, and fetches again — which is harmless: the object's source_key makes the second copy replace the first.
  const notice = `${body.entity_id ?? body.date ?? ''}:${body.timestamp ?? ''}`;
  const out: PushNotification[] = [];
  for (const resource of resources) {
    const dedupeKey = `polar:${event}:${externalUserId}:${resource}:${notice}`;
    if (event === 'EXERCISE') {
      if (body.entity_id) out.push({ kind: 'data', externalUserId, resource, objectId: body.entity_id, dedupeKey });
    } else if (event === 'PHYSICAL_INFORMATION') {
      out.push({ kind: 'data', externalUserId, resource, dedupeKey });
    } else if (typeof body.date === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(body.date)) {
      out.push({ kind: 'data', externalUserId, resource, window: { startDate: body.date, endDate: body.date }, dedupeKey });
    }
  }
  return out;
}

export const polarPush: PushSpec = {
  signed: true,
  verify: verifyPolarPush,
  parse: parsePolarPush,
};
