import { ProviderFetchError } from '../lib/wearables/adapters';
import type { SampleInput } from '../lib/wearables/model';
import {
  OAuthError,
  RateLimitedError,
  type PageCursor,
  type ProviderCallContext,
  type ProviderPage,
  type PullWindow,
  type TokenSet,
} from '../lib/wearables/providers/contract';
import { integration, mgdlToMmol } from '../lib/wearables/providers/dexcom';
import { mapEgv, mapEvent } from '../lib/wearables/providers/dexcom/mapping';
import { parseDexcomTime, recordOffsetSeconds } from '../lib/wearables/providers/dexcom/time';
import { createProviderHttp } from '../lib/wearables/providers/http';
import { authorizeUrl, exchangeCode, refreshTokens } from '../lib/wearables/providers/oauth-client';
import { oauthInRegion } from '../lib/wearables/providers/regions';
import { eventually } from './support/harness';
import { FAKE_DEXCOM_CLIENT, startFakeDexcom, type DexcomFakeUser, type DexcomRecord, type DexcomRegion, type FakeDexcom } from './support/fakes/dexcom';
import { connectThroughOAuth, createUser, startProviderStack, type ProviderStack } from './support/provider-stack';

const SECOND = 1000;
const HOUR = 3600 * SECOND;
const DAY = 24 * HOUR;
const REDIRECT_URI = 'http://127.0.0.1:9/callback';
const QUERY_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/;

let fake: FakeDexcom;

beforeAll(async () => {
  fake = await startFakeDexcom();
});
afterAll(async () => {
  await fake.close();
});

// ---- helpers ------------------------------------------------------------------------------------------------------

const unescapeHtml = (s: string) => s.replace(/&(amp|lt|gt|quot|#39);/g, (_, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e]!);

/** Drives the consent page like a browser: GET the authorize URL, POST the form with `decision`, read the redirect. */
async function consent(decision: 'approve' | 'deny', state = 'state-123'): Promise<URL> {
  const url = authorizeUrl(integration.oauth, { clientId: FAKE_DEXCOM_CLIENT.clientId, redirectUri: REDIRECT_URI }, state, { baseUrl: fake.url });
  const page = await fetch(url);
  expect(page.status).toBe(200);
  const html = await page.text();
  const fields = Object.fromEntries(
    [...html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)].map((m) => [unescapeHtml(m[1]), unescapeHtml(m[2])]),
  );
  expect(fields.scope).toBe('offline_access');
  const answer = await fetch(new URL(new URL(url).pathname, fake.url), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ ...fields, decision }).toString(),
    redirect: 'manual',
  });
  expect(answer.status).toBe(302);
  const location = new URL(answer.headers.get('location')!);
  expect(location.searchParams.get('state')).toBe(state);
  return location;
}

async function connect(user: DexcomFakeUser): Promise<TokenSet> {
  fake.nextConsentUser = user.id;
  const code = (await consent('approve')).searchParams.get('code')!;
  return exchangeCode(integration.oauth, { ...FAKE_DEXCOM_CLIENT, redirectUri: REDIRECT_URI }, code, { baseUrl: fake.url });
}

function ctxFor(accessToken: string, opts: { now?: () => Date; refresh?: (rejected: string) => Promise<string | null> } = {}): ProviderCallContext {
  const http = createProviderHttp({
    integration,
    baseUrl: fake.url,
    client: FAKE_DEXCOM_CLIENT,
    accessToken: async () => accessToken,
    refreshAfterUnauthorized: opts.refresh,
    now: opts.now,
  });
  return { http, externalUserId: null, tokenExtras: {}, client: FAKE_DEXCOM_CLIENT };
}

/** The window of the `days` local days ending today in the user's offset. */
function windowEndingToday(days: number, offsetSeconds: number): PullWindow {
  const localToday = new Date(Date.now() + offsetSeconds * SECOND).toISOString().slice(0, 10);
  const end = Date.parse(`${localToday}T00:00:00Z`) + DAY - offsetSeconds * SECOND;
  const start = end - days * DAY;
  return {
    startDate: new Date(start + offsetSeconds * SECOND).toISOString().slice(0, 10),
    endDate: localToday,
    start: new Date(start),
    end: new Date(end),
    timezoneOffsetSeconds: offsetSeconds,
  };
}

interface PulledPage extends ProviderPage {
  cursor: PageCursor;
  request: { path: string; query: Record<string, string> };
}

/** Pulls `glucose` over a window page by page, checking each page makes exactly one request. */
async function pull(ctx: ProviderCallContext, window: PullWindow): Promise<PulledPage[]> {
  const pages: PulledPage[] = [];
  let cursor = integration.firstPage('glucose', window);
  while (cursor) {
    const before = fake.requests.length;
    const page = await integration.fetchPage(ctx, 'glucose', cursor);
    expect(fake.requests.length - before).toBe(1);
    const req = fake.requests[fake.requests.length - 1];
    pages.push({ ...page, cursor, request: { path: req.path, query: req.query } });
    expect(pages.length).toBeLessThan(50);
    cursor = page.next;
  }
  return pages;
}

const instantOf = (systemTime: string) => parseDexcomTime(systemTime)!.instantMs;
const samplesOf = (pages: PulledPage[], path: string) => pages.filter((p) => p.request.path === path).flatMap((p) => p.data.samples);

// ---- OAuth --------------------------------------------------------------------------------------------------------

