import { createHash, randomBytes } from 'node:crypto';
import { FakeProvider, round, seededRandom, type FakeHandler, type FakeReply, type FakeRequest, type FakeUser } from './fake-provider';

/**
 * A loopback fake of the Strava API v3, after its public documents:
 * - OAuth (developers.strava.com/docs/authentication): GET /oauth/authorize (the base consent page), POST /oauth/token
 *   with client_id/client_secret as parameters; the code's answer carries `athlete`; access tokens last 21600 s; a
 *   refresh returns the same access token while it has more than an hour left, otherwise a new one ("both the newer and
 *   older access tokens can be used until they expire") with a new refresh token, and "once a new refresh token is
 *   returned, the older refresh token is invalidated immediately". POST /oauth/deauthorize (access_token as parameter
 *   or bearer) and its RFC 7009 successor POST /oauth/revoke invalidate every token of the athlete for the app.
 * - Data (official swagger, stravalib/stravalib src/stravalib/tests/resources/strava_swagger.json): GET /api/v3/athlete,
 *   /api/v3/athlete/activities?before&after&page&per_page (per_page capped at 200; ascending when `after` is given,
 *   newest first otherwise), /api/v3/activities/{id}, /api/v3/activities/{id}/streams?keys&key_by_type. Errors are
 *   Strava's `{message, errors:[{resource, field, code}]}` Fault.
 * - Rate limits (developers.strava.com/docs/rate-limits): per app, overall 200/15 min + 2,000/day and read
 *   ("non-upload") 100/15 min + 1,000/day, windows at :00/:15/:30/:45 and midnight UTC; X-RateLimit-Limit/-Usage and
 *   X-ReadRateLimit-Limit/-Usage ("15-min,daily") on every API response; over the limit a 429 with a JSON error
 *   (requests over the limit still count).
 * - Webhooks (developers.strava.com/docs/webhooks): one push subscription per app (POST/GET/DELETE
 *   /api/v3/push_subscriptions with client_id/client_secret; creation GETs the callback with hub.challenge and needs it
 *   echoed within 2 s); events are unsigned JSON POSTs (sendPush).
 *
 * Data: deterministic activities per fake user and local day (seeded from user.seed), in the user's zoneOffsetSeconds,
 * with 2–5 s "smart recording" streams from which every summary value is computed; tests may add their own
 * (addActivity) or delete some. Activity ids encode (day, index, user tag) so any id can be found without a scan.
 */
export const FAKE_STRAVA_CLIENT = { clientId: '52931', clientSecret: 'fake-strava-client-secret-7b2946535949ae70f015' };

const DAY_S = 86_400;
const QUARTER_MS = 15 * 60_000;
const ACCESS_TTL_S = 21_600;
const STREAM_TYPES = ['time', 'distance', 'latlng', 'altitude', 'velocity_smooth', 'heartrate', 'cadence', 'watts', 'temp', 'moving', 'grade_smooth'];
const GENERATED_ID_BASE = 10_000_000_000;
const ADDED_ID_BASE = 90_000_000_000;

export interface StravaStreams {
  time: number[];
  distance: number[];
  latlng?: [number, number][];
  altitude?: number[];
  velocity_smooth?: number[];
  heartrate?: number[];
  cadence?: number[];
  watts?: (number | null)[];
}

/** One activity as the fake holds it: the DetailedActivity JSON and its streams. */
export interface FakeActivity {
  id: number;
  userId: string;
  startMs: number;
  endMs: number;
  detail: Record<string, unknown>;
  /** Null for a manual activity (no streams: the streams endpoint answers 404). */
  streams: StravaStreams | null;
}

export interface StravaEvent {
  object_type: 'activity' | 'athlete';
  object_id: number;
  aspect_type: 'create' | 'update' | 'delete';
  updates: Record<string, string>;
  owner_id: number;
  subscription_id: number;
  event_time: number;
}

export interface AddActivityOptions {
  /** The UTC start (default: two hours ago). */
  start?: Date | string;
  sportType?: string;
  durationMinutes?: number;
  /** The offset in force (default: the user's zoneOffsetSeconds) and the zone label (default: the user's). */
  utcOffset?: number;
  timezone?: string;
  manual?: boolean;
  /** Whether it has a heart-rate stream (default: seeded, 90% of non-manual activities). */
  heartrate?: boolean;
  /** Fields replaced in the activity JSON after it is built (e.g. `name`, `calories`). */
  overrides?: Record<string, unknown>;
}

type Pair = [number, number];
interface Served {
  athlete: number;
  listed: Set<number>;
  details: Set<number>;
  streams: Map<number, { points: number; heartrate: number }>;
}
const fault = (status: number, message: string, resource: string, field: string, code: string): FakeReply => ({
  status,
  body: { message, errors: [{ resource, field, code }] },
});

export class FakeStrava extends FakeProvider {
  /** The app's one push subscription (developers.strava.com/docs/webhooks). */
  subscription: { id: number; callbackUrl: string; verifyToken: string; createdAt: string } | null = null;
  rateLimits: { overall: Pair; read: Pair } = { overall: [200, 2000], read: [100, 1000] };
  /** Refresh tokens issue new tokens even while the access token has over an hour left (not Strava's rule; for tests). */
  alwaysRotate = false;
  private usage = { quarter: -1, day: -1, overall: [0, 0] as Pair, read: [0, 0] as Pair };
  private readonly days = new Map<string, FakeActivity[]>();
  private readonly added = new Map<number, FakeActivity>();
  private readonly deleted = new Set<number>();
  private readonly served = new Map<string, Served>();
  private readonly refreshScopes = new Map<string, string>();
  private nextSubscriptionId = 120_475;
  private nextAddedId = ADDED_ID_BASE;

