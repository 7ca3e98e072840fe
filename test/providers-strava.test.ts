import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProviderFetchError } from '../lib/wearables/provider-errors';
import type { ProviderData, SampleInput, SummaryInput } from '../lib/wearables/model';
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
import { integration } from '../lib/wearables/providers/strava';
import { mapActivity } from '../lib/wearables/providers/strava/mapping';
import { createPushSubscription, deletePushSubscription, listPushSubscriptions } from '../lib/wearables/providers/strava/subscriptions';
import { nextQuarterHour, nextUtcMidnight, stravaRateLimitResetAt } from '../lib/wearables/providers/strava/rate-limit';
import { FAKE_STRAVA_CLIENT, startFakeStrava, type FakeStrava } from './support/fakes/strava';

const REDIRECT_URI = 'https://healthbridge.example.test/v2/link/strava/callback';
const DAY_MS = 86_400_000;
const client = { clientId: FAKE_STRAVA_CLIENT.clientId, clientSecret: FAKE_STRAVA_CLIENT.clientSecret };

/** The browser's part: GET the authorize page, POST the consent form, read the code from the 302. */
async function consent(fake: FakeStrava, decision: 'approve' | 'deny', userId?: string): Promise<URL> {
  if (userId) fake.nextConsentUser = userId;
  const url = new URL(authorizeUrl(integration.oauth, { clientId: client.clientId, redirectUri: REDIRECT_URI }, 'state-123', { baseUrl: fake.url }));
  const page = await fetch(url);
  expect(page.status).toBe(200);
  expect(await page.text()).toContain('name="decision"');
  const form = new URLSearchParams({ ...Object.fromEntries(url.searchParams), decision });
  const res = await fetch(`${fake.url}/oauth/authorize`, {
    method: 'POST',
    body: form,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    redirect: 'manual',
  });
  expect(res.status).toBe(302);
  return new URL(res.headers.get('location')!);
}

async function connect(fake: FakeStrava, userId: string): Promise<TokenSet> {
  const back = await consent(fake, 'approve', userId);
  return exchangeCode(integration.oauth, { ...client, redirectUri: REDIRECT_URI }, back.searchParams.get('code')!, { baseUrl: fake.url });
}

function contextFor(
  fake: FakeStrava,
  tokens: { access_token: string; extras?: Record<string, unknown> },
  externalUserId: string | null = null,
): ProviderCallContext {
  const http = createProviderHttp({ integration, baseUrl: fake.url, client, accessToken: async () => tokens.access_token });
  return { http, externalUserId, tokenExtras: tokens.extras ?? {}, client };
}

/** The last `days` local days up to today, in the user's offset (what a history pull asks for). */
function windowOf(days: number, offsetSeconds: number, endDaysAgo = 0): PullWindow {
  const localToday = new Date(Date.now() + offsetSeconds * 1000).toISOString().slice(0, 10);
  const endDate = new Date(Date.parse(localToday) - endDaysAgo * DAY_MS).toISOString().slice(0, 10);
  const startDate = new Date(Date.parse(endDate) - (days - 1) * DAY_MS).toISOString().slice(0, 10);
  return {
    startDate,
    endDate,
    start: new Date(Date.parse(startDate) - offsetSeconds * 1000),
    end: new Date(Date.parse(endDate) + DAY_MS - offsetSeconds * 1000),
    timezoneOffsetSeconds: offsetSeconds,
  };
}

/** Pulls a unit to its end, checking that every page is exactly one request to the fake. */
async function pull(fake: FakeStrava, ctx: ProviderCallContext, resource: string, window: PullWindow): Promise<{ data: ProviderData; cursors: PageCursor[] }> {
  const data: ProviderData = { source_type: 'unknown', summaries: [], samples: [], workout_streams: [] };
  const cursors: PageCursor[] = [];
  let cursor = integration.firstPage(resource, window);
  while (cursor) {
    cursors.push(cursor);
    const before = fake.requests.length;
    const page = await integration.fetchPage(ctx, resource, cursor);
    expect(fake.requests.length - before).toBe(1);
    data.summaries.push(...page.data.summaries);
    data.samples.push(...page.data.samples);
    data.workout_streams.push(...page.data.workout_streams);
    cursor = page.next;
    expect(cursors.length).toBeLessThan(1000);
  }
  return { data, cursors };
}

