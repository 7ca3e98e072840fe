/**
 * The Polar AccessLink integration (lib/wearables/providers/polar) driven against its loopback fake
 * (test/support/fakes/polar.ts): OAuth by real HTTP (consent page, Basic-auth code exchange, single-use codes),
 * user registration, every pull unit over a 90-day window in 28-day chunks, the mapping traps (exercise offsets
 * applied once, HRV as RMSSD, a night delivered twice replacing itself), rate limits, 5xx, webhooks (PING on
 * creation, signed pushes, forged and stale ones refused) and deregistration. Standalone: no database, no Temporal.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProviderFetchError } from '../lib/wearables/adapters';
import type { ProviderData, SampleInput } from '../lib/wearables/model';
import {
  OAuthError,
  RateLimitedError,
  type PageCursor,
  type ProviderCallContext,
  type PushNotification,
  type PushRequest,
  type PushSecrets,
  type PullWindow,
  type TokenSet,
} from '../lib/wearables/providers/contract';
import { createProviderHttp } from '../lib/wearables/providers/http';
import { authorizeUrl, exchangeCode } from '../lib/wearables/providers/oauth-client';
import {
  activateWebhook,
  createWebhook,
  deactivateWebhook,
  deleteWebhook,
  getWebhook,
  integration,
  polarOAuth,
  polarRateLimitResetAt,
  polarSignature,
} from '../lib/wearables/providers/polar';
import { continuousHeartRateDays, expandSteps, mapExercise, mapSleep, mapSpo2 } from '../lib/wearables/providers/polar/mapping';
import { FAKE_POLAR_CLIENT, FakePolar, startFakePolar, type PolarFakeUser } from './support/fakes/polar';

const REDIRECT_URI = 'https://app.example.test/v2/providers/polar/callback';
const DAY = 86_400_000;
const TZ = 2 * 3600; // the main user's watch records in UTC+02:00

let fake: FakePolar;
let receiver: Server;
let receiverUrl = '';
/** What the push receiver got: each POST, whether it verified, and what it parsed. */
const received: { path: string; event?: string; verified: boolean; notifications: PushNotification[] }[] = [];
const pushSecrets: PushSecrets = { clientSecret: FAKE_POLAR_CLIENT.clientSecret };

beforeAll(async () => {
  // Polar serves nothing uploaded before a user's registration, so a new connection has no history (tested below);
  // these tests opt into one to exercise the pull, its windows and its mapping over 90 days.
  fake = await startFakePolar({ preRegistrationHistory: true });
  // The app's push intake, reduced to what the integration decides: verify, then parse; 401 when not verified.
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://receiver');
      if (url.pathname === '/broken') {
        res.writeHead(500, { Connection: 'close' }).end();
        return;
      }
      const push: PushRequest = {
        method: req.method ?? 'POST',
        query: Object.fromEntries(url.searchParams),
        headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')])),
        rawBody: Buffer.concat(chunks),
      };
      const verified = integration.push!.verify(push, pushSecrets, new Date());
      received.push({ path: url.pathname, event: push.headers['polar-webhook-event'], verified, notifications: verified ? integration.push!.parse(push) : [] });
      res.writeHead(verified ? 200 : 401, { Connection: 'close' }).end(); // see NO_KEEP_ALIVE in the fake
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await fake.close();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
});

// ---- Helpers -----------------------------------------------------------------------------------------------------

const unescapeHtml = (s: string) =>
  s
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

/** A browser on the consent page: GET the authorize URL, POST the form with the decision, read the 302's query. */
async function consent(decision: 'approve' | 'deny', userId?: string): Promise<{ authorize: URL; redirect: URL }> {
  if (userId) fake.nextConsentUser = userId;
  const authorize = new URL(authorizeUrl(polarOAuth, { clientId: FAKE_POLAR_CLIENT.clientId, redirectUri: REDIRECT_URI }, 'state-123', { baseUrl: fake.url }));
  const page = await fetch(authorize);
  expect(page.status).toBe(200);
  const html = await page.text();
  const form = new URLSearchParams();
  for (const m of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) form.set(unescapeHtml(m[1]), unescapeHtml(m[2]));
  form.set('decision', decision);
  const answer = await fetch(new URL(authorize.pathname, fake.url), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: form.toString(),
    redirect: 'manual',
  });
  expect(answer.status).toBe(302);
  return { authorize, redirect: new URL(answer.headers.get('location')!) };
}

const exchange = (code: string) => exchangeCode(polarOAuth, { ...FAKE_POLAR_CLIENT, redirectUri: REDIRECT_URI }, code, { baseUrl: fake.url });

function contextFor(tokens: TokenSet, externalUserId: string | null = null): ProviderCallContext {
  const http = createProviderHttp({ integration, baseUrl: fake.url, client: FAKE_POLAR_CLIENT, accessToken: async () => tokens.access_token });
  return { http, externalUserId, tokenExtras: tokens.extras, client: FAKE_POLAR_CLIENT };
}

/** A new Polar user, through consent, code exchange and afterConnect (registration). */
async function connectNewUser(user: Partial<PolarFakeUser> = {}): Promise<{ user: PolarFakeUser; tokens: TokenSet; ctx: ProviderCallContext }> {
  const added = fake.addUser(user) as PolarFakeUser;
  const { redirect } = await consent('approve', added.id);
  const tokens = await exchange(redirect.searchParams.get('code')!);
  const ctx = contextFor(tokens);
  const { externalUserId } = await integration.afterConnect!(ctx);
  ctx.externalUserId = externalUserId;
  return { user: added, tokens, ctx };
}

const localToday = (tz: number) => new Date(Date.now() + tz * 1000).toISOString().slice(0, 10);
const addDays = (date: string, n: number) => new Date(Date.parse(`${date}T00:00:00Z`) + n * DAY).toISOString().slice(0, 10);

function windowOf(days: number, tz: number, endDate = localToday(tz)): PullWindow {
  const startDate = addDays(endDate, -(days - 1));
  return {
    startDate,
    endDate,
    start: new Date(Date.parse(`${startDate}T00:00:00Z`) - tz * 1000),
    end: new Date(Date.parse(`${endDate}T00:00:00Z`) + DAY - tz * 1000),
    timezoneOffsetSeconds: tz,
  };
}

