import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProviderFetchError } from '../lib/wearables/adapters';
import type { ProviderData, SampleInput, SummaryInput } from '../lib/wearables/model';
import {
  OAuthError,
  RateLimitedError,
  type PageCursor,
  type ProviderCallContext,
  type PullWindow,
  type PushRequest,
  type TokenSet,
} from '../lib/wearables/providers/contract';
import { createProviderHttp } from '../lib/wearables/providers/http';
import { authorizeUrl, exchangeCode, refreshTokens } from '../lib/wearables/providers/oauth-client';
import { integration, listNotifications, subscribeAll, subscribeNotifications, withingsSignature } from '../lib/wearables/providers/withings';
import { envelopeError, isUnauthorizedEnvelope, statusFamily, unwrapTokenEnvelope } from '../lib/wearables/providers/withings/client';
import { mapMeasureGroups, mapSleepSeries, mapSleepSummary, scaleMeasure } from '../lib/wearables/providers/withings/mapping';
import { parseNotification } from '../lib/wearables/providers/withings/push';
import {
  FAKE_WITHINGS_CLIENT,
  startFakeWithings,
  type FakeMeasureGroup,
  type FakeSleepSummary,
  type FakeWorkout,
  type WithingsFake,
} from './support/fakes/withings';

const REDIRECT_URI = 'https://app.example.test/v2/link/callback/withings';
const client = { ...FAKE_WITHINGS_CLIENT, redirectUri: REDIRECT_URI };
const DAY_MS = 86_400_000;

let fake: WithingsFake;

beforeAll(async () => {
  fake = await startFakeWithings();
});
afterAll(() => fake.close());

// ---- Helpers: a browser on the consent page, a connection, a pull ------------------------------------------------

/** Opens the authorize URL like a browser, submits the consent form, and returns the redirect's query. */
async function consent(decision: 'approve' | 'deny', state = 'st4te'): Promise<URLSearchParams> {
  const url = authorizeUrl(integration.oauth, client, state, { baseUrl: fake.url });
  const page = await fetch(url);
  expect(page.status).toBe(200);
  const html = await page.text();
  const action = /<form method="post" action="([^"]+)"/.exec(html)![1];
  const form = new URLSearchParams();
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) form.set(m[1], m[2].replace(/&amp;/g, '&').replace(/&quot;/g, '"'));
  form.set('decision', decision);
  const res = await fetch(new URL(action, fake.url), {
    method: 'POST',
    body: form,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    redirect: 'manual',
  });
  expect(res.status).toBe(302);
  const location = new URL(res.headers.get('location')!);
  expect(`${location.origin}${location.pathname}`).toBe(REDIRECT_URI);
  return location.searchParams;
}

interface Connection {
  tokens: TokenSet;
  ctx: ProviderCallContext;
  userId: string;
}

function contextFor(tokens: TokenSet, externalUserId: string | null, clientCreds = FAKE_WITHINGS_CLIENT): ProviderCallContext {
  const http = createProviderHttp({ integration, baseUrl: fake.url, client: clientCreds, accessToken: async () => tokens.access_token });
  return { http, externalUserId, tokenExtras: tokens.extras, client: clientCreds };
}

async function connect(user: { id?: string; timezone?: string; zoneOffsetSeconds?: number } = {}): Promise<Connection> {
  const u = fake.addUser({ zoneOffsetSeconds: 0, ...user });
  fake.nextConsentUser = u.id;
  const code = (await consent('approve')).get('code')!;
  const tokens = await exchangeCode(integration.oauth, client, code, { baseUrl: fake.url });
  const ctx = contextFor(tokens, null);
  const { externalUserId } = await integration.afterConnect!(ctx);
  ctx.externalUserId = externalUserId;
  return { tokens, ctx, userId: u.id };
}

/** The pull window of local dates [startDate, endDate] at a fixed offset. */
function windowOf(startDate: string, endDate: string, offsetSeconds: number): PullWindow {
  return {
    startDate,
    endDate,
    start: new Date(Date.parse(`${startDate}T00:00:00Z`) - offsetSeconds * 1000),
    end: new Date(Date.parse(`${endDate}T00:00:00Z`) + DAY_MS - offsetSeconds * 1000),
    timezoneOffsetSeconds: offsetSeconds,
  };
}
const ymd = (ms: number) => new Date(ms).toISOString().slice(0, 10);

interface Pulled {
  summaries: SummaryInput[];
  samples: SampleInput[];
  pages: number;
  cursors: PageCursor[];
  sourceTypes: Set<string>;
}

/** Pulls one resource page by page, checking that every page is exactly one HTTP request to the fake. */
async function pull(ctx: ProviderCallContext, resource: string, window: PullWindow): Promise<Pulled> {
  const out: Pulled = { summaries: [], samples: [], pages: 0, cursors: [], sourceTypes: new Set() };
  let cursor = integration.firstPage(resource, window);
  while (cursor) {
    out.cursors.push(cursor);
    expect(JSON.parse(JSON.stringify(cursor))).toEqual(cursor); // small flat JSON
    for (const v of Object.values(cursor)) expect(['string', 'number'].includes(typeof v) || v === null).toBe(true);
    const before = fake.requests.length;
    const page = await integration.fetchPage(ctx, resource, cursor);
    expect(fake.requests.length - before).toBe(1);
    collect(out, page.data);
    out.pages++;
    cursor = page.next;
    expect(out.pages).toBeLessThan(500);
  }
  return out;
}
function collect(out: Pulled, data: ProviderData): void {
  out.summaries.push(...data.summaries);
  out.samples.push(...data.samples);
  out.sourceTypes.add(data.source_type);
}
const ofResource = (samples: SampleInput[], resource: string) => samples.filter((s) => s.resource === resource);

