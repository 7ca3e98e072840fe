import { addDays, DAY_MS, isoLocal } from '../../../platform/time';
import { ProviderFetchError } from '../../provider-errors';
import type { ProviderData, SampleInput, SummaryInput } from '../../model';
import type { PageCursor, ProviderCallContext, ProviderIntegration, ProviderPage, PullWindow } from '../contract';
import type { OuraDailyActivity, OuraDailySleep, OuraDailySpo2, OuraHeartRateRow, OuraList, OuraPersonalInfo, OuraSleep, OuraWorkout } from './api-types';
import { mapDailyActivity, mapDailySpo2, mapHeartRateRows, mapPersonalInfo, mapSleep, mapWorkout } from './mapping';
import { DAILY_SLEEP_PREFIX, push } from './push';
import { ensureAppSubscriptions } from './subscriptions';
import { isDate } from './time';

export { createSubscription, deleteSubscription, listSubscriptions, renewSubscription } from './subscriptions';
export { ouraSignature, push } from './push';

/**
 * Oura API v2 (official OpenAPI: tgrk/ex_oura `test/support/openapi-1.29.json`; prose on auth, rate limits and
 * webhooks in `openapi-1.37.json` at 544e2c60; recorded responses in `test/fixture/vcr_cassettes/*.json`).
 *
 * Pull units and what each maps to (mapping.ts):
 * - `profile`: `GET /v2/usercollection/personal_info` → `profile` (height cm, sex) and `body` (weight kg, BMI).
 * - `activity`: `/daily_activity` → `activity` summaries + one `steps`, `calories_active`, `calories_basal` interval
 *   sample per Oura activity day (4 a.m. to 4 a.m.).
 * - `sleep`: `/daily_sleep` then `/sleep` per chunk → `sleep` summaries (the day's sleep score from /daily_sleep
 *   merged into the day's long sleep: our summaries are replaced whole, so the score cannot arrive separately) +
 *   `heartrate`, `hrv` (RMSSD), `hypnogram` and `body_temperature_delta` samples.
 * - `workouts`: `/workout` → `workouts` summaries.
 * - `heartrate`: `/heartrate?start_datetime&end_datetime` (5-minute samples) → `heartrate`.
 * - `blood_oxygen`: `/daily_spo2` → one `blood_oxygen` sample per night (the average).
 *
 * Windows and paging: every list route pages with `next_token` (MultiDocumentResponse / TimeSeriesResponse). A long
 * window is asked in 30-day chunks: the FAQ recommends "date range queries with reasonable time spans (e.g., 1-3
 * months at a time)", and heart-rate requests over 30 days fail (Stanford-Health/wearipedia#162). Whether `end_date`
 * is inclusive is not published, and the cassettes disagree by route (daily_sleep/daily_spo2 2024-11-11..12 return
 * both days, daily_activity only the first; sleep 2024-10-09..11-03 returns days 10-10..11-02): each chunk is asked
 * one day wider on both sides and only the documents whose `day` falls in the chunk are kept, so every document
 * lands exactly once whatever the route's rule. `/heartrate` takes instants and needs no widening.
 *
 * historyDays 90: three 30-day chunks per unit, the top of the FAQ's "1-3 months" for the "single request for
 * historical data when a user first connects" (1.37 overview), webhooks keeping it current afterwards. Oura publishes
 * no history limit; a longer pull only takes more chunks.
 */
const API = 'https://api.ouraring.com';
const COLLECTION = `${API}/v2/usercollection`;
/** Days per chunk of a date-filtered route; heart rate: the same span as instants. */
export const OURA_CHUNK_DAYS = 30;
const SOURCE_TYPE = 'ring';

const DATE_ROUTES = { activity: 'daily_activity', workouts: 'workout', blood_oxygen: 'daily_spo2', sleep: 'sleep' } as const;
type DateUnit = keyof typeof DATE_ROUTES;
const RESOURCES = ['profile', 'activity', 'sleep', 'workouts', 'heartrate', 'blood_oxygen'] as const;