const isoLocal = (ms: number, off: number) => {
  const abs = Math.abs(off),
    pad = (n: number) => String(n).padStart(2, '0');
  return `${new Date(ms + off * 1000).toISOString().slice(0, 19)}${off < 0 ? '-' : '+'}${pad(Math.floor(abs / 3600))}:${pad(Math.floor((abs % 3600) / 60))}`;
};
const byKey = (summaries: SummaryInput[]) => new Map(summaries.map((s) => [s.source_key, s]));
const samplesOf = (data: ProviderData, resource: string) => data.samples.filter((s) => s.resource === resource);

describe('strava OAuth', () => {
  let fake: FakeStrava;
  beforeAll(async () => {
    fake = await startFakeStrava();
  });
  afterAll(() => fake.close());

  it("builds Strava's authorize URL: comma-separated scopes, approval_prompt=auto, no PKCE", () => {
    const url = new URL(authorizeUrl(integration.oauth, { clientId: client.clientId, redirectUri: REDIRECT_URI }, 's', {}));
    expect(`${url.origin}${url.pathname}`).toBe('https://www.strava.com/oauth/authorize');
    expect(url.searchParams.get('scope')).toBe('read,activity:read_all,profile:read_all');
    expect(url.searchParams.get('approval_prompt')).toBe('auto');
    expect(url.searchParams.get('response_type')).toBe('code');
    expect(url.searchParams.get('code_challenge')).toBeNull();
  });

  it('exchanges a consented code for 6-hour tokens naming the athlete; afterConnect reads the id without a request', async () => {
    const user = fake.addUser();
    const tokens = await connect(fake, user.id);
    expect(tokens.refresh_token).toMatch(/^rt_/);
    expect(Math.abs(tokens.expires_at!.getTime() - (Date.now() + 21_600_000))).toBeLessThan(10_000);
    expect((tokens.extras.athlete as { id: number }).id).toBe(Number(user.id));
    const token = fake.requestsTo('/oauth/token').at(-1)!;
    expect(token.body).toContain(`client_secret=${client.clientSecret}`); // client credentials in the body
    const before = fake.requestsTo('/api/v3/athlete').length;
    await expect(integration.afterConnect!(contextFor(fake, tokens))).resolves.toEqual({ externalUserId: user.id });
    expect(fake.requestsTo('/api/v3/athlete').length).toBe(before);
    // Without the token response's athlete: GET /athlete.
    await expect(integration.afterConnect!(contextFor(fake, { access_token: tokens.access_token, extras: {} }))).resolves.toEqual({ externalUserId: user.id });
    expect(fake.requestsTo('/api/v3/athlete').length).toBe(before + 1);
  });

  it('a denied consent comes back with error=access_denied; a code works once', async () => {
    const denied = await consent(fake, 'deny');
    expect(denied.searchParams.get('error')).toBe('access_denied');
    expect(denied.searchParams.get('code')).toBeNull();
    const back = await consent(fake, 'approve', fake.addUser().id);
    const code = back.searchParams.get('code')!;
    await exchangeCode(integration.oauth, { ...client, redirectUri: REDIRECT_URI }, code, { baseUrl: fake.url });
    await expect(exchangeCode(integration.oauth, { ...client, redirectUri: REDIRECT_URI }, code, { baseUrl: fake.url })).rejects.toMatchObject({
      constructor: OAuthError,
      error: 'invalid_grant',
    });
  });

  it('refresh: the same tokens while the access token has over an hour left; then a new pair, the old refresh token refused at once, the old access token still valid', async () => {
    const user = fake.addUser();
    const tokens = await connect(fake, user.id);
    const same = await refreshTokens(integration.oauth, client, tokens.refresh_token!, { baseUrl: fake.url });
    expect([same.access_token, same.refresh_token]).toEqual([tokens.access_token, tokens.refresh_token]);

    fake.accessTokens.get(tokens.access_token)!.expiresAt = Date.now() + 30 * 60_000; // under an hour left
    const rotated = await refreshTokens(integration.oauth, client, tokens.refresh_token!, { baseUrl: fake.url });
    expect(rotated.access_token).not.toBe(tokens.access_token);
    expect(rotated.refresh_token).not.toBe(tokens.refresh_token);
    expect(Math.abs(rotated.expires_at!.getTime() - (Date.now() + 21_600_000))).toBeLessThan(10_000);
    await expect(refreshTokens(integration.oauth, client, tokens.refresh_token!, { baseUrl: fake.url })).rejects.toMatchObject({
      constructor: OAuthError,
      error: 'invalid_grant',
    });
    // "both the newer and older access tokens can be used until they expire"
    const old = await integration.fetchPage(contextFor(fake, tokens), 'profile', integration.firstPage('profile', windowOf(1, 0))!);
    expect(old.data.summaries[0].resource).toBe('profile');
    const state = fake.tokenState(user.id);
    expect(state.refresh.filter((r) => r.valid).map((r) => r.token)).toEqual([rotated.refresh_token]);
  });
});

