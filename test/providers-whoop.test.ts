import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ProviderData, SampleInput, SummaryInput } from '../lib/wearables/model';
import { ProviderFetchError } from '../lib/wearables/provider-errors';
import {
  OAuthError,
  RateLimitedError,
  type OAuthSettings,
  type PageCursor,
  type ProviderCallContext,
  type PushRequest,
  type PullWindow,
  type TokenSet,
} from '../lib/wearables/providers/contract';
import { createProviderHttp } from '../lib/wearables/providers/http';
import { authorizeUrl, exchangeCode, refreshTokens } from '../lib/wearables/providers/oauth-client';
import type { WhoopCycle, WhoopSleep, WhoopWorkout } from '../lib/wearables/providers/whoop/api-types';
import { integration } from '../lib/wearables/providers/whoop';
import { decodeRecoveries, encodeRecoveries, mapSleep, offsetSeconds } from '../lib/wearables/providers/whoop/mapping';
import { FAKE_WHOOP_CLIENT, startFakeWhoop, type FakeWhoop } from './support/fakes/whoop';

/**
 * The WHOOP v2 integration against the loopback fake of WHOOP's public API: OAuth by real HTTP (consent page, code,
 * exchange, rotating refresh), every pull unit page by page over a 90-day window, the mapping traps (RMSSD, offsets
 * applied once, stable keys across re-scoring), rate limits, errors, signed pushes and revocation.
 */
const REDIRECT_URI = 'https://healthbridge.example/v2/link/oauth/callback/whoop_v2';
const CLIENT = { ...FAKE_WHOOP_CLIENT, redirectUri: REDIRECT_URI };
const DAY = 86_400_000;
const NEW_YORK_SUMMER = -4 * 3600;
const KOLKATA = 5.5 * 3600;

const unescapeHtml = (s: string) =>
  s
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

/** Opens the authorize URL like a browser, submits the consent form, answers the redirect target. */
async function consent(
  fake: FakeWhoop,
  settings: OAuthSettings = integration.oauth,
  decision: 'approve' | 'deny' = 'approve',
  state = 'state-0123456789',
): Promise<URL> {
  const page = await fetch(authorizeUrl(settings, CLIENT, state, { baseUrl: fake.url }), { redirect: 'manual' });
  if (page.status === 302) return new URL(page.headers.get('location')!);
  expect(page.status).toBe(200);
  const html = await page.text();
  const action = /<form method="post" action="([^"]+)"/.exec(html)![1];
  const fields = [...html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)].map((m): [string, string] => [
    unescapeHtml(m[1]),
    unescapeHtml(m[2]),
  ]);
  const answer = await fetch(new URL(unescapeHtml(action), fake.url), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams([...fields, ['decision', decision]]).toString(),
    redirect: 'manual',
  });
  expect(answer.status).toBe(302);
  return new URL(answer.headers.get('location')!);
}

async function connect(fake: FakeWhoop, userId: string, settings: OAuthSettings = integration.oauth): Promise<TokenSet> {
  fake.nextConsentUser = userId;
  const back = await consent(fake, settings);
  expect(back.searchParams.get('state')).toBe('state-0123456789');
  const code = back.searchParams.get('code');
  expect(code).toBeTruthy();
  return exchangeCode(settings, CLIENT, code!, { baseUrl: fake.url });
}

function contextFor(fake: FakeWhoop, accessToken: string, now?: () => Date): ProviderCallContext {
  return {
    http: createProviderHttp({ integration, baseUrl: fake.url, client: FAKE_WHOOP_CLIENT, accessToken: async () => accessToken, now }),
    externalUserId: null,
    tokenExtras: {},
    client: FAKE_WHOOP_CLIENT,
  };
}

/** The last `days` local days up to today in the offset, as the workflow builds a pull window. */
function windowOf(days: number, tz: number, now = Date.now()): PullWindow {
  const today = new Date(now + tz * 1000).toISOString().slice(0, 10);
  const endMs = Date.parse(`${today}T00:00:00Z`) + DAY - tz * 1000;
  const startMs = endMs - days * DAY;
  const date = (ms: number) => new Date(ms + tz * 1000).toISOString().slice(0, 10);
  return { startDate: date(startMs), endDate: today, start: new Date(startMs), end: new Date(endMs), timezoneOffsetSeconds: tz };
}

/** Pulls a unit page by page, checking each page is one request and each cursor small and flat. */
async function pull(
  fake: FakeWhoop,
  ctx: ProviderCallContext,
  resource: string,
  window: PullWindow,
): Promise<{ data: ProviderData; pages: number; paths: string[] }> {
  const data: ProviderData = { source_type: '', summaries: [], samples: [], workout_streams: [] };
  const paths: string[] = [];
  let cursor: PageCursor | null = integration.firstPage(resource, window);
  let pages = 0;
  while (cursor) {
    for (const v of Object.values(cursor)) expect(['string', 'number'].includes(typeof v) || v === null).toBe(true);
    expect(JSON.stringify(cursor).length).toBeLessThan(4000);
    const before = fake.requests.length;
    const page = await integration.fetchPage(ctx, resource, cursor);
    expect(fake.requests.length - before).toBe(1);
    paths.push(fake.requests[fake.requests.length - 1].path);
    data.source_type = page.data.source_type;
    data.summaries.push(...page.data.summaries);
    data.samples.push(...page.data.samples);
    cursor = page.next;
    if (++pages > 200) throw new Error('paging does not end');
  }
  return { data, pages, paths };
}

const byKey = (summaries: SummaryInput[], resource: string) => new Map(summaries.filter((s) => s.resource === resource).map((s) => [s.source_key, s]));
const samplesOf = (samples: SampleInput[], resource: string) => samples.filter((s) => s.resource === resource);
/** The day a cycle stands for: its onset is 22:00–00:30 local, so an evening onset belongs to the next day. */
function cycleDay(c: WhoopCycle): string {
  const onset = wallClock(c.start, c.timezone_offset);
  return Number(onset.slice(11, 13)) >= 12 ? new Date(Date.parse(onset.slice(0, 10)) + DAY).toISOString().slice(0, 10) : onset.slice(0, 10);
}
const kcal = (kj: number) => Math.round((kj / 4.184) * 10) / 10;
/** Independent of the module: the local wall clock of a UTC instant in ±hh:mm, seconds precision. */
function wallClock(utc: string, tzd: string): string {
  const sign = tzd === 'Z' ? 1 : tzd.startsWith('-') ? -1 : 1;
  const [h, m] = tzd === 'Z' ? [0, 0] : tzd.slice(1).split(':').map(Number);
  const shifted = new Date(Date.parse(utc) + sign * (h * 60 + m) * 60_000).toISOString().slice(0, 19);
  return `${shifted}${tzd === 'Z' ? '+00:00' : tzd}`;
}