/** Every page of one pull unit over a window: the merged data and the cursors walked. */
async function pull(ctx: ProviderCallContext, resource: string, window: PullWindow): Promise<{ data: ProviderData; cursors: PageCursor[] }> {
  const data: ProviderData = { source_type: 'watch', summaries: [], samples: [], workout_streams: [] };
  const cursors: PageCursor[] = [];
  for (let cursor = integration.firstPage(resource, window); cursor; ) {
    cursors.push(cursor);
    expect(JSON.stringify(cursor).length).toBeLessThan(400); // small flat cursors
    const page = await integration.fetchPage(ctx, resource, cursor);
    expect(page.data.source_type).toBe('watch');
    data.summaries.push(...page.data.summaries);
    data.samples.push(...page.data.samples);
    data.workout_streams.push(...page.data.workout_streams);
    cursor = page.next;
    expect(cursors.length).toBeLessThan(50);
  }
  return { data, cursors };
}

const of = (data: ProviderData, resource: string): SampleInput[] => data.samples.filter((s) => s.resource === resource);
const utcOfWall = (wall: string, tz: number) => new Date(Date.parse(`${wall}Z`) - tz * 1000).toISOString();

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

// ---- OAuth --------------------------------------------------------------------------------------------------------

describe('OAuth against the fake', () => {
  test('authorize URL, deny, approve, Basic-auth exchange: a year-long token, no refresh token, x_user_id', async () => {
    const denied = await consent('deny');
    expect(denied.redirect.searchParams.get('error')).toBe('access_denied');
    expect(denied.redirect.searchParams.get('code')).toBeNull();

    const user = fake.addUser() as PolarFakeUser;
    const { authorize, redirect } = await consent('approve', user.id);
    expect(authorize.pathname).toBe('/oauth2/authorization');
    expect(authorize.searchParams.get('response_type')).toBe('code');
    expect(authorize.searchParams.get('scope')).toBe('accesslink.read_all');
    expect(authorize.searchParams.get('client_id')).toBe(FAKE_POLAR_CLIENT.clientId);
    expect(authorize.searchParams.get('code_challenge')).toBeNull();
    expect(redirect.searchParams.get('state')).toBe('state-123');

    const before = Date.now();
    const tokens = await exchange(redirect.searchParams.get('code')!);
    expect(tokens.refresh_token).toBeNull();
    expect(tokens.extras.x_user_id).toBe(Number(user.id));
    expect(tokens.expires_at!.getTime() - before).toBeGreaterThan(364 * DAY);
    const tokenRequest = fake.requestsTo('/v2/oauth2/token').at(-1)!;
    expect(tokenRequest.headers.authorization).toBe(
      `Basic ${Buffer.from(`${FAKE_POLAR_CLIENT.clientId}:${FAKE_POLAR_CLIENT.clientSecret}`).toString('base64')}`,
    );
    expect(tokenRequest.body).not.toContain('client_secret');
    expect(polarOAuth.refreshable).toBe(false);
  });

  test('a wrong client secret is refused', async () => {
    const { redirect } = await consent('approve');
    const err = await rejection(
      exchangeCode(polarOAuth, { ...FAKE_POLAR_CLIENT, clientSecret: 'nope', redirectUri: REDIRECT_URI }, redirect.searchParams.get('code')!, {
        baseUrl: fake.url,
      }),
    );
    expect(err).toBeInstanceOf(OAuthError);
    expect((err as OAuthError).error).toBe('invalid_client');
  });

  test('a code used twice is refused and deletes every token issued: the working token stops working', async () => {
    const user = fake.addUser() as PolarFakeUser;
    const { redirect } = await consent('approve', user.id);
    const code = redirect.searchParams.get('code')!;
    const tokens = await exchange(code);
    const ctx = contextFor(tokens);
    ctx.externalUserId = (await integration.afterConnect!(ctx)).externalUserId;
    const profile = await pull(ctx, 'profile', windowOf(1, 0));
    expect(profile.data.summaries).toHaveLength(1);

    const err = await rejection(exchange(code));
    expect(err).toBeInstanceOf(OAuthError);
    expect((err as OAuthError).error).toBe('invalid_grant');
    expect(fake.tokensOf(user.id).active).toEqual([]);
    const after = await rejection(pull(ctx, 'profile', windowOf(1, 0)));
    expect(after).toBeInstanceOf(ProviderFetchError);
    expect((after as ProviderFetchError).errorType).toBe('provider_credential_error');
  });
});

// ---- Registration ----------------------------------------------------------------------------------------------

describe('afterConnect registers the user', () => {
  test('no data before registration; POST /v3/users with the member-id; 409 on a second registration is fine', async () => {
    const user = fake.addUser() as PolarFakeUser;
    const { redirect } = await consent('approve', user.id);
    const tokens = await exchange(redirect.searchParams.get('code')!);
    const ctx = contextFor(tokens);

    const unregistered = await rejection(integration.fetchPage(ctx, 'sleep', integration.firstPage('sleep', windowOf(7, 0))!));
    expect((unregistered as ProviderFetchError).errorType).toBe('non_retriable_error');

    const { externalUserId } = await integration.afterConnect!(ctx);
    expect(externalUserId).toBe(user.id);
    const registration = fake.requestsTo('/v3/users', user.id).filter((r) => r.method === 'POST');
    expect(registration).toHaveLength(1);
    expect(registration[0].headers.authorization).toBe(`Bearer ${tokens.access_token}`);
    expect(JSON.parse(registration[0].body)).toEqual({ 'member-id': user.id });
    expect((fake.users.get(user.id) as PolarFakeUser).registered).toBe(true);

    // A reconnection registers again: Polar answers 409, which is not an error.
    await expect(integration.afterConnect!(ctx)).resolves.toEqual({ externalUserId: user.id });
    expect(fake.requestsTo('/v3/users', user.id).at(-1)!.status).toBe(409);
  });

  test('a token response without x_user_id refuses the connection', async () => {
    const ctx = contextFor({ access_token: 'x', refresh_token: null, expires_at: null, scope: null, extras: {} });
    const err = await rejection(integration.afterConnect!(ctx));
    expect(err).toBeInstanceOf(ProviderFetchError);
    expect((err as ProviderFetchError).errorType).toBe('non_retriable_error');
  });
});