  constructor(opts: { port?: number; clientId: string; clientSecret: string }) {
    super({ slug: 'strava', name: 'Strava', authorizePath: '/oauth/authorize', clientId: opts.clientId, clientSecret: opts.clientSecret, port: opts.port });
    // "…the application should check the scope parameter" of the redirect (docs/authentication).
    this.callbackCarriesScope = true;
    this.route('POST', '/oauth/token', (req) => this.token(req));
    this.route('POST', '/oauth/deauthorize', (req) => this.deauthorize(req));
    this.route('POST', '/oauth/revoke', (req) => this.revoke(req));
    this.route(
      'GET',
      '/api/v3/athlete',
      this.api((req, user) => this.athlete(req, user)),
    );
    this.route(
      'GET',
      '/api/v3/athlete/activities',
      this.api((req, user) => this.listActivities(req, user)),
    );
    this.route(
      'GET',
      '/api/v3/activities/{id}',
      this.api((req, user) => this.getActivity(req, user)),
    );
    this.route(
      'GET',
      '/api/v3/activities/{id}/streams',
      this.api((req, user) => this.getStreams(req, user)),
    );
    this.route('POST', '/api/v3/push_subscriptions', (req) => this.createSubscription(req));
    this.route('GET', '/api/v3/push_subscriptions', (req) => this.listSubscriptions(req));
    this.route('DELETE', '/api/v3/push_subscriptions/{id}', (req) => this.deleteSubscription(req));
  }

  // ---- Users and their data ---------------------------------------------------------------------------------

  /** Strava athlete ids are integers. */
  protected override newUserId(): number {
    let id: number;
    do id = 10_000_000 + Math.floor(Math.random() * 89_999_999);
    while (this.users.has(String(id)));
    return id;
  }

  /** A user with athlete details (sex, weight, names, zone label) seeded unless given, and data from a year back. */
  override addUser(user: Partial<FakeUser> = {}): FakeUser {
    if (user.id !== undefined && !/^\d+$/.test(user.id)) throw new Error(`Strava athlete ids are integers, not ${user.id}`);
    const u = super.addUser(user);
    const r = seededRandom(`${u.seed}:athlete`);
    const sex = r() < 0.5 ? 'F' : 'M';
    const defaults: Record<string, unknown> = {
      firstname: sex === 'F' ? 'Marianne' : 'Jonas',
      lastname: 'Teutenberg',
      sex,
      weight: Math.round((sex === 'F' ? 52 + r() * 20 : 64 + r() * 24) * 10) / 10,
      restingHr: 48 + Math.floor(r() * 16),
      maxHr: 178 + Math.floor(r() * 18),
      home: HOMES[Math.floor(r() * HOMES.length)],
      timezoneName: ZONE_NAMES[u.zoneOffsetSeconds] ?? `Etc/GMT${u.zoneOffsetSeconds > 0 ? '-' : '+'}${Math.abs(u.zoneOffsetSeconds) / 3600}`,
      standardOffsetSeconds: u.zoneOffsetSeconds,
      dataStartMs: Date.now() - 365 * DAY_S * 1000,
      createdAt: new Date(Date.now() - 400 * DAY_S * 1000).toISOString(),
      updatedAt: new Date(Date.now() - 20 * DAY_S * 1000).toISOString(),
    };
    for (const [k, v] of Object.entries(defaults)) if (u[k] === undefined) u[k] = v;
    return u;
  }

  /** Adds an activity for a user (e.g. with the swagger's DST offset, or manual); answers its JSON (DetailedActivity). */
  addActivity(userId: string, opts: AddActivityOptions = {}): Record<string, unknown> {
    const user = this.user(userId);
    const start = opts.start ? new Date(opts.start).getTime() : Date.now() - 2 * 3600_000;
    const profile = PROFILES.find(([, p]) => p.sportType === (opts.sportType ?? 'Run'))?.[1] ?? {
      ...PROFILES[0][1],
      sportType: opts.sportType!,
      type: opts.sportType!,
    };
    const id = this.nextAddedId++;
    const r = seededRandom(`${user.seed}:added:${id}`);
    const activity = buildActivity(
      user,
      id,
      start,
      { ...profile, minutes: opts.durationMinutes ? [opts.durationMinutes, opts.durationMinutes] : profile.minutes },
      r,
      { utcOffset: opts.utcOffset, timezone: opts.timezone, manual: opts.manual, heartrate: opts.heartrate },
    );
    Object.assign(activity.detail, opts.overrides);
    this.added.set(id, activity);
    return activity.detail;
  }

  /** Removes an activity (its id then answers 404 and it leaves the list). */
  deleteActivity(id: number): void {
    this.deleted.add(id);
  }

  /** The activities of a user whose start lies in (after, before) seconds, completed by now, oldest first. */
  activitiesOf(userId: string, after: number | null = null, before: number | null = null): FakeActivity[] {
    const user = this.user(userId);
    const now = Date.now(),
      off = user.zoneOffsetSeconds * 1000;
    const firstDay = Math.floor(((user.dataStartMs as number) + off) / (DAY_S * 1000));
    const today = Math.floor((now + off) / (DAY_S * 1000));
    const from = Math.max(firstDay, after === null ? firstDay : Math.floor((after * 1000 + off) / (DAY_S * 1000)) - 1);
    const to = Math.min(today, before === null ? today : Math.floor((before * 1000 + off) / (DAY_S * 1000)) + 1);
    const all: FakeActivity[] = [];
    for (let day = from; day <= to; day++) all.push(...this.day(user, day));
    for (const a of this.added.values()) if (a.userId === user.id) all.push(a);
    return all
      .filter(
        (a) => !this.deleted.has(a.id) && a.endMs <= now && (after === null || a.startMs > after * 1000) && (before === null || a.startMs < before * 1000),
      )
      .sort((a, b) => a.startMs - b.startMs);
  }

