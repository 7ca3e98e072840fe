import { createHash, createHmac, randomBytes, randomUUID } from 'node:crypto';
import { FakeProvider, round, seededRandom, type FakeReply, type FakeRequest, type FakeUser } from './fake-provider';

/**
 * A loopback fake of the Oura API v2 after its official OpenAPI (tgrk/ex_oura `test/support/openapi-1.29.json`; auth,
 * rate-limit and webhook prose in `openapi-1.37.json` at 544e2c60) and its recorded responses (tgrk/ex_oura
 * `test/fixture/vcr_cassettes/*.json`, `test/fixture/mock/*.json`). Everything Oura serves on cloud.ouraring.com and
 * api.ouraring.com is served here on one port (PROVIDER_OURA_BASE_URL keeps the paths):
 *
 * - OAuth: `/oauth/authorize` (the base consent page), `POST /oauth/token` (client_id/client_secret in the form body;
 *   access tokens for `expires_in` 86400; refresh tokens rotate: a refresh issues a new pair and the used refresh token
 *   is refused afterwards), `POST /oauth/revoke?access_token=` (the bearer header is accepted too).
 * - Data: `/v2/usercollection/{personal_info, daily_activity, sleep, daily_sleep, workout, daily_spo2, heartrate}`
 *   and the single-document routes `/{route}/{document_id}`, each list paged with `next_token`, scopes enforced (403).
 *   Date filters follow what the cassettes show, which is route-specific (see `DATE_FILTERS`); `/heartrate` takes
 *   `start_datetime`/`end_datetime` and refuses a span over 30 days (400).
 * - Rate limit: 5000 requests per 5 minutes per app (1.37 FAQ); over it a 429 with `Retry-After`,
 *   `X-RateLimit-Limit`, `X-RateLimit-Window`, `X-RateLimit-Reset`, `X-RateLimit-Tier` (1.37 overview).
 * - Webhooks: `/v2/webhook/subscription` (create with the callback's verification GET, list, get, update, delete,
 *   renew; `x-client-id`/`x-client-secret`), and pushes signed as Oura signs them (`sendPush`, `notify`).
 *
 * Data are generated per user and day from `user.seed` in the user's `zoneOffsetSeconds`, the same for the same day
 * whatever window asks; a document exists only once it would have synced (its end before `Date.now()`). Tests can
 * add or replace documents (`put`) and delete generated ones (`remove`).
 */
export const FAKE_OURA_CLIENT = { clientId: 'fake-oura-client-id', clientSecret: 'fake-oura-client-secret' };

export type OuraListKind = 'sleep' | 'daily_sleep' | 'daily_activity' | 'workout' | 'daily_spo2' | 'heartrate';
type DocKind = Exclude<OuraListKind, 'heartrate'>;
type Doc = Record<string, unknown> & { id: string; day: string };
export type HeartRateRow = { bpm: number; source: string; timestamp: string; timestamp_unix: number };

/** The scope each route needs (1.37 securitySchemes.OAuth2 scopes). personal_info needs none for its id. */
const ROUTE_SCOPES: Record<OuraListKind, string> = {
  sleep: 'daily',
  daily_sleep: 'daily',
  daily_activity: 'daily',
  workout: 'workout',
  daily_spo2: 'spo2Daily',
  heartrate: 'heartrate',
};

/**
 * Which `day`s a `start_date`/`end_date` query returns, route by route, as the cassettes show it (the rule is not
 * published, 1.37): daily_sleep and daily_spo2 2024-11-11..2024-11-12 return both days; daily_activity with the
 * same dates only 2024-11-11; workout 2024-10-09..2024-11-03 returns 10-09..11-02; sleep with those dates returns
 * 10-10..11-02. A client that asks exactly its window misses days here, as it would at Oura.
 */
const DATE_FILTERS: Record<DocKind, (day: string, start: string, end: string) => boolean> = {
  daily_sleep: (d, s, e) => d >= s && d <= e,
  daily_spo2: (d, s, e) => d >= s && d <= e,
  daily_activity: (d, s, e) => d >= s && d < e,
  workout: (d, s, e) => d >= s && d < e,
  sleep: (d, s, e) => d > s && d < e,
};

const HEART_RATE_MAX_SPAN_MS = 30 * 86_400_000;
const SUBSCRIPTION_LIFETIME_MS = 90 * 86_400_000;
const DATA_TYPES = [
  'tag',
  'enhanced_tag',
  'workout',
  'session',
  'sleep',
  'daily_sleep',
  'daily_readiness',
  'daily_activity',
  'daily_spo2',
  'sleep_time',
  'rest_mode_period',
  'ring_configuration',
  'daily_stress',
  'daily_cycle_phases',
  'activation_status',
  'daily_cardiovascular_age',
  'daily_resilience',
  'vo2_max',
  'period_start',
  'pregnancy',
  'fertile_window',
  'ovulation_confirmed',
  'blood_glucose',
];
const EVENT_TYPES = ['create', 'update', 'delete'];

export interface OuraSubscription {
  id: string;
  callback_url: string;
  event_type: string;
  data_type: string;
  expiration_time: string;
  verification_token: string;
}

export interface OuraPushResult {
  status: number;
  text: string;
  /** The exact body and headers sent. */
  body: string;
  headers: Record<string, string>;
}

// ---- Small helpers (the fake keeps its own, independent of the integration under test) ----------------------------

