import { createHash, createHmac, randomUUID } from 'node:crypto';
import type {
  PolarActivity,
  PolarActivityDaySamples,
  PolarContinuousHeartRateDay,
  PolarExercise,
  PolarExerciseSample,
  PolarNightlyRecharge,
  PolarPhysicalInformation,
  PolarSleep,
  PolarSpo2TestResult,
  PolarUser,
  PolarWebhookEvent,
} from '../../../lib/wearables/providers/polar/api-types';
import { FakeProvider, round, seededRandom, type FakeReply, type FakeRequest, type FakeUser } from './fake-provider';

/**
 * A loopback fake of Polar AccessLink v3 (docs copied at newpush/coach docs/apis/polar.md; official spec
 * tryAGI/Polar src/libs/Polar/openapi.yaml), on one port for all three Polar hosts:
 * - flow.polar.com `GET|POST /oauth2/authorization` (the base consent page);
 * - polarremote.com `POST /v2/oauth2/token`: HTTP Basic client auth only, authorization_code only (no refresh token),
 *   `{access_token, token_type: "bearer", expires_in: 31535999, x_user_id}`; a code is single-use for 10 minutes and
 *   reusing one deletes ALL tokens issued to that user ("the request will be denied and ALL issued tokens will be
 *   deleted");
 * - www.polaraccesslink.com `/v3/...`: users (register → 200 / 409, get, deregister → revokes the token), exercises
 *   (last 30 days, `samples`/`zones`/`route` flags), daily activity (≤ 28-day ranges, `from` ≤ 365 days old),
 *   activity samples, continuous heart rate (≤ 28-day ranges), sleep and Nightly Recharge (last 28 days, or by date),
 *   SpO2 (≤ 28-day ranges), physical information transactions, and the client-level webhook API (Basic auth; PINGs
 *   the URL on create/update/activate and refuses when the PING is not answered 200; the signing key is shown once).
 * Every API answer carries `RateLimit-Usage/-Limit/-Reset` ("short, long"), and the fake enforces the limits
 * (500 + 20×registered users per 15 min, 5000 + 100×users per 24 h; `rateLimits` overrides them) with a 429.
 *
 * Data is generated per user and local day from `user.seed` (the same day looks the same whatever range asks for it)
 * in the user's `zoneOffsetSeconds`, and is served once "uploaded" (sleep ~15 min after waking, a day's activity and
 * heart rate an hour after it ends, an exercise 5 min after it ends). Polar serves only data uploaded after the user
 * registered with the client ("only exercises that have been uploaded to Flow after the user is registered with your
 * client will be returned", AccessLink docs), and so does the fake: a new connection finds no history. A test that
 * exercises the pull over a history opts into `preRegistrationHistory`, which Polar never does.
 */
export const FAKE_POLAR_CLIENT = { clientId: 'fake-polar-client-id', clientSecret: 'fake-polar-client-secret' };

export interface FakePolarOptions {
  port?: number;
  clientId?: string;
  clientSecret?: string;
  /** Serve data uploaded before a user's registration too (see FakePolar.preRegistrationHistory). */
  preRegistrationHistory?: boolean;
}

export interface PolarFakeUser extends FakeUser {
  /** Registered with the client (POST /v3/users), with this member-id, at this instant. */
  registered?: boolean;
  memberId?: string;
  registeredAt?: number;
}

/** What `sendPush` sends: the event and what it names (user id, exercise id or date). */
export type PolarPushSpec =
  | { event: 'PING' }
  | { event: 'EXERCISE'; userId: string; entityId: string }
  | { event: 'SLEEP' | 'CONTINUOUS_HEART_RATE' | 'ACTIVITY_SUMMARY'; userId: string; date: string }
  | { event: 'SLEEP_WISE_CIRCADIAN_BEDTIME' | 'SLEEP_WISE_ALERTNESS'; userId: string; from: string; to: string };

export interface FakePolarWebhook {
  id: string;
  events: PolarWebhookEvent[];
  url: string;
  secret: string;
  active: boolean;
}

const API = 'https://www.polaraccesslink.com';
/**
 * Each answer closes its connection. Client and fake share one process: a test that keeps the event loop busy for
 * longer than the server's keep-alive timeout (5 s) lets both idle timers expire unseen, and the next request goes
 * out on a pooled socket the server closes as soon as its timer runs ("fetch failed").
 */
const NO_KEEP_ALIVE = { Connection: 'close' };
const TOKEN_TTL_SECONDS = 31_535_999;
const DAY = 86_400_000;
const MIN = 60_000;
const SHORT_WINDOW_MS = 15 * MIN;
const LONG_WINDOW_MS = DAY;
/** Sleep heart rate above the deep-sleep level, per Polar hypnogram code. */
const STAGE_HR_BUMP: Record<number, number> = { 0: 12, 1: 8, 2: 4, 3: 3, 4: 0, 5: 4 };
const WEBHOOK_EVENTS: PolarWebhookEvent[] = [
  'EXERCISE',
  'SLEEP',
  'CONTINUOUS_HEART_RATE',
  'SLEEP_WISE_CIRCADIAN_BEDTIME',
  'SLEEP_WISE_ALERTNESS',
  'ACTIVITY_SUMMARY',
];

// ---- Own date helpers (independent of the module's, so a bug there cannot hide behind the same bug here) ----------
const dayWall = (date: string) => Date.parse(`${date}T00:00:00Z`);
const dateOf = (wall: number) => new Date(wall).toISOString().slice(0, 10);
const plusDays = (date: string, n: number) => dateOf(dayWall(date) + n * DAY);
const wallText = (wall: number, seconds = true) => new Date(wall).toISOString().slice(0, seconds ? 19 : 16);
const hhmm = (wall: number) => new Date(wall).toISOString().slice(11, 16);
const hhmmss = (wall: number) => new Date(wall).toISOString().slice(11, 19);
const two = (n: number) => String(n).padStart(2, '0');
const offsetText = (tz: number) => `${tz < 0 ? '-' : '+'}${two(Math.floor(Math.abs(tz) / 3600))}:${two(Math.floor((Math.abs(tz) % 3600) / 60))}`;
const isoDur = (seconds: number) => {
  const s = Math.round(seconds),
    h = Math.floor(s / 3600),
    m = Math.floor((s % 3600) / 60),
    r = s % 60;
  return `PT${h ? `${h}H` : ''}${m ? `${m}M` : ''}${r || (!h && !m) ? `${r}S` : ''}`;
};
const isDate = (s: string | undefined): s is string => !!s && /^\d{4}-\d{2}-\d{2}$/.test(s) && !Number.isNaN(dayWall(s)) && dateOf(dayWall(s)) === s;
const datesFrom = (from: string, to: string) => {
  const out: string[] = [];
  for (let d = from; d <= to; d = plusDays(d, 1)) out.push(d);
  return out;
};
const uniform = (r: () => number, lo: number, hi: number) => lo + r() * (hi - lo);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Polar's error body (schema `error`). */
function polarError(status: number, errorType: string, message: string): FakeReply {
  return { status, body: { timestamp: new Date().toISOString(), status, errorType, message, corrId: randomUUID() } };
}

interface GeneratedSleep {
  night: PolarSleep;
  startWall: number;
  endWall: number;
  /** Seconds per Polar hypnogram code, computed from the stage change points. */
  stageSeconds: Record<number, number>;
  uploadMs: number;
}

interface GeneratedExercise {
  exercise: PolarExercise;
  samples: PolarExerciseSample[];
  startWall: number;
  endWall: number;
  uploadMs: number;
}

interface PhysicalEntry {
  info: PolarPhysicalInformation;
  userId: string;
  committed: boolean;
}