  /** One activity of a user by id, or undefined. */
  activity(userId: string, id: number): FakeActivity | undefined {
    if (this.deleted.has(id)) return undefined;
    const added = this.added.get(id);
    if (added) return added.userId === userId ? added : undefined;
    const user = this.users.get(userId);
    const rel = id - GENERATED_ID_BASE;
    if (!user || rel < 0 || rel % 10_000 !== userTag(user)) return undefined;
    const slot = Math.floor(rel / 10_000);
    const found = this.day(user, Math.floor(slot / 4)).find((a) => a.id === id);
    return found && found.endMs <= Date.now() ? found : undefined;
  }

  private day(user: FakeUser, day: number): FakeActivity[] {
    const key = `${user.id}:${day}`;
    let list = this.days.get(key);
    if (!list) {
      const r = seededRandom(`${user.seed}:day:${day}`);
      const count = r() < 0.4 ? 0 : r() < 0.8 ? 1 : 2;
      list = Array.from({ length: count }, (_, index) => {
        const profile = pickProfile(r);
        const localStartS = day * DAY_S + (index === 0 ? 6 * 3600 + r() * 3.5 * 3600 : 17 * 3600 + r() * 2.5 * 3600);
        const startMs = Math.round(localStartS - user.zoneOffsetSeconds) * 1000;
        return buildActivity(user, GENERATED_ID_BASE + (day * 4 + index) * 10_000 + userTag(user), startMs, profile, r, {});
      });
      this.days.set(key, list);
    }
    return list;
  }

  private user(userId: string): FakeUser {
    const user = this.users.get(userId);
    if (!user) throw new Error(`fake strava has no user ${userId}`);
    return user;
  }

  /**
   * What the API served a user, each record once however often it was served: `athlete` (profile reads),
   * `activities` (distinct activities listed), `activity_details`, `streams` (distinct stream sets), `stream_points`
   * (time points of those) and `heartrate_samples` (their non-null heart-rate values).
   */
  servedCount(userId: string): Record<string, number> {
    const s = this.servedOf(userId);
    const streams = [...s.streams.values()];
    return {
      athlete: s.athlete,
      activities: s.listed.size,
      activity_details: s.details.size,
      streams: streams.length,
      stream_points: streams.reduce((n, x) => n + x.points, 0),
      heartrate_samples: streams.reduce((n, x) => n + x.heartrate, 0),
    };
  }

  /** The ids of the activities listed to a user. */
  listedIds(userId: string): number[] {
    return [...this.servedOf(userId).listed];
  }

  private servedOf(userId: string): Served {
    let s = this.served.get(userId);
    if (!s) this.served.set(userId, (s = { athlete: 0, listed: new Set(), details: new Set(), streams: new Map() }));
    return s;
  }

  // ---- Rate limits --------------------------------------------------------------------------------------------

  setRateLimits(limits: { overall?: Pair; read?: Pair }): void {
    this.rateLimits = { ...this.rateLimits, ...limits };
  }

  /** Sets the current windows' usage (e.g. one short of the limit). */
  setUsage(usage: { overall?: Pair; read?: Pair }): void {
    this.rollWindows();
    if (usage.overall) this.usage.overall = [...usage.overall];
    if (usage.read) this.usage.read = [...usage.read];
  }

  rateLimitUsage(): { overall: Pair; read: Pair } {
    this.rollWindows();
    return { overall: [...this.usage.overall], read: [...this.usage.read] };
  }

  private rollWindows(): void {
    const now = Date.now(),
      quarter = Math.floor(now / QUARTER_MS),
      day = Math.floor(now / (DAY_S * 1000));
    if (day !== this.usage.day) [this.usage.day, this.usage.overall[1], this.usage.read[1]] = [day, 0, 0];
    if (quarter !== this.usage.quarter) [this.usage.quarter, this.usage.overall[0], this.usage.read[0]] = [quarter, 0, 0];
  }

  /** Counts one API request (every request counts, refused ones too) and answers the headers and whether it is over. */
  private countRequest(): { headers: Record<string, string>; over: boolean } {
    this.rollWindows();
    const u = this.usage,
      l = this.rateLimits;
    u.overall = [u.overall[0] + 1, u.overall[1] + 1];
    u.read = [u.read[0] + 1, u.read[1] + 1];
    const headers = {
      'X-RateLimit-Limit': l.overall.join(','),
      'X-RateLimit-Usage': u.overall.join(','),
      'X-ReadRateLimit-Limit': l.read.join(','),
      'X-ReadRateLimit-Usage': u.read.join(','),
    };
    const over = u.overall[0] > l.overall[0] || u.overall[1] > l.overall[1] || u.read[0] > l.read[0] || u.read[1] > l.read[1];
    return { headers, over };
  }

  /** An authenticated, rate-limited /api/v3 route. */
  private api(handler: (req: FakeRequest, user: FakeUser) => FakeReply | Promise<FakeReply>): FakeHandler {
    return async (req) => {
      const { headers, over } = this.countRequest();
      if (over)
        return { status: 429, headers, body: { message: 'Rate Limit Exceeded', errors: [{ resource: 'Application', field: 'rate limit', code: 'exceeded' }] } };
      const auth = this.bearer(req);
      if ('reply' in auth) return { ...fault(401, 'Authorization Error', 'Athlete', 'access_token', 'invalid'), headers };
      const reply = await handler(req, auth.user);
      return { ...reply, headers: { ...headers, ...reply.headers } };
    };
  }

  // ---- OAuth ------------------------------------------------------------------------------------------------

