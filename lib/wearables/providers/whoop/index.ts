import { DAY_MS } from '../../../platform/time';
import type { ProviderData, SampleInput, SummaryInput } from '../../model';
import { ProviderFetchError } from '../../provider-errors';
import type { PageCursor, ProviderCallContext, ProviderIntegration, ProviderPage, PullWindow } from '../contract';
import type { WhoopBasicProfile, WhoopBodyMeasurement, WhoopCycle, WhoopPage, WhoopRecovery, WhoopSleep, WhoopWorkout } from './api-types';
import {
  WHOOP_SOURCE_TYPE,
  decodeRecoveries,
  encodeRecoveries,
  localDate,
  mapBodyMeasurement,
  mapCycle,
  mapSleep,
  mapWorkout,
  recoveryFacts,
  type RecoveryFacts,
} from './mapping';
import { whoopPush } from './push';

/**
 * WHOOP API v2 (official OpenAPI 3.0.1 "WHOOP API 2.0.0": api-evangelist/whoop-co `openapi/_original/whoop-api-openapi.yml`,
 * server `https://api.prod.whoop.com/developer`).
 *
 * OAuth (developer.whoop.com/docs/developing/oauth; securitySchemes of the spec): authorization code, client id and
 * secret in the form body, no PKCE. A refresh token is only issued with the `offline` scope (open-wearables PR #257),
 * and WHOOP's refresh tutorials send `scope=offline` with the refresh (developer.whoop.com/docs/tutorials/
 * refresh-token-javascript), hence `tokenParams`. Access tokens last 3600 s; refresh tokens rotate and the previous one
 * is refused at once (open-wearables issue #1433), which the shared token store's one-refresh-at-a-time lease handles.
 *
 * Pull units (each page is exactly one request; collections are paged with `limit` ≤ 25, `start`/`end` instants and
 * the `nextToken` query parameter, the response carrying `next_token`):
 * - `sleep`: per chunk of 18 days, first `GET /v2/recovery` over the chunk ± 12 h, then `GET /v2/activity/sleep` over
 *   the chunk. A recovery belongs to one sleep (`sleep_id`) and holds that night's HRV (RMSSD), resting heart rate,
 *   SpO2 and skin temperature; the recovery pages' values ride in the cursor so each sleep page maps its sleeps
 *   complete (`average_hrv`, `hr_resting`…) with their `hrv`, `blood_oxygen`, `body_temperature` and
 *   `respiratory_rate` samples. A sleep straddling two chunks is fetched (and mapped, identically) in both.
 * - `activity`: `GET /v2/cycle` → the day's `activity` (kcal from kJ, heart rate).
 * - `workouts`: `GET /v2/activity/workout` → `workouts`.
 * - `body` (alias `profile`): `GET /v2/user/measurement/body` → `body` (weight, BMI) and `profile` (height). WHOOP keeps
 *   only the current measurement, so it is stamped on the window's last day and a window over a day in the past asks
 *   nothing.
 * Not available from WHOOP: heart-rate samples, steps, hypnograms (open-wearables docs on WHOOP).
 *
 * Pushes name one sleep (or the sleep of a recovery) or workout: `fetchObject`. A sleep is fetched with
 * `GET /v2/activity/sleep/{id}` and, unless it is a nap (naps have no recovery), its recovery with
 * `GET /v2/cycle/{cycle_id}/recovery` (the spec has no recovery-by-sleep route): two requests, so a pushed sleep is as
 * complete as a pulled one.
 *
 * Rate limits: 100 requests a minute and 10,000 a day per app; `X-RateLimit-Reset` is the seconds until the nearest
 * window resets, and WHOOP sends no Retry-After (developer.whoop.com/docs/developing/rate-limiting).
 */
const API = 'https://api.prod.whoop.com/developer';
const PAGE_LIMIT = 25; // the spec's maximum `limit`
/**
 * 18 days hold about 18–22 sleeps with naps and, with the margin, 19–21 recoveries: one page of 25 each, so a 90-day
 * pull costs 5 × 2 requests (WHOOP's 10,000 requests a day per app are the scarce budget).
 */