export class FakePolar extends FakeProvider {
  /**
   * Also serve what was "uploaded" before the user's registration, which AccessLink never does: only for tests that
   * exercise the pull over a history (default off, as Polar).
   */
  preRegistrationHistory: boolean;
  /** Override the dynamic limits (per 15 min / per 24 h). */
  rateLimits: { short?: number; long?: number } = {};
  /** The client's one webhook. */
  webhook: FakePolarWebhook | null = null;
  /** The fake's clock (a time-skipping test may replace it). */
  now: () => number = () => Date.now();
  /** Every PING the fake sent: url and the status it got (0: unreachable). */
  readonly pings: { url: string; status: number }[] = [];

  private nextUserId = 10_579_000;
  private nextPhysicalId = 5_000;
  private nextTransactionId = 170_000;
  private readonly served = new Map<string, Record<string, number>>();
  private readonly sleepRevisions = new Map<string, Partial<PolarSleep>>();
  private readonly addedExercises = new Map<string, PolarExercise[]>();
  private readonly physical: PhysicalEntry[] = [];
  private readonly transactions = new Map<number, { userId: string; entryIds: number[]; committed: boolean }>();
  private readonly usage = { shortStart: 0, short: 0, longStart: 0, long: 0 };

  constructor(opts: FakePolarOptions = {}) {
    super({
      slug: 'polar',
      name: 'Polar Flow',
      clientId: opts.clientId ?? FAKE_POLAR_CLIENT.clientId,
      clientSecret: opts.clientSecret ?? FAKE_POLAR_CLIENT.clientSecret,
      authorizePath: '/oauth2/authorization',
      port: opts.port,
    });
    this.preRegistrationHistory = opts.preRegistrationHistory ?? false;
    this.route('POST', '/v2/oauth2/token', (req) => this.token(req));

    // Users (user token).
    this.userApi('POST', '/v3/users', (req, user) => this.register(req, user), { registered: false });
    this.userApi('GET', '/v3/users/{userId}', (req, user) => this.getUser(req, user));
    this.userApi('DELETE', '/v3/users/{userId}', (req, user) => this.deregister(req, user));

    // Exercises.
    this.userApi('GET', '/v3/exercises', (req, user) => this.listExercises(req, user));
    this.userApi('GET', '/v3/exercises/{exerciseId}', (req, user) => this.getExercise(req, user));

    // Daily activity (the documented range path has a trailing slash: both are served).
    for (const path of ['/v3/users/activities', '/v3/users/activities/']) this.userApi('GET', path, (req, user) => this.listActivities(req, user, false));
    this.userApi('GET', '/v3/users/activities/{date}', (req, user) => this.activityByDate(req, user, false));
    for (const path of ['/v3/users/activities/samples', '/v3/users/activities/samples/'])
      this.userApi('GET', path, (req, user) => this.listActivities(req, user, true));
    this.userApi('GET', '/v3/users/activities/samples/{date}', (req, user) => this.activityByDate(req, user, true));

    // Continuous heart rate.
    this.userApi('GET', '/v3/users/continuous-heart-rate', (req, user) => this.heartRateRange(req, user));
    this.userApi('GET', '/v3/users/continuous-heart-rate/{date}', (req, user) => this.heartRateDate(req, user));

    // Sleep and Nightly Recharge.
    this.userApi('GET', '/v3/users/sleep', (_req, user) => this.listSleep(user));
    this.userApi('GET', '/v3/users/sleep/available', (_req, user) => this.availableSleep(user));
    this.userApi('GET', '/v3/users/sleep/{date}', (req, user) => this.sleepByDate(req, user));
    this.userApi('GET', '/v3/users/nightly-recharge', (_req, user) => this.listRecharges(user));
    this.userApi('GET', '/v3/users/nightly-recharge/{date}', (req, user) => this.rechargeByDate(req, user));

    // Elixir biosensing: SpO2.
    this.userApi('GET', '/v3/users/biosensing/spo2', (req, user) => this.spo2(req, user));

    // Physical information transactions.
    const tx = '/v3/users/{userId}/physical-information-transactions';
    this.userApi('POST', tx, (req, user) => this.createTransaction(req, user));
    this.userApi('GET', `${tx}/{transactionId}`, (req, user) => this.listTransaction(req, user));
    this.userApi('PUT', `${tx}/{transactionId}`, (req, user) => this.commitTransaction(req, user));
    this.userApi('GET', `${tx}/{transactionId}/physical-informations/{physicalInfoId}`, (req, user) => this.getPhysicalInfo(req, user));

    // Webhooks (client credentials).
    this.clientApi('POST', '/v3/webhooks', (req) => this.createWebhook(req));
    this.clientApi('GET', '/v3/webhooks', () => this.getWebhook());
    this.clientApi('POST', '/v3/webhooks/activate', () => this.activateWebhook());
    this.clientApi('POST', '/v3/webhooks/deactivate', () => this.deactivateWebhook());
    this.clientApi('PATCH', '/v3/webhooks/{webhookId}', (req) => this.patchWebhook(req));
    this.clientApi('DELETE', '/v3/webhooks/{webhookId}', (req) => this.deleteWebhook(req));
  }

  // ---- Public helpers for tests --------------------------------------------------------------------------------

  /** Records and samples served per kind to a user: activity, steps_samples, zone_samples, sleep, hypnogram_entries,
   *  exercises, exercise_sample_series, heartrate, nightly_recharge, hrv_samples, breathing_samples, spo2, spo2_passed,
   *  physical_info, user. */
  servedCount(userId: string): Record<string, number> {
    return { ...(this.served.get(userId) ?? {}) };
  }

  /** Registers a user directly (as POST /v3/users would). */
  registerUser(userId: string, memberId = `member-${userId}`): PolarFakeUser {
    const user = this.polarUser(userId);
    user.registered = true;
    user.memberId = memberId;
    user.registeredAt = this.now();
    if (!this.physical.some((p) => p.userId === userId)) this.addPhysicalInfo(userId, {});
    return user;
  }

  /** A night's values revised (Polar re-sends the night, e.g. the second SLEEP delivery): merged over the generated ones. */
  reviseSleep(userId: string, date: string, patch: Partial<PolarSleep>): void {
    this.sleepRevisions.set(`${userId}:${date}`, { ...this.sleepRevisions.get(`${userId}:${date}`), ...patch });
  }

  /** An exercise served as it is, besides the generated ones (e.g. one with a chosen start_time and offset). */
  addExercise(userId: string, exercise: PolarExercise): void {
    this.addedExercises.set(userId, [...(this.addedExercises.get(userId) ?? []), exercise]);
  }

  /** A new physical-information entry (served by the next transaction until committed). */
  addPhysicalInfo(userId: string, info: Partial<PolarPhysicalInformation>): PolarPhysicalInformation {
    const p = this.person(this.polarUser(userId));
    const entry: PolarPhysicalInformation = {
      id: this.nextPhysicalId++,
      created: new Date(this.now()).toISOString(),
      'polar-user': `${API}/v3/users/${userId}`,
      weight: p.weight,
      height: p.height,
      'maximum-heart-rate': p.maxHr,
      'resting-heart-rate': p.restingHr,
      'aerobic-threshold': Math.round(p.maxHr * 0.7),
      'anaerobic-threshold': Math.round(p.maxHr * 0.87),
      'vo2-max': p.vo2max,
      'weight-source': 'SOURCE_MEASURED',
      ...info,
    };
    this.physical.push({ info: entry, userId, committed: false });
    return entry;
  }

  /** The next `times` requests (matching `path`) are answered 429 with Polar's headers; `longTerm`: the 24-h limit. */
  failRateLimited(opts: { path?: string | RegExp; times?: number; shortResetSeconds?: number; longResetSeconds?: number; longTerm?: boolean } = {}): void {
    const [shortLimit, longLimit] = this.limits();
    const short = opts.longTerm ? 10 : shortLimit + 1;
    const long = opts.longTerm ? longLimit + 1 : 50;
    this.fail({
      path: opts.path,
      times: opts.times ?? 1,
      status: 429,
      headers: {
        'RateLimit-Usage': `${short}, ${long}`,
        'RateLimit-Limit': `${shortLimit}, ${longLimit}`,
        'RateLimit-Reset': `${opts.shortResetSeconds ?? 600}, ${opts.longResetSeconds ?? 80_000}`,
      },
      body: { timestamp: new Date().toISOString(), status: 429, errorType: 'TOO_MANY_REQUESTS', message: 'Rate limit exceeded', corrId: randomUUID() },
    });
  }