  private token(req: FakeRequest): FakeReply {
    const client = this.tokenClient(req, 'body');
    if (!client) return fault(401, 'Authorization Error', 'Application', 'client_id', 'invalid');
    const f = req.form;
    if (f.grant_type === 'authorization_code') {
      const redeemed = this.redeemCode(f, client);
      if ('error' in redeemed) return fault(400, 'Bad Request', 'AuthorizationCode', 'code', 'invalid');
      const { grant } = redeemed;
      const { access, refresh } = this.issueTokens(grant.userId, { accessTtlSeconds: ACCESS_TTL_S, scope: grant.scope });
      grant.issued.push(access.token, refresh!.token);
      this.refreshScopes.set(refresh!.token, grant.scope);
      return {
        body: {
          token_type: 'Bearer',
          expires_at: Math.floor(access.expiresAt / 1000),
          expires_in: ACCESS_TTL_S,
          refresh_token: refresh!.token,
          access_token: access.token,
          athlete: summaryAthlete(this.user(grant.userId)),
        },
      };
    }
    if (f.grant_type === 'refresh_token') {
      const rt = this.refreshTokens.get(f.refresh_token ?? '');
      const now = Date.now();
      if (!rt || rt.revoked || rt.validUntil < now || this.users.get(rt.userId)?.revoked)
        return fault(400, 'Bad Request', 'RefreshToken', 'refresh_token', 'invalid');
      const latest = [...this.accessTokens.values()].filter((t) => t.userId === rt.userId && !t.revoked).sort((a, b) => b.expiresAt - a.expiresAt)[0];
      if (latest && latest.expiresAt - now > 3600_000 && !this.alwaysRotate) {
        // "If the application has an access token for the user that expires in more than one hour, the existing access token will be returned."
        return {
          body: {
            token_type: 'Bearer',
            access_token: latest.token,
            expires_at: Math.floor(latest.expiresAt / 1000),
            expires_in: Math.floor((latest.expiresAt - now) / 1000),
            refresh_token: rt.token,
          },
        };
      }
      const scope = this.refreshScopes.get(rt.token) ?? '';
      const { access, refresh } = this.issueTokens(rt.userId, { accessTtlSeconds: ACCESS_TTL_S, scope });
      this.refreshScopes.set(refresh!.token, scope);
      rt.revoked = true; // "Once a new refresh token is returned, the older refresh token is invalidated immediately."
      rt.validUntil = now;
      return {
        body: {
          token_type: 'Bearer',
          access_token: access.token,
          expires_at: Math.floor(access.expiresAt / 1000),
          expires_in: ACCESS_TTL_S,
          refresh_token: refresh!.token,
        },
      };
    }
    return fault(400, 'Bad Request', 'Application', 'grant_type', 'invalid');
  }

  /** Legacy deauthorization: `access_token` as a parameter or the bearer header; invalidates all the athlete's tokens. */
  private deauthorize(req: FakeRequest): FakeReply {
    const token = req.query.access_token ?? req.form.access_token ?? /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const access = token ? this.accessTokens.get(token) : undefined;
    if (!access || access.revoked || access.expiresAt < Date.now()) return fault(401, 'Authorization Error', 'Athlete', 'access_token', 'invalid');
    this.revokeUser(access.userId);
    return { body: { access_token: access.token } };
  }

  /** RFC 7009 revocation: `token` (access or refresh) with client authentication; 200 whatever the token (§2.2). */
  private revoke(req: FakeRequest): FakeReply {
    const hasBasic = /^Basic /.test(req.headers.authorization ?? '');
    if ((hasBasic || req.form.client_id) && !this.tokenClient(req, hasBasic ? 'basic' : 'body')) return { status: 401, body: { error: 'invalid_client' } };
    const token = req.form.token ?? '';
    const userId = this.accessTokens.get(token)?.userId ?? this.refreshTokens.get(token)?.userId;
    if (userId) this.revokeUser(userId);
    return { body: {} };
  }

  /** Every token of a user, for tests: whether each still works. */
  tokenState(userId: string): { access: { token: string; expiresAt: number; valid: boolean }[]; refresh: { token: string; valid: boolean }[] } {
    const now = Date.now();
    return {
      access: [...this.accessTokens.values()]
        .filter((t) => t.userId === userId)
        .map((t) => ({ token: t.token, expiresAt: t.expiresAt, valid: !t.revoked && t.expiresAt > now })),
      refresh: [...this.refreshTokens.values()].filter((t) => t.userId === userId).map((t) => ({ token: t.token, valid: !t.revoked && t.validUntil > now })),
    };
  }

  // ---- Data endpoints -----------------------------------------------------------------------------------------

  private athlete(req: FakeRequest, user: FakeUser): FakeReply {
    this.servedOf(user.id).athlete++;
    const detailed = scopesOf(this.accessTokens.get(bearerToken(req))?.scope).includes('profile:read_all');
    return { body: detailed ? detailedAthlete(user) : summaryAthlete(user) };
  }

  private canReadActivities(req: FakeRequest): boolean {
    const scopes = scopesOf(this.accessTokens.get(bearerToken(req))?.scope);
    return scopes.includes('activity:read') || scopes.includes('activity:read_all');
  }

  private listActivities(req: FakeRequest, user: FakeUser): FakeReply {
    if (!this.canReadActivities(req)) return fault(401, 'Authorization Error', 'AccessToken', 'activity:read_permission', 'missing');
    const q = req.query;
    for (const name of ['before', 'after', 'page', 'per_page']) {
      if (q[name] !== undefined && !/^\d+$/.test(q[name])) return fault(400, 'Bad Request', 'Application', name, 'invalid');
    }
    const page = Math.max(1, Number(q.page ?? 1));
    const perPage = Math.min(200, Math.max(1, Number(q.per_page ?? 30)));
    const after = q.after !== undefined ? Number(q.after) : null;
    const all = this.activitiesOf(user.id, after, q.before !== undefined ? Number(q.before) : null);
    if (after === null) all.reverse(); // newest first unless `after` is given
    const slice = all.slice((page - 1) * perPage, page * perPage);
    const served = this.servedOf(user.id);
    for (const a of slice) served.listed.add(a.id);
    return { body: slice.map((a) => summaryOf(a.detail)) };
  }

