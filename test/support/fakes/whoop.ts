import { createHash } from 'node:crypto';
import type {
  WhoopBasicProfile,
  WhoopBodyMeasurement,
  WhoopCycle,
  WhoopRecovery,
  WhoopScoreState,
  WhoopSleep,
  WhoopWebhookType,
  WhoopWorkout,
} from '../../../lib/wearables/providers/whoop/api-types';
import { FakeProvider, round, seededRandom, type FakeReply, type FakeRequest, type FakeUser } from './fake-provider';

/**
 * A loopback fake of the WHOOP API v2, after its official OpenAPI 3.0.1 "WHOOP API 2.0.0" (api-evangelist/whoop-co
 * `openapi/_original/whoop-api-openapi.yml`) and the response examples beside it (`examples/whoop-list-sleep-example.json`,
 * `whoop-list-workouts-example.json`, `whoop-get-recovery-example.json`, `whoop-webhook-sleep-updated-example.json`).
 *
 * - OAuth as WHOOP's Ory-Hydra server does it: `GET|POST /oauth/oauth2/auth` (consent page; `state` of at least 8
 *   characters, known scopes only), `POST /oauth/oauth2/token` with the client id and secret in the form body. A refresh
 *   token is issued only when the grant has the `offline` scope. Refresh tokens rotate: a refresh issues a new pair and
 *   the refresh token it used is refused from then on (400 invalid_grant), and the access token issued with it is
 *   revoked (fosite revokes the previous pair). Access tokens last 3600 s.
 * - Data under `/developer`: profile, body measurement, cycles, recoveries, sleeps, workouts (collections and by id),
 *   `DELETE /v2/user/access`. Collections page with `limit` (default 10, at most 25; more is a 400), `start`/`end`
 *   instants and `nextToken`, answer `{records, next_token}` newest first, and return records that intersect the
 *   window. Every scope is checked.
 * - Rate limit per client app across all users: 100 requests per 60 s and 10,000 per day by default (constructor
 *   options), answered 429 with `X-RateLimit-Limit: "100, 100;window=60, 10000;window=86400"`, `X-RateLimit-Remaining`
 *   and `X-RateLimit-Reset` (seconds until the nearest window frees a request); the same headers on every API answer
 *   (developer.whoop.com/docs/developing/rate-limiting). No Retry-After, as WHOOP.
 * - Deterministic data per user (seeded from `user.seed`, in `user.zoneOffsetSeconds`) for any window up to
 *   `historyDays` back: one primary sleep a night with its recovery, a cycle per day from one sleep onset to the next,
 *   an occasional nap, 0–2 workouts a day. Records end in the past only; the current cycle has no `end` yet.
 * - Signed webhooks (`sendPush`) as WHOOP signs them.
 */
export const FAKE_WHOOP_CLIENT = { clientId: 'fake-whoop-client-id', clientSecret: 'fake-whoop-client-secret' };

export const WHOOP_SCOPES = ['offline', 'read:recovery', 'read:cycles', 'read:sleep', 'read:workout', 'read:profile', 'read:body_measurement'] as const;

const AUTHORIZE_PATH = '/oauth/oauth2/auth';
const TOKEN_PATH = '/oauth/oauth2/token';
const API = '/developer';
const ACCESS_TTL_SECONDS = 3600;
const MAX_LIMIT = 25;
const DEFAULT_LIMIT = 10;
const SECOND = 1000;
const MIN = 60 * SECOND;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

export type WhoopRecordKind = 'sleep' | 'workout' | 'cycle' | 'recovery';
/** What servedCount counts: records per endpoint family. */
export type WhoopServedKind = WhoopRecordKind | 'profile' | 'body_measurement';

export interface FakeWhoopRateLimit {
  /** Requests per window per client app (default 100). */
  limit?: number;
  /** The short window in seconds (default 60). */
  windowSeconds?: number;
  /** Requests per day (default 10,000); null: no daily limit. */
  dailyLimit?: number | null;
  /** The long window in seconds (default 86,400). */
  daySeconds?: number;
  /** `rolling`: any `windowSeconds` span holds at most `limit` requests (default); `fixed`: windows aligned to the epoch. */
  mode?: 'rolling' | 'fixed';
}

export interface FakeWhoopOptions {
  port?: number;
  clientId?: string;
  clientSecret?: string;
  rateLimit?: FakeWhoopRateLimit;
  /**
   * Ory Hydra's refresh-token reuse detection: presenting an already-rotated refresh token also revokes every token
   * issued from the same grant since. Off by default (WHOOP's documented behaviour is only that the old token is refused).
   */
  reuseRevokesFamily?: boolean;
  /** Days of history a user has before it was added (default 400). */
  historyDays?: number;
}

interface RefreshMeta {
  scope: string;
  /** The grant every rotation of this token descends from. */
  family: string;
  /** The access token issued together with it. */
  access: string;
  /** When it was used (rotated away); null while it is the current one. */
  rotatedAt: number | null;
}

interface UserData {
  /** Local day numbers whose records exist in the maps. */
  days: Set<number>;
  firstDay: number;
  cycleBase: number;
  sleeps: Map<string, WhoopSleep>;
  workouts: Map<string, WhoopWorkout>;
  cycles: Map<number, WhoopCycle>;
  /** By cycle id. */
  recoveries: Map<number, WhoopRecovery>;
  /** Ids (`kind:id`) a test removed: never generated again. */
  removed: Set<string>;
  /** The scores of records a test made unscored, restored when they are scored again. */
  stash: Map<string, unknown>;
  body: WhoopBodyMeasurement;
  profile: Omit<WhoopBasicProfile, 'user_id'>;
}

interface Gate {
  ok: boolean;
  headers: Record<string, string>;
}

const SPORTS: { name: string; outdoor: boolean; speed: [number, number] | null; hr: [number, number] }[] = [
  { name: 'running', outdoor: true, speed: [2.6, 3.6], hr: [140, 165] },
  { name: 'cycling', outdoor: true, speed: [6, 8.5], hr: [125, 150] },
  { name: 'walking', outdoor: true, speed: [1.2, 1.6], hr: [95, 115] },
  { name: 'hiking-rucking', outdoor: true, speed: [1, 1.4], hr: [105, 130] },
  { name: 'swimming', outdoor: false, speed: [0.7, 1.1], hr: [120, 145] },
  { name: 'weightlifting', outdoor: false, speed: null, hr: [100, 125] },
  { name: 'functional-fitness', outdoor: false, speed: null, hr: [130, 155] },
  { name: 'yoga', outdoor: false, speed: null, hr: [85, 105] },
  { name: 'hiit', outdoor: false, speed: null, hr: [140, 165] },
  { name: 'tennis', outdoor: false, speed: null, hr: [125, 150] },
];

