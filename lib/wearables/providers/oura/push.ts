import type { PushNotification, PushRequest, PushSecrets, PushSpec } from '../contract';
import { freshWithin, hmacSha256, pushHeader, sameText } from '../push-kit';
import type { OuraWebhookEvent } from './api-types';

/**
 * Oura's webhooks (openapi-1.37 tag "Webhook Subscription Routes"):
 * - Verification: `GET {callback}?verification_token=…&challenge=…`; the endpoint checks the token it chose when
 *   subscribing and answers `{"challenge": "<challenge>"}` (a wrong token: 401, as Oura's own example does).
 * - Events: `POST` with `x-oura-signature` = HMAC-SHA256(client_secret, x-oura-timestamp + raw body) as UPPERCASE hex
 *   and `x-oura-timestamp` in Unix seconds (`1234567890`); body `{event_type, data_type, object_id, event_time,
 *   user_id}`. The event only names the changed document ("Use the object_id to fetch the complete data via the API").
 */

/** Oura `data_type` → our pull unit. `daily_sleep` carries the sleep score, which lives on the sleep summary. */
export const RESOURCE_OF_DATA_TYPE: Record<string, string> = {
  sleep: 'sleep',
  daily_sleep: 'sleep',
  workout: 'workouts',
  daily_activity: 'activity',
  daily_spo2: 'blood_oxygen',
};

/**
 * The objectId of a `daily_sleep` event: the score document is fetched first and the day's sleep periods with it
 * (index.ts fetchObject), so its id is told apart from a sleep period's id.
 */
export const DAILY_SLEEP_PREFIX = 'daily_sleep:';

/** The signature Oura puts in `x-oura-signature` for this timestamp and body. */
export function ouraSignature(clientSecret: string, timestamp: string, rawBody: Buffer | string): string {
  return hmacSha256(clientSecret, [timestamp, rawBody], 'hex').toUpperCase();
}

/** `x-oura-timestamp` as ms: Unix seconds as documented (a 13-digit value is taken as ms). */
function timestampMs(value: string | undefined): number | null {
  if (!value || !/^\d{1,16}$/.test(value.trim())) return null;
  const n = Number(value.trim());
  return n >= 1e12 ? n : n * 1000;
}

export const push: PushSpec = {
  signed: true,
  handshake(req: PushRequest, secrets: PushSecrets) {
    const challenge = req.query.challenge;
    if (challenge === undefined) return null;
    const token = req.query.verification_token ?? '';
    if (!secrets.verifyToken || !sameText(token, secrets.verifyToken)) return { status: 401, body: { error: 'invalid_verification_token' } };
    return { status: 200, body: { challenge } };
  },

  verify(req: PushRequest, secrets: PushSecrets, now: Date): boolean {
    const signature = pushHeader(req, 'x-oura-signature');
    const stamp = pushHeader(req, 'x-oura-timestamp');
    const at = timestampMs(stamp);
    if (!signature || !stamp || at === null || !secrets.clientSecret) return false;
    if (!freshWithin(now, at)) return false;
    const expected = ouraSignature(secrets.clientSecret, stamp, req.rawBody);
    // Oura sends uppercase hex; a receiver comparing case-insensitively (open-wearables does) accepts lowercase too.
    return sameText(signature.trim().toUpperCase(), expected);
  },

  parse(req: PushRequest): PushNotification[] {
    let event: Partial<OuraWebhookEvent>;
    try {
      event = JSON.parse(req.rawBody.toString('utf8')) as Partial<OuraWebhookEvent>;
    } catch {
      return [];
    }
    if (!event || typeof event !== 'object') return [];
    const { event_type, data_type, object_id, event_time, user_id } = event;
    if (typeof user_id !== 'string' || !user_id || typeof object_id !== 'string' || !object_id || typeof data_type !== 'string') return [];
    const resource = RESOURCE_OF_DATA_TYPE[data_type];
    // A deletion names a document that is gone: there is nothing to fetch, and the contract has no deletion notice.
    if (!resource || event_type === 'delete') return [];
    return [
      {
        kind: 'data',
        externalUserId: user_id,
        resource,
        objectId: data_type === 'daily_sleep' ? `${DAILY_SLEEP_PREFIX}${object_id}` : object_id,
        dedupeKey: `oura:${data_type}:${object_id}:${String(event_type)}:${String(event_time ?? '')}`,
      },
    ];
  },
};
