/**
 * Polar AccessLink API v3 (https://www.polar.com/accesslink-api; the docs page is copied at newpush/coach
 * docs/apis/polar.md, the official OpenAPI at tryAGI/Polar src/libs/Polar/openapi.yaml).
 *
 * - OAuth 2 code grant at flow.polar.com / polarremote.com with HTTP Basic client auth and the one scope
 *   `accesslink.read_all`. No refresh token: the access token lasts about a year (expires_in 31535999). A code is
 *   single-use and lives 10 minutes; reusing one makes Polar delete ALL tokens issued.
 * - After the exchange the user must be registered (POST /v3/users `{"member-id"}`; 409 = already registered) before
 *   any data can be read, and only data uploaded after the registration is ever served.
 * - No paging: date-range endpoints take at most 28 days (`from`/`to`, inclusive), list endpoints return what Polar
 *   keeps (sleep and Nightly Recharge: 28 days; exercises: 30 days). Physical information comes in transactions.
 * - Rate limits per client: 500 + 20×users per 15 min and 5000 + 100×users per 24 h, reported on every answer in
 *   `RateLimit-Usage`, `RateLimit-Limit`, `RateLimit-Reset` ("short term, long term"; reset in seconds); 429 over.
 */
import { addDays, daysBetween } from '../../../platform/time';
import { ProviderFetchError } from '../../provider-errors';
import type { ProviderData } from '../../model';
import type { OAuthSettings, PageCursor, ProviderCallContext, ProviderIntegration, ProviderPage, PullWindow } from '../contract';
import {
  continuousHeartRateDays,
  emptyData,
  exerciseStart,
  mapActivity,
  mapContinuousHeartRate,
  mapExercise,
  mapNightlyRecharge,
  mapPhysicalInformation,
  mapSleep,
  mapSpo2,
  mapUser,
  mergeData,
} from './mapping';
import { polarPush } from './push';
import { wallDate } from './time';
import type {
  PolarActivity,
  PolarExercise,
  PolarNightlyRecharge,
  PolarPhysicalInformation,
  PolarSleep,
  PolarSpo2TestResult,
  PolarTransactionLocation,
  PolarUser,
} from './api-types';
import { POLAR_API, ensureAppSubscriptions } from './subscriptions';

export { createWebhook, getWebhook, activateWebhook, deactivateWebhook, deleteWebhook, POLAR_WEBHOOK_EVENTS } from './subscriptions';
export { polarSignature } from './push';

export const POLAR_SLUG = 'polar';

/** Longest `from`..`to` span (inclusive days) the range endpoints accept (activities, continuous HR, SpO2). */
export const POLAR_MAX_RANGE_DAYS = 28;
/** `from` of /v3/users/activities may be at most this many days old ("cannot be older than 365 days from today"). */
export const POLAR_ACTIVITY_MAX_AGE_DAYS = 365;

export const polarOAuth: OAuthSettings = {
  authorizeUrl: 'https://flow.polar.com/oauth2/authorization',
  tokenUrl: 'https://polarremote.com/v2/oauth2/token',
  scopes: ['accesslink.read_all'],
  scopeSeparator: ' ',
  clientAuth: 'basic',
  pkce: false,
  refreshable: false,
};

/** The Polar user id of the connection: afterConnect's, or the token response's `x_user_id`. */
function polarUserId(ctx: Pick<ProviderCallContext, 'externalUserId' | 'tokenExtras'>): string {
  const id = ctx.externalUserId ?? ctx.tokenExtras.x_user_id;
  if ((typeof id !== 'string' && typeof id !== 'number') || String(id) === '') {
    throw new ProviderFetchError('non_retriable_error', 'polar: the connection has no Polar user id (x_user_id)');
  }
  return String(id);
}

const str = (c: PageCursor, k: string): string => String(c[k] ?? '');
const int = (c: PageCursor, k: string): number => Number(c[k] ?? 0);
const minDate = (a: string, b: string) => (a < b ? a : b);
const inWindow = (date: string | undefined, c: PageCursor) => !!date && date >= str(c, 'start') && date <= str(c, 'end');

/** The next 28-day chunk of a date-range cursor, or null after the last one. */
function nextChunk(c: PageCursor): PageCursor | null {
  const to = str(c, 'to');
  if (to >= str(c, 'end')) return null;
  const from = addDays(to, 1);
  return { ...c, from, to: minDate(addDays(from, POLAR_MAX_RANGE_DAYS - 1), str(c, 'end')) };
}