  /** Active and revoked access tokens of a user (Polar issues no refresh tokens). */
  tokensOf(userId: string): { active: string[]; revoked: string[] } {
    const mine = [...this.accessTokens.values()].filter((t) => t.userId === userId);
    return {
      active: mine.filter((t) => !t.revoked && t.expiresAt > Date.now()).map((t) => t.token),
      revoked: mine.filter((t) => t.revoked).map((t) => t.token),
    };
  }

  /** The body and headers of a push, signed as Polar signs it (hex HMAC-SHA256 of the body with the webhook's key). */
  signedPush(spec: PolarPushSpec, opts: { secret?: string; timestamp?: string } = {}): { body: string; headers: Record<string, string> } {
    const timestamp = opts.timestamp ?? new Date(this.now()).toISOString().replace(/\.\d{3}Z$/, 'Z');
    let payload: Record<string, unknown>;
    switch (spec.event) {
      case 'PING':
        payload = { timestamp, event: 'PING' };
        break;
      case 'EXERCISE':
        payload = { event: spec.event, user_id: Number(spec.userId), entity_id: spec.entityId, timestamp, url: `${API}/v3/exercises/${spec.entityId}` };
        break;
      case 'SLEEP':
        payload = { event: spec.event, user_id: Number(spec.userId), date: spec.date, timestamp, url: `${API}/v3/users/sleep/${spec.date}` };
        break;
      case 'CONTINUOUS_HEART_RATE':
        payload = { event: spec.event, user_id: Number(spec.userId), date: spec.date, timestamp, url: `${API}/v3/users/continuous-heart-rate/${spec.date}` };
        break;
      case 'ACTIVITY_SUMMARY':
        payload = { event: spec.event, user_id: Number(spec.userId), date: spec.date, timestamp, url: `${API}/v3/users/activities/${spec.date}` };
        break;
      default: {
        const path = spec.event === 'SLEEP_WISE_ALERTNESS' ? 'alertness' : 'circadian_bedtime';
        payload = {
          event: spec.event,
          user_id: Number(spec.userId),
          from: spec.from,
          to: spec.to,
          timestamp,
          url: `${API}/v3/users/sleepwise/${path}/date?from=${spec.from}&to=${spec.to}`,
        };
      }
    }
    const secret = opts.secret ?? this.webhook?.secret;
    if (!secret) throw new Error('FakePolar.signedPush: no webhook has been created, and no secret was given');
    const body = JSON.stringify(payload);
    return {
      body,
      headers: { 'Content-Type': 'application/json', 'Polar-Webhook-Signature': FakeProvider.hmacHex(secret, body), 'Polar-Webhook-Event': spec.event },
    };
  }

  /** POSTs a signed push to `url` (default: the webhook's URL); answers the receiver's status. */
  async sendPush(url: string | null, spec: PolarPushSpec, opts: { secret?: string; timestamp?: string } = {}): Promise<{ status: number; text: string }> {
    const target = url ?? this.webhook?.url;
    if (!target) throw new Error('FakePolar.sendPush: no URL and no webhook');
    const { body, headers } = this.signedPush(spec, opts);
    return this.push(target, body, headers);
  }

  // ---- Generated data (also what tests compare the mapped output with) ------------------------------------------

  /** The night that ends on `date` (local), as GET /v3/users/sleep/{date} serves it, or null (not uploaded yet). */
  sleepFor(userId: string, date: string): PolarSleep | null {
    const user = this.polarUser(userId);
    const g = this.generateSleep(user, date);
    return this.visible(user, g.uploadMs) ? { ...g.night, ...this.sleepRevisions.get(`${userId}:${date}`) } : null;
  }

  /** Seconds per Polar hypnogram code (0 wake, 1 REM, 2/3 light, 4 deep, 5 unknown) of the generated night. */
  sleepStageSecondsFor(userId: string, date: string): Record<number, number> {
    return { ...this.generateSleep(this.polarUser(userId), date).stageSeconds };
  }

  rechargeFor(userId: string, date: string): PolarNightlyRecharge | null {
    const user = this.polarUser(userId);
    const g = this.generateSleep(user, date);
    return this.visible(user, g.uploadMs) ? this.generateRecharge(user, date, g) : null;
  }

  activityFor(userId: string, date: string): PolarActivity | null {
    const user = this.polarUser(userId);
    return this.visible(user, this.dayUpload(user, date)) ? this.generateActivity(user, date, { steps: true, zones: true, stamps: true }) : null;
  }

  heartRateFor(userId: string, date: string): PolarContinuousHeartRateDay | null {
    const user = this.polarUser(userId);
    return this.visible(user, this.dayUpload(user, date)) ? this.generateHeartRate(user, date) : null;
  }

  /** The exercises starting on `date`, with samples and zones. */
  exercisesFor(userId: string, date: string): PolarExercise[] {
    const user = this.polarUser(userId);
    return this.exercisesOf(user, { samples: true, zones: true, route: false }, date, date);
  }

  spo2For(userId: string, date: string): PolarSpo2TestResult[] {
    const user = this.polarUser(userId);
    return this.spo2Of(user, date, date);
  }

  // ---- Plumbing: auth, rate limits, accounting -------------------------------------------------------------------

  protected override newUserId(): number {
    return this.nextUserId++;
  }

  private polarUser(userId: string): PolarFakeUser {
    const user = this.users.get(userId);
    if (!user) throw new Error(`FakePolar: no user ${userId}`);
    return user as PolarFakeUser;
  }

  private count(userId: string, kind: string, n: number): void {
    const c = this.served.get(userId) ?? {};
    c[kind] = (c[kind] ?? 0) + n;
    this.served.set(userId, c);
  }

  private limits(): [number, number] {
    const users = [...this.users.values()].filter((u) => (u as PolarFakeUser).registered).length;
    return [this.rateLimits.short ?? 500 + users * 20, this.rateLimits.long ?? 5000 + users * 100];
  }

  /** Counts a request against both windows; the headers every API answer carries, and a 429 when over a limit. */
  private meter(): { headers: Record<string, string>; limited: boolean } {
    const now = this.now();
    if (!this.usage.shortStart || now - this.usage.shortStart >= SHORT_WINDOW_MS) Object.assign(this.usage, { shortStart: now, short: 0 });
    if (!this.usage.longStart || now - this.usage.longStart >= LONG_WINDOW_MS) Object.assign(this.usage, { longStart: now, long: 0 });
    // "requests violating the short term limit will still count toward the long term limit"
    this.usage.short++;
    this.usage.long++;
    const [shortLimit, longLimit] = this.limits();
    const reset = (start: number, window: number) => Math.max(0, Math.ceil((start + window - now) / 1000));
    return {
      headers: {
        'RateLimit-Usage': `${this.usage.short}, ${this.usage.long}`,
        'RateLimit-Limit': `${shortLimit}, ${longLimit}`,
        'RateLimit-Reset': `${reset(this.usage.shortStart, SHORT_WINDOW_MS)}, ${reset(this.usage.longStart, LONG_WINDOW_MS)}`,
      },
      limited: this.usage.short > shortLimit || this.usage.long > longLimit,
    };
  }

  private withMeter(handler: (req: FakeRequest) => FakeReply | Promise<FakeReply>): (req: FakeRequest) => Promise<FakeReply> {
    return async (req) => {
      const { headers, limited } = this.meter();
      const reply = limited ? polarError(429, 'TOO_MANY_REQUESTS', 'Rate limit exceeded') : await handler(req);
      return { ...reply, headers: { ...headers, ...NO_KEEP_ALIVE, ...reply.headers } };
    };
  }