/** A receiver that records method, headers and raw body, answering HEAD/GET/POST with `status`. */
async function startCallback(status = 200): Promise<{ url: string; requests: PushRequest[]; setStatus(s: number): void; close(): Promise<void> }> {
  let answer = status;
  const requests: PushRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      requests.push({
        method: req.method ?? 'GET',
        query: Object.fromEntries(url.searchParams),
        headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')])),
        rawBody: Buffer.concat(chunks),
      });
      res.writeHead(answer);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v2/providers/withings/webhook`,
    requests,
    setStatus: (s) => (answer = s),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

// ---- OAuth -------------------------------------------------------------------------------------------------------

describe('withings OAuth', () => {
  it('builds the production authorize URL with comma-separated scopes, and exchanges the code in the body with action=requesttoken', async () => {
    const url = new URL(authorizeUrl(integration.oauth, client, 'abc', {}));
    expect(`${url.origin}${url.pathname}`).toBe('https://account.withings.com/oauth2_user/authorize2');
    expect(url.searchParams.get('scope')).toBe('user.info,user.metrics,user.activity');
    expect(url.searchParams.get('response_type')).toBe('code');
    expect(url.searchParams.get('state')).toBe('abc');
    expect(url.searchParams.has('code_challenge')).toBe(false);

    const { tokens, ctx, userId } = await connect();
    expect(/^\d+$/.test(userId)).toBe(true);
    expect(tokens.extras.userid).toBe(userId);
    expect(tokens.refresh_token).toMatch(/^rt_/);
    expect(tokens.scope).toBe('user.info,user.metrics,user.activity');
    // expires_in 10800: three hours.
    expect(Math.round((tokens.expires_at!.getTime() - Date.now()) / 1000)).toBeGreaterThan(10_790);
    expect(Math.round((tokens.expires_at!.getTime() - Date.now()) / 1000)).toBeLessThanOrEqual(10_800);
    expect(ctx.externalUserId).toBe(userId);

    const tokenCall = fake.requestsTo('/v2/oauth2').at(-1)!;
    const form = new URLSearchParams(tokenCall.body);
    expect(form.get('action')).toBe('requesttoken');
    expect(form.get('grant_type')).toBe('authorization_code');
    expect(form.get('client_id')).toBe(FAKE_WITHINGS_CLIENT.clientId);
    expect(form.get('client_secret')).toBe(FAKE_WITHINGS_CLIENT.clientSecret);
    expect(tokenCall.headers.authorization).toBeUndefined();
  });

  it('a denied consent redirects with access_denied and no code', async () => {
    const q = await consent('deny', 'xyz');
    expect(q.get('error')).toBe('access_denied');
    expect(q.get('state')).toBe('xyz');
    expect(q.has('code')).toBe(false);
  });

  it('a code is single-use and valid 30 seconds: a reused or stale code is invalid_grant (status 503 in a 200)', async () => {
    const code = (await consent('approve')).get('code')!;
    await exchangeCode(integration.oauth, client, code, { baseUrl: fake.url });
    await expect(exchangeCode(integration.oauth, client, code, { baseUrl: fake.url })).rejects.toMatchObject({ error: 'invalid_grant' });

    fake.codeTtlSeconds = 1;
    try {
      const stale = (await consent('approve')).get('code')!;
      await new Promise((r) => setTimeout(r, 1100));
      const err = await exchangeCode(integration.oauth, client, stale, { baseUrl: fake.url }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OAuthError);
      expect((err as OAuthError).message).toContain('invalid code');
    } finally {
      fake.codeTtlSeconds = 30;
    }
  });

  it('refresh rotates; the old refresh token works until the new access token is used, then is refused', async () => {
    const { tokens, userId } = await connect();
    const first = await refreshTokens(integration.oauth, client, tokens.refresh_token!, { baseUrl: fake.url });
    expect(first.refresh_token).not.toBe(tokens.refresh_token);
    expect(first.access_token).not.toBe(tokens.access_token);
    expect(first.extras.userid).toBe(userId);
    const refreshCall = new URLSearchParams(fake.requestsTo('/v2/oauth2').at(-1)!.body);
    expect(refreshCall.get('action')).toBe('requesttoken');
    expect(refreshCall.get('grant_type')).toBe('refresh_token');
    // Safety net: the previous refresh token still works while the new access token is unused…
    expect(fake.refreshTokenState(tokens.refresh_token!).valid).toBe(true);
    // …and stops as soon as the new access token is used.
    await integration.fetchPage(contextFor(first, userId), 'activity', integration.firstPage('activity', windowOf('2026-01-01', '2026-01-01', 0))!);
    expect(fake.refreshTokenState(tokens.refresh_token!).valid).toBe(false);
    await expect(refreshTokens(integration.oauth, client, tokens.refresh_token!, { baseUrl: fake.url })).rejects.toMatchObject({ error: 'invalid_grant' });
    // The new one keeps working.
    const second = await refreshTokens(integration.oauth, client, first.refresh_token!, { baseUrl: fake.url });
    expect(second.access_token).toMatch(/^at_/);
  });

  it('the old refresh token also expires 8 hours after the new one is issued, unused', async () => {
    const { tokens } = await connect();
    const next = await refreshTokens(integration.oauth, client, tokens.refresh_token!, { baseUrl: fake.url });
    fake.advance(8 * 3600 - 60);
    try {
      expect(fake.refreshTokenState(tokens.refresh_token!).valid).toBe(true);
      fake.advance(120);
      expect(fake.refreshTokenState(tokens.refresh_token!).valid).toBe(false);
      await expect(refreshTokens(integration.oauth, client, tokens.refresh_token!, { baseUrl: fake.url })).rejects.toBeInstanceOf(OAuthError);
      // The new refresh token lasts a year.
      const again = await refreshTokens(integration.oauth, client, next.refresh_token!, { baseUrl: fake.url });
      expect(again.access_token).toBeTruthy();
    } finally {
      fake.advance(-(8 * 3600 + 60));
    }
  });

  it('unwrapTokenResponse: a refused grant is invalid_grant, a rate limit or a server fault is provider_unavailable', () => {
    expect(unwrapTokenEnvelope({ status: 0, body: { userid: 363, access_token: 'a', refresh_token: 'r', expires_in: 10800 } })).toMatchObject({
      userid: '363',
      access_token: 'a',
    });
    expect(() => unwrapTokenEnvelope({ status: 503, body: {}, error: 'Invalid Params: invalid refresh_token' })).toThrow(OAuthError);
    expect(() => unwrapTokenEnvelope({ status: 401, body: {}, error: 'invalid_token' })).toThrow(OAuthError);
    for (const status of [601, 522, 2556]) {
      const err = (() => {
        try {
          unwrapTokenEnvelope({ status, body: {} });
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(ProviderFetchError);
      expect((err as ProviderFetchError).errorType).toBe('provider_unavailable');
    }
  });

  it('afterConnect refuses a token response without a userid', async () => {
    const ctx = contextFor({ access_token: 'x', refresh_token: null, expires_at: null, scope: null, extras: {} }, null);
    await expect(integration.afterConnect!(ctx)).rejects.toMatchObject({ errorType: 'provider_credential_error' });
  });
});

// ---- A 90-day pull against the fake --------------------------------------------------------------------------------

describe('withings 90-day pull', () => {
  const offset = 7200; // Etc/GMT-2: the user's device zone
  let conn: Connection;
  let window: PullWindow;
  const today = ymd(Date.now() + offset * 1000);
  const endDate = ymd(Date.parse(`${today}T00:00:00Z`) - DAY_MS);
  const startDate = ymd(Date.parse(`${endDate}T00:00:00Z`) - 89 * DAY_MS);

  beforeAll(async () => {
    conn = await connect({ zoneOffsetSeconds: offset });
    window = windowOf(startDate, endDate, offset);
    expect(integration.historyDays).toBe(90);
  });
  beforeEach(() => fake.resetServed(conn.userId));

  it('declares its pull units', () => {
    expect(integration.resources).toEqual(['profile', 'body', 'activity', 'workouts', 'sleep', 'heartrate']);
    expect(integration.firstPage('nothing', window)).toBeNull();
  });

  it('activity: every served day lands once, paged by offset/more, with our units', async () => {
    const got = await pull(conn.ctx, 'activity', window);
    const served = fake.servedCount(conn.userId);
    expect(served.activities).toBe(90);
    expect(got.summaries).toHaveLength(90);
    expect(got.pages).toBe(Math.ceil(90 / fake.pageSize.activities));
    expect(new Set(got.summaries.map((s) => s.source_key)).size).toBe(90);
    const expected = fake.activitiesFor(conn.userId, startDate, endDate);
    const day = expected[10];
    const s = got.summaries.find((x) => x.source_key === day.date)!;
    expect(s.calendar_date).toBe(day.date);
    expect(s.time).toBe(new Date(Date.parse(`${day.date}T00:00:00Z`) - offset * 1000).toISOString()); // local midnight, as UTC
    expect(s.fields).toMatchObject({
      date: `${day.date}T00:00:00+00:00`,
      calendar_date: day.date,
      time_zone: 'Etc/GMT-2',
      timezone_offset: offset,
      steps: day.steps,
      calories_active: day.calories,
      calories_total: day.totalcalories,
      distance: day.distance,
      floors_climbed: day.elevation,
      low: Math.round(day.soft / 60),
      medium: Math.round(day.moderate / 60),
      high: Math.round(day.intense / 60),
      heart_rate: { avg_bpm: day.hr_average, min_bpm: day.hr_min, max_bpm: day.hr_max, resting_bpm: null },
    });
    const req = new URLSearchParams(fake.requestsTo('/v2/measure', conn.userId).at(-1)!.body);
    expect(req.get('action')).toBe('getactivity');
    expect(req.get('startdateymd')).toBe(startDate);
    expect(req.get('enddateymd')).toBe(endDate);
  });

  it('body: measure groups → body summaries and weight/fat/BP/SpO2/temperature samples, value × 10^unit, BMI from the height', async () => {
    const got = await pull(conn.ctx, 'body', window);
    const served = fake.servedCount(conn.userId);
    const groups = fake.measureGroupsFor(conn.userId, Math.floor(window.start.getTime() / 1000), Math.floor(window.end.getTime() / 1000) - 1);
    const composition = groups.filter((g) => g.measures.some((m) => m.type === 1));
    expect(served.measuregrps).toBe(groups.length + 1); // + the height group of the first page
    expect(got.summaries).toHaveLength(composition.length);
    expect(ofResource(got.samples, 'weight')).toHaveLength(served.meastype_1);
    expect(ofResource(got.samples, 'fat')).toHaveLength(served.meastype_6);
    expect(ofResource(got.samples, 'lean_body_mass')).toHaveLength(served.meastype_5);
    expect(ofResource(got.samples, 'blood_pressure')).toHaveLength(served.meastype_10);
    expect(ofResource(got.samples, 'blood_oxygen')).toHaveLength(served.meastype_54 ?? 0);
    expect(ofResource(got.samples, 'body_temperature')).toHaveLength(served.meastype_71 ?? 0);
    expect(ofResource(got.samples, 'heartrate')).toHaveLength(served.meastype_11);
    expect(ofResource(got.samples, 'body_mass_index')).toHaveLength(served.meastype_1);
    expect(got.pages).toBe(1 + Math.max(1, Math.ceil(groups.length / fake.pageSize.measuregrps)));

    const g = composition[3];
    const weight = g.measures.find((m) => m.type === 1)!;
    const s = got.summaries.find((x) => x.source_key === String(g.grpid))!;
    expect(s.time).toBe(new Date(g.date * 1000).toISOString());
    expect(s.fields.weight).toBe(weight.value / 1000);
    expect(s.fields.timezone_offset).toBe(offset);
    const heightCm = fake.measureGroupsFor(conn.userId, 0, Math.floor(Date.now() / 1000)).find((x) => x.measures[0]?.type === 4)!.measures[0].value;
    expect(s.fields.body_mass_index).toBe(Math.round((weight.value / 1000 / (heightCm / 100) ** 2) * 10) / 10);
    const bp = groups.find((x) => x.measures.some((m) => m.type === 10))!;
    const bpSample = ofResource(got.samples, 'blood_pressure').find((x) => x.timestamp === new Date(bp.date * 1000).toISOString())!;
    expect(bpSample).toMatchObject({
      unit: 'mmHg',
      systolic: bp.measures.find((m) => m.type === 10)!.value,
      diastolic: bp.measures.find((m) => m.type === 9)!.value,
      timezone_offset: offset,
    });
    expect(bpSample.value).toBeUndefined();
    for (const x of ofResource(got.samples, 'blood_oxygen')) expect(x.value).toBeGreaterThan(90);
  });

  it('workouts: one summary per served workout, local times with the record zone applied once', async () => {
    const got = await pull(conn.ctx, 'workouts', window);
    const expected = fake.workoutsFor(conn.userId, startDate, endDate);
    expect(fake.servedCount(conn.userId).workouts).toBe(expected.length);
    expect(got.summaries).toHaveLength(expected.length);
    const w = expected[0];
    const s = got.summaries.find((x) => x.source_key === String(w.id))!;
    expect(s.time).toBe(new Date(w.startdate * 1000).toISOString());
    const local = new Date((w.startdate + offset) * 1000).toISOString().slice(0, 19);
    expect(s.fields.time_start).toBe(`${local}+02:00`);
    expect(s.fields).toMatchObject({
      provider_id: String(w.id),
      average_hr: w.data.hr_average,
      max_hr: w.data.hr_max,
      calories: w.data.calories,
      distance: w.data.distance,
      moving_time: w.enddate - w.startdate - w.data.pause_duration,
      steps: w.data.steps,
      timezone_offset: offset,
      hr_zones: [w.data.hr_zone_0, w.data.hr_zone_1, w.data.hr_zone_2, w.data.hr_zone_3],
    });
    expect((s.fields.sport as { id: number }).id).toBe(w.category);
  });

  it('sleep: summaries, then the nights’ series noon to noon (hypnogram, heart rate, respiration, RMSSD — never SDNN)', async () => {
    const got = await pull(conn.ctx, 'sleep', window);
    const served = fake.servedCount(conn.userId);
    const nights = fake.sleepSummariesFor(conn.userId, startDate, endDate);
    expect(served.sleep_summaries).toBe(nights.length);
    expect(got.summaries).toHaveLength(nights.length);
    expect(ofResource(got.samples, 'hypnogram')).toHaveLength(served.sleep_segments);
    expect(ofResource(got.samples, 'heartrate')).toHaveLength(served.sleep_hr);
    expect(ofResource(got.samples, 'respiratory_rate')).toHaveLength(served.sleep_rr);
    expect(ofResource(got.samples, 'hrv')).toHaveLength(served.sleep_rmssd);
    expect(served.sleep_sdnn_1).toBeUndefined(); // never asked for
    const seriesCalls = fake
      .requestsTo('/v2/sleep', conn.userId)
      .map((r) => new URLSearchParams(r.body))
      .filter((f) => f.get('action') === 'get');
    expect(seriesCalls).toHaveLength(90);
    for (const f of seriesCalls) {
      expect(Number(f.get('enddate')) - Number(f.get('startdate'))).toBeLessThan(86_400);
      expect(f.get('data_fields')!.split(',')).not.toContain('sdnn_1');
    }
    // Every segment of every night in the window was served once (none lost between two noon-to-noon calls).
    const first = nights[0],
      last = nights.at(-1)!;
    const segments = fake.sleepSegmentsFor(conn.userId, first.startdate, last.enddate);
    expect(served.sleep_segments).toBe(segments.length);

    const night = nights[5];
    const s = got.summaries.find((x) => x.source_key === String(night.id))!;
    expect(s.calendar_date).toBe(night.date);
    expect(s.time).toBe(new Date(night.startdate * 1000).toISOString());
    expect(s.fields).toMatchObject({
      timezone_offset: offset,
      duration: night.enddate - night.startdate,
      total: night.data.total_sleep_time,
      deep: night.data.deepsleepduration,
      light: night.data.lightsleepduration,
      rem: night.data.remsleepduration,
      awake: night.data.wakeupduration,
      hr_lowest: night.data.hr_min,
      hr_average: night.data.hr_average,
      respiratory_rate: night.data.rr_average,
      latency: night.data.sleep_latency,
      score: night.data.sleep_score,
      efficiency: Math.round(night.data.sleep_efficiency * 1000) / 10,
      type: 'long_sleep',
      state: 'confirmed',
      average_hrv: Math.round(((night.data.rmssd_start_avg + night.data.rmssd_end_avg) / 2) * 10) / 10,
    });
    const seg = segments.find((x) => x.startdate >= night.startdate && Object.keys(x.rmssd).length)!;
    const [ts, rmssd] = Object.entries(seg.rmssd)[0];
    const hrv = ofResource(got.samples, 'hrv').find((x) => x.timestamp === new Date(Number(ts) * 1000).toISOString())!;
    expect(hrv).toMatchObject({ value: rmssd, unit: 'rmssd' });
    expect(hrv.value).not.toBe(seg.sdnn_1[ts]);
  });

  it('heartrate: intraday in 24-hour calls, one per day, every served value landing', async () => {
    const got = await pull(conn.ctx, 'heartrate', window);
    const served = fake.servedCount(conn.userId);
    expect(got.pages).toBe(90);
    const calls = fake
      .requestsTo('/v2/measure', conn.userId)
      .map((r) => new URLSearchParams(r.body))
      .filter((f) => f.get('action') === 'getintradayactivity');
    expect(calls).toHaveLength(90);
    for (const f of calls) expect(Number(f.get('enddate')) - Number(f.get('startdate'))).toBe(86_399);
    expect(Number(calls[0].get('startdate'))).toBe(window.start.getTime() / 1000);
    expect(ofResource(got.samples, 'heartrate')).toHaveLength(served.intraday_heart_rate);
    expect(served.intraday_heart_rate).toBe(90 * 144);
    expect(ofResource(got.samples, 'steps')).toHaveLength(served.intraday_steps);
    expect(ofResource(got.samples, 'distance')).toHaveLength(served.intraday_distance);
    expect(ofResource(got.samples, 'calories_active')).toHaveLength(served.intraday_calories);
    expect(ofResource(got.samples, 'floors_climbed')).toHaveLength(served.intraday_elevation);
    expect(ofResource(got.samples, 'blood_oxygen')).toHaveLength(served.intraday_spo2_auto);
    // The steps of the samples add up to the day's activity steps.
    const day = fake.activitiesFor(conn.userId, endDate, endDate)[0];
    const dayStart = Date.parse(`${endDate}T00:00:00Z`) - offset * 1000;
    const steps = ofResource(got.samples, 'steps').filter((x) => Date.parse(x.timestamp) >= dayStart && Date.parse(x.timestamp) < dayStart + DAY_MS);
    expect(steps.reduce((a, x) => a + (x.value ?? 0), 0)).toBe(day.steps);
    expect(steps[0]).toMatchObject({ unit: 'count', type: null });
    expect(Date.parse(steps[0].end!) - Date.parse(steps[0].start!)).toBe(15 * 60_000);
  });

  it('profile: the height in centimetres', async () => {
    const got = await pull(conn.ctx, 'profile', window);
    expect(got.summaries).toHaveLength(1);
    const heightCm = fake.measureGroupsFor(conn.userId, 0, Math.floor(Date.now() / 1000)).find((x) => x.measures[0]?.type === 4)!.measures[0].value;
    expect(got.summaries[0]).toMatchObject({ resource: 'profile', source_key: 'profile', calendar_date: endDate, fields: { height: heightCm } });
  });

  it('source_keys are stable: the same window pulled twice gives the same keys', async () => {
    for (const resource of ['body', 'workouts', 'sleep']) {
      const a = await pull(conn.ctx, resource, window);
      const b = await pull(conn.ctx, resource, window);
      expect(b.summaries.map((s) => s.source_key)).toEqual(a.summaries.map((s) => s.source_key));
      expect(b.summaries).toEqual(a.summaries);
    }
  });
});

// ---- The traps, on explicit data -----------------------------------------------------------------------------------

describe('withings mapping traps', () => {
  it('measures are value × 10^unit exactly', () => {
    expect(scaleMeasure({ value: 65750, unit: -3 })).toBe(65.75);
    expect(scaleMeasure({ value: 2275, unit: -2 })).toBe(22.75);
    expect(scaleMeasure({ value: 7, unit: 1 })).toBe(70);
    const { summaries, samples } = mapMeasureGroups(
      {
        timezone: 'Europe/Paris',
        measuregrps: [
          {
            grpid: 12,
            date: 1594245600,
            category: 1,
            measures: [
              { value: 65750, type: 1, unit: -3 },
              { value: 2275, type: 6, unit: -2 },
              { value: 4731, type: 76, unit: -2 },
            ],
          },
          { grpid: 13, date: 1594245700, category: 2, measures: [{ value: 60000, type: 1, unit: -3 }] }, // an objective, not a measure
        ],
      },
      { heightMetres: 1.8, fallbackOffset: 0 },
    );
    expect(summaries).toHaveLength(1);
    expect(summaries[0].fields).toMatchObject({ weight: 65.75, fat: 22.75, body_mass_index: 20.3, muscle_mass_percentage: 72, timezone_offset: 7200 });
    expect(ofResource(samples, 'weight')).toEqual([expect.objectContaining({ value: 65.75, unit: 'kg', timestamp: '2020-07-08T22:00:00.000Z' })]);
  });

  it('sleep: the record zone applied once — time is the UTC instant, bedtime_* the same instant in local time (summer and winter)', async () => {
    const conn = await connect({ zoneOffsetSeconds: 0 });
    const summer = Date.parse('2026-07-01T21:30:00Z') / 1000;
    const winter = Date.parse('2026-01-14T22:10:00Z') / 1000;
    const night = (id: number, start: number, date: string): FakeSleepSummary => ({
      id,
      timezone: 'Europe/Paris',
      model: 32,
      model_id: 63,
      startdate: start,
      enddate: start + 8 * 3600,
      date,
      created: start + 9 * 3600,
      modified: start + 9 * 3600,
      hash_deviceid: 'x',
      completed: true,
      data: {
        total_sleep_time: 25200,
        lightsleepduration: 14000,
        deepsleepduration: 5200,
        remsleepduration: 6000,
        wakeupduration: 1800,
        sleep_efficiency: 0.875,
        rmssd_start_avg: 40,
        rmssd_end_avg: 50,
      },
    });
    fake.setData(conn.userId, { sleepSummaries: [night(1, summer, '2026-07-02'), night(2, winter, '2026-01-15')], sleepSegments: [] });
    const got = await pull(conn.ctx, 'sleep', windowOf('2026-01-15', '2026-07-02', 0));
    const s1 = got.summaries.find((s) => s.source_key === '1')!;
    expect(s1.time).toBe('2026-07-01T21:30:00.000Z');
    expect(s1.fields).toMatchObject({
      bedtime_start: '2026-07-01T23:30:00+02:00',
      bedtime_stop: '2026-07-02T07:30:00+02:00',
      timezone_offset: 7200,
      calendar_date: '2026-07-02',
      efficiency: 87.5,
      average_hrv: 45,
    });
    const s2 = got.summaries.find((s) => s.source_key === '2')!;
    expect(s2.time).toBe('2026-01-14T22:10:00.000Z');
    expect(s2.fields).toMatchObject({ bedtime_start: '2026-01-14T23:10:00+01:00', timezone_offset: 3600 });
  });

  it('workouts: the record zone applied once (America/New_York)', async () => {
    const conn = await connect({ zoneOffsetSeconds: 0 });
    const start = Date.parse('2026-03-20T22:15:00Z') / 1000;
    const w: FakeWorkout = {
      id: 987,
      category: 2,
      timezone: 'America/New_York',
      model: 93,
      attrib: 7,
      startdate: start,
      enddate: start + 3000,
      date: '2026-03-20',
      modified: start + 4000,
      deviceid: 'd',
      data: { distance: 8000, pause_duration: 200, calories: 500 },
    };
    fake.setData(conn.userId, { workouts: [w] });
    const got = await pull(conn.ctx, 'workouts', windowOf('2026-03-20', '2026-03-20', 0));
    expect(got.summaries).toHaveLength(1);
    expect(got.summaries[0].time).toBe('2026-03-20T22:15:00.000Z');
    expect(got.summaries[0].fields).toMatchObject({
      time_start: '2026-03-20T18:15:00-04:00',
      time_end: '2026-03-20T19:05:00-04:00',
      timezone_offset: -14400,
      calendar_date: '2026-03-20',
      moving_time: 2800,
      average_speed: 2.86,
      sport: { id: 2, name: 'Run', slug: 'run' },
    });
  });

  it('HRV is the rmssd series, never sdnn_1, even when both are present', () => {
    const samples = mapSleepSeries([{ startdate: 100, enddate: 700, state: 2, hr: { '100': 50 }, rmssd: { '100': 42.5 }, sdnn_1: { '100': 70.1 } }]);
    expect(ofResource(samples, 'hrv')).toEqual([expect.objectContaining({ value: 42.5, unit: 'rmssd' })]);
    expect(ofResource(samples, 'hypnogram')).toEqual([
      expect.objectContaining({ value: 1, unit: 'stage', start: '1970-01-01T00:01:40.000Z', end: '1970-01-01T00:11:40.000Z' }),
    ]);
    const s = mapSleepSummary({ id: 5, startdate: 0, enddate: 3600, data: { rmssd_start_avg: 30, rmssd_end_avg: 36 } as never }, 0);
    expect(s.fields.average_hrv).toBe(33);
  });

  it('body measures: a re-delivered (modified) group keeps its source_key', async () => {
    const conn = await connect({ zoneOffsetSeconds: 0 });
    const g = (value: number, modified: number): FakeMeasureGroup => ({
      grpid: 4716596696,
      attrib: 0,
      date: Date.parse('2026-02-02T07:00:00Z') / 1000,
      created: 1,
      modified,
      category: 1,
      deviceid: 'd',
      hash_deviceid: 'd',
      measures: [{ value, type: 1, unit: -2, algo: 0, fm: 3 }],
      model: 'Body+',
      model_id: 5,
      comment: null,
    });
    fake.setData(conn.userId, { measuregrps: [g(8010, 1)] });
    const a = await pull(conn.ctx, 'body', windowOf('2026-02-02', '2026-02-02', 0));
    fake.setData(conn.userId, { measuregrps: [g(8030, 2)] });
    const b = await pull(conn.ctx, 'body', windowOf('2026-02-02', '2026-02-02', 0));
    expect(a.summaries.map((s) => s.source_key)).toEqual(['4716596696']);
    expect(b.summaries.map((s) => s.source_key)).toEqual(['4716596696']);
    expect([a.summaries[0].fields.weight, b.summaries[0].fields.weight]).toEqual([80.1, 80.3]);
  });
});

// ---- Errors ------------------------------------------------------------------------------------------------------

describe('withings errors', () => {
  let conn: Connection;
  const cursor = () => integration.firstPage('activity', windowOf('2026-01-01', '2026-01-03', 0))!;
  beforeAll(async () => {
    conn = await connect();
  });

  it('an invalid access token (status 401 in an HTTP 200) is a credential error', async () => {
    fake.expireAccessTokens(conn.userId);
    const err = await integration.fetchPage(conn.ctx, 'activity', cursor()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderFetchError);
    expect((err as ProviderFetchError).errorType).toBe('provider_credential_error');
    expect((err as ProviderFetchError).message).toContain('invalid_token');
    conn = await connect();
  });

  it('HTTP 429 → RateLimitedError one minute on (no documented header), or at Retry-After', async () => {
    fake.fail({ path: '/v2/measure', status: 429 });
    const t0 = Date.now();
    const err = await integration.fetchPage(conn.ctx, 'activity', cursor()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    const wait = (err as RateLimitedError).retryAt.getTime() - t0;
    expect(wait).toBeGreaterThanOrEqual(59_000);
    expect(wait).toBeLessThan(62_000);
    fake.fail({ path: '/v2/measure', status: 429, headers: { 'retry-after': '17' } });
    const err2 = (await integration.fetchPage(conn.ctx, 'activity', cursor()).catch((e: unknown) => e)) as RateLimitedError;
    expect(Math.round((err2.retryAt.getTime() - Date.now()) / 1000)).toBe(17);
    expect(integration.rateLimitResetAt!(new Headers(), new Date(0))!.getTime()).toBe(60_000);
  });

  it('status 601 "Too many request" in an HTTP 200 → RateLimitedError', async () => {
    fake.rateLimitPerMinute = 0;
    try {
      const t0 = Date.now();
      const err = await integration
        .fetchPage(conn.ctx, 'sleep', integration.firstPage('sleep', windowOf('2026-01-01', '2026-01-02', 0))!)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RateLimitedError);
      expect((err as RateLimitedError).retryAt.getTime() - t0).toBeGreaterThanOrEqual(59_000);
    } finally {
      fake.rateLimitPerMinute = null;
    }
  });

  it('HTTP 5xx → provider_unavailable; envelope timeout/error → provider_unavailable; invalid params → non_retriable', async () => {
    fake.fail({ path: '/v2/measure', status: 503 });
    await expect(integration.fetchPage(conn.ctx, 'activity', cursor())).rejects.toMatchObject({ errorType: 'provider_unavailable' });
    fake.fail({ path: '/v2/measure', status: 200, body: { status: 522, body: {}, error: 'Timeout' } });
    await expect(integration.fetchPage(conn.ctx, 'activity', cursor())).rejects.toMatchObject({ errorType: 'provider_unavailable' });
    fake.fail({ path: '/v2/measure', status: 200, body: { status: 2556, body: {}, error: 'An error occurred' } });
    await expect(integration.fetchPage(conn.ctx, 'activity', cursor())).rejects.toMatchObject({ errorType: 'provider_unavailable' });
    // The fake's own parameter check: a getactivity without its dates is "Invalid Params".
    await expect(integration.fetchPage(conn.ctx, 'activity', { startdateymd: '2026-01-05', enddateymd: '2026-01-01', offset: 0, tz: 0 })).rejects.toMatchObject(
      { errorType: 'non_retriable_error' },
    );
    fake.fail({ path: '/measure', status: 200, body: { status: 2554, body: {}, error: 'Not implemented' } });
    await expect(integration.fetchPage(conn.ctx, 'profile', integration.firstPage('profile', windowOf('2026-01-01', '2026-01-01', 0))!)).rejects.toMatchObject({
      errorType: 'non_retriable_error',
    });
    fake.fail({ path: '/v2/measure', status: 200, body: 'not json' });
    await expect(integration.fetchPage(conn.ctx, 'activity', cursor())).rejects.toMatchObject({ errorType: 'provider_unavailable' });
  });

  it('the fake answers only the first 24 h of a longer intraday or sleep range, as Withings does', async () => {
    const from = Math.floor(Date.now() / 1000) - 5 * 86_400;
    const call = async (path: string, form: Record<string, string>) => {
      const res = await fetch(`${fake.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${conn.tokens.access_token}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(form),
      });
      return (await res.json()) as { status: number; body: { series: Record<string, unknown> | { startdate: number }[] } };
    };
    const intraday = await call('/v2/measure', {
      action: 'getintradayactivity',
      startdate: String(from),
      enddate: String(from + 3 * 86_400),
      data_fields: 'heart_rate',
    });
    expect(intraday.status).toBe(0);
    const stamps = Object.keys(intraday.body.series).map(Number);
    expect(stamps.length).toBeGreaterThan(100);
    expect(Math.max(...stamps)).toBeLessThanOrEqual(from + 86_400);
    const sleep = await call('/v2/sleep', { action: 'get', startdate: String(from), enddate: String(from + 3 * 86_400) });
    expect(Math.max(...(sleep.body.series as { startdate: number }[]).map((s) => s.startdate))).toBeLessThanOrEqual(from + 86_400);
    expect((await call('/v2/sleep', { action: 'get', startdate: String(from) })).status).toBe(503);
  });

  it('the status table: families as documented', () => {
    expect([0, 100, 200, 201, 214, 401, 503, 522, 524, 601, 2554, 9999].map((s) => (s === 0 ? 'ok' : statusFamily(s)))).toEqual([
      'ok',
      'authentication_failed',
      'authentication_failed',
      'invalid_params',
      'unauthorized',
      'authentication_failed',
      'invalid_params',
      'timeout',
      'bad_state',
      'too_many_requests',
      'not_implemented',
      'an_error_occurred',
    ]);
    expect(envelopeError(601, undefined, 'x', new Date(1000))).toEqual(expect.objectContaining({ retryAt: new Date(61_000) }));
    expect([{ status: 401, body: {} }, { status: 100 }, { status: 0, body: {} }, { status: 601 }, null, 'x'].map(isUnauthorizedEnvelope)).toEqual([
      true,
      true,
      false,
      false,
      false,
      false,
    ]);
  });
});