const page = (data: ProviderData, next: PageCursor | null): ProviderPage => ({ data, next });

const url = (path: string) => `${POLAR_API}${path}`;

async function fetchActivity(ctx: ProviderCallContext, c: PageCursor): Promise<ProviderPage> {
  // steps + activity_zones: the day's step samples and the zone changes (low/medium/high minutes) in the same answer.
  const res = await ctx.http.request<PolarActivity[]>({
    url: url('/v3/users/activities'),
    query: { from: str(c, 'from'), to: str(c, 'to'), steps: true, activity_zones: true },
    accept: [204],
  });
  const days = Array.isArray(res.body) ? res.body : [];
  return page(mergeData(days.map((d) => mapActivity(d, int(c, 'tz')))), nextChunk(c));
}

async function fetchHeartRate(ctx: ProviderCallContext, c: PageCursor): Promise<ProviderPage> {
  const res = await ctx.http.request({ url: url('/v3/users/continuous-heart-rate'), query: { from: str(c, 'from'), to: str(c, 'to') }, accept: [204] });
  const data = emptyData();
  for (const day of continuousHeartRateDays(res.body)) data.samples.push(...mapContinuousHeartRate(day, int(c, 'tz')));
  return page(data, nextChunk(c));
}

async function fetchSpo2(ctx: ProviderCallContext, c: PageCursor): Promise<ProviderPage> {
  const res = await ctx.http.request<PolarSpo2TestResult[]>({
    url: url('/v3/users/biosensing/spo2'),
    query: { from: str(c, 'from'), to: str(c, 'to') },
    accept: [204],
  });
  const data = emptyData();
  data.samples.push(...mapSpo2(Array.isArray(res.body) ? res.body : []));
  return page(data, nextChunk(c));
}

/**
 * Sleep: one night by date (`/v3/users/sleep/{date}`, 404 = none) for a one-day window (a SLEEP push), else the
 * listing of the last 28 days filtered to the window — what Polar keeps.
 */
async function fetchSleep(ctx: ProviderCallContext, c: PageCursor): Promise<ProviderPage> {
  let nights: PolarSleep[];
  if (str(c, 'mode') === 'date') {
    const res = await ctx.http.request<PolarSleep>({ url: url(`/v3/users/sleep/${str(c, 'start')}`), accept: [204, 404] });
    nights = res.status === 200 && res.body ? [res.body] : [];
  } else {
    const res = await ctx.http.request<{ nights?: PolarSleep[] }>({ url: url('/v3/users/sleep'), accept: [204] });
    nights = res.body?.nights ?? [];
  }
  return page(mergeData(nights.filter((n) => inWindow(n.date, c)).map(mapSleep)), null);
}

/** Nightly Recharge (HRV, breathing): like sleep, by date for one day, else the 28-day listing. */
async function fetchRecharge(ctx: ProviderCallContext, c: PageCursor): Promise<ProviderPage> {
  let recharges: PolarNightlyRecharge[];
  if (str(c, 'mode') === 'date') {
    const res = await ctx.http.request<PolarNightlyRecharge>({ url: url(`/v3/users/nightly-recharge/${str(c, 'start')}`), accept: [204, 404] });
    recharges = res.status === 200 && res.body ? [res.body] : [];
  } else {
    const res = await ctx.http.request<{ recharges?: PolarNightlyRecharge[] }>({ url: url('/v3/users/nightly-recharge'), accept: [204] });
    recharges = res.body?.recharges ?? [];
  }
  return page(mergeData(recharges.filter((r) => inWindow(r.date, c)).map((r) => mapNightlyRecharge(r, int(c, 'tz')))), null);
}

/** Exercises uploaded in the last 30 days (one listing, with samples and zones), those starting in the window. */
async function fetchExercises(ctx: ProviderCallContext, c: PageCursor): Promise<ProviderPage> {
  const res = await ctx.http.request<PolarExercise[]>({ url: url('/v3/exercises'), query: { samples: true, zones: true }, accept: [204] });
  const exercises = (Array.isArray(res.body) ? res.body : []).filter((e) => {
    const start = exerciseStart(e);
    return start !== null && inWindow(wallDate(start.utcMs + start.offsetSec * 1000), c);
  });
  return page(mergeData(exercises.map(mapExercise)), null);
}

