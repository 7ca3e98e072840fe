import { ProviderFetchError } from '../../provider-errors';
import type { ProviderData } from '../../model';
import type { PageCursor, ProviderCallContext, ProviderIntegration, ProviderPage, PullWindow } from '../contract';
import type { GetmeasBody, WithingsActivity, WithingsIntradayEntry, WithingsSleepSegment, WithingsSleepSummary, WithingsWorkout } from './api-types';
import { RATE_LIMIT_WINDOW_MS, URLS, callSigned, callWithings, isUnauthorizedEnvelope, unwrapTokenEnvelope } from './client';
import {
  BODY_MEASTYPES,
  MEASTYPE,
  SLEEP_SERIES_FIELDS,
  SLEEP_SUMMARY_FIELDS,
  latestHeightMetres,
  mapActivity,
  mapIntraday,
  mapMeasureGroups,
  mapProfile,
  mapSleepSeries,
  mapSleepSummary,
  mapWorkout,
} from './mapping';
import { withingsPush } from './push';
import { listNotifications, subscribeAll } from './subscriptions';

export { NOTIFY_APPLI, APPLI_RESOURCES } from './push';
export { subscribeNotifications, subscribeAll, listNotifications, revokeNotification, SUBSCRIBED_APPLIS } from './subscriptions';
export { withingsSignature, statusFamily, envelopeError, isUnauthorizedEnvelope } from './client';

/**
 * Withings Public Health Data API (base https://wbsapi.withings.net; RPC style: every call a POST form with an `action`,
 * every answer a `{status, body}` envelope). Sources: developer.withings.com api-reference (copy at api-evangelist/withings
 * openapi/_original/withings-data-api-openapi.yml), developer.withings.com/llms.md and guides, tryAGI/Withings
 * src/libs/Withings/openapi.yaml, AE examples, and the-momentum/open-wearables PR #1177 notes.
 */

/** Getintradayactivity and Sleep v2 - Get return "only the first 24h after startdate" of a longer range. */
const DAY_S = 86_400;
/** A sleep night belongs to the day it ends on: Sleep v2 - Get is asked noon → noon so one request holds one night. */
const NOON_S = 12 * 3600;

const ACTIVITY_FIELDS =
  'steps,distance,elevation,soft,moderate,intense,active,calories,totalcalories,hr_average,hr_min,hr_max,hr_zone_0,hr_zone_1,hr_zone_2,hr_zone_3';
const WORKOUT_FIELDS =
  'calories,intensity,manual_distance,manual_calories,hr_average,hr_min,hr_max,hr_zone_0,hr_zone_1,hr_zone_2,hr_zone_3,pause_duration,algo_pause_duration,spo2_average,steps,distance,elevation,pool_laps,strokes,pool_length';
const INTRADAY_FIELDS = 'steps,elevation,calories,distance,duration,heart_rate,spo2_auto';

/** The device type a pull records (part of the sample key, so constant per pull unit). */
const SOURCE_TYPE: Record<string, string> = { body: 'unknown', profile: 'unknown', activity: 'watch', workouts: 'watch', sleep: 'unknown', heartrate: 'watch' };

const RESOURCES = ['profile', 'body', 'activity', 'workouts', 'sleep', 'heartrate'];

const empty = (resource: string): ProviderData => ({ source_type: SOURCE_TYPE[resource] ?? 'unknown', summaries: [], samples: [], workout_streams: [] });
const str = (c: PageCursor, k: string): string => String(c[k]);
const int = (c: PageCursor, k: string): number => Number(c[k] ?? 0);
/** `more` is 0/1 on getmeas and a boolean on the v2 services. */
const hasMore = (body: { more?: number | boolean; offset?: number }, offset: number) =>
  Boolean(body.more) && typeof body.offset === 'number' && body.offset > offset;

function firstPage(resource: string, window: PullWindow): PageCursor | null {
  const from = Math.floor(window.start.getTime() / 1000);
  const to = Math.floor(window.end.getTime() / 1000);
  if (to <= from || window.endDate < window.startDate) return null;
  const tz = window.timezoneOffsetSeconds;
  switch (resource) {
    case 'profile':
      return { offset: 0, reported_on: window.endDate, tz };
    case 'body':
      // First the user's height (for BMI), then the window's measures.
      return { phase: 'height', startdate: from, enddate: to - 1, offset: 0, height: null, tz };
    case 'activity':
    case 'workouts':
      return { startdateymd: window.startDate, enddateymd: window.endDate, offset: 0, tz };
    case 'sleep':
      return { phase: 'summary', startdateymd: window.startDate, enddateymd: window.endDate, offset: 0, from, to, tz };
    case 'heartrate':
      return { from, to, chunk: from };
    default:
      return null;
  }
}

