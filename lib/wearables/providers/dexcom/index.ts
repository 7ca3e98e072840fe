import { ProviderFetchError } from '../../provider-errors';
import type { ProviderData } from '../../model';
import type { PageCursor, ProviderCallContext, ProviderIntegration, ProviderPage, PullWindow } from '../contract';
import type { DexcomCalibration, DexcomDataRange, DexcomEgv, DexcomEvent, DexcomRecordsResponse } from './api-types';
import { dataRangeSpan, mapCalibrations, mapEgvs, mapEvents } from './mapping';
import { formatDexcomQueryTime } from './time';

export { mgdlToMmol, mmolToMgdl, MGDL_PER_MMOL } from './mapping';

/**
 * Dexcom API v3 (developer.dexcom.com/docs/dexcomv3/endpoint-overview). Pull only: Dexcom has no webhooks and no
 * token-revocation endpoint (the user removes the app in their Dexcom account: developer.dexcom.com/docs/dexcom/
 * authentication), so there is neither `push` nor `revoke`.
 *
 * One pull unit, `glucose`, over a window:
 * 1. `GET /v3/users/self/dataRange` — which spans of EGVs, calibrations and events the user has ("can be used to
 *    efficiently pull historical data and determine whether new data is available", getDataRangeV3). The window is
 *    clipped to them, so nothing is asked of a span without data.
 * 2. `GET /v3/users/self/egvs?startDate&endDate` in chunks of at most 30 days (the per-call maximum:
 *    api-evangelist/dexcom `openapi/dexcom-dexcom-api.yml` getEgvsV3 and the EndDate parameter; not stated on the
 *    stored official page) → `glucose` in mg/dL (source `automatic`).
 * 3. `GET /v3/users/self/calibrations` (same windows) → `glucose` in mg/dL (source `fingerprick`: meter values).
 * 4. `GET /v3/users/self/events` (same windows) → `carbohydrates`, `insulin_injection`, `glucose` (source `app`).
 * Paging: none, windows only. Query times are UTC without offset and match the records' systemTime; a chunk's
 * endDate is one second before the next chunk's startDate, so a record on a boundary is fetched once.
 *
 * Not pulled: `/devices` (transmitter and display device, alert schedules: nothing of our profile's fields) and
 * `/alerts` (CGM alarm events: no resource of ours). US data reaches the API about 1 h late (Validic wiki on Dexcom),
 * which a sync simply picks up on its next run.
 */
const API = 'https://api.dexcom.com';
/**
 * Dexcom's servers by the region of the user's account: the US at api.dexcom.com, the EU and the rest of the world
 * outside the US at api.dexcom.eu, Japan at api.dexcom.jp (endpoint-overview). An account lives on one of them: the
 * link page asks which, the connection keeps it, and its sign-in, tokens and data all go there.
 */
const HOSTS: Record<string, string> = { us: API, eu: 'https://api.dexcom.eu', jp: 'https://api.dexcom.jp' };
const REGION_CHOICES = [
  { id: 'us', label: 'United States' },
  { id: 'eu', label: 'Europe and elsewhere outside the United States' },
  { id: 'jp', label: 'Japan' },
];
/** The data host of a call: its connection's region (none stored: the US, where every connection was made before). */
const apiOf = (ctx: ProviderCallContext) => HOSTS[ctx.region ?? 'us'] ?? API;
const KINDS = ['egvs', 'calibrations', 'events'] as const;
type Kind = (typeof KINDS)[number];
const PATHS: Record<Kind, string> = { egvs: '/v3/users/self/egvs', calibrations: '/v3/users/self/calibrations', events: '/v3/users/self/events' };
const SOURCE_TYPES: Record<Kind, string> = { egvs: 'automatic', calibrations: 'fingerprick', events: 'app' };

const SECOND = 1000;
const HOUR = 3600 * SECOND;
const DAY = 24 * HOUR;
/** The longest startDate..endDate Dexcom answers (api-evangelist/dexcom getEgvsV3: "The maximum window is 30 days"). */
export const DEXCOM_MAX_WINDOW_MS = 30 * DAY;