describe('strava pulls', () => {
  const OFFSET = 3600;
  let fake: FakeStrava;
  let userId: string;
  let ctx: ProviderCallContext;
  const window = windowOf(90, OFFSET);
  let workouts: { data: ProviderData; cursors: PageCursor[] };

  beforeAll(async () => {
    fake = await startFakeStrava({ rateLimits: { read: [5000, 50_000], overall: [5000, 50_000] } });
    userId = fake.addUser({ zoneOffsetSeconds: OFFSET }).id;
    ctx = contextFor(fake, await connect(fake, userId), userId);
    workouts = await pull(fake, ctx, 'workouts', window);
  });
  afterAll(() => fake.close());

  it('has the pull units, the 90-day window and the catalogue slug', () => {
    expect(integration.slug).toBe('strava');
    expect(integration.resources).toEqual(['profile', 'workouts', 'workout_stream']);
    expect(integration.historyDays).toBe(90);
  });

  it('profile: one request; sex into the profile, the weight setting into a body summary keyed by the day it was set', async () => {
    const { data } = await pull(fake, ctx, 'profile', window);
    const user = fake.users.get(userId)!;
    const profile = data.summaries.find((s) => s.resource === 'profile')!;
    expect(profile).toMatchObject({
      source_key: 'profile',
      calendar_date: window.endDate,
      fields: { sex: user.sex === 'M' ? 'male' : 'female', height: null },
    });
    const body = data.summaries.find((s) => s.resource === 'body')!;
    const updated = new Date(user.updatedAt as string);
    expect(body.fields.weight).toBe(user.weight);
    expect(body.time).toBe(updated.toISOString());
    expect(body.source_key).toBe(`athlete_weight:${new Date(updated.getTime() + OFFSET * 1000).toISOString().slice(0, 10)}`);
    expect(fake.servedCount(userId).athlete).toBeGreaterThan(0);
  });

  it('workouts: pages of 200 by after/before epoch seconds; every activity served lands once, with its values and offset applied once', () => {
    const { data, cursors } = workouts;
    const [first] = cursors;
    const served = fake.activitiesOf(userId, first.after as number, first.before as number);
    expect(served.length).toBeGreaterThan(30);
    expect(cursors).toHaveLength(1); // fewer than 200: one short page ends the pull
    const list = fake.requestsTo('/api/v3/athlete/activities', userId).at(-1)!;
    expect(list.query).toEqual({
      after: String(Math.floor(window.start.getTime() / 1000) - 1),
      before: String(window.end.getTime() / 1000),
      page: '1',
      per_page: '200',
    });
    expect(fake.servedCount(userId).activities).toBe(served.length);
    expect(data.summaries).toHaveLength(served.length);
    const keyed = byKey(data.summaries);
    expect(keyed.size).toBe(served.length);
    for (const a of served) {
      const d = a.detail as Record<string, number | string | boolean | null>;
      const s = keyed.get(String(a.id))!;
      expect(s.time).toBe(new Date(a.startMs).toISOString());
      expect(s.calendar_date).toBe(new Date(a.startMs + OFFSET * 1000).toISOString().slice(0, 10));
      expect(s.fields).toMatchObject({
        provider_id: String(a.id),
        title: d.name,
        timezone_offset: OFFSET,
        time_start: isoLocal(a.startMs, OFFSET),
        time_end: isoLocal(a.endMs, OFFSET),
        distance: d.distance,
        moving_time: d.moving_time,
        average_speed: d.average_speed,
        max_speed: d.max_speed,
        total_elevation_gain: d.total_elevation_gain,
        average_hr: d.average_heartrate === undefined ? null : Math.round(d.average_heartrate as number),
        max_hr: d.max_heartrate ?? null,
        steps: null,
        average_watts: d.average_watts ?? null,
        device_watts: d.device_watts ? d.average_watts : null,
        weighted_average_watts: d.weighted_average_watts ?? null,
        // SummaryActivity has no `calories`: rides' kilojoules of work stand in (≈ kcal at 24% efficiency).
        calories: d.kilojoules ? Math.round(((d.kilojoules as number) / (4.184 * 0.24)) * 10) / 10 : null,
      });
      expect((s.fields.time_start as string).endsWith('+01:00')).toBe(true);
      const duration = data.samples.find((x) => x.resource === 'workout_duration' && x.start === s.time)!;
      expect(duration).toMatchObject({
        unit: 'min',
        value: Math.round(((a.endMs - a.startMs) / 60_000) * 10) / 10,
        end: new Date(a.endMs).toISOString(),
        timezone_offset: OFFSET,
      });
    }
    const sports = new Set(data.summaries.map((s) => (s.fields.sport as { slug: string }).slug));
    expect(sports.has('running')).toBe(true);
    const runs = served.filter((a) => a.detail.sport_type === 'Run').map((a) => keyed.get(String(a.id))!.fields.sport);
    expect(runs[0]).toEqual({ id: 1, name: 'Running', slug: 'running' });
    const distances = samplesOf(data, 'workout_distance');
    expect(distances.every((x) => x.unit === 'm')).toBe(true);
    expect(distances.length).toBe(served.filter((a) => (a.detail.distance as number) > 0).length);
  });

  it('workout_stream: one list request per 30 activities, then one streams request per activity; every served point lands', async () => {
    const { data, cursors } = await pull(fake, ctx, 'workout_stream', window);
    const served = fake.activitiesOf(userId, cursors[0].after as number, cursors[0].before as number);
    expect(fake.servedCount(userId).streams).toBe(served.length);
    expect(cursors.length).toBe(served.length + Math.floor(served.length / 30) + 1);
    const streamRequest = fake.requestsTo(/\/api\/v3\/activities\/\d+\/streams$/, userId).at(-1)!;
    expect(streamRequest.query.key_by_type).toBe('true');
    expect(streamRequest.query.keys.split(',')).toEqual(
      expect.arrayContaining(['time', 'heartrate', 'latlng', 'altitude', 'velocity_smooth', 'cadence', 'watts', 'distance']),
    );
    expect(data.workout_streams).toHaveLength(served.length);
    const points = data.workout_streams.reduce((n, w) => n + w.stream.time.length, 0);
    expect(points).toBe(fake.servedCount(userId).stream_points);
    const heartrate = samplesOf(data, 'heartrate');
    expect(heartrate).toHaveLength(fake.servedCount(userId).heartrate_samples);
    expect(heartrate.every((x) => x.unit === 'bpm' && x.timezone_offset === OFFSET && Number.isInteger(x.value))).toBe(true);
    // One activity in full: unix seconds = start + offset-from-start, lat/lng split, watts as power.
    const a = served.find((x) => x.streams?.latlng && x.streams.heartrate)!;
    const mapped = data.workout_streams.find((w) => w.workout_source_key === String(a.id))!.stream;
    expect(mapped.time).toEqual(a.streams!.time.map((t) => a.startMs / 1000 + t));
    expect(mapped.lat).toEqual(a.streams!.latlng!.map((p) => p[0]));
    expect(mapped.lng).toEqual(a.streams!.latlng!.map((p) => p[1]));
    expect(mapped.distance).toEqual(a.streams!.distance);
    expect(mapped.heartrate).toEqual(a.streams!.heartrate);
    const first = heartrate.find((x) => x.timestamp === new Date(a.startMs).toISOString())!;
    expect(first.value).toBe(a.streams!.heartrate![0]);
    const last = a.streams!.time.length - 1;
    expect(heartrate.find((x) => x.timestamp === new Date(a.startMs + a.streams!.time[last] * 1000).toISOString())!.value).toBe(a.streams!.heartrate![last]);
    // The cursor stays small and flat.
    for (const c of cursors) for (const v of Object.values(c)) expect(['string', 'number']).toContain(typeof v);
    expect(Math.max(...cursors.map((c) => JSON.stringify(c).length))).toBeLessThan(1500);
  });

  it("applies utc_offset once: never start_date_local as an instant, never the timezone label's standard offset", async () => {
    // The swagger's own example: 12:15:09Z is 05:15:09 local under "(GMT-08:00) America/Los_Angeles" with utc_offset -25200 (PDT).
    const swagger = {
      id: 154504250376823,
      name: 'Happy Friday',
      distance: 24931.4,
      moving_time: 4500,
      elapsed_time: 4500,
      total_elevation_gain: 0,
      type: 'Ride',
      sport_type: 'MountainBikeRide',
      start_date: '2018-05-02T12:15:09Z',
      start_date_local: '2018-05-02T05:15:09Z',
      timezone: '(GMT-08:00) America/Los_Angeles',
      utc_offset: -25200,
      average_speed: 5.54,
      max_speed: 11,
      average_watts: 175.3,
      weighted_average_watts: 210,
      kilojoules: 788.7,
      device_watts: true,
      has_heartrate: true,
      average_heartrate: 140.3,
      max_heartrate: 178,
      max_watts: 406,
    };
    const mapped = mapActivity(swagger, 3600)!;
    expect(mapped.summary).toMatchObject({ source_key: '154504250376823', calendar_date: '2018-05-02', time: '2018-05-02T12:15:09.000Z' });
    expect(mapped.summary.fields).toMatchObject({
      time_start: '2018-05-02T05:15:09-07:00',
      time_end: '2018-05-02T06:30:09-07:00',
      timezone_offset: -25200,
      sport: { slug: 'mountain_biking' },
      device_watts: 175.3,
      average_hr: 140,
    });
    const { utc_offset: _dropped, ...withoutOffset } = swagger;
    expect(mapActivity(withoutOffset, 3600)!.summary.fields.timezone_offset).toBe(-25200);

    // Through the API: an activity late in the UTC evening is the next local day at +02:00, and a DST one.
    // Counted in the user's calendar, as the window is: from 23:00 UTC the user's today (+01:00) is UTC's tomorrow.
    const eightDaysAgo = windowOf(1, OFFSET, 8).startDate;
    const la = fake.addActivity(userId, {
      start: `${eightDaysAgo}T12:15:09Z`,
      utcOffset: -25200,
      timezone: '(GMT-08:00) America/Los_Angeles',
      sportType: 'Ride',
      heartrate: true,
    });
    const late = fake.addActivity(userId, { start: `${eightDaysAgo}T23:30:00Z`, utcOffset: 7200, timezone: '(GMT+01:00) Europe/Berlin', sportType: 'Run' });
    const win = windowOf(3, OFFSET, 6);
    const { data } = await pull(fake, ctx, 'workouts', win);
    const keyed = byKey(data.summaries);
    expect(keyed.get(String(la.id))).toMatchObject({
      time: `${eightDaysAgo}T12:15:09.000Z`,
      calendar_date: eightDaysAgo,
      fields: { time_start: `${eightDaysAgo}T05:15:09-07:00`, timezone_offset: -25200 },
    });
    const nextDay = new Date(Date.parse(eightDaysAgo) + DAY_MS).toISOString().slice(0, 10);
    expect(keyed.get(String(late.id))).toMatchObject({
      time: `${eightDaysAgo}T23:30:00.000Z`,
      calendar_date: nextDay,
      fields: { time_start: `${nextDay}T01:30:00+02:00`, timezone_offset: 7200 },
    });
    const streams = await pull(fake, ctx, 'workout_stream', win);
    const laStream = streams.data.workout_streams.find((w) => w.workout_source_key === String(la.id))!;
    expect(laStream.stream.time[0]).toBe(Date.parse(`${eightDaysAgo}T12:15:09Z`) / 1000);
    const laHr = streams.data.samples.filter((x: SampleInput) => x.timestamp === `${eightDaysAgo}T12:15:09.000Z`);
    expect(laHr).toHaveLength(1);
    expect(laHr[0].timezone_offset).toBe(-25200);
  });

  it('pages on while a page is full (200) and stops at the short one', async () => {
    const busy = fake.addUser({ zoneOffsetSeconds: -18000 });
    const busyCtx = contextFor(fake, await connect(fake, busy.id), busy.id);
    for (let i = 0; i < 230; i++) fake.addActivity(busy.id, { start: new Date(Date.now() - (i + 3) * 3600_000), durationMinutes: 20, sportType: 'Walk' });
    const win = windowOf(14, -18000);
    const { data, cursors } = await pull(fake, busyCtx, 'workouts', win);
    const served = fake.activitiesOf(busy.id, cursors[0].after as number, cursors[0].before as number);
    expect(served.length).toBeGreaterThan(230);
    expect(cursors.map((c) => c.page)).toEqual(Array.from({ length: Math.floor(served.length / 200) + 1 }, (_, i) => i + 1));
    expect(byKey(data.summaries).size).toBe(served.length);
  });

  it('fetchObject after a push: the same workout (same source_key) in one request, its streams in two, a deleted activity maps to nothing', async () => {
    const [a] = fake
      .activitiesOf(userId, workouts.cursors[0].after as number, workouts.cursors[0].before as number)
      .filter((x) => x.detail.sport_type === 'Run');
    let before = fake.requests.length;
    const detail = await integration.fetchObject!(ctx, 'workouts', String(a.id), OFFSET);
    expect(fake.requests.length - before).toBe(1);
    const fromList = byKey(workouts.data.summaries).get(String(a.id))!;
    expect(detail.summaries).toHaveLength(1);
    expect(detail.summaries[0]).toMatchObject({ source_key: fromList.source_key, time: fromList.time, calendar_date: fromList.calendar_date });
    expect(detail.summaries[0].fields.calories).toBe(a.detail.calories); // DetailedActivity carries calories
    before = fake.requests.length;
    const streams = await integration.fetchObject!(ctx, 'workout_stream', String(a.id), OFFSET);
    expect(fake.requests.length - before).toBe(2);
    expect(streams.workout_streams[0].stream.time[0]).toBe(a.startMs / 1000);
    fake.deleteActivity(a.id);
    await expect(integration.fetchObject!(ctx, 'workouts', String(a.id), OFFSET)).resolves.toMatchObject({ summaries: [], samples: [] });
    await expect(integration.fetchObject!(ctx, 'workouts', 'not-an-id', OFFSET)).rejects.toMatchObject({ errorType: 'non_retriable_error' });
  });

  it('a manual activity is a workout without streams: no streams request for it', async () => {
    const manual = fake.addActivity(userId, { start: new Date(Date.now() - 30 * 3600_000), manual: true, sportType: 'WeightTraining' });
    const win = windowOf(3, OFFSET);
    const { data } = await pull(fake, ctx, 'workouts', win);
    expect(byKey(data.summaries).has(String(manual.id))).toBe(true);
    const streams = await pull(fake, ctx, 'workout_stream', win);
    expect(streams.data.workout_streams.find((w) => w.workout_source_key === String(manual.id))).toBeUndefined();
    expect(fake.requestsTo(`/api/v3/activities/${manual.id}/streams`)).toHaveLength(0);
    await expect(integration.fetchObject!(ctx, 'workout_stream', String(manual.id), OFFSET)).resolves.toMatchObject({ workout_streams: [] });
  });

  it('a 5xx is provider_unavailable (retried), a 4xx non_retriable', async () => {
    const cursor = integration.firstPage('workouts', window)!;
    fake.fail({ path: '/api/v3/athlete/activities', status: 503, body: { message: 'Service Unavailable' } });
    const err = await integration.fetchPage(ctx, 'workouts', cursor).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderFetchError);
    expect(err).toMatchObject({ errorType: 'provider_unavailable', retriable: true });
    await expect(integration.fetchPage(ctx, 'workouts', { ...cursor, after: 1.5 })).rejects.toMatchObject({ errorType: 'non_retriable_error' });
  });
});