// ---- A 90-day history pull -------------------------------------------------------------------------------------

describe('history pull over the provider window', () => {
  let ctx: ProviderCallContext;
  let user: PolarFakeUser;
  const pulled: Record<string, { data: ProviderData; cursors: PageCursor[] }> = {};
  let window: PullWindow;

  beforeAll(async () => {
    ({ ctx, user } = await connectNewUser({ zoneOffsetSeconds: TZ }));
    window = windowOf(integration.historyDays, TZ);
    for (const resource of integration.resources) pulled[resource] = await pull(ctx, resource, window);
  }, 60_000);

  test('the window is 90 days and every pull unit has a page', () => {
    expect(integration.historyDays).toBe(90);
    expect(integration.resources).toEqual(['profile', 'body', 'activity', 'sleep', 'hrv', 'workouts', 'heartrate', 'blood_oxygen']);
    for (const r of integration.resources) expect(pulled[r].cursors.length).toBeGreaterThan(0);
  });

  test('range endpoints are asked in chunks of at most 28 days covering the window exactly once', () => {
    for (const [resource, path] of [
      ['activity', '/v3/users/activities'],
      ['heartrate', '/v3/users/continuous-heart-rate'],
      ['blood_oxygen', '/v3/users/biosensing/spo2'],
    ] as const) {
      const requests = fake.requestsTo(path, user.id);
      expect(requests).toHaveLength(4); // 28 + 28 + 28 + 6 days
      expect(pulled[resource].cursors).toHaveLength(4);
      let expected = window.startDate;
      for (const r of requests) {
        expect([200, 204]).toContain(r.status);
        expect(r.query.from).toBe(expected);
        const days = (Date.parse(r.query.to) - Date.parse(r.query.from)) / DAY + 1;
        expect(days).toBeLessThanOrEqual(28);
        expected = addDays(r.query.to, 1);
      }
      expect(expected).toBe(addDays(window.endDate, 1));
    }
    const activity = fake.requestsTo('/v3/users/activities', user.id)[0];
    expect(activity.query.steps).toBe('true');
    expect(activity.query.activity_zones).toBe('true');
  });

  test('activity: every served day mapped, totals and steps as served, zones as low/medium/high, local midnight once', () => {
    const summaries = pulled.activity.data.summaries;
    expect(summaries.length).toBe(fake.servedCount(user.id).activity);
    expect(summaries.length).toBeGreaterThanOrEqual(85);
    const steps = of(pulled.activity.data, 'steps');
    for (const s of summaries) {
      const raw = fake.activityFor(user.id, s.calendar_date)!;
      expect(s.source_key).toBe(s.calendar_date);
      expect(s.time).toBe(utcOfWall(`${s.calendar_date}T00:00:00`, TZ));
      expect(s.fields).toMatchObject({
        steps: raw.steps,
        calories_total: raw.calories,
        calories_active: raw.active_calories,
        distance: raw.distance_from_steps,
        timezone_offset: TZ,
        calendar_date: s.calendar_date,
      });
      // The day's step samples (repeats re-expanded) add up to the day's steps.
      const dayStart = Date.parse(s.time),
        dayEnd = dayStart + DAY;
      const mine = steps.filter((x) => Date.parse(x.timestamp) >= dayStart && Date.parse(x.timestamp) < dayEnd);
      expect(mine.reduce((n, x) => n + x.value!, 0)).toBe(raw.steps);
      expect(mine.every((x) => x.unit === 'count' && Date.parse(x.end!) - Date.parse(x.start!) === 300_000 && x.timezone_offset === TZ)).toBe(true);
      // Zone changes → minutes until the next change (the last one until midnight).
      const zones = raw.samples!.activity_zones!.samples!;
      const minutes: Record<string, number> = {};
      zones.forEach((z, i) => {
        const from = Date.parse(`${z.timestamp}Z`),
          to = i + 1 < zones.length ? Date.parse(`${zones[i + 1].timestamp}Z`) : Date.parse(`${s.calendar_date}T00:00:00Z`) + DAY;
        minutes[z.zone!] = (minutes[z.zone!] ?? 0) + (to - from) / 60_000;
      });
      expect(s.fields).toMatchObject({
        low: Math.round(minutes.LIGHT ?? 0),
        medium: Math.round(minutes.MODERATE ?? 0),
        high: Math.round(minutes.VIGOROUS ?? 0),
      });
    }
    expect(of(pulled.activity.data, 'calories_active')).toHaveLength(summaries.length);
    expect(of(pulled.activity.data, 'distance').every((x) => x.unit === 'm')).toBe(true);
  });

  test('sleep: the 28 nights Polar keeps, offsets from the record, stage totals equal to the hypnogram', () => {
    const nights = pulled.sleep.data.summaries;
    expect(nights.length).toBe(fake.servedCount(user.id).sleep);
    expect(nights.length).toBeGreaterThanOrEqual(27);
    const hypnogram = of(pulled.sleep.data, 'hypnogram');
    for (const s of nights) {
      const raw = fake.sleepFor(user.id, s.calendar_date)!;
      expect(s.source_key).toBe(raw.date);
      expect(s.fields.bedtime_start).toBe(raw.sleep_start_time);
      expect(s.fields.bedtime_stop).toBe(raw.sleep_end_time);
      expect(raw.sleep_start_time!.endsWith('+02:00')).toBe(true);
      expect(s.time).toBe(new Date(Date.parse(raw.sleep_start_time!)).toISOString());
      expect(s.fields.timezone_offset).toBe(TZ);
      const stages = fake.sleepStageSecondsFor(user.id, s.calendar_date);
      expect(s.fields).toMatchObject({
        deep: stages[4],
        light: stages[2] + stages[3],
        rem: stages[1],
        awake: stages[0],
        total: stages[1] + stages[2] + stages[3] + stages[4] + stages[5],
        score: raw.sleep_score,
      });
      const from = Date.parse(s.time),
        to = Date.parse(String(s.fields.bedtime_stop));
      const mine = hypnogram.filter((h) => Date.parse(h.start!) >= from && Date.parse(h.end!) <= to);
      const seconds = (stage: number) => mine.filter((h) => h.value === stage).reduce((n, h) => n + (Date.parse(h.end!) - Date.parse(h.start!)) / 1000, 0);
      expect([seconds(1), seconds(2), seconds(3), seconds(4), seconds(-1)]).toEqual([stages[4], stages[2] + stages[3], stages[1], stages[0], stages[5]]);
      expect(s.fields.duration).toBe((to - from) / 1000);
      const hr = Object.values(raw.heart_rate_samples!);
      expect(s.fields.hr_lowest).toBe(Math.min(...hr));
    }
    expect(hypnogram.length).toBeGreaterThan(0);
    expect(hypnogram.every((h) => h.unit === 'stage')).toBe(true);
  });

  test('hrv: Nightly Recharge samples as RMSSD in ms (unit rmssd), placed in the night before the recharge date', () => {
    const hrv = of(pulled.hrv.data, 'hrv');
    const served = fake.servedCount(user.id);
    expect(hrv.length).toBe(served.hrv_samples);
    expect(of(pulled.hrv.data, 'respiratory_rate').length).toBe(served.breathing_samples);
    expect(hrv.every((x) => x.unit === 'rmssd' && x.timezone_offset === TZ)).toBe(true);
    const date = addDays(window.endDate, -3);
    const raw = fake.rechargeFor(user.id, date)!;
    const expected = Object.entries(raw.hrv_samples!).map(([key, value]) => ({
      timestamp: utcOfWall(`${key >= '12:00' ? addDays(date, -1) : date}T${key}:00`, TZ),
      value,
    }));
    for (const e of expected) expect(hrv).toContainEqual(expect.objectContaining({ resource: 'hrv', timestamp: e.timestamp, value: e.value }));
    // The samples are the RMSSD values themselves: their mean is Polar's heart_rate_variability_avg (RMSSD).
    const mean = expected.reduce((n, e) => n + e.value, 0) / expected.length;
    expect(Math.round(mean)).toBe(raw.heart_rate_variability_avg);
    // The samples sit inside the night that ends on `date`.
    const night = fake.sleepFor(user.id, date)!;
    for (const e of expected) {
      expect(Date.parse(e.timestamp)).toBeGreaterThanOrEqual(Date.parse(night.sleep_start_time!));
      expect(Date.parse(e.timestamp)).toBeLessThan(Date.parse(night.sleep_end_time!));
    }
    // SpO2 tests carry an HRV of unstated kind: it never becomes an `hrv` sample.
    expect(of(pulled.blood_oxygen.data, 'hrv')).toHaveLength(0);
  });

  test('workouts: every exercise of the last 30 days, local start time with the offset applied once, streams', () => {
    const workouts = pulled.workouts.data.summaries;
    expect(workouts.length).toBe(fake.servedCount(user.id).exercises);
    expect(workouts.length).toBeGreaterThan(3);
    for (const w of workouts) {
      const raw = fake.exercisesFor(user.id, w.calendar_date).find((e) => e.id === w.source_key)!;
      expect(raw.start_time_utc_offset).toBe(120);
      const wall = Date.parse(`${raw.start_time}Z`);
      expect(w.time).toBe(new Date(wall - 120 * 60_000).toISOString());
      expect(w.time).not.toBe(new Date(wall + 120 * 60_000).toISOString()); // the open-wearables #1679 bug
      expect(w.fields.time_start).toBe(`${raw.start_time}+02:00`);
      expect(w.fields).toMatchObject({
        provider_id: raw.id,
        timezone_offset: TZ,
        average_hr: raw.heart_rate!.average,
        max_hr: raw.heart_rate!.maximum,
        calories: raw.calories,
        distance: raw.distance,
      });
      const stream = pulled.workouts.data.workout_streams.find((s) => s.workout_source_key === w.source_key)!;
      const hr = raw
        .samples!.find((s) => s['sample-type'] === '0')!
        .data!.split(',')
        .map(Number);
      expect(stream.stream.heartrate).toEqual(hr);
      expect(stream.stream.time[0]).toBe(Date.parse(w.time) / 1000);
      expect(stream.stream.time[1] - stream.stream.time[0]).toBe(5);
      expect((w.fields.hr_zones as number[]).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    }
    expect(of(pulled.workouts.data, 'workout_duration')).toHaveLength(workouts.length);
  });

  test('heart rate: every served 5-minute sample, device time placed with the user offset', () => {
    const hr = of(pulled.heartrate.data, 'heartrate');
    expect(hr.length).toBe(fake.servedCount(user.id).heartrate);
    const date = addDays(window.endDate, -5);
    const raw = fake.heartRateFor(user.id, date)!;
    const first = raw.heart_rate_samples![0];
    expect(hr).toContainEqual(
      expect.objectContaining({ timestamp: utcOfWall(`${date}T${first.sample_time}`, TZ), value: first.heart_rate, unit: 'bpm', timezone_offset: TZ }),
    );
  });

  test('blood oxygen: passed SpO2 tests only, at their own offset', () => {
    const served = fake.servedCount(user.id);
    const spo2 = of(pulled.blood_oxygen.data, 'blood_oxygen');
    expect(spo2.length).toBe(served.spo2_passed);
    expect(served.spo2).toBeGreaterThan(served.spo2_passed); // some inconclusive ones were left out
    expect(spo2.every((x) => x.unit === '%' && x.timezone_offset === TZ && x.value! >= 90)).toBe(true);
  });

  test('profile and body: user info, and the physical-information transaction (create, list, get, commit)', async () => {
    const info = await ctx.http.request<{ height: number; birthdate: string; gender: string }>({ url: `https://www.polaraccesslink.com/v3/users/${user.id}` });
    expect(pulled.profile.data.summaries).toEqual([
      expect.objectContaining({
        resource: 'profile',
        source_key: 'profile',
        fields: {
          height: Math.round(info.body.height),
          birth_date: info.body.birthdate,
          gender: info.body.gender.toLowerCase(),
          sex: info.body.gender.toLowerCase(),
        },
      }),
    ]);

    const body = pulled.body.data.summaries;
    expect(body).toHaveLength(1);
    expect(pulled.body.cursors.map((c) => c.step)).toEqual(['create', 'list', 'get', 'commit']);
    expect(body[0].fields.weight).toEqual(expect.any(Number));
    expect(of(pulled.body.data, 'vo2_max')).toHaveLength(1);
    // Committed: nothing new the next time; a new entry comes in the next transaction.
    expect((await pull(ctx, 'body', window)).data.summaries).toHaveLength(0);
    fake.addPhysicalInfo(user.id, { weight: 71.5 });
    const next = await pull(ctx, 'body', window);
    expect(next.data.summaries.map((s) => s.fields.weight)).toEqual([71.5]);
  });
});

// ---- Traps ---------------------------------------------------------------------------------------------------------

describe('mapping traps', () => {
  test('exercise start: local time minus start_time_utc_offset minutes, applied once, for any sign', () => {
    const east = mapExercise({ id: 'E1', start_time: '2026-07-01T10:00:00', start_time_utc_offset: 120, duration: 'PT1H30M', distance: 1000 }).summaries[0];
    expect(east.time).toBe('2026-07-01T08:00:00.000Z');
    expect(east.fields).toMatchObject({
      time_start: '2026-07-01T10:00:00+02:00',
      time_end: '2026-07-01T11:30:00+02:00',
      timezone_offset: 7200,
      calendar_date: '2026-07-01',
    });
    const west = mapExercise({ id: 'W1', start_time: '2026-07-01T22:30:00', start_time_utc_offset: -300, duration: 'PT45M' }).summaries[0];
    expect(west.time).toBe('2026-07-02T03:30:00.000Z');
    expect(west.fields).toMatchObject({ time_start: '2026-07-01T22:30:00-05:00', calendar_date: '2026-07-01', timezone_offset: -18000 });
    // A start time that already names its zone is an instant: the offset is not added to it again.
    const zoned = mapExercise({ id: 'Z1', start_time: '2026-07-01T08:00:00Z', start_time_utc_offset: 120, duration: 'PT10M' }).summaries[0];
    expect(zoned.time).toBe('2026-07-01T08:00:00.000Z');
    expect(zoned.fields.time_start).toBe('2026-07-01T10:00:00+02:00');
  });

  test('an exercise served by the fake with a chosen offset lands at the right instant, by listing and by id', async () => {
    const { ctx, user } = await connectNewUser({ zoneOffsetSeconds: -4 * 3600 });
    const date = addDays(localToday(-4 * 3600), -1);
    fake.addExercise(user.id, {
      id: 'OFFSET1',
      upload_time: new Date(Date.now() - 3600_000).toISOString(),
      start_time: `${date}T06:15:00`,
      start_time_utc_offset: -240,
      duration: 'PT40M',
      sport: 'RUNNING',
      calories: 400,
      distance: 7000,
      heart_rate: { average: 140, maximum: 170 },
    });
    const listed = (await pull(ctx, 'workouts', windowOf(1, -4 * 3600, date))).data.summaries.find((s) => s.source_key === 'OFFSET1')!;
    expect(listed.time).toBe(`${date}T10:15:00.000Z`);
    expect(listed.fields.time_start).toBe(`${date}T06:15:00-04:00`);
    const byId = await integration.fetchObject!(ctx, 'workouts', 'OFFSET1', -4 * 3600);
    expect(byId.summaries).toEqual([listed]); // same source_key, same fields: a re-delivery replaces itself
    expect((await integration.fetchObject!(ctx, 'workouts', 'GONE', 0)).summaries).toEqual([]);
  });

  test('a night delivered twice (SLEEP pushed twice, then revised) maps to one source_key with the later values', async () => {
    const { ctx, user } = await connectNewUser({ zoneOffsetSeconds: TZ });
    const date = addDays(localToday(TZ), -1);
    fake.webhook = fake.webhook ?? { id: 'w-test', events: ['SLEEP'], url: `${receiverUrl}/hook`, secret: 'test-secret', active: true };
    pushSecrets.webhookSecret = fake.webhook.secret;
    const seen = received.length;
    const timestamp = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    for (let i = 0; i < 2; i++) expect((await fake.sendPush(`${receiverUrl}/hook`, { event: 'SLEEP', userId: user.id, date }, { timestamp })).status).toBe(200);
    const [first, second] = received.slice(seen);
    expect(first.notifications).toEqual(second.notifications); // same dedupe keys: fetched once
    expect(first.notifications.map((n) => n.kind === 'data' && [n.resource, n.window])).toEqual([
      ['sleep', { startDate: date, endDate: date }],
      ['hrv', { startDate: date, endDate: date }],
    ]);

    const oneDay = windowOf(1, TZ, date);
    const before = (await pull(ctx, 'sleep', oneDay)).data.summaries;
    expect(fake.requestsTo(`/v3/users/sleep/${date}`, user.id)).toHaveLength(1);
    fake.reviseSleep(user.id, date, { sleep_score: 99, deep_sleep: 4321 });
    const after = (await pull(ctx, 'sleep', oneDay)).data.summaries;
    const listed = (await pull(ctx, 'sleep', windowOf(7, TZ))).data.summaries.filter((s) => s.calendar_date === date);
    expect(before).toHaveLength(1);
    expect([after[0].source_key, listed[0].source_key]).toEqual([before[0].source_key, before[0].source_key]);
    expect(before[0].source_key).toBe(date);
    expect(before[0].fields.score).not.toBe(99);
    expect(after[0].fields).toMatchObject({ score: 99, deep: 4321 });
    expect(listed[0].fields).toMatchObject({ score: 99, deep: 4321 });
    expect(after[0].time).toBe(before[0].time);
  });

  test('steps: filtered repeats re-expanded; the last run recovered from total_steps; zero intervals dropped', () => {
    const samples = expandSteps(
      {
        interval_ms: 60_000,
        total_steps: 10 + 10 + 10 + 0 + 7 + 7 + 7,
        samples: [
          { steps: 10, timestamp: '2026-03-01T08:00' },
          { steps: 0, timestamp: '2026-03-01T08:03' },
          { steps: 7, timestamp: '2026-03-01T08:04' },
        ],
      },
      Date.parse('2026-03-02T00:00:00Z'),
      3600,
    );
    expect(samples.map((s) => [s.start, s.value])).toEqual([
      ['2026-03-01T07:00:00.000Z', 10],
      ['2026-03-01T07:01:00.000Z', 10],
      ['2026-03-01T07:02:00.000Z', 10],
      ['2026-03-01T07:04:00.000Z', 7],
      ['2026-03-01T07:05:00.000Z', 7],
      ['2026-03-01T07:06:00.000Z', 7],
    ]);
  });

  test('sleep hypnogram keys cross midnight in the sleep offset; the first stage starts at sleep start', () => {
    const data = mapSleep({
      date: '2026-03-02',
      sleep_start_time: '2026-03-01T23:50:30-03:00',
      sleep_end_time: '2026-03-02T00:20:00-03:00',
      light_sleep: 1170,
      hypnogram: { '23:50': 2, '00:05': 4, '00:10': 0 },
    });
    expect(data.samples.map((s) => [s.start, s.end, s.value, s.timezone_offset])).toEqual([
      ['2026-03-02T02:50:30.000Z', '2026-03-02T03:05:00.000Z', 2, -10800],
      ['2026-03-02T03:05:00.000Z', '2026-03-02T03:10:00.000Z', 1, -10800],
      ['2026-03-02T03:10:00.000Z', '2026-03-02T03:20:00.000Z', 4, -10800],
    ]);
    expect(data.summaries[0]).toMatchObject({
      source_key: '2026-03-02',
      calendar_date: '2026-03-02',
      time: '2026-03-02T02:50:30.000Z',
      fields: { bedtime_start: '2026-03-01T23:50:30-03:00', duration: 1770 },
    });
  });

  test('continuous heart-rate answers in the documented single-day shape, a list or wrapped in heart_rates', () => {
    const day = { date: '2026-01-01', heart_rate_samples: [{ heart_rate: 60, sample_time: '00:02:08' }] };
    expect(continuousHeartRateDays(day)).toEqual([day]);
    expect(continuousHeartRateDays([day, day])).toHaveLength(2);
    expect(continuousHeartRateDays({ heart_rates: [day] })).toEqual([day]);
    expect(continuousHeartRateDays(undefined)).toEqual([]);
  });

  test('SpO2 test times are instants with their own offset; inconclusive tests are dropped', () => {
    const samples = mapSpo2([
      { test_time: 1_697_787_256, time_zone_offset: 180, test_status: 'SPO2_TEST_PASSED', blood_oxygen_percent: 95, heart_rate_variability_ms: 100 },
      { test_time: 1_697_787_999, time_zone_offset: 180, test_status: 'SPO2_TEST_INCONCLUSIVE_TOO_LOW_OVERALL_QUALITY', blood_oxygen_percent: 80 },
    ]);
    expect(samples).toEqual([
      { resource: 'blood_oxygen', timestamp: new Date(1_697_787_256_000).toISOString(), value: 95, unit: '%', type: null, timezone_offset: 10800 },
    ]);
  });
});

// ---- Errors and rate limits -----------------------------------------------------------------------------------

describe('errors and rate limits', () => {
  let ctx: ProviderCallContext;
  beforeAll(async () => {
    ({ ctx } = await connectNewUser());
  });

  test('every answer carries RateLimit-Usage/-Limit/-Reset; a 429 waits for the short-term reset', async () => {
    const res = await ctx.http.request({ url: 'https://www.polaraccesslink.com/v3/users/sleep' });
    expect(res.headers.get('ratelimit-usage')).toMatch(/^\d+, \d+$/);
    expect(res.headers.get('ratelimit-limit')).toMatch(/^\d+, \d+$/);
    expect(res.headers.get('ratelimit-reset')).toMatch(/^\d+, \d+$/);

    fake.failRateLimited({ path: '/v3/users/sleep', shortResetSeconds: 120, longResetSeconds: 50_000 });
    const before = Date.now();
    const err = await rejection(integration.fetchPage(ctx, 'sleep', integration.firstPage('sleep', windowOf(7, 0))!));
    expect(err).toBeInstanceOf(RateLimitedError);
    const wait = (err as RateLimitedError).retryAt.getTime() - before;
    expect(wait).toBeGreaterThanOrEqual(119_000);
    expect(wait).toBeLessThan(125_000);
  });

  test('over the 24-hour limit, the wait is the long-term reset', async () => {
    fake.failRateLimited({ path: '/v3/exercises', shortResetSeconds: 120, longResetSeconds: 50_000, longTerm: true });
    const before = Date.now();
    const err = await rejection(integration.fetchPage(ctx, 'workouts', integration.firstPage('workouts', windowOf(7, 0))!));
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAt.getTime() - before).toBeGreaterThanOrEqual(49_999_000);
  });

  test("the fake's own limiter answers 429 past the limit, with the reset it reports", async () => {
    const probe = await ctx.http.request({ url: 'https://www.polaraccesslink.com/v3/users/sleep' });
    const [short] = probe.headers.get('ratelimit-usage')!.split(',').map(Number);
    fake.rateLimits = { short: short + 1 };
    try {
      await ctx.http.request({ url: 'https://www.polaraccesslink.com/v3/users/sleep' });
      const before = Date.now();
      const err = await rejection(ctx.http.request({ url: 'https://www.polaraccesslink.com/v3/users/sleep' }));
      expect(err).toBeInstanceOf(RateLimitedError);
      const wait = (err as RateLimitedError).retryAt.getTime() - before;
      expect(wait).toBeGreaterThan(0);
      expect(wait).toBeLessThanOrEqual(15 * 60_000 + 1000);
    } finally {
      fake.rateLimits = {};
    }
  });

  test('rateLimitResetAt reads the "short, long" pairs', () => {
    const now = new Date('2026-01-01T00:00:00Z');
    const h = (usage: string, limit: string, reset: string) => new Headers({ 'RateLimit-Usage': usage, 'RateLimit-Limit': limit, 'RateLimit-Reset': reset });
    expect(polarRateLimitResetAt(h('521, 900', '520, 5100', '300, 70000'), now)).toEqual(new Date('2026-01-01T00:05:00Z'));
    expect(polarRateLimitResetAt(h('30, 5101', '520, 5100', '300, 70000'), now)).toEqual(new Date(now.getTime() + 70_000_000));
    expect(polarRateLimitResetAt(new Headers(), now)).toBeNull();
  });

  test('5xx is provider_unavailable; a too-long or too-old activity range is refused by the fake (400)', async () => {
    fake.fail({ path: '/v3/users/sleep', status: 503 });
    const err = await rejection(integration.fetchPage(ctx, 'sleep', integration.firstPage('sleep', windowOf(7, 0))!));
    expect((err as ProviderFetchError).errorType).toBe('provider_unavailable');

    const today = localToday(0);
    const tooLong = await rejection(
      integration.fetchPage(ctx, 'activity', { from: addDays(today, -28), to: today, start: addDays(today, -28), end: today, tz: 0 }),
    );
    expect((tooLong as ProviderFetchError).errorType).toBe('non_retriable_error');
    expect((tooLong as Error).message).toContain('28 days');
    const tooOld = await rejection(
      integration.fetchPage(ctx, 'activity', {
        from: addDays(today, -400),
        to: addDays(today, -390),
        start: addDays(today, -400),
        end: addDays(today, -390),
        tz: 0,
      }),
    );
    expect((tooOld as Error).message).toContain('365');
  });
});

