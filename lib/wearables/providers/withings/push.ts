import type { PushNotification, PushRequest, PushSpec } from '../contract';
import { addDays } from '../../../platform/time';
import { utcDate } from './time';

/**
 * Withings notifications (developer.withings.com …/data-api/notifications: notification-subscribe, notification-content;
 * api-reference Notify - Subscribe/List/Get/Revoke).
 * - Per user: `POST /notify action=subscribe&callbackurl&appli` with that user's access token, once per appli
 *   (subscriptions.ts).
 * - At subscribe time Withings sends a HEAD to the callback URL and needs a 2xx, or the subscription fails.
 * - A notification is an application/x-www-form-urlencoded POST with `userid, appli, startdate, enddate` (epochs), or
 *   `date` for event-like ones, and `action` (delete | unlink | update) for appli 46 profile changes. It is UNSIGNED:
 *   nothing proves it comes from Withings, so it is only a hint that makes us fetch the named window with the user's
 *   own token; a forged one costs a pull and can plant no data.
 * - The receiver must answer 200 within 2 s; four failures in a row remove the subscription (data-update-notifications).
 */

/** Notification categories (`appli`) by name; the ones we subscribe to are subscriptions.ts SUBSCRIBED_APPLIS. */
export const NOTIFY_APPLI = { weight: 1, temperature: 2, bloodPressure: 4, activity: 16, sleep: 44, user: 46, bedIn: 50, bedOut: 51 } as const;

/** The pull units a data notification makes us fetch. */
export const APPLI_RESOURCES: Record<number, string[]> = {
  1: ['body'],
  2: ['body'],
  4: ['body'],
  16: ['activity', 'workouts', 'heartrate'],
  44: ['sleep'],
};

/** The form fields of a notification, or null when it is not one (no numeric userid and appli). */
export function notificationFields(req: PushRequest): Record<string, string> | null {
  const type = req.headers['content-type'] ?? '';
  if (type && !type.includes('application/x-www-form-urlencoded')) return null;
  const form = Object.fromEntries(new URLSearchParams(req.rawBody.toString('utf8')));
  if (!/^\d+$/.test(form.userid ?? '') || !/^\d+$/.test(form.appli ?? '')) return null;
  return form;
}

/** `date` as sent (YYYY-MM-DD, or an epoch) → a UTC calendar date. */
function dateField(value: string | undefined): string | null {
  if (!value) return null;
  if (/^\d{4}-\d{2}-\d{2}$/.test(value)) return value;
  if (/^\d+$/.test(value)) return utcDate(Number(value));
  return null;
}

/**
 * The local dates to fetch for a notification: its epoch range as UTC dates, widened by a day on each side, so that
 * whatever the user's offset (at most ±14 h) the local days the data fall on are covered.
 */
export function notificationWindow(form: Record<string, string>): { startDate: string; endDate: string } | undefined {
  const start = /^\d+$/.test(form.startdate ?? '') ? utcDate(Number(form.startdate)) : dateField(form.date);
  const end = /^\d+$/.test(form.enddate ?? '') ? utcDate(Number(form.enddate)) : (dateField(form.date) ?? start);
  if (!start || !end) return undefined;
  const [from, to] = start <= end ? [start, end] : [end, start];
  return { startDate: addDays(from, -1), endDate: addDays(to, 1) };
}

export function parseNotification(req: PushRequest): PushNotification[] {
  const form = notificationFields(req);
  if (!form) return [];
  const userid = form.userid;
  const appli = Number(form.appli);
  const dedupe = ['withings', userid, appli, form.startdate ?? '', form.enddate ?? '', form.date ?? '', form.action ?? ''].join(':');
  if (appli === NOTIFY_APPLI.user) {
    // "action: delete if user is deleted, unlink if user unlinks your app, update if user updates their information".
    if (form.action === 'unlink' || form.action === 'delete') return [{ kind: 'deauthorized', externalUserId: userid, dedupeKey: dedupe }];
    if (form.action === 'update') return [{ kind: 'data', externalUserId: userid, resource: 'profile', dedupeKey: `${dedupe}:profile` }];
    return [];
  }
  const resources = APPLI_RESOURCES[appli];
  if (!resources) return []; // bed in/out and categories we do not subscribe to carry nothing to fetch
  const window = notificationWindow(form);
  return resources.map((resource) => ({
    kind: 'data' as const,
    externalUserId: userid,
    resource,
    ...(window ? { window } : {}),
    dedupeKey: `${dedupe}:${resource}`,
  }));
}

export const withingsPush: PushSpec = {
  signed: false,
  // Withings checks the callback with a HEAD (a GET is answered the same way); any 2xx does.
  handshake(req) {
    return req.method === 'HEAD' || req.method === 'GET' ? { status: 200 } : null;
  },
  // Unsigned: there is no signature or timestamp to check. A well-formed notification is accepted as a hint (we fetch
  // with the user's own token); a body that is not a notification is refused.
  verify(req) {
    return notificationFields(req) !== null;
  },
  parse: parseNotification,
};