async function fetchPage(ctx: ProviderCallContext, resource: string, c: PageCursor): Promise<ProviderPage> {
  const data = empty(resource);
  const tz = int(c, 'tz');
  const offset = int(c, 'offset');
  const offsetField = offset > 0 ? offset : undefined;
  switch (resource) {
    case 'profile': {
      const body = await callWithings<GetmeasBody>(ctx.http, URLS.measure, { action: 'getmeas', meastype: MEASTYPE.height, category: 1, offset: offsetField });
      data.summaries.push(...mapProfile(body.measuregrps ?? [], str(c, 'reported_on'), tz));
      return { data, next: hasMore(body, offset) ? { ...c, offset: body.offset! } : null };
    }
    case 'body': {
      if (c.phase === 'height') {
        const body = await callWithings<GetmeasBody>(ctx.http, URLS.measure, { action: 'getmeas', meastype: MEASTYPE.height, category: 1 });
        return { data, next: { ...c, phase: 'measures', offset: 0, height: latestHeightMetres(body.measuregrps ?? []) } };
      }
      const body = await callWithings<GetmeasBody>(ctx.http, URLS.measure, {
        action: 'getmeas',
        meastypes: BODY_MEASTYPES.join(','),
        category: 1,
        startdate: int(c, 'startdate'),
        enddate: int(c, 'enddate'),
        offset: offsetField,
      });
      const mapped = mapMeasureGroups(body, { heightMetres: typeof c.height === 'number' ? c.height : null, fallbackOffset: tz });
      data.summaries.push(...mapped.summaries);
      data.samples.push(...mapped.samples);
      return { data, next: hasMore(body, offset) ? { ...c, offset: body.offset! } : null };
    }
    case 'activity': {
      const body = await callWithings<{ activities?: WithingsActivity[]; more?: boolean; offset?: number }>(ctx.http, URLS.measureV2, {
        action: 'getactivity',
        startdateymd: str(c, 'startdateymd'),
        enddateymd: str(c, 'enddateymd'),
        data_fields: ACTIVITY_FIELDS,
        offset: offsetField,
      });
      data.summaries.push(...(body.activities ?? []).map((a) => mapActivity(a, tz)));
      return { data, next: hasMore(body, offset) ? { ...c, offset: body.offset! } : null };
    }
    case 'workouts': {
      const body = await callWithings<{ series?: WithingsWorkout[]; more?: boolean; offset?: number }>(ctx.http, URLS.measureV2, {
        action: 'getworkouts',
        startdateymd: str(c, 'startdateymd'),
        enddateymd: str(c, 'enddateymd'),
        data_fields: WORKOUT_FIELDS,
        offset: offsetField,
      });
      data.summaries.push(...(body.series ?? []).map((w) => mapWorkout(w, tz)));
      return { data, next: hasMore(body, offset) ? { ...c, offset: body.offset! } : null };
    }
    case 'sleep': {
      const from = int(c, 'from'),
        to = int(c, 'to');
      if (c.phase === 'summary') {
        const body = await callWithings<{ series?: WithingsSleepSummary[]; more?: boolean; offset?: number }>(ctx.http, URLS.sleepV2, {
          action: 'getsummary',
          startdateymd: str(c, 'startdateymd'),
          enddateymd: str(c, 'enddateymd'),
          data_fields: SLEEP_SUMMARY_FIELDS.join(','),
          offset: offsetField,
        });
        data.summaries.push(...(body.series ?? []).map((s) => mapSleepSummary(s, tz)));
        // Then the nights' series, noon → noon, from the noon before the window's first day.
        const next = hasMore(body, offset) ? { ...c, offset: body.offset! } : { ...c, phase: 'series', offset: 0, chunk: from - NOON_S };
        return { data, next };
      }
      const chunk = int(c, 'chunk');
      const body = await callWithings<{ series?: WithingsSleepSegment[] }>(ctx.http, URLS.sleepV2, {
        action: 'get',
        startdate: chunk,
        enddate: chunk + DAY_S - 1,
        data_fields: SLEEP_SERIES_FIELDS.join(','),
      });
      data.samples.push(...mapSleepSeries(Array.isArray(body.series) ? body.series : []));
      return { data, next: chunk + DAY_S < to - NOON_S ? { ...c, chunk: chunk + DAY_S } : null };
    }
    case 'heartrate': {
      const chunk = int(c, 'chunk'),
        to = int(c, 'to');
      const end = Math.min(chunk + DAY_S, to);
      const body = await callWithings<{ series?: Record<string, WithingsIntradayEntry> }>(ctx.http, URLS.measureV2, {
        action: 'getintradayactivity',
        startdate: chunk,
        enddate: end - 1,
        data_fields: INTRADAY_FIELDS,
      });
      data.samples.push(...mapIntraday(body.series));
      return { data, next: end < to ? { ...c, chunk: end } : null };
    }
    default:
      throw new ProviderFetchError('non_retriable_error', `withings has no pull unit ${resource}`);
  }
}