describe('Dexcom OAuth', () => {
  it('asks for offline_access on the login page and exchanges the code (body credentials) for a refreshable 2-hour token', async () => {
    const user = fake.addUser();
    const url = new URL(authorizeUrl(integration.oauth, { clientId: FAKE_DEXCOM_CLIENT.clientId, redirectUri: REDIRECT_URI }, 's', {}));
    expect(`${url.origin}${url.pathname}`).toBe('https://api.dexcom.com/v2/oauth2/login');
    expect(url.searchParams.get('scope')).toBe('offline_access');
    expect(url.searchParams.get('response_type')).toBe('code');
    expect(url.searchParams.get('code_challenge')).toBeNull();

    const before = Date.now();
    const tokens = await connect(user);
    expect(tokens.access_token).toMatch(/^at_/);
    expect(tokens.refresh_token).toMatch(/^rt_/);
    expect(tokens.expires_at!.getTime()).toBeGreaterThanOrEqual(before + 7200 * SECOND - 1000);
    expect(tokens.expires_at!.getTime()).toBeLessThanOrEqual(Date.now() + 7200 * SECOND);
    const tokenRequest = fake.requestsTo('/v2/oauth2/token').at(-1)!;
    const form = new URLSearchParams(tokenRequest.body);
    expect(form.get('client_id')).toBe(FAKE_DEXCOM_CLIENT.clientId);
    expect(form.get('client_secret')).toBe(FAKE_DEXCOM_CLIENT.clientSecret);
    expect(tokenRequest.headers.authorization).toBeUndefined();
  });

  it('a denied consent redirects with access_denied and no code; a reused code is refused', async () => {
    const denied = await consent('deny');
    expect(denied.searchParams.get('error')).toBe('access_denied');
    expect(denied.searchParams.get('code')).toBeNull();

    const user = fake.addUser();
    fake.nextConsentUser = user.id;
    const code = (await consent('approve')).searchParams.get('code')!;
    const client = { ...FAKE_DEXCOM_CLIENT, redirectUri: REDIRECT_URI };
    const first = await exchangeCode(integration.oauth, client, code, { baseUrl: fake.url });
    await expect(exchangeCode(integration.oauth, client, code, { baseUrl: fake.url })).rejects.toMatchObject({ error: 'invalid_grant' });
    // Reusing the code revoked what it had issued.
    await expect(
      integration.fetchPage(ctxFor(first.access_token), 'glucose', integration.firstPage('glucose', windowEndingToday(1, 0))!),
    ).rejects.toMatchObject({ errorType: 'provider_credential_error' });
  });

  it('the fake login page refuses a scope other than offline_access (Dexcom accepts only that)', async () => {
    const url = new URL('/v2/oauth2/login', fake.url);
    for (const [k, v] of Object.entries({ client_id: FAKE_DEXCOM_CLIENT.clientId, redirect_uri: REDIRECT_URI, response_type: 'code', scope: 'egv' }))
      url.searchParams.set(k, v);
    const res = await fetch(url);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe('invalid_scope');
  });

  it('refresh issues a new access and refresh token; the old refresh token stays valid (fake default, undocumented)', async () => {
    const user = fake.addUser();
    const tokens = await connect(user);
    const refreshed = await refreshTokens(integration.oauth, FAKE_DEXCOM_CLIENT, tokens.refresh_token!, { baseUrl: fake.url });
    expect(refreshed.access_token).not.toBe(tokens.access_token);
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    expect(fake.refreshTokenState(tokens.refresh_token!)).toBe('valid');
    const again = await refreshTokens(integration.oauth, FAKE_DEXCOM_CLIENT, tokens.refresh_token!, { baseUrl: fake.url });
    expect(again.access_token).toBeTruthy();
    // The new access token reads data: two days, as uploads lag an hour (from 00:00 to 01:00 UTC today has none yet).
    const page = await integration.fetchPage(ctxFor(refreshed.access_token), 'glucose', integration.firstPage('glucose', windowEndingToday(2, 0))!);
    expect(page.next).not.toBeNull();
  });

  it('with rotation switched on in the fake, the used refresh token is refused (invalid_grant)', async () => {
    const rotating = await startFakeDexcom({ refreshRotation: 'invalidate-old' });
    try {
      const user = rotating.addUser();
      const code = await (async () => {
        rotating.nextConsentUser = user.id;
        const url = authorizeUrl(integration.oauth, { clientId: FAKE_DEXCOM_CLIENT.clientId, redirectUri: REDIRECT_URI }, 'st', { baseUrl: rotating.url });
        const res = await fetch(new URL('/v2/oauth2/login', rotating.url), {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ ...Object.fromEntries(new URL(url).searchParams), decision: 'approve' }).toString(),
          redirect: 'manual',
        });
        return new URL(res.headers.get('location')!).searchParams.get('code')!;
      })();
      const tokens = await exchangeCode(integration.oauth, { ...FAKE_DEXCOM_CLIENT, redirectUri: REDIRECT_URI }, code, { baseUrl: rotating.url });
      const refreshed = await refreshTokens(integration.oauth, FAKE_DEXCOM_CLIENT, tokens.refresh_token!, { baseUrl: rotating.url });
      expect(rotating.refreshTokenState(tokens.refresh_token!)).toBe('revoked');
      await expect(refreshTokens(integration.oauth, FAKE_DEXCOM_CLIENT, tokens.refresh_token!, { baseUrl: rotating.url })).rejects.toBeInstanceOf(OAuthError);
      await expect(refreshTokens(integration.oauth, FAKE_DEXCOM_CLIENT, refreshed.refresh_token!, { baseUrl: rotating.url })).resolves.toMatchObject({
        access_token: expect.any(String),
      });
    } finally {
      await rotating.close();
    }
  });

  it('a user who removed the app in their Dexcom account: refresh is refused and data calls are a credential error', async () => {
    const user = fake.addUser();
    const tokens = await connect(user);
    fake.revokeUser(user.id);
    await expect(refreshTokens(integration.oauth, FAKE_DEXCOM_CLIENT, tokens.refresh_token!, { baseUrl: fake.url })).rejects.toMatchObject({
      error: 'invalid_grant',
    });
    await expect(integration.afterConnect!(ctxFor(tokens.access_token))).rejects.toMatchObject({ errorType: 'provider_credential_error' });
  });

  it('an expired access token is refreshed once through http.ts and the call succeeds', async () => {
    const user = fake.addUser();
    const tokens = await connect(user);
    fake.expireAccessTokens(user.id);
    let refreshes = 0;
    const ctx = ctxFor(tokens.access_token, {
      refresh: async () => {
        refreshes++;
        return (await refreshTokens(integration.oauth, FAKE_DEXCOM_CLIENT, tokens.refresh_token!, { baseUrl: fake.url })).access_token;
      },
    });
    await expect(integration.afterConnect!(ctx)).resolves.toEqual({ externalUserId: user.id });
    expect(refreshes).toBe(1);
  });

  it('has no revoke and no push (Dexcom has neither an API for it nor webhooks)', () => {
    expect(integration.revoke).toBeUndefined();
    expect(integration.push).toBeUndefined();
    expect(integration.fetchObject).toBeUndefined();
    expect(integration.oauth).toMatchObject({ clientAuth: 'body', pkce: false, refreshable: true, tokenUrl: 'https://api.dexcom.com/v2/oauth2/token' });
  });
});