const empty = (): ProviderData => ({ source_type: SOURCE_TYPE, summaries: [], samples: [], workout_streams: [] });
const data = (summaries: SummaryInput[], samples: SampleInput[]): ProviderData => ({ source_type: SOURCE_TYPE, summaries, samples, workout_streams: [] });

// ---- Cursors ------------------------------------------------------------------------------------------------------

/**
 * A date unit's cursor: the chunk starts at `from`, the pull ends at `last` (inclusive local dates), `token` is the
 * chunk's next_token. The sleep unit adds `phase` (`daily_sleep`, then `sleep`, per chunk) and `scores`, the chunk's
 * sleep scores as `YYYY-MM-DD=score;…` (at most 30 entries).
 */
interface DateCursor {
  from: string;
  last: string;
  token: string | null;
  tz: number;
  phase: 'daily_sleep' | 'sleep' | null;
  scores: string;
}

function bad(message: string): never {
  throw new ProviderFetchError('non_retriable_error', `oura: ${message}`);
}

const str = (c: PageCursor, k: string) => (typeof c[k] === 'string' ? (c[k] as string) : null);
const numOf = (c: PageCursor, k: string) => (typeof c[k] === 'number' && Number.isFinite(c[k]) ? (c[k] as number) : null);

function readDateCursor(c: PageCursor, unit: DateUnit): DateCursor {
  const from = str(c, 'from');
  const last = str(c, 'last');
  if (!isDate(from) || !isDate(last)) bad(`${unit} cursor without from/last dates`);
  const phase = unit === 'sleep' ? (c.phase === 'sleep' ? 'sleep' : 'daily_sleep') : null;
  return { from, last, token: str(c, 'token'), tz: numOf(c, 'tz') ?? 0, phase, scores: str(c, 'scores') ?? '' };
}

const flat = (c: DateCursor): PageCursor => ({
  from: c.from,
  last: c.last,
  token: c.token,
  tz: c.tz,
  ...(c.phase ? { phase: c.phase, scores: c.scores } : {}),
});

const chunkEnd = (c: { from: string; last: string }) => {
  const end = addDays(c.from, OURA_CHUNK_DAYS - 1);
  return end < c.last ? end : c.last;
};

/** The cursor after a chunk's last page: the next chunk, or null when the window is done. */
function nextChunk(c: DateCursor): PageCursor | null {
  const end = chunkEnd(c);
  if (end >= c.last) return null;
  return flat({ ...c, from: addDays(end, 1), token: null, phase: c.phase ? 'daily_sleep' : null, scores: '' });
}

const parseScores = (s: string) =>
  new Map(
    s
      .split(';')
      .filter(Boolean)
      .map((e) => {
        const [d, v] = e.split('=');
        return [d, Number(v)] as const;
      })
      .filter(([, v]) => Number.isFinite(v)),
  );

// ---- Requests -----------------------------------------------------------------------------------------------------

function listOf<T>(body: unknown, path: string): OuraList<T> {
  const b = body as Partial<OuraList<T>> | undefined;
  if (!b || typeof b !== 'object' || !Array.isArray(b.data))
    throw new ProviderFetchError('provider_unavailable', `oura: ${path} answered without a data array`);
  return { data: b.data, next_token: typeof b.next_token === 'string' && b.next_token ? b.next_token : null };
}

/** One page of a date-filtered route over the chunk [from, to], asked one day wider on each side (see above). */
async function fetchDays<T extends { day: string }>(
  ctx: ProviderCallContext,
  route: string,
  from: string,
  to: string,
  token: string | null,
): Promise<OuraList<T>> {
  const res = await ctx.http.request({
    url: `${COLLECTION}/${route}`,
    query: { start_date: addDays(from, -1), end_date: addDays(to, 1), next_token: token ?? undefined },
  });
  const list = listOf<T>(res.body, `/v2/usercollection/${route}`);
  return { data: list.data.filter((d) => d && typeof d.day === 'string' && d.day >= from && d.day <= to), next_token: list.next_token };
}