export const integration: ProviderIntegration = {
  slug: 'withings',
  oauth: {
    authorizeUrl: 'https://account.withings.com/oauth2_user/authorize2',
    tokenUrl: URLS.oauth2,
    // Comma-separated (Authorization URL doc). user.sleepevents is only for bed in/out notifications: not asked.
    scopes: ['user.info', 'user.metrics', 'user.activity'],
    scopeSeparator: ',',
    clientAuth: 'body',
    pkce: false,
    tokenParams: { action: 'requesttoken' },
    unwrapTokenResponse: unwrapTokenEnvelope,
    refreshable: true,
  },
  // Withings keeps the whole history; 90 days is our window for a new connection.
  historyDays: 90,
  // Withings' notification page: 120 requests a minute per app.
  budget: { provider: 'Withings', windows: [{ per: 'minute', ms: 60_000, limit: 120 }] },
  resources: RESOURCES,
  firstPage,
  fetchPage,

  async afterConnect(ctx) {
    // The token response names the user (requesttoken body.userid: "save the userid … in your database").
    const userid = ctx.tokenExtras.userid;
    if (userid === undefined || userid === null || String(userid) === '') {
      throw new ProviderFetchError('provider_credential_error', 'withings: the token response carried no userid');
    }
    return { externalUserId: String(userid) };
  },

  /**
   * OAuth 2.0 - Revoke user access (`POST /v2/oauth2 action=revoke`, signed with a nonce): the access and refresh tokens
   * become invalid and the user's notification subscriptions are removed. Two requests: getnonce, then revoke.
   */
  async revoke(ctx) {
    const userid = ctx.externalUserId ?? (ctx.tokenExtras.userid === undefined ? null : String(ctx.tokenExtras.userid));
    if (!userid) throw new ProviderFetchError('non_retriable_error', 'withings: revoke needs the user id');
    await callSigned(ctx, URLS.oauth2, 'revoke', { userid });
  },

  /**
   * Withings documents no rate-limit header and no Retry-After: the limit is 120 requests a minute per app
   * (developer.withings.com data-update-notifications; the X-RateLimit-* headers of api-evangelist withings
   * rate-limits/withings-rate-limits.yml are unverified and carry no reset), so a 429 waits one minute window.
   */
  rateLimitResetAt(_headers, now) {
    return new Date(now.getTime() + RATE_LIMIT_WINDOW_MS);
  },

  // Withings answers a refused token with HTTP 200 and `{status: 401}`: refresh once and resend, as for an HTTP 401.
  unauthorizedBody: isUnauthorizedEnvelope,
  /** Notify - List with the user's token: answered while our grant is live; `{status: 401}` and a refused refresh once it was revoked. */
  async confirmAccess(ctx: ProviderCallContext) {
    await listNotifications(ctx);
  },
  push: withingsPush,
  /** Withings subscribes per user, with the user's token, to every category we handle (subscriptions.ts subscribeAll). */
  async subscribeUser(ctx: ProviderCallContext, callbackUrl: string) {
    await subscribeAll(ctx, callbackUrl);
  },
};

export default integration;