// ---- Pull -----------------------------------------------------------------------------------------------------------

describe('Dexcom pull', () => {
  it('afterConnect names the Dexcom userId', async () => {
    const user = fake.addUser();
    const tokens = await connect(user);
    await expect(integration.afterConnect!(ctxFor(tokens.access_token))).resolves.toEqual({ externalUserId: user.id });
  });

  it('pulls 90 days: dataRange, then 30-day chunks of egvs, calibrations and events; everything served lands once, in mg/dL, offsets applied once', async () => {
    expect(integration.historyDays).toBe(90);
    expect(integration.resources).toEqual(['glucose']);
    const user = fake.addUser({ seed: 'dexcom-pull-receiver', zoneOffsetSeconds: 3600 });
    const tokens = await connect(user);
    const window = windowEndingToday(90, 3600);
    const pages = await pull(ctxFor(tokens.access_token), window);

    // Request plan.
    expect(pages[0].request.path).toBe('/v3/users/self/dataRange');
    expect(pages[0].data.samples).toEqual([]);
    const dataPages = pages.slice(1);
    const paths = dataPages.map((p) => p.request.path);
    expect([...new Set(paths)]).toEqual(['/v3/users/self/egvs', '/v3/users/self/calibrations', '/v3/users/self/events']);
    for (const path of new Set(paths)) {
      const chunks = dataPages.filter((p) => p.request.path === path);
      expect(chunks).toHaveLength(3);
      expect(chunks[0].request.query.startDate).toBe(new Date(window.start).toISOString().slice(0, 19));
      for (const [i, c] of chunks.entries()) {
        const { startDate, endDate } = c.request.query;
        expect(startDate).toMatch(QUERY_TIME);
        expect(endDate).toMatch(QUERY_TIME);
        const span = Date.parse(`${endDate}Z`) - Date.parse(`${startDate}Z`);
        expect(span).toBeLessThanOrEqual(30 * DAY);
        expect(span).toBeGreaterThan(0);
        // Contiguous: the next chunk starts one second after this one ends.
        if (i > 0) expect(Date.parse(`${startDate}Z`)).toBe(Date.parse(`${chunks[i - 1].request.query.endDate}Z`) + SECOND);
      }
    }
    for (const p of pages) expect(Object.values(p.cursor).every((v) => v === null || typeof v === 'string' || typeof v === 'number')).toBe(true);

    // EGVs: 288 a day, exactly what the fake has in the window, each once.
    const served = fake.servedCount(user.id);
    const servedEgvs = fake.servedRecords(user.id, 'egvs');
    expect(new Set(servedEgvs.map((r) => r.recordId)).size).toBe(servedEgvs.length);
    const expectedEgvs = fake.recordsFor(user.id, 'egvs', window.start.getTime(), window.end.getTime() - SECOND);
    expect(servedEgvs.length).toBe(expectedEgvs.length);
    expect(served.egvs).toBe(expectedEgvs.length);
    expect(served.egvs).toBeGreaterThan(85 * 288);
    const egvSamples = samplesOf(pages, '/v3/users/self/egvs');
    expect(egvSamples).toHaveLength(served.egvs);
    for (const p of dataPages)
      expect(p.data.source_type).toBe(
        { '/v3/users/self/egvs': 'automatic', '/v3/users/self/calibrations': 'fingerprick', '/v3/users/self/events': 'app' }[p.request.path],
      );

    // Receiver records carry no offset: systemTime is UTC and the timestamp is exactly it, never shifted; the offset
    // (+1 h) is displayTime − systemTime. Built as one expected list and compared once (26k samples).
    expect(servedEgvs.every((r) => !/(Z|[+-]\d{2}:\d{2})$/.test(r.systemTime))).toBe(true);
    const sortedSamples = [...egvSamples].sort((a, b) => Date.parse(a.timestamp) - Date.parse(b.timestamp));
    const expectedSamples = [...servedEgvs]
      .sort((a, b) => instantOf(a.systemTime) - instantOf(b.systemTime))
      .map((r) => ({
        resource: 'glucose',
        timestamp: `${r.systemTime}.000Z`,
        timezone_offset: 3600,
        unit: 'mg/dL',
        value: r.status === 'low' ? 40 : r.status === 'high' ? 400 : r.value,
        type: r.status === 'low' || r.status === 'high' ? r.status : null,
      }));
    expect(sortedSamples).toEqual(expectedSamples);
    const lows = egvSamples.filter((s) => s.type === 'low').length;
    expect(lows).toBe(served['egvs:low'] ?? 0);
    // The 1-hour upload delay: nothing newer than an hour ago.
    expect(Math.max(...egvSamples.map((s) => Date.parse(s.timestamp)))).toBeLessThanOrEqual(Date.now() - HOUR);
    expect(Math.min(...egvSamples.map((s) => Date.parse(s.timestamp)))).toBeGreaterThanOrEqual(window.start.getTime());
    // Realistic values.
    const ok = egvSamples.filter((s) => s.type === null).map((s) => s.value!);
    expect(Math.min(...ok)).toBeGreaterThanOrEqual(40);
    expect(Math.max(...ok)).toBeLessThanOrEqual(400);

    // Calibrations → glucose (fingerstick) samples.
    const calibrations = samplesOf(pages, '/v3/users/self/calibrations');
    expect(served.calibrations).toBeGreaterThan(20);
    expect(calibrations).toHaveLength(served.calibrations);
    expect(calibrations.every((s) => s.resource === 'glucose' && s.unit === 'mg/dL' && s.timezone_offset === 3600)).toBe(true);

    // Events → carbohydrates and insulin; deleted events are not stored.
    const events = samplesOf(pages, '/v3/users/self/events');
    const carbs = events.filter((s) => s.resource === 'carbohydrates');
    const insulin = events.filter((s) => s.resource === 'insulin_injection');
    expect(carbs).toHaveLength(served['events:carbs']);
    expect(insulin).toHaveLength(served['events:insulin']);
    expect(events).toHaveLength(carbs.length + insulin.length);
    expect(served['events:deleted']).toBeGreaterThan(0);
    expect(served.events).toBe(carbs.length + insulin.length + served['events:deleted']);
    const deletedAt = new Set(
      fake
        .servedRecords(user.id, 'events')
        .filter((r) => r.eventStatus === 'deleted')
        .map((r) => instantOf(r.systemTime)),
    );
    expect(carbs.some((s) => deletedAt.has(Date.parse(s.timestamp)))).toBe(false);
    expect(carbs.every((s) => s.unit === 'g' && s.value! >= 20 && s.value! <= 100 && s.type === null)).toBe(true);
    expect(insulin.every((s) => s.unit === 'IU' && (s.type === 'fast_acting' || s.type === 'long_acting'))).toBe(true);
    expect(new Set(insulin.map((s) => s.type))).toEqual(new Set(['fast_acting', 'long_acting']));
    const servedEvents = fake.servedRecords(user.id, 'events').filter((r) => r.eventStatus !== 'deleted');
    for (const [i, s] of events.entries()) expect(s.value).toBe(Number(servedEvents[i].value));
  });

  it('a mobile-app user (offsets in the strings, UTC−8): the displayTime offset is taken, the timestamp is systemTime', async () => {
    const user = fake.addUser({ seed: 'dexcom-ios', displayDevice: 'iOS', zoneOffsetSeconds: -8 * 3600 });
    const tokens = await connect(user);
    const window = windowEndingToday(3, -8 * 3600);
    const pages = await pull(ctxFor(tokens.access_token), window);
    const served = fake.servedRecords(user.id, 'egvs');
    expect(served[0].systemTime).toMatch(/\+00:00$/);
    expect(served[0].displayTime).toMatch(/-08:00$/);
    const samples = samplesOf(pages, '/v3/users/self/egvs');
    expect(samples).toHaveLength(served.length);
    for (const [i, s] of samples.entries()) {
      expect(s.timestamp).toBe(new Date(served[i].systemTime).toISOString());
      expect(s.timezone_offset).toBe(-28800);
    }
  });

  it('a receiver showing the same clock as systemTime gives timezone_offset null (unknown, not UTC)', async () => {
    const user = fake.addUser({ seed: 'dexcom-utc-receiver', zoneOffsetSeconds: 0 });
    const tokens = await connect(user);
    const pages = await pull(ctxFor(tokens.access_token), windowEndingToday(2, 0));
    const samples = samplesOf(pages, '/v3/users/self/egvs');
    expect(samples.length).toBeGreaterThan(200);
    expect(samples.every((s) => s.timezone_offset === null)).toBe(true);
  });

  it('clips the window to dataRange: a user with 10 days of data and no events gets one egvs request and no events request', async () => {
    const user = fake.addUser({ seed: 'dexcom-new', dataStartMs: Date.now() - 10 * DAY });
    fake.setRecords(user.id, 'events', []);
    fake.setRecords(user.id, 'calibrations', []);
    const tokens = await connect(user);
    const pages = await pull(ctxFor(tokens.access_token), windowEndingToday(90, 0));
    expect(pages.map((p) => p.request.path)).toEqual(['/v3/users/self/dataRange', '/v3/users/self/egvs']);
    expect(Date.parse(`${pages[1].request.query.startDate}Z`)).toBeGreaterThanOrEqual(user.dataStartMs);
    expect(pages[1].data.samples).toHaveLength(fake.servedCount(user.id).egvs);
    expect(fake.servedCount(user.id).egvs).toBeGreaterThan(9 * 288);
  });

  it('nothing to pull: no data at all stops after dataRange', async () => {
    const user = fake.addUser({ seed: 'dexcom-empty' });
    for (const kind of ['egvs', 'calibrations', 'events'] as const) fake.setRecords(user.id, kind, []);
    const tokens = await connect(user);
    const pages = await pull(ctxFor(tokens.access_token), windowEndingToday(90, 0));
    expect(pages).toHaveLength(1);
    expect(pages[0].next).toBeNull();
    expect(integration.firstPage('heartrate', windowEndingToday(1, 0))).toBeNull();
  });

  it('a record on a chunk boundary is fetched once; the window end is exclusive', async () => {
    const user = fake.addUser({ seed: 'dexcom-boundary', zoneOffsetSeconds: 0, dataStartMs: Date.now() - 200 * DAY });
    const window = windowEndingToday(60, 0);
    // Older than the upload delay: shift the window back a day.
    const w: PullWindow = { ...window, start: new Date(window.start.getTime() - 2 * DAY), end: new Date(window.end.getTime() - 2 * DAY) };
    const at = (ms: number, value: number): DexcomRecord => ({
      recordId: `r-${ms}`,
      systemTime: new Date(ms).toISOString().slice(0, 19),
      displayTime: new Date(ms + HOUR).toISOString().slice(0, 19),
      value,
      status: 'ok',
      trend: 'flat',
      trendRate: 0,
      unit: 'mg/dL',
      rateUnit: 'mg/dL/min',
      displayDevice: 'receiver',
      transmitterGeneration: 'g7',
      transmitterTicks: 1,
    });
    const s = w.start.getTime();
    const e = w.end.getTime();
    fake.setRecords(user.id, 'egvs', [at(s - SECOND, 90), at(s, 100), at(s + 30 * DAY - SECOND, 110), at(s + 30 * DAY, 120), at(e - SECOND, 130), at(e, 140)]);
    fake.setRecords(user.id, 'events', []);
    fake.setRecords(user.id, 'calibrations', []);
    const tokens = await connect(user);
    const pages = await pull(ctxFor(tokens.access_token), w);
    const egvs = samplesOf(pages, '/v3/users/self/egvs');
    expect(egvs.map((x) => x.value)).toEqual([100, 110, 120, 130]);
    expect(fake.servedCount(user.id).egvs).toBe(4);
    expect(pages.filter((p) => p.request.path === '/v3/users/self/egvs')).toHaveLength(2);
  });
});

