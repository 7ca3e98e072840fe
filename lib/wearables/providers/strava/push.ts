import type { PushNotification, PushRequest, PushSecrets, PushSpec } from '../contract';
import { sameText } from '../push-kit';
import type { StravaWebhookEvent } from './api-types';

/**
 * Strava's webhook events (developers.strava.com/docs/webhooks).
 *
 * - One subscription per application, managed with the app's client id and secret (subscriptions.ts). Creating one
 *   makes Strava GET the callback with `hub.mode=subscribe&hub.challenge=…&hub.verify_token=…`; the callback must
 *   answer 200 with `{"hub.challenge": …}` within two seconds (`handshake`).
 * - Events are POSTs of `{object_type, object_id, aspect_type, updates, owner_id, subscription_id, event_time}`,
 *   to be acknowledged with a 200 within two seconds; Strava retries "up to a total of three attempts".
 * - Strava signs nothing (no signature header; the hookdeck skill and open-wearables' handler, which only checks a
 *   timestamp, agree). What `verify` can check is that the event names OUR subscription: the lead passes the
 *   subscription id that createPushSubscription (subscriptions.ts) returned as `PushSecrets.webhookSecret`. Without
 *   it every event is refused (fail closed). The subscription id is not a secret from Strava's side, so an event is only ever a hint:
 *   `parse` names what to fetch and the data comes from the API with the user's token.
 * - Age: `event_time` is unsigned (a forger sets it freely), and a genuine retry arrives minutes after the event (a
 *   third attempt; one report has retries ~2 minutes apart, github grisxa/brevet-top-strava-webhook). Rejecting at 5
 *   minutes would drop genuine retries, so an event is refused only when it is over an hour old (an obvious replay) or
 *   more than 5 minutes in the future (clock skew bound).
 */
const MAX_EVENT_AGE_SECONDS = 3600;
const MAX_FUTURE_SKEW_SECONDS = 300;

const OBJECT_TYPES = new Set(['activity', 'athlete']);
const ASPECT_TYPES = new Set(['create', 'update', 'delete']);
const isId = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v > 0;

/** The event in a POST body, or null when the body is not a well-formed Strava event. */
export function parseStravaEvent(rawBody: Buffer): StravaWebhookEvent | null {
  let json: unknown;
  try {
    json = JSON.parse(rawBody.toString('utf8'));
  } catch {
    return null;
  }
  if (!json || typeof json !== 'object' || Array.isArray(json)) return null;
  const e = json as Record<string, unknown>;
  if (typeof e.object_type !== 'string' || !OBJECT_TYPES.has(e.object_type)) return null;
  if (typeof e.aspect_type !== 'string' || !ASPECT_TYPES.has(e.aspect_type)) return null;
  if (!isId(e.object_id) || !isId(e.owner_id) || !isId(e.subscription_id) || typeof e.event_time !== 'number' || !Number.isFinite(e.event_time)) return null;
  if (e.updates !== undefined && e.updates !== null && (typeof e.updates !== 'object' || Array.isArray(e.updates))) return null;
  const updates = Object.fromEntries(Object.entries((e.updates ?? {}) as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
  return {
    object_type: e.object_type as StravaWebhookEvent['object_type'],
    object_id: e.object_id,
    aspect_type: e.aspect_type as StravaWebhookEvent['aspect_type'],
    updates,
    owner_id: e.owner_id,
    subscription_id: e.subscription_id,
    event_time: e.event_time,
  };
}

export const stravaPush: PushSpec = {
  signed: false,
  handshake(req: PushRequest, secrets: PushSecrets) {
    const challenge = req.query['hub.challenge'];
    if (req.query['hub.mode'] !== 'subscribe' || !challenge) return null;
    const token = req.query['hub.verify_token'] ?? '';
    if (!secrets.verifyToken || !sameText(token, secrets.verifyToken)) return { status: 403, body: { error: 'hub.verify_token does not match' } };
    return { status: 200, body: { 'hub.challenge': challenge } };
  },

  verify(req: PushRequest, secrets: PushSecrets, now: Date): boolean {
    const event = parseStravaEvent(req.rawBody);
    if (!event || !secrets.webhookSecret) return false;
    if (!sameText(String(event.subscription_id), secrets.webhookSecret)) return false;
    const age = now.getTime() / 1000 - event.event_time;
    return age <= MAX_EVENT_AGE_SECONDS && age >= -MAX_FUTURE_SKEW_SECONDS;
  },

  /**
   * - athlete update with `updates.authorized = "false"`: the athlete removed our app → deauthorized;
   * - another athlete event (none documented): re-read the profile;
   * - activity create: fetch the activity (`workouts`) and its streams (`workout_stream`); update (title, type,
   *   privacy): fetch the activity again;
   * - activity delete: nothing to fetch, and the contract has no deletion notice: ignored (see the report).
   * Strava's retries of one event carry the same event_time, so the dedupe key repeats with them.
   */
  parse(req: PushRequest): PushNotification[] {
    const e = parseStravaEvent(req.rawBody);
    if (!e) return [];
    const externalUserId = String(e.owner_id);
    const key = `strava:${e.subscription_id}:${e.object_type}:${e.object_id}:${e.aspect_type}:${e.event_time}`;
    const data = (resource: string): PushNotification => ({
      kind: 'data',
      externalUserId,
      resource,
      objectId: String(e.object_id),
      dedupeKey: `${key}:${resource}`,
    });
    if (e.object_type === 'athlete') return e.updates?.authorized === 'false' ? [{ kind: 'deauthorized', externalUserId, dedupeKey: key }] : [data('profile')];
    if (e.aspect_type === 'create') return [data('workouts'), data('workout_stream')];
    if (e.aspect_type === 'update') return [data('workouts')];
    return [];
  },
};
