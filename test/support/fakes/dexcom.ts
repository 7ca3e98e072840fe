import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { FakeProvider, seededRandom, type FakeReply, type FakeRequest, type FakeUser, type RecordedRequest } from './fake-provider';

/**
 * A loopback fake of the Dexcom API v3 (developer.dexcom.com/docs/dexcomv3/endpoint-overview), after the official
 * operation pages and api-evangelist/dexcom `openapi/dexcom-dexcom-api.yml` + `examples/dexcom-api-*-example.json`:
 * - `GET /v2/oauth2/login` (consent; `response_type=code` and `scope=offline_access` required),
 *   `POST /v2/oauth2/token` (client_id/client_secret in the form; authorization_code and refresh_token grants;
 *   `expires_in` 7200 as in the examples, unverified). Refresh: a new access AND refresh token each time; the old
 *   refresh token stays valid unless `refreshRotation: 'invalidate-old'` (rotation is not documented anywhere stored;
 *   the token response's `refresh_expires_in`/`session_state` fields, context7 developer_dexcom llms.txt from
 *   swaggerV3.json, look like Keycloak, whose default keeps the old refresh token valid). No revocation endpoint.
 * - `GET /v3/users/self/dataRange?lastSyncTime`, `/egvs`, `/calibrations`, `/events` (`startDate`/`endDate` both
 *   required, UTC `YYYY-MM-DDThh:mm:ss` without offset or milliseconds, at most 30 days apart: otherwise 400),
 *   `/devices`. Records are filtered on systemTime, both ends inclusive.
 * - Records of a `receiver` user carry no offsets; of an `iOS`/`android` user `systemTime …+00:00` and
 *   `displayTime` with the local offset (getEstimatedGlucoseValuesV3 notes, getEventsV3 example).
 * - Sandbox-like generated data: an EGV every 5 minutes (288 a day) on the transmitter's own grid, meals with carbs
 *   and a glucose excursion, fast-acting insulin per meal and long-acting at night, an occasional deleted event,
 *   night lows below 40 (value null, status `low`) and rare highs above 400, a warm-up gap at each 10-day sensor
 *   change, calibrations every third morning. Data reach the API `uploadDelaySeconds` late (US: ~1 h, Validic wiki).
 * - 429 when rate limited, without reset header (none is documented).
 * - Regions: a Dexcom account lives on one server, api.dexcom.com (US), api.dexcom.eu (EU and elsewhere outside the
 *   US) or api.dexcom.jp (Japan) (endpoint-overview). The fake stands in for all three and tells them apart by the
 *   `X-Forwarded-Host` a rebased request carries (none: api.dexcom.com). A user's codes, tokens and data are known
 *   only at their region's server: elsewhere a code or refresh token is `invalid_grant` and an access token a 401.
 *   The login page cannot tell (the browser carries no such header): it signs in whoever `nextConsentUser` names.
 */
export const FAKE_DEXCOM_CLIENT = { clientId: 'dexcom-fake-client-id', clientSecret: 'dexcom-fake-client-secret' };

export type DexcomDisplayDevice = 'receiver' | 'iOS' | 'android';
export type DexcomRegion = 'us' | 'eu' | 'jp';
/** Dexcom's servers and the region of the accounts each keeps. */
export const DEXCOM_HOSTS: Record<string, DexcomRegion> = { 'api.dexcom.com': 'us', 'api.dexcom.eu': 'eu', 'api.dexcom.jp': 'jp' };
export type DexcomKind = 'egvs' | 'calibrations' | 'events';
export type DexcomRecord = Record<string, unknown> & { recordId: string; systemTime: string; displayTime: string };

export interface DexcomFakeUser extends FakeUser {
  displayDevice: DexcomDisplayDevice;
  transmitterGeneration: 'g6' | 'g7';
  transmitterId: string;
  /** When the user's first sensor started (ms). Nothing before it. */
  dataStartMs: number;
  /** Records reach the API this long after they are recorded (US ~3600 s). */
  uploadDelaySeconds: number;
  /** The server the account lives on (default `us`). */
  region: DexcomRegion;
}