  private getActivity(req: FakeRequest, user: FakeUser): FakeReply {
    if (!this.canReadActivities(req)) return fault(401, 'Authorization Error', 'AccessToken', 'activity:read_permission', 'missing');
    const a = /^\d+$/.test(req.query.id) ? this.activity(user.id, Number(req.query.id)) : undefined;
    if (!a) return fault(404, 'Record Not Found', 'Activity', 'id', 'invalid');
    this.servedOf(user.id).details.add(a.id);
    return { body: a.detail };
  }

  private getStreams(req: FakeRequest, user: FakeUser): FakeReply {
    if (!this.canReadActivities(req)) return fault(401, 'Authorization Error', 'AccessToken', 'activity:read_permission', 'missing');
    const keys = (req.query.keys ?? '').split(',').filter((k) => STREAM_TYPES.includes(k));
    if (!keys.length) return fault(400, 'Bad Request', 'Stream', 'keys', 'invalid');
    const a = /^\d+$/.test(req.query.id) ? this.activity(user.id, Number(req.query.id)) : undefined;
    if (!a?.streams) return fault(404, 'Record Not Found', 'Activity', 'id', 'invalid'); // assumption: a manual activity has no stream set
    const s = a.streams as unknown as Record<string, unknown[] | undefined>;
    const types = [...new Set([...keys, 'distance'])].filter((k) => s[k]); // the distance series always comes along
    const entry = (type: string) => ({ data: s[type], series_type: 'distance', original_size: a.streams!.time.length, resolution: 'high' });
    this.servedOf(user.id).streams.set(a.id, { points: a.streams.time.length, heartrate: (a.streams.heartrate ?? []).filter((v) => v !== null).length });
    if (req.query.key_by_type === 'true') return { body: Object.fromEntries(types.map((t) => [t, entry(t)])) };
    return { body: types.map((t) => ({ type: t, ...entry(t) })) };
  }

  // ---- Webhooks -------------------------------------------------------------------------------------------------

  private appClient(req: FakeRequest): boolean {
    const id = req.form.client_id ?? req.query.client_id,
      secret = req.form.client_secret ?? req.query.client_secret;
    return id === this.options.clientId && secret === this.options.clientSecret;
  }

  private async createSubscription(req: FakeRequest): Promise<FakeReply> {
    if (!this.appClient(req)) return fault(401, 'Authorization Error', 'Application', 'client_id', 'invalid');
    const { callback_url: callbackUrl, verify_token: verifyToken } = req.form;
    if (!callbackUrl || callbackUrl.length > 255) return fault(400, 'Bad Request', 'PushSubscription', 'callback_url', 'invalid');
    if (!verifyToken) return fault(400, 'Bad Request', 'PushSubscription', 'verify_token', 'invalid');
    if (this.subscription) return fault(400, 'Bad Request', 'PushSubscription', 'callback_url', 'already exists');
    const challenge = randomBytes(16).toString('hex');
    const url = new URL(callbackUrl);
    url.searchParams.set('hub.verify_token', verifyToken);
    url.searchParams.set('hub.challenge', challenge);
    url.searchParams.set('hub.mode', 'subscribe');
    let echoed: unknown;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) }); // "You will only have two seconds to echo the hub.challenge"
      if (res.status !== 200) return fault(400, 'Bad Request', 'PushSubscription', 'callback url', 'GET to callback URL does not return 200');
      echoed = ((await res.json()) as Record<string, unknown>)['hub.challenge'];
    } catch {
      return fault(400, 'Bad Request', 'PushSubscription', 'callback url', 'not verifiable');
    }
    if (echoed !== challenge) return fault(400, 'Bad Request', 'PushSubscription', 'callback url', 'not verifiable');
    this.subscription = { id: this.nextSubscriptionId++, callbackUrl, verifyToken, createdAt: new Date().toISOString() };
    return { body: { id: this.subscription.id } };
  }

  private listSubscriptions(req: FakeRequest): FakeReply {
    if (!this.appClient(req)) return fault(401, 'Authorization Error', 'Application', 'client_id', 'invalid');
    const s = this.subscription;
    return {
      body: s
        ? [
            {
              id: s.id,
              resource_state: 2,
              application_id: Number(this.options.clientId),
              callback_url: s.callbackUrl,
              created_at: s.createdAt,
              updated_at: s.createdAt,
            },
          ]
        : [],
    };
  }

  private deleteSubscription(req: FakeRequest): FakeReply {
    if (!this.appClient(req)) return fault(401, 'Authorization Error', 'Application', 'client_id', 'invalid');
    if (!this.subscription || String(this.subscription.id) !== req.query.id) return fault(404, 'Resource Not Found', 'PushSubscription', 'id', 'not found');
    this.subscription = null;
    return { status: 204 };
  }

  /** An event as Strava posts it; subscription_id defaults to the current subscription, event_time to now. */
  event(e: Pick<StravaEvent, 'object_type' | 'object_id' | 'aspect_type' | 'owner_id'> & Partial<StravaEvent>): StravaEvent {
    return { updates: {}, subscription_id: this.subscription?.id ?? 0, event_time: Math.floor(Date.now() / 1000), ...e };
  }

  /** POSTs an event to `url` exactly as Strava does: unsigned JSON. Answers the receiver's status. */
  sendPush(url: string, event: StravaEvent | Record<string, unknown>): Promise<{ status: number; text: string }> {
    return this.push(url, JSON.stringify(event), { 'content-type': 'application/json' });
  }

  /** Sends an event to the subscription's callback. */
  notify(event: StravaEvent): Promise<{ status: number; text: string }> {
    if (!this.subscription) throw new Error('fake strava has no push subscription');
    return this.sendPush(this.subscription.callbackUrl, event);
  }

  /** The athlete removes the app in Strava's settings: all tokens die and (when subscribed) the deauthorization event is pushed. */
  async deauthorizeFromSettings(userId: string): Promise<{ status: number; text: string } | null> {
    this.revokeUser(userId);
    if (!this.subscription) return null;
    const id = Number(userId);
    return this.notify(this.event({ object_type: 'athlete', object_id: id, aspect_type: 'update', owner_id: id, updates: { authorized: 'false' } }));
  }
}