  /** A route of the Users API: the user's bearer token, and (unless said otherwise) a registered user. */
  private userApi(
    method: string,
    path: string,
    handler: (req: FakeRequest, user: PolarFakeUser) => FakeReply | Promise<FakeReply>,
    opts: { registered?: boolean } = {},
  ): void {
    this.route(
      method,
      path,
      this.withMeter((req) => {
        const who = this.bearer(req);
        if ('reply' in who) return who.reply;
        const user = who.user as PolarFakeUser;
        if (opts.registered !== false && !user.registered) return polarError(403, 'FORBIDDEN', 'User is not registered to this client (POST /v3/users first).');
        if (req.query.userId !== undefined && req.query.userId !== user.id) return polarError(403, 'FORBIDDEN', 'The token does not belong to this user.');
        return handler(req, user);
      }),
    );
  }

  /** A client-level route: HTTP Basic with the client's id and secret. */
  private clientApi(method: string, path: string, handler: (req: FakeRequest) => FakeReply | Promise<FakeReply>): void {
    this.route(
      method,
      path,
      this.withMeter((req) => {
        if (this.tokenClient(req, 'basic')) return handler(req);
        return {
          status: 401,
          headers: { 'WWW-Authenticate': 'Basic realm="AccessLink"' },
          body: { error: 'unauthorized', message: 'Client credentials required.' },
        };
      }),
    );
  }

  private visible(user: PolarFakeUser, uploadMs: number): boolean {
    if (uploadMs > this.now()) return false;
    return this.preRegistrationHistory || (user.registeredAt !== undefined && uploadMs >= user.registeredAt);
  }

  private todayOf(user: PolarFakeUser): string {
    return dateOf(this.now() + user.zoneOffsetSeconds * 1000);
  }

  /** A day's activity and heart rate are uploaded an hour after the day ends. */
  private dayUpload(user: PolarFakeUser, date: string): number {
    return dayWall(date) + DAY + 60 * MIN - user.zoneOffsetSeconds * 1000;
  }

  private rng(user: PolarFakeUser, kind: string, date = ''): () => number {
    return seededRandom(`${user.seed}:${kind}:${date}`);
  }

  private person(user: PolarFakeUser) {
    const r = this.rng(user, 'person');
    const female = r() < 0.5;
    const height = round(uniform(r, female ? 158 : 170, female ? 178 : 195));
    const birthYear = 1960 + Math.floor(r() * 40);
    return {
      female,
      height,
      weight: round(uniform(r, 0.9, 1.25) * 22 * (height / 100) ** 2, 1),
      birthdate: `${birthYear}-${two(1 + Math.floor(r() * 12))}-${two(1 + Math.floor(r() * 28))}`,
      restingHr: Math.round(uniform(r, 48, 62)),
      maxHr: Math.round(uniform(r, 178, 195)),
      vo2max: Math.round(uniform(r, 38, 55)),
    };
  }

  // ---- OAuth -------------------------------------------------------------------------------------------------------

  private token(req: FakeRequest): FakeReply {
    const reply = this.tokenReply(req);
    return { ...reply, headers: { ...NO_KEEP_ALIVE, ...reply.headers } };
  }

  private tokenReply(req: FakeRequest): FakeReply {
    const client = this.tokenClient(req, 'basic');
    if (!client) return { status: 401, body: { error: 'invalid_client', error_description: 'HTTP Basic client authentication required.' } };
    if (req.form.grant_type !== 'authorization_code')
      return { status: 400, body: { error: 'unsupported_grant_type', error_description: 'Only authorization_code is supported.' } };
    const pending = this.codes.get(req.form.code ?? '');
    const reused = pending?.used === true;
    const out = this.redeemCode(req.form, client);
    if ('error' in out) {
      // "If it's used more than once, the request will be denied and ALL issued tokens will be deleted."
      if (reused && pending) this.revokeUser(pending.userId);
      return { status: 400, body: { error: out.error, error_description: out.description } };
    }
    const { access } = this.issueTokens(out.grant.userId, { accessTtlSeconds: TOKEN_TTL_SECONDS, refresh: false, scope: 'accesslink.read_all' });
    out.grant.issued.push(access.token);
    return { status: 200, body: { access_token: access.token, token_type: 'bearer', expires_in: TOKEN_TTL_SECONDS, x_user_id: Number(out.grant.userId) } };
  }

  // ---- Users -------------------------------------------------------------------------------------------------------

  private userBody(user: PolarFakeUser): PolarUser {
    const p = this.person(user);
    return {
      'polar-user-id': Number(user.id),
      'member-id': user.memberId,
      'registration-date': new Date(user.registeredAt ?? this.now()).toISOString(),
      'first-name': 'Fake',
      'last-name': `User${user.id}`,
      birthdate: p.birthdate,
      gender: p.female ? 'FEMALE' : 'MALE',
      weight: p.weight,
      height: p.height,
      'extra-info': null,
    };
  }

  private register(req: FakeRequest, user: PolarFakeUser): FakeReply {
    const memberId = (req.json as { 'member-id'?: unknown } | undefined)?.['member-id'];
    if (typeof memberId !== 'string' || !memberId) return polarError(400, 'BAD_REQUEST', 'member-id is required.');
    if (user.registered) return polarError(409, 'CONFLICT', 'User already registered to partner.');
    if ([...this.users.values()].some((u) => (u as PolarFakeUser).registered && (u as PolarFakeUser).memberId === memberId))
      return polarError(409, 'CONFLICT', 'Duplicated member-id.');
    this.registerUser(user.id, memberId);
    return { status: 200, body: this.userBody(user) };
  }

  private getUser(_req: FakeRequest, user: PolarFakeUser): FakeReply {
    this.count(user.id, 'user', 1);
    return { status: 200, body: this.userBody(user) };
  }

  private deregister(_req: FakeRequest, user: PolarFakeUser): FakeReply {
    // "When partner wishes no longer to receive user data, user can be de-registered. This will revoke the access token."
    user.registered = false;
    this.revokeUser(user.id);
    return { status: 204 };
  }

  // ---- Sleep -------------------------------------------------------------------------------------------------------