// ---- Notifications -----------------------------------------------------------------------------------------------

describe('withings notifications', () => {
  it('subscribe: Withings HEADs the callback first; a 2xx subscribes, anything else fails the subscription', async () => {
    const conn = await connect();
    const cb = await startCallback(200);
    try {
      await subscribeNotifications(conn.ctx, { callbackUrl: cb.url, appli: 44 });
      expect(cb.requests.map((r) => r.method)).toEqual(['HEAD']);
      expect(integration.push!.handshake!(cb.requests[0], { clientSecret: 'x' })).toEqual({ status: 200 });
      expect(await listNotifications(conn.ctx)).toEqual([expect.objectContaining({ appli: 44, callbackurl: cb.url })]);
      const sent = new URLSearchParams(fake.requestsTo('/notify', conn.userId).at(-2)!.body);
      expect(Object.fromEntries(sent)).toMatchObject({ action: 'subscribe', appli: '44', callbackurl: cb.url });

      cb.setStatus(404);
      await expect(subscribeNotifications(conn.ctx, { callbackUrl: cb.url, appli: 16 })).rejects.toMatchObject({ errorType: 'non_retriable_error' });
      expect(fake.subscriptionsOf(conn.userId).map((s) => s.appli)).toEqual([44]);

      cb.setStatus(200);
      expect(await subscribeAll(conn.ctx, cb.url)).toEqual([1, 2, 4, 16, 46]); // 44 was there already
      expect(
        fake
          .subscriptionsOf(conn.userId)
          .map((s) => s.appli)
          .sort((a, b) => a - b),
      ).toEqual([1, 2, 4, 16, 44, 46]);
      expect(await subscribeAll(conn.ctx, cb.url)).toEqual([]);
    } finally {
      await cb.close();
    }
  });

  it('a notification is verified as a hint (unsigned) and parsed into the user and the widened window to fetch', async () => {
    const conn = await connect();
    const cb = await startCallback(200);
    try {
      await subscribeNotifications(conn.ctx, { callbackUrl: cb.url, appli: 16 });
      const start = Date.parse('2026-03-10T06:00:00Z') / 1000,
        end = Date.parse('2026-03-10T23:59:00Z') / 1000;
      const delivered = await fake.notifySubscribers(conn.userId, 16, { startdate: start, enddate: end });
      expect(delivered).toEqual([{ url: cb.url, status: 200 }]);
      const push = cb.requests.at(-1)!;
      expect(push.method).toBe('POST');
      expect(push.headers['content-type']).toBe('application/x-www-form-urlencoded');
      expect(integration.push!.verify(push, { clientSecret: FAKE_WITHINGS_CLIENT.clientSecret }, new Date())).toBe(true);
      const parsed = integration.push!.parse(push);
      expect(parsed).toEqual(
        ['activity', 'workouts', 'heartrate'].map((resource) => ({
          kind: 'data',
          externalUserId: conn.userId,
          resource,
          window: { startDate: '2026-03-09', endDate: '2026-03-11' },
          dedupeKey: expect.any(String),
        })),
      );
      expect(new Set(parsed.map((p) => (p as { dedupeKey: string }).dedupeKey)).size).toBe(3);
      // The same notification twice has the same dedupe keys.
      expect(integration.push!.parse(push)).toEqual(parsed);

      await fake.sendPush(cb.url, { userid: conn.userId, appli: 44, startdate: start, enddate: end });
      expect(integration.push!.parse(cb.requests.at(-1)!)).toEqual([expect.objectContaining({ kind: 'data', resource: 'sleep', externalUserId: conn.userId })]);
      await fake.sendPush(cb.url, { userid: conn.userId, appli: 1, startdate: start, enddate: start });
      expect(integration.push!.parse(cb.requests.at(-1)!)).toEqual([
        expect.objectContaining({ resource: 'body', window: { startDate: '2026-03-09', endDate: '2026-03-11' } }),
      ]);
      await fake.sendPush(cb.url, { userid: conn.userId, appli: 50, date: '2026-03-10' });
      expect(integration.push!.parse(cb.requests.at(-1)!)).toEqual([]); // bed in: nothing to fetch
    } finally {
      await cb.close();
    }
  });

  it('a malformed or foreign body is refused by verify; a forged well-formed one only makes us fetch', () => {
    const req = (body: string, type = 'application/x-www-form-urlencoded'): PushRequest => ({
      method: 'POST',
      query: {},
      headers: { 'content-type': type },
      rawBody: Buffer.from(body),
    });
    const spec = integration.push!;
    expect(spec.verify(req(''), { clientSecret: 's' }, new Date())).toBe(false);
    expect(spec.verify(req('userid=abc&appli=1'), { clientSecret: 's' }, new Date())).toBe(false);
    expect(spec.verify(req('{"userid":1,"appli":1}', 'application/json'), { clientSecret: 's' }, new Date())).toBe(false);
    expect(spec.verify(req('userid=1&appli=44&startdate=1&enddate=2'), { clientSecret: 's' }, new Date())).toBe(true);
    expect(spec.handshake!({ ...req(''), method: 'POST' }, { clientSecret: 's' })).toBeNull();
    expect(spec.handshake!({ ...req(''), method: 'GET' }, { clientSecret: 's' })).toEqual({ status: 200 });
    expect(parseNotification(req('userid=1&appli=44'))).toEqual([{ kind: 'data', externalUserId: '1', resource: 'sleep', dedupeKey: expect.any(String) }]);
    expect(parseNotification(req('userid=1&appli=46&action=update'))).toEqual([expect.objectContaining({ kind: 'data', resource: 'profile' })]);
  });

  it('the user unlinking the app (appli 46 action=unlink) is a deauthorization', async () => {
    const conn = await connect();
    const cb = await startCallback(200);
    try {
      await subscribeNotifications(conn.ctx, { callbackUrl: cb.url, appli: 46 });
      await fake.userUnlinks(conn.userId);
      const push = cb.requests.at(-1)!;
      expect(new URLSearchParams(push.rawBody.toString()).get('action')).toBe('unlink');
      expect(integration.push!.parse(push)).toEqual([{ kind: 'deauthorized', externalUserId: conn.userId, dedupeKey: expect.any(String) }]);
      await expect(
        integration.fetchPage(conn.ctx, 'activity', integration.firstPage('activity', windowOf('2026-01-01', '2026-01-01', 0))!),
      ).rejects.toMatchObject({ errorType: 'provider_credential_error' });
    } finally {
      await cb.close();
    }
  });
});

