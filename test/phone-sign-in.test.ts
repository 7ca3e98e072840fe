import { gzipSync } from 'node:zlib';
import { eventData } from '../lib/events/model';
import { authenticateSdkToken } from '../lib/phones/sdk-auth';
import { hashKey } from '../lib/platform/keys';
import { RecordsUploadResponse, SdkAuthError, SdkTokenResponse, SignInTokenResponse, SyncStateResponse, UploadResponse } from '../schemas/phones';
import { createTenant, eventually, expectSchema, httpClient, startTestApp, teamClient, uniqueId, type HttpClient, type TestApp } from './support/harness';

/**
 * A phone's sign-in (README "Data from phones"): the customer's backend asks for a single-use sign-in token, the phone
 * exchanges it (RFC 8693, form-encoded) for an access and a refresh token, refreshes rotate, a refresh token reused
 * beyond the grace ends the sign-in, and the tokens reach only the user's own SDK endpoints (the connect, the
 * disconnect). The user's deletion and the phone provider's disconnection end them.
 */
let app: TestApp;
let api: HttpClient;
let anonymous: HttpClient;

beforeAll(async () => {
  app = await startTestApp();
  api = teamClient(app, await createTenant(app.deps, 'Phones'));
  anonymous = httpClient(app.url);
});
afterAll(() => app.close());

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const SIGN_IN_TYPE = 'urn:healthbridge:sign-in-token';

const newUser = async (): Promise<string> => (await api.post('/v2/user/', { client_user_id: uniqueId('phone') })).body.user_id;
const signInToken = async (userId: string): Promise<string> => {
  const res = await api.post(`/v2/user/${userId}/sign_in_token`);
  expect(res.status).toBe(200);
  expectSchema(SignInTokenResponse, res.body);
  expect(res.body.user_id).toBe(userId);
  return res.body.sign_in_token;
};
const tokenRequest = (fields: Record<string, string>) => anonymous.post('/v2/sdk/token', new URLSearchParams(fields).toString(), FORM);
const exchange = (token: string) => tokenRequest({ grant_type: EXCHANGE, subject_token: token, subject_token_type: SIGN_IN_TYPE });
const refresh = (token: string) => tokenRequest({ grant_type: 'refresh_token', refresh_token: token });
const signedIn = async (userId: string) => {
  const res = await exchange(await signInToken(userId));
  expect(res.status).toBe(200);
  expectSchema(SdkTokenResponse, res.body);
  return res.body as { access_token: string; refresh_token: string; expires_in: number; user_id: string };
};
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
/** Whether an access token is accepted, asked of the authenticator itself (every SDK endpoint so far changes something). */
const accepted = async (token: string) =>
  authenticateSdkToken(app.deps.repos, { environment: app.deps.config.DEPLOYMENT_ENVIRONMENT, region: app.deps.config.DEPLOYMENT_REGION }, token).then(
    () => true,
    () => false,
  );
/** The phone's disconnect of a phone provider (ending its sign-ins), or of another: accepted (404: no connection yet), or refused. */
const disconnect = (userId: string, accessToken: string, provider = 'apple_health_kit') => anonymous.del(`/v2/user/${userId}/${provider}`, bearer(accessToken));
const expectSdkError = (res: { status: number; body: unknown }, status: number, errorType: string) => {
  expect(res.status).toBe(status);
  expectSchema(SdkAuthError, res.body);
  expect((res.body as { detail: { error_type: string } }).detail.error_type).toBe(errorType);
};

