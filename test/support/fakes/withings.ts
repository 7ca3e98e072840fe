import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { FakeProvider, round, seededRandom, type FakeReply, type FakeRequest, type FakeUser } from './fake-provider';

/**
 * A loopback fake of the Withings Public Health Data API, after its public documentation:
 * - developer.withings.com api-reference (copy: api-evangelist/withings openapi/_original/withings-data-api-openapi.yml):
 *   OAuth2 authorize2 / requesttoken / revoke, Signature v2 - Getnonce, Measure - Getmeas, Measure v2 - Getactivity /
 *   Getintradayactivity / Getworkouts, Sleep v2 - Get / Getsummary, Notify - Subscribe / List / Get / Revoke, and the
 *   "Response Status" families;
 * - developer.withings.com guides: access-and-refresh-tokens (access 3 h, refresh 1 year, the previous refresh token
 *   stops 8 h after a new one is issued or once the new access token is used), sign-your-requests, notification-subscribe
 *   (HEAD check of the callback URL), notification-content (form-encoded, unsigned `userid, appli, startdate, enddate`),
 *   data-update-notifications (answer 200 within 2 s; four failures in a row remove the subscription), FAQ (the
 *   authorization code expires after 30 seconds);
 * - response bodies after api-evangelist/withings examples/withings-*-example.json.
 * Every service is a POST with an `action` and answers HTTP 200 `{status, body, error?}`; an invalid access token is
 * `status: 401` in a 200, a refused grant `status: 503 "Invalid Params: invalid code"` (as observed by Withings clients),
 * the rate limit `status: 601` (opt-in here: `rateLimitPerMinute`).
 */

export const FAKE_WITHINGS_CLIENT = { clientId: 'withings-fake-client-id-7573fd4a4c42', clientSecret: 'withings-fake-client-secret-d9286311451f' };

const DAY = 86_400;
const HOUR = 3600;
const MIN = 60;
const ACCESS_TTL_S = 3 * HOUR; // expires_in 10800
const REFRESH_TTL_S = 365 * DAY;
const OLD_REFRESH_GRACE_S = 8 * HOUR;
const NONCE_TTL_S = 30 * MIN;
const KNOWN_SCOPES = new Set(['user.info', 'user.metrics', 'user.activity', 'user.sleepevents']);

// ---- Withings payload shapes (as the api-reference names them) ----------------------------------------------------

export interface FakeMeasure {
  value: number;
  type: number;
  unit: number;
  algo: number;
  fm: number;
}
export interface FakeMeasureGroup {
  grpid: number;
  attrib: number;
  date: number;
  created: number;
  modified: number;
  category: number;
  deviceid: string;
  hash_deviceid: string;
  measures: FakeMeasure[];
  model: string;
  model_id: number;
  comment: null;
}
export interface FakeActivity {
  date: string;
  timezone: string;
  deviceid: string;
  hash_deviceid: string;
  brand: number;
  is_tracker: boolean;
  modified: number;
  steps: number;
  distance: number;
  elevation: number;
  soft: number;
  moderate: number;
  intense: number;
  active: number;
  calories: number;
  totalcalories: number;
  hr_average: number;
  hr_min: number;
  hr_max: number;
  hr_zone_0: number;
  hr_zone_1: number;
  hr_zone_2: number;
  hr_zone_3: number;
}
export interface FakeWorkout {
  id: number;
  category: number;
  timezone: string;
  model: number;
  attrib: number;
  startdate: number;
  enddate: number;
  date: string;
  modified: number;
  deviceid: string;
  data: Record<string, number>;
}
export interface FakeSleepSummary {
  id: number;
  timezone: string;
  model: number;
  model_id: number;
  startdate: number;
  enddate: number;
  date: string;
  created: number;
  modified: number;
  hash_deviceid: string;
  completed: boolean;
  data: Record<string, number>;
}
export interface FakeSleepSegment {
  startdate: number;
  enddate: number;
  state: number;
  model: string;
  model_id: number;
  hash_deviceid: string;
  hr: Record<string, number>;
  rr: Record<string, number>;
  snoring: Record<string, number>;
  sdnn_1: Record<string, number>;
  rmssd: Record<string, number>;
}
export interface FakeIntradayEntry {
  deviceid: string;
  model: string;
  model_id: number;
  steps?: number;
  elevation?: number;
  calories?: number;
  distance?: number;
  duration?: number;
  heart_rate?: number;
  spo2_auto?: number;
}

/** Data a test sets for a user: each kind given replaces the generated data of that kind entirely. */
export interface WithingsUserData {
  measuregrps?: FakeMeasureGroup[];
  activities?: FakeActivity[];
  workouts?: FakeWorkout[];
  sleepSummaries?: FakeSleepSummary[];
  sleepSegments?: FakeSleepSegment[];
  /** Keyed by epoch seconds, as Getintradayactivity's `series`. */
  intraday?: Record<string, FakeIntradayEntry>;
}

export interface NotifySubscription {
  userId: string;
  appli: number;
  callbackurl: string;
  comment: string;
  failures: number;
}

export interface WithingsFakeOptions {
  port?: number;
  clientId?: string;
  clientSecret?: string;
}

// ---- Time zones (the fake's own computation, independent of the module's) -----------------------------------------

const zoneFormatters = new Map<string, Intl.DateTimeFormat>();
function zoneOffset(tz: string, epochS: number): number {
  let f = zoneFormatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    zoneFormatters.set(tz, f);
  }
  const parts = Object.fromEntries(f.formatToParts(new Date(epochS * 1000)).map((p) => [p.type, p.value]));
  const wall = Date.UTC(Number(parts.year), Number(parts.month) - 1, Number(parts.day), Number(parts.hour), Number(parts.minute), Number(parts.second)) / 1000;
  return wall - epochS;
}
const ymdOf = (epochS: number, offset: number) => new Date((epochS + offset) * 1000).toISOString().slice(0, 10);
const plusDays = (ymd: string, n: number) => new Date(Date.parse(`${ymd}T00:00:00Z`) + n * DAY * 1000).toISOString().slice(0, 10);
function midnightOf(tz: string, ymd: string): number {
  const guess = Date.parse(`${ymd}T00:00:00Z`) / 1000;
  const first = guess - zoneOffset(tz, guess);
  return guess - zoneOffset(tz, first);
}
const numericId = (...parts: (string | number)[]) => parseInt(createHash('sha256').update(parts.join(':')).digest('hex').slice(0, 10), 16);

/** The fake user's IANA zone: `user.timezone`, else an Etc/GMT zone of its whole-hour offset. */
export function zoneOfUser(user: FakeUser): string {
  if (typeof user.timezone === 'string') return user.timezone;
  const off = user.zoneOffsetSeconds;
  if (off === 0) return 'UTC';
  if (off % HOUR !== 0) throw new Error(`withings fake: give user ${user.id} a timezone (IANA name) for offset ${off}`);
  return `Etc/GMT${off > 0 ? '-' : '+'}${Math.abs(off) / HOUR}`; // Etc zones have the inverted sign
}