describe('strava rate limits', () => {
  let fake: FakeStrava;
  let ctx: ProviderCallContext;
  beforeAll(async () => {
    fake = await startFakeStrava(); // Strava's default limits
    const user = fake.addUser();
    ctx = contextFor(fake, await connect(fake, user.id), user.id);
  });
  afterAll(() => fake.close());

  it('reads the next quarter hour, or midnight UTC when a daily allowance is spent, from the headers', () => {
    const now = new Date('2026-03-10T10:07:31Z');
    const headers = (read: string, overall = '10,100') =>
      new Headers({ 'X-RateLimit-Limit': '200,2000', 'X-RateLimit-Usage': overall, 'X-ReadRateLimit-Limit': '100,1000', 'X-ReadRateLimit-Usage': read });
    expect(stravaRateLimitResetAt(headers('101,500'), now).toISOString()).toBe('2026-03-10T10:15:00.000Z');
    expect(stravaRateLimitResetAt(headers('20,1000'), now).toISOString()).toBe('2026-03-11T00:00:00.000Z');
    expect(stravaRateLimitResetAt(headers('20,300', '150,2001'), now).toISOString()).toBe('2026-03-11T00:00:00.000Z');
    expect(stravaRateLimitResetAt(new Headers(), new Date('2026-03-10T10:45:00Z')).toISOString()).toBe('2026-03-10T11:00:00.000Z');
  });

  it('every response carries the usage headers; the 101st read in 15 minutes is a 429 → RateLimitedError until the next quarter hour', async () => {
    await integration.fetchPage(ctx, 'profile', integration.firstPage('profile', windowOf(1, 0))!);
    const ok = fake.requestsTo('/api/v3/athlete').at(-1)!;
    expect(ok.status).toBe(200);
    expect(fake.rateLimitUsage().read[0]).toBeGreaterThan(0);
    fake.setUsage({ read: [100, 400] });
    const before = new Date();
    const err = await integration.fetchPage(ctx, 'workouts', integration.firstPage('workouts', windowOf(7, 0))!).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    const retryAt = (err as RateLimitedError).retryAt.getTime();
    expect([nextQuarterHour(before).getTime(), nextQuarterHour(new Date()).getTime()]).toContain(retryAt);
    expect(fake.rateLimitUsage().read).toEqual([101, 401]); // refused requests count too
  });

  it('at the daily read limit the 429 waits for midnight UTC', async () => {
    fake.setUsage({ read: [5, 1000] });
    const err = await integration.fetchPage(ctx, 'profile', integration.firstPage('profile', windowOf(1, 0))!).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAt.getTime()).toBe(nextUtcMidnight(new Date()).getTime());
    const res = await fetch(`${fake.url}/api/v3/athlete`);
    expect(res.status).toBe(429);
    expect(await res.json()).toMatchObject({ message: 'Rate Limit Exceeded' });
    expect(res.headers.get('x-readratelimit-limit')).toBe('100,1000');
    expect(res.headers.get('x-ratelimit-limit')).toBe('200,2000');
  });
});

