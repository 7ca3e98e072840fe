import { ProviderFetchError } from '../../provider-errors';
import type { ProviderData } from '../../model';
import type { PageCursor, ProviderCallContext, ProviderIntegration, ProviderPage, PullWindow } from '../contract';
import type { StravaActivity, StravaAthlete, StravaStreamSet } from './api-types';
import { activityTiming, emptyData, mapActivities, mapAthlete, mapStreams, type StreamOwner } from './mapping';
import { stravaPush } from './push';
import { ensureAppSubscriptions } from './subscriptions';
import { stravaRateLimitResetAt } from './rate-limit';

/**
 * Strava API v3 (developers.strava.com/docs/reference; the official swagger copied at stravalib/stravalib
 * `src/stravalib/tests/resources/strava_swagger.json`). Strava has activities (workouts, their streams) and the
 * athlete's profile; no steps, sleep, HRV or SpO2.
 *
 * Pull units:
 * - `profile`: GET /athlete → profile (sex) and body (weight) summaries. One request.
 * - `workouts`: GET /athlete/activities?after&before&page&per_page=200 (the documented maximum page size; `after` and
 *   `before` are epoch seconds) → workout summaries plus workout_distance / workout_duration / distance /
 *   calories_active interval samples; pages until a short (or empty) page.
 * - `workout_stream`: one activity's streams per request (GET /activities/{id}/streams?keys=…&key_by_type=true) →
 *   the workout's stream and its heart-rate samples. The cursor walks the window's activities: a list page of 30
 *   (one request) fills a small queue "id:start:offset,…" in the cursor, then each following page fetches one queued
 *   activity's streams. Manual activities have no streams and are skipped. Streams cost one request per activity
 *   against an app-wide read limit of 100 per 15 minutes, which is why they are their own unit: the workflow can run
 *   it after `workouts` and stop at a 429 without losing the summaries.
 *
 * fetchObject after a push: `workouts` = GET /activities/{id} (DetailedActivity: also has `calories`), one request;
 * `workout_stream` needs the activity's start to place `time` (seconds from the start), so it is GET /activities/{id}
 * then its streams: two requests (the one exception to "one request" here), drawn from the budget together. An
 * activity gone by then (404) maps to nothing.
 */
const API = 'https://www.strava.com/api/v3';
const LIST_PAGE_SIZE = 200;
/** Activities per list page of the workout_stream unit: keeps the queue in the cursor small (~1 KB). */
const STREAM_QUEUE_PAGE_SIZE = 30;
/** Every stream type our WorkoutStream has a place for (swagger StreamType enum). */
export const STREAM_KEYS = ['time', 'distance', 'latlng', 'altitude', 'velocity_smooth', 'heartrate', 'cadence', 'watts', 'temp'];

const RESOURCES = ['profile', 'workouts', 'workout_stream'] as const;
type Resource = (typeof RESOURCES)[number];
const isResource = (r: string): r is Resource => (RESOURCES as readonly string[]).includes(r);