// ---- Mapping traps ---------------------------------------------------------------------------------------------------

describe('Dexcom mapping', () => {
  const egv = (over: Record<string, unknown>) =>
    ({ recordId: 'x', systemTime: '2026-04-30T15:00:00', displayTime: '2026-04-30T17:00:00', value: 120, status: 'ok', unit: 'mg/dL', ...over }) as Parameters<
      typeof mapEgv
    >[0];

  it('mgdlToMmol divides by 18.0182 and rounds to one decimal', () => {
    expect(mgdlToMmol(180)).toBe(10);
    expect(mgdlToMmol(100)).toBe(5.5);
    expect(mgdlToMmol(70)).toBe(3.9);
    expect(mgdlToMmol(40)).toBe(2.2);
    expect(mgdlToMmol(400)).toBe(22.2);
  });

  it('a receiver EGV: UTC timestamp from systemTime, offset = displayTime − systemTime (rounded to the quarter hour), applied once', () => {
    expect(mapEgv(egv({}))).toEqual({
      resource: 'glucose',
      timestamp: '2026-04-30T15:00:00.000Z',
      value: 120,
      unit: 'mg/dL',
      type: null,
      timezone_offset: 7200,
    });
    // A display clock 47 s fast is still UTC+2.
    expect(mapEgv(egv({ displayTime: '2026-04-30T17:00:47' }))!.timezone_offset).toBe(7200);
    // India (+05:30) and a negative zone.
    expect(mapEgv(egv({ displayTime: '2026-04-30T20:30:00' }))!.timezone_offset).toBe(19800);
    expect(mapEgv(egv({ displayTime: '2026-04-30T10:00:00' }))!.timezone_offset).toBe(-18000);
    // A clock set days off is not a zone.
    expect(mapEgv(egv({ displayTime: '2026-05-03T15:00:00' }))!.timezone_offset).toBeNull();
  });

  it('a mobile-app EGV with offsets: the explicit displayTime offset, systemTime as the instant', () => {
    const s = mapEgv(egv({ systemTime: '2022-02-06T09:12:35+00:00', displayTime: '2022-02-06T01:12:35-08:00' }))!;
    expect(s.timestamp).toBe('2022-02-06T09:12:35.000Z');
    expect(s.timezone_offset).toBe(-28800);
    expect(recordOffsetSeconds(parseDexcomTime('2022-02-06T09:12:35Z')!, parseDexcomTime('2022-02-06T09:12:35+00:00'))).toBe(0);
  });

  it('LOW/HIGH without a value are kept at the sensor bounds; values in mmol/L are converted; unreadable EGVs are skipped', () => {
    expect(mapEgv(egv({ value: null, status: 'low' }))).toMatchObject({ value: 40, type: 'low', unit: 'mg/dL' });
    expect(mapEgv(egv({ value: null, status: 'high' }))).toMatchObject({ value: 400, type: 'high' });
    expect(mapEgv(egv({ value: 39, status: 'low' }))).toMatchObject({ value: 39, type: 'low' });
    expect(mapEgv(egv({ value: 7.2, unit: 'mmol/L' }))).toMatchObject({ value: 130, unit: 'mg/dL' });
    expect(mapEgv(egv({ value: 5.5, unit: 'unknown' }))).toMatchObject({ value: 99 });
    expect(mapEgv(egv({ value: 142, unit: 'unknown' }))).toMatchObject({ value: 142 });
    expect(mapEgv(egv({ value: null, status: 'unknown' }))).toBeNull();
    expect(mapEgv(egv({ value: null, status: null }))).toBeNull();
    expect(mapEgv(egv({ systemTime: 'yesterday' }))).toBeNull();
  });

  it('events: carbs → carbohydrates g, insulin → insulin_injection IU with a type, bloodGlucose → glucose; the rest and deleted ones skipped', () => {
    const ev = (over: Record<string, unknown>) =>
      mapEvent({
        recordId: 'e',
        systemTime: '2022-02-06T09:12:35+00:00',
        displayTime: '2022-02-06T01:12:35-08:00',
        eventStatus: 'created',
        eventType: 'carbs',
        eventSubType: null,
        value: '45',
        unit: 'grams',
        ...over,
      } as Parameters<typeof mapEvent>[0]);
    expect(ev({})).toEqual({ resource: 'carbohydrates', timestamp: '2022-02-06T09:12:35.000Z', timezone_offset: -28800, value: 45, unit: 'g', type: null });
    expect(ev({ eventType: 'insulin', eventSubType: 'fastActing', value: 4.5, unit: 'units' })).toMatchObject({
      resource: 'insulin_injection',
      value: 4.5,
      unit: 'IU',
      type: 'fast_acting',
    });
    expect(ev({ eventType: 'insulin', eventSubType: 'longActing', value: '20', unit: 'units' })).toMatchObject({ type: 'long_acting', value: 20 });
    expect(ev({ eventType: 'insulin', eventSubType: null, value: '3', unit: 'units' })).toMatchObject({ type: 'unknown' });
    expect(ev({ eventType: 'bloodGlucose', value: '112', unit: 'mg/dL' })).toMatchObject({ resource: 'glucose', value: 112, unit: 'mg/dL' });
    expect(ev({ eventType: 'exercise', eventSubType: 'light', value: '30', unit: 'minutes' })).toBeNull();
    expect(ev({ eventType: 'health', eventSubType: 'illness', value: null, unit: null })).toBeNull();
    expect(ev({ eventStatus: 'deleted' })).toBeNull();
    expect(ev({ value: 'lots' })).toBeNull();
  });

  it('the fake serves the documented shapes (recordType, recordVersion, userId, records with recordId/systemTime/displayTime)', async () => {
    const user = fake.addUser({ seed: 'dexcom-shapes', zoneOffsetSeconds: 3600 });
    const tokens = await connect(user);
    const { http } = ctxFor(tokens.access_token);
    const to = Date.now() - 2 * HOUR;
    const q = { startDate: new Date(to - 2 * HOUR).toISOString().slice(0, 19), endDate: new Date(to).toISOString().slice(0, 19) };
    const egvs = (
      await http.request<{ recordType: string; recordVersion: string; userId: string; records: DexcomRecord[] }>({
        url: 'https://api.dexcom.com/v3/users/self/egvs',
        query: q,
      })
    ).body;
    expect(egvs).toMatchObject({ recordType: 'egv', recordVersion: '3.0', userId: user.id });
    expect(egvs.records).toHaveLength(24);
    expect(egvs.records[0]).toMatchObject({
      recordId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      unit: 'mg/dL',
      rateUnit: 'mg/dL/min',
      displayDevice: 'receiver',
      transmitterGeneration: 'g7',
      trend: expect.any(String),
    });
    expect(instantOf(egvs.records[1].systemTime) - instantOf(egvs.records[0].systemTime)).toBe(5 * 60 * SECOND);
    expect(Date.parse(`${egvs.records[0].displayTime}Z`) - instantOf(egvs.records[0].systemTime)).toBe(HOUR);
    // The same window twice: the same records (deterministic).
    const again = (await http.request<{ records: DexcomRecord[] }>({ url: 'https://api.dexcom.com/v3/users/self/egvs', query: q })).body;
    expect(again.records).toEqual(egvs.records);
    const devices = (await http.request<{ recordType: string; records: Record<string, unknown>[] }>({ url: 'https://api.dexcom.com/v3/users/self/devices' }))
      .body;
    expect(devices.recordType).toBe('device');
    expect(devices.records[0]).toMatchObject({ transmitterGeneration: 'g7', displayApp: 'Dexcom G7' });
  });
});