const SLEEP_CHUNK_MS = 18 * DAY_MS;
/**
 * Recoveries are asked over the sleep chunk widened by this on each side: the spec does not say which instant it
 * filters recoveries by (their cycle's span, which starts at the sleep's onset, or their creation just after the
 * sleep's end), and either lies within hours of the sleep.
 */
const RECOVERY_MARGIN_MS = 12 * 3_600_000;
/** WHOOP keeps history without limit; a new connection pulls this much. */
const HISTORY_DAYS = 90;

const PATHS = {
  cycles: '/v2/cycle',
  recoveries: '/v2/recovery',
  sleeps: '/v2/activity/sleep',
  workouts: '/v2/activity/workout',
  body: '/v2/user/measurement/body',
  profile: '/v2/user/profile/basic',
  access: '/v2/user/access',
} as const;

const emptyData = (): ProviderData => ({ source_type: WHOOP_SOURCE_TYPE, summaries: [], samples: [], workout_streams: [] });
const dataOf = (summaries: SummaryInput[], samples: SampleInput[] = []): ProviderData => ({ ...emptyData(), summaries, samples });
const iso = (ms: number) => new Date(ms).toISOString();

// ---- Cursors --------------------------------------------------------------------------------------------------

/** A collection read over [start, end) (ms), `token` the next page's nextToken (null: the first page). */
interface ListCursor {
  start: number;
  end: number;
  token: string | null;
  tz: number;
}

/** The sleep unit: one chunk [chunkStart, chunkEnd) at a time, its recoveries (`rec`, encoded) then its sleeps. */
interface SleepCursor extends ListCursor {
  phase: 'recovery' | 'sleep';
  windowEnd: number;
  rec: string;
}

interface BodyCursor {
  asOf: string;
  tz: number;
}

const bad = (why: string) => new ProviderFetchError('non_retriable_error', `whoop_v2: ${why}`);
const numberAt = (c: PageCursor, k: string): number => {
  const v = c[k];
  if (typeof v !== 'number' || !Number.isFinite(v)) throw bad(`cursor without a numeric ${k}`);
  return v;
};
const tokenAt = (c: PageCursor): string | null => (typeof c.token === 'string' && c.token ? c.token : null);

function listCursor(c: PageCursor): ListCursor {
  return { start: numberAt(c, 'start'), end: numberAt(c, 'end'), token: tokenAt(c), tz: numberAt(c, 'tz') };
}

function sleepCursor(c: PageCursor): SleepCursor {
  if (c.phase !== 'recovery' && c.phase !== 'sleep') throw bad(`unknown sleep cursor phase ${String(c.phase)}`);
  return { ...listCursor(c), phase: c.phase, windowEnd: numberAt(c, 'windowEnd'), rec: typeof c.rec === 'string' ? c.rec : '' };
}

const flat = (c: ListCursor | SleepCursor | BodyCursor): PageCursor => ({ ...c });

function firstSleepChunk(start: number, windowEnd: number, tz: number): SleepCursor {
  return { phase: 'recovery', start, end: Math.min(start + SLEEP_CHUNK_MS, windowEnd), windowEnd, token: null, tz, rec: '' };
}

// ---- Requests ---------------------------------------------------------------------------------------------------

/** One page of a collection. */
async function page<T>(
  ctx: ProviderCallContext,
  path: string,
  start: number,
  end: number,
  token: string | null,
): Promise<{ records: T[]; next: string | null }> {
  const res = await ctx.http.request<WhoopPage<T>>({
    url: `${API}${path}`,
    query: { limit: PAGE_LIMIT, start: iso(start), end: iso(end), nextToken: token ?? undefined },
  });
  const body = res.body;
  if (!body || !Array.isArray(body.records)) throw new ProviderFetchError('provider_unavailable', `whoop_v2: ${path} answered without a records array`);
  const next = typeof body.next_token === 'string' && body.next_token ? body.next_token : null;
  // A next_token equal to the one just used would page forever.
  return { records: body.records, next: next !== null && next !== token ? next : null };
}