  private generateSleep(user: PolarFakeUser, date: string): GeneratedSleep {
    const r = this.rng(user, 'sleep', date);
    const tz = user.zoneOffsetSeconds;
    const p = this.person(user);
    const startWall = dayWall(date) - DAY + 22 * 3_600_000 + Math.floor(uniform(r, 0, 150)) * MIN + Math.floor(r() * 60) * 1000;
    const endWall = startWall + Math.round(uniform(r, 390, 510)) * MIN + Math.floor(r() * 60) * 1000;
    // Stage change points on whole minutes (the hypnogram's "HH:MM" keys); the first stage starts at sleep start.
    const changes: { wall: number; code: number }[] = [{ wall: startWall, code: 2 }];
    let t = Math.floor(startWall / MIN) * MIN + Math.round(uniform(r, 8, 20)) * MIN;
    for (let cycle = 0; t < endWall; cycle++) {
      const plan: [number, number, number][] = [
        [3, 15, 30],
        [4, cycle < 2 ? 20 : 5, cycle < 2 ? 45 : 20],
        [3, 5, 15],
        [1, 10 + 5 * cycle, 20 + 8 * cycle],
      ];
      if (r() < 0.35) plan.push([0, 1, 6]);
      if (r() < 0.15) plan.push([5, 2, 6]);
      for (const [code, lo, hi] of plan) {
        if (t >= endWall) break;
        changes.push({ wall: t, code });
        t += Math.round(uniform(r, lo, hi)) * MIN;
      }
    }
    const stageSeconds: Record<number, number> = { 0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0 };
    changes.forEach((c, i) => (stageSeconds[c.code] += ((changes[i + 1]?.wall ?? endWall) - c.wall) / 1000));
    const hypnogram: Record<string, number> = {};
    for (const c of changes) hypnogram[hhmm(c.wall)] = c.code;
    const stageAt = (wall: number) => [...changes].reverse().find((c) => c.wall <= wall)?.code ?? 2;
    const heartRate: Record<string, number> = {};
    for (let w = Math.ceil(startWall / MIN) * MIN + MIN; w < endWall; w += 5 * MIN) {
      const bump = STAGE_HR_BUMP[stageAt(w)] ?? 3;
      heartRate[hhmm(w)] = Math.round(p.restingHr - 4 + bump + uniform(r, 0, 3));
    }
    const light = stageSeconds[2] + stageSeconds[3];
    const interruptions = stageSeconds[0];
    const night: PolarSleep = {
      polar_user: `${API}/v3/users/${user.id}`,
      date,
      sleep_start_time: `${wallText(startWall)}${offsetText(tz)}`,
      sleep_end_time: `${wallText(endWall)}${offsetText(tz)}`,
      device_id: 'A1B2C3D4',
      continuity: round(uniform(r, 2, 4.5), 1),
      continuity_class: 1 + Math.floor(r() * 5),
      light_sleep: light,
      deep_sleep: stageSeconds[4],
      rem_sleep: stageSeconds[1],
      unrecognized_sleep_stage: stageSeconds[5],
      sleep_score: Math.round(uniform(r, 55, 95)),
      total_interruption_duration: interruptions,
      sleep_charge: 1 + Math.floor(r() * 5),
      sleep_goal: 28_800,
      sleep_rating: Math.floor(r() * 6),
      short_interruption_duration: Math.round(interruptions * 0.4),
      long_interruption_duration: interruptions - Math.round(interruptions * 0.4),
      sleep_cycles: Math.max(1, Math.round((endWall - startWall) / (90 * MIN))),
      group_duration_score: round(uniform(r, 40, 100), 1),
      group_solidity_score: round(uniform(r, 40, 100), 1),
      group_regeneration_score: round(uniform(r, 40, 100), 1),
      hypnogram,
      heart_rate_samples: heartRate,
    };
    return { night, startWall, endWall, stageSeconds, uploadMs: endWall - tz * 1000 + 15 * MIN };
  }

  private nightsOf(user: PolarFakeUser, from: string, to: string): PolarSleep[] {
    return datesFrom(from, to).flatMap((d) => {
      const night = this.sleepFor(user.id, d);
      return night ? [night] : [];
    });
  }

  private listSleep(user: PolarFakeUser): FakeReply {
    const today = this.todayOf(user);
    const nights = this.nightsOf(user, plusDays(today, -27), today); // "for the last 28 days"
    this.countNights(user, nights);
    return { status: 200, body: { nights } };
  }

  private countNights(user: PolarFakeUser, nights: PolarSleep[]): void {
    this.count(user.id, 'sleep', nights.length);
    this.count(
      user.id,
      'hypnogram_entries',
      nights.reduce((n, x) => n + Object.keys(x.hypnogram ?? {}).length, 0),
    );
  }

  private availableSleep(user: PolarFakeUser): FakeReply {
    const today = this.todayOf(user);
    const available = this.nightsOf(user, plusDays(today, -27), today).map((n) => ({
      date: n.date,
      start_time: n.sleep_start_time,
      end_time: n.sleep_end_time,
    }));
    return { status: 200, body: { available } };
  }

  private sleepByDate(req: FakeRequest, user: PolarFakeUser): FakeReply {
    if (!isDate(req.query.date)) return polarError(400, 'BAD_REQUEST', 'Invalid date.');
    const night = req.query.date <= this.todayOf(user) ? this.sleepFor(user.id, req.query.date) : null;
    if (!night) return polarError(404, 'NOT_FOUND', 'No data found for date.');
    this.countNights(user, [night]);
    return { status: 200, body: night };
  }

  // ---- Nightly Recharge ----------------------------------------------------------------------------------------------

  private generateRecharge(user: PolarFakeUser, date: string, sleep: GeneratedSleep): PolarNightlyRecharge {
    const r = this.rng(user, 'recharge', date);
    // "during a 4-hour period starting at 30 minutes after falling asleep", 5-minute averages.
    const first = Math.ceil((sleep.startWall + 30 * MIN) / MIN) * MIN;
    const hrv: Record<string, number> = {};
    const breathing: Record<string, number> = {};
    for (let w = first; w < first + 4 * 60 * MIN && w < sleep.endWall; w += 5 * MIN) {
      hrv[hhmm(w)] = Math.round(uniform(r, 25, 75));
      breathing[hhmm(w)] = round(uniform(r, 12.5, 16), 1);
    }
    const hr = Object.values(sleep.night.heart_rate_samples ?? {});
    const hrAvg = Math.round(mean(hr));
    return {
      polar_user: `${API}/v3/users/${user.id}`,
      date,
      heart_rate_avg: hrAvg,
      beat_to_beat_avg: Math.round(60_000 / hrAvg),
      heart_rate_variability_avg: Math.round(mean(Object.values(hrv))),
      breathing_rate_avg: round(mean(Object.values(breathing)), 1),
      nightly_recharge_status: 1 + Math.floor(r() * 6),
      ans_charge: round(uniform(r, -10, 10), 1),
      ans_charge_status: 1 + Math.floor(r() * 5),
      hrv_samples: hrv,
      breathing_samples: breathing,
    };
  }

  private countRecharges(user: PolarFakeUser, recharges: PolarNightlyRecharge[]): void {
    this.count(user.id, 'nightly_recharge', recharges.length);
    this.count(
      user.id,
      'hrv_samples',
      recharges.reduce((n, x) => n + Object.keys(x.hrv_samples ?? {}).length, 0),
    );
    this.count(
      user.id,
      'breathing_samples',
      recharges.reduce((n, x) => n + Object.keys(x.breathing_samples ?? {}).length, 0),
    );
  }

  private listRecharges(user: PolarFakeUser): FakeReply {
    const today = this.todayOf(user);
    const recharges = datesFrom(plusDays(today, -27), today).flatMap((d) => this.rechargeFor(user.id, d) ?? []);
    this.countRecharges(user, recharges);
    return { status: 200, body: { recharges } };
  }

  private rechargeByDate(req: FakeRequest, user: PolarFakeUser): FakeReply {
    if (!isDate(req.query.date)) return polarError(400, 'BAD_REQUEST', 'Invalid date.');
    const recharge = req.query.date <= this.todayOf(user) ? this.rechargeFor(user.id, req.query.date) : null;
    if (!recharge) return polarError(404, 'NOT_FOUND', 'No data found for date.');
    this.countRecharges(user, [recharge]);
    return { status: 200, body: recharge };
  }

  // ---- Exercises -----------------------------------------------------------------------------------------------------