export async function startFakeStrava(
  opts: { port?: number; clientId?: string; clientSecret?: string; rateLimits?: { overall?: Pair; read?: Pair } } = {},
): Promise<FakeStrava> {
  const fake = new FakeStrava({
    port: opts.port,
    clientId: opts.clientId ?? FAKE_STRAVA_CLIENT.clientId,
    clientSecret: opts.clientSecret ?? FAKE_STRAVA_CLIENT.clientSecret,
  });
  if (opts.rateLimits) fake.setRateLimits(opts.rateLimits);
  return fake.start();
}

// ---- Athlete JSON (swagger GET /athlete example) ------------------------------------------------------------------

const bearerToken = (req: FakeRequest) => /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
const scopesOf = (scope: string | undefined) => (scope ?? '').split(/[ ,]/).filter(Boolean);
const userTag = (user: FakeUser) => createHash('sha256').update(user.id).digest().readUInt16BE(0) % 10_000;
const HOMES: [number, number][] = [
  [37.8346, -122.252],
  [51.5072, -0.1276],
  [52.52, 13.405],
  [40.7128, -74.006],
  [48.8566, 2.3522],
];
const ZONE_NAMES: Record<number, string> = {
  0: 'Europe/London',
  3600: 'Europe/Berlin',
  7200: 'Europe/Athens',
  [-18000]: 'America/New_York',
  [-28800]: 'America/Los_Angeles',
  [-25200]: 'America/Denver',
  32400: 'Asia/Tokyo',
};

function summaryAthlete(u: FakeUser): Record<string, unknown> {
  return {
    id: Number(u.id),
    username: `athlete${u.id}`,
    resource_state: 2,
    firstname: u.firstname,
    lastname: u.lastname,
    bio: null,
    city: 'San Francisco',
    state: 'CA',
    country: 'US',
    sex: u.sex,
    premium: true,
    summit: true,
    created_at: u.createdAt,
    updated_at: u.updatedAt,
    badge_type_id: 1,
    weight: u.weight,
    profile_medium: 'https://dgalywyr863hv.cloudfront.net/pictures/athletes/medium.jpg',
    profile: 'https://dgalywyr863hv.cloudfront.net/pictures/athletes/large.jpg',
    friend: null,
    follower: null,
  };
}
function detailedAthlete(u: FakeUser): Record<string, unknown> {
  return {
    ...summaryAthlete(u),
    resource_state: 3,
    follower_count: 5,
    friend_count: 5,
    mutual_friend_count: 0,
    athlete_type: 1,
    date_preference: '%m/%d/%Y',
    measurement_preference: 'meters',
    clubs: [],
    ftp: null,
    bikes: [],
    shoes: [],
  };
}

// ---- Activities (swagger DetailedActivity / SummaryActivity examples) ----------------------------------------------

interface Profile {
  sportType: string;
  type: string;
  speed: Pair | null;
  minutes: Pair;
  cadence: number | null;
  hr: number;
  gps: boolean;
  power: 'meter' | 'estimated' | null;
  met: number;
  device: string;
  trainer?: boolean;
}
const PROFILES: [number, Profile][] = [
  [
    34,
    {
      sportType: 'Run',
      type: 'Run',
      speed: [2.6, 3.6],
      minutes: [25, 70],
      cadence: 84,
      hr: 0.78,
      gps: true,
      power: null,
      met: 9.8,
      device: 'Garmin Forerunner 265',
    },
  ],
  [
    20,
    {
      sportType: 'Ride',
      type: 'Ride',
      speed: [6, 8.5],
      minutes: [45, 140],
      cadence: 88,
      hr: 0.68,
      gps: true,
      power: 'meter',
      met: 7.5,
      device: 'Garmin Edge 840',
    },
  ],
  [
    12,
    {
      sportType: 'Walk',
      type: 'Walk',
      speed: [1.2, 1.6],
      minutes: [20, 60],
      cadence: 56,
      hr: 0.45,
      gps: true,
      power: null,
      met: 3.8,
      device: 'Strava iPhone App',
    },
  ],
  [
    6,
    {
      sportType: 'TrailRun',
      type: 'Run',
      speed: [2.0, 3.0],
      minutes: [40, 100],
      cadence: 82,
      hr: 0.8,
      gps: true,
      power: null,
      met: 10,
      device: 'Garmin fenix 7',
    },
  ],
  [
    8,
    {
      sportType: 'VirtualRide',
      type: 'VirtualRide',
      speed: [7, 9.5],
      minutes: [30, 75],
      cadence: 90,
      hr: 0.72,
      gps: false,
      power: 'meter',
      met: 8,
      device: 'Zwift',
      trainer: true,
    },
  ],
  [
    6,
    { sportType: 'Hike', type: 'Hike', speed: [0.9, 1.4], minutes: [60, 180], cadence: 50, hr: 0.55, gps: true, power: null, met: 6, device: 'Garmin fenix 7' },
  ],
  [
    8,
    {
      sportType: 'WeightTraining',
      type: 'WeightTraining',
      speed: null,
      minutes: [30, 60],
      cadence: null,
      hr: 0.55,
      gps: false,
      power: null,
      met: 5,
      device: 'Apple Watch Ultra',
    },
  ],
  [
    6,
    {
      sportType: 'MountainBikeRide',
      type: 'Ride',
      speed: [3.5, 5.5],
      minutes: [45, 120],
      cadence: 78,
      hr: 0.75,
      gps: true,
      power: 'estimated',
      met: 8.5,
      device: 'Garmin Edge 840',
    },
  ],
];
function pickProfile(r: () => number): Profile {
  let x = r() * PROFILES.reduce((s, [w]) => s + w, 0);
  for (const [w, p] of PROFILES) if ((x -= w) < 0) return p;
  return PROFILES[0][1];
}