/** A receiver standing in for our push route: GET → handshake, POST → verify, then parse. */
async function startReceiver(secrets: PushSecrets): Promise<{ url: string; server: Server; received: PushNotification[][] }> {
  const received: PushNotification[][] = [];
  const toRequest = async (req: IncomingMessage): Promise<PushRequest> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const url = new URL(req.url ?? '/', 'http://receiver');
    return {
      method: req.method ?? 'GET',
      query: Object.fromEntries(url.searchParams),
      headers: req.headers as Record<string, string>,
      rawBody: Buffer.concat(chunks),
    };
  };
  const server = createServer((req, res) => {
    void toRequest(req).then((pushReq) => {
      const send = (status: number, body?: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(body === undefined ? undefined : JSON.stringify(body));
      };
      if (pushReq.method === 'GET') {
        const reply = integration.push!.handshake!(pushReq, secrets);
        return reply ? send(reply.status, reply.body) : send(404);
      }
      if (!integration.push!.verify(pushReq, secrets, new Date())) return send(401);
      received.push(integration.push!.parse(pushReq));
      send(200, {});
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v2/providers/strava/webhook`, server, received };
}

describe('strava webhooks', () => {
  let fake: FakeStrava;
  let userId: string;
  let ctx: ProviderCallContext;
  const secrets: PushSecrets = { clientSecret: client.clientSecret, verifyToken: 'our-verify-token-4f1c' };
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    fake = await startFakeStrava();
    userId = fake.addUser().id;
    ctx = contextFor(fake, await connect(fake, userId), userId);
    receiver = await startReceiver(secrets);
  });
  afterAll(async () => {
    receiver.server.close();
    await fake.close();
  });

  it('subscribes once: Strava checks the callback with hub.challenge; a wrong verify token or a second subscription is refused', async () => {
    const refused = await createPushSubscription(ctx, { callbackUrl: receiver.url, verifyToken: 'not-our-token' }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ errorType: 'non_retriable_error' });
    expect(fake.subscription).toBeNull();
    const { id } = await createPushSubscription(ctx, { callbackUrl: receiver.url, verifyToken: secrets.verifyToken! });
    expect(id).toBe(String(fake.subscription!.id));
    secrets.webhookSecret = id; // what verify compares subscription_id with
    expect(await listPushSubscriptions(ctx)).toEqual([expect.objectContaining({ id: Number(id), callback_url: receiver.url })]);
    await expect(createPushSubscription(ctx, { callbackUrl: receiver.url, verifyToken: secrets.verifyToken! })).rejects.toMatchObject({
      errorType: 'non_retriable_error',
    });
    expect(integration.push!.handshake!({ method: 'GET', query: {}, headers: {}, rawBody: Buffer.alloc(0) }, secrets)).toBeNull();
  });

  it('an activity create names the workout and its streams; an update the workout; a delete nothing; a retry dedupes', async () => {
    const created = fake.event({ object_type: 'activity', object_id: 1360128428, aspect_type: 'create', owner_id: Number(userId) });
    expect(await fake.notify(created)).toMatchObject({ status: 200 });
    expect(await fake.notify(created)).toMatchObject({ status: 200 }); // Strava's retry of the same event
    const [first, retry] = receiver.received.splice(0);
    expect(first).toEqual([
      { kind: 'data', externalUserId: userId, resource: 'workouts', objectId: '1360128428', dedupeKey: expect.any(String) },
      { kind: 'data', externalUserId: userId, resource: 'workout_stream', objectId: '1360128428', dedupeKey: expect.any(String) },
    ]);
    expect(first[0]).not.toEqual(first[1]);
    expect(retry).toEqual(first);
    await fake.notify(
      fake.event({ object_type: 'activity', object_id: 1360128428, aspect_type: 'update', owner_id: Number(userId), updates: { title: 'Messy' } }),
    );
    await fake.notify(fake.event({ object_type: 'activity', object_id: 1360128428, aspect_type: 'delete', owner_id: Number(userId) }));
    const [update, deletion] = receiver.received.splice(0);
    expect(update).toEqual([expect.objectContaining({ kind: 'data', resource: 'workouts', objectId: '1360128428' })]);
    expect(update[0]).not.toMatchObject({ dedupeKey: (first[0] as { dedupeKey: string }).dedupeKey });
    expect(deletion).toEqual([]);
  });

  it('refuses events for another subscription, stale or future ones, and malformed bodies; accepts a genuine 3-minute-old retry', async () => {
    const base = { object_type: 'activity' as const, object_id: 42, aspect_type: 'create' as const, owner_id: Number(userId) };
    const now = Math.floor(Date.now() / 1000);
    expect((await fake.sendPush(receiver.url, fake.event({ ...base, subscription_id: 999 }))).status).toBe(401);
    expect((await fake.sendPush(receiver.url, fake.event({ ...base, event_time: now - 2 * 3600 }))).status).toBe(401);
    expect((await fake.sendPush(receiver.url, fake.event({ ...base, event_time: now + 600 }))).status).toBe(401);
    expect((await fake.sendPush(receiver.url, { ...fake.event(base), object_id: 'x' })).status).toBe(401);
    expect((await fake.push(receiver.url, 'not json', { 'content-type': 'application/json' })).status).toBe(401);
    expect(receiver.received).toHaveLength(0);
    expect((await fake.sendPush(receiver.url, fake.event({ ...base, event_time: now - 180 }))).status).toBe(200);
    expect(receiver.received.splice(0)).toHaveLength(1);
    const genuine: PushRequest = { method: 'POST', query: {}, headers: {}, rawBody: Buffer.from(JSON.stringify(fake.event(base))) };
    expect(integration.push!.verify(genuine, { ...secrets, webhookSecret: undefined }, new Date())).toBe(false); // no subscription id known: fail closed
  });

  it('the athlete removing the app arrives as an athlete update authorized=false → deauthorized', async () => {
    expect(await fake.deauthorizeFromSettings(userId)).toMatchObject({ status: 200 });
    expect(receiver.received.splice(0)).toEqual([[{ kind: 'deauthorized', externalUserId: userId, dedupeKey: expect.any(String) }]]);
    expect(fake.tokenState(userId).access.every((t) => !t.valid)).toBe(true);
  });

  it('deletes the subscription', async () => {
    await deletePushSubscription(ctx, secrets.webhookSecret!);
    expect(await listPushSubscriptions(ctx)).toEqual([]);
    expect(fake.requestsTo(/\/api\/v3\/push_subscriptions\/\d+$/).at(-1)!.status).toBe(204);
  });
});

describe('strava revoke', () => {
  let fake: FakeStrava;
  beforeAll(async () => {
    fake = await startFakeStrava();
  });
  afterAll(() => fake.close());

  it('deauthorizes: every token of the athlete dies; a revoked connection then fails as a credential error; revoking again is fine', async () => {
    const user = fake.addUser();
    const tokens = await connect(fake, user.id);
    const ctx = contextFor(fake, tokens, user.id);
    await integration.revoke!(ctx);
    const call = fake.requestsTo('/oauth/deauthorize').at(-1)!;
    expect(call.headers.authorization).toBe(`Bearer ${tokens.access_token}`);
    expect(call.status).toBe(200);
    const state = fake.tokenState(user.id);
    expect([...state.access, ...state.refresh].every((t) => !t.valid)).toBe(true);
    await expect(integration.fetchPage(ctx, 'profile', integration.firstPage('profile', windowOf(1, 0))!)).rejects.toMatchObject({
      errorType: 'provider_credential_error',
    });
    await expect(refreshTokens(integration.oauth, client, tokens.refresh_token!, { baseUrl: fake.url })).rejects.toBeInstanceOf(OAuthError);
    await expect(integration.revoke!(ctx)).resolves.toBeUndefined();
  });
});