  private generateExercise(user: PolarFakeUser, date: string): GeneratedExercise | null {
    const r = this.rng(user, 'exercise', date);
    if (r() >= 0.5) return null;
    const tz = user.zoneOffsetSeconds;
    const p = this.person(user);
    const kinds = [
      { sport: 'RUNNING', detailed: 'RUNNING', speed: [9, 13], hr: 0.8, cadence: { type: '8', base: 168 } },
      { sport: 'CYCLING', detailed: 'ROAD_BIKING', speed: [22, 32], hr: 0.7, cadence: { type: '2', base: 88 } },
      { sport: 'WALKING', detailed: 'WALKING', speed: [4.5, 6], hr: 0.5, cadence: { type: '8', base: 112 } },
    ] as const;
    const kind = kinds[Math.floor(r() * kinds.length)];
    const startWall = dayWall(date) + Math.floor(uniform(r, 6.5 * 3600, 19 * 3600)) * 1000;
    const durationS = Math.round(uniform(r, 25, 75) * 60);
    const rate = 5;
    const n = Math.ceil(durationS / rate);
    const target = p.restingHr + (p.maxHr - p.restingHr) * kind.hr;
    const hr: number[] = [],
      speed: number[] = [],
      altitude: number[] = [],
      distance: number[] = [],
      cadence: number[] = [],
      power: number[] = [];
    let alt = uniform(r, 20, 120),
      dist = 0;
    const cruise = uniform(r, kind.speed[0], kind.speed[1]);
    for (let i = 0; i < n; i++) {
      const warm = Math.min(1, (i * rate) / 300);
      hr.push(Math.round(95 + (target - 95) * warm + uniform(r, -4, 4)));
      const v = round(Math.max(0, cruise * (0.6 + 0.4 * warm) + uniform(r, -0.8, 0.8)), 1);
      speed.push(v);
      alt = round(alt + uniform(r, -0.8, 0.8), 1);
      altitude.push(alt);
      dist = round(dist + (v / 3.6) * rate, 1);
      distance.push(dist);
      cadence.push(Math.round(kind.cadence.base + uniform(r, -4, 4)));
      if (kind.sport === 'CYCLING') power.push(Math.round(uniform(r, 150, 250)));
    }
    const zones = [1, 2, 3, 4, 5].map((index) => {
      const lower = Math.round(p.maxHr * (0.4 + index * 0.1)),
        upper = Math.round(p.maxHr * (0.5 + index * 0.1));
      const seconds = hr.filter((b) => b >= lower && (b < upper || index === 5)).length * rate;
      return { index, 'lower-limit': lower, 'upper-limit': upper, 'in-zone': isoDur(seconds) };
    });
    const samples: PolarExerciseSample[] = [
      { 'recording-rate': rate, 'sample-type': '0', data: hr.join(',') },
      { 'recording-rate': rate, 'sample-type': '1', data: speed.join(',') },
      { 'recording-rate': rate, 'sample-type': kind.cadence.type, data: cadence.join(',') },
      { 'recording-rate': rate, 'sample-type': '3', data: altitude.join(',') },
      { 'recording-rate': rate, 'sample-type': '10', data: distance.join(',') },
      ...(power.length ? [{ 'recording-rate': rate, 'sample-type': '4', data: power.join(',') }] : []),
    ];
    const endWall = startWall + durationS * 1000;
    const uploadMs = endWall - tz * 1000 + 5 * MIN;
    const exercise: PolarExercise = {
      id: createHash('sha256').update(`${user.seed}:exercise:${date}`).digest('hex').slice(0, 8).toUpperCase(),
      upload_time: new Date(uploadMs).toISOString(),
      polar_user: `${API}/v3/users/${user.id}`,
      device: 'Polar Vantage V3',
      device_id: 'A1B2C3D4',
      start_time: wallText(startWall), // local, no offset (docs: "Start time of the training session in local time")
      start_time_utc_offset: tz / 60, // minutes
      duration: isoDur(durationS),
      calories: Math.round((durationS / 60) * uniform(r, 7, 12)),
      distance: distance[distance.length - 1],
      heart_rate: { average: Math.round(mean(hr)), maximum: Math.max(...hr) },
      training_load: round(uniform(r, 40, 180), 2),
      sport: kind.sport,
      has_route: false,
      detailed_sport_info: kind.detailed,
      heart_rate_zones: zones,
    };
    return { exercise, samples, startWall, endWall, uploadMs };
  }

  /** Exercises of the last 30 days (by upload), optionally only those starting in [from, to] (local dates). */
  private exercisesOf(user: PolarFakeUser, flags: { samples: boolean; zones: boolean; route: boolean }, from?: string, to?: string): PolarExercise[] {
    const now = this.now();
    const today = this.todayOf(user);
    const out: PolarExercise[] = [];
    for (const d of datesFrom(plusDays(today, -31), today)) {
      const g = this.generateExercise(user, d);
      if (!g || !this.visible(user, g.uploadMs) || now - g.uploadMs > 30 * DAY) continue;
      if ((from && d < from) || (to && d > to)) continue;
      const { heart_rate_zones, ...rest } = g.exercise;
      out.push({
        ...rest,
        ...(flags.zones ? { heart_rate_zones } : {}),
        ...(flags.samples ? { samples: g.samples } : {}),
        ...(flags.route ? { route: [] } : {}),
      });
    }
    for (const e of this.addedExercises.get(user.id) ?? []) {
      const uploaded = e.upload_time ? Date.parse(e.upload_time) : now;
      if (!this.visible(user, uploaded) || now - uploaded > 30 * DAY) continue;
      const d = e.start_time?.slice(0, 10) ?? '';
      if ((from && d < from) || (to && d > to)) continue;
      out.push(e);
    }
    return out;
  }

  private flags(req: FakeRequest) {
    return { samples: req.query.samples === 'true', zones: req.query.zones === 'true', route: req.query.route === 'true' };
  }

  private countExercises(user: PolarFakeUser, exercises: PolarExercise[]): void {
    this.count(user.id, 'exercises', exercises.length);
    this.count(
      user.id,
      'exercise_sample_series',
      exercises.reduce((n, e) => n + (e.samples?.length ?? 0), 0),
    );
  }

  private listExercises(req: FakeRequest, user: PolarFakeUser): FakeReply {
    const exercises = this.exercisesOf(user, this.flags(req));
    this.countExercises(user, exercises);
    return { status: 200, body: exercises };
  }

  private getExercise(req: FakeRequest, user: PolarFakeUser): FakeReply {
    const exercise = this.exercisesOf(user, this.flags(req)).find((e) => e.id === req.query.exerciseId);
    if (!exercise) return polarError(404, 'NOT_FOUND', 'Exercise not found.');
    this.countExercises(user, [exercise]);
    return { status: 200, body: exercise };
  }

  // ---- Daily activity ------------------------------------------------------------------------------------------------

  private generateActivity(user: PolarFakeUser, date: string, include: { steps: boolean; zones: boolean; stamps: boolean }): PolarActivity {
    const r = this.rng(user, 'activity', date);
    const midnight = dayWall(date);
    const workout = this.generateExercise(user, date);
    const slotMs = 5 * MIN;
    const slots: number[] = [];
    for (let i = 0; i < 288; i++) {
      const minute = i * 5,
        at = midnight + i * slotMs;
      let v: number;
      if (minute < 390 || minute >= 1380) v = 0;
      else if (workout && at >= workout.startWall && at < workout.endWall && workout.exercise.sport !== 'CYCLING') v = Math.round(uniform(r, 500, 820));
      else if (i > 0 && r() < 0.3)
        v = slots[i - 1]; // runs of equal counts: Polar filters their repeats out
      else if (r() < 0.25) v = 0;
      else v = Math.round(uniform(r, 5, 420));
      slots.push(v);
    }
    const total = slots.reduce((a, b) => a + b, 0);
    const zoneOf = (i: number) => (i * 5 < 390 ? 'SLEEP' : slots[i] === 0 ? 'SEDENTARY' : slots[i] < 100 ? 'LIGHT' : slots[i] < 250 ? 'MODERATE' : 'VIGOROUS');
    const active = slots.filter((s) => s > 0).length * 300;
    const activeCalories = Math.round(total * 0.045 + (workout ? Number(workout.exercise.calories) : 0));
    const summary: PolarActivity = {
      start_time: `${date}T00:00:00`,
      end_time: `${date}T23:59:59`,
      active_duration: isoDur(active),
      inactive_duration: isoDur(86_399 - active),
      daily_activity: round(Math.min(150, total / 100), 1),
      calories: activeCalories + Math.round(uniform(r, 1500, 1900)),
      active_calories: activeCalories,
      steps: total,
      inactivity_alert_count: Math.floor(r() * 3),
      distance_from_steps: round(total * 0.74, 2),
    };
    if (!include.steps && !include.zones && !include.stamps) return summary;
    const samples: PolarActivityDaySamples = { date };
    if (include.steps) {
      samples.steps = {
        interval_ms: slotMs,
        total_steps: total,
        samples: slots.flatMap((v, i) => (i === 0 || v !== slots[i - 1] ? [{ steps: v, timestamp: wallText(midnight + i * slotMs, false) }] : [])),
      };
    }
    if (include.zones) {
      samples.activity_zones = {
        samples: slots.flatMap((_, i) => (i === 0 || zoneOf(i) !== zoneOf(i - 1) ? [{ zone: zoneOf(i), timestamp: wallText(midnight + i * slotMs) }] : [])),
      };
    }
    if (include.stamps) samples.inactivity_stamps = [{ stamp: wallText(midnight + 15 * 3_600_000 + Math.floor(r() * 120) * MIN, false) }];
    return { ...summary, samples };
  }