const uniform = (r: () => number, [lo, hi]: Pair) => lo + (hi - lo) * r();
/** Zero-mean, unit-variance noise from one uniform: cheap enough for every stream point (jest's sandbox makes each draw dear). */
const noise1 = (r: () => number) => (r() - 0.5) * 3.4641;
const isoSeconds = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;

/** "(GMT-08:00) America/Los_Angeles": the zone's standard offset, as Strava writes it. */
function zoneLabel(offsetSeconds: number, name: string): string {
  const abs = Math.abs(offsetSeconds),
    pad = (n: number) => String(n).padStart(2, '0');
  return `(GMT${offsetSeconds < 0 ? '-' : '+'}${pad(Math.floor(abs / 3600))}:${pad(Math.floor((abs % 3600) / 60))}) ${name}`;
}

/** Google's encoded polyline (Strava's `map.polyline` / `summary_polyline`). */
function encodePolyline(points: [number, number][]): string {
  let out = '',
    lastLat = 0,
    lastLng = 0;
  const enc = (v: number) => {
    let x = v < 0 ? ~(v << 1) : v << 1,
      s = '';
    while (x >= 0x20) {
      s += String.fromCharCode((0x20 | (x & 0x1f)) + 63);
      x >>= 5;
    }
    return s + String.fromCharCode(x + 63);
  };
  for (const [lat, lng] of points) {
    const la = Math.round(lat * 1e5),
      ln = Math.round(lng * 1e5);
    out += enc(la - lastLat) + enc(ln - lastLng);
    [lastLat, lastLng] = [la, ln];
  }
  return out;
}

/** Streams sampled every 2–5 s (Garmin-style "smart recording"), with an optional pause (elapsed > moving). */
function buildStreams(user: FakeUser, p: Profile, r: () => number, heartrate?: boolean): { streams: StravaStreams; movingS: number; watts: number | null } {
  const durationS = Math.round(uniform(r, p.minutes) * 60);
  const pause = p.gps && r() < 0.5 ? { at: Math.round(durationS * uniform(r, [0.4, 0.6])), len: Math.round(uniform(r, [60, 240])) } : null;
  const base = p.speed ? uniform(r, p.speed) : 0,
    watts = p.power ? Math.round(uniform(r, [150, 260])) : null;
  const rest = user.restingHr as number,
    max = user.maxHr as number,
    target = rest + (max - rest) * p.hr;
  const seededHr = p.sportType === 'WeightTraining' || r() < 0.9;
  const hasHr = heartrate ?? seededHr;
  const home = user.home as Pair,
    radius = Math.max(1, (base * durationS) / (2 * Math.PI)),
    altBase = uniform(r, [15, 400]);
  const s: StravaStreams = { time: [], distance: [], velocity_smooth: [] };
  if (p.gps) s.latlng = [];
  if (p.speed) s.altitude = [];
  if (hasHr) s.heartrate = [];
  if (p.cadence) s.cadence = [];
  if (p.power === 'meter') s.watts = [];
  let t = 0,
    prev = 0,
    dist = 0,
    drift = 0,
    bpm = rest + 20,
    noise = 0;
  while (t <= durationS) {
    const dt = t - prev;
    drift = 0.97 * drift + 0.02 * noise1(r);
    const v = p.speed ? Math.max(0.3, base * (1 + drift) * Math.min(1, (t + 30) / 120)) : 0;
    dist += v * dt;
    noise = 0.9 * noise + 0.8 * noise1(r);
    bpm += (target + t * 0.002 - bpm) * 0.04;
    s.time.push(pause && t >= pause.at ? t + pause.len : t);
    s.distance.push(round(dist, 1));
    s.velocity_smooth!.push(round(v, 2));
    const angle = dist / radius,
      lat = home[0] + (radius * Math.sin(angle)) / 111_320;
    s.latlng?.push([round(lat, 6), round(home[1] + (radius * (1 - Math.cos(angle))) / (111_320 * Math.cos((lat * Math.PI) / 180)), 6)]);
    s.altitude?.push(round(altBase + 15 * Math.sin((2 * Math.PI * dist) / 3000) + 4 * Math.sin(dist / 400), 1));
    s.heartrate?.push(Math.round(Math.min(max, Math.max(60, bpm + noise))));
    s.cadence?.push(Math.round(p.cadence! + 3 * noise1(r)));
    s.watts?.push(Math.max(0, Math.round(watts! * (v / base) ** 2 * (1 + 0.08 * noise1(r)))));
    prev = t;
    t += 2 + Math.floor(r() * 4);
  }
  if (!p.speed) delete s.velocity_smooth;
  return { streams: s, movingS: prev, watts };
}