const n = (cursor: PageCursor, key: string): number => {
  const v = cursor[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new ProviderFetchError('non_retriable_error', `strava: cursor field ${key} is not a number`);
  return v;
};

function listActivities(ctx: ProviderCallContext, cursor: PageCursor, perPage: number) {
  return ctx.http.request<StravaActivity[]>({
    url: `${API}/athlete/activities`,
    query: { after: n(cursor, 'after'), before: n(cursor, 'before'), page: n(cursor, 'page'), per_page: perPage },
  });
}

const listOf = (body: unknown): StravaActivity[] => {
  if (!Array.isArray(body)) throw new ProviderFetchError('unexpected_error', 'strava: /athlete/activities did not answer an array');
  return body as StravaActivity[];
};

/** The streams of one activity, mapped; a 404 (no streams: manual, deleted since it was listed) maps to nothing. */
async function fetchStreams(ctx: ProviderCallContext, owner: StreamOwner): Promise<ProviderData> {
  const res = await ctx.http.request<StravaStreamSet>({
    url: `${API}/activities/${owner.activityId}/streams`,
    query: { keys: STREAM_KEYS.join(','), key_by_type: true },
    accept: [404],
  });
  return res.status === 404 ? emptyData() : mapStreams(owner, res.body);
}

/** The workout_stream queue: "id:startEpochSeconds:offsetSeconds" items joined by commas. */
export function encodeQueue(owners: StreamOwner[]): string {
  return owners.map((o) => `${o.activityId}:${Math.floor(o.startMs / 1000)}:${o.offsetSeconds}`).join(',');
}
export function decodeQueue(queue: string): StreamOwner[] {
  return queue
    .split(',')
    .filter(Boolean)
    .map((item) => {
      const [id, start, offset] = item.split(':');
      if (!/^\d+$/.test(id) || !Number.isFinite(Number(start)) || !Number.isFinite(Number(offset)))
        throw new ProviderFetchError('non_retriable_error', `strava: bad stream queue item ${item}`);
      return { activityId: id, startMs: Number(start) * 1000, offsetSeconds: Number(offset) };
    });
}

async function fetchStreamPage(ctx: ProviderCallContext, cursor: PageCursor): Promise<ProviderPage> {
  const queue = decodeQueue(String(cursor.queue ?? ''));
  if (queue.length) {
    const [owner, ...rest] = queue;
    const data = await fetchStreams(ctx, owner);
    const next = rest.length || cursor.more ? { ...cursor, queue: encodeQueue(rest) } : null;
    return { data, next };
  }
  if (!cursor.more) return { data: emptyData(), next: null };
  const list = listOf((await listActivities(ctx, cursor, STREAM_QUEUE_PAGE_SIZE)).body);
  const owners = list.flatMap((a): StreamOwner[] => {
    const timing = a.manual ? null : activityTiming(a, n(cursor, 'offset'));
    return timing && /^\d+$/.test(String(a.id)) ? [{ activityId: String(a.id), startMs: timing.startMs, offsetSeconds: timing.offsetSeconds }] : [];
  });
  const more = list.length >= STREAM_QUEUE_PAGE_SIZE ? 1 : 0;
  const next = owners.length || more ? { ...cursor, page: n(cursor, 'page') + 1, queue: encodeQueue(owners), more } : null;
  return { data: emptyData(), next };
}

const objectIdOf = (id: string): string => {
  if (!/^\d+$/.test(id)) throw new ProviderFetchError('non_retriable_error', `strava: ${id} is not an activity id`);
  return id;
};

async function fetchActivity(ctx: ProviderCallContext, id: string): Promise<StravaActivity | null> {
  const res = await ctx.http.request<StravaActivity>({ url: `${API}/activities/${objectIdOf(id)}`, accept: [404] });
  return res.status === 404 ? null : res.body;
}

async function fetchAthlete(ctx: ProviderCallContext): Promise<StravaAthlete> {
  const res = await ctx.http.request<StravaAthlete>({ url: `${API}/athlete` });
  if (!res.body || typeof res.body !== 'object') throw new ProviderFetchError('unexpected_error', 'strava: /athlete answered no athlete');
  return res.body;
}

export const integration: ProviderIntegration = {
  slug: 'strava',
  oauth: {
    // developers.strava.com/docs/authentication: web authorize page, token endpoint with client_id/client_secret as
    // parameters, comma-delimited scopes; `approval_prompt=auto` skips the prompt for an athlete who already agreed.
    authorizeUrl: 'https://www.strava.com/oauth/authorize',
    tokenUrl: 'https://www.strava.com/oauth/token',
    scopes: ['read', 'activity:read_all', 'profile:read_all'],
    scopeSeparator: ',',
    clientAuth: 'body',
    pkce: false,
    authorizeParams: { approval_prompt: 'auto' },
    // Access tokens last 6 h (expires_in 21600). Every token request answers a refresh token that "may or may not be
    // the same"; "once a new refresh token is returned, the older refresh token is invalidated immediately" — the
    // token store must persist the latest one (oauth-client.ts keeps the old one only when none is returned).
    refreshable: true,
  },
  // The brief's window. (The reference service's own default for Strava is 14 days: real-api-facts.md §2.)
  historyDays: 90,
  // developers.strava.com/docs/rate-limits: overall 200 per 15 minutes and 2,000 a day; of them "non-upload" (reads)
  // 100 per 15 minutes and 1,000 a day; the day resets at midnight UTC (strava/rate-limit.ts).
  budget: {
    provider: 'Strava',
    windows: [
      { per: '15 minutes', ms: 900_000, limit: 100, readsOnly: true },
      { per: 'day', ms: 86_400_000, limit: 1_000, readsOnly: true },
      { per: '15 minutes', ms: 900_000, limit: 200 },
      { per: 'day', ms: 86_400_000, limit: 2_000 },
    ],
  },
  resources: [...RESOURCES],

  firstPage(resource: string, window: PullWindow): PageCursor | null {
    if (!isResource(resource)) return null;
    if (resource === 'profile') return { date: window.endDate, offset: window.timezoneOffsetSeconds };
    // `after`/`before` select start_date strictly between them: the window [start, end) is (start − 1 s, end).
    const after = Math.floor(window.start.getTime() / 1000) - 1;
    const before = Math.ceil(window.end.getTime() / 1000);
    if (before <= after + 1) return null;
    const base = { after, before, page: 1, offset: window.timezoneOffsetSeconds };
    return resource === 'workouts' ? base : { ...base, queue: '', more: 1 };
  },

  async fetchPage(ctx: ProviderCallContext, resource: string, cursor: PageCursor): Promise<ProviderPage> {
    if (!isResource(resource)) throw new ProviderFetchError('non_retriable_error', `strava has no pull unit ${resource}`);
    if (resource === 'profile') {
      const data = mapAthlete(await fetchAthlete(ctx), { date: String(cursor.date), offsetSeconds: n(cursor, 'offset') });
      return { data, next: null };
    }
    if (resource === 'workout_stream') return fetchStreamPage(ctx, cursor);
    const list = listOf((await listActivities(ctx, cursor, LIST_PAGE_SIZE)).body);
    const next = list.length >= LIST_PAGE_SIZE ? { ...cursor, page: n(cursor, 'page') + 1 } : null;
    return { data: mapActivities(list, n(cursor, 'offset')), next };
  },

  async fetchObject(ctx: ProviderCallContext, resource: string, objectId: string, timezoneOffsetSeconds: number): Promise<ProviderData> {
    if (resource === 'profile') {
      const today = new Date(Date.now() + timezoneOffsetSeconds * 1000).toISOString().slice(0, 10);
      return mapAthlete(await fetchAthlete(ctx), { date: today, offsetSeconds: timezoneOffsetSeconds });
    }
    if (resource !== 'workouts' && resource !== 'workout_stream')
      throw new ProviderFetchError('non_retriable_error', `strava cannot fetch a ${resource} by id`);
    // The streams are worth nothing without the activity's start: both requests are drawn before the first goes, so
    // a spent budget slot delays the pair instead of wasting the first (its retry would fetch the activity again).
    if (resource === 'workout_stream') await ctx.http.reserve(2);
    const activity = await fetchActivity(ctx, objectId);
    if (!activity) return emptyData();
    if (resource === 'workouts') return mapActivities([activity], timezoneOffsetSeconds);
    const timing = activityTiming(activity, timezoneOffsetSeconds);
    if (!timing || activity.manual) return emptyData();
    return fetchStreams(ctx, { activityId: String(activity.id), startMs: timing.startMs, offsetSeconds: timing.offsetSeconds });
  },

  /** The athlete id: the code exchange's `athlete` object (token response), else GET /athlete. */
  async afterConnect(ctx: ProviderCallContext) {
    const fromToken = (ctx.tokenExtras.athlete as { id?: unknown } | undefined)?.id;
    const id = typeof fromToken === 'number' || typeof fromToken === 'string' ? fromToken : (await fetchAthlete(ctx)).id;
    if (id === undefined || id === null || !/^\d+$/.test(String(id)))
      throw new ProviderFetchError('unexpected_error', 'strava: the connected athlete has no id');
    return { externalUserId: String(id) };
  },

  /**
   * Deauthorization (developers.strava.com/docs/authentication "Deauthorization"): POST /oauth/deauthorize with the
   * access token invalidates every access and refresh token of the athlete for this app. Its RFC 7009 successor
   * /oauth/revoke (`token`, `token_type_hint`, client auth in the body; open-wearables since PR #1320) is used when the
   * token is at hand, as the legacy name is being retired. A token already refused means the access is already gone.
   */
  async revoke(ctx: ProviderCallContext) {
    try {
      const token = ctx.accessToken ? await ctx.accessToken() : null;
      if (token) {
        await ctx.http.request({
          method: 'POST',
          url: 'https://www.strava.com/oauth/revoke',
          auth: 'none',
          form: { token, token_type_hint: 'access_token', client_id: ctx.client.clientId, client_secret: ctx.client.clientSecret },
        });
      } else {
        await ctx.http.request({ method: 'POST', url: 'https://www.strava.com/oauth/deauthorize' });
      }
    } catch (err) {
      if (err instanceof ProviderFetchError && (err.errorType === 'provider_credential_error' || err.errorType === 'token_refresh_failed')) return;
      throw err;
    }
  },

  /** GET /athlete answers while our grant is live; after the athlete removed our app it is a 401 and the refresh is refused. */
  async confirmAccess(ctx: ProviderCallContext) {
    await ctx.http.request({ url: `${API}/athlete` });
  },

  /**
   * Strava's consent page lets the athlete untick scopes, and the redirect's `scope` says what was granted
   * (developers.strava.com/docs/authentication: "the application should check the scope parameter"). Without
   * `activity:read_all` private activities are not returned; without any activity scope there is nothing to read.
   */
  grantedScopes: {
    fromCallback: (query) =>
      typeof query.scope === 'string'
        ? query.scope
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : null,
    resources: {
      workouts: { anyOf: ['activity:read', 'activity:read_all'], full: ['activity:read_all'] },
      workout_stream: { anyOf: ['activity:read', 'activity:read_all'], full: ['activity:read_all'] },
      profile: { anyOf: ['read', 'profile:read_all'], full: ['profile:read_all'] },
    },
    requireAnyOf: ['activity:read', 'activity:read_all'],
    consentAdvice:
      'On Strava\'s consent page, keep "View data about your activities" ticked (and "View data about your private activities" for private ones), then authorize again.',
  },

  push: stravaPush,
  ensureAppSubscriptions,
  rateLimitResetAt: stravaRateLimitResetAt,
};