/**
 * Physical information comes in transactions (docs "Physical info"): create → list → get each → commit, one request
 * per page. Only entries not yet committed are served, so the window does not apply; a pull cut short before the
 * commit is served again next time, and the entries' date keys make that harmless.
 */
async function fetchPhysicalInfo(ctx: ProviderCallContext, c: PageCursor): Promise<ProviderPage> {
  const base = `/v3/users/${encodeURIComponent(polarUserId(ctx))}/physical-information-transactions`;
  const tz = int(c, 'tz');
  const tx = str(c, 'tx');
  switch (str(c, 'step')) {
    case 'create': {
      const res = await ctx.http.request<PolarTransactionLocation>({ method: 'POST', url: url(base), accept: [204] });
      if (res.status === 204) return page(emptyData(), null);
      const id =
        res.body?.['transaction-id'] ??
        Number(
          String(res.body?.['resource-uri'] ?? '')
            .split('/')
            .pop(),
        );
      if (!id) throw new ProviderFetchError('provider_unavailable', `polar: POST ${base} answered ${res.status} without a transaction id`);
      return page(emptyData(), { step: 'list', tx: String(id), tz });
    }
    case 'list': {
      const res = await ctx.http.request<{ 'physical-informations'?: string[] }>({ url: url(`${base}/${tx}`), accept: [204] });
      const ids = (res.body?.['physical-informations'] ?? []).map((link) => link.split('/').pop() ?? '').filter((id) => /^\d+$/.test(id));
      return page(emptyData(), ids.length ? { step: 'get', tx, ids: ids.join(','), i: 0, tz } : { step: 'commit', tx, tz });
    }
    case 'get': {
      const ids = str(c, 'ids').split(',');
      const i = int(c, 'i');
      const res = await ctx.http.request<PolarPhysicalInformation>({ url: url(`${base}/${tx}/physical-informations/${ids[i]}`), accept: [204] });
      const data = res.status === 200 && res.body ? mapPhysicalInformation(res.body, tz) : emptyData();
      return page(data, i + 1 < ids.length ? { ...c, i: i + 1 } : { step: 'commit', tx, tz });
    }
    case 'commit':
      await ctx.http.request({ method: 'PUT', url: url(`${base}/${tx}`), accept: [204] });
      return page(emptyData(), null);
    default:
      throw new ProviderFetchError('non_retriable_error', `polar: unknown body cursor step ${str(c, 'step')}`);
  }
}

async function fetchProfile(ctx: ProviderCallContext, c: PageCursor): Promise<ProviderPage> {
  const res = await ctx.http.request<PolarUser>({ url: url(`/v3/users/${encodeURIComponent(polarUserId(ctx))}`), accept: [204] });
  const data = emptyData();
  if (res.status === 200 && res.body) data.summaries.push(mapUser(res.body, str(c, 'date'), int(c, 'tz')));
  return page(data, null);
}

const FETCHERS: Record<string, (ctx: ProviderCallContext, c: PageCursor) => Promise<ProviderPage>> = {
  profile: fetchProfile,
  body: fetchPhysicalInfo,
  activity: fetchActivity,
  sleep: fetchSleep,
  hrv: fetchRecharge,
  workouts: fetchExercises,
  heartrate: fetchHeartRate,
  blood_oxygen: fetchSpo2,
};

function firstPage(resource: string, window: PullWindow): PageCursor | null {
  if (window.startDate > window.endDate) return null;
  const tz = window.timezoneOffsetSeconds;
  const base = { start: window.startDate, end: window.endDate, tz };
  switch (resource) {
    case 'activity':
    case 'heartrate':
    case 'blood_oxygen': {
      // The window's end is today or earlier: a `from` more than 365 days before it would be refused (activities).
      const from =
        resource === 'activity' && daysBetween(window.startDate, window.endDate) >= POLAR_ACTIVITY_MAX_AGE_DAYS
          ? addDays(window.endDate, -(POLAR_ACTIVITY_MAX_AGE_DAYS - 1))
          : window.startDate;
      return { ...base, from, to: minDate(addDays(from, POLAR_MAX_RANGE_DAYS - 1), window.endDate) };
    }
    case 'sleep':
    case 'hrv':
      return { ...base, mode: window.startDate === window.endDate ? 'date' : 'list' };
    case 'workouts':
      return base;
    case 'body':
      return { step: 'create', tz };
    case 'profile':
      return { date: window.endDate, tz };
    default:
      return null;
  }
}