  /** `from`/`to` of a range request, checked as Polar does; an error reply when refused. */
  private range(req: FakeRequest, user: PolarFakeUser, opts: { required: boolean; maxAgeDays?: number }): { from: string; to: string } | { error: FakeReply } {
    const today = this.todayOf(user);
    const { from, to } = req.query;
    if (from === undefined && to === undefined && !opts.required) return { from: plusDays(today, -27), to: today };
    if (!isDate(from) || (to !== undefined && !isDate(to)) || (opts.required && to === undefined))
      return { error: polarError(400, 'BAD_REQUEST', 'Invalid request: from (and to) must be dates YYYY-MM-DD.') };
    const end = to ?? today;
    if (end < from) return { error: polarError(400, 'BAD_REQUEST', 'Invalid request: to is before from.') };
    if (opts.maxAgeDays !== undefined && from < plusDays(today, -opts.maxAgeDays))
      return { error: polarError(400, 'BAD_REQUEST', `Invalid or too old date. Cannot be older than ${opts.maxAgeDays} days.`) };
    if (datesFrom(from, end).length > 28) return { error: polarError(400, 'BAD_REQUEST', 'Maximum range between from date and to date is 28 days.') };
    return { from, to: end };
  }

  private countActivities(user: PolarFakeUser, days: PolarActivity[]): void {
    this.count(user.id, 'activity', days.length);
    this.count(
      user.id,
      'steps_samples',
      days.reduce((n, d) => n + (d.samples?.steps?.samples?.length ?? 0), 0),
    );
    this.count(
      user.id,
      'zone_samples',
      days.reduce((n, d) => n + (d.samples?.activity_zones?.samples?.length ?? 0), 0),
    );
  }

  private listActivities(req: FakeRequest, user: PolarFakeUser, samplesOnly: boolean): FakeReply {
    const range = this.range(req, user, { required: false, maxAgeDays: 365 });
    if ('error' in range) return range.error;
    const include = samplesOnly
      ? { steps: true, zones: true, stamps: true }
      : { steps: req.query.steps === 'true', zones: req.query.activity_zones === 'true', stamps: req.query.inactivity_stamps === 'true' };
    const days = datesFrom(range.from, range.to)
      .filter((d) => this.visible(user, this.dayUpload(user, d)))
      .map((d) => this.generateActivity(user, d, include));
    this.countActivities(user, days);
    return { status: 200, body: samplesOnly ? days.map((d) => d.samples) : days };
  }

  private activityByDate(req: FakeRequest, user: PolarFakeUser, samplesOnly: boolean): FakeReply {
    const date = req.query.date;
    if (!isDate(date) || date < plusDays(this.todayOf(user), -365))
      return polarError(400, 'BAD_REQUEST', 'Invalid or too old date. Cannot be older than 365 days.');
    if (!this.visible(user, this.dayUpload(user, date))) return { status: 204 };
    const include = samplesOnly
      ? { steps: true, zones: true, stamps: true }
      : { steps: req.query.steps === 'true', zones: req.query.activity_zones === 'true', stamps: req.query.inactivity_stamps === 'true' };
    const day = this.generateActivity(user, date, include);
    this.countActivities(user, [day]);
    return { status: 200, body: samplesOnly ? day.samples : day };
  }

  // ---- Continuous heart rate -------------------------------------------------------------------------------------------

  private generateHeartRate(user: PolarFakeUser, date: string): PolarContinuousHeartRateDay {
    const r = this.rng(user, 'heartrate', date);
    const p = this.person(user);
    const midnight = dayWall(date);
    const workout = this.generateExercise(user, date);
    const first = Math.floor(r() * 300) * 1000;
    const heart_rate_samples: { heart_rate: number; sample_time: string }[] = [];
    for (let t = first; t < DAY; t += 5 * MIN) {
      const at = midnight + t;
      // "Heart rate samples from training sessions are not available through this resource."
      if (workout && at >= workout.startWall && at < workout.endWall) continue;
      const hour = t / 3_600_000;
      heart_rate_samples.push({
        heart_rate: Math.round(hour < 6.5 ? uniform(r, p.restingHr - 2, p.restingHr + 6) : uniform(r, p.restingHr + 10, p.restingHr + 40)),
        sample_time: hhmmss(at),
      });
    }
    return { polar_user: `${API}/v3/users/${user.id}`, date, heart_rate_samples };
  }

  private heartRateDays(user: PolarFakeUser, from: string, to: string): PolarContinuousHeartRateDay[] {
    const days = datesFrom(from, to).flatMap((d) => this.heartRateFor(user.id, d) ?? []);
    this.count(
      user.id,
      'heartrate',
      days.reduce((n, d) => n + (d.heart_rate_samples?.length ?? 0), 0),
    );
    return days;
  }

  /**
   * The range answer lists its days under `heart_rates` (as open-wearables reads the real API); the docs show the
   * single-day schema, which cannot hold several days.
   */
  private heartRateRange(req: FakeRequest, user: PolarFakeUser): FakeReply {
    const range = this.range(req, user, { required: true });
    if ('error' in range) return range.error;
    return { status: 200, body: { heart_rates: this.heartRateDays(user, range.from, range.to) } };
  }

  private heartRateDate(req: FakeRequest, user: PolarFakeUser): FakeReply {
    if (!isDate(req.query.date)) return polarError(400, 'BAD_REQUEST', 'Invalid request.');
    const [day] = this.heartRateDays(user, req.query.date, req.query.date);
    return day ? { status: 200, body: day } : polarError(404, 'NOT_FOUND', 'No data found for date.');
  }

  // ---- SpO2 ------------------------------------------------------------------------------------------------------------

  private spo2Of(user: PolarFakeUser, from: string, to: string): PolarSpo2TestResult[] {
    const tz = user.zoneOffsetSeconds;
    return datesFrom(from, to).flatMap((d) => {
      const r = this.rng(user, 'spo2', d);
      if (r() >= 0.4) return [];
      const wall = dayWall(d) + 8 * 3_600_000 + Math.floor(uniform(r, 0, 7200)) * 1000;
      const testTime = Math.round((wall - tz * 1000) / 1000);
      if (!this.visible(user, testTime * 1000 + 10 * MIN)) return [];
      const passed = r() < 0.8;
      return [
        {
          source_device_id: 'A1B2C3D4',
          test_time: testTime,
          time_zone_offset: tz / 60,
          test_status: passed ? 'SPO2_TEST_PASSED' : 'SPO2_TEST_INCONCLUSIVE_TOO_LOW_QUALITY_IN_SAMPLES',
          blood_oxygen_percent: Math.round(uniform(r, 94, 99)),
          spo2_class: 'SPO2_CLASS_NORMAL',
          spo2_value_deviation_from_baseline: 'DEVIATION_USUAL',
          spo2_quality_average_percent: round(uniform(r, passed ? 70 : 20, passed ? 99 : 50), 1),
          average_heart_rate_bpm: Math.round(uniform(r, 55, 75)),
          heart_rate_variability_ms: round(uniform(r, 20, 90), 1),
          spo2_hrv_deviation_from_baseline: 'DEVIATION_USUAL',
          altitude_meters: round(uniform(r, 0, 300), 1),
        },
      ];
    });
  }