export interface FakeDexcomOptions {
  port?: number;
  clientId?: string;
  clientSecret?: string;
  /** What a refresh does to the refresh token it used (default: keep it valid). */
  refreshRotation?: 'keep-old' | 'invalidate-old';
  accessTtlSeconds?: number;
}

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const EGV_INTERVAL = 5 * MINUTE;
const SENSOR_DAYS = 10;
const MAX_WINDOW = 30 * DAY;
const QUERY_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/;
const DATA_PATHS: Record<DexcomKind, string> = { egvs: '/v3/users/self/egvs', calibrations: '/v3/users/self/calibrations', events: '/v3/users/self/events' };
const RECORD_TYPES: Record<DexcomKind, string> = { egvs: 'egv', calibrations: 'calibration', events: 'event' };

const pad = (n: number) => String(n).padStart(2, '0');
const wall = (ms: number) => new Date(ms).toISOString().slice(0, 19);
const offsetSuffix = (s: number) => `${s < 0 ? '-' : '+'}${pad(Math.floor(Math.abs(s) / 3600))}:${pad(Math.floor((Math.abs(s) % 3600) / 60))}`;
/** A UUID-shaped id that is the same for the same inputs (Dexcom recordIds are UUIDs). */
const stableUuid = (...parts: (string | number)[]) => {
  const h = createHash('sha256').update(parts.join(':')).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
};
const unit = (seed: string) => seededRandom(seed)();
/** A fast deterministic uniform [0, 1) of (seed number, index): per-sample noise without a hash per sample. */
const mix = (seed: number, index: number) => {
  let h = Math.imul(seed ^ Math.imul(index | 0, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 4294967296;
};

interface Meal {
  at: number;
  carbs: number;
}
interface DayPlan {
  meals: Meal[];
  /** A night low (03:00 local) dipping this deep, or 0. */
  lowDepth: number;
  /** A missed bolus at dinner: the excursion is this many times larger. */
  hyperFactor: number;
  deletedEntryAt: number | null;
}

export class FakeDexcom extends FakeProvider {
  private readonly explicit = new Map<string, Partial<Record<DexcomKind, DexcomRecord[]>>>();
  private readonly served = new Map<string, Record<string, number>>();
  private readonly servedLog = new Map<string, Record<DexcomKind, DexcomRecord[]>>();
  private readonly planCache = new Map<string, DayPlan>();
  private readonly userConstants = new Map<string, { base: number; noiseSeed: number; phase: number }>();
  readonly refreshRotation: 'keep-old' | 'invalidate-old';
  readonly accessTtlSeconds: number;

  constructor(opts: FakeDexcomOptions = {}) {
    super({
      slug: 'dexcom_v3',
      name: 'Dexcom',
      clientId: opts.clientId ?? FAKE_DEXCOM_CLIENT.clientId,
      clientSecret: opts.clientSecret ?? FAKE_DEXCOM_CLIENT.clientSecret,
      authorizePath: '/v2/oauth2/login',
      port: opts.port,
    });
    this.refreshRotation = opts.refreshRotation ?? 'keep-old';
    this.accessTtlSeconds = opts.accessTtlSeconds ?? 7200;
    // The login page refuses what Dexcom refuses before showing the consent (userAuthorization: response_type=code,
    // scope=offline_access, both required). The base consent page is private: reached through a cast.
    const consentPage = (this as unknown as { consentPage(req: FakeRequest): FakeReply }).consentPage.bind(this);
    this.route('GET', '/v2/oauth2/login', (req) => {
      if (req.query.response_type !== 'code')
        return { status: 400, body: { error: 'unsupported_response_type', error_description: 'response_type must be code' } };
      if (req.query.scope !== 'offline_access') return { status: 400, body: { error: 'invalid_scope', error_description: 'scope must be offline_access' } };
      return consentPage(req);
    });
    this.route('POST', '/v2/oauth2/token', (req) => this.token(req));
    this.route('GET', '/v3/users/self/dataRange', (req) => this.dataRange(req));
    this.route('GET', '/v3/users/self/devices', (req) => this.devices(req));
    for (const kind of Object.keys(DATA_PATHS) as DexcomKind[]) this.route('GET', DATA_PATHS[kind], (req) => this.records(req, kind));
  }

  protected override newUserId(): string {
    return randomUUID();
  }

  /** Adds a user (defaults: receiver, G7, data from 120 days ago, 1 h upload delay, UTC). */
  override addUser(user: Partial<DexcomFakeUser> = {}): DexcomFakeUser {
    const full = super.addUser({
      displayDevice: 'receiver',
      transmitterGeneration: 'g7',
      transmitterId: randomBytes(3).toString('hex').toUpperCase(),
      dataStartMs: Math.floor((Date.now() - 120 * DAY) / MINUTE) * MINUTE,
      uploadDelaySeconds: 3600,
      region: 'us',
      ...user,
    }) as DexcomFakeUser;
    return full;
  }

  dexcomUser(id: string): DexcomFakeUser {
    const user = this.users.get(id);
    if (!user) throw new Error(`No fake Dexcom user ${id}`);
    return user as DexcomFakeUser;
  }

  /** The Dexcom server a request was meant for: the host its `X-Forwarded-Host` names, else api.dexcom.com. */
  hostOf(req: Pick<RecordedRequest, 'headers'>): string {
    return req.headers['x-forwarded-host'] || 'api.dexcom.com';
  }

  /** The servers a user's requests (token requests included) were meant for. */
  hostsOf(userId: string): string[] {
    return [...new Set(this.requests.filter((r) => r.userId === userId).map((r) => this.hostOf(r)))];
  }

  /** The user of a bearer token, known only at the server of the user's region. */
  override bearer(req: FakeRequest): { user: FakeUser } | { reply: FakeReply } {
    const who = super.bearer(req);
    if ('reply' in who || this.atHomeServer(req, who.user)) return who;
    return { reply: { status: 401, body: { error: 'invalid_token', message: `Unknown access token at ${this.hostOf(req)}.` } } };
  }

  private atHomeServer(req: FakeRequest, user: FakeUser | undefined): boolean {
    return !!user && DEXCOM_HOSTS[this.hostOf(req)] === (user as DexcomFakeUser).region;
  }

  /** Serves these records for `kind` instead of generated ones (null: back to generated). */
  setRecords(userId: string, kind: DexcomKind, records: DexcomRecord[] | null): void {
    const entry = this.explicit.get(userId) ?? {};
    if (records) entry[kind] = records;
    else delete entry[kind];
    this.explicit.set(userId, entry);
  }

  /** Answers the next `times` data requests with Dexcom's 429 (no reset header is documented). */
  rateLimit(times = 1, headers: Record<string, string> = {}): void {
    this.fail({ path: /^\/v3\//, status: 429, headers, body: { error: 'too_many_requests', message: 'Rate limit of 60000 calls per hour exceeded' }, times });
  }

  /** What was served per user: `egvs`, `egvs:low`, `egvs:high`, `calibrations`, `events`, `events:<type>`, `events:deleted`, `dataRange`, `devices`. */
  servedCount(userId: string): Record<string, number> {
    return { ...(this.served.get(userId) ?? {}) };
  }

  /** The records served for `kind`, in order (duplicates included, so a test sees an overlap). */
  servedRecords(userId: string, kind: DexcomKind): DexcomRecord[] {
    return [...(this.servedLog.get(userId)?.[kind] ?? [])];
  }

  resetServed(userId?: string): void {
    if (userId) {
      this.served.delete(userId);
      this.servedLog.delete(userId);
    } else {
      this.served.clear();
      this.servedLog.clear();
    }
  }

  /** The state of a refresh token (for rotation tests). */
  refreshTokenState(token: string): 'valid' | 'revoked' | 'unknown' {
    const t = this.refreshTokens.get(token);
    if (!t) return 'unknown';
    return t.revoked || t.validUntil < Date.now() ? 'revoked' : 'valid';
  }

  /**
   * The records of `kind` with systemTime in [fromMs, toMs] that the API has (uploaded by `now`): what a request of
   * that window is answered with.
   */
  recordsFor(userId: string, kind: DexcomKind, fromMs: number, toMs: number, now = Date.now()): DexcomRecord[] {
    const user = this.dexcomUser(userId);
    const visibleUntil = now - user.uploadDelaySeconds * SECOND;
    const explicit = this.explicit.get(userId)?.[kind];
    if (explicit) {
      return explicit.filter((r) => {
        const t = systemInstant(r.systemTime);
        return t >= fromMs && t <= toMs && t <= visibleUntil;
      });
    }
    const from = Math.max(fromMs, user.dataStartMs);
    const to = Math.min(toMs, visibleUntil);
    if (to < from) return [];
    if (kind === 'egvs') return this.egvs(user, from, to);
    if (kind === 'calibrations') return this.calibrations(user, from, to);
    return this.events(user, from, to);
  }

  // ---- OAuth ------------------------------------------------------------------------------------------------

  private token(req: FakeRequest): FakeReply {
    const client = this.tokenClient(req, 'body');
    if (!client) return { status: 401, body: { error: 'invalid_client', error_description: 'Invalid client credentials' } };
    const f = req.form;
    const elsewhere = {
      status: 400,
      body: { error: 'invalid_grant', error_description: `Unknown ${f.grant_type === 'refresh_token' ? 'refresh token' : 'code'} at ${this.hostOf(req)}` },
    };
    if (f.grant_type === 'authorization_code') {
      // Another region's server never issued the code (nor consumes it).
      const grant = this.codes.get(f.code ?? '');
      if (grant && !this.atHomeServer(req, this.users.get(grant.userId))) {
        req.record.userId = grant.userId;
        return elsewhere;
      }
      const redeemed = this.redeemCode(f, client);
      if ('error' in redeemed) return { status: 400, body: { error: redeemed.error, error_description: redeemed.description } };
      const user = this.users.get(redeemed.grant.userId);
      if (!user || user.revoked) return { status: 400, body: { error: 'invalid_grant', error_description: 'User access removed' } };
      req.record.userId = user.id;
      const { access, refresh } = this.issueTokens(user.id, { accessTtlSeconds: this.accessTtlSeconds, scope: 'offline_access' });
      redeemed.grant.issued.push(access.token, refresh!.token);
      return { status: 200, body: this.tokenBody(access.token, refresh!.token) };
    }
    if (f.grant_type === 'refresh_token') {
      const old = this.refreshTokens.get(f.refresh_token ?? '');
      const user = old ? this.users.get(old.userId) : undefined;
      if (!old || old.revoked || old.validUntil < Date.now() || !user || user.revoked)
        return { status: 400, body: { error: 'invalid_grant', error_description: 'Invalid refresh token' } };
      req.record.userId = user.id;
      if (!this.atHomeServer(req, user)) return elsewhere;
      const { access, refresh } = this.issueTokens(user.id, { accessTtlSeconds: this.accessTtlSeconds, scope: 'offline_access' });
      if (this.refreshRotation === 'invalidate-old') old.revoked = true;
      return { status: 200, body: this.tokenBody(access.token, refresh!.token) };
    }
    return { status: 400, body: { error: 'unsupported_grant_type', error_description: `grant_type ${f.grant_type ?? '(none)'} is not supported` } };
  }

  private tokenBody(access: string, refresh: string) {
    // Shape of the swaggerV3 token examples (access_token, expires_in, token_type, refresh_token plus the Keycloak-ish
    // refresh_expires_in / not-before-policy / session_state).
    return {
      access_token: access,
      expires_in: this.accessTtlSeconds,
      token_type: 'Bearer',
      refresh_token: refresh,
      refresh_expires_in: 0,
      'not-before-policy': 0,
      session_state: randomUUID(),
    };
  }

  // ---- Data -------------------------------------------------------------------------------------------------

  private count(userId: string, key: string, n = 1): void {
    const c = this.served.get(userId) ?? {};
    c[key] = (c[key] ?? 0) + n;
    this.served.set(userId, c);
  }

  private records(req: FakeRequest, kind: DexcomKind): FakeReply {
    const who = this.bearer(req);
    if ('reply' in who) return who.reply;
    const user = who.user as DexcomFakeUser;
    const { startDate, endDate } = req.query;
    for (const [name, v] of [
      ['startDate', startDate],
      ['endDate', endDate],
    ] as const) {
      if (!v) return badRequest(`${name} is required`);
      if (!QUERY_TIME.test(v)) return badRequest(`${name} must be YYYY-MM-DDThh:mm:ss (UTC, no offset, no milliseconds): ${v}`);
    }
    const from = Date.parse(`${startDate}Z`);
    const to = Date.parse(`${endDate}Z`);
    if (!Number.isFinite(from) || !Number.isFinite(to)) return badRequest('startDate/endDate are not valid dates');
    if (to <= from) return badRequest('endDate must be after startDate');
    if (to - from > MAX_WINDOW) return badRequest('The time window between startDate and endDate must not exceed 30 days');
    const records = this.recordsFor(user.id, kind, from, to);
    this.count(user.id, kind, records.length);
    for (const r of records) {
      if (kind === 'egvs' && (r.status === 'low' || r.status === 'high')) this.count(user.id, `egvs:${r.status}`);
      if (kind === 'events') this.count(user.id, r.eventStatus === 'deleted' ? 'events:deleted' : `events:${String(r.eventType)}`);
    }
    const log = this.servedLog.get(user.id) ?? { egvs: [], calibrations: [], events: [] };
    log[kind].push(...records);
    this.servedLog.set(user.id, log);
    return { status: 200, body: { recordType: RECORD_TYPES[kind], recordVersion: '3.0', userId: user.id, records } };
  }

  private dataRange(req: FakeRequest): FakeReply {
    const who = this.bearer(req);
    if ('reply' in who) return who.reply;
    const user = who.user as DexcomFakeUser;
    this.count(user.id, 'dataRange');
    let after = -Infinity;
    if (req.query.lastSyncTime) {
      after = systemInstant(req.query.lastSyncTime);
      if (!Number.isFinite(after)) return badRequest('lastSyncTime is not a date-time');
    }
    const span = (kind: DexcomKind) => {
      const { first, last } = this.bounds(user, kind, after);
      const moment = (r: DexcomRecord | null) => ({ systemTime: r?.systemTime ?? null, displayTime: r?.displayTime ?? null });
      return { start: moment(first), end: moment(last) };
    };
    return {
      status: 200,
      body: { recordType: 'dataRange', recordVersion: '3.0', userId: user.id, calibrations: span('calibrations'), egvs: span('egvs'), events: span('events') },
    };
  }

  /** The first and last record of a kind (after `after`), looking a few days in from each end of the data. */
  private bounds(user: DexcomFakeUser, kind: DexcomKind, after: number): { first: DexcomRecord | null; last: DexcomRecord | null } {
    const now = Date.now();
    const lo = Math.max(user.dataStartMs, after === -Infinity ? -Infinity : after + 1);
    const hi = now - user.uploadDelaySeconds * SECOND;
    if (this.explicit.get(user.id)?.[kind]) {
      const all = this.recordsFor(user.id, kind, -8.64e15, 8.64e15, now).filter((r) => systemInstant(r.systemTime) >= lo);
      return { first: all[0] ?? null, last: all[all.length - 1] ?? null };
    }
    let first: DexcomRecord | null = null;
    let last: DexcomRecord | null = null;
    for (let from = lo; from <= hi && !first; from += 4 * DAY) first = this.recordsFor(user.id, kind, from, Math.min(hi, from + 4 * DAY - 1), now)[0] ?? null;
    for (let to = hi; to >= lo && !last; to -= 4 * DAY) last = this.recordsFor(user.id, kind, Math.max(lo, to - 4 * DAY + 1), to, now).at(-1) ?? null;
    return { first, last };
  }

  private devices(req: FakeRequest): FakeReply {
    const who = this.bearer(req);
    if ('reply' in who) return who.reply;
    const user = who.user as DexcomFakeUser;
    this.count(user.id, 'devices');
    const lastUpload = Date.now() - user.uploadDelaySeconds * SECOND;
    return {
      status: 200,
      body: {
        recordType: 'device',
        recordVersion: '3.0',
        userId: user.id,
        records: [
          {
            lastUploadDate: this.times(user, lastUpload).systemTime,
            transmitterId: user.transmitterId,
            transmitterGeneration: user.transmitterGeneration,
            displayDevice: user.displayDevice,
            displayApp: user.transmitterGeneration === 'g7' ? 'Dexcom G7' : 'G6',
            alertSchedules: [
              {
                alertScheduleSettings: {
                  alertScheduleName: 'Default',
                  isEnabled: true,
                  isDefaultSchedule: true,
                  startTime: '00:00',
                  endTime: '00:00',
                  daysOfWeek: ['sunday', 'monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday'],
                },
                alertSettings: [
                  { alertName: 'high', value: 250, unit: 'mg/dL', snooze: 30, enabled: true },
                  { alertName: 'low', value: 70, unit: 'mg/dL', snooze: 30, enabled: true },
                  { alertName: 'urgentLow', value: 55, unit: 'mg/dL', snooze: 30, enabled: true },
                ],
              },
            ],
          },
        ],
      },
    };
  }

  // ---- Generated data ---------------------------------------------------------------------------------------

  /** systemTime / displayTime as the user's display device writes them. */
  private times(user: DexcomFakeUser, ms: number): { systemTime: string; displayTime: string } {
    const local = wall(ms + user.zoneOffsetSeconds * SECOND);
    if (user.displayDevice === 'receiver') return { systemTime: wall(ms), displayTime: local };
    return { systemTime: `${wall(ms)}+00:00`, displayTime: `${local}${offsetSuffix(user.zoneOffsetSeconds)}` };
  }

  private recordBase(user: DexcomFakeUser, kind: string, ms: number, seedParts: (string | number)[]) {
    return {
      recordId: stableUuid(user.seed, kind, ...seedParts),
      ...this.times(user, ms),
      transmitterId: user.transmitterId,
      transmitterGeneration: user.transmitterGeneration,
      displayDevice: user.displayDevice,
    };
  }

  /** Per-user constants: baseline glucose, noise seed, and the transmitter's 5-minute grid phase (whole seconds). */
  private constants(user: DexcomFakeUser): { base: number; noiseSeed: number; phase: number } {
    let c = this.userConstants.get(user.seed);
    if (!c) {
      c = {
        base: 95 + unit(`${user.seed}:base`) * 30,
        noiseSeed: Math.floor(unit(`${user.seed}:noise`) * 2 ** 31),
        phase: Math.floor(unit(`${user.seed}:phase`) * 300) * SECOND,
      };
      this.userConstants.set(user.seed, c);
    }
    return c;
  }

  /** The local day (days since epoch in the user's zone) an instant falls on. */
  private localDay(user: DexcomFakeUser, ms: number): number {
    return Math.floor((ms + user.zoneOffsetSeconds * SECOND) / DAY);
  }

  /** The instant of a local time of day on a local day. */
  private localAt(user: DexcomFakeUser, day: number, hours: number): number {
    return day * DAY + hours * HOUR - user.zoneOffsetSeconds * SECOND;
  }

  private plan(user: DexcomFakeUser, day: number): DayPlan {
    const key = `${user.seed}:${user.zoneOffsetSeconds}:${day}`;
    const cached = this.planCache.get(key);
    if (cached) return cached;
    const r = seededRandom(`${user.seed}:plan:${day}`);
    const toSecond = (ms: number) => Math.floor(ms / SECOND) * SECOND;
    const meals: Meal[] = [
      [7 + r() * 1.5, 25 + r() * 35],
      [12 + r() * 1.5, 40 + r() * 40],
      [18.5 + r() * 2, 45 + r() * 45],
    ].map(([h, carbs]) => ({ at: toSecond(this.localAt(user, day, h)), carbs: Math.round(carbs) }));
    const lowDepth = r() < 0.12 ? 70 + r() * 40 : 0;
    const hyperFactor = r() < 0.06 ? 4 + r() * 2 : 1;
    const deletedEntryAt = r() < 0.15 ? toSecond(this.localAt(user, day, 15 + r() * 2)) : null;
    const plan = { meals, lowDepth, hyperFactor, deletedEntryAt };
    if (this.planCache.size > 50_000) this.planCache.clear();
    this.planCache.set(key, plan);
    return plan;
  }

  /** Whether the sensor is warming up at `ms` (after each 10-day sensor start: G7 30 min, G6 2 h). */
  private warmingUp(user: DexcomFakeUser, ms: number): boolean {
    const sinceStart = ms - user.dataStartMs;
    if (sinceStart < 0) return true;
    const warmUp = user.transmitterGeneration === 'g7' ? 30 * MINUTE : 2 * HOUR;
    return sinceStart % (SENSOR_DAYS * DAY) < warmUp;
  }

  /** The true glucose (mg/dL, unrounded) at an instant: a pure function of the user and the instant. */
  private glucoseAt(user: DexcomFakeUser, ms: number): number {
    const { base, noiseSeed } = this.constants(user);
    const day = this.localDay(user, ms);
    const localHour = ((ms + user.zoneOffsetSeconds * SECOND) % DAY) / HOUR;
    // Dawn phenomenon: a rise of up to 15 mg/dL from 04:00 to 08:00 local.
    const dawn = 15 * Math.max(0, Math.sin(((localHour - 4) / 4) * Math.PI)) * (localHour >= 4 && localHour <= 8 ? 1 : 0);
    let excursion = 0;
    let low = 0;
    for (const d of [day - 1, day]) {
      const p = this.plan(user, d);
      for (const [i, m] of p.meals.entries()) {
        const x = (ms - m.at) / (50 * MINUTE);
        if (x > 0 && x < 8) excursion += m.carbs * 1.1 * (i === 2 ? p.hyperFactor : 1) * x * Math.exp(1 - x);
      }
      if (p.lowDepth) {
        const x = (ms - this.localAt(user, d + 1, 3)) / (45 * MINUTE);
        low += p.lowDepth * Math.exp(-x * x);
      }
    }
    const noise = (mix(noiseSeed, Math.floor(ms / EGV_INTERVAL)) - 0.5) * 6;
    return base + dawn + excursion - low + noise;
  }

  private egvs(user: DexcomFakeUser, from: number, to: number): DexcomRecord[] {
    const { phase } = this.constants(user);
    const out: DexcomRecord[] = [];
    const firstTick = Math.ceil((from - phase) / EGV_INTERVAL);
    for (let k = firstTick; k * EGV_INTERVAL + phase <= to; k++) {
      const t = k * EGV_INTERVAL + phase;
      if (this.warmingUp(user, t)) continue;
      const v = Math.round(this.glucoseAt(user, t));
      const prev = Math.round(this.glucoseAt(user, t - EGV_INTERVAL));
      const rate = Math.round(((v - prev) / 5) * 10) / 10;
      const status = v < 40 ? 'low' : v > 400 ? 'high' : 'ok';
      out.push({
        ...this.recordBase(user, 'egv', t, [k]),
        transmitterTicks: Math.floor((t - user.dataStartMs) / SECOND) % (SENSOR_DAYS * 86400),
        value: status === 'ok' ? v : null,
        status,
        trend: status !== 'ok' ? 'notComputable' : trendOf(rate),
        trendRate: status !== 'ok' ? null : rate,
        unit: 'mg/dL',
        rateUnit: 'mg/dL/min',
      });
    }
    return out;
  }

  private calibrations(user: DexcomFakeUser, from: number, to: number): DexcomRecord[] {
    const out: DexcomRecord[] = [];
    for (let day = this.localDay(user, from) - 1; day <= this.localDay(user, to) + 1; day++) {
      if (((day % 3) + 3) % 3 !== 0) continue;
      const t = Math.floor(this.localAt(user, day, 7 + unit(`${user.seed}:cal:${day}`) * 0.5) / SECOND) * SECOND;
      if (t < from || t > to || this.warmingUp(user, t)) continue;
      const value = Math.max(40, Math.round(this.glucoseAt(user, t) + (unit(`${user.seed}:calnoise:${day}`) - 0.5) * 12));
      out.push({
        ...this.recordBase(user, 'calibration', t, [day]),
        unit: 'mg/dL',
        value,
        transmitterTicks: Math.floor((t - user.dataStartMs) / SECOND) % (SENSOR_DAYS * 86400),
      });
    }
    return out;
  }

  private events(user: DexcomFakeUser, from: number, to: number): DexcomRecord[] {
    const out: DexcomRecord[] = [];
    const event = (
      t: number,
      tag: string,
      day: number,
      eventType: string,
      eventSubType: string | null,
      value: number,
      eventUnit: string,
      eventStatus = 'created',
    ) => {
      if (t < from || t > to) return;
      // getEventsV3 types `value` as a string.
      out.push({ ...this.recordBase(user, 'event', t, [day, tag]), eventStatus, eventType, eventSubType, value: String(value), unit: eventUnit });
    };
    for (let day = this.localDay(user, from) - 1; day <= this.localDay(user, to) + 1; day++) {
      const p = this.plan(user, day);
      for (const [i, m] of p.meals.entries()) {
        event(m.at, `carbs${i}`, day, 'carbs', null, m.carbs, 'grams');
        // The dinner bolus is missed on a hyper day.
        if (!(i === 2 && p.hyperFactor > 1))
          event(m.at + 2 * MINUTE, `bolus${i}`, day, 'insulin', 'fastActing', Math.max(1, Math.round((m.carbs / 10) * 2) / 2), 'units');
      }
      event(
        Math.floor(this.localAt(user, day, 22) / SECOND) * SECOND,
        'basal',
        day,
        'insulin',
        'longActing',
        18 + Math.round(unit(`${user.seed}:basal:${day}`) * 6),
        'units',
      );
      if (p.deletedEntryAt !== null) event(p.deletedEntryAt, 'deleted', day, 'carbs', null, 20, 'grams', 'deleted');
    }
    return out.sort((a, b) => systemInstant(a.systemTime) - systemInstant(b.systemTime));
  }
}

function trendOf(rate: number): string {
  if (rate > 3) return 'doubleUp';
  if (rate > 2) return 'singleUp';
  if (rate > 1) return 'fortyFiveUp';
  if (rate >= -1) return 'flat';
  if (rate >= -2) return 'fortyFiveDown';
  if (rate >= -3) return 'singleDown';
  return 'doubleDown';
}

/** A record's systemTime as an instant (no offset: UTC). */
function systemInstant(s: string): number {
  return /(Z|[+-]\d{2}:\d{2})$/.test(s) ? Date.parse(s) : Date.parse(`${s}Z`);
}

function badRequest(message: string): FakeReply {
  // Dexcom's error body for a bad query is not documented in the stored sources: a plain error object.
  return { status: 400, body: { error: 'invalid_request', error_description: message } };
}

export async function startFakeDexcom(opts: FakeDexcomOptions = {}): Promise<FakeDexcom> {
  return new FakeDexcom(opts).start();
}