function buildActivity(
  user: FakeUser,
  id: number,
  startMs: number,
  p: Profile,
  r: () => number,
  opts: { utcOffset?: number; timezone?: string; manual?: boolean; heartrate?: boolean },
): FakeActivity {
  const { streams, movingS, watts } = buildStreams(user, p, r, opts.heartrate);
  const elapsed = streams.time[streams.time.length - 1];
  const offset = opts.utcOffset ?? user.zoneOffsetSeconds;
  const distance = streams.distance[streams.distance.length - 1];
  const alt = streams.altitude ?? [];
  const hr = streams.heartrate ?? [];
  const w = (streams.watts ?? []).filter((x): x is number => x !== null);
  const averageWatts = w.length ? round(mean(w), 1) : watts !== null ? watts * 0.9 : null; // "estimated": Strava's own power figure
  const kilojoules = averageWatts !== null ? round((averageWatts * movingS) / 1000, 1) : null;
  const weight = (user.weight as number) || 70;
  const calories = kilojoules !== null ? round(kilojoules * 1.05, 1) : round((p.met * weight * movingS) / 3600, 1);
  const latlng = streams.latlng ?? [];
  const hour = new Date(startMs + offset * 1000).getUTCHours();
  const detail: Record<string, unknown> = {
    id,
    resource_state: 3,
    external_id: `garmin_ping_${id}`,
    upload_id: id + 1_000_000_000,
    upload_id_str: String(id + 1_000_000_000),
    athlete: { id: Number(user.id), resource_state: 1 },
    name: `${hour < 12 ? 'Morning' : hour < 17 ? 'Afternoon' : 'Evening'} ${p.type === 'WeightTraining' ? 'Weight Training' : p.sportType.replace(/([a-z])([A-Z])/g, '$1 $2')}`,
    distance: round(distance, 1),
    moving_time: movingS,
    elapsed_time: elapsed,
    total_elevation_gain: round(
      alt.slice(1).reduce((sum, a, i) => sum + Math.max(0, a - alt[i]), 0),
      1,
    ),
    type: p.type,
    sport_type: p.sportType,
    workout_type: null,
    start_date: isoSeconds(startMs),
    start_date_local: isoSeconds(startMs + offset * 1000),
    timezone: opts.timezone ?? zoneLabel(user.standardOffsetSeconds as number, user.timezoneName as string),
    utc_offset: offset,
    start_latlng: latlng[0] ?? [],
    end_latlng: latlng[latlng.length - 1] ?? [],
    location_city: null,
    location_state: null,
    location_country: 'United States',
    achievement_count: 0,
    kudos_count: Math.floor(r() * 12),
    comment_count: 0,
    athlete_count: 1,
    photo_count: 0,
    map: { id: `a${id}`, polyline: encodePolyline(latlng), summary_polyline: encodePolyline(latlng.filter((_, i) => i % 10 === 0)), resource_state: 3 },
    trainer: Boolean(p.trainer),
    commute: false,
    manual: Boolean(opts.manual),
    private: false,
    visibility: 'everyone',
    flagged: false,
    gear_id: null,
    from_accepted_tag: false,
    average_speed: p.speed ? round(distance / movingS, 3) : 0,
    max_speed: round(Math.max(0, ...(streams.velocity_smooth ?? [0])), 1),
    ...(streams.cadence ? { average_cadence: round(mean(streams.cadence), 1) } : {}),
    ...(averageWatts !== null ? { average_watts: averageWatts, kilojoules, device_watts: p.power === 'meter' } : {}),
    ...(w.length ? { weighted_average_watts: Math.round(mean(w.map((x) => x ** 4)) ** 0.25), max_watts: Math.max(...w) } : {}),
    has_heartrate: hr.length > 0,
    ...(hr.length ? { average_heartrate: round(mean(hr), 1), max_heartrate: Math.max(...hr) } : {}),
    heartrate_opt_out: false,
    display_hide_heartrate_option: hr.length > 0,
    ...(alt.length ? { elev_high: Math.max(...alt), elev_low: Math.min(...alt) } : {}),
    pr_count: 0,
    total_photo_count: 0,
    has_kudoed: false,
    suffer_score: hr.length ? Math.round(elapsed / 60) : null,
    description: '',
    calories,
    perceived_exertion: null,
    prefer_perceived_exertion: null,
    segment_efforts: [],
    splits_metric: [],
    splits_standard: [],
    laps: [],
    best_efforts: [],
    gear: null,
    partner_brand_tag: null,
    photos: { primary: null, count: 0 },
    highlighted_kudosers: [],
    hide_from_home: false,
    device_name: opts.manual ? null : p.device,
    embed_token: createHash('sha1').update(String(id)).digest('hex'),
    segment_leaderboard_opt_out: false,
    leaderboard_opt_out: false,
  };
  if (opts.manual)
    for (const k of [
      'average_heartrate',
      'max_heartrate',
      'average_cadence',
      'elev_high',
      'elev_low',
      'average_watts',
      'kilojoules',
      'device_watts',
      'weighted_average_watts',
      'max_watts',
    ])
      delete detail[k];
  return { id, userId: user.id, startMs, endMs: startMs + elapsed * 1000, detail, streams: opts.manual ? null : streams };
}

/** DetailedActivity → SummaryActivity: resource_state 2, no detail-only fields, the map's summary polyline only. */
const DETAIL_ONLY = [
  'description',
  'calories',
  'perceived_exertion',
  'prefer_perceived_exertion',
  'segment_efforts',
  'splits_metric',
  'splits_standard',
  'laps',
  'best_efforts',
  'gear',
  'partner_brand_tag',
  'photos',
  'highlighted_kudosers',
  'embed_token',
  'segment_leaderboard_opt_out',
  'leaderboard_opt_out',
];
function summaryOf(detail: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...detail, resource_state: 2 };
  for (const k of DETAIL_ONLY) delete out[k];
  const map = detail.map as { id: string; summary_polyline: string };
  out.map = { id: map.id, summary_polyline: map.summary_polyline, resource_state: 2 };
  return out;
}