describe('the sign-in token and its exchange', () => {
  test('a sign-in token is exchanged once for tokens bound to its user; a second exchange, or two at once, get one session', async () => {
    const userId = await newUser();
    const token = await signInToken(userId);
    const first = await exchange(token);
    expect(first.status).toBe(200);
    expect(first.headers.get('cache-control')).toBe('no-store');
    expect(first.body).toMatchObject({
      token_type: 'Bearer',
      expires_in: 3600,
      user_id: userId,
      issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
    });
    expectSdkError(await exchange(token), 400, 'invalid_token');

    const raced = await signInToken(userId);
    const answers = await Promise.all([exchange(raced), exchange(raced), exchange(raced)]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 400, 400]);
    // Only hashes are stored.
    const stored = await app.inspect.collection('sdk_tokens').findOne({ _id: hashKey(first.body.access_token) } as object);
    expect(stored).toMatchObject({ kind: 'access', user_id: userId });
    expect(JSON.stringify(await app.inspect.collection('sdk_tokens').find({ user_id: userId }).toArray())).not.toContain(first.body.access_token);
  });

  test('an expired or unknown sign-in token is invalid_token; a team key is needed to make one, for a user of the team', async () => {
    const userId = await newUser();
    const token = await signInToken(userId);
    await app.inspect.collection('sdk_tokens').updateOne({ _id: hashKey(token) } as object, { $set: { expires_at: new Date(Date.now() - 1000) } });
    expectSdkError(await exchange(token), 400, 'invalid_token');
    expectSdkError(await exchange('hbsi_not-a-token'), 400, 'invalid_token');
    expect((await anonymous.post(`/v2/user/${userId}/sign_in_token`)).status).toBe(401);
    expect((await api.post(`/v2/user/${crypto.randomUUID()}/sign_in_token`)).status).toBe(404);
  });

  test('a malformed token request is a 422 naming the field', async () => {
    const missing = await tokenRequest({ grant_type: EXCHANGE, subject_token_type: SIGN_IN_TYPE });
    expect(missing.status).toBe(422);
    expect(missing.body.detail[0].loc).toEqual(['body', 'subject_token']);
    const grant = await tokenRequest({ grant_type: 'password', username: 'x' });
    expect(grant.status).toBe(422);
    expect(grant.body.detail.some((e: { loc: string[] }) => e.loc.join('.') === 'body.grant_type')).toBe(true);
    const type = await tokenRequest({ grant_type: EXCHANGE, subject_token: 'hbsi_x', subject_token_type: 'urn:other' });
    expect(type.status).toBe(422);
    expect((await tokenRequest({ grant_type: 'refresh_token' })).body.detail[0].loc).toEqual(['body', 'refresh_token']);
  });
});