/**
 * RateLimit-Reset is "short term, long term" seconds: the long-term reset when the long-term usage has reached its
 * limit (RateLimit-Usage vs RateLimit-Limit), else the short-term one.
 */
export function polarRateLimitResetAt(headers: Headers, now: Date): Date | null {
  const pair = (name: string) => (headers.get(name) ?? '').split(',').map((x) => (x.trim() === '' ? Number.NaN : Number(x.trim())));
  const [shortReset, longReset] = pair('ratelimit-reset');
  if (!Number.isFinite(shortReset) && !Number.isFinite(longReset)) return null;
  const [, longUsage] = pair('ratelimit-usage');
  const [, longLimit] = pair('ratelimit-limit');
  const longExceeded = Number.isFinite(longUsage) && Number.isFinite(longLimit) && longUsage >= longLimit;
  const seconds =
    longExceeded && Number.isFinite(longReset)
      ? Math.max(longReset, Number.isFinite(shortReset) ? shortReset : 0)
      : Number.isFinite(shortReset)
        ? shortReset
        : longReset;
  return new Date(now.getTime() + Math.max(0, seconds) * 1000);
}

export const integration: ProviderIntegration = {
  slug: POLAR_SLUG,
  oauth: polarOAuth,
  // Activities, continuous HR and SpO2 take a `from` this old (in 28-day chunks); the sleep, Nightly Recharge and
  // exercise listings only ever hold their last 28/30 days. Polar serves nothing uploaded before the user was
  // registered, so a new connection's history is what was uploaded since.
  historyDays: 90,
  // AccessLink docs: per 15 minutes 500 + 20 × users, per 24 hours 5,000 + 100 × users (users registered with the client).
  budget: {
    provider: 'Polar',
    windows: [
      { per: '15 minutes', ms: 900_000, limit: 500, perUser: 20 },
      { per: 'day', ms: 86_400_000, limit: 5_000, perUser: 100 },
    ],
  },
  resources: ['profile', 'body', 'activity', 'sleep', 'hrv', 'workouts', 'heartrate', 'blood_oxygen'],
  firstPage,
  async fetchPage(ctx, resource, cursor) {
    const fetcher = FETCHERS[resource];
    if (!fetcher) throw new ProviderFetchError('non_retriable_error', `polar has no pull unit ${resource}`);
    return fetcher(ctx, cursor);
  },

  /**
   * Registers the user with our client (POST /v3/users with the new token; 409 = already registered, fine) — without
   * it Polar serves no data. The member-id is the user's Polar id: the context carries no id of ours, and Polar only
   * needs a value unique per registered user.
   */
  async afterConnect(ctx) {
    const id = polarUserId({ externalUserId: null, tokenExtras: ctx.tokenExtras });
    await ctx.http.request<PolarUser>({ method: 'POST', url: url('/v3/users'), json: { 'member-id': id }, accept: [409] });
    return { externalUserId: id };
  },

  /** DELETE /v3/users/{user-id}: deregisters the user, which also revokes the token. Already gone counts as done. */
  async revoke(ctx) {
    try {
      await ctx.http.request({ method: 'DELETE', url: url(`/v3/users/${encodeURIComponent(polarUserId(ctx))}`), accept: [404] });
    } catch (err) {
      if (err instanceof ProviderFetchError && (err.errorType === 'provider_credential_error' || err.errorType === 'token_refresh_failed')) return;
      throw err;
    }
  },

  /** An EXERCISE push names the exercise by its hashed id: GET /v3/exercises/{id} (404 = gone: nothing). */
  async fetchObject(ctx, resource, objectId) {
    if (resource !== 'workouts') throw new ProviderFetchError('non_retriable_error', `polar pushes name no ${resource} objects by id`);
    const res = await ctx.http.request<PolarExercise>({
      url: url(`/v3/exercises/${encodeURIComponent(objectId)}`),
      query: { samples: true, zones: true },
      accept: [204, 404],
    });
    return res.status === 200 && res.body ? mapExercise(res.body) : emptyData();
  },

  push: polarPush,
  ensureAppSubscriptions,
  rateLimitResetAt: polarRateLimitResetAt,
};