describe('WHOOP v2 integration against the fake WHOOP API', () => {
  let fake: FakeWhoop;
  let receiver: Server;
  let receiverUrl: string;
  const received: PushRequest[] = [];

  beforeAll(async () => {
    fake = await startFakeWhoop();
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]));
        received.push({ method: req.method ?? 'POST', query: {}, headers, rawBody: Buffer.concat(chunks) });
        res.writeHead(200).end('{}');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/v2/providers/whoop_v2/webhook`;
  });

  afterAll(async () => {
    await fake.close();
    await new Promise((resolve) => receiver.close(resolve));
  });

  describe('OAuth', () => {
    test('the authorize URL asks for every read scope and offline, space-separated, with the client in the token body', async () => {
      const url = new URL(authorizeUrl(integration.oauth, CLIENT, 'state-0123456789', {}));
      expect(`${url.origin}${url.pathname}`).toBe('https://api.prod.whoop.com/oauth/oauth2/auth');
      expect(url.searchParams.get('scope')!.split(' ').sort()).toEqual([
        'offline',
        'read:body_measurement',
        'read:cycles',
        'read:profile',
        'read:recovery',
        'read:sleep',
        'read:workout',
      ]);
      expect(integration.oauth.tokenUrl).toBe('https://api.prod.whoop.com/oauth/oauth2/token');
      expect(integration.oauth.clientAuth).toBe('body');
      expect(integration.historyDays).toBe(90);
    });

    test('consent, code exchange and the WHOOP user id; the code works once', async () => {
      const user = fake.addUser({ zoneOffsetSeconds: NEW_YORK_SUMMER });
      fake.nextConsentUser = user.id;
      const back = await consent(fake);
      const code = back.searchParams.get('code')!;
      const tokens = await exchangeCode(integration.oauth, CLIENT, code, { baseUrl: fake.url });
      expect(tokens.access_token).toMatch(/^at_/);
      expect(tokens.refresh_token).toMatch(/^rt_/);
      expect(tokens.expires_at!.getTime() - Date.now()).toBeGreaterThan(3590_000);
      expect(tokens.expires_at!.getTime() - Date.now()).toBeLessThanOrEqual(3600_000);
      const exchange = fake.requestsTo('/oauth/oauth2/token').at(-1)!;
      expect(new URLSearchParams(exchange.body).get('client_secret')).toBe(FAKE_WHOOP_CLIENT.clientSecret);
      expect(exchange.headers.authorization).toBeUndefined();
      const who = await integration.afterConnect!(contextFor(fake, tokens.access_token));
      expect(who.externalUserId).toBe(user.id);
      expect(Number.isInteger(Number(who.externalUserId))).toBe(true);
      await expect(exchangeCode(integration.oauth, CLIENT, code, { baseUrl: fake.url })).rejects.toMatchObject({ error: 'invalid_grant' });
    });

    test('a denied consent comes back with access_denied and no code; a weak state is refused', async () => {
      const denied = await consent(fake, integration.oauth, 'deny');
      expect(denied.searchParams.get('error')).toBe('access_denied');
      expect(denied.searchParams.get('code')).toBeNull();
      const weak = await consent(fake, integration.oauth, 'approve', 'short');
      expect(weak.searchParams.get('error')).toBe('invalid_state');
      expect(weak.searchParams.get('code')).toBeNull();
    });

    test('without the offline scope WHOOP issues no refresh token', async () => {
      const user = fake.addUser();
      const online = { ...integration.oauth, scopes: integration.oauth.scopes.filter((s) => s !== 'offline') };
      const tokens = await connect(fake, user.id, online);
      expect(tokens.access_token).toBeTruthy();
      expect(tokens.refresh_token).toBeNull();
      expect(fake.validRefreshTokens(user.id)).toEqual([]);
    });

    test('a refresh rotates the pair: the old refresh token and its access token are refused at once', async () => {
      const user = fake.addUser();
      const first = await connect(fake, user.id);
      const second = await refreshTokens(integration.oauth, FAKE_WHOOP_CLIENT, first.refresh_token!, { baseUrl: fake.url });
      expect(second.refresh_token).toBeTruthy();
      expect(second.refresh_token).not.toBe(first.refresh_token);
      expect(second.access_token).not.toBe(first.access_token);
      // WHOOP's tutorials send scope=offline with the refresh.
      expect(new URLSearchParams(fake.requestsTo('/oauth/oauth2/token').at(-1)!.body).get('scope')).toBe('offline');
      expect(fake.refreshTokenValid(first.refresh_token!)).toBe(false);
      expect(fake.refreshTokenValid(second.refresh_token!)).toBe(true);
      expect(fake.accessTokenValid(first.access_token)).toBe(false);
      const reuse = refreshTokens(integration.oauth, FAKE_WHOOP_CLIENT, first.refresh_token!, { baseUrl: fake.url });
      await expect(reuse).rejects.toBeInstanceOf(OAuthError);
      await expect(reuse).rejects.toMatchObject({ error: 'invalid_grant' });
      // The old access token is refused (401 → credential error); the new one works.
      await expect(integration.afterConnect!(contextFor(fake, first.access_token))).rejects.toMatchObject({ errorType: 'provider_credential_error' });
      expect((await integration.afterConnect!(contextFor(fake, second.access_token))).externalUserId).toBe(user.id);
    });

    test('two refreshes racing with one refresh token: one wins, the other is invalid_grant; the fake counts both', async () => {
      const user = fake.addUser();
      const tokens = await connect(fake, user.id);
      const calls = fake.tokenEndpointCalls('refresh_token');
      const reuses = fake.refreshTokenReuses;
      const results = await Promise.allSettled(
        [0, 1].map(() => refreshTokens(integration.oauth, FAKE_WHOOP_CLIENT, tokens.refresh_token!, { baseUrl: fake.url })),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const lost = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(lost.reason).toMatchObject({ error: 'invalid_grant' });
      expect(fake.tokenEndpointCalls('refresh_token')).toBe(calls + 2);
      expect(fake.refreshTokenReuses).toBe(reuses + 1);
      expect(fake.validRefreshTokens(user.id)).toHaveLength(1);
    });
  });

  describe('pulling a 90-day window', () => {
    let userId: string;
    let ctx: ProviderCallContext;
    const window = () => windowOf(90, NEW_YORK_SUMMER);

    beforeAll(async () => {
      userId = fake.addUser({ zoneOffsetSeconds: NEW_YORK_SUMMER }).id;
      const tokens = await connect(fake, userId);
      ctx = contextFor(fake, tokens.access_token);
    });

    beforeEach(() => fake.resetServed(userId));

    test('sleep: every served sleep lands once per serving, joined with its recovery (HRV as RMSSD), offsets applied once', async () => {
      const w = window();
      const { data, pages, paths } = await pull(fake, ctx, 'sleep', w);
      // Chunks of 18 days: a recovery page then a sleep page each.
      expect(pages).toBe(2 * 5);
      expect(paths.filter((p) => p === '/developer/v2/recovery')).toHaveLength(5);
      expect(paths.filter((p) => p === '/developer/v2/activity/sleep')).toHaveLength(5);
      expect(fake.requestsTo(/^\/developer\/v2\/(recovery|activity\/sleep)$/, userId).every((r) => r.query.limit === '25')).toBe(true);
      expect(data.source_type).toBe('watch');

      // Unscored sleeps (the fake makes a few) have no stage times: no sleep summary until WHOOP scores them.
      const expected = fake.records(userId, 'sleep', w.start, w.end).filter((s) => s.score_state === 'SCORED');
      expect(expected.length).toBeGreaterThanOrEqual(80);
      const sleeps = data.summaries.filter((s) => s.resource === 'sleep');
      const servedScored = fake.servedIds(userId, 'sleep').filter((id) => expected.some((s) => s.id === id));
      expect(sleeps).toHaveLength(servedScored.length);
      const mapped = byKey(data.summaries, 'sleep');
      expect([...mapped.keys()].sort()).toEqual(expected.map((s) => s.id).sort());
      expect(new Set(servedScored)).toEqual(new Set(mapped.keys()));

      let joined = 0;
      for (const raw of expected) {
        const s = mapped.get(raw.id)!;
        expect(s.time).toBe(new Date(raw.start).toISOString());
        expect(s.fields.bedtime_start).toBe(wallClock(raw.start, raw.timezone_offset));
        expect(s.fields.bedtime_stop).toBe(wallClock(raw.end!, raw.timezone_offset));
        expect(s.fields.timezone_offset).toBe(NEW_YORK_SUMMER);
        expect(s.calendar_date).toBe(wallClock(raw.end!, raw.timezone_offset).slice(0, 10));
        expect(s.fields.type).toBe(raw.nap ? 'short_sleep' : 'long_sleep');
        expect(s.fields.duration).toBe((Date.parse(raw.end!) - Date.parse(raw.start)) / 1000);
        if (raw.score) {
          const st = raw.score.stage_summary;
          expect(s.fields.deep).toBe(Math.round(st.total_slow_wave_sleep_time_milli / 1000));
          expect(s.fields.rem).toBe(Math.round(st.total_rem_sleep_time_milli / 1000));
          expect(s.fields.light).toBe(Math.round(st.total_light_sleep_time_milli / 1000));
          expect(s.fields.awake).toBe(Math.round(st.total_awake_time_milli / 1000));
          expect(s.fields.total).toBe((s.fields.deep as number) + (s.fields.rem as number) + (s.fields.light as number));
          expect(s.fields.efficiency).toBe(raw.score.sleep_efficiency_percentage);
          expect(s.fields.respiratory_rate).toBe(raw.score.respiratory_rate);
        }
        const recovery = fake.recoveryOfSleep(userId, raw.id);
        if (recovery?.score) {
          joined++;
          expect(s.fields.average_hrv).toBe(recovery.score.hrv_rmssd_milli);
          expect(s.fields.hr_resting).toBe(Math.round(recovery.score.resting_heart_rate));
          expect(s.fields.recovery_readiness_score).toBe(recovery.score.recovery_score);
          expect(s.fields.skin_temperature).toBe(recovery.score.skin_temp_celsius);
          const hrv = samplesOf(data.samples, 'hrv').find((x) => x.timestamp === new Date(raw.end!).toISOString())!;
          expect(hrv).toMatchObject({ unit: 'rmssd', value: recovery.score.hrv_rmssd_milli, timezone_offset: NEW_YORK_SUMMER });
          const spo2 = samplesOf(data.samples, 'blood_oxygen').find((x) => x.timestamp === new Date(raw.end!).toISOString())!;
          expect(spo2).toMatchObject({ unit: '%', value: recovery.score.spo2_percentage });
          const temp = samplesOf(data.samples, 'body_temperature').find((x) => x.start === new Date(raw.start).toISOString())!;
          expect(temp).toMatchObject({ unit: '°C', type: 'skin', end: new Date(raw.end!).toISOString(), value: recovery.score.skin_temp_celsius });
        } else {
          expect(s.fields.average_hrv).toBeNull();
        }
      }
      // Every primary sleep has its recovery joined, naps none.
      expect(joined).toBe(expected.filter((s) => !s.nap && fake.recoveryOfSleep(userId, s.id)).length);
      expect(joined).toBeGreaterThanOrEqual(85);
      expect(new Set(samplesOf(data.samples, 'hrv').map((x) => x.timestamp)).size).toBe(joined);
      expect(samplesOf(data.samples, 'respiratory_rate').every((x) => x.unit === 'bpm')).toBe(true);
      expect(data.samples.some((x) => x.resource === 'heartrate' || x.resource === 'steps')).toBe(false);
    });

    test('activity: one summary per served cycle, kcal from kJ, the day of the cycle after its evening onset', async () => {
      const w = window();
      const { data, pages } = await pull(fake, ctx, 'activity', w);
      const cycles = fake.records(userId, 'cycle', w.start, w.end);
      expect(pages).toBe(Math.ceil(cycles.length / 25));
      expect(fake.servedCount(userId).cycle).toBe(cycles.length);
      const days = byKey(data.summaries, 'activity');
      expect(data.summaries).toHaveLength(cycles.length);
      for (const c of cycles) {
        const day = cycleDay(c);
        const a = days.get(day)!;
        expect(a).toBeDefined();
        expect(a.calendar_date).toBe(day);
        expect(a.time).toBe(new Date(Date.parse(`${day}T00:00:00Z`) - NEW_YORK_SUMMER * 1000).toISOString());
        expect(a.fields.calories_total).toBe(kcal(c.score!.kilojoule));
        expect(a.fields.heart_rate).toEqual({ avg_bpm: c.score!.average_heart_rate, min_bpm: null, max_bpm: c.score!.max_heart_rate, resting_bpm: null });
        expect(a.fields.steps).toBeNull();
      }
      // The cycle running now has no end and still maps.
      expect(cycles.filter((c) => !c.end)).toHaveLength(1);
    });

    test('workouts: every served workout, kcal from kJ, zones in seconds, sport by slug, local times', async () => {
      const w = window();
      const { data } = await pull(fake, ctx, 'workouts', w);
      const raw = fake.records(userId, 'workout', w.start, w.end);
      expect(raw.length).toBeGreaterThan(30);
      expect(fake.servedCount(userId).workout).toBe(raw.length);
      const mapped = byKey(data.summaries, 'workouts');
      expect(mapped.size).toBe(raw.length);
      for (const r of raw) {
        const m = mapped.get(r.id)!;
        expect(m.time).toBe(new Date(r.start).toISOString());
        expect(m.fields.time_start).toBe(wallClock(r.start, r.timezone_offset));
        expect(m.fields.time_end).toBe(wallClock(r.end, r.timezone_offset));
        expect(m.calendar_date).toBe(wallClock(r.start, r.timezone_offset).slice(0, 10));
        expect(m.fields.provider_id).toBe(r.id);
        expect((m.fields.sport as { slug: string }).slug).toBe(r.sport_name.replace(/-/g, '_'));
        if (r.score) {
          expect(m.fields.calories).toBe(kcal(r.score.kilojoule));
          expect(m.fields.average_hr).toBe(r.score.average_heart_rate);
          expect(m.fields.max_hr).toBe(r.score.max_heart_rate);
          expect(m.fields.distance).toBe(r.score.distance_meter ?? null);
          const zones = m.fields.hr_zones as number[];
          expect(zones).toHaveLength(6);
          expect(zones.reduce((a, b) => a + b, 0)).toBeCloseTo((Date.parse(r.end) - Date.parse(r.start)) / 1000, -1);
        } else {
          expect(m.fields.calories).toBeNull();
          expect(m.fields.hr_zones).toBeNull();
        }
      }
      const hiking = [...mapped.values()].find((m) => (m.fields.sport as { slug: string }).slug === 'hiking_rucking');
      expect(hiking?.fields.sport).toEqual({ id: 52, name: 'Hiking Rucking', slug: 'hiking_rucking' });
    });

    test('body: one request, weight and BMI for today, height in whole centimetres for the profile', async () => {
      fake.setBodyMeasurement(userId, { height_meter: 1.8288, weight_kilogram: 90.7185, max_heart_rate: 200 });
      const w = window();
      const { data, pages } = await pull(fake, ctx, 'body', w);
      expect(pages).toBe(1);
      const today = w.endDate;
      expect(byKey(data.summaries, 'body').get(today)!.fields).toMatchObject({ weight: 90.7185, body_mass_index: 27.1, calendar_date: today });
      expect(byKey(data.summaries, 'profile').get('profile')!.fields).toMatchObject({ height: 183 });
      expect(fake.servedCount(userId).body_measurement).toBe(1);
      // A window that ended days ago has no measurement of its own to ask for.
      expect(integration.firstPage('body', windowOf(7, NEW_YORK_SUMMER, Date.now() - 10 * DAY))).toBeNull();
    });

    test('a chunk with more than 25 sleeps and recoveries pages inside it and still joins every recovery', async () => {
      const busy = fake.addUser({ zoneOffsetSeconds: NEW_YORK_SUMMER }).id;
      const busyCtx = contextFor(fake, (await connect(fake, busy)).access_token);
      const w = windowOf(18, NEW_YORK_SUMMER);
      // Nights whose recovery is out (WHOOP scores it minutes after waking: a night that just ended may have none yet).
      const nights = fake.records(busy, 'sleep', w.start, w.end).filter((s) => !s.nap && fake.recoveryOfSleep(busy, s.id));
      // An afternoon sleep with its own recovery after each night, as for a shift worker: 2 sleeps and 2 recoveries a day.
      nights.forEach((night, i) => {
        const id = randomUUID();
        const start = Date.parse(night.end!) + 8 * 3_600_000;
        fake.putRecord(busy, 'sleep', {
          ...night,
          id,
          cycle_id: 7_000_000 + i,
          start: new Date(start).toISOString(),
          end: new Date(start + 3 * 3_600_000).toISOString(),
        });
        const recovery = fake.recoveryOfSleep(busy, night.id)!;
        fake.putRecord(busy, 'recovery', { ...recovery, cycle_id: 7_000_000 + i, sleep_id: id, score: { ...recovery.score!, hrv_rmssd_milli: 200 + i } });
      });
      const { data, paths } = await pull(fake, busyCtx, 'sleep', w);
      expect(paths.filter((p) => p === '/developer/v2/recovery').length).toBeGreaterThanOrEqual(2);
      expect(paths.filter((p) => p === '/developer/v2/activity/sleep').length).toBeGreaterThanOrEqual(2);
      const mapped = byKey(data.summaries, 'sleep');
      const expected = fake.records(busy, 'sleep', w.start, w.end).filter((s) => s.score_state === 'SCORED');
      expect(expected.length).toBeGreaterThan(25);
      expect([...mapped.keys()].sort()).toEqual(expected.map((s) => s.id).sort());
      for (const s of expected) {
        const recovery = fake.recoveryOfSleep(busy, s.id);
        expect(mapped.get(s.id)!.fields.average_hrv).toBe(recovery?.score?.hrv_rmssd_milli ?? null);
      }
    });

    test('an unscored (PENDING_SCORE) sleep is no sleep summary (its stage times are unknown) until it is scored; then it is one, keyed by its id', async () => {
      const w = window();
      const target = fake.records(userId, 'sleep', w.start, w.end).find((s) => !s.nap && fake.recoveryOfSleep(userId, s.id))!;
      fake.setScoreState(userId, 'sleep', target.id, 'PENDING_SCORE');
      fake.setScoreState(userId, 'recovery', target.id, 'PENDING_SCORE');
      const pending = await pull(fake, ctx, 'sleep', w);
      expect(byKey(pending.data.summaries, 'sleep').has(target.id)).toBe(false);
      expect(byKey(pending.data.summaries, 'sleep').size).toBeGreaterThan(0); // the scored ones are there
      expect(pending.data.samples.some((x) => x.timestamp === new Date(target.end!).toISOString())).toBe(false);

      fake.setScoreState(userId, 'sleep', target.id, 'SCORED');
      fake.setScoreState(userId, 'recovery', target.id, 'SCORED');
      // The recovery.updated push names the sleep; the fetch joins the recovery.
      const before = fake.requests.length;
      const scored = await integration.fetchObject!(ctx, 'sleep', target.id, 0);
      expect(fake.requests.slice(before).map((r) => r.path)).toEqual([
        `/developer/v2/activity/sleep/${target.id}`,
        `/developer/v2/cycle/${target.cycle_id}/recovery`,
      ]);
      expect(scored.summaries).toHaveLength(1);
      const s = scored.summaries[0];
      expect(s.source_key).toBe(target.id);
      expect(s.fields.state).toBe('confirmed');
      expect(s.fields.bedtime_start).toBe(wallClock(target.start, target.timezone_offset));
      expect(s.fields.duration).toBe((Date.parse(target.end!) - Date.parse(target.start)) / 1000);
      expect(s.fields.total).toBeGreaterThan(3 * 3600);
      expect(s.fields.average_hrv).toBe(fake.recoveryOfSleep(userId, target.id)!.score!.hrv_rmssd_milli);
      expect(s.fields.timezone_offset).toBe(NEW_YORK_SUMMER); // the record's own offset, not the fallback 0
    });

    test('unscorable workouts and cycles keep their times and leave scored fields null', async () => {
      const w = window();
      const workout = fake.records(userId, 'workout', w.start, w.end)[0];
      const cycle = fake.records(userId, 'cycle', w.start, w.end).find((c) => c.end)!;
      fake.setScoreState(userId, 'workout', workout.id, 'UNSCORABLE');
      fake.setScoreState(userId, 'cycle', cycle.id, 'UNSCORABLE');
      const workouts = byKey((await pull(fake, ctx, 'workouts', w)).data.summaries, 'workouts');
      expect(workouts.get(workout.id)!.fields).toMatchObject({
        calories: null,
        average_hr: null,
        max_hr: null,
        hr_zones: null,
        distance: null,
        time_start: wallClock(workout.start, workout.timezone_offset),
      });
      const activity = (await pull(fake, ctx, 'activity', w)).data.summaries;
      const unscored = activity.filter((a) => a.fields.calories_total === null);
      expect(unscored.map((a) => a.source_key)).toEqual([cycleDay(cycle)]);
      expect(unscored[0].fields.heart_rate).toBeNull();
      fake.setScoreState(userId, 'workout', workout.id, 'SCORED');
      fake.setScoreState(userId, 'cycle', cycle.id, 'SCORED');
    });

    test('fetchObject: a workout in one request; a nap without a recovery request; a deleted object is nothing', async () => {
      const w = window();
      const workout = fake.records(userId, 'workout', w.start, w.end)[0];
      let before = fake.requests.length;
      const one = await integration.fetchObject!(ctx, 'workouts', workout.id, 0);
      expect(fake.requests.length - before).toBe(1);
      expect(one.summaries.map((s) => s.source_key)).toEqual([workout.id]);

      const nap = fake.records(userId, 'sleep', new Date(Date.now() - 400 * DAY), new Date()).find((s) => s.nap);
      expect(nap).toBeDefined();
      before = fake.requests.length;
      const napData = await integration.fetchObject!(ctx, 'sleep', nap!.id, 0);
      expect(fake.requests.length - before).toBe(1);
      expect(napData.summaries[0].fields.type).toBe('short_sleep');

      fake.removeRecord(userId, 'workout', workout.id);
      const gone = await integration.fetchObject!(ctx, 'workouts', workout.id, 0);
      expect(gone.summaries).toEqual([]);
    });

    test('a 5xx is provider_unavailable; a limit over 25 or a forged nextToken is refused by WHOOP', async () => {
      fake.fail({ path: '/developer/v2/cycle', status: 503 });
      const cursor = integration.firstPage('activity', window())!;
      const err = await integration.fetchPage(ctx, 'activity', cursor).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ProviderFetchError);
      expect((err as ProviderFetchError).errorType).toBe('provider_unavailable');

      const token = (await connect(fake, fake.addUser().id)).access_token;
      const tooMany = await fetch(`${fake.url}/developer/v2/activity/sleep?limit=26`, { headers: { authorization: `Bearer ${token}` } });
      expect(tooMany.status).toBe(400);
      const badToken = await fetch(`${fake.url}/developer/v2/activity/sleep?nextToken=nonsense`, { headers: { authorization: `Bearer ${token}` } });
      expect(badToken.status).toBe(400);
      const ok = await fetch(`${fake.url}/developer/v2/activity/sleep`, { headers: { authorization: `Bearer ${token}` } });
      expect(((await ok.json()) as { records: unknown[] }).records).toHaveLength(10); // the default limit
      expect(ok.headers.get('x-ratelimit-limit')).toBe('100, 100;window=60, 10000;window=86400');
      expect(Number(ok.headers.get('x-ratelimit-remaining'))).toBeLessThan(100);
    });
  });

  describe('the spec example, mapped', () => {
    test('the example sleep and recovery: offset -04:00 applied once, May 25 the calendar day, RMSSD 68.4', async () => {
      const user = fake.addUser({ zoneOffsetSeconds: 0 });
      const tokens = await connect(fake, user.id);
      const ctx = contextFor(fake, tokens.access_token);
      // api-evangelist/whoop-co examples/whoop-list-sleep-example.json and whoop-get-recovery-example.json
      const sleep: WhoopSleep = {
        id: 'ecfc6a15-4661-442f-a9a4-f160dd7afae8',
        cycle_id: 93845,
        user_id: Number(user.id),
        created_at: '2026-05-25T07:14:01.137Z',
        updated_at: '2026-05-25T07:14:01.137Z',
        start: '2026-05-24T23:18:00.000Z',
        end: '2026-05-25T06:51:00.000Z',
        timezone_offset: '-04:00',
        nap: false,
        score_state: 'SCORED',
        score: {
          stage_summary: {
            total_in_bed_time_milli: 27180000,
            total_awake_time_milli: 1380000,
            total_no_data_time_milli: 0,
            total_light_sleep_time_milli: 13560000,
            total_slow_wave_sleep_time_milli: 6120000,
            total_rem_sleep_time_milli: 6120000,
            sleep_cycle_count: 4,
            disturbance_count: 6,
          },
          sleep_needed: { baseline_milli: 27395716, need_from_sleep_debt_milli: 1200000, need_from_recent_strain_milli: 850000, need_from_recent_nap_milli: 0 },
          respiratory_rate: 15.86,
          sleep_performance_percentage: 94.1,
          sleep_consistency_percentage: 78.0,
          sleep_efficiency_percentage: 94.9,
        },
      };
      const cycle: WhoopCycle = {
        id: 93845,
        user_id: Number(user.id),
        created_at: '2026-05-24T23:20:00.000Z',
        updated_at: '2026-05-25T23:00:00.000Z',
        start: '2026-05-24T23:18:00.000Z',
        end: '2026-05-25T23:40:00.000Z',
        timezone_offset: '-04:00',
        score_state: 'SCORED',
        score: { strain: 12.2, kilojoule: 8288.297, average_heart_rate: 68, max_heart_rate: 141 },
      };
      fake.putRecord(user.id, 'sleep', sleep);
      fake.putRecord(user.id, 'cycle', cycle);
      fake.putRecord(user.id, 'recovery', {
        cycle_id: 93845,
        sleep_id: sleep.id,
        user_id: Number(user.id),
        created_at: '2026-05-25T07:14:02.000Z',
        updated_at: '2026-05-25T07:14:02.000Z',
        score_state: 'SCORED',
        score: {
          user_calibrating: false,
          recovery_score: 72.5,
          resting_heart_rate: 51.2,
          hrv_rmssd_milli: 68.4,
          spo2_percentage: 96.7,
          skin_temp_celsius: 33.4,
        },
      });

      const data = await integration.fetchObject!(ctx, 'sleep', sleep.id, 3600); // a fallback offset the record's own must win over
      const s = data.summaries[0];
      expect(s).toMatchObject({ resource: 'sleep', source_key: sleep.id, calendar_date: '2026-05-25', time: '2026-05-24T23:18:00.000Z' });
      expect(s.fields).toMatchObject({
        bedtime_start: '2026-05-24T19:18:00-04:00',
        bedtime_stop: '2026-05-25T02:51:00-04:00',
        timezone_offset: -14400,
        date: '2026-05-25T00:00:00+00:00',
        duration: 27180,
        total: 25800,
        awake: 1380,
        light: 13560,
        deep: 6120,
        rem: 6120,
        score: 94,
        efficiency: 94.9,
        respiratory_rate: 15.86,
        average_hrv: 68.4,
        hr_resting: 51,
        recovery_readiness_score: 72.5,
        skin_temperature: 33.4,
        type: 'long_sleep',
        state: 'confirmed',
      });
      expect(data.samples.find((x) => x.resource === 'hrv')).toEqual({
        resource: 'hrv',
        timestamp: '2026-05-25T06:51:00.000Z',
        unit: 'rmssd',
        type: null,
        timezone_offset: -14400,
        value: 68.4,
      });
      expect(data.samples.find((x) => x.resource === 'blood_oxygen')).toMatchObject({ value: 96.7, unit: '%' });

      const day = await integration.fetchObject!(ctx, 'activity', String(cycle.id), 0);
      expect(day.summaries[0]).toMatchObject({ source_key: '2026-05-25', calendar_date: '2026-05-25', time: '2026-05-25T04:00:00.000Z' });
      expect(day.summaries[0].fields).toMatchObject({ calories_total: 1981, timezone_offset: -14400 });

      const workout: WhoopWorkout = {
        id: '0b7c4a8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b',
        user_id: Number(user.id),
        created_at: '2026-05-24T09:42:11.137Z',
        updated_at: '2026-05-24T10:11:24.502Z',
        start: '2026-05-24T08:30:00.000Z',
        end: '2026-05-24T09:32:14.000Z',
        timezone_offset: '-04:00',
        sport_name: 'running',
        score_state: 'SCORED',
        score: {
          strain: 12.4163,
          average_heart_rate: 152,
          max_heart_rate: 178,
          kilojoule: 1832.74,
          percent_recorded: 100,
          distance_meter: 8123.4,
          altitude_gain_meter: 64.2,
          altitude_change_meter: -1.8,
          zone_durations: {
            zone_zero_milli: 0,
            zone_one_milli: 240000,
            zone_two_milli: 540000,
            zone_three_milli: 1500000,
            zone_four_milli: 1380000,
            zone_five_milli: 60000,
          },
        },
      };
      fake.putRecord(user.id, 'workout', workout);
      const w = (await integration.fetchObject!(ctx, 'workouts', workout.id, 0)).summaries[0];
      expect(w).toMatchObject({ source_key: workout.id, calendar_date: '2026-05-24', time: '2026-05-24T08:30:00.000Z' });
      expect(w.fields).toMatchObject({
        title: 'Running',
        time_start: '2026-05-24T04:30:00-04:00',
        time_end: '2026-05-24T05:32:14-04:00',
        sport: { id: 0, name: 'Running', slug: 'running' },
        average_hr: 152,
        max_hr: 178,
        calories: 438,
        distance: 8123.4,
        total_elevation_gain: 64.2,
        hr_zones: [0, 240, 540, 1500, 1380, 60],
        provider_id: workout.id,
      });
    });

    test('UTC users get Z from WHOOP and +00:00 in our fields; an unreadable offset falls back to the user zone', () => {
      expect(offsetSeconds('Z', 3600)).toBe(0);
      expect(offsetSeconds('+05:30', 0)).toBe(KOLKATA);
      expect(offsetSeconds('garbage', 7200)).toBe(7200);
      const base: WhoopSleep = {
        id: 'a',
        cycle_id: 1,
        user_id: 1,
        created_at: '',
        updated_at: '',
        start: '2026-01-01T22:00:00.000Z',
        end: '2026-01-02T06:00:00.000Z',
        timezone_offset: 'Z',
        nap: false,
        score_state: 'SCORED',
        score: {
          stage_summary: {
            total_in_bed_time_milli: 28_800_000,
            total_awake_time_milli: 1_800_000,
            total_no_data_time_milli: 0,
            total_light_sleep_time_milli: 14_400_000,
            total_slow_wave_sleep_time_milli: 5_400_000,
            total_rem_sleep_time_milli: 7_200_000,
            sleep_cycle_count: 4,
            disturbance_count: 3,
          },
        } as WhoopSleep['score'],
      };
      expect(mapSleep({ ...base, score_state: 'UNSCORABLE', score: undefined }, null, 3600).summaries).toEqual([]);
      expect(mapSleep(base, null, 3600).summaries[0].fields.bedtime_start).toBe('2026-01-01T22:00:00+00:00');
      const fallback = mapSleep({ ...base, timezone_offset: '' }, null, 3600).summaries[0];
      expect(fallback.fields).toMatchObject({ bedtime_start: '2026-01-01T23:00:00+01:00', timezone_offset: 3600 });
      // A sleep still in progress (no end) is not mapped yet, and nothing throws.
      expect(mapSleep({ ...base, end: undefined }, null, 0).summaries).toEqual([]);
      const facts = new Map([['x', { recoveryScore: 1, restingHeartRate: 50.5, hrvRmssdMs: 31.813562, spo2Percentage: null, skinTempCelsius: 33.7 }]]);
      expect(decodeRecoveries(encodeRecoveries(facts))).toEqual(facts);
    });

    test('a user east of UTC: +05:30 records keep their half-hour offset', async () => {
      const user = fake.addUser({ zoneOffsetSeconds: KOLKATA });
      const ctx = contextFor(fake, (await connect(fake, user.id)).access_token);
      const w = windowOf(10, KOLKATA);
      const { data } = await pull(fake, ctx, 'sleep', w);
      const sleeps = data.summaries.filter((s) => s.resource === 'sleep');
      expect(sleeps.length).toBeGreaterThanOrEqual(9);
      for (const s of sleeps) {
        expect(s.fields.timezone_offset).toBe(KOLKATA);
        expect(String(s.fields.bedtime_start)).toMatch(/\+05:30$/);
        expect(Date.parse(String(s.fields.bedtime_start))).toBe(Date.parse(s.time));
      }
    });
  });

  describe('rate limits', () => {
    test('WHOOP counts every user of the app together; the 429 names its reset and RateLimitedError carries it', async () => {
      const limited = await startFakeWhoop({ rateLimit: { limit: 3, windowSeconds: 60 } });
      try {
        const a = limited.addUser();
        const b = limited.addUser();
        const ctxA = contextFor(limited, (await connect(limited, a.id)).access_token);
        const ctxB = contextFor(limited, (await connect(limited, b.id)).access_token);
        const cursor = integration.firstPage('workouts', windowOf(5, 0))!;
        await integration.fetchPage(ctxA, 'workouts', cursor);
        await integration.fetchPage(ctxB, 'workouts', cursor);
        await integration.afterConnect!(ctxA);
        expect(limited.rateLimitedResponses).toBe(0);
        const fixedNow = new Date();
        const ctxC = {
          ...ctxB,
          http: createProviderHttp({
            integration,
            baseUrl: limited.url,
            client: FAKE_WHOOP_CLIENT,
            accessToken: async () => (await connect(limited, limited.addUser().id)).access_token,
            now: () => fixedNow,
          }),
        };
        const err = await integration.fetchPage(ctxC, 'workouts', cursor).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(RateLimitedError);
        const last = limited.requests.at(-1)!;
        expect(last.status).toBe(429);
        expect(limited.rateLimitedResponses).toBe(1);
        // The first of the three leaves the window about 60 s after it arrived.
        const waitMs = (err as RateLimitedError).retryAt.getTime() - fixedNow.getTime();
        expect(waitMs).toBeGreaterThan(50_000);
        expect(waitMs).toBeLessThanOrEqual(61_000);
        expect(waitMs % 1000).toBe(0);
      } finally {
        await limited.close();
      }
    });

    test('an injected 429 with X-RateLimit-Reset: 17 → retry exactly 17 s later; no Retry-After needed', async () => {
      const user = fake.addUser();
      const token = (await connect(fake, user.id)).access_token;
      const now = new Date('2026-11-01T12:00:00Z');
      fake.fail({ path: '/developer/v2/activity/workout', status: 429, headers: fake.rateLimitHeaders(17) });
      const err = await integration
        .fetchPage(
          contextFor(fake, token, () => now),
          'workouts',
          integration.firstPage('workouts', windowOf(3, 0))!,
        )
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RateLimitedError);
      expect((err as RateLimitedError).retryAt.toISOString()).toBe('2026-11-01T12:00:17.000Z');
      const headers = new Headers({ 'X-RateLimit-Reset': '3' });
      expect(integration.rateLimitResetAt!(headers, now)!.toISOString()).toBe('2026-11-01T12:00:03.000Z');
      expect(integration.rateLimitResetAt!(new Headers(), now)).toBeNull();
    });

    test('a client within the budget never sees a 429 (rolling window)', async () => {
      const limited = await startFakeWhoop({ rateLimit: { limit: 5, windowSeconds: 1 } });
      try {
        const user = limited.addUser();
        const ctx = contextFor(limited, (await connect(limited, user.id)).access_token);
        for (let i = 0; i < 12; i++) {
          await integration.afterConnect!(ctx);
          await new Promise((resolve) => setTimeout(resolve, 230)); // 1 per 230 ms: at most 5 in any second
        }
        expect(limited.rateLimitedResponses).toBe(0);
        const burst = await Promise.all(Array.from({ length: 6 }, () => fetch(`${limited.url}/developer/v2/user/profile/basic`)));
        expect(burst.filter((r) => r.status === 429).length).toBeGreaterThanOrEqual(1);
      } finally {
        await limited.close();
      }
    });
  });

  describe('pushes', () => {
    let userId: string;
    let ctx: ProviderCallContext;
    let sleep: WhoopSleep;

    beforeAll(async () => {
      userId = fake.addUser({ zoneOffsetSeconds: NEW_YORK_SUMMER }).id;
      ctx = contextFor(fake, (await connect(fake, userId)).access_token);
      const w = windowOf(5, NEW_YORK_SUMMER);
      sleep = fake.records(userId, 'sleep', w.start, w.end).find((s) => !s.nap)!;
    });

    async function delivered(event: Parameters<FakeWhoop['sendPush']>[1]): Promise<PushRequest> {
      received.length = 0;
      const res = await fake.sendPush(receiverUrl, event);
      expect(res.status).toBe(200);
      expect(received).toHaveLength(1);
      return received[0];
    }

    test('a genuinely signed push verifies and names the user and the sleep; the fetch maps exactly that sleep', async () => {
      const req = await delivered({ type: 'sleep.updated', id: sleep.id, userId, traceId: 'e369c784-5100-49e8-8098-75d35c47b31b' });
      expect(req.headers['x-whoop-signature-timestamp']).toMatch(/^\d{13}$/);
      expect(integration.push!.verify(req, { clientSecret: FAKE_WHOOP_CLIENT.clientSecret }, new Date())).toBe(true);
      const notes = integration.push!.parse(req);
      expect(notes).toEqual([
        {
          kind: 'data',
          externalUserId: userId,
          resource: 'sleep',
          objectId: sleep.id,
          dedupeKey: `whoop_v2:sleep.updated:${sleep.id}:e369c784-5100-49e8-8098-75d35c47b31b`,
        },
      ]);
      const note = notes[0] as { resource: string; objectId: string };
      const data = await integration.fetchObject!(ctx, note.resource, note.objectId, 0);
      expect(data.summaries.map((s) => s.source_key)).toEqual([sleep.id]);
      expect(data.summaries[0].fields.average_hrv).toBe(fake.recoveryOfSleep(userId, sleep.id)!.score!.hrv_rmssd_milli);
    });

    test('recovery and workout events name what to fetch; deleted events add nothing', async () => {
      const recovery = await delivered({ type: 'recovery.updated', id: sleep.id, userId });
      expect(integration.push!.parse(recovery)).toMatchObject([{ kind: 'data', resource: 'sleep', objectId: sleep.id, externalUserId: userId }]);
      const workout = await delivered({ type: 'workout.updated', id: '3f1c2b4a-5d6e-4f70-8a9b-0c1d2e3f4a5b', userId });
      expect(integration.push!.parse(workout)).toMatchObject([{ kind: 'data', resource: 'workouts', objectId: '3f1c2b4a-5d6e-4f70-8a9b-0c1d2e3f4a5b' }]);
      for (const type of ['sleep.deleted', 'workout.deleted', 'recovery.deleted'] as const) {
        const deleted = await delivered({ type, id: sleep.id, userId });
        expect(integration.push!.verify(deleted, { clientSecret: FAKE_WHOOP_CLIENT.clientSecret }, new Date())).toBe(true);
        expect(integration.push!.parse(deleted)).toEqual([]);
      }
      // Two deliveries of one event share a dedupe key; two events do not.
      const again = await delivered({ type: 'sleep.updated', id: sleep.id, userId, traceId: 't-1' });
      const same = await delivered({ type: 'sleep.updated', id: sleep.id, userId, traceId: 't-1' });
      const other = await delivered({ type: 'sleep.updated', id: sleep.id, userId, traceId: 't-2' });
      const key = (r: PushRequest) => (integration.push!.parse(r)[0] as { dedupeKey: string }).dedupeKey;
      expect(key(again)).toBe(key(same));
      expect(key(again)).not.toBe(key(other));
    });

    test('forged, tampered, stale, future and unsigned pushes are refused', async () => {
      const secrets = { clientSecret: FAKE_WHOOP_CLIENT.clientSecret };
      const now = new Date();
      const forged = await delivered({ type: 'sleep.updated', id: sleep.id, userId, secret: 'not-the-secret' });
      expect(integration.push!.verify(forged, secrets, now)).toBe(false);
      const genuine = await delivered({ type: 'sleep.updated', id: sleep.id, userId });
      const tampered = { ...genuine, rawBody: Buffer.from(genuine.rawBody.toString().replace(String(userId), '99999')) };
      expect(integration.push!.verify(tampered, secrets, now)).toBe(false);
      const stale = await delivered({ type: 'sleep.updated', id: sleep.id, userId, timestampMs: Date.now() - 6 * 60_000 });
      expect(integration.push!.verify(stale, secrets, new Date())).toBe(false);
      const recent = await delivered({ type: 'sleep.updated', id: sleep.id, userId, timestampMs: Date.now() - 4 * 60_000 });
      expect(integration.push!.verify(recent, secrets, new Date())).toBe(true);
      const future = await delivered({ type: 'sleep.updated', id: sleep.id, userId, timestampMs: Date.now() + 6 * 60_000 });
      expect(integration.push!.verify(future, secrets, new Date())).toBe(false);
      const { 'x-whoop-signature': _sig, ...unsigned } = genuine.headers;
      expect(integration.push!.verify({ ...genuine, headers: unsigned }, secrets, now)).toBe(false);
      // The timestamp is signed too: moving it breaks the signature.
      expect(
        integration.push!.verify(
          { ...genuine, headers: { ...genuine.headers, 'x-whoop-signature-timestamp': String(Number(genuine.headers['x-whoop-signature-timestamp']) + 1) } },
          secrets,
          now,
        ),
      ).toBe(false);
      expect(integration.push!.verify(genuine, { clientSecret: 'another-app' }, now)).toBe(false);
    });
  });

  test('revoke: DELETE /v2/user/access answers 204; the tokens are dead afterwards', async () => {
    const user = fake.addUser();
    const tokens = await connect(fake, user.id);
    const ctx = contextFor(fake, tokens.access_token);
    await integration.revoke!(ctx);
    expect(fake.requestsTo('/developer/v2/user/access', user.id).map((r) => [r.method, r.status])).toEqual([['DELETE', 204]]);
    expect(fake.revokedThroughApi).toContain(user.id);
    await expect(integration.afterConnect!(ctx)).rejects.toMatchObject({ errorType: 'provider_credential_error' });
    expect(fake.refreshTokenValid(tokens.refresh_token!)).toBe(false);
    await expect(refreshTokens(integration.oauth, FAKE_WHOOP_CLIENT, tokens.refresh_token!, { baseUrl: fake.url })).rejects.toMatchObject({
      error: 'invalid_grant',
    });
    // Consenting again connects again.
    const again = await connect(fake, user.id);
    expect((await integration.afterConnect!(contextFor(fake, again.access_token))).externalUserId).toBe(user.id);
  });
});