// ---- Webhooks and pushes -----------------------------------------------------------------------------------------

describe('webhooks', () => {
  let ctx: ProviderCallContext;
  let user: PolarFakeUser;
  const clientCtx = () => ({ http: createProviderHttp({ integration, baseUrl: fake.url, client: FAKE_POLAR_CLIENT }) });

  beforeAll(async () => {
    ({ ctx, user } = await connectNewUser({ zoneOffsetSeconds: TZ }));
    fake.webhook = null;
    delete pushSecrets.webhookSecret;
  });

  test('creation fails when the PING is not answered 200', async () => {
    const err = await rejection(createWebhook(clientCtx(), { url: `${receiverUrl}/broken` }));
    expect((err as ProviderFetchError).errorType).toBe('non_retriable_error');
    expect(fake.pings.at(-1)).toEqual({ url: `${receiverUrl}/broken`, status: 500 });
    expect(fake.webhook).toBeNull();
  });

  test('creation PINGs the URL (answered 200 before the secret is known) and returns the signing key once', async () => {
    const seen = received.length;
    const created = await createWebhook(clientCtx(), { url: `${receiverUrl}/hook` });
    expect(received.slice(seen)).toEqual([{ path: '/hook', event: 'PING', verified: true, notifications: [{ kind: 'ping' }] }]);
    expect(created.signature_secret_key).toEqual(expect.any(String));
    expect(created.events).toEqual(['EXERCISE', 'SLEEP', 'CONTINUOUS_HEART_RATE', 'ACTIVITY_SUMMARY']);
    const request = fake.requestsTo('/v3/webhooks').at(-1)!;
    expect(request.headers.authorization).toMatch(/^Basic /);
    pushSecrets.webhookSecret = created.signature_secret_key;

    const info = await getWebhook(clientCtx());
    expect(info).toEqual({ id: created.id, events: created.events, url: `${receiverUrl}/hook`, active: true });
    expect(JSON.stringify(info)).not.toContain(created.signature_secret_key);
    // One webhook per client.
    expect(((await rejection(createWebhook(clientCtx(), { url: `${receiverUrl}/hook` }))) as Error).message).toContain('409');
    // Re-activation after Polar deactivated it PINGs again.
    fake.webhook!.active = false;
    expect(await activateWebhook(clientCtx())).toBe(true);
    expect(fake.webhook!.active).toBe(true);
    expect(received.at(-1)!.event).toBe('PING');
  });

  test('a signed EXERCISE push verifies and names the exercise; fetchObject maps it', async () => {
    const exercise = Array.from({ length: 25 }, (_, i) => fake.exercisesFor(user.id, addDays(localToday(TZ), -1 - i))).flat()[0];
    expect(exercise).toBeDefined();
    const seen = received.length;
    expect((await fake.sendPush(null, { event: 'EXERCISE', userId: user.id, entityId: exercise.id! })).status).toBe(200);
    const [push] = received.slice(seen);
    expect(push.verified).toBe(true);
    expect(push.notifications).toEqual([
      { kind: 'data', externalUserId: user.id, resource: 'workouts', objectId: exercise.id, dedupeKey: expect.stringContaining(exercise.id!) },
    ]);
    const data = await integration.fetchObject!(ctx, 'workouts', exercise.id!, TZ);
    expect(data.summaries.map((s) => s.source_key)).toEqual([exercise.id]);
    expect(data.workout_streams).toHaveLength(1);
  });

  test('parse: each event names its user and the pull unit and day to fetch; SleepWise is ignored', async () => {
    const parse = (spec: Parameters<FakePolar['signedPush']>[0]) => {
      const { body, headers } = fake.signedPush(spec);
      const req: PushRequest = {
        method: 'POST',
        query: {},
        headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])),
        rawBody: Buffer.from(body),
      };
      expect(integration.push!.verify(req, pushSecrets, new Date())).toBe(true);
      return integration.push!.parse(req);
    };
    expect(parse({ event: 'CONTINUOUS_HEART_RATE', userId: user.id, date: '2026-01-02' })).toEqual([
      expect.objectContaining({ kind: 'data', externalUserId: user.id, resource: 'heartrate', window: { startDate: '2026-01-02', endDate: '2026-01-02' } }),
    ]);
    expect(parse({ event: 'ACTIVITY_SUMMARY', userId: user.id, date: '2026-01-02' })).toEqual([
      expect.objectContaining({ resource: 'activity', window: { startDate: '2026-01-02', endDate: '2026-01-02' } }),
    ]);
    expect(parse({ event: 'SLEEP_WISE_ALERTNESS', userId: user.id, from: '2026-01-01', to: '2026-01-02' })).toEqual([]);
    expect(parse({ event: 'PING' })).toEqual([{ kind: 'ping' }]);
    const a = parse({ event: 'SLEEP', userId: user.id, date: '2026-01-02' });
    expect(a.map((n) => n.kind === 'data' && n.resource)).toEqual(['sleep', 'hrv']);
  });

  test('forged, tampered, unsigned, mismatched and stale pushes are refused', async () => {
    const spec = { event: 'EXERCISE' as const, userId: user.id, entityId: 'ABC123' };
    const verify = (body: string, headers: Record<string, string>, now = new Date()) =>
      integration.push!.verify(
        { method: 'POST', query: {}, headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])), rawBody: Buffer.from(body) },
        pushSecrets,
        now,
      );
    const good = fake.signedPush(spec);
    expect(verify(good.body, good.headers)).toBe(true);

    const forged = fake.signedPush(spec, { secret: 'not-the-key' });
    expect(verify(forged.body, forged.headers)).toBe(false);
    expect(verify(good.body.replace('ABC123', 'ABC124'), good.headers)).toBe(false);
    const unsigned = Object.fromEntries(Object.entries(good.headers).filter(([k]) => k !== 'Polar-Webhook-Signature'));
    expect(verify(good.body, unsigned)).toBe(false);
    expect(verify(good.body, { ...good.headers, 'Polar-Webhook-Event': 'SLEEP' })).toBe(false);
    expect(
      integration.push!.verify(
        {
          method: 'POST',
          query: {},
          headers: { 'polar-webhook-signature': polarSignature(pushSecrets.webhookSecret!, good.body) },
          rawBody: Buffer.from(good.body),
        },
        { clientSecret: 'x' },
        new Date(),
      ),
    ).toBe(false); // no key stored

    const stale = fake.signedPush(spec, { timestamp: new Date(Date.now() - 6 * 60_000).toISOString() });
    expect(verify(stale.body, stale.headers)).toBe(false);
    const recent = fake.signedPush(spec, { timestamp: new Date(Date.now() - 4 * 60_000).toISOString() });
    expect(verify(recent.body, recent.headers)).toBe(true);

    // Over HTTP too: the receiver answers 401 and parses nothing.
    const seen = received.length;
    expect((await fake.sendPush(null, spec, { secret: 'not-the-key' })).status).toBe(401);
    expect(received.slice(seen)).toEqual([expect.objectContaining({ verified: false, notifications: [] })]);
  });
  test('deactivate, delete, and activate or get with no webhook', async () => {
    const hook = (await getWebhook(clientCtx()))!;
    expect(await deactivateWebhook(clientCtx())).toBe(true);
    expect((await getWebhook(clientCtx()))!.active).toBe(false);
    await deleteWebhook(clientCtx(), hook.id);
    expect(fake.webhook).toBeNull();
    expect(await getWebhook(clientCtx())).toBeNull();
    expect(await activateWebhook(clientCtx())).toBe(false);
    await expect(deleteWebhook(clientCtx(), hook.id)).resolves.toBeUndefined(); // already gone (404)
  });
});