const DAY = 86_400_000;
const pad = (n: number) => String(n).padStart(2, '0');
const addDays = (date: string, n: number) => new Date(Date.parse(`${date}T00:00:00Z`) + n * DAY).toISOString().slice(0, 10);
const isDate = (v: unknown): v is string => typeof v === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(v) && Number.isFinite(Date.parse(`${v}T00:00:00Z`));
const localDate = (ms: number, tz: number) => new Date(ms + tz * 1000).toISOString().slice(0, 10);
const localMidnight = (date: string, tz: number) => Date.parse(`${date}T00:00:00Z`) - tz * 1000;
const suffix = (tz: number) => `${tz < 0 ? '-' : '+'}${pad(Math.floor(Math.abs(tz) / 3600))}:${pad(Math.floor((Math.abs(tz) % 3600) / 60))}`;
/** Oura's LocalizedDateTime: `2024-10-10T01:01:59+02:00`; with `millis`, as in sample series: `…T01:01:59.000+02:00`. */
const localized = (ms: number, tz: number, millis = false) => `${new Date(ms + tz * 1000).toISOString().slice(0, millis ? 23 : 19)}${suffix(tz)}`;
/** Oura's UtcDateTime as the heart-rate rows carry it: `2024-12-13T12:31:21+00:00`. */
const utcStamp = (ms: number) => `${new Date(ms).toISOString().slice(0, 19)}+00:00`;
const uuidFrom = (...parts: string[]) => {
  const h = createHash('sha256').update(parts.join(':')).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${'89ab'[parseInt(h[16], 16) % 4]}${h.slice(17, 20)}-${h.slice(20, 32)}`;
};
function gauss(r: () => number, mean: number, sd: number): number {
  const u = Math.max(r(), 1e-12);
  return mean + sd * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
}
const uniform = (r: () => number, lo: number, hi: number) => lo + (hi - lo) * r();
/** Parses a query instant (`2021-11-01T00:00:00-08:00`, `…Z`); null when it is not one. */
function parseInstant(v: string | undefined): number | null {
  if (!v || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(v)) return null;
  const ms = Date.parse(v);
  return Number.isFinite(ms) ? ms : null;
}
const validation = (loc: string[], msg: string, input: unknown, type = 'value_error'): FakeReply => ({
  status: 422,
  body: { detail: [{ type, loc, msg, input }] },
});

interface Person {
  age: number;
  sex: 'male' | 'female';
  heightM: number;
  weightKg: number;
  restingHr: number;
  hrv: number;
  bedtimeMin: number;
  sleepHours: number;
  steps: number;
}
const ACTIVITIES: [activity: string, kmh: number | null][] = [
  ['walking', 5.2],
  ['running', 10.5],
  ['cycling', 22],
  ['hiking', 4.5],
  ['yoga', null],
  ['strength_training', null],
];

export class FakeOura extends FakeProvider {
  /** `expires_in` of access tokens (1.37: "typically 24 hours"). */
  accessTtlSeconds = 86_400;
  /** Documents (rows for heartrate) per page; small enough that a 30-day chunk spans several pages. */
  readonly pageSizes: Record<OuraListKind, number> = { sleep: 10, daily_sleep: 10, daily_activity: 10, workout: 10, daily_spo2: 10, heartrate: 50 };
  /** The app's request budget (1.37 FAQ: 5000 requests per 5-minute period); every /v2 request counts. */
  readonly rateLimit = { limit: 5000, windowSeconds: 300 };
  readonly subscriptions = new Map<string, OuraSubscription>();
  /** Every revocation the revoke endpoint performed. */
  readonly revocations: { userId: string; token: string; at: number }[] = [];
  /** Refresh tokens presented after they were rotated out (each was refused). */
  readonly refusedRefreshTokens: string[] = [];
  private readonly refreshScopes = new Map<string, string>();
  private window = { startedAt: Date.now(), count: 0 };
  private readonly cache = new Map<string, unknown>();
  private readonly explicit = new Map<string, Map<string, Doc | HeartRateRow>>();
  private readonly removed = new Set<string>();
  private readonly served = new Map<string, Map<OuraListKind | 'personal_info', Map<string, Doc | HeartRateRow>>>();
  private readonly personalInfoServed = new Map<string, number>();

  constructor(opts: { port?: number; clientId?: string; clientSecret?: string } = {}) {
    super({
      slug: 'oura',
      name: 'Oura',
      clientId: opts.clientId ?? FAKE_OURA_CLIENT.clientId,
      clientSecret: opts.clientSecret ?? FAKE_OURA_CLIENT.clientSecret,
      authorizePath: '/oauth/authorize',
      port: opts.port,
    });
    this.route('POST', '/oauth/token', (req) => this.token(req));
    this.route('POST', '/oauth/revoke', (req) => this.revoke(req));
    this.api('GET', '/v2/usercollection/personal_info', (req) => this.personalInfoRoute(req));
    for (const kind of ['sleep', 'daily_sleep', 'daily_activity', 'workout', 'daily_spo2'] as DocKind[]) {
      this.api('GET', `/v2/usercollection/${kind}`, (req) => this.listRoute(req, kind));
      this.api('GET', `/v2/usercollection/${kind}/{document_id}`, (req) => this.documentRoute(req, kind));
    }
    this.api('GET', '/v2/usercollection/heartrate', (req) => this.heartRateRoute(req));
    this.api('GET', '/v2/webhook/subscription', (req) =>
      this.app(req, () => ({ status: 200, body: [...this.subscriptions.values()].map(publicSubscription) })),
    );
    this.api('POST', '/v2/webhook/subscription', (req) => this.app(req, () => this.createSubscription(req)));
    this.api('GET', '/v2/webhook/subscription/{id}', (req) =>
      this.app(req, () => {
        const sub = this.subscriptions.get(req.query.id);
        return sub ? { status: 200, body: publicSubscription(sub) } : { status: 403, body: { detail: 'Forbidden' } }; // get_webhook_subscription_forbidden.json
      }),
    );
    this.api('PUT', '/v2/webhook/subscription/{id}', (req) => this.app(req, () => this.updateSubscription(req)));
    this.api('DELETE', '/v2/webhook/subscription/{id}', (req) =>
      this.app(req, () => {
        if (!this.subscriptions.delete(req.query.id)) return { status: 404, body: { detail: `No webhook id ${req.query.id} found.` } };
        return { status: 204 };
      }),
    );
    this.api('PUT', '/v2/webhook/subscription/renew/{id}', (req) =>
      this.app(req, () => {
        const sub = this.subscriptions.get(req.query.id);
        if (!sub) return { status: 404, body: { detail: `Subscription with id ${req.query.id} not found.` } };
        sub.expiration_time = new Date(Date.now() + SUBSCRIPTION_LIFETIME_MS).toISOString();
        return { status: 200, body: publicSubscription(sub) };
      }),
    );
  }

  protected override newUserId(): string {
    return randomUUID();
  }

  // ---- Test controls ---------------------------------------------------------------------------------------------

  /** Sets the page size of a list route. */
  setPageSize(kind: OuraListKind, size: number): void {
    this.pageSizes[kind] = Math.max(1, Math.floor(size));
  }

  /** Adds a document (replacing a generated or earlier one with the same id; heartrate rows are keyed by timestamp). */
  put(userId: string, kind: DocKind, doc: Doc): void;
  put(userId: string, kind: 'heartrate', row: HeartRateRow): void;
  put(userId: string, kind: OuraListKind, doc: Doc | HeartRateRow): void {
    const key = `${userId}:${kind}`;
    if (!this.explicit.has(key)) this.explicit.set(key, new Map());
    const id = kind === 'heartrate' ? (doc as HeartRateRow).timestamp : (doc as Doc).id;
    this.explicit.get(key)!.set(id, doc);
    this.removed.delete(`${key}:${id}`);
  }

  /** Removes a document (generated or put) as if the user had deleted it. */
  remove(userId: string, kind: OuraListKind, id: string): void {
    this.explicit.get(`${userId}:${kind}`)?.delete(id);
    this.removed.add(`${userId}:${kind}:${id}`);
  }

  /** The documents of `kind` whose `day` is in [startDate, endDate] (inclusive), as the fake serves them now. */
  documents(userId: string, kind: DocKind, startDate: string, endDate: string): Doc[] {
    const user = this.userOf(userId);
    const now = Date.now();
    const out: Doc[] = [];
    const overridden = this.explicit.get(`${userId}:${kind}`) ?? new Map();
    for (let day = startDate; day <= endDate; day = addDays(day, 1)) {
      for (const doc of this.generated(user, kind, day, now)) {
        if (!overridden.has(doc.id) && !this.removed.has(`${userId}:${kind}:${doc.id}`)) out.push(doc);
      }
    }
    for (const doc of overridden.values() as Iterable<Doc>) if (doc.day >= startDate && doc.day <= endDate) out.push(doc);
    return out.sort((a, b) => (a.day < b.day ? -1 : a.day > b.day ? 1 : sortKey(a) < sortKey(b) ? -1 : 1));
  }

  /** The heart-rate rows of [fromMs, toMs), as the fake serves them now. */
  heartRateRows(userId: string, fromMs: number, toMs: number): HeartRateRow[] {
    const user = this.userOf(userId);
    const now = Date.now();
    const rows: HeartRateRow[] = [];
    const overridden = this.explicit.get(`${userId}:heartrate`) ?? new Map();
    const inRange = (t: number) => t >= fromMs && t < toMs && t < now;
    for (let day = localDate(fromMs, user.zoneOffsetSeconds); day <= localDate(toMs, user.zoneOffsetSeconds); day = addDays(day, 1)) {
      for (const row of this.heartRateOfDay(user, day)) {
        if (inRange(row.timestamp_unix) && !overridden.has(row.timestamp) && !this.removed.has(`${userId}:heartrate:${row.timestamp}`)) rows.push(row);
      }
    }
    for (const row of overridden.values() as Iterable<HeartRateRow>) if (inRange(row.timestamp_unix)) rows.push(row);
    return rows.sort((a, b) => a.timestamp_unix - b.timestamp_unix);
  }

  /** What `/personal_info` answers for the user (with every scope). */
  personalInfo(userId: string): Record<string, unknown> {
    const user = this.userOf(userId);
    const p = this.person(user);
    return { id: user.id, age: p.age, weight: p.weightKg, height: p.heightM, biological_sex: p.sex, email: `${user.id.slice(0, 8)}@example.com` };
  }

  /**
   * What the fake served the user, counted once per document (or row) however often it was served: per route
   * (`sleep`, `daily_sleep`, `daily_activity`, `workout`, `daily_spo2`, `heartrate`), plus what served sleeps carry
   * (`sleep.heart_rate` and `sleep.hrv`: non-null items; `sleep.hypnogram`: phases; `sleep.temperature`: periods
   * with a temperature deviation), `daily_spo2.average` (nights with an average) and `personal_info` (requests).
   * With `range`, only documents of those local days (heart-rate rows by their local date).
   */
  servedCount(userId: string, range?: { startDate: string; endDate: string }): Record<string, number> {
    const docs = (kind: OuraListKind) => this.servedDocuments(userId, kind, range);
    const counts: Record<string, number> = { personal_info: this.personalInfoServed.get(userId) ?? 0 };
    for (const kind of ['sleep', 'daily_sleep', 'daily_activity', 'workout', 'daily_spo2', 'heartrate'] as OuraListKind[]) counts[kind] = docs(kind).length;
    const sleeps = docs('sleep') as Doc[];
    const items = (s: unknown) =>
      s && typeof s === 'object' && Array.isArray((s as { items?: unknown }).items)
        ? (s as { items: unknown[] }).items.filter((v) => typeof v === 'number').length
        : 0;
    counts['sleep.heart_rate'] = sleeps.reduce((n, s) => n + items(s.heart_rate), 0);
    counts['sleep.hrv'] = sleeps.reduce((n, s) => n + items(s.hrv), 0);
    counts['sleep.hypnogram'] = sleeps.reduce((n, s) => n + String(s.sleep_phase_5_min ?? '').length, 0);
    counts['sleep.temperature'] = sleeps.filter(
      (s) => typeof (s.readiness as { temperature_deviation?: unknown } | null)?.temperature_deviation === 'number',
    ).length;
    counts['daily_spo2.average'] = (docs('daily_spo2') as Doc[]).filter(
      (d) => typeof (d.spo2_percentage as { average?: unknown } | null)?.average === 'number',
    ).length;
    return counts;
  }

  /** The distinct documents (rows) of `kind` served to the user, optionally only those of `range`'s local days. */
  servedDocuments(userId: string, kind: OuraListKind, range?: { startDate: string; endDate: string }): (Doc | HeartRateRow)[] {
    const user = this.userOf(userId);
    const all = [...(this.served.get(userId)?.get(kind)?.values() ?? [])];
    if (!range) return all;
    return all.filter((d) => {
      const day = kind === 'heartrate' ? localDate((d as HeartRateRow).timestamp_unix, user.zoneOffsetSeconds) : (d as Doc).day;
      return day >= range.startDate && day <= range.endDate;
    });
  }

  /** Forgets what was served (between phases of a test). */
  resetServed(userId?: string): void {
    if (userId) {
      this.served.delete(userId);
      this.personalInfoServed.delete(userId);
    } else {
      this.served.clear();
      this.personalInfoServed.clear();
    }
  }

  /**
   * Answers the next `times` requests to `path` (default: any /v2 path) with Oura's 429 and its five headers.
   * `withoutRetryAfter` leaves out Retry-After (the reset header then says when).
   */
  failRateLimited(
    opts: { path?: string | RegExp; times?: number; retryAfterSeconds?: number; resetInSeconds?: number; tier?: string; withoutRetryAfter?: boolean } = {},
  ): { resetAt: Date } {
    const resetIn = opts.resetInSeconds ?? opts.retryAfterSeconds ?? 60;
    const resetAt = new Date((Math.floor(Date.now() / 1000) + resetIn) * 1000);
    const headers = this.rateLimitHeaders(resetAt, opts.tier ?? 'application', opts.withoutRetryAfter ? null : (opts.retryAfterSeconds ?? resetIn));
    this.fail({ path: opts.path ?? /^\/v2\//, status: 429, times: opts.times ?? 1, headers, body: { detail: 'Rate limit exceeded.' } });
    return { resetAt };
  }

  /** Answers the next `times` requests to `path` (default: any /v2 path) with a 5xx. */
  failServerError(opts: { path?: string | RegExp; times?: number; status?: number } = {}): void {
    this.fail({ path: opts.path ?? /^\/v2\//, status: opts.status ?? 502, times: opts.times ?? 1, body: { detail: 'Bad Gateway' } });
  }

  /** The signature Oura sends in `x-oura-signature`: UPPERCASE hex HMAC-SHA256(client_secret, timestamp + body). */
  sign(timestamp: string, body: string, secret = this.options.clientSecret): string {
    return createHmac('sha256', secret)
      .update(timestamp + body)
      .digest('hex')
      .toUpperCase();
  }

  /**
   * POSTs one event to `url` as Oura does: body `{event_type, data_type, object_id, event_time, user_id}`, headers
   * `x-oura-timestamp` (Unix seconds) and `x-oura-signature`. `timestampSeconds` and `secret` forge stale or
   * wrongly signed pushes; `signature: null` leaves the header out.
   */
  async sendPush(
    url: string,
    event: { dataType: string; eventType?: string; objectId: string; userId: string; eventTime?: string },
    opts: { timestampSeconds?: number; secret?: string; signature?: string | null } = {},
  ): Promise<OuraPushResult> {
    const body = JSON.stringify({
      event_type: event.eventType ?? 'create',
      data_type: event.dataType,
      object_id: event.objectId,
      event_time: event.eventTime ?? `${new Date().toISOString().slice(0, 19)}+00:00`,
      user_id: event.userId,
    });
    const timestamp = String(opts.timestampSeconds ?? Math.floor(Date.now() / 1000));
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-oura-timestamp': timestamp };
    const signature = opts.signature === undefined ? this.sign(timestamp, body, opts.secret) : opts.signature;
    if (signature !== null) headers['x-oura-signature'] = signature;
    const res = await this.push(url, body, headers);
    return { ...res, body, headers };
  }

  /**
   * Delivers an event to every subscription for its (data_type, event_type), as Oura does after a sync. A 410 reply
   * cancels that subscription (1.37 "Canceling Subscriptions").
   */
  async notify(event: { dataType: string; eventType?: string; objectId: string; userId: string }): Promise<OuraPushResult[]> {
    const out: OuraPushResult[] = [];
    for (const sub of [...this.subscriptions.values()]) {
      if (sub.data_type !== event.dataType || sub.event_type !== (event.eventType ?? 'create')) continue;
      if (Date.parse(sub.expiration_time) <= Date.now()) continue;
      const res = await this.sendPush(sub.callback_url, event);
      if (res.status === 410) this.subscriptions.delete(sub.id);
      out.push(res);
    }
    return out;
  }

  /** Sends Oura's verification GET (`?verification_token&challenge`) to `url`; `ok` when it echoed the challenge. */
  async verify(url: string, token: string): Promise<{ status: number; body: unknown; challenge: string; ok: boolean }> {
    const challenge = randomBytes(12).toString('hex');
    const target = new URL(url);
    target.searchParams.set('verification_token', token);
    target.searchParams.set('challenge', challenge);
    let status = 0;
    let body: unknown;
    try {
      const res = await fetch(target, { signal: AbortSignal.timeout(10_000) }); // Oura wants a reply within 10 s
      status = res.status;
      const text = await res.text();
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = text;
      }
    } catch {
      status = 0;
    }
    const ok = status >= 200 && status < 300 && !!body && typeof body === 'object' && (body as { challenge?: unknown }).challenge === challenge;
    return { status, body, challenge, ok };
  }

  /** The user's tokens: access tokens (and whether they are usable) and refresh tokens (and whether refused). */
  tokenState(userId: string): { access: { token: string; active: boolean; scope: string }[]; refresh: { token: string; active: boolean }[] } {
    const now = Date.now();
    return {
      access: [...this.accessTokens.values()]
        .filter((t) => t.userId === userId)
        .map((t) => ({ token: t.token, active: !t.revoked && t.expiresAt > now, scope: t.scope })),
      refresh: [...this.refreshTokens.values()].filter((t) => t.userId === userId).map((t) => ({ token: t.token, active: !t.revoked && t.validUntil > now })),
    };
  }

  // ---- OAuth ---------------------------------------------------------------------------------------------------

  private token(req: FakeRequest): FakeReply {
    const clientId = this.tokenClient(req, 'body');
    if (!clientId) return { status: 401, body: { error: 'invalid_client', error_description: 'Client ID or secret is incorrect.' } };
    const f = req.form;
    if (f.grant_type === 'authorization_code') {
      const redeemed = this.redeemCode(f, clientId);
      if ('error' in redeemed) return { status: 400, body: { error: redeemed.error, error_description: redeemed.description } };
      const { grant } = redeemed;
      return this.tokenReply(grant.userId, grant.scope, grant.issued);
    }
    if (f.grant_type === 'refresh_token') {
      const old = this.refreshTokens.get(f.refresh_token ?? '');
      if (!old || old.revoked || old.validUntil <= Date.now()) {
        if (old) this.refusedRefreshTokens.push(old.token);
        return { status: 400, body: { error: 'invalid_grant', error_description: 'Invalid, used or revoked refresh token.' } };
      }
      // Rotation: the refresh token is used up; the new pair replaces it.
      old.revoked = true;
      old.validUntil = Date.now();
      return this.tokenReply(old.userId, this.refreshScopes.get(old.token) ?? '', []);
    }
    return { status: 400, body: { error: 'unsupported_grant_type', error_description: `grant_type ${f.grant_type ?? '(none)'} is not supported.` } };
  }

  private tokenReply(userId: string, scope: string, issued: string[]): FakeReply {
    const { access, refresh } = this.issueTokens(userId, { accessTtlSeconds: this.accessTtlSeconds, scope });
    issued.push(access.token, refresh!.token);
    this.refreshScopes.set(refresh!.token, scope);
    return {
      status: 200,
      headers: { 'cache-control': 'no-store' },
      body: { token_type: 'bearer', access_token: access.token, expires_in: this.accessTtlSeconds, refresh_token: refresh!.token, scope },
    };
  }

  /** `POST /oauth/revoke?access_token=…` revokes the grant: every token of that user (RFC 7009: 200 even if unknown). */
  private revoke(req: FakeRequest): FakeReply {
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const token = req.query.access_token ?? req.form.access_token ?? bearer ?? '';
    const known = this.accessTokens.get(token);
    if (known) {
      this.revokeUser(known.userId);
      this.revocations.push({ userId: known.userId, token, at: Date.now() });
    }
    return { status: 200, body: {} };
  }

  // ---- The API -------------------------------------------------------------------------------------------------

  /** A /v2 route: counted against the app's rate limit first. */
  private api(method: string, path: string, handler: (req: FakeRequest) => FakeReply | Promise<FakeReply>): void {
    this.route(method, path, (req) => {
      const now = Date.now();
      if (now - this.window.startedAt >= this.rateLimit.windowSeconds * 1000) this.window = { startedAt: now, count: 0 };
      if (++this.window.count > this.rateLimit.limit) {
        const resetAt = new Date(Math.ceil((this.window.startedAt + this.rateLimit.windowSeconds * 1000) / 1000) * 1000);
        return {
          status: 429,
          headers: this.rateLimitHeaders(resetAt, 'application', Math.max(1, Math.ceil((resetAt.getTime() - now) / 1000))),
          body: { detail: 'Rate limit exceeded.' },
        };
      }
      return handler(req);
    });
  }

  private rateLimitHeaders(resetAt: Date, tier: string, retryAfterSeconds: number | null): Record<string, string> {
    return {
      ...(retryAfterSeconds === null ? {} : { 'retry-after': String(retryAfterSeconds) }),
      'x-ratelimit-limit': String(this.rateLimit.limit),
      'x-ratelimit-window': String(this.rateLimit.windowSeconds),
      'x-ratelimit-reset': String(Math.floor(resetAt.getTime() / 1000)),
      'x-ratelimit-tier': tier,
    };
  }

  private authed(req: FakeRequest, scope: string | null): { user: FakeUser; scopes: Set<string> } | { reply: FakeReply } {
    const auth = this.bearer(req);
    if ('reply' in auth) return auth;
    const token = this.accessTokens.get(/^Bearer (.+)$/.exec(req.headers.authorization ?? '')![1])!;
    const scopes = new Set(token.scope.split(/\s+/).filter(Boolean));
    if (scope && !scopes.has(scope)) return { reply: { status: 403, body: { detail: `The access token lacks the ${scope} scope.` } } };
    return { user: auth.user, scopes };
  }

  private personalInfoRoute(req: FakeRequest): FakeReply {
    const auth = this.authed(req, null);
    if ('reply' in auth) return auth.reply;
    this.personalInfoServed.set(auth.user.id, (this.personalInfoServed.get(auth.user.id) ?? 0) + 1);
    const full = this.personalInfo(auth.user.id);
    // "You can access the id on the personal_info route with any access token (no scopes are required)."
    const body: Record<string, unknown> = { id: full.id };
    if (auth.scopes.has('personal')) Object.assign(body, { age: full.age, weight: full.weight, height: full.height, biological_sex: full.biological_sex });
    if (auth.scopes.has('email')) body.email = full.email;
    return { status: 200, body };
  }

  private listRoute(req: FakeRequest, kind: DocKind): FakeReply {
    const auth = this.authed(req, ROUTE_SCOPES[kind]);
    if ('reply' in auth) return auth.reply;
    const page = this.pageFrom(req, kind);
    if ('reply' in page) return page.reply;
    const today = localDate(Date.now(), auth.user.zoneOffsetSeconds);
    const start = page.start ?? addDays(page.end ?? today, -1);
    const end = page.end ?? addDays(today, 1);
    if (!isDate(start)) return validation(['query', 'start_date'], 'Input should be a valid date', start);
    if (!isDate(end)) return validation(['query', 'end_date'], 'Input should be a valid date', end);
    if (start > end) return validation(['query', 'start_date'], 'Start date must be before end date', start); // multiple_tag_invalid_dates.json
    const docs = this.documents(auth.user.id, kind, start, end).filter((d) => DATE_FILTERS[kind](d.day, start, end));
    return this.pageReply(auth.user.id, kind, docs, page.offset, start, end, (d) => d.id);
  }

  private documentRoute(req: FakeRequest, kind: DocKind): FakeReply {
    const auth = this.authed(req, ROUTE_SCOPES[kind]);
    if ('reply' in auth) return auth.reply;
    const id = req.query.document_id;
    const doc = this.findDocument(auth.user, kind, id);
    if (!doc) return { status: 404, body: { detail: 'Document not found.' } }; // single_sleep_non_existing.json
    this.record(auth.user.id, kind, [doc], (d) => d.id);
    return { status: 200, body: doc };
  }

  private heartRateRoute(req: FakeRequest): FakeReply {
    const auth = this.authed(req, ROUTE_SCOPES.heartrate);
    if ('reply' in auth) return auth.reply;
    const page = this.pageFrom(req, 'heartrate');
    if ('reply' in page) return page.reply;
    const now = Date.now();
    const startRaw = page.start;
    const endRaw = page.end;
    const start = startRaw === undefined ? now - DAY : parseInstant(startRaw);
    const end = endRaw === undefined ? now : parseInstant(endRaw);
    if (start === null) return validation(['query', 'start_datetime'], 'Input should be a valid datetime', startRaw);
    if (end === null) return validation(['query', 'end_datetime'], 'Input should be a valid datetime', endRaw);
    if (start >= end) return validation(['query', 'start_datetime'], 'Start datetime must be before end datetime', startRaw);
    if (end - start > HEART_RATE_MAX_SPAN_MS)
      return { status: 400, body: { detail: 'The time range between start_datetime and end_datetime cannot exceed 30 days.' } };
    const rows = this.heartRateRows(auth.user.id, start, end);
    return this.pageReply(auth.user.id, 'heartrate', rows, page.offset, startRaw, endRaw, (r) => r.timestamp);
  }

  /** The window and offset of a list request: from its `next_token` if it has one, else from its query. */
  private pageFrom(req: FakeRequest, kind: OuraListKind): { start?: string; end?: string; offset: number } | { reply: FakeReply } {
    const q = req.query;
    const [startKey, endKey] = kind === 'heartrate' ? ['start_datetime', 'end_datetime'] : ['start_date', 'end_date'];
    if (q.next_token) {
      try {
        const t = JSON.parse(Buffer.from(q.next_token, 'base64url').toString()) as { k: string; o: number; s?: string; e?: string };
        if (t.k !== kind || typeof t.o !== 'number') throw new Error('wrong route');
        return { start: t.s, end: t.e, offset: t.o };
      } catch {
        return { reply: { status: 400, body: { detail: 'Invalid next_token.' } } };
      }
    }
    return { start: q[startKey] || undefined, end: q[endKey] || undefined, offset: 0 };
  }

  private pageReply<T extends Doc | HeartRateRow>(
    userId: string,
    kind: OuraListKind,
    all: T[],
    offset: number,
    start: string | undefined,
    end: string | undefined,
    idOf: (d: T) => string,
  ): FakeReply {
    const size = this.pageSizes[kind];
    const data = all.slice(offset, offset + size);
    this.record(userId, kind, data, idOf);
    const more = offset + size < all.length;
    const next_token = more ? Buffer.from(JSON.stringify({ k: kind, o: offset + size, s: start, e: end })).toString('base64url') : null;
    return { status: 200, body: { data, next_token } };
  }

  private record<T extends Doc | HeartRateRow>(userId: string, kind: OuraListKind, docs: T[], idOf: (d: T) => string): void {
    if (!this.served.has(userId)) this.served.set(userId, new Map());
    const byKind = this.served.get(userId)!;
    if (!byKind.has(kind)) byKind.set(kind, new Map());
    for (const d of docs) byKind.get(kind)!.set(idOf(d), d);
  }

  private findDocument(user: FakeUser, kind: DocKind, id: string): Doc | undefined {
    const put = this.explicit.get(`${user.id}:${kind}`)?.get(id) as Doc | undefined;
    if (put) return put;
    if (this.removed.has(`${user.id}:${kind}:${id}`)) return undefined;
    // Generated ids are derived from (seed, kind, day, n): look through the days the fake could have generated.
    const now = Date.now();
    const today = localDate(now, user.zoneOffsetSeconds);
    for (let day = addDays(today, 1); day >= addDays(today, -400); day = addDays(day, -1)) {
      const doc = this.generated(user, kind, day, now).find((d) => d.id === id);
      if (doc) return doc;
    }
    return undefined;
  }

  // ---- Webhook subscriptions ---------------------------------------------------------------------------------------

  private app(req: FakeRequest, then: () => FakeReply | Promise<FakeReply>): FakeReply | Promise<FakeReply> {
    if (req.headers['x-client-id'] !== this.options.clientId || req.headers['x-client-secret'] !== this.options.clientSecret)
      return { status: 403, body: { detail: 'Forbidden' } };
    return then();
  }

  private async createSubscription(req: FakeRequest): Promise<FakeReply> {
    const b = (req.json ?? {}) as Record<string, unknown>;
    for (const field of ['callback_url', 'verification_token', 'event_type', 'data_type']) {
      if (typeof b[field] !== 'string' || !b[field]) return validation(['body', field], 'Field required', b[field], 'missing');
    }
    if (!EVENT_TYPES.includes(b.event_type as string))
      return { status: 422, body: { detail: [{ type: 'enum', loc: ['body', 'event_type'], msg: 'Invalid event_type value' }] } };
    if (!DATA_TYPES.includes(b.data_type as string))
      return { status: 422, body: { detail: [{ type: 'enum', loc: ['body', 'data_type'], msg: 'Invalid data_type value' }] } }; // create_webhook_subscription_invalid.json
    const duplicate = [...this.subscriptions.values()].find((s) => s.event_type === b.event_type && s.data_type === b.data_type);
    if (duplicate)
      return { status: 409, body: { detail: `A subscription for ${String(b.event_type)} ${String(b.data_type)} already exists (${duplicate.id}).` } };
    const check = await this.verify(b.callback_url as string, b.verification_token as string);
    if (!check.ok) return { status: 400, body: { detail: `Verification of ${String(b.callback_url)} failed (status ${check.status}).` } };
    const sub: OuraSubscription = {
      id: randomUUID(),
      callback_url: b.callback_url as string,
      event_type: b.event_type as string,
      data_type: b.data_type as string,
      expiration_time: new Date(Date.now() + SUBSCRIPTION_LIFETIME_MS).toISOString(),
      verification_token: b.verification_token as string,
    };
    this.subscriptions.set(sub.id, sub);
    return { status: 201, body: publicSubscription(sub) };
  }

  private async updateSubscription(req: FakeRequest): Promise<FakeReply> {
    const sub = this.subscriptions.get(req.query.id);
    if (!sub) return { status: 404, body: { detail: `No webhook id ${req.query.id} found.` } };
    const b = (req.json ?? {}) as Record<string, unknown>;
    if (typeof b.verification_token !== 'string' || !b.verification_token)
      return validation(['body', 'verification_token'], 'Field required', b.verification_token, 'missing');
    if (b.event_type != null && !EVENT_TYPES.includes(b.event_type as string))
      return { status: 422, body: { detail: [{ type: 'enum', loc: ['body', 'event_type'], msg: 'Invalid event_type value' }] } };
    if (b.data_type != null && !DATA_TYPES.includes(b.data_type as string))
      return { status: 422, body: { detail: [{ type: 'enum', loc: ['body', 'data_type'], msg: 'Invalid data_type value' }] } };
    const next = {
      ...sub,
      verification_token: b.verification_token,
      callback_url: (b.callback_url as string) ?? sub.callback_url,
      event_type: (b.event_type as string) ?? sub.event_type,
      data_type: (b.data_type as string) ?? sub.data_type,
    };
    const check = await this.verify(next.callback_url, next.verification_token);
    if (!check.ok) return { status: 400, body: { detail: `Verification of ${next.callback_url} failed (status ${check.status}).` } };
    this.subscriptions.set(sub.id, next);
    return { status: 200, body: publicSubscription(next) };
  }

  // ---- Generated data ------------------------------------------------------------------------------------------------

  private userOf(userId: string): FakeUser {
    const user = this.users.get(userId);
    if (!user) throw new Error(`The Oura fake has no user ${userId}`);
    return user;
  }

  private memo<T>(key: string, make: () => T): T {
    if (!this.cache.has(key)) this.cache.set(key, make());
    return this.cache.get(key) as T;
  }

  private person(user: FakeUser): Person {
    return this.memo(`${user.seed}:person`, () => {
      const r = seededRandom(`${user.seed}:person`);
      const sex = r() < 0.5 ? 'female' : 'male';
      const heightM = round(gauss(r, sex === 'female' ? 1.66 : 1.79, 0.06), 2);
      return {
        age: 22 + Math.floor(r() * 40),
        sex,
        heightM,
        weightKg: round(uniform(r, 20.5, 27.5) * heightM ** 2, 1),
        restingHr: Math.round(uniform(r, 48, 62)),
        hrv: uniform(r, 30, 75),
        bedtimeMin: uniform(r, 22 * 60, 24 * 60 + 20),
        sleepHours: uniform(r, 6.5, 8.3),
        steps: uniform(r, 5000, 11000),
      };
    });
  }

  /** The documents of `kind` of one day that exist at `now`. */
  private generated(user: FakeUser, kind: DocKind, day: string, now: number): Doc[] {
    switch (kind) {
      case 'sleep':
        return this.sleepsOf(user, day).filter((s) => Date.parse(s.bedtime_end as string) <= now);
      case 'daily_sleep': {
        const long = this.sleepsOf(user, day).find((s) => s.type === 'long_sleep');
        return long && Date.parse(long.bedtime_end as string) <= now ? [this.dailySleepOf(user, day)] : [];
      }
      case 'daily_spo2': {
        const long = this.sleepsOf(user, day).find((s) => s.type === 'long_sleep');
        return long && Date.parse(long.bedtime_end as string) <= now ? [this.spo2Of(user, day)] : [];
      }
      case 'daily_activity':
        return localMidnight(day, user.zoneOffsetSeconds) + 4 * 3600_000 <= now ? [this.activityOf(user, day)] : [];
      case 'workout':
        return this.workoutsOf(user, day).filter((w) => Date.parse(w.end_datetime as string) <= now);
    }
  }

  /** The day's sleep periods: the night ending on the morning of `day` (long_sleep) and on some days a nap. */
  private sleepsOf(user: FakeUser, day: string): Doc[] {
    return this.memo(`${user.seed}:sleep:${day}`, () => {
      const tz = user.zoneOffsetSeconds;
      const p = this.person(user);
      const r = seededRandom(`${user.seed}:sleep:${day}`);
      const bedtime = localMidnight(addDays(day, -1), tz) + Math.round((p.bedtimeMin + gauss(r, 0, 25)) * 60) * 1000 + Math.floor(r() * 60) * 1000;
      const inBed = Math.round((p.sleepHours + gauss(r, 0, 0.5)) * 3600 + uniform(r, 600, 2400));
      const out = [this.sleepPeriod(user, day, 0, 'long_sleep', bedtime, inBed, r, true)];
      if (r() < 0.25) {
        const napStart = localMidnight(day, tz) + Math.round(uniform(r, 14 * 60, 15 * 60 + 30) * 60) * 1000 + Math.floor(r() * 60) * 1000;
        out.push(this.sleepPeriod(user, day, 1, 'sleep', napStart, Math.round(uniform(r, 20, 60) * 60), r, r() < 0.5));
      }
      return out;
    });
  }

  private sleepPeriod(user: FakeUser, day: string, period: number, type: string, start: number, timeInBed: number, r: () => number, withSeries: boolean): Doc {
    const tz = user.zoneOffsetSeconds;
    const p = this.person(user);
    const slots = Math.ceil(timeInBed / 300);
    const full = Math.floor(timeInBed / 300);
    // Phases: a few awake slots while falling asleep, then runs of deep (early), light and REM (late), '4' awake.
    let phases = '';
    const latencySlots = type === 'long_sleep' ? 1 + Math.floor(r() * 3) : 1;
    let current = '2';
    for (let i = 0; i < slots; i++) {
      if (i < latencySlots) phases += '4';
      else {
        if (i === latencySlots || r() > 0.7) {
          const f = i / slots;
          const w = { '1': 0.5 * (1 - f) ** 2, '2': 0.45, '3': 0.08 + 0.35 * f, '4': 0.05 };
          let x = r() * (w['1'] + w['2'] + w['3'] + w['4']);
          current = (['1', '2', '3', '4'] as const).find((k) => (x -= w[k]) < 0) ?? '2';
        }
        phases += current;
      }
    }
    const secs: Record<string, number> = { '1': 0, '2': 0, '3': 0, '4': 0 };
    [...phases].forEach((ph, i) => (secs[ph] += i < full ? 300 : timeInBed - full * 300));
    const stageHr: Record<string, number> = { '1': 2, '2': 5, '3': 8, '4': 12 };
    const stageHrv: Record<string, number> = { '1': 14, '2': 0, '3': -6, '4': -10 };
    const hr = withSeries ? Array.from({ length: full }, (_, i) => (r() < 0.03 ? null : Math.round(p.restingHr + stageHr[phases[i]] + gauss(r, 0, 2)))) : null;
    const hrv = withSeries
      ? Array.from({ length: full }, (_, i) => (r() < 0.03 ? null : Math.max(8, Math.round(p.hrv + stageHrv[phases[i]] + gauss(r, 0, 7)))))
      : null;
    const present = (xs: (number | null)[] | null) => (xs ?? []).filter((v): v is number => v !== null);
    const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);
    const total = secs['1'] + secs['2'] + secs['3'];
    const temperature = type === 'long_sleep' ? round(gauss(r, 0, 0.25), 2) : null;
    const series = (items: (number | null)[] | null) => (items ? { interval: 300.0, items, timestamp: localized(start, tz, true) } : null);
    return {
      id: uuidFrom(user.seed, 'sleep', day, String(period)),
      meta: { updated_at: new Date(start + timeInBed * 1000 + 600_000).toISOString(), version: 1 },
      average_breath: round(uniform(r, 13, 17), 3),
      average_heart_rate: hr ? round(mean(present(hr)) ?? 0, 3) : round(uniform(r, 60, 75), 3),
      average_hrv: hrv ? Math.round(mean(present(hrv)) ?? 0) : null,
      awake_time: secs['4'],
      bedtime_end: localized(start + timeInBed * 1000, tz),
      bedtime_start: localized(start, tz),
      day,
      deep_sleep_duration: secs['1'],
      efficiency: Math.max(1, Math.round((100 * total) / timeInBed)),
      heart_rate: series(hr),
      hrv: series(hrv),
      latency: latencySlots * 300,
      light_sleep_duration: secs['2'],
      low_battery_alert: false,
      // 255 when the period has no heart-rate data (a nap in multiple_sleep.json).
      lowest_heart_rate: hr ? Math.min(...present(hr)) : 255,
      movement_30_sec: null,
      period,
      readiness: {
        contributors: {
          activity_balance: Math.round(uniform(r, 60, 100)),
          body_temperature: Math.round(uniform(r, 80, 100)),
          hrv_balance: Math.round(uniform(r, 40, 100)),
          previous_day_activity: Math.round(uniform(r, 60, 100)),
          previous_night: Math.round(uniform(r, 40, 100)),
          recovery_index: Math.round(uniform(r, 20, 100)),
          resting_heart_rate: Math.round(uniform(r, 50, 100)),
          sleep_balance: Math.round(uniform(r, 40, 100)),
        },
        score: Math.round(uniform(r, 55, 95)),
        temperature_deviation: temperature,
        temperature_trend_deviation: type === 'long_sleep' ? round(gauss(r, 0, 0.1), 2) : null,
      },
      readiness_score_delta: type === 'long_sleep' ? 0 : Math.round(uniform(r, 0, 6)),
      rem_sleep_duration: secs['3'],
      restless_periods: Math.round(uniform(r, 5, 300) * (timeInBed / 28_800)),
      sleep_algorithm_version: 'v2',
      sleep_analysis_reason: 'foreground_sleep_analysis',
      sleep_phase_5_min: phases,
      sleep_phase_30_sec: null,
      sleep_score_delta: type === 'long_sleep' ? 0 : Math.round(uniform(r, 0, 6)),
      time_in_bed: timeInBed,
      total_sleep_duration: total,
      type,
      ring_id: null,
    };
  }

  private dailySleepOf(user: FakeUser, day: string): Doc {
    return this.memo(`${user.seed}:daily_sleep:${day}`, () => {
      const r = seededRandom(`${user.seed}:daily_sleep:${day}`);
      const c = () => Math.round(uniform(r, 40, 100));
      return {
        id: uuidFrom(user.seed, 'daily_sleep', day),
        meta: { updated_at: new Date(localMidnight(day, user.zoneOffsetSeconds) + 9 * 3600_000).toISOString(), version: 1 },
        contributors: { deep_sleep: c(), efficiency: c(), latency: c(), rem_sleep: c(), restfulness: c(), timing: c(), total_sleep: c() },
        day,
        score: Math.round(uniform(r, 58, 93)),
        // The cassettes' daily_sleep timestamps are the day at 00:00 +00:00 whatever the user's offset.
        timestamp: `${day}T00:00:00+00:00`,
      };
    });
  }

  private spo2Of(user: FakeUser, day: string): Doc {
    return this.memo(`${user.seed}:daily_spo2:${day}`, () => {
      const r = seededRandom(`${user.seed}:daily_spo2:${day}`);
      return {
        id: uuidFrom(user.seed, 'daily_spo2', day),
        meta: { updated_at: new Date(localMidnight(day, user.zoneOffsetSeconds) + 9 * 3600_000).toISOString(), version: 1 },
        breathing_disturbance_index: Math.round(uniform(r, 0, 20)),
        day,
        // Some nights have no reading (spo2_percentage is nullable).
        spo2_percentage: r() < 0.08 ? null : { average: round(uniform(r, 94.5, 99), 3) },
      };
    });
  }

  private activityOf(user: FakeUser, day: string): Doc {
    return this.memo(`${user.seed}:daily_activity:${day}`, () => {
      const tz = user.zoneOffsetSeconds;
      const p = this.person(user);
      const r = seededRandom(`${user.seed}:daily_activity:${day}`);
      const steps = Math.max(800, Math.round(gauss(r, p.steps, 2200)));
      const highMin = Math.round(uniform(r, 0, 40));
      const mediumMin = Math.round(uniform(r, 20, 90));
      const lowMin = Math.round(uniform(r, 150, 330));
      const active = Math.round(steps * 0.035 + highMin * 9 + mediumMin * 4 + lowMin * 1.2);
      const bmr = Math.round(10 * p.weightKg + 625 * p.heightM - 5 * p.age + (p.sex === 'male' ? 5 : -161));
      const start = localMidnight(day, tz) + 4 * 3600_000; // "a 24-hour period starting at 4 a.m."
      const met = Array.from({ length: 1440 }, () => round(r() < 0.8 ? uniform(r, 0.9, 1.3) : uniform(r, 1.3, 6), 1));
      const classes = Array.from({ length: 288 }, () => String(Math.min(5, Math.floor(uniform(r, 1, 5.4))))).join('');
      const distance = Math.round(steps * uniform(r, 0.72, 0.82) + mediumMin * 60);
      return {
        id: uuidFrom(user.seed, 'daily_activity', day),
        meta: { updated_at: new Date(start + DAY).toISOString(), version: 1 },
        class_5_min: classes,
        score: Math.round(uniform(r, 55, 99)),
        active_calories: active,
        average_met_minutes: round(uniform(r, 1.3, 2.2), 3),
        contributors: {
          meet_daily_targets: Math.round(uniform(r, 40, 100)),
          move_every_hour: Math.round(uniform(r, 60, 100)),
          recovery_time: Math.round(uniform(r, 60, 100)),
          stay_active: Math.round(uniform(r, 40, 100)),
          training_frequency: Math.round(uniform(r, 40, 100)),
          training_volume: Math.round(uniform(r, 40, 100)),
        },
        equivalent_walking_distance: distance,
        high_activity_met_minutes: highMin * 8,
        high_activity_time: highMin * 60,
        inactivity_alerts: Math.floor(uniform(r, 0, 3)),
        low_activity_met_minutes: Math.round(lowMin * 2.5),
        low_activity_time: lowMin * 60,
        medium_activity_met_minutes: mediumMin * 4,
        medium_activity_time: mediumMin * 60,
        met: { interval: 60.0, items: met, timestamp: localized(start, tz, true) },
        meters_to_target: Math.round(uniform(r, -4000, 6000)),
        non_wear_time: Math.round(uniform(r, 0, 40)) * 60,
        resting_time: Math.round(uniform(r, 400, 520)) * 60,
        sedentary_met_minutes: Math.round(uniform(r, 5, 30)),
        sedentary_time: Math.round(uniform(r, 420, 700)) * 60,
        steps,
        target_calories: 500,
        target_meters: 10_000,
        total_calories: bmr + active,
        day,
        timestamp: localized(start, tz),
      };
    });
  }

  /** 0–2 workouts a day, in the morning (06:30–08:30) or the evening (17:30–19:30): never during a nap or the night. */
  private workoutsOf(user: FakeUser, day: string): Doc[] {
    return this.memo(`${user.seed}:workout:${day}`, () => {
      const tz = user.zoneOffsetSeconds;
      const r = seededRandom(`${user.seed}:workout:${day}`);
      const count = r() < 0.45 ? 0 : r() < 0.75 ? 1 : 2;
      const out: Doc[] = [];
      for (let i = 0; i < count; i++) {
        const [activity, kmh] = ACTIVITIES[Math.floor(r() * ACTIVITIES.length)];
        const startMin = i === 0 ? uniform(r, 6.5 * 60, 8.5 * 60) : uniform(r, 17.5 * 60, 19.5 * 60);
        const start = localMidnight(day, tz) + Math.round(startMin) * 60_000;
        const minutes = Math.round(uniform(r, 20, 75));
        const end = start + minutes * 60_000;
        out.push({
          id: uuidFrom(user.seed, 'workout', day, String(i)),
          meta: { updated_at: new Date(end + 300_000).toISOString(), version: 1 },
          activity,
          calories: round(minutes * uniform(r, 4, 11), 3),
          day,
          distance: kmh === null || r() < 0.2 ? null : round(((kmh * 1000 * minutes) / 60) * uniform(r, 0.85, 1.1), 4),
          end_datetime: localized(end, tz),
          intensity: (['easy', 'moderate', 'hard'] as const)[Math.floor(r() * 3)],
          label: r() < 0.2 ? `My ${activity.replace('_', ' ')}` : null,
          source: (['manual', 'autodetected', 'confirmed', 'workout_heart_rate'] as const)[Math.floor(r() * 4)],
          start_datetime: localized(start, tz),
        });
      }
      return out;
    });
  }

  /**
   * 5-minute heart rate over the local day, as Oura's `/heartrate` rows (UTC `+00:00`). Instants inside a sleep
   * period are left out: that heart rate is the sleep document's own series (a simplification: Oura's `/heartrate`
   * also has `sleep` rows), so every sample the fake has comes from exactly one place.
   */
  private heartRateOfDay(user: FakeUser, day: string): HeartRateRow[] {
    return this.memo(`${user.seed}:heartrate:${day}`, () => {
      const tz = user.zoneOffsetSeconds;
      const p = this.person(user);
      const r = seededRandom(`${user.seed}:heartrate:${day}`);
      const sleeps = [...this.sleepsOf(user, day), ...this.sleepsOf(user, addDays(day, 1))].map((s) => [
        Date.parse(s.bedtime_start as string),
        Date.parse(s.bedtime_end as string),
      ]);
      const workouts = this.workoutsOf(user, day).map((w) => [Date.parse(w.start_datetime as string), Date.parse(w.end_datetime as string)]);
      const midnight = localMidnight(day, tz);
      const first = midnight + Math.floor(r() * 300) * 1000;
      const rows: HeartRateRow[] = [];
      for (let t = first; t < midnight + DAY; t += 300_000) {
        const noise = gauss(r, 0, 4);
        const rest = r() < 0.2;
        if (sleeps.some(([s, e]) => t >= s && t < e)) continue;
        const inWorkout = workouts.some(([s, e]) => t >= s && t < e);
        const bpm = Math.round(inWorkout ? p.restingHr + 55 + noise * 2 : p.restingHr + (rest ? 8 : 20) + noise);
        rows.push({ bpm, source: inWorkout ? 'workout' : rest ? 'rest' : 'awake', timestamp: utcStamp(t), timestamp_unix: t });
      }
      return rows;
    });
  }
}

const sortKey = (d: Doc) => String(d.bedtime_start ?? d.start_datetime ?? d.timestamp ?? d.id);
const publicSubscription = (s: OuraSubscription) => ({
  id: s.id,
  callback_url: s.callback_url,
  event_type: s.event_type,
  data_type: s.data_type,
  expiration_time: s.expiration_time,
});

export async function startFakeOura(opts: { port?: number; clientId?: string; clientSecret?: string } = {}): Promise<FakeOura> {
  return new FakeOura(opts).start();
}