/** One document by id, or null when Oura no longer has it (404 "Document not found.", cassette single_sleep_non_existing). */
async function fetchDocument<T>(ctx: ProviderCallContext, route: string, id: string): Promise<T | null> {
  const res = await ctx.http.request<T>({ url: `${COLLECTION}/${route}/${encodeURIComponent(id)}`, accept: [404] });
  if (res.status === 404) return null;
  if (!res.body || typeof res.body !== 'object')
    throw new ProviderFetchError('provider_unavailable', `oura: /v2/usercollection/${route}/{id} answered without a document`);
  return res.body;
}

function mapSleeps(sleeps: OuraSleep[], scores: Map<string, number>): ProviderData {
  const summaries: SummaryInput[] = [];
  const samples: SampleInput[] = [];
  for (const sleep of sleeps) {
    const mapped = mapSleep(sleep, scores.get(sleep.day) ?? null);
    if (!mapped) continue;
    summaries.push(mapped.summary);
    samples.push(...mapped.samples);
  }
  return data(summaries, samples);
}

async function fetchDateUnitPage(ctx: ProviderCallContext, unit: DateUnit, c: DateCursor): Promise<ProviderPage> {
  const to = chunkEnd(c);
  if (unit === 'sleep' && c.phase === 'daily_sleep') {
    const list = await fetchDays<OuraDailySleep>(ctx, 'daily_sleep', c.from, to, c.token);
    const scores = list.data.filter((d) => typeof d.score === 'number').map((d) => `${d.day}=${d.score}`);
    const merged = [c.scores, ...scores].filter(Boolean).join(';');
    return {
      data: empty(),
      next: flat(list.next_token ? { ...c, token: list.next_token, scores: merged } : { ...c, phase: 'sleep', token: null, scores: merged }),
    };
  }
  let page: ProviderData;
  let token: string | null;
  switch (unit) {
    case 'sleep': {
      const list = await fetchDays<OuraSleep>(ctx, 'sleep', c.from, to, c.token);
      page = mapSleeps(list.data, parseScores(c.scores));
      token = list.next_token ?? null;
      break;
    }
    case 'activity': {
      const list = await fetchDays<OuraDailyActivity>(ctx, 'daily_activity', c.from, to, c.token);
      const mapped = list.data.map(mapDailyActivity).filter((m) => m !== null);
      page = data(
        mapped.map((m) => m.summary),
        mapped.flatMap((m) => m.samples),
      );
      token = list.next_token ?? null;
      break;
    }
    case 'workouts': {
      const list = await fetchDays<OuraWorkout>(ctx, 'workout', c.from, to, c.token);
      page = data(
        list.data.map(mapWorkout).filter((w) => w !== null),
        [],
      );
      token = list.next_token ?? null;
      break;
    }
    case 'blood_oxygen': {
      const list = await fetchDays<OuraDailySpo2>(ctx, 'daily_spo2', c.from, to, c.token);
      page = data(
        [],
        list.data.map((d) => mapDailySpo2(d, c.tz)).filter((s) => s !== null),
      );
      token = list.next_token ?? null;
      break;
    }
  }
  return { data: page, next: token ? flat({ ...c, token }) : nextChunk(c) };
}

async function fetchHeartRatePage(ctx: ProviderCallContext, cursor: PageCursor): Promise<ProviderPage> {
  const from = numOf(cursor, 'from');
  const to = numOf(cursor, 'to');
  const tz = numOf(cursor, 'tz') ?? 0;
  if (from === null || to === null) bad('heartrate cursor without from/to');
  const end = Math.min(to, from + OURA_CHUNK_DAYS * DAY_MS);
  const token = str(cursor, 'token');
  // The spec's example sends local times with their offset (`2021-11-01T00:00:00-08:00`).
  const res = await ctx.http.request({
    url: `${COLLECTION}/heartrate`,
    query: { start_datetime: isoLocal(from, tz), end_datetime: isoLocal(end, tz), next_token: token ?? undefined },
  });
  const list = listOf<OuraHeartRateRow>(res.body, '/v2/usercollection/heartrate');
  const samples = mapHeartRateRows(list.data).filter((s) => {
    const t = Date.parse(s.timestamp);
    return t >= from && t < end;
  });
  const next = list.next_token ? { from, to, tz, token: list.next_token } : end < to ? { from: end, to, tz, token: null } : null;
  return { data: data([], samples), next };
}