// ---- Errors ------------------------------------------------------------------------------------------------------------

describe('Dexcom errors', () => {
  let tokens: TokenSet;
  beforeAll(async () => {
    tokens = await connect(fake.addUser({ seed: 'dexcom-errors' }));
  });

  it('a window over 30 days, a time with an offset or milliseconds, a missing endDate: 400 → non_retriable_error', async () => {
    const { http } = ctxFor(tokens.access_token);
    const url = 'https://api.dexcom.com/v3/users/self/egvs';
    await expect(http.request({ url, query: { startDate: '2026-01-01T00:00:00', endDate: '2026-01-31T00:00:01' } })).rejects.toMatchObject({
      errorType: 'non_retriable_error',
    });
    await expect(http.request({ url, query: { startDate: '2026-01-01T00:00:00', endDate: '2026-01-31T00:00:00' } })).resolves.toMatchObject({ status: 200 });
    await expect(http.request({ url, query: { startDate: '2026-01-01T00:00:00Z', endDate: '2026-01-02T00:00:00Z' } })).rejects.toMatchObject({
      errorType: 'non_retriable_error',
    });
    await expect(http.request({ url, query: { startDate: '2026-01-01T00:00:00.000', endDate: '2026-01-02T00:00:00.000' } })).rejects.toMatchObject({
      errorType: 'non_retriable_error',
    });
    await expect(http.request({ url, query: { startDate: '2026-01-01T00:00:00' } })).rejects.toMatchObject({ errorType: 'non_retriable_error' });
  });

  it('429 → RateLimitedError at the next full hour (no reset header is documented); a Retry-After wins', async () => {
    const now = new Date('2026-05-01T10:17:23.000Z');
    const ctx = ctxFor(tokens.access_token, { now: () => now });
    const cursor = integration.firstPage('glucose', windowEndingToday(5, 0))!;
    fake.rateLimit();
    const err = await integration.fetchPage(ctx, 'glucose', cursor).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAt.toISOString()).toBe('2026-05-01T11:00:00.000Z');
    expect(integration.rateLimitResetAt!(new Headers(), new Date('2026-05-01T23:00:00.000Z'))!.toISOString()).toBe('2026-05-02T00:00:00.000Z');

    fake.rateLimit(1, { 'retry-after': '120' });
    const withHeader = await integration.fetchPage(ctx, 'glucose', cursor).catch((e: unknown) => e);
    expect((withHeader as RateLimitedError).retryAt.toISOString()).toBe('2026-05-01T10:19:23.000Z');
    // After the fault the same page goes through.
    await expect(integration.fetchPage(ctx, 'glucose', cursor)).resolves.toMatchObject({ next: expect.any(Object) });
  });

  it('5xx on a data chunk → ProviderFetchError provider_unavailable (retriable), and the retry of that cursor succeeds', async () => {
    const ctx = ctxFor(tokens.access_token);
    const first = await integration.fetchPage(ctx, 'glucose', integration.firstPage('glucose', windowEndingToday(5, 0))!);
    fake.fail({ path: '/v3/users/self/egvs', status: 503 });
    const err = await integration.fetchPage(ctx, 'glucose', first.next!).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderFetchError);
    expect((err as ProviderFetchError).errorType).toBe('provider_unavailable');
    expect((err as ProviderFetchError).retriable).toBe(true);
    const retried = await integration.fetchPage(ctx, 'glucose', first.next!);
    expect(retried.data.samples.length).toBeGreaterThan(4 * 288 - 20);
    expect(retried.data.samples.every((s: SampleInput) => s.resource === 'glucose')).toBe(true);
  });
});