describe('refreshing', () => {
  test('a refresh rotates the refresh token; the same one twice within the grace (two uploads at a 401) gives each a pair', async () => {
    const userId = await newUser();
    const tokens = await signedIn(userId);
    const [a, b] = await Promise.all([refresh(tokens.refresh_token), refresh(tokens.refresh_token)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(new Set([tokens.refresh_token, a.body.refresh_token, b.body.refresh_token]).size).toBe(3);
    for (const pair of [a.body, b.body]) expect(await accepted(pair.access_token)).toBe(true);
    // The first access token still works until it expires; then it is a 401 that says to refresh.
    expect(await accepted(tokens.access_token)).toBe(true);
    await app.inspect.collection('sdk_tokens').updateOne({ _id: hashKey(tokens.access_token) } as object, { $set: { expires_at: new Date(Date.now() - 1) } });
    expectSdkError(await disconnect(userId, tokens.access_token), 401, 'invalid_token');
    expect((await disconnect(userId, a.body.access_token)).status).toBe(404); // accepted (no connection), and it ends the sign-in
    expect(await accepted(b.body.access_token)).toBe(false);
  });

  test('a refresh token used again after the grace ends the whole sign-in: every token of it stops working', async () => {
    const userId = await newUser();
    const tokens = await signedIn(userId);
    const next = (await refresh(tokens.refresh_token)).body;
    // The rotation happened two minutes ago: the grace (a minute) has passed.
    await app.inspect
      .collection('sdk_tokens')
      .updateOne({ _id: hashKey(tokens.refresh_token) } as object, { $set: { used_at: new Date(Date.now() - 120_000) } });
    expectSdkError(await refresh(tokens.refresh_token), 400, 'reauthentication_required');
    expectSdkError(await disconnect(userId, next.access_token), 401, 'invalid_token');
    expectSdkError(await refresh(next.refresh_token), 400, 'reauthentication_required');
    expect(await app.inspect.collection('sdk_sessions').findOne({ user_id: userId } as object)).toMatchObject({ revoked_reason: 'refresh_token_reused' });
    // Another sign-in of the same user is unaffected by the first one's end.
    expect(await accepted((await signedIn(userId)).access_token)).toBe(true);
    expectSdkError(await refresh('hbrt_unknown'), 400, 'invalid_token');
  });
});

test('the catalogue lists the three phone providers as sdk integrations (the sandbox demo still connects them)', async () => {
  const providers = (await api.get('/v2/providers/')).body as { slug: string; integration: string; integration_note: string | null }[];
  const phones = providers.filter((p) => ['apple_health_kit', 'health_connect', 'samsung_health'].includes(p.slug));
  expect(phones.map((p) => [p.slug, p.integration])).toEqual([
    ['apple_health_kit', 'sdk'],
    ['health_connect', 'sdk'],
    ['samsung_health', 'sdk'],
  ]);
  expect(phones[0].integration_note).toContain('Data from phones');
  const userId = await newUser();
  expect((await api.post('/v2/link/connect/demo', { user_id: userId, provider: 'apple_health_kit' })).status).toBe(200);
});

describe('connecting the phone', () => {
  const connect = (userId: string, headers: Record<string, string>, provider = 'apple_health_kit') =>
    anonymous.post(`/v2/link/provider/manual/${provider}`, { user_id: userId, granted_permissions: ['steps', 'heartrate'] }, headers);

  test('the phone connects its user with its own token, once (a second connect is a 409 that changes nothing), announced', async () => {
    const userId = await newUser();
    const { access_token } = await signedIn(userId);
    const first = await connect(userId, bearer(access_token));
    expect([first.status, first.body]).toEqual([200, { success: true }]);
    const again = await connect(userId, bearer(access_token));
    expect(again.status).toBe(409);
    expect(again.body.detail).toContain('already connected');
    const providers = (await api.get(`/v2/user/providers/${userId}`)).body.providers;
    expect(providers.map((p: { slug: string; status: string }) => [p.slug, p.status])).toEqual([['apple_health_kit', 'connected']]);
    const announced = await eventually(
      async () =>
        (
          await app.inspect
            .collection('webhook_events')
            .find({ user_id: userId, event_type: 'provider.connection.created' } as object)
            .toArray()
        ).length,
      30_000,
      'provider.connection.created',
    );
    expect(announced).toBe(1);
    // The team's backend may connect it too (the same call, with the team key).
    expect((await connect(userId, {}, 'health_connect')).status).toBe(401);
    expect((await api.post('/v2/link/provider/manual/health_connect', { user_id: userId })).status).toBe(200);
  });

  test("another user's connect is 403; a provider the service pulls is a 422 naming it", async () => {
    const userId = await newUser();
    const other = await newUser();
    const { access_token } = await signedIn(userId);
    expect((await connect(other, bearer(access_token))).status).toBe(403);
    const cloud = await connect(userId, bearer(access_token), 'oura');
    expect(cloud.status).toBe(422);
    expect(cloud.body.detail[0].loc).toEqual(['path', 'provider']);
    expect((await api.get(`/v2/user/providers/${other}`)).body.providers).toEqual([]);
  });
});

describe('the sync state', () => {
  const DAY = 86_400_000;
  const ask = (userId: string, token: string, body: Record<string, unknown> = {}, provider = 'apple_health_kit') =>
    anonymous.post(`/v2/user/${userId}/sdk_sync_state/${provider}`, { tzinfo: 'Europe/Berlin', granted_permissions: ['steps'], ...body }, bearer(token));
  const connected = async (extra: Record<string, unknown> = {}) => {
    const userId = (await api.post('/v2/user/', { client_user_id: uniqueId('phone'), ...extra })).body.user_id;
    const { access_token } = await signedIn(userId);
    expect((await anonymous.post('/v2/link/provider/manual/apple_health_kit', { user_id: userId }, bearer(access_token))).status).toBe(200);
    return { userId, token: access_token };
  };

  test('a first sync reads the last 90 days, in chunks of 10,000 (2,500 in the background), and asks again in 4 hours', async () => {
    const { userId, token } = await connected();
    const res = await ask(userId, token);
    expect(res.status).toBe(200);
    expectSchema(SyncStateResponse, res.body);
    expect(res.body).toMatchObject({
      status: 'active',
      reason: null,
      expires_in: 14_400,
      pull_preferences: { historical_days_to_pull: 90 },
      chunk_sizes: { foreground: 10_000, background: 2_500, workouts_foreground: 5, workouts_background: 1 },
    });
    const days = (Date.parse(res.body.request_end_date) - Date.parse(res.body.request_start_date)) / DAY;
    expect(days).toBeGreaterThan(89.99);
    expect(days).toBeLessThanOrEqual(90);
    // A window reaching beyond a year back, or into the future, is cut to what may be read.
    const wide = (
      await ask(userId, token, {
        request_start_date: new Date(Date.now() - 800 * DAY).toISOString(),
        request_end_date: new Date(Date.now() + DAY).toISOString(),
      })
    ).body;
    expect(Date.now() - Date.parse(wide.request_start_date)).toBeLessThanOrEqual(365 * DAY + 60_000);
    expect(Date.parse(wide.request_end_date)).toBeLessThanOrEqual(Date.now());
  });

  test("the user's ingestion bounds cut the window, in the phone's time zone; a window outside them is paused, with the reason", async () => {
    const { userId, token } = await connected({ ingestion_start: '2026-01-10', ingestion_end: '2026-01-20' });
    const inside = await ask(userId, token, { request_start_date: '2026-01-01T00:00:00Z', request_end_date: '2026-02-01T00:00:00Z' });
    expect(inside.body).toMatchObject({
      status: 'active',
      ingestion_start: '2026-01-10',
      ingestion_end: '2026-01-20',
      // Midnight in Berlin (UTC+1 in January) of the first day, and of the day after the last.
      request_start_date: '2026-01-09T23:00:00.000Z',
      request_end_date: '2026-01-20T23:00:00.000Z',
    });
    const after = await ask(userId, token, { request_start_date: '2026-03-01T00:00:00Z', request_end_date: '2026-03-02T00:00:00Z' });
    expect(after.body).toMatchObject({ status: 'paused', request_start_date: null, request_end_date: null });
    expect(after.body.reason).toContain('ingestion bounds');
  });

  test('not connected is a 404 that says to connect; an unknown time zone or a cloud provider is a 422; another user is 403', async () => {
    const userId = await newUser();
    const { access_token } = await signedIn(userId);
    const unconnected = await ask(userId, access_token);
    expect(unconnected.status).toBe(404);
    expect(unconnected.body.detail).toContain('connect it first');
    const { userId: connectedId, token } = await connected();
    const zone = await ask(connectedId, token, { tzinfo: 'Mars/Olympus' });
    expect([zone.status, zone.body.detail[0].loc]).toEqual([422, ['body', 'tzinfo']]);
    expect((await ask(connectedId, token, {}, 'oura')).status).toBe(422);
    expect((await ask(userId, token)).status).toBe(403);
    expect((await api.post(`/v2/user/${connectedId}/sdk_sync_state/apple_health_kit`, {})).status).toBe(200);
  });
});

describe('uploads', () => {
  const HOUR = 3_600_000;
  /** A user connected to apple_health_kit by its phone, and the phone's token. */
  const phone = async () => {
    const userId = await newUser();
    const { access_token } = await signedIn(userId);
    expect((await anonymous.post('/v2/link/provider/manual/apple_health_kit', { user_id: userId }, bearer(access_token))).status).toBe(200);
    return { userId, token: access_token };
  };
  /** A chunk as the SDKs send it: the envelope, gzip. */
  const upload = async (userId: string, token: string, resource: string, envelope: Record<string, unknown>) => {
    const res = await fetch(`${app.url}/v2/timeseries/${userId}/${resource}`, {
      method: 'POST',
      headers: { ...bearer(token), 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync(JSON.stringify({ provider: 'apple_health_kit', time_zone: 'Europe/Berlin', ...envelope })),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const at = (hoursAgo: number) => new Date(Math.floor(Date.now() / HOUR) * HOUR - hoursAgo * HOUR).toISOString();
  const heartrate = (hoursAgo: number, value: number) => ({ value, start_date: at(hoursAgo), end_date: at(hoursAgo), unit: 'bpm', type: 'watch' });
  const stepsHour = (hoursAgo: number, value: number) => ({
    value,
    start_date: at(hoursAgo),
    end_date: at(hoursAgo - 1),
    unit: 'count',
    type: 'multiple_sources',
  });
  const eventsOf = async (userId: string, eventType: string) =>
    (
      await app.inspect
        .collection('webhook_events')
        .find({ user_id: userId, event_type: eventType } as object)
        .toArray()
    ).length;

  test('a daily chunk is stored and announced; sent again it stores nothing and answers success; a re-read hour replaces its value', async () => {
    const { userId, token } = await phone();
    const chunk = { stage: 'daily', start_date: at(6), data: [heartrate(5, 61), heartrate(4, 72), heartrate(3, 58)] };
    const first = await upload(userId, token, 'heartrate', chunk);
    expect(first.status).toBe(200);
    expectSchema(UploadResponse, first.body);
    expect(first.body).toMatchObject({ samples: { created: 3, updated: 0, unchanged: 0 }, dropped: 0, historical_event: false });
    expect(first.body.events).toBeGreaterThan(0);
    const again = await upload(userId, token, 'heartrate', chunk);
    expect([again.status, again.body.samples, again.body.events]).toEqual([200, { created: 0, updated: 0, unchanged: 3 }, 0]);
    const day = at(5).slice(0, 10);
    const stored = (await api.get(`/v2/timeseries/${userId}/heartrate?start_date=${day}&end_date=${at(3).slice(0, 10)}`)).body;
    expect(stored.map((x: { value: number }) => x.value).sort()).toEqual([58, 61, 72]);

    // Steps go up as hourly buckets, and the daily stage reads the last days again: the same hour, a new value.
    expect((await upload(userId, token, 'steps', { stage: 'daily', start_date: at(6), data: [stepsHour(3, 400), stepsHour(2, 900)] })).body.samples).toEqual({
      created: 2,
      updated: 0,
      unchanged: 0,
    });
    expect((await upload(userId, token, 'steps', { stage: 'daily', start_date: at(6), data: [stepsHour(3, 400), stepsHour(2, 1250)] })).body.samples).toEqual({
      created: 0,
      updated: 1,
      unchanged: 1,
    });
    const steps = (await api.get(`/v2/timeseries/${userId}/steps?start_date=${at(3).slice(0, 10)}&end_date=${at(2).slice(0, 10)}`)).body;
    expect(steps.map((x: { value: number }) => x.value).sort((a: number, b: number) => a - b)).toEqual([400, 1250]);
  });

  const pullOf = async (userId: string) =>
    (await api.get(`/v2/introspect/historical_pull?user_id=${userId}`)).body.data[0]?.provider?.apple_health_kit?.pulled?.steps as
      | { status: string; range_start: string; days_with_data: number }
      | undefined;

  test('a deletion removes the samples of its range and says so in a daily.data update; repeated, it removes nothing and says nothing', async () => {
    const { userId, token } = await phone();
    await upload(userId, token, 'heartrate', { stage: 'daily', start_date: at(6), data: [heartrate(5, 61), heartrate(4, 72), heartrate(3, 58)] });
    const range = { start_date: at(5), end_date: at(3) }; // [5 h ago, 3 h ago): the first two
    const res = await upload(userId, token, 'heartrate', { stage: 'daily', start_date: at(6), data: [], deleted: [range] });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ deleted: 2, samples: { created: 0, updated: 0, unchanged: 0 } });
    const left = (await api.get(`/v2/timeseries/${userId}/heartrate?start_date=${at(6).slice(0, 10)}&end_date=${at(0).slice(0, 10)}`)).body;
    expect(left.map((x: { value: number }) => x.value)).toEqual([58]);
    const said = await app.inspect
      .collection('webhook_events')
      .find({ user_id: userId, event_type: 'daily.data.heartrate.updated' } as object)
      .toArray();
    expect(said).toHaveLength(1);
    const data = eventData((await app.deps.repos.webhookStore.getEvent(String(said[0]._id)))!);
    expect((data.deleted as { timestamp: string }[]).map((d) => d.timestamp)).toEqual([at(5), at(4)]);
    expect(data.data).toEqual([]);
    expect((await upload(userId, token, 'heartrate', { stage: 'daily', start_date: at(6), data: [], deleted: [range] })).body.deleted).toBe(0);
    expect(await eventsOf(userId, 'daily.data.heartrate.updated')).toBe(1);
    const backwards = await upload(userId, token, 'heartrate', {
      stage: 'daily',
      start_date: at(6),
      data: [],
      deleted: [{ start_date: at(1), end_date: at(2) }],
    });
    expect([backwards.status, backwards.body.detail[0].loc]).toEqual([422, ['body', 'deleted', 0, 'end_date']]);
  });

  test("the historical stage stores silently, shows its progress, and its final chunk announces the resource's history once", async () => {
    const { userId, token } = await phone();
    const window = { stage: 'historical', start_date: at(72), end_date: at(0) };
    const begin = await anonymous.post(
      `/v2/user/${userId}/sdk_start_historical_stage/apple_health_kit`,
      { range_start: window.start_date, range_end: window.end_date, backfill_type: 'steps' },
      bearer(token),
    );
    expect([begin.status, begin.body]).toEqual([200, { success: true }]);
    expect(await pullOf(userId)).toMatchObject({ status: 'in_progress', range_start: expect.stringContaining(window.start_date.slice(0, 13)) });
    const first = await upload(userId, token, 'steps', { ...window, data: [stepsHour(60, 100), stepsHour(59, 200)] });
    expect(first.body).toMatchObject({ samples: { created: 2 }, events: 0, historical_event: false });
    const last = { ...window, data: [stepsHour(30, 300)], is_final_chunk: true };
    expect((await upload(userId, token, 'steps', last)).body).toMatchObject({ samples: { created: 1 }, historical_event: true });
    expect((await upload(userId, token, 'steps', last)).body).toMatchObject({ samples: { unchanged: 1 }, historical_event: false });
    expect(await eventsOf(userId, 'historical.data.steps.created')).toBe(1);
    expect(await eventsOf(userId, 'daily.data.steps.created')).toBe(0);
    const done = await pullOf(userId);
    expect(done?.status).toBe('success');
    expect(done?.days_with_data).toBeGreaterThanOrEqual(1);
    const unknown = await anonymous.post(
      `/v2/user/${userId}/sdk_start_historical_stage/apple_health_kit`,
      { range_start: window.start_date, range_end: window.end_date, backfill_type: 'sleeping_bag' },
      bearer(token),
    );
    expect([unknown.status, unknown.body.detail[0].loc]).toEqual([422, ['body', 'backfill_type']]);
  });

  test('a bad sample refuses the chunk with its index and stores nothing; HealthKit HRV is stored as SDNN, never as RMSSD; not connected is 404', async () => {
    const { userId, token } = await phone();
    const bad = await upload(userId, token, 'heartrate', {
      stage: 'daily',
      start_date: at(6),
      data: [heartrate(5, 60), { ...heartrate(4, 61), unit: 'count/min' }],
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail.map((e: { loc: unknown[] }) => e.loc)).toEqual([['body', 'data', 1, 'unit']]);
    expect((await api.get(`/v2/timeseries/${userId}/heartrate?start_date=${at(6).slice(0, 10)}&end_date=${at(0).slice(0, 10)}`)).body).toEqual([]);
    const hrv = await upload(userId, token, 'hrv', {
      stage: 'daily',
      start_date: at(6),
      data: [{ value: 48, start_date: at(5), end_date: at(5), unit: 'rmssd' }],
    });
    // Stored as what it is: SDNN, in the hrv resource with unit `sdnn` (never as RMSSD, the label the phone gave it).
    expect(hrv.status).toBe(200);
    expect((await api.get(`/v2/timeseries/${userId}/hrv?start_date=${at(6).slice(0, 10)}&end_date=${at(0).slice(0, 10)}`)).body).toMatchObject([
      { value: 48, unit: 'sdnn' },
    ]);
    const envelope = await upload(userId, token, 'heartrate', { stage: 'weekly', start_date: at(6), data: [] });
    expect([envelope.status, envelope.body.detail[0].loc]).toEqual([422, ['body', 'stage']]);
    const lonely = await newUser();
    const { access_token } = await signedIn(lonely);
    expect((await upload(lonely, access_token, 'heartrate', { stage: 'daily', start_date: at(6), data: [heartrate(5, 60)] })).status).toBe(404);
    expect((await upload(userId, access_token, 'heartrate', { stage: 'daily', start_date: at(6), data: [heartrate(5, 60)] })).status).toBe(403);
  });
});

describe('raw records', () => {
  const connectedTo = async (provider: string) => {
    const userId = await newUser();
    const { access_token } = await signedIn(userId);
    expect((await anonymous.post(`/v2/link/provider/manual/${provider}`, { user_id: userId }, bearer(access_token))).status).toBe(200);
    return { userId, token: access_token };
  };
  const send = async (userId: string, token: string, provider: string, records: unknown[], timeZone = 'Europe/Berlin') => {
    const res = await fetch(`${app.url}/v2/sdk/${userId}/records`, {
      method: 'POST',
      headers: { ...bearer(token), 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync(JSON.stringify({ provider, time_zone: timeZone, records })),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const read = async (userId: string, resource: string, day: string) =>
    (await api.get(`/v2/timeseries/${userId}/${resource}?start_date=${day}&end_date=${day}`)).body as {
      value: number;
      timezone_offset: number;
      type: string;
      unit: string;
    }[];

  test('HealthKit samples are mapped here: its units converted, its fractions made percent, its SDNN stored as sdnn, HKTimeZone kept', async () => {
    const { userId, token } = await connectedTo('apple_health_kit');
    const hk = (type: string, value: number, unit: string, start: string, end = start, extra: Record<string, unknown> = {}) => ({
      type,
      value,
      unit,
      start_date: start,
      end_date: end,
      product_type: 'Watch7,1',
      ...extra,
    });
    const records = [
      hk('HKQuantityTypeIdentifierHeartRate', 64, 'count/min', '2026-11-20T08:00:00Z', '2026-11-20T08:00:00Z', {
        metadata: { HKTimeZone: 'America/New_York' },
      }),
      hk('HKQuantityTypeIdentifierOxygenSaturation', 0.97, '%', '2026-11-20T08:05:00Z'),
      hk('HKQuantityTypeIdentifierActiveEnergyBurned', 41.84, 'kJ', '2026-11-20T08:00:00Z', '2026-11-20T09:00:00Z'),
      hk('HKQuantityTypeIdentifierDistanceWalkingRunning', 1, 'mi', '2026-11-20T08:00:00Z', '2026-11-20T09:00:00Z'),
      hk('HKQuantityTypeIdentifierHeartRateVariabilitySDNN', 48, 'ms', '2026-11-20T08:00:00Z'),
      hk('HKCategoryTypeIdentifierMindfulSession', 1, 'count', '2026-11-20T08:00:00Z'),
    ];
    const res = await send(userId, token, 'apple_health_kit', records);
    expect(res.status).toBe(200);
    expectSchema(RecordsUploadResponse, res.body);
    expect(res.body.samples).toEqual({ created: 5, updated: 0, unchanged: 0 });
    expect((await read(userId, 'hrv', '2026-11-20')).map((s) => [s.value, s.unit])).toEqual([[48, 'sdnn']]);
    expect(res.body.skipped).toEqual({
      HKCategoryTypeIdentifierMindfulSession: { count: 1, reason: 'not a type this service maps' },
    });
    const hr = await read(userId, 'heartrate', '2026-11-20');
    expect(hr).toMatchObject([{ value: 64, timezone_offset: -5 * 3600 }]);
    expect((await read(userId, 'blood_oxygen', '2026-11-20'))[0].value).toBeCloseTo(97, 6);
    expect((await read(userId, 'calories_active', '2026-11-20'))[0].value).toBeCloseTo(10, 6);
    expect((await read(userId, 'distance', '2026-11-20'))[0].value).toBeCloseTo(1609.344, 3);
    // Sent again: nothing new.
    expect((await send(userId, token, 'apple_health_kit', records)).body.samples).toEqual({ created: 0, updated: 0, unchanged: 5 });
  });

  test('Health Connect records: a HeartRateRecord is its samples, a StepsRecord its interval; an unreadable record refuses the upload by index', async () => {
    const { userId, token } = await connectedTo('health_connect');
    const res = await send(userId, token, 'health_connect', [
      {
        type: 'HeartRateRecord',
        id: 'hc-1',
        startTime: '2026-11-21T07:00:00Z',
        endTime: '2026-11-21T07:02:00Z',
        samples: [
          { time: '2026-11-21T07:00:00Z', beatsPerMinute: 58 },
          { time: '2026-11-21T07:01:00Z', beatsPerMinute: 61 },
        ],
      },
      { type: 'StepsRecord', id: 'hc-2', startTime: '2026-11-21T07:00:00Z', endTime: '2026-11-21T08:00:00Z', count: 812 },
      { type: 'NutritionRecord', id: 'hc-3' },
    ]);
    expect(res.status).toBe(200);
    expect(res.body.samples).toEqual({ created: 3, updated: 0, unchanged: 0 });
    expect(res.body.skipped).toEqual({ NutritionRecord: { count: 1, reason: 'not a type this service maps' } });
    expect((await read(userId, 'heartrate', '2026-11-21')).map((s) => s.value)).toEqual([58, 61]);
    expect((await read(userId, 'steps', '2026-11-21')).map((s) => s.value)).toEqual([812]);
    const bad = await send(userId, token, 'health_connect', [
      { type: 'StepsRecord', startTime: '2026-11-22T07:00:00Z', endTime: '2026-11-22T08:00:00Z', count: 10 },
      { type: 'StepsRecord', startTime: '2026-11-22T08:00:00Z', endTime: '2026-11-22T09:00:00Z', count: 'many' },
    ]);
    expect([bad.status, bad.body.detail.map((e: { loc: unknown[] }) => e.loc)]).toEqual([422, [['body', 'records', 1, 'count']]]);
    expect(await read(userId, 'steps', '2026-11-22')).toEqual([]);
  });
});

describe('what a phone token reaches', () => {
  test("only its own user's SDK endpoints: another user's is 403, a team endpoint is 403, a cloud provider's disconnect is 403", async () => {
    const userId = await newUser();
    const other = await newUser();
    const { access_token } = await signedIn(userId);
    expect((await disconnect(other, access_token)).status).toBe(403);
    expect((await disconnect(userId, access_token, 'oura')).status).toBe(403);
    for (const res of [
      await anonymous.get(`/v2/user/${userId}`, bearer(access_token)),
      await anonymous.post(`/v2/user/${userId}/sign_in_token`, {}, bearer(access_token)),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain("reaches only its own user's SDK endpoints");
    }
    expectSdkError(await disconnect(userId, 'hbat_forged'), 401, 'invalid_token');
    // Refused, it changed nothing: the token still reaches its own user's disconnect (404: no connection yet).
    expect((await disconnect(userId, access_token)).status).toBe(404);
  });

  test("the phone provider's disconnect ends the user's sign-ins, from the backend or from the phone", async () => {
    const userId = await newUser();
    const phone = await signedIn(userId);
    const tablet = await signedIn(userId);
    expect((await api.del(`/v2/user/${userId}/health_connect`)).status).toBe(404); // no connection, and the sign-ins end all the same
    for (const t of [phone, tablet]) {
      expectSdkError(await disconnect(userId, t.access_token), 401, 'invalid_token');
      expectSdkError(await refresh(t.refresh_token), 400, 'reauthentication_required');
    }
    const again = await signedIn(userId);
    expect((await disconnect(userId, again.access_token)).status).toBe(404);
    expectSdkError(await disconnect(userId, again.access_token), 401, 'invalid_token'); // the phone's own disconnect ended it
  });

  test("the user's deletion ends the sign-ins when it starts; no sign-in is made or exchanged for a user being deleted", async () => {
    const userId = await newUser();
    const tokens = await signedIn(userId);
    const unused = await signInToken(userId);
    expect((await api.del(`/v2/user/${userId}`)).status).toBe(200);
    // The deletion's first step ends the user's sign-ins and removes the sign-in tokens not exchanged yet.
    await eventually(
      async () => (await app.inspect.collection('sdk_tokens').findOne({ _id: hashKey(unused) } as object)) === null,
      30_000,
      'the sign-ins ended by the deletion',
    );
    expectSdkError(await refresh(tokens.refresh_token), 400, 'reauthentication_required');
    expectSdkError(await disconnect(userId, tokens.access_token), 401, 'invalid_token');
    expectSdkError(await exchange(unused), 400, 'invalid_token');
    expect((await api.post(`/v2/user/${userId}/sign_in_token`)).status).toBe(404);
    expect(await app.inspect.collection('sdk_sessions').findOne({ user_id: userId } as object)).toMatchObject({ revoked_reason: 'user_deletion' });
  });
});