// ---- The fake -------------------------------------------------------------------------------------------------------

export class WithingsFake extends FakeProvider {
  /** Page sizes (Withings does not document its own): small enough that a 90-day pull pages. */
  pageSize = { measuregrps: 40, activities: 30, workouts: 20, sleepSummaries: 25 };
  /** Opt-in per-app limit (the real one is 120/min): over it, services answer status 601. null: off. */
  rateLimitPerMinute: number | null = null;
  /** Seconds an authorization code stays valid (30 in production). */
  codeTtlSeconds = 30;
  /** The old refresh token of each new access token: refused once that access token is used. */
  private readonly supersededRefresh = new Map<string, string>();
  readonly nonces = new Map<string, { expiresAt: number; used: boolean }>();
  readonly subscriptions: NotifySubscription[] = [];
  /** Users whose access was revoked through OAuth2 - Revoke, in order. */
  readonly revocations: string[] = [];
  private readonly explicit = new Map<string, WithingsUserData>();
  private readonly served = new Map<string, Record<string, number>>();
  private readonly cache = new Map<string, unknown>();
  private rateWindow = { minute: -1, count: 0 };
  /** Seconds added to the real clock (tests of the 8-hour rule move time forward). */
  private skewSeconds = 0;

  constructor(opts: Required<Pick<WithingsFakeOptions, 'clientId' | 'clientSecret'>> & { port?: number }) {
    super({
      slug: 'withings',
      name: 'Withings',
      clientId: opts.clientId,
      clientSecret: opts.clientSecret,
      authorizePath: '/oauth2_user/authorize2',
      port: opts.port,
    });
    this.route('POST', '/v2/oauth2', (req) => this.rpc(req, false, (f) => this.oauth2(req, f)));
    this.route('POST', '/v2/signature', (req) => this.rpc(req, false, (f) => this.signatureService(f)));
    this.route('POST', '/measure', (req) => this.rpc(req, true, (f, user) => this.measureService(f, user!)));
    this.route('POST', '/v2/measure', (req) => this.rpc(req, true, (f, user) => this.measureV2Service(f, user!)));
    this.route('POST', '/v2/sleep', (req) => this.rpc(req, true, (f, user) => this.sleepService(f, user!)));
    this.route('POST', '/notify', (req) => this.rpc(req, true, (f, user) => this.notifyService(f, user!)));
  }

  // ---- Clock --------------------------------------------------------------------------------------------------------

  /** The fake's clock, epoch seconds. */
  nowS(): number {
    return Math.floor(this.nowMs() / 1000);
  }

  /** The fake's clock, epoch milliseconds. */
  nowMs(): number {
    return Date.now() + this.skewSeconds * 1000;
  }

  /** Moves the fake's clock forward (token lifetimes, the 8-hour refresh rule, data availability). */
  advance(seconds: number): void {
    this.skewSeconds += seconds;
  }

  protected override newUserId(): number {
    return 10_000_000 + Math.floor(Math.random() * 89_999_999); // Withings user ids are integers
  }

  // ---- Test controls --------------------------------------------------------------------------------------------

  /** Replaces the generated data of the given kinds for a user with exactly these records. */
  setData(userId: string, data: WithingsUserData): void {
    this.explicit.set(userId, { ...this.explicit.get(userId), ...data });
  }

  /** What was served to a user, per kind: measure groups, measures (and per meastype), activities, workouts, sleep
   *  summaries, sleep segments and their hr/rr/rmssd/sdnn_1/snoring points, intraday values per field. */
  servedCount(userId: string): Record<string, number> {
    return { ...this.served.get(userId) };
  }

  resetServed(userId?: string): void {
    if (userId) this.served.delete(userId);
    else this.served.clear();
  }

  /** The state of a refresh token: valid now, and until when. */
  refreshTokenState(token: string): { known: boolean; valid: boolean; validUntil: number | null; revoked: boolean } {
    const rt = this.refreshTokens.get(token);
    if (!rt) return { known: false, valid: false, validUntil: null, revoked: false };
    return { known: true, valid: !rt.revoked && rt.validUntil > this.nowMs(), validUntil: rt.validUntil, revoked: rt.revoked };
  }

  /** The state of an access token. */
  accessTokenState(token: string): { known: boolean; valid: boolean; userId: string | null } {
    const at = this.accessTokens.get(token);
    if (!at) return { known: false, valid: false, userId: null };
    return { known: true, valid: !at.revoked && at.expiresAt > this.nowMs(), userId: at.userId };
  }

  /** The user's notification subscriptions. */
  subscriptionsOf(userId: string): NotifySubscription[] {
    return this.subscriptions.filter((s) => s.userId === userId);
  }