// ---- Regions, on the real stack -------------------------------------------------------------------------------------

describe("Dexcom regions: the account's server for sign-in, tokens and data", () => {
  /** A deployment in the EU region: its team's links propose Dexcom's EU server. */
  let stack: ProviderStack;

  beforeAll(async () => {
    stack = await startProviderStack('dexcom-regions', [{ slug: 'dexcom_v3', fake, ...FAKE_DEXCOM_CLIENT }], { DEPLOYMENT_REGION: 'eu' });
  }, 120_000);
  afterAll(async () => {
    await stack?.close();
  });

  /** A Dexcom account of `region` with ten days of data, connected through the link page (`asked`: the region picked there). */
  async function connectDexcomUser(region: DexcomRegion, asked?: string) {
    const dexcomUser = fake.addUser({ region, dataStartMs: Date.now() - 10 * DAY });
    const userId = await createUser(stack);
    const done = await connectThroughOAuth(stack, userId, 'dexcom_v3', fake, { asUser: dexcomUser.id, region: asked });
    const connection = await stack.app.inspect.collection('connections').findOne({ user_id: userId, provider: 'dexcom_v3' });
    return { dexcomUser, userId, done, connection };
  }

  async function glucoseHistory(userId: string): Promise<string> {
    return eventually(
      async () => {
        const res = await stack.client.get(`/v2/introspect/historical_pull?user_id=${userId}&provider=dexcom_v3`);
        const status: string | undefined = res.body.data?.[0]?.provider?.dexcom_v3?.pulled?.glucose?.status;
        return status === 'success' || status === 'failure' ? status : null;
      },
      180_000,
      'the Dexcom history pulled',
    );
  }

  async function glucoseSamples(userId: string): Promise<unknown[]> {
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    const res = await stack.client.get(
      `/v2/timeseries/${userId}/glucose?start_date=${day(Date.now() - 30 * DAY)}&end_date=${day(Date.now() + 2 * DAY)}&provider=dexcom_v3`,
    );
    expect(res.status).toBe(200);
    return res.body;
  }

  test("the link offers Dexcom's three servers and proposes the team's region; an unknown region is a 422", async () => {
    const userId = await createUser(stack);
    const { link_token } = (await stack.client.post('/v2/link/token', { user_id: userId, provider: 'dexcom_v3' })).body;
    const headers = { 'x-vital-link-token': link_token };
    const offered = (await (await fetch(`${stack.app.url}/v2/link/providers`, { headers })).json()) as { regions: { id: string }[]; default_region: string }[];
    expect(offered).toHaveLength(1);
    expect(offered[0].regions.map((r) => r.id)).toEqual(['us', 'eu', 'jp']);
    expect(offered[0].default_region).toBe('eu');

    const refused = await fetch(`${stack.app.url}/v2/link/provider/oauth/dexcom_v3?region=mars`, { headers });
    expect(refused.status).toBe(422);
    expect(((await refused.json()) as { detail: unknown[] }).detail[0]).toMatchObject({ loc: ['query', 'region'], msg: expect.stringContaining('us, eu, jp') });
    // The same link still works with a region Dexcom has.
    expect((await fetch(`${stack.app.url}/v2/link/provider/oauth/dexcom_v3?region=jp`, { headers })).status).toBe(200);
  });

  test("an EU account connects with the team's default and is pulled and refreshed at api.dexcom.eu only", async () => {
    const { dexcomUser, userId, done, connection } = await connectDexcomUser('eu');
    expect(done.status).toBe(200);
    expect(connection).toMatchObject({ status: 'connected', provider_region: 'eu' });
    expect(await glucoseHistory(userId)).toBe('success');
    expect(fake.servedCount(dexcomUser.id).egvs).toBeGreaterThan(8 * 288);
    expect((await glucoseSamples(userId)).length).toBe(distinctServed(dexcomUser.id, 'egvs') + distinctServed(dexcomUser.id, 'calibrations'));

    // The access token expires: the refresh, and the sync after it, go to the EU server too.
    fake.expireAccessTokens(dexcomUser.id);
    const refreshesBefore = fake.requestsTo('/v2/oauth2/token', dexcomUser.id).length;
    expect((await stack.client.post(`/v2/user/refresh/${userId}`, {})).status).toBe(200);
    await eventually(
      async () =>
        fake.requestsTo('/v2/oauth2/token', dexcomUser.id).length > refreshesBefore &&
        (await stack.app.deps.repos.providerAuth.get(String(connection!._id)))!.version > 1,
      60_000,
      'a refresh',
    );
    expect(fake.requestsTo('/v2/oauth2/token', dexcomUser.id).every((r) => r.status === 200)).toBe(true);
    expect(fake.hostsOf(dexcomUser.id)).toEqual(['api.dexcom.eu']);
  }, 300_000);

  test('a Japanese account picks Japan on the link page and is pulled at api.dexcom.jp', async () => {
    const { dexcomUser, userId, done, connection } = await connectDexcomUser('jp', 'jp');
    expect(done.status).toBe(200);
    expect(connection).toMatchObject({ status: 'connected', provider_region: 'jp' });
    expect(await glucoseHistory(userId)).toBe('success');
    expect(fake.servedCount(dexcomUser.id).egvs).toBeGreaterThan(8 * 288);
    expect(fake.hostsOf(dexcomUser.id)).toEqual(['api.dexcom.jp']);
  }, 300_000);

  test('a US account picked as the US goes to api.dexcom.com; a connection stored before regions were kept stays there', async () => {
    const { dexcomUser, userId, done, connection } = await connectDexcomUser('us', 'us');
    expect(done.status).toBe(200);
    expect(connection).toMatchObject({ provider_region: 'us' });
    expect(await glucoseHistory(userId)).toBe('success');
    expect(fake.hostsOf(dexcomUser.id)).toEqual(['api.dexcom.com']);

    // Every Dexcom connection made before regions were kept was made at the US server: without a region, the US.
    await stack.app.inspect.collection('connections').updateOne({ _id: connection!._id }, { $unset: { provider_region: '' } });
    fake.resetServed(dexcomUser.id);
    expect((await stack.client.post(`/v2/user/refresh/${userId}`, {})).status).toBe(200);
    await eventually(async () => (fake.servedCount(dexcomUser.id).dataRange ?? 0) > 0, 60_000, 'a sync after the refresh');
    expect(fake.hostsOf(dexcomUser.id)).toEqual(['api.dexcom.com']);
    expect(fake.requests.filter((r) => r.userId === dexcomUser.id).every((r) => r.status === 200)).toBe(true);
  }, 300_000);

  test('an EU account signed in at the US server is refused there: nothing is connected and the link says so', async () => {
    const { done, connection, dexcomUser } = await connectDexcomUser('eu', 'us');
    expect(done.status).toBe(400);
    expect(done.text).toMatch(/Dexcom V3 not connected/);
    expect(connection).toBeNull();
    expect(fake.requestsTo('/v2/oauth2/token', dexcomUser.id).map((r) => [fake.hostOf(r), r.status])).toEqual([['api.dexcom.com', 400]]);
  }, 120_000);

  test("without a proxy every URL names the region's own host: the sign-in page too, which no header can follow", () => {
    const hosts = ['us', 'eu', 'jp'].map((region) => {
      const settings = oauthInRegion(integration, region);
      return [new URL(authorizeUrl(settings, { clientId: 'c', redirectUri: REDIRECT_URI }, 's', {})).origin, new URL(settings.tokenUrl).origin];
    });
    expect(hosts).toEqual([
      ['https://api.dexcom.com', 'https://api.dexcom.com'],
      ['https://api.dexcom.eu', 'https://api.dexcom.eu'],
      ['https://api.dexcom.jp', 'https://api.dexcom.jp'],
    ]);
    expect(['us', 'eu'].map((teamRegion) => integration.regions!.defaultFor(teamRegion))).toEqual(['us', 'eu']);
  });
});

/** How many records of a kind the fake served a user, each counted once (EGVs and calibrations land as glucose). */
function distinctServed(userId: string, kind: 'egvs' | 'calibrations'): number {
  return new Set(fake.servedRecords(userId, kind).map((r) => r.recordId)).size;
}