// ---- Deregistration and registration-bound data ------------------------------------------------------------------

describe('revoke and data uploaded before registration', () => {
  test('revoke deregisters the user and revokes the token; a second revoke is a no-op', async () => {
    const { ctx, user } = await connectNewUser();
    await integration.revoke!(ctx);
    const del = fake.requestsTo(`/v3/users/${user.id}`, user.id).find((r) => r.method === 'DELETE')!;
    expect(del.status).toBe(204);
    expect((fake.users.get(user.id) as PolarFakeUser).registered).toBe(false);
    expect(fake.tokensOf(user.id).active).toEqual([]);
    const err = await rejection(pull(ctx, 'sleep', windowOf(7, 0)));
    expect((err as ProviderFetchError).errorType).toBe('provider_credential_error');
    await expect(integration.revoke!(ctx)).resolves.toBeUndefined();
  });

  test("as AccessLink (the fake's default): a new connection finds no history, then gets what is uploaded after its registration", async () => {
    const byDefault = new FakePolar();
    expect(byDefault.preRegistrationHistory).toBe(false);
    fake.preRegistrationHistory = byDefault.preRegistrationHistory;
    try {
      const { ctx, user } = await connectNewUser({ zoneOffsetSeconds: TZ });
      const window = windowOf(30, TZ);
      for (const resource of ['activity', 'sleep', 'hrv', 'workouts', 'heartrate', 'blood_oxygen']) {
        const { data } = await pull(ctx, resource, window);
        expect([resource, data.summaries.length, data.samples.length]).toEqual([resource, 0, 0]);
      }
      // The physical information recorded at registration is new data: it is served.
      expect((await pull(ctx, 'body', window)).data.summaries).toHaveLength(1);
      expect(fake.servedCount(user.id).sleep ?? 0).toBe(0);

      // Three days on, the days since the registration have been uploaded: those, and only those, are served.
      const registeredAt = (fake.users.get(user.id) as PolarFakeUser).registeredAt!;
      fake.now = () => Date.now() + 3 * DAY;
      const later = windowOf(30, TZ, new Date(fake.now() + TZ * 1000).toISOString().slice(0, 10));
      const { data } = await pull(ctx, 'activity', later);
      const days = data.summaries.map((s) => s.calendar_date).sort();
      expect(days.length).toBeGreaterThanOrEqual(2);
      // The first day uploaded after the registration: a day's upload comes an hour after it ends (the fake's
      // dayUpload), so a registration in the first hour of a local day still gets the day before.
      expect(days[0]).toBe(new Date(registeredAt + TZ * 1000 - 3_600_000).toISOString().slice(0, 10));
    } finally {
      fake.preRegistrationHistory = true;
      fake.now = () => Date.now();
    }
  });
});