// ---- Revoke ------------------------------------------------------------------------------------------------------

describe('withings revoke', () => {
  it('revokes with a signed call (getnonce, then action=revoke): tokens invalid, subscriptions gone', async () => {
    const conn = await connect();
    const cb = await startCallback(200);
    try {
      await subscribeNotifications(conn.ctx, { callbackUrl: cb.url, appli: 1 });
      const before = fake.requests.length;
      await integration.revoke!(conn.ctx);
      const calls = fake.requests.slice(before);
      expect(calls.map((r) => `${r.path} ${new URLSearchParams(r.body).get('action')}`)).toEqual(['/v2/signature getnonce', '/v2/oauth2 revoke']);
      const nonceCall = new URLSearchParams(calls[0].body);
      expect(nonceCall.get('signature')).toBe(
        createHmac('sha256', FAKE_WITHINGS_CLIENT.clientSecret)
          .update(`getnonce,${FAKE_WITHINGS_CLIENT.clientId},${nonceCall.get('timestamp')}`)
          .digest('hex'),
      );
      const revokeCall = new URLSearchParams(calls[1].body);
      expect(revokeCall.get('userid')).toBe(conn.userId);
      expect(revokeCall.get('signature')).toBe(
        withingsSignature(FAKE_WITHINGS_CLIENT.clientSecret, { action: 'revoke', client_id: FAKE_WITHINGS_CLIENT.clientId, nonce: revokeCall.get('nonce')! }),
      );
      expect(calls.every((r) => r.headers.authorization === undefined)).toBe(true);
      expect(fake.revocations).toContain(conn.userId);
      expect(fake.subscriptionsOf(conn.userId)).toEqual([]);
      expect(fake.accessTokenState(conn.tokens.access_token).valid).toBe(false);
      await expect(refreshTokens(integration.oauth, client, conn.tokens.refresh_token!, { baseUrl: fake.url })).rejects.toMatchObject({
        error: 'invalid_grant',
      });
    } finally {
      await cb.close();
    }
  });

  it('a wrong client secret signs wrongly: the nonce is refused and nothing is revoked', async () => {
    const conn = await connect();
    const wrong = { clientId: FAKE_WITHINGS_CLIENT.clientId, clientSecret: 'not-the-secret' };
    const ctx = { ...contextFor(conn.tokens, conn.userId, wrong) };
    await expect(integration.revoke!(ctx)).rejects.toMatchObject({ errorType: 'non_retriable_error' });
    expect(fake.revocations).not.toContain(conn.userId);
    expect(fake.accessTokenState(conn.tokens.access_token).valid).toBe(true);
  });

  it('withingsSignature: values sorted by key, comma-joined, hex HMAC-SHA256 with the client secret', () => {
    const sig = withingsSignature('secret', { nonce: 'n1', action: 'revoke', client_id: 'cid' });
    expect(sig).toBe(createHmac('sha256', 'secret').update('revoke,cid,n1').digest('hex'));
  });
});