async function fetchSleepPage(ctx: ProviderCallContext, cursor: SleepCursor): Promise<ProviderPage> {
  if (cursor.phase === 'recovery') {
    const { records, next } = await page<WhoopRecovery>(
      ctx,
      PATHS.recoveries,
      cursor.start - RECOVERY_MARGIN_MS,
      cursor.end + RECOVERY_MARGIN_MS,
      cursor.token,
    );
    const bySleep = decodeRecoveries(cursor.rec);
    for (const r of records) {
      const facts = r && typeof r.sleep_id === 'string' ? recoveryFacts(r) : null;
      if (facts) bySleep.set(r.sleep_id, facts);
    }
    const rec = encodeRecoveries(bySleep);
    return { data: emptyData(), next: flat(next ? { ...cursor, token: next, rec } : { ...cursor, phase: 'sleep', token: null, rec }) };
  }
  const { records, next } = await page<WhoopSleep>(ctx, PATHS.sleeps, cursor.start, cursor.end, cursor.token);
  const recoveries = decodeRecoveries(cursor.rec);
  const data = emptyData();
  for (const s of records) {
    if (!s || typeof s !== 'object') continue;
    const mapped = mapSleep(s, (typeof s.id === 'string' ? recoveries.get(s.id) : undefined) ?? null, cursor.tz);
    data.summaries.push(...mapped.summaries);
    data.samples.push(...mapped.samples);
  }
  if (next) return { data, next: flat({ ...cursor, token: next }) };
  return { data, next: cursor.end < cursor.windowEnd ? flat(firstSleepChunk(cursor.end, cursor.windowEnd, cursor.tz)) : null };
}

async function fetchListPage<T>(
  ctx: ProviderCallContext,
  path: string,
  raw: PageCursor,
  map: (record: T, tz: number) => SummaryInput[],
): Promise<ProviderPage> {
  const cursor = listCursor(raw);
  const { records, next } = await page<T>(ctx, path, cursor.start, cursor.end, cursor.token);
  return { data: dataOf(records.flatMap((r) => (r ? map(r, cursor.tz) : []))), next: next ? flat({ ...cursor, token: next }) : null };
}

async function fetchBodyPage(ctx: ProviderCallContext, raw: PageCursor): Promise<ProviderPage> {
  const asOf = raw.asOf;
  if (typeof asOf !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(asOf)) throw bad('body cursor without a date');
  const tz = numberAt(raw, 'tz');
  const res = await ctx.http.request<WhoopBodyMeasurement>({ url: `${API}${PATHS.body}` });
  return { data: dataOf(res.body && typeof res.body === 'object' ? mapBodyMeasurement(res.body, asOf, tz) : []), next: null };
}

/** One object by id; null when WHOOP no longer has it (deleted since the push). */
async function getById<T>(ctx: ProviderCallContext, path: string): Promise<T | null> {
  const res = await ctx.http.request<T>({ url: `${API}${path}`, accept: [404] });
  return res.status === 404 || !res.body || typeof res.body !== 'object' ? null : res.body;
}

async function fetchSleepObject(ctx: ProviderCallContext, sleepId: string, tz: number): Promise<ProviderData> {
  const sleep = await getById<WhoopSleep>(ctx, `${PATHS.sleeps}/${encodeURIComponent(sleepId)}`);
  if (!sleep) return emptyData();
  let facts: RecoveryFacts | null = null;
  if (!sleep.nap && sleep.end && typeof sleep.cycle_id === 'number') {
    const recovery = await getById<WhoopRecovery>(ctx, `${PATHS.cycles}/${sleep.cycle_id}/recovery`);
    if (recovery && recovery.sleep_id === sleep.id) facts = recoveryFacts(recovery);
  }
  const mapped = mapSleep(sleep, facts, tz);
  return dataOf(mapped.summaries, mapped.samples);
}

// ---- The integration --------------------------------------------------------------------------------------------