const empty = (sourceType: string): ProviderData => ({ source_type: sourceType, summaries: [], samples: [], workout_streams: [] });
const floorSecond = (ms: number) => Math.floor(ms / SECOND) * SECOND;
const ceilSecond = (ms: number) => Math.ceil(ms / SECOND) * SECOND;

/**
 * Cursor: `step` is `range` (the dataRange request) or the kind being fetched; `from` where its next chunk starts;
 * `<kind>From`/`<kind>To` each kind's span inside the window (to exclusive), null when there is nothing to fetch.
 */
type Cursor = { step: 'range' | Kind; from: number | null; windowStart: number; windowEnd: number } & Record<`${Kind}${'From' | 'To'}`, number | null>;

function readCursor(c: PageCursor): Cursor {
  const num = (k: string) => (typeof c[k] === 'number' ? (c[k] as number) : null);
  const step = c.step;
  if (step !== 'range' && !(KINDS as readonly unknown[]).includes(step))
    throw new ProviderFetchError('non_retriable_error', `dexcom_v3: unknown cursor step ${String(step)}`);
  const cursor = { step, from: num('from'), windowStart: num('windowStart') ?? NaN, windowEnd: num('windowEnd') ?? NaN } as Cursor;
  for (const kind of KINDS) {
    cursor[`${kind}From`] = num(`${kind}From`);
    cursor[`${kind}To`] = num(`${kind}To`);
  }
  if (!Number.isFinite(cursor.windowStart) || !Number.isFinite(cursor.windowEnd))
    throw new ProviderFetchError('non_retriable_error', 'dexcom_v3: cursor without a window');
  return cursor;
}

/** The cursor for the first kind at or after `after` that has a span, or null when none is left. */
function nextKind(cursor: Cursor, after: Kind | null): PageCursor | null {
  const startAt = after === null ? 0 : KINDS.indexOf(after) + 1;
  for (const kind of KINDS.slice(startAt)) {
    const from = cursor[`${kind}From`];
    const to = cursor[`${kind}To`];
    if (from !== null && to !== null && to > from) return { ...cursor, step: kind, from };
  }
  return null;
}

async function fetchDataRange(ctx: ProviderCallContext): Promise<DexcomDataRange> {
  const res = await ctx.http.request<DexcomDataRange>({ url: `${apiOf(ctx)}/v3/users/self/dataRange` });
  if (!res.body || typeof res.body !== 'object') throw new ProviderFetchError('provider_unavailable', 'dexcom_v3: dataRange answered without a body');
  return res.body;
}

async function fetchRange(ctx: ProviderCallContext, cursor: Cursor): Promise<ProviderPage> {
  const range = await fetchDataRange(ctx);
  const clipped: Cursor = { ...cursor };
  for (const kind of KINDS) {
    const span = dataRangeSpan(range[kind]);
    // The span's end is the last record's systemTime: +1 s makes it part of the exclusive end.
    const from = span ? Math.max(cursor.windowStart, floorSecond(span.startMs)) : null;
    const to = span ? Math.min(cursor.windowEnd, ceilSecond(span.endMs) + SECOND) : null;
    [clipped[`${kind}From`], clipped[`${kind}To`]] = from !== null && to !== null && to > from ? [from, to] : [null, null];
  }
  return { data: empty('unknown'), next: nextKind(clipped, null) };
}