  /**
   * POSTs a notification to `url` exactly as Withings sends one: application/x-www-form-urlencoded, unsigned, fields
   * `userid, appli, startdate, enddate` (+ `date`, `action`, `deviceid` when given).
   */
  async sendPush(
    url: string,
    fields: { userid: string | number; appli: number; startdate?: number; enddate?: number; date?: string; action?: string; deviceid?: string },
  ): Promise<{ status: number; text: string }> {
    const form = new URLSearchParams();
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) form.set(k, String(v));
    return this.push(url, form.toString(), { 'content-type': 'application/x-www-form-urlencoded' });
  }

  /**
   * Notifies every subscription of the user for `appli`, as Withings does after a sync: a delivery that is not a 2xx
   * within 2 s is a failure, and four failures in a row remove the subscription.
   */
  async notifySubscribers(
    userId: string,
    appli: number,
    fields: { startdate?: number; enddate?: number; date?: string; action?: string } = {},
  ): Promise<{ url: string; status: number }[]> {
    const out: { url: string; status: number }[] = [];
    for (const sub of this.subscriptionsOf(userId).filter((s) => s.appli === appli)) {
      let status = 0;
      try {
        const form = new URLSearchParams({ userid: userId, appli: String(appli) });
        for (const [k, v] of Object.entries(fields)) if (v !== undefined) form.set(k, String(v));
        const res = await fetch(sub.callbackurl, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: form.toString(),
          signal: AbortSignal.timeout(2000),
        });
        status = res.status;
        await res.text();
      } catch {
        status = 0;
      }
      sub.failures = status >= 200 && status < 300 ? 0 : sub.failures + 1;
      if (sub.failures >= 4) this.subscriptions.splice(this.subscriptions.indexOf(sub), 1);
      out.push({ url: sub.callbackurl, status });
    }
    return out;
  }

  /** The user removes our app in their Withings account: tokens revoked, appli 46 `action=unlink` sent, subscriptions dropped. */
  async userUnlinks(userId: string): Promise<void> {
    this.revokeUser(userId);
    await this.notifySubscribers(userId, 46, { action: 'unlink', date: ymdOf(this.nowS(), 0) });
    for (const s of this.subscriptionsOf(userId)) this.subscriptions.splice(this.subscriptions.indexOf(s), 1);
  }

  // ---- RPC plumbing -----------------------------------------------------------------------------------------------

  private envelope(status: number, body: unknown = {}, error?: string): FakeReply {
    return { status: 200, body: status === 0 ? { status, body } : { status, body: {}, error } };
  }

  private async rpc(
    req: FakeRequest,
    bearer: boolean,
    handle: (form: Record<string, string>, user?: FakeUser) => FakeReply | Promise<FakeReply>,
  ): Promise<FakeReply> {
    const form = { ...req.query, ...req.form };
    if (this.rateLimitPerMinute !== null) {
      const minute = Math.floor(this.nowS() / 60);
      if (minute !== this.rateWindow.minute) this.rateWindow = { minute, count: 0 };
      if (++this.rateWindow.count > this.rateLimitPerMinute) return this.envelope(601, {}, 'Too many request');
    }
    if (!bearer) return handle(form);
    const user = this.checkBearer(req);
    if (!user) return this.envelope(401, {}, 'XRequestID: Not provided invalid_token: The access token provided is invalid');
    return handle(form, user);
  }

  /** The user of the request's access token (Authorization: Bearer), with Withings' clock and refresh rule. */
  private checkBearer(req: FakeRequest): FakeUser | null {
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    const token = m ? this.accessTokens.get(m[1]) : undefined;
    if (!token || token.revoked || token.expiresAt <= this.nowMs()) return null;
    const user = this.users.get(token.userId);
    if (!user || user.revoked) return null;
    req.record.userId = user.id;
    // "The former refresh_token stops being valid … as soon as the new access_token is used."
    const old = this.supersededRefresh.get(token.token);
    if (old) {
      const rt = this.refreshTokens.get(old);
      if (rt) rt.revoked = true;
      this.supersededRefresh.delete(token.token);
    }
    return user;
  }

  private count(userId: string, key: string, n = 1): void {
    const rec = this.served.get(userId) ?? {};
    rec[key] = (rec[key] ?? 0) + n;
    this.served.set(userId, rec);
  }

  private invalid(what: string): FakeReply {
    return this.envelope(503, {}, `Invalid Params: ${what}`);
  }

  // ---- OAuth2 -------------------------------------------------------------------------------------------------------

  private oauth2(req: FakeRequest, f: Record<string, string>): FakeReply {
    if (f.action === 'requesttoken') return this.requestToken(req, f);
    if (f.action === 'revoke') return this.revokeAccess(f);
    return this.envelope(2554, {}, 'Not implemented');
  }

  private requestToken(req: FakeRequest, f: Record<string, string>): FakeReply {
    if (!this.tokenClient(req, 'body')) return this.invalid('invalid client_id or client_secret');
    const now = this.nowS();
    if (f.grant_type === 'authorization_code') {
      const grant = this.codes.get(f.code ?? '');
      if (!grant) return this.invalid('invalid code');
      // The base class gives codes 10 minutes; Withings gives 30 seconds.
      if (!grant.used && Date.now() > grant.expiresAt - 10 * 60_000 + this.codeTtlSeconds * 1000) return this.invalid('invalid code');
      const scopes = (grant.scope ?? '').split(',');
      if (!grant.scope || scopes.some((s) => !KNOWN_SCOPES.has(s)))
        return this.invalid(`invalid scope "${grant.scope}" (a comma-separated list of ${[...KNOWN_SCOPES].join(', ')})`);
      const redeemed = this.redeemCode(f, f.client_id);
      if ('error' in redeemed)
        return this.invalid(
          redeemed.error === 'invalid_client' ? 'invalid client_id' : redeemed.description.startsWith('redirect_uri') ? 'invalid redirect_uri' : 'invalid code',
        );
      const body = this.tokenBody(redeemed.grant.userId, redeemed.grant.scope, now);
      redeemed.grant.issued.push(body.access_token, body.refresh_token);
      return this.envelope(0, body);
    }
    if (f.grant_type === 'refresh_token') {
      const rt = this.refreshTokens.get(f.refresh_token ?? '');
      if (!rt || rt.revoked || rt.validUntil <= this.nowMs() || this.users.get(rt.userId)?.revoked) return this.invalid('invalid refresh_token');
      const scope = [...this.accessTokens.values()].reverse().find((a) => a.userId === rt.userId)?.scope ?? '';
      const body = this.tokenBody(rt.userId, scope, now);
      // "When you request new access_token and refresh_token, the former refresh_token stops being valid after 8 hours,
      // or as soon as the new access_token is used."
      rt.validUntil = Math.min(rt.validUntil, (now + OLD_REFRESH_GRACE_S) * 1000);
      this.supersededRefresh.set(body.access_token, rt.token);
      return this.envelope(0, body);
    }
    return this.invalid('invalid grant_type');
  }

  private tokenBody(userId: string, scope: string, now: number) {
    const { access, refresh } = this.issueTokens(userId, { accessTtlSeconds: ACCESS_TTL_S, scope });
    access.expiresAt = (now + ACCESS_TTL_S) * 1000;
    refresh!.validUntil = (now + REFRESH_TTL_S) * 1000;
    return {
      userid: userId,
      access_token: access.token,
      refresh_token: refresh!.token,
      expires_in: ACCESS_TTL_S,
      scope,
      csrf_token: randomBytes(16).toString('base64url'),
      token_type: 'Bearer',
    };
  }

  /** Checks a signed call: known client, fresh unused nonce, signature = hex HMAC-SHA256(secret, "action,client_id,nonce"). */
  private checkSigned(f: Record<string, string>): FakeReply | null {
    if (f.client_id !== this.options.clientId) return this.invalid('invalid client_id');
    const nonce = this.nonces.get(f.nonce ?? '');
    if (!nonce || nonce.used || nonce.expiresAt < this.nowS()) return this.invalid('invalid nonce');
    const expected = createHmac('sha256', this.options.clientSecret).update([f.action, f.client_id, f.nonce].join(',')).digest('hex');
    if (!safeEqual(expected, f.signature ?? '')) return this.invalid('invalid signature');
    nonce.used = true;
    return null;
  }

  private revokeAccess(f: Record<string, string>): FakeReply {
    const refused = this.checkSigned(f);
    if (refused) return refused;
    const user = this.users.get(f.userid ?? '');
    if (!user) return this.invalid('invalid userid');
    // "Your access and refresh tokens for this user will become invalid, and the data update notifications for this
    // user will be automatically unsubscribed."
    this.revokeUser(user.id);
    for (const s of this.subscriptionsOf(user.id)) this.subscriptions.splice(this.subscriptions.indexOf(s), 1);
    this.revocations.push(user.id);
    return this.envelope(0, {});
  }

  private signatureService(f: Record<string, string>): FakeReply {
    if (f.action !== 'getnonce') return this.envelope(2554, {}, 'Not implemented');
    if (f.client_id !== this.options.clientId) return this.invalid('invalid client_id');
    if (!/^\d+$/.test(f.timestamp ?? '')) return this.invalid('invalid timestamp');
    const expected = createHmac('sha256', this.options.clientSecret).update([f.action, f.client_id, f.timestamp].join(',')).digest('hex');
    if (!safeEqual(expected, f.signature ?? '')) return this.invalid('invalid signature');
    const nonce = randomBytes(20).toString('hex');
    this.nonces.set(nonce, { expiresAt: this.nowS() + NONCE_TTL_S, used: false });
    return this.envelope(0, { nonce });
  }

  // ---- Measure - Getmeas ----------------------------------------------------------------------------------------

  private measureService(f: Record<string, string>, user: FakeUser): FakeReply {
    if (f.action !== 'getmeas') return this.envelope(2554, {}, 'Not implemented');
    const types = new Set((f.meastypes ?? f.meastype ?? '').split(',').filter(Boolean).map(Number));
    if ([...types].some((t) => !Number.isInteger(t))) return this.invalid('meastypes');
    const category = f.category ? Number(f.category) : 1;
    const hasRange = f.startdate !== undefined || f.enddate !== undefined;
    if (hasRange && f.lastupdate !== undefined) return this.invalid('startdate/enddate and lastupdate cannot be used together');
    for (const k of ['startdate', 'enddate', 'lastupdate', 'offset'] as const) if (f[k] !== undefined && !/^\d+$/.test(f[k])) return this.invalid(k);
    const now = this.nowS();
    const start = f.startdate !== undefined ? Number(f.startdate) : 0;
    const end = f.enddate !== undefined ? Number(f.enddate) : now;
    const groups = this.measureGroupsFor(user.id, start, end)
      .filter((g) => g.category === category && (f.lastupdate === undefined || g.modified >= Number(f.lastupdate)))
      .map((g) => ({ ...g, measures: types.size ? g.measures.filter((m) => types.has(m.type)) : g.measures }))
      .filter((g) => g.measures.length);
    const page = this.page(groups, Number(f.offset ?? 0), this.pageSize.measuregrps);
    this.count(user.id, 'measuregrps', page.items.length);
    for (const g of page.items) {
      this.count(user.id, 'measures', g.measures.length);
      for (const m of g.measures) this.count(user.id, `meastype_${m.type}`);
    }
    return this.envelope(0, {
      updatetime: now,
      timezone: zoneOfUser(user),
      measuregrps: page.items,
      more: page.more ? 1 : 0,
      offset: page.more ? page.next : 0,
    });
  }

  // ---- Measure v2 -------------------------------------------------------------------------------------------------

  private measureV2Service(f: Record<string, string>, user: FakeUser): FakeReply {
    if (f.action === 'getactivity') {
      const range = this.ymdRange(f);
      if ('reply' in range) return range.reply;
      const items = this.activitiesFor(user.id, range.start, range.end).filter((a) => range.lastupdate === null || a.modified >= range.lastupdate);
      const page = this.page(
        items.map((a) => pickFields(a, f.data_fields, ACTIVITY_META)),
        Number(f.offset ?? 0),
        this.pageSize.activities,
      );
      this.count(user.id, 'activities', page.items.length);
      return this.envelope(0, { activities: page.items, more: page.more, offset: page.more ? page.next : 0 });
    }
    if (f.action === 'getworkouts') {
      const range = this.ymdRange(f);
      if ('reply' in range) return range.reply;
      const items = this.workoutsFor(user.id, range.start, range.end).filter((w) => range.lastupdate === null || w.modified >= range.lastupdate);
      const fields = f.data_fields ? new Set(f.data_fields.split(',')) : null;
      const shaped = items.map((w) => ({ ...w, data: fields ? Object.fromEntries(Object.entries(w.data).filter(([k]) => fields.has(k))) : w.data }));
      const page = this.page(shaped, Number(f.offset ?? 0), this.pageSize.workouts);
      this.count(user.id, 'workouts', page.items.length);
      return this.envelope(0, { series: page.items, more: page.more, offset: page.more ? page.next : 0 });
    }
    if (f.action === 'getintradayactivity') {
      for (const k of ['startdate', 'enddate'] as const) if (f[k] !== undefined && !/^\d+$/.test(f[k])) return this.invalid(k);
      const now = this.nowS();
      const start = f.startdate !== undefined ? Number(f.startdate) : now - DAY;
      // "If your input startdate and enddate are separated by more than 24h, only the first 24h after startdate will be returned."
      const end = Math.min(f.enddate !== undefined ? Number(f.enddate) : now, start + DAY);
      const wanted = f.data_fields ? f.data_fields.split(',') : ['steps', 'elevation', 'calories', 'distance', 'duration', 'heart_rate', 'spo2_auto'];
      const series: Record<string, FakeIntradayEntry> = {};
      for (const [ts, e] of Object.entries(this.intradayFor(user.id, start, end))) {
        const out: FakeIntradayEntry = { deviceid: e.deviceid, model: e.model, model_id: e.model_id };
        let any = false;
        for (const k of wanted) {
          const v = e[k as keyof FakeIntradayEntry];
          if (typeof v === 'number' && k !== 'model_id') {
            (out as unknown as Record<string, number>)[k] = v;
            if (k !== 'duration') (any = true), this.count(user.id, `intraday_${k}`);
          }
        }
        if (any) series[ts] = out;
      }
      // PHP-style JSON: an empty series is [].
      return this.envelope(0, { series: Object.keys(series).length ? series : [] });
    }
    return this.envelope(2554, {}, 'Not implemented');
  }

  // ---- Sleep v2 ---------------------------------------------------------------------------------------------------

  private sleepService(f: Record<string, string>, user: FakeUser): FakeReply {
    if (f.action === 'getsummary') {
      const range = this.ymdRange(f);
      if ('reply' in range) return range.reply;
      const fields = f.data_fields ? new Set(f.data_fields.split(',')) : null;
      const items = this.sleepSummariesFor(user.id, range.start, range.end)
        .filter((s) => range.lastupdate === null || s.modified >= range.lastupdate)
        .map((s) => ({ ...s, data: fields ? Object.fromEntries(Object.entries(s.data).filter(([k]) => fields.has(k))) : s.data }));
      const page = this.page(items, Number(f.offset ?? 0), this.pageSize.sleepSummaries);
      this.count(user.id, 'sleep_summaries', page.items.length);
      return this.envelope(0, { series: page.items, more: page.more, offset: page.more ? page.next : 0 });
    }
    if (f.action === 'get') {
      if (!/^\d+$/.test(f.startdate ?? '') || !/^\d+$/.test(f.enddate ?? '')) return this.invalid('startdate and enddate are required');
      const start = Number(f.startdate);
      const end = Math.min(Number(f.enddate), start + DAY); // only the first 24 h are returned
      const wanted = new Set((f.data_fields ?? '').split(',').filter(Boolean));
      const series = this.sleepSegmentsFor(user.id, start, end).map((s) => {
        const out: Record<string, unknown> = {
          startdate: s.startdate,
          enddate: s.enddate,
          state: s.state,
          model: s.model,
          model_id: s.model_id,
          hash_deviceid: s.hash_deviceid,
        };
        for (const k of ['hr', 'rr', 'snoring', 'sdnn_1', 'rmssd'] as const) {
          if (!wanted.has(k)) continue;
          out[k] = s[k];
          this.count(user.id, `sleep_${k}`, Object.keys(s[k]).length);
        }
        return out;
      });
      this.count(user.id, 'sleep_segments', series.length);
      return this.envelope(0, { series, model: 16 });
    }
    return this.envelope(2554, {}, 'Not implemented');
  }

  // ---- Notify -----------------------------------------------------------------------------------------------------

  private async notifyService(f: Record<string, string>, user: FakeUser): Promise<FakeReply> {
    const appli = f.appli !== undefined ? Number(f.appli) : undefined;
    if (f.appli !== undefined && !Number.isInteger(appli)) return this.invalid('appli');
    const mine = this.subscriptionsOf(user.id);
    switch (f.action) {
      case 'subscribe': {
        if (!f.callbackurl || appli === undefined) return this.invalid('callbackurl and appli are required');
        // "Withings sends a HEAD request to verify your URL is reachable before registering it … returns a 2xx."
        let status = 0;
        try {
          const res = await fetch(f.callbackurl, { method: 'HEAD', signal: AbortSignal.timeout(2000) });
          status = res.status;
        } catch {
          status = 0;
        }
        if (status < 200 || status >= 300)
          return this.envelope(293, {}, `Invalid Params: the callback URL answered the HEAD request with ${status || 'no response'}`);
        if (!mine.some((s) => s.appli === appli && s.callbackurl === f.callbackurl))
          this.subscriptions.push({ userId: user.id, appli, callbackurl: f.callbackurl, comment: f.comment ?? '', failures: 0 });
        return this.envelope(0, {});
      }
      case 'list':
        return this.envelope(0, {
          profiles: mine
            .filter((s) => appli === undefined || s.appli === appli)
            .map((s) => ({ appli: s.appli, callbackurl: s.callbackurl, comment: s.comment, expires: 2_147_483_647 })),
        });
      case 'get': {
        const s = mine.find((x) => x.appli === (appli ?? 1) && x.callbackurl === f.callbackurl);
        return s ? this.envelope(0, { appli: s.appli, callbackurl: s.callbackurl, comment: s.comment }) : this.invalid('no such subscription');
      }
      case 'revoke': {
        if (!f.callbackurl) return this.invalid('callbackurl is required');
        const gone = mine.filter((x) => x.callbackurl === f.callbackurl && (appli === undefined || x.appli === appli));
        if (!gone.length) return this.invalid('no such subscription');
        for (const s of gone) this.subscriptions.splice(this.subscriptions.indexOf(s), 1);
        return this.envelope(0, {});
      }
      default:
        return this.envelope(2554, {}, 'Not implemented');
    }
  }

  // ---- Paging and parameters --------------------------------------------------------------------------------------

  private page<T>(items: T[], offset: number, size: number): { items: T[]; more: boolean; next: number } {
    const slice = items.slice(offset, offset + size);
    const next = offset + slice.length;
    return { items: slice, more: next < items.length, next };
  }

  /** startdateymd + enddateymd, or lastupdate — never both (the "DO NOT USE WITH" notes). */
  private ymdRange(f: Record<string, string>): { start: string; end: string; lastupdate: number | null } | { reply: FakeReply } {
    const ymd = /^\d{4}-\d{2}-\d{2}$/;
    const hasYmd = f.startdateymd !== undefined || f.enddateymd !== undefined;
    if (hasYmd && f.lastupdate !== undefined) return { reply: this.invalid('startdateymd/enddateymd and lastupdate cannot be used together') };
    if (f.offset !== undefined && !/^\d+$/.test(f.offset)) return { reply: this.invalid('offset') };
    if (f.lastupdate !== undefined) {
      if (!/^\d+$/.test(f.lastupdate)) return { reply: this.invalid('lastupdate') };
      const now = this.nowS();
      return { start: ymdOf(Math.max(Number(f.lastupdate) - 2 * DAY, now - 400 * DAY), 0), end: ymdOf(now + DAY, 0), lastupdate: Number(f.lastupdate) };
    }
    if (!ymd.test(f.startdateymd ?? '') || !ymd.test(f.enddateymd ?? '')) return { reply: this.invalid('startdateymd and enddateymd (Y-m-d) are required') };
    if (f.enddateymd < f.startdateymd) return { reply: this.invalid('enddateymd is before startdateymd') };
    return { start: f.startdateymd, end: f.enddateymd, lastupdate: null };
  }

  // ---- The data (explicit, else generated) ------------------------------------------------------------------------

  private user(userId: string): FakeUser {
    const u = this.users.get(userId);
    if (!u) throw new Error(`withings fake: no user ${userId}`);
    return u;
  }

  /** Local dates (the user's zone) touching [fromS, toS], padded by a day each side. */
  private daysAround(user: FakeUser, fromS: number, toS: number): string[] {
    const tz = zoneOfUser(user);
    const first = plusDays(ymdOf(fromS, zoneOffset(tz, fromS)), -1);
    const last = plusDays(ymdOf(toS, zoneOffset(tz, toS)), 1);
    const out: string[] = [];
    for (let d = first; d <= last && out.length < 800; d = plusDays(d, 1)) out.push(d);
    return out;
  }

  private memo<T>(key: string, make: () => T): T {
    if (!this.cache.has(key)) this.cache.set(key, make());
    return this.cache.get(key) as T;
  }

  /** Measure groups taken in [fromS, toS] (inclusive), oldest first. */
  measureGroupsFor(userId: string, fromS: number, toS: number): FakeMeasureGroup[] {
    const user = this.user(userId);
    const explicit = this.explicit.get(userId)?.measuregrps;
    const now = this.nowS();
    const all = explicit ?? [
      this.heightGroup(user),
      ...this.daysAround(user, Math.max(fromS, now - 800 * DAY), Math.min(toS, now)).flatMap((d) =>
        this.memo(`${userId}:meas:${d}`, () => this.generateMeasures(user, d)),
      ),
    ];
    return all.filter((g) => g.date >= fromS && g.date <= toS && g.date <= now).sort((a, b) => a.date - b.date || a.grpid - b.grpid);
  }

  activitiesFor(userId: string, startYmd: string, endYmd: string): FakeActivity[] {
    const user = this.user(userId);
    const explicit = this.explicit.get(userId)?.activities;
    if (explicit) return explicit.filter((a) => a.date >= startYmd && a.date <= endYmd);
    const out: FakeActivity[] = [];
    for (let d = startYmd; d <= endYmd; d = plusDays(d, 1)) {
      const a = this.memo(`${userId}:act:${d}:${this.availabilityKey(user, d)}`, () => this.generateActivity(user, d));
      if (a) out.push(a);
    }
    return out;
  }

  workoutsFor(userId: string, startYmd: string, endYmd: string): FakeWorkout[] {
    const user = this.user(userId);
    const explicit = this.explicit.get(userId)?.workouts;
    const now = this.nowS();
    if (explicit) return explicit.filter((w) => w.date >= startYmd && w.date <= endYmd);
    const out: FakeWorkout[] = [];
    for (let d = startYmd; d <= endYmd; d = plusDays(d, 1)) {
      const w = this.memo(`${userId}:wo:${d}`, () => this.generateWorkout(user, d));
      if (w && w.enddate <= now) out.push(w);
    }
    return out;
  }

  sleepSummariesFor(userId: string, startYmd: string, endYmd: string): FakeSleepSummary[] {
    const user = this.user(userId);
    const explicit = this.explicit.get(userId)?.sleepSummaries;
    const now = this.nowS();
    if (explicit) return explicit.filter((s) => s.date >= startYmd && s.date <= endYmd);
    const out: FakeSleepSummary[] = [];
    for (let d = startYmd; d <= endYmd; d = plusDays(d, 1)) {
      const night = this.night(user, d);
      if (night.summary.modified <= now) out.push(night.summary);
    }
    return out;
  }

  /** Sleep state segments starting in [fromS, toS]. */
  sleepSegmentsFor(userId: string, fromS: number, toS: number): FakeSleepSegment[] {
    const user = this.user(userId);
    const explicit = this.explicit.get(userId)?.sleepSegments;
    const now = this.nowS();
    const all =
      explicit ??
      this.daysAround(user, fromS, Math.min(toS, now)).flatMap((d) => {
        const night = this.night(user, d);
        return night.summary.modified <= now ? night.segments : [];
      });
    return all.filter((s) => s.startdate >= fromS && s.startdate <= toS).sort((a, b) => a.startdate - b.startdate);
  }

  /** Intraday entries with a timestamp in [fromS, toS], recorded (ended) by now. */
  intradayFor(userId: string, fromS: number, toS: number): Record<string, FakeIntradayEntry> {
    const user = this.user(userId);
    const explicit = this.explicit.get(userId)?.intraday;
    const now = this.nowS();
    const out: Record<string, FakeIntradayEntry> = {};
    const source =
      explicit ??
      Object.assign(
        {},
        ...this.daysAround(user, fromS, Math.min(toS, now)).map((d) => this.memo(`${userId}:intra:${d}`, () => this.generateIntraday(user, d))),
      );
    for (const ts of Object.keys(source)
      .map(Number)
      .sort((a, b) => a - b)) {
      const e = source[String(ts)];
      if (ts >= fromS && ts <= toS && ts + (e.duration ?? 0) <= now) out[String(ts)] = e;
    }
    return out;
  }

  // ---- Generators (seeded by user.seed, in the user's zone) ---------------------------------------------------------

  private rng(user: FakeUser, kind: string, day: string) {
    return seededRandom(`${user.seed}:${kind}:${day}`);
  }

  private person(user: FakeUser) {
    return this.memo(`${user.id}:person`, () => {
      const r = seededRandom(`${user.seed}:person`);
      return {
        heightCm: Math.round(160 + r() * 30),
        weightKg: 58 + r() * 35,
        fatPct: 14 + r() * 16,
        restingHr: Math.round(50 + r() * 15),
        stepLevel: 0.6 + r() * 0.8,
        basalKcal: Math.round(1450 + r() * 400),
        deviceid: createHash('sha1').update(`${user.seed}:watch`).digest('hex'),
        scaleid: createHash('sha1').update(`${user.seed}:scale`).digest('hex'),
      };
    });
  }

  /** The account's height, entered when the account was created (a year before now in fake time, fixed per user). */
  private heightGroup(user: FakeUser): FakeMeasureGroup {
    const p = this.person(user);
    const date = 1_700_000_000 + (numericId(user.seed, 'created') % (30 * DAY));
    return {
      grpid: numericId(user.seed, 'height'),
      attrib: 2,
      date,
      created: date,
      modified: date,
      category: 1,
      deviceid: '',
      hash_deviceid: '',
      measures: [{ value: p.heightCm, type: 4, unit: -2, algo: 0, fm: 0 }],
      model: '',
      model_id: 0,
      comment: null,
    };
  }

  private generateMeasures(user: FakeUser, day: string): FakeMeasureGroup[] {
    const tz = zoneOfUser(user),
      p = this.person(user),
      r = this.rng(user, 'measures', day);
    const midnight = midnightOf(tz, day);
    const dayIndex = Math.floor(Date.parse(`${day}T00:00:00Z`) / 1000 / DAY);
    const groups: FakeMeasureGroup[] = [];
    const group = (kind: string, date: number, measures: [number, number, number][], model: string, modelId: number, device: string): FakeMeasureGroup => ({
      grpid: numericId(user.seed, kind, day),
      attrib: 0,
      date,
      created: date + 40,
      modified: date + 40,
      category: 1,
      deviceid: device,
      hash_deviceid: device,
      measures: measures.map(([type, value, unit]) => ({ value, type, unit, algo: 0, fm: 3 })),
      model,
      model_id: modelId,
      comment: null,
    });
    if (r() < 0.75) {
      const weight = p.weightKg + 0.8 * Math.sin(dayIndex / 9) + (r() - 0.5) * 0.6;
      const fat = p.fatPct + 0.5 * Math.sin(dayIndex / 13) + (r() - 0.5) * 0.4;
      const fatMass = (weight * fat) / 100;
      const date = midnight + 7 * HOUR + Math.floor(r() * 60) * MIN;
      groups.push(
        group(
          'body',
          date,
          [
            [1, Math.round(weight * 1000), -3],
            [6, Math.round(fat * 1000), -3],
            [8, Math.round(fatMass * 1000), -3],
            [5, Math.round((weight - fatMass) * 1000), -3],
            [76, Math.round(weight * 0.72 * 100), -2],
            [77, Math.round(weight * 0.55 * 100), -2],
            [88, Math.round(weight * 0.04 * 100), -2],
            [170, Math.round(60 + r() * 40), -1],
          ],
          'Body Cardio',
          6,
          p.scaleid,
        ),
      );
    }
    if (r() < 0.4) {
      const date = midnight + 20 * HOUR + Math.floor(r() * 60) * MIN;
      groups.push(
        group(
          'bp',
          date,
          [
            [9, Math.round(68 + r() * 18), 0],
            [10, Math.round(108 + r() * 24), 0],
            [11, Math.round(p.restingHr + 5 + r() * 15), 0],
          ],
          'BPM Connect',
          45,
          `${p.scaleid}bp`,
        ),
      );
    }
    if (r() < 0.25)
      groups.push(group('spo2', midnight + 12 * HOUR + Math.floor(r() * 120) * MIN, [[54, Math.round(950 + r() * 45), -1]], 'ScanWatch', 93, p.deviceid));
    if (r() < 0.15)
      groups.push(group('temp', midnight + 9 * HOUR + Math.floor(r() * 120) * MIN, [[71, Math.round(36_300 + r() * 800), -3]], 'Thermo', 70, `${p.scaleid}th`));
    if (r() < 0.1) groups.push(group('vo2', midnight + 18 * HOUR, [[123, Math.round(380 + r() * 100), -1]], 'ScanWatch', 93, p.deviceid));
    return groups;
  }

  /** The night that ends on local `day`: its summary and its state segments with hr/rr/rmssd/sdnn_1 every 10 minutes. */
  private night(user: FakeUser, day: string): { summary: FakeSleepSummary; segments: FakeSleepSegment[] } {
    return this.memo(`${user.id}:night:${day}`, () => {
      const tz = zoneOfUser(user),
        p = this.person(user),
        r = this.rng(user, 'sleep', day);
      const midnight = midnightOf(tz, day);
      const start = midnight - (30 + Math.floor(r() * 75)) * MIN; // 22:45 – 23:30 the evening before
      const end = midnight + 6 * HOUR + (30 + Math.floor(r() * 70)) * MIN;
      const segments: FakeSleepSegment[] = [];
      const seg = (s: number, e: number, state: number) =>
        segments.push({
          startdate: s,
          enddate: e,
          state,
          model: 'ScanWatch',
          model_id: 93,
          hash_deviceid: p.deviceid,
          hr: {},
          rr: {},
          snoring: {},
          sdnn_1: {},
          rmssd: {},
        });
      let t = start;
      const latency = (5 + Math.floor(r() * 20)) * MIN;
      seg(t, t + latency, 0);
      t += latency;
      const cycle = [1, 2, 1, 3];
      let i = 0;
      while (t < end - 10 * MIN) {
        const state = r() < 0.08 ? 0 : cycle[i++ % cycle.length];
        const len = state === 0 ? (3 + Math.floor(r() * 6)) * MIN : (10 + Math.floor(r() * 35)) * MIN;
        const e = Math.min(t + len, end - 5 * MIN);
        seg(t, e, state);
        t = e;
      }
      seg(t, end, 0);
      const hrvBase = 35 + (numericId(user.seed, 'hrv') % 30);
      for (let ts = start; ts < end; ts += 10 * MIN) {
        const s = segments.find((x) => ts >= x.startdate && ts < x.enddate)!;
        const deep = s.state === 2,
          awake = s.state === 0;
        s.hr[String(ts)] = Math.round(p.restingHr - 4 + (awake ? 10 : deep ? 0 : 4) + r() * 4);
        s.rr[String(ts)] = Math.round(13 + (deep ? -1 : 0) + r() * 3);
        const rmssd = round(hrvBase + (deep ? 12 : awake ? -10 : 0) + (r() - 0.5) * 10, 1);
        s.rmssd[String(ts)] = rmssd;
        s.sdnn_1[String(ts)] = round(rmssd * 1.45 + 9, 1); // SDNN: a different number, never to be taken for RMSSD
        if (!awake && r() < 0.1) s.snoring[String(ts)] = Math.round(r() * 60);
      }
      const dur = (state: number) => segments.filter((s) => s.state === state).reduce((a, s) => a + s.enddate - s.startdate, 0);
      const light = dur(1),
        deep = dur(2),
        rem = dur(3),
        awake = dur(0);
      const points = (k: 'hr' | 'rr' | 'rmssd') => segments.flatMap((s) => Object.entries(s[k]).map(([ts, v]) => [Number(ts), v] as const));
      const hrs = points('hr').map(([, v]) => v),
        rrs = points('rr').map(([, v]) => v);
      const sleepStart = start + latency;
      const rmssdAt = (from: number, to: number) => {
        const xs = points('rmssd')
          .filter(([ts]) => ts >= from && ts < to)
          .map(([, v]) => v);
        return xs.length ? round(xs.reduce((a, b) => a + b, 0) / xs.length, 1) : null;
      };
      const avg = (xs: number[]) => Math.round(xs.reduce((a, b) => a + b, 0) / xs.length);
      const data: Record<string, number> = {
        total_timeinbed: end - start,
        total_sleep_time: light + deep + rem,
        lightsleepduration: light,
        deepsleepduration: deep,
        remsleepduration: rem,
        wakeupduration: awake,
        sleep_efficiency: round((light + deep + rem) / (end - start), 2),
        sleep_latency: latency,
        wakeup_latency: 5 * MIN,
        wakeupcount: segments.filter((s, k) => s.state === 0 && k > 0).length,
        waso: awake - latency - 5 * MIN,
        nb_rem_episodes: segments.filter((s) => s.state === 3).length,
        out_of_bed_count: 0,
        durationtosleep: latency,
        durationtowakeup: 5 * MIN,
        hr_average: avg(hrs),
        hr_min: Math.min(...hrs),
        hr_max: Math.max(...hrs),
        rr_average: avg(rrs),
        rr_min: Math.min(...rrs),
        rr_max: Math.max(...rrs),
        breathing_disturbances_intensity: Math.round(r() * 20),
        snoring: segments.reduce((a, s) => a + Object.values(s.snoring).reduce((x, y) => x + y, 0), 0),
        snoringepisodecount: segments.reduce((a, s) => a + Object.keys(s.snoring).length, 0),
        sleep_score: Math.round(55 + r() * 40),
      };
      const startAvg = rmssdAt(sleepStart, sleepStart + HOUR),
        endAvg = rmssdAt(end - HOUR, end);
      if (startAvg !== null) data.rmssd_start_avg = startAvg;
      if (endAvg !== null) data.rmssd_end_avg = endAvg;
      const summary: FakeSleepSummary = {
        id: numericId(user.seed, 'sleep', day) % 2_000_000_000,
        timezone: tz,
        model: 16,
        model_id: 93,
        startdate: start,
        enddate: end,
        date: day,
        created: end + 10 * MIN,
        modified: end + 10 * MIN,
        hash_deviceid: p.deviceid,
        completed: true,
        data,
      };
      return { summary, segments };
    });
  }

  private generateIntraday(user: FakeUser, day: string): Record<string, FakeIntradayEntry> {
    const tz = zoneOfUser(user),
      p = this.person(user),
      r = this.rng(user, 'intraday', day);
    const midnight = midnightOf(tz, day);
    const out: Record<string, FakeIntradayEntry> = {};
    const at = (ts: number) => (out[String(ts)] ??= { deviceid: p.deviceid, model: 'ScanWatch', model_id: 93 });
    for (let ts = midnight + 7 * HOUR; ts < midnight + 22 * HOUR; ts += 15 * MIN) {
      const steps = Math.round(r() < 0.3 ? 0 : r() * 1400 * p.stepLevel);
      const e = at(ts);
      e.steps = steps;
      e.distance = round(steps * 0.74, 2);
      e.calories = round(steps * 0.045, 2);
      e.elevation = r() < 0.1 ? 1 + Math.floor(r() * 2) : 0;
      e.duration = 15 * MIN;
    }
    for (let ts = midnight; ts < midnight + DAY; ts += 10 * MIN) {
      const hour = (ts - midnight) / HOUR;
      const asleep = hour < 6.5 || hour >= 23;
      at(ts).heart_rate = Math.round(p.restingHr + (asleep ? -2 : 14) + r() * (asleep ? 5 : 25));
    }
    for (let h = 1; h <= 5; h++) at(midnight + h * HOUR).spo2_auto = 94 + Math.round(r() * 5);
    return out;
  }

  /** A cache key part that changes while the day is still being recorded (today's summary grows). */
  private availabilityKey(user: FakeUser, day: string): string {
    const end = midnightOf(zoneOfUser(user), plusDays(day, 1));
    return end <= this.nowS() ? 'complete' : String(Math.floor(this.nowS() / (15 * MIN)));
  }

  private generateActivity(user: FakeUser, day: string): FakeActivity | null {
    const tz = zoneOfUser(user),
      p = this.person(user),
      r = this.rng(user, 'activity', day);
    const midnight = midnightOf(tz, day);
    const entries = Object.values(this.intradayFor(user.id, midnight, midnight + DAY - 1));
    if (!entries.length) return null;
    const sum = (k: 'steps' | 'distance' | 'calories' | 'elevation') => entries.reduce((a, e) => a + (e[k] ?? 0), 0);
    const hrs = entries.map((e) => e.heart_rate).filter((x): x is number => typeof x === 'number');
    let soft = 0,
      moderate = 0,
      intense = 0;
    for (const e of entries) {
      if (e.steps === undefined) continue;
      if (e.steps > 1000) intense += e.duration ?? 0;
      else if (e.steps > 450) moderate += e.duration ?? 0;
      else if (e.steps > 80) soft += e.duration ?? 0;
    }
    const zone = (lo: number, hi: number) => hrs.filter((h) => h >= lo && h < hi).length * 10 * MIN;
    const calories = round(sum('calories'), 2);
    return {
      date: day,
      timezone: tz,
      deviceid: p.deviceid,
      hash_deviceid: p.deviceid,
      brand: 1,
      is_tracker: true,
      modified: Math.min(midnight + DAY, this.nowS()) + Math.floor(r() * 300),
      steps: sum('steps'),
      distance: round(sum('distance'), 2),
      elevation: sum('elevation'),
      soft,
      moderate,
      intense,
      active: moderate + intense,
      calories,
      totalcalories: round(calories + p.basalKcal, 2),
      hr_average: hrs.length ? Math.round(hrs.reduce((a, b) => a + b, 0) / hrs.length) : 0,
      hr_min: hrs.length ? Math.min(...hrs) : 0,
      hr_max: hrs.length ? Math.max(...hrs) : 0,
      hr_zone_0: zone(0, 90),
      hr_zone_1: zone(90, 110),
      hr_zone_2: zone(110, 130),
      hr_zone_3: zone(130, 999),
    };
  }

  private generateWorkout(user: FakeUser, day: string): FakeWorkout | null {
    const tz = zoneOfUser(user),
      p = this.person(user),
      r = this.rng(user, 'workout', day);
    if (r() >= 0.4) return null;
    const categories = [1, 2, 6, 16, 28, 7];
    const category = categories[Math.floor(r() * categories.length)];
    const start = midnightOf(tz, day) + 17 * HOUR + 30 * MIN + Math.floor(r() * 90) * MIN;
    const end = start + (30 + Math.floor(r() * 50)) * MIN;
    const pause = Math.floor(r() * 4) * MIN;
    const moving = end - start - pause;
    const speed = category === 6 ? 6 + r() * 2 : category === 2 ? 2.6 + r() * 0.8 : category === 1 ? 1.3 + r() * 0.3 : 0;
    const hrAvg = Math.round(p.restingHr + 50 + r() * 40);
    const third = Math.floor((end - start) / 4);
    return {
      id: numericId(user.seed, 'workout', day) % 2_000_000_000,
      category,
      timezone: tz,
      model: 93,
      attrib: 7,
      startdate: start,
      enddate: end,
      date: day,
      modified: end + 15 * MIN,
      deviceid: p.deviceid,
      data: {
        calories: Math.round((moving / 60) * (5 + r() * 6)),
        intensity: 0,
        manual_distance: 0,
        manual_calories: 0,
        hr_average: hrAvg,
        hr_min: hrAvg - 30,
        hr_max: hrAvg + 25,
        hr_zone_0: third,
        hr_zone_1: third,
        hr_zone_2: third,
        hr_zone_3: end - start - 3 * third,
        pause_duration: pause,
        algo_pause_duration: 0,
        spo2_average: 97,
        steps: category === 1 || category === 2 ? Math.round(moving * (category === 2 ? 2.7 : 1.8)) : 0,
        distance: Math.round(moving * speed),
        elevation: Math.floor(r() * 6),
        pool_laps: 0,
        strokes: 0,
        pool_length: 0,
      },
    };
  }
}

const ACTIVITY_META = ['date', 'timezone', 'deviceid', 'hash_deviceid', 'brand', 'is_tracker', 'modified'];
/** An activity with only its metadata and the requested data_fields (all of them when none is asked for). */
function pickFields<T extends object>(record: T, dataFields: string | undefined, meta: string[]): Partial<T> {
  if (!dataFields) return record;
  const keep = new Set([...meta, ...dataFields.split(',')]);
  return Object.fromEntries(Object.entries(record).filter(([k]) => keep.has(k))) as Partial<T>;
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a),
    y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export async function startFakeWithings(opts: WithingsFakeOptions = {}): Promise<WithingsFake> {
  const fake = new WithingsFake({
    clientId: opts.clientId ?? FAKE_WITHINGS_CLIENT.clientId,
    clientSecret: opts.clientSecret ?? FAKE_WITHINGS_CLIENT.clientSecret,
    port: opts.port,
  });
  return fake.start();
}