async function fetchPersonalInfo(ctx: ProviderCallContext): Promise<OuraPersonalInfo> {
  const res = await ctx.http.request<OuraPersonalInfo>({ url: `${COLLECTION}/personal_info` });
  if (!res.body || typeof res.body !== 'object')
    throw new ProviderFetchError('provider_unavailable', 'oura: /v2/usercollection/personal_info answered without a document');
  return res.body;
}

/** The sleep score of `day` (one /daily_sleep page around it), or null when Oura has none (yet). */
async function dailyScore(ctx: ProviderCallContext, day: string): Promise<number | null> {
  const list = await fetchDays<OuraDailySleep>(ctx, 'daily_sleep', day, day, null);
  const score = list.data.find((d) => d.day === day)?.score;
  return typeof score === 'number' ? score : null;
}

// ---- The integration --------------------------------------------------------------------------------------------

export const integration: ProviderIntegration = {
  slug: 'oura',
  oauth: {
    // openapi-1.37 securitySchemes.OAuth2 (authorizationCode flow).
    authorizeUrl: 'https://cloud.ouraring.com/oauth/authorize',
    tokenUrl: 'https://api.ouraring.com/oauth/token',
    // Every scope of securitySchemes.OAuth2; `personal` is not needed for personal_info's id ("no scopes are required").
    scopes: ['email', 'personal', 'daily', 'heartrate', 'workout', 'tag', 'session', 'spo2Daily'],
    scopeSeparator: ' ',
    // 1.37 "Code Examples" / "Authentication Troubleshooting": client_id and client_secret in the form body, no PKCE
    // (open-wearables oura/oauth.py: use_pkce False, AuthenticationMethod.BODY).
    clientAuth: 'body',
    pkce: false,
    // The refresh example stores the new refresh_token: refresh tokens rotate.
    refreshable: true,
  },
  historyDays: 90,
  // Oura's API FAQ: 5,000 requests per 5 minutes per app; no daily quota is documented.
  budget: { provider: 'Oura', windows: [{ per: '5 minutes', ms: 300_000, limit: 5_000 }] },
  resources: [...RESOURCES],

  firstPage(resource: string, window: PullWindow): PageCursor | null {
    if (!isDate(window.startDate) || !isDate(window.endDate) || window.startDate > window.endDate) return null;
    const tz = window.timezoneOffsetSeconds;
    switch (resource) {
      case 'profile':
        return { date: window.endDate, tz };
      case 'heartrate': {
        const from = window.start.getTime();
        const to = window.end.getTime();
        return to > from ? { from, to, tz, token: null } : null;
      }
      case 'activity':
      case 'workouts':
      case 'blood_oxygen':
      case 'sleep':
        return flat({ from: window.startDate, last: window.endDate, token: null, tz, phase: resource === 'sleep' ? 'daily_sleep' : null, scores: '' });
      default:
        return null;
    }
  },

  async fetchPage(ctx: ProviderCallContext, resource: string, cursor: PageCursor): Promise<ProviderPage> {
    switch (resource) {
      case 'profile': {
        const date = str(cursor, 'date');
        if (!isDate(date)) bad('profile cursor without a date');
        const info = await fetchPersonalInfo(ctx);
        return { data: data(mapPersonalInfo(info, date, numOf(cursor, 'tz') ?? 0), []), next: null };
      }
      case 'heartrate':
        return fetchHeartRatePage(ctx, cursor);
      case 'activity':
      case 'workouts':
      case 'blood_oxygen':
      case 'sleep':
        return fetchDateUnitPage(ctx, resource, readDateCursor(cursor, resource));
      default:
        return bad(`no pull unit ${resource}`);
    }
  },

  /** `personal_info.id` is the user id every push names (`user_id`); "any access token" may read it (no scope). */
  async afterConnect(ctx: ProviderCallContext): Promise<{ externalUserId: string | null }> {
    const info = await fetchPersonalInfo(ctx);
    if (typeof info.id !== 'string' || !info.id) throw new ProviderFetchError('provider_unavailable', 'oura: personal_info answered without an id');
    return { externalUserId: info.id };
  },

  /**
   * `POST https://api.ouraring.com/oauth/revoke` (open-wearables oura/oauth.py deregister_user, which passes the token
   * as `?access_token=`).
   */
  async revoke(ctx: ProviderCallContext): Promise<void> {
    const token = ctx.accessToken ? await ctx.accessToken() : undefined;
    await ctx.http.request({ method: 'POST', url: `${API}/oauth/revoke`, query: { access_token: token }, auth: token ? 'none' : 'bearer' });
  },

  /**
   * A pushed object by id. `sleep` needs two requests so its summary (replaced whole) keeps the day's score: the
   * period and the day's /daily_sleep (for a long sleep), or, for a `daily_sleep` push, the score document and the
   * day's periods. A document Oura no longer has gives no data.
   */
  async fetchObject(ctx: ProviderCallContext, resource: string, objectId: string, timezoneOffsetSeconds: number): Promise<ProviderData> {
    switch (resource) {
      case 'sleep': {
        if (objectId.startsWith(DAILY_SLEEP_PREFIX)) {
          const daily = await fetchDocument<OuraDailySleep>(ctx, 'daily_sleep', objectId.slice(DAILY_SLEEP_PREFIX.length));
          if (!daily || !isDate(daily.day)) return empty();
          const periods = await fetchDays<OuraSleep>(ctx, 'sleep', daily.day, daily.day, null);
          return mapSleeps(periods.data, new Map(typeof daily.score === 'number' ? [[daily.day, daily.score]] : []));
        }
        const sleep = await fetchDocument<OuraSleep>(ctx, 'sleep', objectId);
        if (!sleep) return empty();
        const score = sleep.type === 'long_sleep' && isDate(sleep.day) ? await dailyScore(ctx, sleep.day) : null;
        return mapSleeps([sleep], new Map(score === null ? [] : [[sleep.day, score]]));
      }
      case 'workouts': {
        const workout = await fetchDocument<OuraWorkout>(ctx, 'workout', objectId);
        const summary = workout && mapWorkout(workout);
        return summary ? data([summary], []) : empty();
      }
      case 'activity': {
        const activity = await fetchDocument<OuraDailyActivity>(ctx, 'daily_activity', objectId);
        const mapped = activity && mapDailyActivity(activity);
        return mapped ? data([mapped.summary], mapped.samples) : empty();
      }
      case 'blood_oxygen': {
        const spo2 = await fetchDocument<OuraDailySpo2>(ctx, 'daily_spo2', objectId);
        const sample = spo2 && mapDailySpo2(spo2, timezoneOffsetSeconds);
        return sample ? data([], [sample]) : empty();
      }
      default:
        return bad(`no object fetch for ${resource}`);
    }
  },

  push,
  ensureAppSubscriptions,

  /**
   * openapi-1.37 "Rate Limit Response Headers": a 429 carries `Retry-After` (seconds; http.ts honours it first),
   * `X-RateLimit-Limit`, `X-RateLimit-Window` (rolling window, seconds), `X-RateLimit-Reset` ("Unix epoch (seconds)
   * at which the window resets") and `X-RateLimit-Tier`. Without Retry-After: the reset instant, else a window from now.
   */
  rateLimitResetAt(headers: Headers, now: Date): Date | null {
    const reset = Number(headers.get('x-ratelimit-reset') ?? NaN);
    if (Number.isFinite(reset) && reset > 0) {
      // A value far below any current epoch second would be a count of seconds, not an instant.
      const at = reset < 1e9 ? now.getTime() + reset * 1000 : reset * 1000;
      return new Date(Math.max(at, now.getTime()));
    }
    const window = Number(headers.get('x-ratelimit-window') ?? NaN);
    if (Number.isFinite(window) && window > 0) return new Date(now.getTime() + window * 1000);
    return null;
  },
};