async function fetchChunk(ctx: ProviderCallContext, cursor: Cursor, kind: Kind): Promise<ProviderPage> {
  const to = cursor[`${kind}To`];
  const from = cursor.from;
  if (from === null || to === null || to <= from) return { data: empty(SOURCE_TYPES[kind]), next: nextKind(cursor, kind) };
  const chunkEnd = Math.min(to, from + DEXCOM_MAX_WINDOW_MS);
  const res = await ctx.http.request<DexcomRecordsResponse<DexcomEgv | DexcomCalibration | DexcomEvent>>({
    url: `${apiOf(ctx)}${PATHS[kind]}`,
    query: { startDate: formatDexcomQueryTime(from), endDate: formatDexcomQueryTime(chunkEnd - SECOND) },
  });
  const body = res.body;
  if (body !== undefined && (typeof body !== 'object' || body === null || (body.records !== undefined && !Array.isArray(body.records)))) {
    throw new ProviderFetchError('provider_unavailable', `dexcom_v3: ${PATHS[kind]} answered a body without a records array`);
  }
  const samples =
    kind === 'egvs'
      ? mapEgvs(body as DexcomRecordsResponse<DexcomEgv>)
      : kind === 'calibrations'
        ? mapCalibrations(body as DexcomRecordsResponse<DexcomCalibration>)
        : mapEvents(body as DexcomRecordsResponse<DexcomEvent>);
  const next = chunkEnd < to ? { ...cursor, step: kind, from: chunkEnd } : nextKind(cursor, kind);
  return { data: { ...empty(SOURCE_TYPES[kind]), samples }, next };
}

export const integration: ProviderIntegration = {
  slug: 'dexcom_v3',
  oauth: {
    // api-evangelist/dexcom openapi securitySchemes; developer.dexcom.com/docs/dexcom/authentication.
    authorizeUrl: `${API}/v2/oauth2/login`,
    tokenUrl: `${API}/v2/oauth2/token`,
    // "The only acceptable scope value is `offline_access`" (it is what yields the refresh token).
    scopes: ['offline_access'],
    scopeSeparator: ' ',
    // TokenRequest: client_id and client_secret in the form body.
    clientAuth: 'body',
    pkce: false,
    // The token response is plain OAuth (access_token, expires_in 7200 in the examples, token_type, refresh_token).
    refreshable: true,
  },
  historyDays: 90,
  // developer.dexcom.com v3 endpoint overview: 60,000 calls per app per hour.
  budget: { provider: 'Dexcom', windows: [{ per: 'hour', ms: 3_600_000, limit: 60_000 }] },
  resources: ['glucose'],
  regions: {
    choices: REGION_CHOICES,
    // This deployment's regions: a US team's users are mostly in the US, an EU team's in Europe.
    defaultFor: (teamRegion: string) => (teamRegion === 'eu' ? 'eu' : 'us'),
    hostFor: (region: string) => HOSTS[region] ?? null,
  },

  firstPage(resource: string, window: PullWindow): PageCursor | null {
    if (resource !== 'glucose') return null;
    const windowStart = floorSecond(window.start.getTime());
    const windowEnd = ceilSecond(window.end.getTime());
    if (windowEnd <= windowStart) return null;
    const cursor: PageCursor = { step: 'range', from: null, windowStart, windowEnd };
    for (const kind of KINDS) Object.assign(cursor, { [`${kind}From`]: null, [`${kind}To`]: null });
    return cursor;
  },

  async fetchPage(ctx: ProviderCallContext, resource: string, rawCursor: PageCursor): Promise<ProviderPage> {
    if (resource !== 'glucose') throw new ProviderFetchError('non_retriable_error', `dexcom_v3 has no pull unit ${resource}`);
    const cursor = readCursor(rawCursor);
    if (cursor.step === 'range') return fetchRange(ctx, cursor);
    return fetchChunk(ctx, cursor, cursor.step);
  },

  /**
   * Every v3 response names the user: `userId`, "unique on a per-Dexcom account, per-client basis"
   * (getEstimatedGlucoseValuesV3). dataRange is the lightest call that carries it.
   */
  async afterConnect(ctx: ProviderCallContext): Promise<{ externalUserId: string | null }> {
    const range = await fetchDataRange(ctx);
    return { externalUserId: typeof range.userId === 'string' && range.userId ? range.userId : null };
  },

  /**
   * Dexcom documents a 429 beyond 60,000 calls per app per hour and no reset header (endpoint-overview, "Request
   * Rate Limits"); a Retry-After, if one ever comes, is honoured first by http.ts. Without one: the next full hour,
   * assuming the hour is a clock hour (not stated).
   */
  rateLimitResetAt(_headers: Headers, now: Date): Date | null {
    return new Date(Math.floor(now.getTime() / HOUR) * HOUR + HOUR);
  },
};