const FIRST_NAMES = ['Alex', 'Sam', 'Jordan', 'Taylor', 'Morgan', 'Casey', 'Riley', 'Jamie'];
const LAST_NAMES = ['Smith', 'Garcia', 'Müller', 'Rossi', 'Dubois', 'Kowalski', 'Tanaka', 'Silva'];

/** A deterministic version-4-shaped UUID of the parts. */
function uuidOf(...parts: (string | number)[]): string {
  const h = createHash('sha256').update(parts.join(':')).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${((parseInt(h[16], 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const uniform = (r: () => number, lo: number, hi: number) => lo + (hi - lo) * r();
const toSecond = (ms: number) => Math.round(ms / SECOND) * SECOND;
const iso = (ms: number) => new Date(ms).toISOString();

/** WHOOP's Time Zone Designator of an offset: 'Z' for UTC (Java's ZoneOffset), else ±hh:mm. */
export function whoopTzd(offsetSeconds: number): string {
  if (offsetSeconds === 0) return 'Z';
  const abs = Math.abs(offsetSeconds);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${offsetSeconds < 0 ? '-' : '+'}${pad(Math.floor(abs / 3600))}:${pad(Math.floor((abs % 3600) / 60))}`;
}

const badRequest = (message: string): FakeReply => ({ status: 400, body: { error: 'bad_request', message } });
const notFound = (message: string): FakeReply => ({ status: 404, body: { error: 'not_found', message } });

export class FakeWhoop extends FakeProvider {
  /** Token-endpoint calls by grant_type (failed ones included). */
  readonly tokenCalls: Record<string, number> = {};
  /** Refresh attempts with a refresh token that had already been rotated away. */
  refreshTokenReuses = 0;
  /** 429s the rate limiter answered (injected faults not counted). */
  rateLimitedResponses = 0;
  /** Requests to the data API (`/developer/...`), answered or not. */
  apiRequests = 0;
  /** Users whose access was revoked through `DELETE /v2/user/access`, in order. */
  readonly revokedThroughApi: string[] = [];
  readonly limits: Required<FakeWhoopRateLimit>;
  private readonly refreshMeta = new Map<string, RefreshMeta>();
  private readonly data = new Map<string, UserData>();
  private readonly served = new Map<string, Record<string, string[]>>();
  /** Accepted API requests' arrival times (rolling mode). */
  private readonly hits: number[] = [];
  private hitsFrom = 0;
  private fixed = { windowStart: 0, windowCount: 0, dayStart: 0, dayCount: 0 };
  private nextUserNumber = 10129;
  private readonly historyDays: number;
  private readonly reuseRevokesFamily: boolean;

  constructor(opts: FakeWhoopOptions = {}) {
    super({
      slug: 'whoop_v2',
      name: 'WHOOP',
      clientId: opts.clientId ?? FAKE_WHOOP_CLIENT.clientId,
      clientSecret: opts.clientSecret ?? FAKE_WHOOP_CLIENT.clientSecret,
      authorizePath: AUTHORIZE_PATH,
      port: opts.port,
    });
    this.limits = {
      limit: opts.rateLimit?.limit ?? 100,
      windowSeconds: opts.rateLimit?.windowSeconds ?? 60,
      dailyLimit: opts.rateLimit?.dailyLimit === undefined ? 10_000 : opts.rateLimit.dailyLimit,
      daySeconds: opts.rateLimit?.daySeconds ?? 86_400,
      mode: opts.rateLimit?.mode ?? 'rolling',
    };
    this.historyDays = opts.historyDays ?? 400;
    this.reuseRevokesFamily = opts.reuseRevokesFamily ?? false;

    this.route('GET', AUTHORIZE_PATH, (req) => this.authorize(req));
    this.route('POST', TOKEN_PATH, (req) => this.token(req));

    this.api('GET', '/v2/user/profile/basic', 'read:profile', (_req, user) => {
      this.count(user.id, 'profile', user.id);
      return { body: { user_id: whoopUserId(user), ...this.userData(user).profile } };
    });
    this.api('GET', '/v2/user/measurement/body', 'read:body_measurement', (_req, user) => {
      this.count(user.id, 'body_measurement', user.id);
      return { body: this.userData(user).body };
    });
    this.api('GET', '/v2/cycle', 'read:cycles', (req, user) => this.collection(req, user, 'cycle'));
    this.api('GET', '/v2/cycle/{cycleId}', 'read:cycles', (req, user) => this.cycleById(req, user, (c) => this.serve(user, 'cycle', c)));
    this.api('GET', '/v2/cycle/{cycleId}/sleep', 'read:sleep', (req, user) =>
      this.cycleById(req, user, (c) => {
        const sleep = this.visible(user, 'sleep').find((s) => s.cycle_id === c.id && !s.nap);
        return sleep ? this.serve(user, 'sleep', sleep) : notFound(`No sleep for cycle ${c.id}`);
      }),
    );
    this.api('GET', '/v2/cycle/{cycleId}/recovery', 'read:recovery', (req, user) =>
      this.cycleById(req, user, (c) => {
        const recovery = this.visible(user, 'recovery').find((r) => r.cycle_id === c.id);
        return recovery ? this.serve(user, 'recovery', recovery) : notFound(`No recovery for cycle ${c.id}`);
      }),
    );
    this.api('GET', '/v2/recovery', 'read:recovery', (req, user) => this.collection(req, user, 'recovery'));
    this.api('GET', '/v2/activity/sleep', 'read:sleep', (req, user) => this.collection(req, user, 'sleep'));
    this.api('GET', '/v2/activity/sleep/{sleepId}', 'read:sleep', (req, user) => this.byUuid(req, user, 'sleep', req.query.sleepId));
    this.api('GET', '/v2/activity/workout', 'read:workout', (req, user) => this.collection(req, user, 'workout'));
    this.api('GET', '/v2/activity/workout/{workoutId}', 'read:workout', (req, user) => this.byUuid(req, user, 'workout', req.query.workoutId));
    this.api('DELETE', '/v2/user/access', null, (_req, user) => {
      this.revokeUser(user.id);
      user.revoked = true;
      this.revokedThroughApi.push(user.id);
      return { status: 204 };
    });
  }

  // ---- Users --------------------------------------------------------------------------------------------------

  /** WHOOP user ids are int64: consecutive numbers from 10129 (the spec's example id). */
  protected override newUserId(): number {
    while (this.users.has(String(this.nextUserNumber))) this.nextUserNumber++;
    return this.nextUserNumber++;
  }

  // ---- OAuth ----------------------------------------------------------------------------------------------------

  /** The authorize page after Hydra's checks: code flow, known scopes, a `state` of 8 characters or more. */
  private authorize(req: FakeRequest): FakeReply {
    const q = req.query;
    if (q.client_id === this.options.clientId && q.redirect_uri) {
      const refuse = (error: string, description: string): FakeReply => {
        const target = new URL(q.redirect_uri);
        target.searchParams.set('error', error);
        target.searchParams.set('error_description', description);
        if (q.state) target.searchParams.set('state', q.state);
        return { status: 302, headers: { location: target.toString() } };
      };
      if (q.response_type !== 'code') return refuse('unsupported_response_type', 'Only the authorization code flow is supported.');
      const unknown = (q.scope ?? '').split(' ').filter((s) => s && !(WHOOP_SCOPES as readonly string[]).includes(s));
      if (unknown.length) return refuse('invalid_scope', `Unknown scope(s): ${unknown.join(' ')}`);
      if (!q.state || q.state.length < 8)
        return refuse('invalid_state', 'The state is missing or has fewer than 8 characters and is therefore considered too weak.');
    }
    return this.consentPage(req);
  }

  private token(req: FakeRequest): FakeReply {
    const grantType = req.form.grant_type ?? '';
    this.tokenCalls[grantType] = (this.tokenCalls[grantType] ?? 0) + 1;
    const oauthError = (status: number, error: string, description: string): FakeReply => ({
      status,
      body: { error, error_description: description, status_code: status },
    });
    // WHOOP apps authenticate with client_secret_post: id and secret in the form body.
    const clientId = this.tokenClient(req, 'body');
    if (!clientId) return oauthError(401, 'invalid_client', 'Client authentication failed (client_id and client_secret are expected in the request body).');
    if (grantType === 'authorization_code') {
      const redeemed = this.redeemCode(req.form, clientId);
      if ('error' in redeemed) return oauthError(400, redeemed.error, redeemed.description);
      const { grant } = redeemed;
      const user = this.users.get(grant.userId);
      if (!user) return oauthError(400, 'invalid_grant', 'The user of this code no longer exists.');
      user.revoked = false; // a new consent after a revocation
      const issued = this.issue(grant.userId, grant.scope, grant.code, hasOffline(grant.scope));
      grant.issued.push(...issued.tokens);
      return { body: issued.body };
    }
    if (grantType === 'refresh_token') {
      const presented = req.form.refresh_token ?? '';
      const rt = this.refreshTokens.get(presented);
      const meta = this.refreshMeta.get(presented);
      const invalid = oauthError(
        400,
        'invalid_grant',
        'The provided authorization grant (e.g., authorization code, resource owner credentials) or refresh token is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client.',
      );
      if (!rt || !meta || rt.revoked) return invalid;
      if (meta.rotatedAt !== null || rt.validUntil <= Date.now()) {
        this.refreshTokenReuses++;
        if (this.reuseRevokesFamily) this.revokeFamily(meta.family);
        return invalid;
      }
      const user = this.users.get(rt.userId);
      if (!user || user.revoked) return invalid;
      // Rotation: the presented token is spent now, and the access token issued with it dies with it.
      meta.rotatedAt = Date.now();
      rt.validUntil = meta.rotatedAt;
      const previousAccess = this.accessTokens.get(meta.access);
      if (previousAccess) previousAccess.revoked = true;
      // WHOOP's refresh tutorials send scope=offline; a refresh that leaves `offline` out of an explicit scope gets no new refresh token.
      const requested = req.form.scope;
      const wantsRefresh = hasOffline(meta.scope) && (requested === undefined || hasOffline(requested));
      return { body: this.issue(rt.userId, meta.scope, meta.family, wantsRefresh).body };
    }
    return oauthError(400, 'unsupported_grant_type', `grant_type ${grantType || '(none)'} is not supported.`);
  }

  private issue(userId: string, scope: string, family: string, refresh: boolean): { body: Record<string, unknown>; tokens: string[] } {
    const { access, refresh: rt } = this.issueTokens(userId, { accessTtlSeconds: ACCESS_TTL_SECONDS, refresh, scope });
    if (rt) this.refreshMeta.set(rt.token, { scope, family, access: access.token, rotatedAt: null });
    const body: Record<string, unknown> = { access_token: access.token, expires_in: ACCESS_TTL_SECONDS, scope, token_type: 'bearer' };
    if (rt) body.refresh_token = rt.token;
    return { body, tokens: rt ? [access.token, rt.token] : [access.token] };
  }

  private revokeFamily(family: string): void {
    for (const [token, meta] of this.refreshMeta) {
      if (meta.family !== family) continue;
      const rt = this.refreshTokens.get(token);
      if (rt) rt.revoked = true;
      const at = this.accessTokens.get(meta.access);
      if (at) at.revoked = true;
    }
  }

  /** Whether WHOOP would still accept this refresh token. */
  refreshTokenValid(token: string): boolean {
    const rt = this.refreshTokens.get(token);
    const meta = this.refreshMeta.get(token);
    const user = rt ? this.users.get(rt.userId) : undefined;
    return !!rt && !!meta && !rt.revoked && meta.rotatedAt === null && rt.validUntil > Date.now() && !!user && !user.revoked;
  }

  /** Whether this access token is accepted now. */
  accessTokenValid(token: string): boolean {
    const at = this.accessTokens.get(token);
    const user = at ? this.users.get(at.userId) : undefined;
    return !!at && !at.revoked && at.expiresAt > Date.now() && !!user && !user.revoked;
  }

  /** The refresh tokens of a user WHOOP would accept now (one per live grant). */
  validRefreshTokens(userId: string): string[] {
    return [...this.refreshTokens.values()].filter((t) => t.userId === userId && this.refreshTokenValid(t.token)).map((t) => t.token);
  }

  /** Token-endpoint calls, of one grant type or all. */
  tokenEndpointCalls(grantType?: 'authorization_code' | 'refresh_token'): number {
    return grantType ? (this.tokenCalls[grantType] ?? 0) : Object.values(this.tokenCalls).reduce((a, b) => a + b, 0);
  }

  // ---- Rate limit -----------------------------------------------------------------------------------------------

  /** Admits one API request now or refuses it, with WHOOP's headers either way. */
  private admit(now: number): Gate {
    const { limit, dailyLimit } = this.limits;
    const windowMs = this.limits.windowSeconds * SECOND;
    const dayMs = this.limits.daySeconds * SECOND;
    let short: { count: number; resetMs: number };
    let long: { count: number; resetMs: number };
    if (this.limits.mode === 'fixed') {
      const windowStart = Math.floor(now / windowMs) * windowMs;
      const dayStart = Math.floor(now / dayMs) * dayMs;
      if (this.fixed.windowStart !== windowStart) Object.assign(this.fixed, { windowStart, windowCount: 0 });
      if (this.fixed.dayStart !== dayStart) Object.assign(this.fixed, { dayStart, dayCount: 0 });
      short = { count: this.fixed.windowCount, resetMs: windowStart + windowMs - now };
      long = { count: this.fixed.dayCount, resetMs: dayStart + dayMs - now };
    } else {
      const horizon = dailyLimit === null ? windowMs : Math.max(windowMs, dayMs);
      while (this.hitsFrom < this.hits.length && this.hits[this.hitsFrom] <= now - horizon) this.hitsFrom++;
      if (this.hitsFrom > 4096) {
        this.hits.splice(0, this.hitsFrom);
        this.hitsFrom = 0;
      }
      const firstAfter = (t: number) => {
        let lo = this.hitsFrom;
        let hi = this.hits.length;
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          if (this.hits[mid] > t) hi = mid;
          else lo = mid + 1;
        }
        return lo;
      };
      // X-RateLimit-Reset is the time until Remaining is back at its maximum: until the newest request in the window leaves it.
      const inWindow = (spanMs: number) => {
        const count = this.hits.length - firstAfter(now - spanMs);
        return { count, resetMs: count ? this.hits[this.hits.length - 1] + spanMs - now : spanMs };
      };
      short = inWindow(windowMs);
      long = dailyLimit === null ? { count: 0, resetMs: dayMs } : inWindow(dayMs);
    }
    const refusedBy = short.count >= limit ? 'short' : dailyLimit !== null && long.count >= dailyLimit ? 'long' : null;
    if (!refusedBy) {
      if (this.limits.mode === 'fixed') {
        this.fixed.windowCount++;
        this.fixed.dayCount++;
      } else {
        this.hits.push(now);
        short.resetMs = windowMs; // this request is now the newest in both windows
        long.resetMs = dayMs;
      }
      short.count++;
      long.count++;
    }
    const shortLeft = Math.max(0, limit - short.count);
    const longLeft = dailyLimit === null ? Infinity : Math.max(0, dailyLimit - long.count);
    // The limit the client is closest to: the one with fewer requests left (the refusing one on a 429).
    const closest =
      refusedBy === 'long' || (refusedBy === null && longLeft < shortLeft)
        ? { max: dailyLimit as number, left: longLeft, resetMs: long.resetMs }
        : { max: limit, left: shortLeft, resetMs: short.resetMs };
    const policy = [`${limit};window=${this.limits.windowSeconds}`, ...(dailyLimit === null ? [] : [`${dailyLimit};window=${this.limits.daySeconds}`])];
    const headers = {
      'X-RateLimit-Limit': [String(closest.max), ...policy].join(', '),
      'X-RateLimit-Remaining': String(closest.left),
      'X-RateLimit-Reset': String(Math.max(0, Math.ceil(closest.resetMs / SECOND))),
    };
    return { ok: refusedBy === null, headers };
  }

  /** WHOOP's headers of a refused request whose window frees in `resetSeconds`, for `fail({status: 429, headers})`. */
  rateLimitHeaders(resetSeconds: number): Record<string, string> {
    const policy = [
      `${this.limits.limit};window=${this.limits.windowSeconds}`,
      ...(this.limits.dailyLimit === null ? [] : [`${this.limits.dailyLimit};window=${this.limits.daySeconds}`]),
    ];
    return { 'X-RateLimit-Limit': [String(this.limits.limit), ...policy].join(', '), 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': String(resetSeconds) };
  }

  /** Requests admitted in the current short window (rolling: the last `windowSeconds`). */
  requestsInWindow(now = Date.now()): number {
    if (this.limits.mode === 'fixed')
      return Math.floor(now / (this.limits.windowSeconds * SECOND)) * this.limits.windowSeconds * SECOND === this.fixed.windowStart
        ? this.fixed.windowCount
        : 0;
    const from = now - this.limits.windowSeconds * SECOND;
    return this.hits.slice(this.hitsFrom).filter((t) => t > from).length;
  }

  // ---- The data API --------------------------------------------------------------------------------------------

  /** A data route: rate limit, bearer token, scope, then the handler; the rate-limit headers on every answer. */
  private api(method: string, path: string, scope: string | null, handler: (req: FakeRequest, user: FakeUser) => FakeReply): void {
    this.route(method, `${API}${path}`, (req) => {
      this.apiRequests++;
      const gate = this.admit(Date.now());
      if (!gate.ok) {
        this.rateLimitedResponses++;
        return { status: 429, headers: gate.headers, body: { error: 'too_many_requests', message: 'Rate limit exceeded' } };
      }
      const auth = this.bearer(req);
      if ('reply' in auth) return { ...auth.reply, headers: { ...gate.headers, ...auth.reply.headers } };
      if (scope) {
        const token = this.accessTokens.get(/^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '');
        if (!token?.scope.split(' ').includes(scope))
          return { status: 401, headers: gate.headers, body: { error: 'insufficient_scope', message: `This request requires the ${scope} scope.` } };
      }
      const reply = handler(req, auth.user);
      return { ...reply, headers: { ...gate.headers, ...reply.headers } };
    });
  }

  private collection(req: FakeRequest, user: FakeUser, kind: WhoopRecordKind): FakeReply {
    const q = req.query;
    let limit = DEFAULT_LIMIT;
    if (q.limit !== undefined) {
      if (!/^\d+$/.test(q.limit) || Number(q.limit) < 1 || Number(q.limit) > MAX_LIMIT)
        return badRequest(`limit must be an integer from 1 to ${MAX_LIMIT}; got ${q.limit}`);
      limit = Number(q.limit);
    }
    const now = Date.now();
    const instant = (name: 'start' | 'end'): number | null | 'bad' => {
      const v = q[name];
      if (v === undefined) return null;
      const ms = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(v) ? Date.parse(v) : NaN;
      return Number.isFinite(ms) ? ms : 'bad';
    };
    const start = instant('start');
    const end = instant('end');
    if (start === 'bad') return badRequest(`start is not a date-time: ${q.start}`);
    if (end === 'bad') return badRequest(`end is not a date-time: ${q.end}`);
    const to = end ?? now;
    if (start !== null && start >= to) return badRequest('start must be before end');
    let offset = 0;
    if (q.nextToken !== undefined) {
      const m = /^o:(\d+)$/.exec(Buffer.from(q.nextToken, 'base64url').toString());
      if (!m) return badRequest('nextToken is invalid');
      offset = Number(m[1]);
    }
    const all = this.window(user, kind, start, to);
    const records = all.slice(offset, offset + limit);
    for (const r of records) this.count(user.id, kind, recordId(kind, r));
    const more = offset + limit < all.length;
    return { body: { records, next_token: more ? Buffer.from(`o:${offset + limit}`).toString('base64url') : null } };
  }

  private cycleById(req: FakeRequest, user: FakeUser, then: (c: WhoopCycle) => FakeReply): FakeReply {
    const raw = req.query.cycleId;
    if (!/^\d+$/.test(raw ?? '')) return badRequest(`cycleId must be an integer: ${raw}`);
    const cycle = this.visible(user, 'cycle').find((c) => c.id === Number(raw));
    return cycle ? then(cycle) : notFound(`No cycle ${raw}`);
  }

  private byUuid(_req: FakeRequest, user: FakeUser, kind: 'sleep' | 'workout', id: string | undefined): FakeReply {
    if (!UUID_RE.test(id ?? '')) return badRequest(`${kind} id must be a UUID: ${id}`);
    const record = (kind === 'sleep' ? this.visible(user, 'sleep') : this.visible(user, 'workout')).find((r) => r.id === id);
    return record ? this.serve(user, kind, record) : notFound(`No ${kind} ${id}`);
  }

  private serve(user: FakeUser, kind: WhoopRecordKind, record: WhoopSleep | WhoopWorkout | WhoopCycle | WhoopRecovery): FakeReply {
    this.count(user.id, kind, recordId(kind, record));
    return { body: record };
  }

  private count(userId: string, kind: WhoopServedKind, id: string): void {
    const mine = this.served.get(userId) ?? {};
    (mine[kind] ??= []).push(id);
    this.served.set(userId, mine);
  }

  /** Records (or profile/body answers) served per kind to a user since the start or the last resetServed. */
  servedCount(userId: string): Record<string, number> {
    return Object.fromEntries(Object.entries(this.served.get(userId) ?? {}).map(([k, ids]) => [k, ids.length]));
  }

  /** The ids served of one kind, in order, repeats included (sleeps and workouts: UUIDs; cycles: ids; recoveries: sleep ids). */
  servedIds(userId: string, kind: WhoopServedKind): string[] {
    return [...(this.served.get(userId)?.[kind] ?? [])];
  }

  resetServed(userId?: string): void {
    if (userId) this.served.delete(userId);
    else this.served.clear();
  }

  // ---- Records -----------------------------------------------------------------------------------------------

  /**
   * Every record of `kind` that the API would list for [start, end) now, newest first (what a full paging returns),
   * without counting anything as served.
   */
  records(userId: string, kind: 'sleep', start: Date, end: Date): WhoopSleep[];
  records(userId: string, kind: 'workout', start: Date, end: Date): WhoopWorkout[];
  records(userId: string, kind: 'cycle', start: Date, end: Date): WhoopCycle[];
  records(userId: string, kind: 'recovery', start: Date, end: Date): WhoopRecovery[];
  records(userId: string, kind: WhoopRecordKind, start: Date, end: Date): (WhoopSleep | WhoopWorkout | WhoopCycle | WhoopRecovery)[] {
    return this.window(this.user(userId), kind, start.getTime(), end.getTime());
  }

  /** The recovery of a sleep, when there is one (visible now). */
  recoveryOfSleep(userId: string, sleepId: string): WhoopRecovery | undefined {
    return this.visible(this.user(userId), 'recovery').find((r) => r.sleep_id === sleepId);
  }

  /** Sets (adds or replaces) a record, as WHOOP would after the user edits or adds an activity. */
  putRecord(userId: string, kind: 'sleep', record: WhoopSleep): void;
  putRecord(userId: string, kind: 'workout', record: WhoopWorkout): void;
  putRecord(userId: string, kind: 'cycle', record: WhoopCycle): void;
  putRecord(userId: string, kind: 'recovery', record: WhoopRecovery): void;
  putRecord(userId: string, kind: WhoopRecordKind, record: WhoopSleep | WhoopWorkout | WhoopCycle | WhoopRecovery): void {
    const d = this.userData(this.user(userId));
    if (kind === 'sleep') d.sleeps.set((record as WhoopSleep).id, record as WhoopSleep);
    if (kind === 'workout') d.workouts.set((record as WhoopWorkout).id, record as WhoopWorkout);
    if (kind === 'cycle') d.cycles.set((record as WhoopCycle).id, record as WhoopCycle);
    if (kind === 'recovery') d.recoveries.set((record as WhoopRecovery).cycle_id, record as WhoopRecovery);
    d.removed.delete(`${kind}:${recordId(kind, record)}`);
  }

  /** Deletes a record (sleeps: with their recovery, as WHOOP does). Answers whether it existed. */
  removeRecord(userId: string, kind: WhoopRecordKind, id: string | number): boolean {
    const d = this.userData(this.user(userId));
    d.removed.add(`${kind}:${id}`);
    if (kind === 'sleep') {
      const sleep = d.sleeps.get(String(id));
      if (sleep) {
        const recovery = d.recoveries.get(sleep.cycle_id);
        if (recovery?.sleep_id === sleep.id) this.removeRecord(userId, 'recovery', recovery.sleep_id);
      }
      return d.sleeps.delete(String(id));
    }
    if (kind === 'workout') return d.workouts.delete(String(id));
    if (kind === 'cycle') return d.cycles.delete(Number(id));
    const byCycle = [...d.recoveries.values()].find((r) => r.sleep_id === String(id) || r.cycle_id === Number(id));
    return byCycle ? d.recoveries.delete(byCycle.cycle_id) : false;
  }

  /**
   * Changes a record's score state: PENDING_SCORE or UNSCORABLE drop its `score` (kept aside), SCORED brings it back.
   * Sleeps and workouts by UUID, cycles by id, recoveries by their sleep's UUID.
   */
  setScoreState(userId: string, kind: WhoopRecordKind, id: string | number, state: WhoopScoreState): void {
    const d = this.userData(this.user(userId));
    const record =
      kind === 'sleep'
        ? d.sleeps.get(String(id))
        : kind === 'workout'
          ? d.workouts.get(String(id))
          : kind === 'cycle'
            ? d.cycles.get(Number(id))
            : [...d.recoveries.values()].find((r) => r.sleep_id === String(id));
    if (!record) throw new Error(`fake WHOOP: no ${kind} ${id} of user ${userId} (list its window first)`);
    const key = `${kind}:${recordId(kind, record)}`;
    const target = record as { score_state: WhoopScoreState; score?: unknown; updated_at: string };
    if (state === 'SCORED') {
      if (target.score === undefined || target.score === null) target.score = d.stash.get(key);
      if (target.score === undefined) throw new Error(`fake WHOOP: ${key} has no score to restore`);
    } else if (target.score !== undefined && target.score !== null) {
      d.stash.set(key, target.score);
      delete target.score;
    }
    target.score_state = state;
    target.updated_at = iso(Date.now());
  }

  setBodyMeasurement(userId: string, body: WhoopBodyMeasurement): void {
    this.userData(this.user(userId)).body = { ...body };
  }

  bodyMeasurement(userId: string): WhoopBodyMeasurement {
    return { ...this.userData(this.user(userId)).body };
  }

  private user(userId: string): FakeUser {
    const user = this.users.get(userId);
    if (!user) throw new Error(`fake WHOOP: no user ${userId}`);
    return user;
  }

  /** Records intersecting [start, end) as the API shows them now, newest first. */
  private window(user: FakeUser, kind: 'sleep', start: number | null, end: number): WhoopSleep[];
  private window(user: FakeUser, kind: WhoopRecordKind, start: number | null, end: number): (WhoopSleep | WhoopWorkout | WhoopCycle | WhoopRecovery)[];
  private window(user: FakeUser, kind: WhoopRecordKind, start: number | null, end: number): (WhoopSleep | WhoopWorkout | WhoopCycle | WhoopRecovery)[] {
    const d = this.userData(user);
    const from = start ?? this.midnight(user, d.firstDay);
    this.generate(user, from, end);
    const now = Date.now();
    const span = (kind2: WhoopRecordKind, r: WhoopSleep | WhoopWorkout | WhoopCycle | WhoopRecovery): [number, number] => {
      if (kind2 === 'recovery') {
        const cycle = d.cycles.get((r as WhoopRecovery).cycle_id);
        const sleep = d.sleeps.get((r as WhoopRecovery).sleep_id);
        const base = cycle ?? sleep;
        return base ? [Date.parse(base.start), base.end ? Date.parse(base.end) : now] : [NaN, NaN];
      }
      const rec = r as WhoopSleep | WhoopWorkout | WhoopCycle;
      return [Date.parse(rec.start), rec.end ? Math.min(Date.parse(rec.end), now) : now];
    };
    const sortKey = (r: WhoopSleep | WhoopWorkout | WhoopCycle | WhoopRecovery): number => {
      if (kind !== 'recovery') return Date.parse((r as WhoopSleep).start);
      const sleep = d.sleeps.get((r as WhoopRecovery).sleep_id);
      return sleep ? Date.parse(sleep.start) : span('recovery', r)[0];
    };
    return this.visible(user, kind)
      .filter((r) => {
        const [s, e] = span(kind, r);
        return s < end && e >= from;
      })
      .sort((a, b) => sortKey(b) - sortKey(a));
  }

  /** Every generated or set record of a kind as the API shows it now: finished ones only, the running cycle without `end`. */
  private visible(user: FakeUser, kind: 'sleep'): WhoopSleep[];
  private visible(user: FakeUser, kind: 'workout'): WhoopWorkout[];
  private visible(user: FakeUser, kind: 'cycle'): WhoopCycle[];
  private visible(user: FakeUser, kind: 'recovery'): WhoopRecovery[];
  private visible(user: FakeUser, kind: WhoopRecordKind): (WhoopSleep | WhoopWorkout | WhoopCycle | WhoopRecovery)[];
  private visible(user: FakeUser, kind: WhoopRecordKind): (WhoopSleep | WhoopWorkout | WhoopCycle | WhoopRecovery)[] {
    const d = this.userData(user);
    const now = Date.now();
    switch (kind) {
      case 'sleep':
        return [...d.sleeps.values()].filter((s) => !s.end || Date.parse(s.end) <= now);
      case 'workout':
        return [...d.workouts.values()].filter((w) => Date.parse(w.end) <= now);
      case 'cycle':
        return [...d.cycles.values()]
          .filter((c) => Date.parse(c.start) <= now)
          .map((c) => {
            if (!c.end || Date.parse(c.end) <= now) return c;
            const { end: _end, ...running } = c;
            return running;
          });
      case 'recovery':
        return [...d.recoveries.values()].filter((r) => Date.parse(r.created_at) <= now);
    }
  }

  // ---- Generated data ---------------------------------------------------------------------------------------

  private userData(user: FakeUser): UserData {
    let d = this.data.get(user.id);
    if (!d) {
      const r = seededRandom(`${user.seed}:person`);
      const height = round(uniform(r, 1.58, 1.92), 4);
      d = {
        days: new Set(),
        firstDay: this.dayOf(user, Date.now()) - this.historyDays,
        cycleBase: (parseInt(createHash('sha256').update(user.seed).digest('hex').slice(0, 6), 16) + 1) * 100_000,
        sleeps: new Map(),
        workouts: new Map(),
        cycles: new Map(),
        recoveries: new Map(),
        removed: new Set(),
        stash: new Map(),
        body: { height_meter: height, weight_kilogram: round(uniform(r, 20, 27) * height ** 2, 4), max_heart_rate: Math.round(uniform(r, 178, 198)) },
        profile: {
          first_name: FIRST_NAMES[Math.floor(r() * FIRST_NAMES.length)],
          last_name: LAST_NAMES[Math.floor(r() * LAST_NAMES.length)],
          email: `whoop-user-${user.id}@example.com`,
        },
      };
      this.data.set(user.id, d);
    }
    return d;
  }

  private dayOf(user: FakeUser, ms: number): number {
    return Math.floor((ms + user.zoneOffsetSeconds * SECOND) / DAY);
  }

  private midnight(user: FakeUser, day: number): number {
    return day * DAY - user.zoneOffsetSeconds * SECOND;
  }

  /** Generates the local days around [from, to] not generated yet (records are then kept, so a test's edits stick). */
  private generate(user: FakeUser, from: number, to: number): void {
    const d = this.userData(user);
    const last = Math.min(this.dayOf(user, to) + 1, this.dayOf(user, Date.now()) + 1);
    for (let day = Math.max(d.firstDay, this.dayOf(user, from) - 1); day <= last; day++) {
      if (d.days.has(day)) continue;
      d.days.add(day);
      this.generateDay(user, d, day);
    }
  }

  /** The primary sleep ending on the morning of local day `day`: onset between 22:00 and 00:30, 6–8.8 h long. */
  private primarySleepSpan(user: FakeUser, day: number): [number, number] {
    const r = seededRandom(`${user.seed}:sleep-span:${day}`);
    const start = toSecond(this.midnight(user, day) + uniform(r, -120, 30) * MIN);
    return [start, toSecond(start + uniform(r, 6, 8.8) * HOUR)];
  }

  private generateDay(user: FakeUser, d: UserData, day: number): void {
    const userId = whoopUserId(user) as number;
    const tzd = whoopTzd(user.zoneOffsetSeconds);
    const r = seededRandom(`${user.seed}:day:${day}`);
    const keep = (kind: WhoopRecordKind, id: string | number) => !d.removed.has(`${kind}:${id}`);
    const [sleepStart, sleepEnd] = this.primarySleepSpan(user, day);
    const [nextSleepStart] = this.primarySleepSpan(user, day + 1);
    const cycleId = d.cycleBase + day;
    const sleepId = uuidOf(user.seed, 'sleep', day);

    // The cycle: from this night's onset to the next one's.
    const strain = round(uniform(r, 4, 18), 4);
    const cycle: WhoopCycle = {
      id: cycleId,
      user_id: userId,
      created_at: iso(sleepStart + 2 * MIN),
      updated_at: iso(nextSleepStart + 5 * MIN),
      start: iso(sleepStart),
      end: iso(nextSleepStart),
      timezone_offset: tzd,
      score_state: 'SCORED',
      score: {
        strain,
        kilojoule: round(uniform(r, 6500, 8500) + strain * 260, 3),
        average_heart_rate: Math.round(uniform(r, 58, 74)),
        max_heart_rate: Math.round(uniform(r, 125, 188)),
      },
    };
    if (keep('cycle', cycleId) && !d.cycles.has(cycleId)) d.cycles.set(cycleId, cycle);

    const sleep = this.sleepRecord(r, sleepId, cycleId, userId, tzd, sleepStart, sleepEnd, false);
    if (keep('sleep', sleepId) && !d.sleeps.has(sleepId)) d.sleeps.set(sleepId, sleep);

    const calibrating = day - d.firstDay < 4; // WHOOP calibrates a new member's first nights
    const recoveredAt = iso(sleepEnd + Math.round(uniform(r, 2, 9)) * MIN);
    const recovery: WhoopRecovery = {
      cycle_id: cycleId,
      sleep_id: sleepId,
      user_id: userId,
      created_at: recoveredAt,
      updated_at: recoveredAt,
      score_state: 'SCORED',
      score: {
        user_calibrating: calibrating,
        recovery_score: Math.round(uniform(r, 18, 99)),
        resting_heart_rate: Math.round(uniform(r, 47, 64)),
        hrv_rmssd_milli: round(uniform(r, 28, 115), 6),
        spo2_percentage: round(uniform(r, 94.5, 98.9), 4),
        skin_temp_celsius: round(uniform(r, 32.8, 35.2), 4),
      },
    };
    if (keep('recovery', sleepId) && keep('sleep', sleepId) && !d.recoveries.has(cycleId)) d.recoveries.set(cycleId, recovery);

    if (r() < 0.15) {
      const napStart = toSecond(this.midnight(user, day) + uniform(r, 13, 16) * HOUR);
      const napId = uuidOf(user.seed, 'nap', day);
      const nap = this.sleepRecord(r, napId, cycleId, userId, tzd, napStart, toSecond(napStart + uniform(r, 20, 55) * MIN), true);
      if (r() < 0.1) (nap.score_state = 'UNSCORABLE'), delete nap.score;
      if (keep('sleep', napId) && !d.sleeps.has(napId)) d.sleeps.set(napId, nap);
    }

    const workouts = r() < 0.55 ? (r() < 0.2 ? 2 : 1) : 0;
    for (let i = 0; i < workouts; i++) {
      const id = uuidOf(user.seed, 'workout', day, i);
      const startHour = i === 0 && r() < 0.5 ? uniform(r, 6, 8) : uniform(r, 17, 19.5);
      const start = toSecond(this.midnight(user, day) + startHour * HOUR);
      const end = toSecond(start + uniform(r, 25, 90) * MIN);
      const w = this.workoutRecord(r, id, userId, tzd, start, end);
      if (keep('workout', id) && !d.workouts.has(id)) d.workouts.set(id, w);
    }
  }

  private sleepRecord(r: () => number, id: string, cycleId: number, userId: number, tzd: string, start: number, end: number, nap: boolean): WhoopSleep {
    const inBed = end - start;
    const noData = r() < 0.1 ? Math.round(uniform(r, 1, 15)) * MIN : 0;
    const awake = Math.round(inBed * uniform(r, 0.04, 0.12));
    const asleep = inBed - awake - noData;
    const sws = Math.round(asleep * uniform(r, nap ? 0.05 : 0.17, nap ? 0.2 : 0.24));
    const rem = Math.round(asleep * uniform(r, nap ? 0 : 0.19, nap ? 0.1 : 0.26));
    const light = asleep - sws - rem;
    const baseline = Math.round(uniform(r, 7.4, 8.6) * HOUR);
    const debt = Math.round(uniform(r, 0, 0.8) * HOUR);
    const strainNeed = Math.round(uniform(r, 0, 0.6) * HOUR);
    const needed = baseline + debt + strainNeed;
    return {
      id,
      cycle_id: cycleId,
      user_id: userId,
      created_at: iso(end + 3 * MIN + Math.round(r() * 59_999)),
      updated_at: iso(end + 6 * MIN + Math.round(r() * 59_999)),
      start: iso(start),
      end: iso(end),
      timezone_offset: tzd,
      nap,
      score_state: 'SCORED',
      score: {
        stage_summary: {
          total_in_bed_time_milli: inBed,
          total_awake_time_milli: awake,
          total_no_data_time_milli: noData,
          total_light_sleep_time_milli: light,
          total_slow_wave_sleep_time_milli: sws,
          total_rem_sleep_time_milli: rem,
          sleep_cycle_count: nap ? Math.round(uniform(r, 0, 1)) : Math.round(uniform(r, 3, 6)),
          disturbance_count: nap ? Math.round(uniform(r, 0, 3)) : Math.round(uniform(r, 4, 16)),
        },
        sleep_needed: { baseline_milli: baseline, need_from_sleep_debt_milli: debt, need_from_recent_strain_milli: strainNeed, need_from_recent_nap_milli: 0 },
        respiratory_rate: round(uniform(r, 13.2, 17.8), 6),
        sleep_performance_percentage: round(Math.min(100, (100 * asleep) / needed), 1),
        sleep_consistency_percentage: Math.round(uniform(r, 55, 95)),
        sleep_efficiency_percentage: round((100 * asleep) / inBed, 6),
      },
    };
  }

  private workoutRecord(r: () => number, id: string, userId: number, tzd: string, start: number, end: number): WhoopWorkout {
    const sport = SPORTS[Math.floor(r() * SPORTS.length)];
    const duration = end - start;
    const avgHr = Math.round(uniform(r, ...sport.hr));
    const w: WhoopWorkout = {
      id,
      user_id: userId,
      created_at: iso(end + 4 * MIN),
      updated_at: iso(end + 9 * MIN),
      start: iso(start),
      end: iso(end),
      timezone_offset: tzd,
      sport_name: sport.name,
      score_state: 'SCORED',
    };
    if (r() < 0.04) {
      w.score_state = 'UNSCORABLE';
      return w;
    }
    // Zone durations add up to the workout.
    const weights = [0.05, 0.15, 0.25, 0.3, 0.2, 0.05].map((x) => x * uniform(r, 0.5, 1.5));
    const total = weights.reduce((a, b) => a + b, 0);
    const zones = weights.map((x) => Math.round((duration * x) / total));
    zones[3] += duration - zones.reduce((a, b) => a + b, 0);
    w.score = {
      strain: round(uniform(r, 5, 16), 4),
      average_heart_rate: avgHr,
      max_heart_rate: avgHr + Math.round(uniform(r, 12, 32)),
      kilojoule: round((duration / MIN) * uniform(r, 28, 58), 4),
      percent_recorded: r() < 0.9 ? 100 : round(uniform(r, 92, 99.9), 2),
      zone_durations: {
        zone_zero_milli: zones[0],
        zone_one_milli: zones[1],
        zone_two_milli: zones[2],
        zone_three_milli: zones[3],
        zone_four_milli: zones[4],
        zone_five_milli: zones[5],
      },
    };
    if (sport.speed) w.score.distance_meter = round((uniform(r, ...sport.speed) * duration) / SECOND, 5);
    if (sport.outdoor) {
      w.score.altitude_gain_meter = round(uniform(r, 5, 180), 5);
      w.score.altitude_change_meter = round(uniform(r, -3, 3), 5);
    }
    return w;
  }

  // ---- Webhooks ---------------------------------------------------------------------------------------------

  /**
   * POSTs a webhook to `url` as WHOOP sends it: JSON `{user_id, id, type, trace_id}`, `X-WHOOP-Signature-Timestamp`
   * (ms) and `X-WHOOP-Signature` = base64(HMAC-SHA256(client secret, timestamp + raw body)). `timestampMs` and
   * `secret` let a test send a stale or forged one.
   */
  async sendPush(
    url: string,
    event: { type: WhoopWebhookType; id: string; userId: string; traceId?: string; timestampMs?: number; secret?: string },
  ): Promise<{ status: number; text: string; body: string; headers: Record<string, string> }> {
    const user = this.users.get(event.userId);
    const body = JSON.stringify({
      user_id: user ? whoopUserId(user) : Number(event.userId),
      id: event.id,
      type: event.type,
      trace_id: event.traceId ?? uuidOf('trace', event.type, event.id, Date.now(), Math.random()),
    });
    const timestamp = String(event.timestampMs ?? Date.now());
    const headers = {
      'content-type': 'application/json',
      'X-WHOOP-Signature': FakeProvider.hmacBase64(event.secret ?? this.options.clientSecret, timestamp + body),
      'X-WHOOP-Signature-Timestamp': timestamp,
    };
    const res = await this.push(url, body, headers);
    return { ...res, body, headers };
  }
}

const hasOffline = (scope: string) => scope.split(/[ +]/).includes('offline');

/** WHOOP's int64 user id of a fake user (its id when numeric). */
function whoopUserId(user: FakeUser): number | string {
  return /^\d+$/.test(user.id) ? Number(user.id) : user.id;
}

function recordId(kind: WhoopRecordKind, r: WhoopSleep | WhoopWorkout | WhoopCycle | WhoopRecovery): string {
  if (kind === 'recovery') return (r as WhoopRecovery).sleep_id;
  return String((r as WhoopSleep | WhoopCycle).id);
}

export async function startFakeWhoop(opts: FakeWhoopOptions = {}): Promise<FakeWhoop> {
  return new FakeWhoop(opts).start();
}
