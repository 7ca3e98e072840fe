import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProviderFetchError } from '../lib/wearables/adapters';
import type { SampleInput, SummaryInput } from '../lib/wearables/model';
import {
  OAuthError,
  RateLimitedError,
  type PageCursor,
  type ProviderCallContext,
  type PullWindow,
  type PushNotification,
  type PushRequest,
  type PushSecrets,
  type TokenSet,
} from '../lib/wearables/providers/contract';
import { createProviderHttp } from '../lib/wearables/providers/http';
import { authorizeUrl, exchangeCode, refreshTokens } from '../lib/wearables/providers/oauth-client';
import { createSubscription, integration, listSubscriptions, ouraSignature, renewSubscription } from '../lib/wearables/providers/oura';
import type { OuraDailyActivity, OuraSleep, OuraWorkout } from '../lib/wearables/providers/oura/api-types';
import { mapDailyActivity, mapPersonalInfo, mapSleep, mapWorkout } from '../lib/wearables/providers/oura/mapping';
import { FAKE_OURA_CLIENT, startFakeOura, type FakeOura, type HeartRateRow } from './support/fakes/oura';

/**
 * The Oura integration (lib/wearables/providers/oura) against the loopback fake of Oura's API
 * (test/support/fakes/oura.ts): OAuth by real HTTP through the consent page, 90-day pulls page by page, the mapping
 * traps (RMSSD, offsets applied once, stable keys), rate limits and errors, webhooks and revocation. No stack needed.
 */
const DAY = 86_400_000;
const REDIRECT = 'https://app.example.test/v2/link/oauth/callback/oura';
const CLIENT = { clientId: FAKE_OURA_CLIENT.clientId, clientSecret: FAKE_OURA_CLIENT.clientSecret };
const PLUS_ONE = 3600;

let fake: FakeOura;

beforeAll(async () => {
  fake = await startFakeOura();
});
afterAll(() => fake.close());

// ---- Helpers ------------------------------------------------------------------------------------------------------