export const integration: ProviderIntegration = {
  slug: 'whoop_v2',
  oauth: {
    authorizeUrl: 'https://api.prod.whoop.com/oauth/oauth2/auth',
    tokenUrl: 'https://api.prod.whoop.com/oauth/oauth2/token',
    // `offline`: without it WHOOP issues no refresh token and the connection dies with its first access token.
    scopes: ['offline', 'read:recovery', 'read:cycles', 'read:sleep', 'read:workout', 'read:profile', 'read:body_measurement'],
    scopeSeparator: ' ',
    clientAuth: 'body',
    pkce: false,
    tokenParams: { scope: 'offline' },
    refreshable: true,
  },
  historyDays: HISTORY_DAYS,
  // developer.whoop.com/docs/developing/rate-limiting: 100 requests a minute and 10,000 a day per app.
  budget: {
    provider: 'WHOOP',
    windows: [
      { per: 'minute', ms: 60_000, limit: 100 },
      { per: 'day', ms: 86_400_000, limit: 10_000 },
    ],
  },
  resources: ['sleep', 'activity', 'workouts', 'body'],

  firstPage(resource: string, window: PullWindow): PageCursor | null {
    const start = window.start.getTime();
    const end = window.end.getTime();
    const tz = window.timezoneOffsetSeconds;
    if (!(end > start)) return null;
    switch (resource) {
      case 'sleep':
        return flat(firstSleepChunk(start, end, tz));
      case 'activity':
      case 'workouts':
        return flat({ start, end, token: null, tz });
      case 'body':
      case 'profile': {
        // The current measurement only: stamped on the window's last day that has begun, not at all for a past window.
        const now = Date.now();
        if (end < now - DAY_MS || start > now) return null;
        return flat({ asOf: localDate(Math.min(now, end - 1), tz), tz });
      }
      default:
        return null;
    }
  },

  async fetchPage(ctx: ProviderCallContext, resource: string, cursor: PageCursor): Promise<ProviderPage> {
    switch (resource) {
      case 'sleep':
        return fetchSleepPage(ctx, sleepCursor(cursor));
      case 'activity':
        return fetchListPage<WhoopCycle>(ctx, PATHS.cycles, cursor, mapCycle);
      case 'workouts':
        return fetchListPage<WhoopWorkout>(ctx, PATHS.workouts, cursor, mapWorkout);
      case 'body':
      case 'profile':
        return fetchBodyPage(ctx, cursor);
      default:
        throw bad(`no pull unit ${resource}`);
    }
  },

  async fetchObject(ctx: ProviderCallContext, resource: string, objectId: string, timezoneOffsetSeconds: number): Promise<ProviderData> {
    switch (resource) {
      case 'sleep':
        return fetchSleepObject(ctx, objectId, timezoneOffsetSeconds);
      case 'workouts': {
        const workout = await getById<WhoopWorkout>(ctx, `${PATHS.workouts}/${encodeURIComponent(objectId)}`);
        return dataOf(workout ? mapWorkout(workout, timezoneOffsetSeconds) : []);
      }
      case 'activity': {
        const cycle = await getById<WhoopCycle>(ctx, `${PATHS.cycles}/${encodeURIComponent(objectId)}`);
        return dataOf(cycle ? mapCycle(cycle, timezoneOffsetSeconds) : []);
      }
      default:
        throw bad(`no object of ${resource} can be fetched by id`);
    }
  },

  async afterConnect(ctx: ProviderCallContext): Promise<{ externalUserId: string | null }> {
    const res = await ctx.http.request<WhoopBasicProfile>({ url: `${API}${PATHS.profile}` });
    const userId = res.body?.user_id;
    if ((typeof userId !== 'number' && typeof userId !== 'string') || String(userId) === '') {
      throw new ProviderFetchError('non_retriable_error', 'whoop_v2: /v2/user/profile/basic answered without a user_id');
    }
    return { externalUserId: String(userId) };
  },

  async revoke(ctx: ProviderCallContext): Promise<void> {
    // 204; WHOOP also stops sending this user's webhooks to the app (spec: revokeUserOAuthAccess).
    await ctx.http.request({ method: 'DELETE', url: `${API}${PATHS.access}`, accept: [204] });
  },

  push: whoopPush,

  rateLimitResetAt(headers: Headers, now: Date): Date | null {
    const raw = headers.get('x-ratelimit-reset');
    const seconds = raw === null || raw.trim() === '' ? NaN : Number(raw);
    return Number.isFinite(seconds) && seconds >= 0 ? new Date(now.getTime() + seconds * 1000) : null;
  },
};