  private spo2(req: FakeRequest, user: PolarFakeUser): FakeReply {
    const range = this.range(req, user, { required: false });
    if ('error' in range) return range.error;
    const results = this.spo2Of(user, range.from, range.to);
    this.count(user.id, 'spo2', results.length);
    this.count(user.id, 'spo2_passed', results.filter((x) => x.test_status === 'SPO2_TEST_PASSED').length);
    return results.length ? { status: 200, body: results } : { status: 204 };
  }

  // ---- Physical information transactions ---------------------------------------------------------------------------

  private txPath = (userId: string, txId: number) => `${API}/v3/users/${userId}/physical-information-transactions/${txId}`;

  private createTransaction(_req: FakeRequest, user: PolarFakeUser): FakeReply {
    const open = new Set([...this.transactions.values()].filter((t) => !t.committed).flatMap((t) => t.entryIds));
    const fresh = this.physical.filter((p) => p.userId === user.id && !p.committed && !open.has(p.info.id!));
    if (!fresh.length) return { status: 204 };
    const id = this.nextTransactionId++;
    this.transactions.set(id, { userId: user.id, entryIds: fresh.map((p) => p.info.id!), committed: false });
    return { status: 201, body: { 'transaction-id': id, 'resource-uri': this.txPath(user.id, id) } };
  }

  private transactionOf(req: FakeRequest, user: PolarFakeUser) {
    const id = Number(req.query.transactionId);
    const tx = this.transactions.get(id);
    return tx && tx.userId === user.id && !tx.committed ? { id, tx } : null;
  }

  private listTransaction(req: FakeRequest, user: PolarFakeUser): FakeReply {
    const found = this.transactionOf(req, user);
    if (!found) return polarError(404, 'NOT_FOUND', 'No transaction was found with given transaction id.');
    return { status: 200, body: { 'physical-informations': found.tx.entryIds.map((e) => `${this.txPath(user.id, found.id)}/physical-informations/${e}`) } };
  }

  private getPhysicalInfo(req: FakeRequest, user: PolarFakeUser): FakeReply {
    const found = this.transactionOf(req, user);
    const infoId = Number(req.query.physicalInfoId);
    if (!found?.tx.entryIds.includes(infoId)) return { status: 204 };
    const entry = this.physical.find((p) => p.info.id === infoId)!;
    this.count(user.id, 'physical_info', 1);
    return { status: 200, body: { ...entry.info, 'transaction-id': found.id } };
  }

  private commitTransaction(req: FakeRequest, user: PolarFakeUser): FakeReply {
    const found = this.transactionOf(req, user);
    if (!found) return { status: 204 };
    found.tx.committed = true;
    for (const p of this.physical) if (found.tx.entryIds.includes(p.info.id!)) p.committed = true;
    return { status: 200 };
  }

  // ---- Webhooks --------------------------------------------------------------------------------------------------------

  /** POSTs a PING signed with `secret` to `url`; true when it was answered 200. */
  private async ping(url: string, secret: string): Promise<boolean> {
    const body = JSON.stringify({ timestamp: new Date(this.now()).toISOString().replace(/\.\d{3}Z$/, 'Z'), event: 'PING' });
    let status = 0;
    try {
      const headers = {
        'Content-Type': 'application/json',
        'Polar-Webhook-Event': 'PING',
        'Polar-Webhook-Signature': createHmac('sha256', secret).update(body).digest('hex'),
      };
      const res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(10_000) });
      status = res.status;
      await res.text();
    } catch {
      status = 0;
    }
    this.pings.push({ url, status });
    return status === 200;
  }

  private webhookRequest(req: FakeRequest, partial: boolean): { events?: PolarWebhookEvent[]; url?: string } | { error: FakeReply } {
    const body = req.json as { events?: unknown; url?: unknown } | undefined;
    if (!body || typeof body !== 'object') return { error: polarError(400, 'BAD_REQUEST', 'A JSON body {events, url} is required.') };
    const { events, url } = body;
    const known = (e: unknown) => WEBHOOK_EVENTS.includes(e as PolarWebhookEvent);
    if (events !== undefined && (!Array.isArray(events) || !events.length || !events.every(known))) {
      return { error: polarError(400, 'BAD_REQUEST', `events must be a non-empty list of ${WEBHOOK_EVENTS.join(', ')}.`) };
    }
    if (url !== undefined && (typeof url !== 'string' || !/^https?:\/\//.test(url)))
      return { error: polarError(400, 'BAD_REQUEST', 'url must be an absolute URL.') };
    if (!partial && (events === undefined || url === undefined)) return { error: polarError(400, 'BAD_REQUEST', 'events and url are required.') };
    return { events: events as PolarWebhookEvent[] | undefined, url: url as string | undefined };
  }

  private async createWebhook(req: FakeRequest): Promise<FakeReply> {
    if (this.webhook) return polarError(409, 'CONFLICT', 'Webhook already exists.');
    const parsed = this.webhookRequest(req, false);
    if ('error' in parsed) return parsed.error;
    const secret = randomUUID();
    // "When creating webhook the AccessLink sends a ping message to the url ... must be answered with 200 OK or
    // otherwise the webhook is not created."
    if (!(await this.ping(parsed.url!, secret)))
      return polarError(400, 'BAD_REQUEST', 'Webhook cannot be created: the ping to the url was not answered 200 OK.');
    this.webhook = { id: createHash('sha256').update(secret).digest('hex').slice(0, 6), events: parsed.events!, url: parsed.url!, secret, active: true };
    return { status: 201, body: { data: { id: this.webhook.id, events: this.webhook.events, url: this.webhook.url, signature_secret_key: secret } } };
  }

  private webhookInfo() {
    const w = this.webhook!;
    return { id: w.id, events: w.events, url: w.url, active: w.active };
  }

  private getWebhook(): FakeReply {
    return { status: 200, body: { data: this.webhook ? [this.webhookInfo()] : [] } };
  }

  private async activateWebhook(): Promise<FakeReply> {
    if (!this.webhook) return { status: 204 };
    if (!(await this.ping(this.webhook.url, this.webhook.secret)))
      return polarError(400, 'BAD_REQUEST', 'Webhook cannot be activated: the ping was not answered 200 OK.');
    this.webhook.active = true;
    return { status: 200 };
  }

  private deactivateWebhook(): FakeReply {
    if (!this.webhook) return { status: 204 };
    this.webhook.active = false;
    return { status: 200 };
  }

  private async patchWebhook(req: FakeRequest): Promise<FakeReply> {
    if (!this.webhook || this.webhook.id !== req.query.webhookId) return polarError(404, 'NOT_FOUND', 'Webhook not found.');
    const parsed = this.webhookRequest(req, true);
    if ('error' in parsed) return parsed.error;
    if (parsed.url && parsed.url !== this.webhook.url && !(await this.ping(parsed.url, this.webhook.secret))) {
      return polarError(400, 'BAD_REQUEST', 'Webhook cannot be updated: the ping to the new url was not answered 200 OK.');
    }
    Object.assign(this.webhook, { ...(parsed.events ? { events: parsed.events } : {}), ...(parsed.url ? { url: parsed.url } : {}) });
    return { status: 200, body: { data: [this.webhookInfo()] } };
  }

  private deleteWebhook(req: FakeRequest): FakeReply {
    if (!this.webhook || this.webhook.id !== req.query.webhookId) return polarError(404, 'NOT_FOUND', 'Webhook not found.');
    this.webhook = null;
    return { status: 204 };
  }
}

export async function startFakePolar(opts: FakePolarOptions = {}): Promise<FakePolar> {
  return new FakePolar(opts).start();
}