const addDays = (date: string, n: number) => new Date(Date.parse(`${date}T00:00:00Z`) + n * DAY).toISOString().slice(0, 10);
const localDate = (ms: number, tz: number) => new Date(ms + tz * 1000).toISOString().slice(0, 10);
const localMidnight = (date: string, tz: number) => Date.parse(`${date}T00:00:00Z`) - tz * 1000;
const unescapeHtml = (s: string) => s.replace(/&(amp|lt|gt|quot|#39);/g, (_, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e]!);

/** The `days` local days ending yesterday, as the workflow hands a pull window to an integration. */
function windowOf(days: number, tz: number): PullWindow {
  const endDate = localDate(Date.now() - DAY, tz);
  const startDate = addDays(endDate, -(days - 1));
  return {
    startDate,
    endDate,
    start: new Date(localMidnight(startDate, tz)),
    end: new Date(localMidnight(addDays(endDate, 1), tz)),
    timezoneOffsetSeconds: tz,
  };
}

/** Walks the consent page like a browser: GET the authorize URL, POST its form with the pressed button, read the 302. */
async function consent(decision: 'approve' | 'deny', scopes = integration.oauth.scopes): Promise<URL> {
  const url = authorizeUrl({ ...integration.oauth, scopes }, { clientId: CLIENT.clientId, redirectUri: REDIRECT }, 'state-xyz', { baseUrl: fake.url });
  expect(new URL(url).pathname).toBe('/oauth/authorize');
  const page = await fetch(url);
  expect(page.status).toBe(200);
  const html = await page.text();
  const action = /<form method="post" action="([^"]+)"/.exec(html)![1];
  const fields = Object.fromEntries(
    [...html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)].map((m) => [unescapeHtml(m[1]), unescapeHtml(m[2])]),
  );
  const res = await fetch(`${fake.url}${action}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ ...fields, decision }).toString(),
  });
  expect(res.status).toBe(302);
  return new URL(res.headers.get('location')!);
}

async function connect(userId: string, scopes = integration.oauth.scopes): Promise<TokenSet> {
  fake.nextConsentUser = userId;
  const back = await consent('approve', scopes);
  expect(back.searchParams.get('state')).toBe('state-xyz');
  return exchangeCode(integration.oauth, { ...CLIENT, redirectUri: REDIRECT }, back.searchParams.get('code')!, { baseUrl: fake.url });
}

function contextOf(tokens: { access_token: string }, now?: () => Date): ProviderCallContext {
  const http = createProviderHttp({ integration, baseUrl: fake.url, client: CLIENT, accessToken: async () => tokens.access_token, now });
  return { http, externalUserId: null, tokenExtras: {}, client: CLIENT };
}

interface Pulled {
  pages: number;
  summaries: SummaryInput[];
  samples: SampleInput[];
  cursors: PageCursor[];
}

/** A whole pull of one unit, page by page as the workflow runs it; asserts one HTTP request per page. */
async function pull(ctx: ProviderCallContext, resource: string, window: PullWindow): Promise<Pulled> {
  const out: Pulled = { pages: 0, summaries: [], samples: [], cursors: [] };
  let cursor = integration.firstPage(resource, window);
  while (cursor) {
    out.cursors.push(cursor);
    const before = fake.requests.length;
    const page = await integration.fetchPage(ctx, resource, cursor);
    expect(fake.requests.length - before).toBe(1);
    expect(page.data.source_type).toBe('ring');
    out.pages++;
    out.summaries.push(...page.data.summaries);
    out.samples.push(...page.data.samples);
    // Cursors are small flat JSON the workflow carries.
    if (page.next) for (const v of Object.values(page.next)) expect(['string', 'number'].includes(typeof v) || v === null).toBe(true);
    expect(JSON.stringify(page.next ?? {}).length).toBeLessThan(1000);
    cursor = page.next;
  }
  return out;
}

const of = (samples: SampleInput[], resource: string) => samples.filter((s) => s.resource === resource);
const rangeOf = (w: PullWindow) => ({ startDate: w.startDate, endDate: w.endDate });

// ---- OAuth ------------------------------------------------------------------------------------------------------

describe('oura OAuth', () => {
  it('uses the production endpoints and scopes, client credentials in the body, no PKCE', () => {
    expect(integration.oauth).toMatchObject({
      authorizeUrl: 'https://cloud.ouraring.com/oauth/authorize',
      tokenUrl: 'https://api.ouraring.com/oauth/token',
      scopeSeparator: ' ',
      clientAuth: 'body',
      pkce: false,
      refreshable: true,
    });
    expect(integration.oauth.scopes).toEqual(['email', 'personal', 'daily', 'heartrate', 'workout', 'tag', 'session', 'spo2Daily']);
    expect(integration.historyDays).toBe(90);
  });

  it('consents through the page, exchanges the code once, and a denial comes back as access_denied', async () => {
    const user = fake.addUser({ zoneOffsetSeconds: PLUS_ONE });
    const before = Date.now();
    const tokens = await connect(user.id);
    expect(tokens.access_token).toMatch(/^at_/);
    expect(tokens.refresh_token).toMatch(/^rt_/);
    expect(tokens.scope).toBe(integration.oauth.scopes.join(' '));
    // expires_in 86400 ("typically 24 hours").
    expect(tokens.expires_at!.getTime()).toBeGreaterThanOrEqual(before + 86_400_000 - 1000);
    expect(tokens.expires_at!.getTime()).toBeLessThanOrEqual(Date.now() + 86_400_000 + 1000);
    // The token request carried the client in the form body, not in a Basic header.
    const tokenRequest = fake.requestsTo('/oauth/token').at(-1)!;
    expect(new URLSearchParams(tokenRequest.body).get('client_secret')).toBe(CLIENT.clientSecret);
    expect(tokenRequest.headers.authorization).toBeUndefined();

    const denied = await consent('deny');
    expect(denied.searchParams.get('error')).toBe('access_denied');
    expect(denied.searchParams.get('code')).toBeNull();
  });

  it('refuses a reused code and a wrong client secret', async () => {
    const user = fake.addUser({ zoneOffsetSeconds: PLUS_ONE });
    fake.nextConsentUser = user.id;
    const code = (await consent('approve')).searchParams.get('code')!;
    await exchangeCode(integration.oauth, { ...CLIENT, redirectUri: REDIRECT }, code, { baseUrl: fake.url });
    await expect(exchangeCode(integration.oauth, { ...CLIENT, redirectUri: REDIRECT }, code, { baseUrl: fake.url })).rejects.toMatchObject({
      error: 'invalid_grant',
    });
    fake.nextConsentUser = user.id;
    const second = (await consent('approve')).searchParams.get('code')!;
    await expect(
      exchangeCode(integration.oauth, { ...CLIENT, clientSecret: 'wrong', redirectUri: REDIRECT }, second, { baseUrl: fake.url }),
    ).rejects.toMatchObject({ error: 'invalid_client' });
  });

  it('rotates refresh tokens: the new pair works, the used refresh token is refused afterwards', async () => {
    const user = fake.addUser({ zoneOffsetSeconds: PLUS_ONE });
    const first = await connect(user.id);
    const second = await refreshTokens(integration.oauth, CLIENT, first.refresh_token!, { baseUrl: fake.url });
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect(second.access_token).not.toBe(first.access_token);
    const reuse = refreshTokens(integration.oauth, CLIENT, first.refresh_token!, { baseUrl: fake.url });
    await expect(reuse).rejects.toBeInstanceOf(OAuthError);
    await expect(refreshTokens(integration.oauth, CLIENT, first.refresh_token!, { baseUrl: fake.url })).rejects.toMatchObject({ error: 'invalid_grant' });
    expect(fake.refusedRefreshTokens).toContain(first.refresh_token);
    const third = await refreshTokens(integration.oauth, CLIENT, second.refresh_token!, { baseUrl: fake.url });
    const page = await integration.fetchPage(contextOf(third), 'profile', integration.firstPage('profile', windowOf(1, PLUS_ONE))!);
    expect(page.data.summaries[0].resource).toBe('profile');
    expect(
      fake
        .tokenState(user.id)
        .refresh.filter((t) => t.active)
        .map((t) => t.token),
    ).toEqual([third.refresh_token]);
  });

  it('afterConnect answers personal_info.id, the id pushes name', async () => {
    const user = fake.addUser({ zoneOffsetSeconds: PLUS_ONE });
    const ctx = contextOf(await connect(user.id));
    await expect(integration.afterConnect!(ctx)).resolves.toEqual({ externalUserId: user.id });
    expect(fake.requestsTo('/v2/usercollection/personal_info', user.id)).toHaveLength(1);
  });
});

// ---- A 90-day pull --------------------------------------------------------------------------------------------------

describe('oura 90-day pull', () => {
  let userId: string;
  let ctx: ProviderCallContext;
  const window = windowOf(90, PLUS_ONE);

  beforeAll(async () => {
    const user = fake.addUser({ zoneOffsetSeconds: PLUS_ONE, seed: 'oura-pull-user' });
    userId = user.id;
    ctx = contextOf(await connect(userId));
  });

  it('sleep: every period of the window once, its score, RMSSD HRV, heart rate, hypnogram, offsets applied once', async () => {
    const pulled = await pull(ctx, 'sleep', window);
    const served = fake.servedCount(userId, rangeOf(window));
    const sleeps = fake.servedDocuments(userId, 'sleep', rangeOf(window)) as unknown as OuraSleep[];
    // Three 30-day chunks, each a /daily_sleep page then /sleep pages of 10: paging was exercised.
    expect(pulled.pages).toBeGreaterThanOrEqual(3 * 2 + 3);
    const sleepRequests = fake.requestsTo('/v2/usercollection/sleep', userId);
    expect(sleepRequests.some((r) => r.query.next_token)).toBe(true);
    expect(sleeps.length).toBeGreaterThanOrEqual(90);
    expect(served.sleep).toBe(sleeps.length);
    // Exactly the window's sleeps landed, each once.
    expect(pulled.summaries).toHaveLength(sleeps.length);
    expect(new Set(pulled.summaries.map((s) => s.source_key))).toEqual(new Set(sleeps.map((s) => s.id)));
    expect(pulled.summaries.every((s) => s.calendar_date >= window.startDate && s.calendar_date <= window.endDate)).toBe(true);
    expect(
      fake
        .documents(userId, 'sleep', window.startDate, window.endDate)
        .map((d) => d.id)
        .sort(),
    ).toEqual(sleeps.map((s) => s.id).sort());

    const scores = new Map(fake.documents(userId, 'daily_sleep', window.startDate, window.endDate).map((d) => [d.day, d.score]));
    for (const doc of sleeps) {
      const summary = pulled.summaries.find((s) => s.source_key === doc.id)!;
      const f = summary.fields;
      // Offsets applied once: `time` is the instant of the +01:00 string, the local field is that string.
      expect(summary.time).toBe(new Date(Date.parse(doc.bedtime_start)).toISOString());
      expect(f.bedtime_start).toBe(doc.bedtime_start);
      expect(f.bedtime_stop).toBe(doc.bedtime_end);
      expect(doc.bedtime_start.endsWith('+01:00')).toBe(true);
      expect(f.timezone_offset).toBe(3600);
      expect(Number(doc.bedtime_start.slice(11, 13))).toBe((new Date(summary.time).getUTCHours() + 1) % 24);
      expect(f).toMatchObject({
        calendar_date: doc.day,
        date: `${doc.day}T00:00:00+00:00`,
        duration: doc.time_in_bed,
        total: doc.total_sleep_duration,
        awake: doc.awake_time,
        deep: doc.deep_sleep_duration,
        light: doc.light_sleep_duration,
        rem: doc.rem_sleep_duration,
        efficiency: doc.efficiency,
        latency: doc.latency,
        respiratory_rate: doc.average_breath,
        // RMSSD as Oura reports it.
        average_hrv: doc.average_hrv ?? null,
        recovery_readiness_score: doc.readiness?.score ?? null,
        temperature_delta: doc.readiness?.temperature_deviation ?? null,
        type: doc.type === 'long_sleep' ? 'long_sleep' : 'short_sleep',
        state: 'confirmed',
      });
      expect(f.total).toBe((f.deep as number) + (f.light as number) + (f.rem as number));
      // The day's score sits on the long sleep only.
      expect(f.score).toBe(doc.type === 'long_sleep' ? scores.get(doc.day) : null);
      // A period without heart-rate data says lowest_heart_rate 255: that is no reading, not 255 bpm.
      expect(f.hr_lowest).toBe(doc.lowest_heart_rate === 255 ? null : doc.lowest_heart_rate);
    }
    expect(pulled.summaries.filter((s) => s.fields.type === 'long_sleep').every((s) => typeof s.fields.score === 'number')).toBe(true);
    expect(sleeps.some((s) => s.lowest_heart_rate === 255)).toBe(true);

    // Samples: every non-null item, phase and temperature of the served sleeps landed, in our units.
    const hr = of(pulled.samples, 'heartrate');
    const hrv = of(pulled.samples, 'hrv');
    const hypnogram = of(pulled.samples, 'hypnogram');
    expect(hr).toHaveLength(served['sleep.heart_rate']);
    expect(hrv).toHaveLength(served['sleep.hrv']);
    expect(hypnogram).toHaveLength(served['sleep.hypnogram']);
    expect(of(pulled.samples, 'body_temperature_delta')).toHaveLength(served['sleep.temperature']);
    expect(hr.every((s) => s.unit === 'bpm' && s.timezone_offset === 3600)).toBe(true);
    expect(hrv.every((s) => s.unit === 'rmssd')).toBe(true);
    expect(hypnogram.every((s) => s.unit === 'stage' && [1, 2, 3, 4].includes(s.value!) && s.start === s.timestamp)).toBe(true);

    const night = sleeps.find((s) => s.type === 'long_sleep' && s.hrv)!;
    const start = Date.parse(night.bedtime_start);
    const nightHrv = hrv.filter((s) => Date.parse(s.timestamp) >= start && Date.parse(s.timestamp) < Date.parse(night.bedtime_end));
    const expectedHrv = night.hrv!.items.map((v, i) => (v === null ? null : { t: new Date(start + i * 300_000).toISOString(), v })).filter((x) => x !== null);
    expect(nightHrv.map((s) => ({ t: s.timestamp, v: s.value }))).toEqual(expectedHrv);
    const phases = hypnogram.filter((s) => Date.parse(s.timestamp) >= start && Date.parse(s.timestamp) < Date.parse(night.bedtime_end));
    expect(phases.map((s) => String(s.value)).join('')).toBe(night.sleep_phase_5_min);
    expect(phases.at(-1)!.end).toBe(new Date(Date.parse(night.bedtime_end)).toISOString());
    expect(Date.parse(phases[1].start!) - Date.parse(phases[0].start!)).toBe(300_000);
  });

  it('sleep: a pull again yields the same keys and values (stable source keys)', async () => {
    const shortWindow = windowOf(10, PLUS_ONE);
    const a = await pull(ctx, 'sleep', shortWindow);
    const b = await pull(ctx, 'sleep', shortWindow);
    expect(b.summaries).toEqual(a.summaries);
    expect(b.samples.map((s) => s.timestamp)).toEqual(a.samples.map((s) => s.timestamp));
  });

  it('activity: one summary per day with Oura units turned into ours, plus daily steps and calories intervals', async () => {
    const pulled = await pull(ctx, 'activity', window);
    const docs = fake.servedDocuments(userId, 'daily_activity', rangeOf(window)) as unknown as OuraDailyActivity[];
    expect(docs).toHaveLength(90);
    expect(pulled.summaries).toHaveLength(90);
    expect(pulled.summaries.map((s) => s.source_key).sort()).toEqual(docs.map((d) => d.day).sort());
    expect(fake.requestsTo('/v2/usercollection/daily_activity', userId).some((r) => r.query.next_token)).toBe(true);
    for (const doc of docs) {
      const s = pulled.summaries.find((x) => x.source_key === doc.day)!;
      expect(s.time).toBe(new Date(localMidnight(doc.day, PLUS_ONE)).toISOString());
      expect(s.fields).toMatchObject({
        calendar_date: doc.day,
        timezone_offset: 3600,
        steps: doc.steps,
        calories_active: doc.active_calories,
        calories_total: doc.total_calories,
        distance: doc.equivalent_walking_distance,
        low: doc.low_activity_time / 60,
        medium: doc.medium_activity_time / 60,
        high: doc.high_activity_time / 60,
      });
      const steps = of(pulled.samples, 'steps').find((x) => x.timestamp === new Date(Date.parse(doc.timestamp)).toISOString())!;
      expect(steps).toMatchObject({ value: doc.steps, unit: 'count', timezone_offset: 3600 });
      // Oura's activity day runs from 4 a.m. for 24 hours.
      expect(Date.parse(steps.end!) - Date.parse(steps.start!)).toBe(DAY);
      expect(new Date(Date.parse(steps.start!) + 3600_000).getUTCHours()).toBe(4);
    }
    expect(of(pulled.samples, 'calories_active').reduce((n, s) => n + s.value!, 0)).toBe(docs.reduce((n, d) => n + d.active_calories, 0));
    expect(of(pulled.samples, 'calories_basal').every((s) => s.unit === 'kcal')).toBe(true);
  });

  it('workouts: each workout once with its sport, local times and UTC anchor', async () => {
    const pulled = await pull(ctx, 'workouts', window);
    const docs = fake.servedDocuments(userId, 'workout', rangeOf(window)) as unknown as OuraWorkout[];
    expect(docs.length).toBeGreaterThan(20);
    // Every workout of the window (what the fake has, not only what it happened to serve) landed once.
    expect(docs.map((d) => d.id).sort()).toEqual(
      fake
        .documents(userId, 'workout', window.startDate, window.endDate)
        .map((d) => d.id)
        .sort(),
    );
    expect(pulled.summaries.map((s) => s.source_key).sort()).toEqual(docs.map((d) => d.id).sort());
    for (const doc of docs) {
      const s = pulled.summaries.find((x) => x.source_key === doc.id)!;
      expect(s.time).toBe(new Date(Date.parse(doc.start_datetime)).toISOString());
      expect(s.fields).toMatchObject({
        time_start: doc.start_datetime,
        time_end: doc.end_datetime,
        timezone_offset: 3600,
        calories: doc.calories,
        distance: doc.distance ?? null,
        provider_id: doc.id,
        calendar_date: doc.day,
      });
      const sport = s.fields.sport as { slug: string; id: number };
      expect(sport.slug).toBe(doc.activity === 'strength_training' ? 'strength_training' : doc.activity);
      if (doc.activity === 'running') expect(sport.id).toBe(1);
      if (doc.label) expect(s.fields.title).toBe(doc.label);
    }
  });

  it('heartrate: 30-day datetime windows, paged, every row once and nothing outside the window', async () => {
    const pulled = await pull(ctx, 'heartrate', window);
    const rows = fake.heartRateRows(userId, window.start.getTime(), window.end.getTime());
    expect(rows.length).toBeGreaterThan(10_000);
    expect(fake.servedCount(userId, rangeOf(window)).heartrate).toBe(rows.length);
    expect(pulled.samples).toHaveLength(rows.length);
    expect(new Set(pulled.samples.map((s) => s.timestamp)).size).toBe(rows.length);
    expect(pulled.samples.every((s) => s.unit === 'bpm' && s.resource === 'heartrate' && s.timezone_offset === null)).toBe(true);
    const first = rows[0] as HeartRateRow;
    expect(pulled.samples.find((s) => s.timestamp === new Date(first.timestamp_unix).toISOString())!.value).toBe(first.bpm);
    // Paging at 50 rows, and no request spans more than 30 days; the '+' of the offset arrived intact.
    const requests = fake.requestsTo('/v2/usercollection/heartrate', userId);
    expect(pulled.pages).toBe(requests.length);
    expect(requests.length).toBeGreaterThan(rows.length / 50);
    for (const r of requests) {
      expect(r.status).toBe(200);
      if (r.query.next_token) continue;
      expect(r.query.start_datetime).toMatch(/\+01:00$/);
      expect(Date.parse(r.query.end_datetime) - Date.parse(r.query.start_datetime)).toBeLessThanOrEqual(30 * DAY);
    }
  });

  it('blood_oxygen: one sample per night that has an average, in percent', async () => {
    const pulled = await pull(ctx, 'blood_oxygen', window);
    const served = fake.servedCount(userId, rangeOf(window));
    expect(served.daily_spo2).toBeGreaterThan(80);
    expect(served.daily_spo2).toBe(fake.documents(userId, 'daily_spo2', window.startDate, window.endDate).length);
    expect(pulled.samples).toHaveLength(served['daily_spo2.average']);
    expect(pulled.samples.every((s) => s.unit === '%' && s.value! > 90 && s.value! <= 100)).toBe(true);
  });

  it('profile: height in cm from metres, sex, and a body summary with the weight and BMI', async () => {
    const pulled = await pull(ctx, 'profile', window);
    const info = fake.personalInfo(userId) as { height: number; weight: number; biological_sex: string };
    const profile = pulled.summaries.find((s) => s.resource === 'profile')!;
    expect(profile).toMatchObject({ source_key: 'profile', calendar_date: window.endDate });
    expect(profile.fields).toMatchObject({ height: Math.round(info.height * 100), sex: info.biological_sex, gender: info.biological_sex });
    const body = pulled.summaries.find((s) => s.resource === 'body')!;
    expect(body).toMatchObject({ source_key: window.endDate, calendar_date: window.endDate });
    expect(body.fields.weight).toBe(info.weight);
    expect(body.fields.body_mass_index).toBeCloseTo(info.weight / (Math.round(info.height * 100) / 100) ** 2, 1);
  });

  it('fetchObject: a pushed sleep comes back with its score; a daily_sleep push refreshes that day; a gone document gives nothing', async () => {
    const w = windowOf(5, PLUS_ONE);
    const night = fake.documents(userId, 'sleep', w.startDate, w.endDate).find((d) => d.type === 'long_sleep')!;
    const daily = fake.documents(userId, 'daily_sleep', night.day, night.day)[0];
    const pulled = await pull(ctx, 'sleep', w);
    const before = fake.requests.length;
    const one = await integration.fetchObject!(ctx, 'sleep', night.id, PLUS_ONE);
    expect(fake.requests.length - before).toBe(2);
    expect(one.summaries).toEqual([pulled.summaries.find((s) => s.source_key === night.id)]);
    expect(one.summaries[0].fields.score).toBe(daily.score);
    const viaDaily = await integration.fetchObject!(ctx, 'sleep', `daily_sleep:${daily.id}`, PLUS_ONE);
    expect(viaDaily.summaries.map((s) => s.source_key).sort()).toEqual(
      pulled.summaries
        .filter((s) => s.calendar_date === night.day)
        .map((s) => s.source_key)
        .sort(),
    );
    expect(viaDaily.summaries.find((s) => s.source_key === night.id)!.fields.score).toBe(daily.score);

    const workout = fake.documents(userId, 'workout', window.startDate, window.endDate)[0];
    expect((await integration.fetchObject!(ctx, 'workouts', workout.id, PLUS_ONE)).summaries[0]).toMatchObject({
      source_key: workout.id,
      resource: 'workouts',
    });
    const activity = fake.documents(userId, 'daily_activity', w.startDate, w.endDate)[0];
    expect((await integration.fetchObject!(ctx, 'activity', activity.id, PLUS_ONE)).summaries[0]).toMatchObject({
      source_key: activity.day,
      resource: 'activity',
    });
    const spo2 = fake.documents(userId, 'daily_spo2', window.startDate, window.endDate).find((d) => d.spo2_percentage)!;
    expect((await integration.fetchObject!(ctx, 'blood_oxygen', spo2.id, PLUS_ONE)).samples[0]).toMatchObject({
      resource: 'blood_oxygen',
      value: (spo2.spo2_percentage as { average: number }).average,
    });

    fake.remove(userId, 'workout', workout.id);
    const gone = await integration.fetchObject!(ctx, 'workouts', workout.id, PLUS_ONE);
    expect(gone.summaries).toEqual([]);
  });
});

// ---- Errors and limits ----------------------------------------------------------------------------------------------

describe('oura errors', () => {
  let ctx: ProviderCallContext;
  const window = windowOf(3, PLUS_ONE);

  beforeAll(async () => {
    const user = fake.addUser({ zoneOffsetSeconds: PLUS_ONE });
    ctx = contextOf(await connect(user.id));
  });

  it('a 429 is RateLimitedError at Retry-After', async () => {
    fake.failRateLimited({ retryAfterSeconds: 120, resetInSeconds: 300 });
    const at = Date.now();
    const err = await integration.fetchPage(ctx, 'workouts', integration.firstPage('workouts', window)!).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    const retryAt = (err as RateLimitedError).retryAt.getTime();
    expect(retryAt).toBeGreaterThanOrEqual(at + 119_000);
    expect(retryAt).toBeLessThanOrEqual(Date.now() + 121_000);
  });

  it('a 429 without Retry-After waits for X-RateLimit-Reset', async () => {
    const { resetAt } = fake.failRateLimited({ resetInSeconds: 200, withoutRetryAfter: true });
    const err = await integration.fetchPage(ctx, 'heartrate', integration.firstPage('heartrate', window)!).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAt.getTime()).toBe(resetAt.getTime());
  });

  it("the fake's own limit answers 429 with Oura's headers once the app's budget is spent", async () => {
    fake.rateLimit.limit = 0;
    try {
      const res = await fetch(`${fake.url}/v2/usercollection/personal_info`);
      expect(res.status).toBe(429);
      for (const h of ['retry-after', 'x-ratelimit-limit', 'x-ratelimit-window', 'x-ratelimit-reset', 'x-ratelimit-tier'])
        expect(res.headers.get(h)).toBeTruthy();
      expect(res.headers.get('x-ratelimit-window')).toBe('300');
      const err = await integration.fetchPage(ctx, 'profile', integration.firstPage('profile', window)!).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RateLimitedError);
    } finally {
      fake.rateLimit.limit = 5000;
    }
  });

  it('rateLimitResetAt reads X-RateLimit-Reset (epoch seconds), else X-RateLimit-Window', () => {
    const now = new Date('2026-11-01T10:00:00Z');
    expect(integration.rateLimitResetAt!(new Headers({ 'x-ratelimit-reset': String(Date.parse('2026-11-01T10:03:20Z') / 1000) }), now)!.toISOString()).toBe(
      '2026-11-01T10:03:20.000Z',
    );
    expect(integration.rateLimitResetAt!(new Headers({ 'x-ratelimit-window': '300' }), now)!.toISOString()).toBe('2026-11-01T10:05:00.000Z');
    expect(integration.rateLimitResetAt!(new Headers({}), now)).toBeNull();
  });

  it('a 5xx is provider_unavailable; a refused token is provider_credential_error; a missing scope non_retriable', async () => {
    fake.failServerError({ path: '/v2/usercollection/daily_spo2' });
    await expect(integration.fetchPage(ctx, 'blood_oxygen', integration.firstPage('blood_oxygen', window)!)).rejects.toMatchObject({
      errorType: 'provider_unavailable',
    });
    const stranger = contextOf({ access_token: 'at_not_issued' });
    const denied = await integration.fetchPage(stranger, 'sleep', integration.firstPage('sleep', window)!).catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(ProviderFetchError);
    expect((denied as ProviderFetchError).errorType).toBe('provider_credential_error');
    const narrow = fake.addUser({ zoneOffsetSeconds: PLUS_ONE });
    const narrowCtx = contextOf(await connect(narrow.id, ['daily']));
    await expect(integration.fetchPage(narrowCtx, 'heartrate', integration.firstPage('heartrate', window)!)).rejects.toMatchObject({
      errorType: 'non_retriable_error',
    });
    // personal_info's id needs no scope: afterConnect still works.
    await expect(integration.afterConnect!(narrowCtx)).resolves.toEqual({ externalUserId: narrow.id });
  });

  it('the fake validates as Oura does: over 30 days of heart rate is a 400, a reversed range a 422', async () => {
    const user = fake.addUser({ zoneOffsetSeconds: 0 });
    const tokens = await connect(user.id);
    const auth = { authorization: `Bearer ${tokens.access_token}` };
    const long = new URLSearchParams({ start_datetime: '2026-08-01T00:00:00+00:00', end_datetime: '2026-09-01T00:00:01+00:00' });
    expect((await fetch(`${fake.url}/v2/usercollection/heartrate?${long}`, { headers: auth })).status).toBe(400);
    const reversed = await fetch(`${fake.url}/v2/usercollection/sleep?start_date=2026-10-10&end_date=2026-10-01`, { headers: auth });
    expect(reversed.status).toBe(422);
    expect(((await reversed.json()) as { detail: unknown[] }).detail[0]).toMatchObject({
      loc: ['query', 'start_date'],
      msg: 'Start date must be before end date',
    });
  });

  it('an empty window asks nothing', () => {
    const w = windowOf(3, 0);
    expect(integration.firstPage('sleep', { ...w, startDate: w.endDate, endDate: w.startDate })).toBeNull();
    expect(integration.firstPage('glucose', w)).toBeNull();
  });
});

// ---- Offsets in other zones ---------------------------------------------------------------------------------------------

describe('oura offsets', () => {
  it('a user at -05:00: local fields keep -05:00, instants are 5 h later, calendar days are local', async () => {
    const tz = -5 * 3600;
    const user = fake.addUser({ zoneOffsetSeconds: tz, seed: 'oura-west' });
    const ctx = contextOf(await connect(user.id));
    const window = windowOf(7, tz);
    const pulled = await pull(ctx, 'sleep', window);
    expect(pulled.summaries.length).toBeGreaterThanOrEqual(7);
    for (const s of pulled.summaries) {
      expect(s.fields.bedtime_start).toMatch(/-05:00$/);
      expect(s.fields.timezone_offset).toBe(tz);
      expect(Date.parse(s.time)).toBe(Date.parse(s.fields.bedtime_start as string));
      const wall = (s.fields.bedtime_start as string).slice(0, 19);
      expect(Date.parse(`${wall}Z`) - Date.parse(s.time)).toBe(tz * 1000);
    }
    const acts = await pull(ctx, 'activity', window);
    for (const a of acts.summaries) expect(a.time).toBe(new Date(Date.parse(`${a.calendar_date}T05:00:00Z`)).toISOString());
  });

  it('the brief example: bedtime_start 2026-11-01T23:10:00+01:00 is 22:10 UTC, never shifted twice', () => {
    const doc: OuraSleep = {
      id: 'sleep-1',
      day: '2026-11-02',
      bedtime_start: '2026-11-01T23:10:00+01:00',
      bedtime_end: '2026-11-02T07:05:30+01:00',
      time_in_bed: 28530,
      total_sleep_duration: 25000,
      awake_time: 3530,
      deep_sleep_duration: 5000,
      light_sleep_duration: 14000,
      rem_sleep_duration: 6000,
      average_hrv: 47,
      lowest_heart_rate: 51,
      average_heart_rate: 56.625,
      efficiency: 88,
      latency: 600,
      average_breath: 14.5,
      low_battery_alert: false,
      period: 0,
      type: 'long_sleep',
      sleep_phase_5_min: '4422',
      readiness: { contributors: {}, score: 80, temperature_deviation: -0.12 },
      heart_rate: { interval: 300, items: [60, null, 58], timestamp: '2026-11-01T23:10:00.000+01:00' },
      hrv: { interval: 300, items: [40, 45, null], timestamp: '2026-11-01T23:10:00.000+01:00' },
    };
    const mapped = mapSleep(doc, 81)!;
    expect(mapped.summary.time).toBe('2026-11-01T22:10:00.000Z');
    expect(mapped.summary.fields).toMatchObject({
      bedtime_start: '2026-11-01T23:10:00+01:00',
      bedtime_stop: '2026-11-02T07:05:30+01:00',
      timezone_offset: 3600,
      calendar_date: '2026-11-02',
      score: 81,
      average_hrv: 47,
      hr_average: 57,
      hr_lowest: 51,
      temperature_delta: -0.12,
    });
    expect(of(mapped.samples, 'heartrate').map((s) => [s.timestamp, s.value])).toEqual([
      ['2026-11-01T22:10:00.000Z', 60],
      ['2026-11-01T22:20:00.000Z', 58],
    ]);
    expect(of(mapped.samples, 'hrv').map((s) => [s.timestamp, s.value, s.unit])).toEqual([
      ['2026-11-01T22:10:00.000Z', 40, 'rmssd'],
      ['2026-11-01T22:15:00.000Z', 45, 'rmssd'],
    ]);
    expect(of(mapped.samples, 'hypnogram').map((s) => s.value)).toEqual([4, 4, 2, 2]);
    // Deleted and rejected periods are not sleep.
    expect(mapSleep({ ...doc, type: 'deleted' }, 81)).toBeNull();
    expect(mapSleep({ ...doc, type: 'rest' }, 81)).toBeNull();
    expect(mapSleep({ ...doc, type: 'sleep' }, 81)!.summary.fields.score).toBeNull();
  });

  it('each document is read in its own offset (a cassette workout in +00:00 between +02:00 ones)', () => {
    const w = mapWorkout({
      id: '6fcc2eed',
      activity: 'walking',
      calories: 87.868,
      day: '2024-10-09',
      distance: 269.87872314453125,
      end_datetime: '2024-10-09T17:33:00+00:00',
      intensity: 'easy',
      label: null,
      source: 'confirmed',
      start_datetime: '2024-10-09T16:49:00+00:00',
    })!;
    expect(w).toMatchObject({
      time: '2024-10-09T16:49:00.000Z',
      fields: { timezone_offset: 0, time_start: '2024-10-09T16:49:00+00:00', sport: { id: 3, slug: 'walking' }, title: 'Walking' },
    });
    const other = mapWorkout({
      id: 'x',
      activity: 'underwaterHockey',
      day: '2024-10-09',
      end_datetime: '2024-10-09T09:18:00+02:00',
      intensity: 'easy',
      source: 'manual',
      start_datetime: '2024-10-09T09:07:00+02:00',
    })!;
    expect(other).toMatchObject({
      time: '2024-10-09T07:07:00.000Z',
      fields: { timezone_offset: 7200, sport: { id: 0, slug: 'other' }, title: 'Underwater hockey' },
    });
  });

  it('the cassette personal_info (height 1.8 m) and activity day (04:00+01:00) map to our units', () => {
    const [profile, body] = mapPersonalInfo(
      { id: '8b97e1b67-144-5e9a8c067-e62331-968-b', age: 42, weight: 90.2, height: 1.8, biological_sex: 'male', email: 'foo@bar.ai' },
      '2024-12-14',
      3600,
    );
    expect(profile.fields).toMatchObject({ height: 180, sex: 'male' });
    expect(body.fields).toMatchObject({ weight: 90.2, body_mass_index: 27.8 });
    const a = mapDailyActivity({
      id: '3e8de08b',
      day: '2024-11-11',
      timestamp: '2024-11-11T04:00:00+01:00',
      steps: 15185,
      active_calories: 1153,
      total_calories: 3502,
      equivalent_walking_distance: 17850,
      high_activity_time: 2460,
      medium_activity_time: 4860,
      low_activity_time: 18060,
      met: { interval: 60, items: [], timestamp: '2024-11-11T04:00:00.000+01:00' },
    } as unknown as OuraDailyActivity)!;
    expect(a.summary).toMatchObject({
      time: '2024-11-10T23:00:00.000Z',
      fields: { steps: 15185, distance: 17850, high: 41, medium: 81, low: 301, calories_total: 3502, timezone_offset: 3600 },
    });
    expect(of(a.samples, 'calories_basal')[0]).toMatchObject({ value: 3502 - 1153, start: '2024-11-11T03:00:00.000Z', end: '2024-11-12T03:00:00.000Z' });
  });
});

// ---- Webhooks -----------------------------------------------------------------------------------------------------------

describe('oura webhooks', () => {
  const secrets: PushSecrets = { clientSecret: CLIENT.clientSecret, verifyToken: 'our-verification-token' };
  const received: { status: number; notifications: PushNotification[] }[] = [];
  let receiver: Server;
  let callback: string;
  let ctx: ProviderCallContext;

  /** Our push intake in miniature: the integration's handshake, verify and parse behind a real HTTP endpoint. */
  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const url = new URL(req.url ?? '/', 'http://receiver');
        const push: PushRequest = {
          method: req.method ?? 'GET',
          query: Object.fromEntries(url.searchParams),
          headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)])),
          rawBody: Buffer.concat(chunks),
        };
        if (push.method === 'GET') {
          const reply = integration.push!.handshake!(push, secrets);
          res.writeHead(reply?.status ?? 404, { 'content-type': 'application/json' });
          res.end(reply?.body === undefined ? '' : JSON.stringify(reply.body));
          return;
        }
        const ok = integration.push!.verify(push, secrets, new Date());
        received.push({ status: ok ? 200 : 401, notifications: ok ? integration.push!.parse(push) : [] });
        res.writeHead(ok ? 200 : 401);
        res.end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
    callback = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/v2/providers/oura/webhook`;
    const http = createProviderHttp({ integration, baseUrl: fake.url, client: CLIENT });
    ctx = { http, externalUserId: null, tokenExtras: {}, client: CLIENT };
  });
  afterAll(() => new Promise<void>((resolve) => receiver.close(() => resolve())));

  it('subscribes with the app headers after the callback echoes the challenge; lists and renews (90 days)', async () => {
    const sub = await createSubscription(ctx, { callbackUrl: callback, verificationToken: secrets.verifyToken!, eventType: 'create', dataType: 'sleep' });
    expect(sub).toMatchObject({ callback_url: callback, event_type: 'create', data_type: 'sleep' });
    const create = fake.requestsTo('/v2/webhook/subscription').at(-1)!;
    expect(create.headers).toMatchObject({ 'x-client-id': CLIENT.clientId, 'x-client-secret': CLIENT.clientSecret });
    expect(create.headers.authorization).toBeUndefined();
    expect(Date.parse(sub.expiration_time)).toBeGreaterThan(Date.now() + 89 * DAY);
    await createSubscription(ctx, { callbackUrl: callback, verificationToken: secrets.verifyToken!, eventType: 'create', dataType: 'daily_sleep' });
    await createSubscription(ctx, { callbackUrl: callback, verificationToken: secrets.verifyToken!, eventType: 'delete', dataType: 'workout' });
    expect((await listSubscriptions(ctx)).map((s) => s.data_type).sort()).toEqual(['daily_sleep', 'sleep', 'workout']);
    fake.subscriptions.get(sub.id)!.expiration_time = new Date(Date.now() + DAY).toISOString();
    const renewed = await renewSubscription(ctx, sub.id);
    expect(renewed.id).toBe(sub.id);
    expect(Date.parse(renewed.expiration_time)).toBeGreaterThan(Date.now() + 89 * DAY);
    await expect(renewSubscription(ctx, '00000000-0000-4000-8000-000000000000')).rejects.toMatchObject({ errorType: 'non_retriable_error' });
  });

  it('a callback that does not know the verification token fails the subscription; the handshake answers only the right token', async () => {
    await expect(
      createSubscription(ctx, { callbackUrl: callback, verificationToken: 'not-ours', eventType: 'update', dataType: 'workout' }),
    ).rejects.toBeInstanceOf(ProviderFetchError);
    const right = await fake.verify(callback, secrets.verifyToken!);
    expect(right).toMatchObject({ status: 200, ok: true });
    expect(right.body).toEqual({ challenge: right.challenge });
    expect(await fake.verify(callback, 'wrong')).toMatchObject({ status: 401, ok: false });
    expect(integration.push!.handshake!({ method: 'GET', query: {}, headers: {}, rawBody: Buffer.alloc(0) }, secrets)).toBeNull();
  });

  it('a genuine push verifies and names the user and the object; daily_sleep and deletes are told apart', async () => {
    received.length = 0;
    const user = fake.addUser({ zoneOffsetSeconds: PLUS_ONE });
    const results = await fake.notify({ dataType: 'sleep', objectId: 'sleep-doc-1', userId: user.id });
    expect(results.map((r) => r.status)).toEqual([200]);
    expect(results[0].headers['x-oura-signature']).toMatch(/^[0-9A-F]{64}$/);
    const sent = JSON.parse(results[0].body);
    expect(received).toEqual([
      {
        status: 200,
        notifications: [
          { kind: 'data', externalUserId: user.id, resource: 'sleep', objectId: 'sleep-doc-1', dedupeKey: `oura:sleep:sleep-doc-1:create:${sent.event_time}` },
        ],
      },
    ]);

    await fake.notify({ dataType: 'daily_sleep', objectId: 'score-1', userId: user.id });
    expect(received.at(-1)!.notifications[0]).toMatchObject({ resource: 'sleep', objectId: 'daily_sleep:score-1' });
    await fake.notify({ dataType: 'workout', eventType: 'delete', objectId: 'w-1', userId: user.id });
    expect(received.at(-1)).toEqual({ status: 200, notifications: [] });
    // The same event twice has the same dedupe key.
    const twice = { dataType: 'sleep', objectId: 'sleep-doc-2', userId: user.id, eventTime: '2026-11-02T08:00:00+00:00' };
    await fake.sendPush(callback, twice);
    await fake.sendPush(callback, twice);
    expect(received.at(-1)!.notifications[0].kind === 'data' && received.at(-2)!.notifications[0].kind === 'data').toBe(true);
    expect((received.at(-1)!.notifications[0] as { dedupeKey: string }).dedupeKey).toBe((received.at(-2)!.notifications[0] as { dedupeKey: string }).dedupeKey);
  });

  it('rejects forged, unsigned, tampered and stale pushes', async () => {
    received.length = 0;
    const event = { dataType: 'sleep', objectId: 'sleep-doc-3', userId: 'someone' };
    expect((await fake.sendPush(callback, event, { secret: 'not-the-client-secret' })).status).toBe(401);
    expect((await fake.sendPush(callback, event, { signature: null })).status).toBe(401);
    expect((await fake.sendPush(callback, event, { timestampSeconds: Math.floor(Date.now() / 1000) - 301 })).status).toBe(401);
    expect((await fake.sendPush(callback, event, { timestampSeconds: Math.floor(Date.now() / 1000) - 240 })).status).toBe(200);
    expect(received.map((r) => r.status)).toEqual([401, 401, 401, 200]);

    const now = new Date();
    const stamp = String(Math.floor(now.getTime() / 1000));
    const body = Buffer.from(
      JSON.stringify({ event_type: 'update', data_type: 'workout', object_id: 'w-9', event_time: '2026-11-02T08:00:00+00:00', user_id: 'u-1' }),
    );
    const signed = (b: Buffer, sig = ouraSignature(CLIENT.clientSecret, stamp, body)): PushRequest => ({
      method: 'POST',
      query: {},
      headers: { 'x-oura-signature': sig, 'x-oura-timestamp': stamp },
      rawBody: b,
    });
    expect(integration.push!.verify(signed(body), secrets, now)).toBe(true);
    expect(integration.push!.verify(signed(body, ouraSignature(CLIENT.clientSecret, stamp, body).toLowerCase()), secrets, now)).toBe(true);
    expect(integration.push!.verify(signed(Buffer.from(body.toString().replace('w-9', 'w-8'))), secrets, now)).toBe(false);
    expect(integration.push!.verify(signed(body), secrets, new Date(now.getTime() + 6 * 60_000))).toBe(false);
    expect(integration.push!.parse(signed(body))).toEqual([
      { kind: 'data', externalUserId: 'u-1', resource: 'workouts', objectId: 'w-9', dedupeKey: 'oura:workout:w-9:update:2026-11-02T08:00:00+00:00' },
    ]);
    expect(
      integration.push!.parse(signed(Buffer.from(JSON.stringify({ event_type: 'create', data_type: 'tag', object_id: 't', event_time: 'x', user_id: 'u' })))),
    ).toEqual([]);
  });

  it('a verified push leads to the object: parse → fetchObject lands the pushed workout', async () => {
    received.length = 0;
    const user = fake.addUser({ zoneOffsetSeconds: PLUS_ONE, seed: 'oura-push-user' });
    const userCtx = contextOf(await connect(user.id));
    const w = windowOf(30, PLUS_ONE);
    const workout = fake.documents(user.id, 'workout', w.startDate, w.endDate)[0];
    await fake.sendPush(callback, { dataType: 'workout', eventType: 'update', objectId: workout.id, userId: user.id });
    const note = received.at(-1)!.notifications[0] as Extract<PushNotification, { kind: 'data' }>;
    expect(note).toMatchObject({ externalUserId: user.id, resource: 'workouts', objectId: workout.id });
    const fetched = await integration.fetchObject!(userCtx, note.resource, note.objectId!, PLUS_ONE);
    expect(fetched.summaries).toEqual([mapWorkout(workout as unknown as OuraWorkout)]);
  });
});

// ---- Revocation -----------------------------------------------------------------------------------------------------------

describe('oura revoke', () => {
  it('revokes the grant: the access token and the refresh token stop working', async () => {
    const user = fake.addUser({ zoneOffsetSeconds: PLUS_ONE });
    const tokens = await connect(user.id);
    const ctx = contextOf(tokens);
    await integration.revoke!(ctx);
    expect(fake.revocations.map((r) => r.userId)).toContain(user.id);
    expect(fake.requestsTo('/oauth/revoke').at(-1)!.method).toBe('POST');
    await expect(integration.afterConnect!(ctx)).rejects.toMatchObject({ errorType: 'provider_credential_error' });
    await expect(refreshTokens(integration.oauth, CLIENT, tokens.refresh_token!, { baseUrl: fake.url })).rejects.toMatchObject({ error: 'invalid_grant' });
    expect(fake.tokenState(user.id).access.every((t) => !t.active)).toBe(true);
  });
});
