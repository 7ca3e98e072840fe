import type { Browser } from 'playwright-core';
import { dataCipher } from '../lib/platform/config';
import { connectMongo } from '../lib/platform/database/mongo';
import { addDays, todayUtc } from '../lib/platform/time';
import { createRepositories } from '../lib/repositories';
import { OAuthError } from '../lib/wearables/providers/contract';
import { refreshTokens } from '../lib/wearables/providers/oauth-client';
import { integrationFor } from '../lib/wearables/providers/registry';
import { accessToken, resolveApp } from '../lib/wearables/providers/runtime';
import { ensureSubscriptions } from '../lib/wearables/providers/subscriptions';
import { createLogger } from '../lib/platform/logger';
import { workflowIds } from '../workflows/ids';
import { refreshConnectionSignal } from '../workflows/wearable-connection';
import { launchBrowser, watchedPage, type WatchedPage } from './support/browser';
import { eventually } from './support/harness';
import { startFakeOura, type FakeOura } from './support/fakes/oura';
import { startFakeStrava, type FakeStrava } from './support/fakes/strava';
import { startFakeWhoop, type FakeWhoop } from './support/fakes/whoop';
import { connectThroughOAuth, createUser, startProviderStack, type ProviderStack } from './support/provider-stack';

/**
 * Real providers on the real stack (README "Connecting real providers"): the api and a worker of this file's own,
 * pointed at the providers' fakes (test/support/fakes/) through PROVIDER_<SLUG>_BASE_URL, connect users through the
 * OAuth flow, pull their history page by page, receive pushes, refresh tokens and disconnect.
 */
let oura: FakeOura;
let whoop: FakeWhoop;
let strava: FakeStrava;
let stack: ProviderStack;
let browser: Browser | null = null;
const pages: WatchedPage[] = [];

beforeAll(async () => {
  oura = await startFakeOura();
  oura.setPageSize('heartrate', 1000);
  whoop = await startFakeWhoop({ rateLimit: { limit: 100, windowSeconds: 60, dailyLimit: null } });
  strava = await startFakeStrava();
  stack = await startProviderStack('providers', [
    { slug: 'oura', fake: oura, clientId: oura.options.clientId, clientSecret: oura.options.clientSecret },
    { slug: 'whoop_v2', fake: whoop, clientId: whoop.options.clientId, clientSecret: whoop.options.clientSecret },
    { slug: 'strava', fake: strava, clientId: strava.options.clientId, clientSecret: strava.options.clientSecret },
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all(pages.map((p) => p.close()));
  await browser?.close();
  await stack?.close();
  await oura?.close();
  await whoop?.close();
  await strava?.close();
});

const eventsOf = (userId: string, type: string) => stack.events().filter((e) => e.user_id === userId && e.event_type === type);

/** A user of ours connected to a new WHOOP user through the OAuth flow, its history pulled. */
async function connectedWhoopUser(): Promise<{ userId: string; whoopUser: string; connectionId: string }> {
  const userId = await createUser(stack);
  const whoopUser = whoop.addUser({ zoneOffsetSeconds: -4 * 3600 }).id;
  expect((await connectThroughOAuth(stack, userId, 'whoop_v2', whoop, { asUser: whoopUser })).status).toBe(200);
  await historyDone(userId, 'whoop_v2', 4);
  const [connection] = await stack.app.deps.repos.connections.listForUser(stack.tenant.teamId, userId);
  return { userId, whoopUser, connectionId: connection._id };
}

const historyDone = (userId: string, slug: string, resources: number) =>
  eventually(
    async () => {
      const p = await pulled(userId, slug);
      const statuses = Object.values(p).map((s: any) => s.status);
      return statuses.length === resources && statuses.every((s) => s === 'success' || s === 'failure') ? p : null;
    },
    120_000,
    `${slug} history pulled`,
  );
const pulled = async (userId: string, slug: string) =>
  (await stack.client.get(`/v2/introspect/historical_pull?user_id=${userId}&provider=${slug}`)).body.data[0]?.provider?.[slug]?.pulled ?? {};

describe('Oura', () => {
  test('connects through the OAuth flow, pulls 90 days page by page, and lands exactly what the fake served, announced by signed events', async () => {
    const userId = await createUser(stack);
    const ouraUser = oura.addUser({ zoneOffsetSeconds: 3600 });
    const done = await connectThroughOAuth(stack, userId, 'oura', oura, { asUser: ouraUser.id });
    expect(done.status).toBe(200);
    expect(done.text).toContain('Oura connected');
    const connected = (await stack.client.get(`/v2/user/providers/${userId}`)).body.providers;
    expect(connected.map((p: { slug: string }) => p.slug)).toEqual(['oura']);

    const statuses = await historyDone(userId, 'oura', 6);
    expect(Object.fromEntries(Object.entries(statuses).map(([r, s]: [string, any]) => [r, s.status]))).toEqual({
      profile: 'success',
      activity: 'success',
      sleep: 'success',
      workouts: 'success',
      heartrate: 'success',
      blood_oxygen: 'success',
    });

    const today = todayUtc();
    const range = { startDate: addDays(today, -90), endDate: today };
    const served = oura.servedCount(ouraUser.id, range);
    const query = `start_date=${addDays(today, -92)}&end_date=${addDays(today, 1)}`;
    const sleeps = (await stack.client.get(`/v2/summary/sleep/${userId}?${query}`)).body.sleep;
    const longSleeps = oura.servedDocuments(ouraUser.id, 'sleep', range).filter((d: any) => d.type !== 'deleted' && d.type !== 'rest');
    expect(sleeps).toHaveLength(longSleeps.length);
    expect(sleeps.length).toBeGreaterThan(60);
    for (const s of sleeps) expect(s.source.provider ?? s.source.slug).toBe('oura');
    const activity = (await stack.client.get(`/v2/summary/activity/${userId}?${query}`)).body.activity;
    expect(activity).toHaveLength(served.daily_activity);
    const workouts = (await stack.client.get(`/v2/summary/workouts/${userId}?${query}`)).body.workouts;
    expect(workouts).toHaveLength(served.workout);
    const hrv = (await stack.client.get(`/v2/timeseries/${userId}/hrv?${query}`)).body;
    expect(hrv).toHaveLength(served['sleep.hrv']);
    expect(hrv.every((s: { unit: string }) => s.unit === 'rmssd')).toBe(true);
    const heartrate = (await stack.client.get(`/v2/timeseries/${userId}/heartrate?${query}`)).body;
    expect(heartrate).toHaveLength(served.heartrate + served['sleep.heart_rate']);

    // Announced by signed webhook events: the connection, and each resource's history.
    const events = await eventually(
      async () => {
        const got = stack.events().filter((e) => e.user_id === userId);
        return got.filter((e) => e.event_type.startsWith('historical.data.')).length >= 6 ? got : null;
      },
      60_000,
      'historical events',
    );
    expect(events.filter((e) => e.event_type === 'provider.connection.created')).toHaveLength(1);
    expect(new Set(events.filter((e) => e.event_type.startsWith('historical.data.')).map((e) => e.event_type))).toEqual(
      new Set(['profile', 'activity', 'sleep', 'workouts', 'heartrate', 'blood_oxygen'].map((r) => `historical.data.${r}.created`)),
    );
    // Tokens are stored sealed, never in plaintext.
    const stored = await stack.app.inspect.collection('provider_tokens').findOne({ user_id: userId });
    expect(JSON.stringify(stored)).not.toContain(oura.tokenState(ouraUser.id).access[0].token);
  }, 180_000);
});

describe('Oura subscriptions and user deletion', () => {
  test("the worker's provider-subscriptions Schedule made Oura's subscriptions; those expiring within PROVIDER_SUBSCRIPTION_RENEW_DAYS are renewed, the others left", async () => {
    const handle = stack.app.deps.temporal.client.schedule.getHandle(workflowIds.providerSubscriptionsSchedule(stack.deployment.TEMPORAL_TASK_QUEUE));
    const schedule = await eventually(() => handle.describe(), 60_000, 'the schedule the worker makes at boot');
    expect(schedule.spec.intervals?.[0]?.every).toBe(12 * 3600_000);
    await eventually(async () => oura.subscriptions.size === 10, 60_000, "Oura's 10 subscriptions");
    const deps = { ...stack.app.deps, logger: createLogger('silent', 'test') };
    const before = new Map([...oura.subscriptions.values()].map((s) => [s.id, s.expiration_time]));
    // Now: nothing is due (they expire in 90 days). (Strava's one subscription, made at boot too, is not Oura's business here.)
    const ouraOutcome = async (at?: Date) => (await ensureSubscriptions(deps, at)).filter((o) => o.provider === 'oura');
    expect(await ouraOutcome()).toEqual([{ provider: 'oura', clientId: oura.options.clientId, created: 0, renewed: 0 }]);
    // 85 days on, every one expires within the 7 renewal days: each is renewed once, none created.
    const later = new Date(Date.now() + 85 * 86_400_000);
    expect(await ouraOutcome(later)).toEqual([{ provider: 'oura', clientId: oura.options.clientId, created: 0, renewed: 10 }]);
    for (const s of oura.subscriptions.values()) expect(s.expiration_time).not.toBe(before.get(s.id));
    const stored = await stack.app.deps.repos.providerAuth.getApp('oura', oura.options.clientId);
    expect(stored?.subscriptions).toHaveLength(10);
  }, 90_000);

  test("deleting the user stops the connection's workflow, which revokes the access at Oura (again after a 503, and after a 429's Retry-After) and forgets the tokens", async () => {
    const userId = await createUser(stack);
    const ouraUser = oura.addUser();
    expect((await connectThroughOAuth(stack, userId, 'oura', oura, { asUser: ouraUser.id })).status).toBe(200);
    const [connection] = await stack.app.deps.repos.connections.listForUser(stack.tenant.teamId, userId);
    expect(await stack.app.deps.repos.providerAuth.get(connection._id)).not.toBeNull();
    oura.fail({ path: '/oauth/revoke', status: 503, body: { detail: 'Service Unavailable' } });
    oura.fail({ path: '/oauth/revoke', status: 429, headers: { 'retry-after': '3' }, body: { detail: 'Too Many Requests' } });
    expect((await stack.client.del(`/v2/user/${userId}`)).status).toBe(200);
    const revocation = await eventually(async () => oura.revocations.find((r) => r.userId === ouraUser.id), 60_000, 'the revocation at Oura');
    // The first request met the 503, and Temporal ran the activity again a second later; that one met the 429, and the
    // third came once its Retry-After had passed, and revoked.
    const tries = oura.requestsTo('/oauth/revoke').filter((r) => r.query.access_token === revocation.token);
    expect(tries).toHaveLength(3);
    expect(tries[2].at - tries[1].at).toBeGreaterThanOrEqual(2900);
    await eventually(async () => (await stack.app.deps.repos.providerAuth.get(connection._id)) === null, 30_000, 'the tokens deleted');
  }, 120_000);
});

describe('a connection that stops on finding its user hidden, before the deletion deregisters it', () => {
  test('still revokes the access at Oura and forgets the tokens (a user deletion hides the user first, then deregisters)', async () => {
    const userId = await createUser(stack);
    const ouraUser = oura.addUser();
    expect((await connectThroughOAuth(stack, userId, 'oura', oura, { asUser: ouraUser.id })).status).toBe(200);
    const [connection] = await stack.app.deps.repos.connections.listForUser(stack.tenant.teamId, userId);
    await historyDone(userId, 'oura', 6);
    // The deletion's first write alone (its deregistration not yet come), then a sync: the workflow finds the user
    // hidden and stops.
    const now = new Date();
    await stack.app.deps.repos.users.markPendingDeletion(stack.tenant.teamId, userId, {
      id: 'test-deletion',
      requested_at: now,
      erase_after: new Date(now.getTime() + 3_600_000),
    });
    const handle = stack.app.deps.temporal.client.workflow.getHandle(workflowIds.wearableConnection(connection._id));
    await handle.signal(refreshConnectionSignal);
    expect(await handle.result()).toEqual({ stopped: true });
    expect((await stack.app.deps.repos.connections.find(connection._id))?.status).not.toBe('deregistered');
    expect(oura.revocations.some((r) => r.userId === ouraUser.id)).toBe(true);
    expect(await stack.app.deps.repos.providerAuth.get(connection._id)).toBeNull();
  }, 180_000);
});

describe('a stop while a page is in flight', () => {
  test("deregistering Strava cancels the connection's page in flight: one still waiting its turn in the provider queue ends there (no wait for the provider's rate), one running finishes first; then the access is revoked", async () => {
    const userId = await createUser(stack);
    const athlete = strava.addUser({ zoneOffsetSeconds: 3600 });
    expect((await connectThroughOAuth(stack, userId, 'strava', strava, { asUser: athlete.id })).status).toBe(200);
    const [connection] = await stack.app.deps.repos.connections.listForUser(stack.tenant.teamId, userId);
    const handle = stack.app.deps.temporal.client.workflow.getHandle(workflowIds.wearableConnection(connection._id));
    const history = async () => (await handle.fetchHistory()).events ?? [];
    const isPage = (e: { activityTaskScheduledEventAttributes?: { activityType?: { name?: string | null } | null } | null }) =>
      e.activityTaskScheduledEventAttributes?.activityType?.name === 'pullHistoricalPage';
    // The first page is done and the next scheduled and still open (not between pages): Strava's queue lets one page
    // through every ~9.5 s for the app, so the stop below comes while it waits its turn.
    const pageOpen = async () => {
      const events = await history();
      const closed = new Set(
        events.flatMap((e) =>
          [e.activityTaskCompletedEventAttributes, e.activityTaskFailedEventAttributes, e.activityTaskCanceledEventAttributes].map((a) =>
            Number(a?.scheduledEventId),
          ),
        ),
      );
      const pages = events.filter(isPage);
      return pages.length >= 2 && !closed.has(Number(pages[pages.length - 1].eventId));
    };
    await eventually(pageOpen, 90_000, 'a second page scheduled and still open');
    const dataRequests = () => strava.requestsTo(/^\/api\/v3\//, athlete.id).length;
    const beforeStop = dataRequests();
    expect((await stack.client.del(`/v2/user/${userId}/strava`)).status).toBe(200);
    await handle.result();

    const events = await history();
    const at = (e: (typeof events)[number]) => Number(e.eventId);
    const signal = events.find((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'stopConnection')!;
    const closedBefore = (id: number, before: number) =>
      events.some(
        (e) =>
          at(e) < before &&
          [e.activityTaskCompletedEventAttributes, e.activityTaskFailedEventAttributes, e.activityTaskCanceledEventAttributes].some(
            (a) => Number(a?.scheduledEventId) === id,
          ),
      );
    const inFlight = events.filter((e) => isPage(e) && at(e) < at(signal) && !closedBefore(at(e), at(signal)));
    const pagesBefore = events.filter((e) => isPage(e) && at(e) < at(signal));
    expect(events.filter(isPage).length).toBe(pagesBefore.length); // no page after the stop
    expect(events.some((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'revokeProviderAccess')).toBe(true);
    expect(strava.tokenState(athlete.id).access.every((t) => !t.valid)).toBe(true);
    if (!inFlight.length) {
      // On a loaded machine the open page may finish in the moment before the stop is recorded (CI saw it once): the
      // stop then finds the pull between pages, with nothing to cancel. That page fetched once; nothing after it.
      expect(dataRequests() - beforeStop).toBeLessThanOrEqual(1);
      return;
    }
    expect(inFlight).toHaveLength(1); // the pull is paging when the stop comes
    const page = at(inFlight[0]);
    const cancelRequest = events.find((e) => Number(e.activityTaskCancelRequestedEventAttributes?.scheduledEventId) === page);
    const closedAfter = events.find(
      (e) =>
        at(e) > at(signal) && [e.activityTaskCompletedEventAttributes, e.activityTaskFailedEventAttributes].some((a) => Number(a?.scheduledEventId) === page),
    );
    if (!cancelRequest) {
      // On a loaded machine the page may close in the moment between the signal and the workflow's reading of it: the
      // workflow then sees both in one task and has nothing left to cancel; still no page follows the stop (below).
      expect(closedAfter && at(closedAfter)).toBeGreaterThan(at(signal));
    } else expect(at(cancelRequest)).toBeGreaterThan(at(signal));
    // A started event is written when its activity closes (so after the cancel request): its time says when it started.
    const started = events.find((e) => Number(e.activityTaskStartedEventAttributes?.scheduledEventId) === page);
    const ms = (e: (typeof events)[number]) => Number(e.eventTime!.seconds) * 1000 + (e.eventTime!.nanos ?? 0) / 1e6;
    if (cancelRequest && (!started || ms(started) > ms(cancelRequest))) {
      // Still queued: the server cancelled it, no worker ever took it.
      expect(started).toBeUndefined();
      expect(events.some((e) => Number(e.activityTaskCanceledEventAttributes?.scheduledEventId) === page)).toBe(true);
    } else {
      // Already running: it finished (nothing runs on after the workflow moved on).
      expect(events.some((e) => Number(e.activityTaskCompletedEventAttributes?.scheduledEventId) === page)).toBe(true);
    }
    expect(dataRequests() - beforeStop).toBeLessThanOrEqual(started ? 1 : 0);
  }, 150_000);
});

describe('Oura on the link page', () => {
  test('in Chromium: the page offers Oura for real, its consent page approves, and the user comes back connected; the data arrives as signed events', async () => {
    browser ??= await launchBrowser();
    const watched = await watchedPage(browser);
    pages.push(watched);
    const { page, errors, screenshot } = watched;
    const userId = await createUser(stack);
    const { link_web_url } = (await stack.client.post('/v2/link/token', { user_id: userId, filter_on_providers: ['oura', 'fitbit'] })).body;
    const ouraUser = oura.addUser({ zoneOffsetSeconds: -5 * 3600 });
    oura.nextConsentUser = ouraUser.id;
    await page.goto(link_web_url);
    await page.getByRole('heading', { name: 'Connect your health data' }).waitFor();
    await page.getByLabel(/Oura/).check();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Connect Oura' }).waitFor();
    const proceed = page.getByRole('link', { name: 'Continue to Oura' });
    await proceed.waitFor();
    // A real integration: no "cannot be reached" sandbox note.
    expect(await page.locator('#oauth-sandbox').isHidden()).toBe(true);
    await screenshot('link-oura-real');
    await proceed.click();
    await page.waitForURL(new RegExp(`^${oura.url}/oauth/authorize`));
    await page.getByRole('button', { name: 'Allow' }).waitFor();
    await screenshot('oura-fake-consent');
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.getByRole('heading', { name: 'Oura connected' }).waitFor();
    await screenshot('link-oura-connected');
    expect(errors).toEqual([]);

    const [connection] = await stack.app.deps.repos.connections.listForUser(stack.tenant.teamId, userId);
    expect(connection).toMatchObject({ provider: 'oura', adapter: 'oauth', external_user_id: ouraUser.id, oauth_client_id: oura.options.clientId });
    await historyDone(userId, 'oura', 6);
    await eventually(async () => eventsOf(userId, 'historical.data.sleep.created').length === 1, 60_000, 'the sleep history event');
    expect(eventsOf(userId, 'provider.connection.created')).toHaveLength(1);
  }, 180_000);

  test('a denied consent ends on the page with a clear message and no connection; the link stays usable', async () => {
    const userId = await createUser(stack);
    const denied = await connectThroughOAuth(stack, userId, 'oura', oura, { decision: 'deny' });
    expect(denied.status).toBe(400);
    expect(denied.text).toContain('You did not allow access at Oura');
    expect((await stack.client.get(`/v2/user/providers/${userId}`)).body.providers).toEqual([]);
  });

  test('a reused authorization callback (the same code and state twice) connects once and then says the sign-in was used', async () => {
    const userId = await createUser(stack);
    const { link_token } = (await stack.client.post('/v2/link/token', { user_id: userId, provider: 'oura' })).body;
    const { oauth_url } = (await (await fetch(`${stack.app.url}/v2/link/provider/oauth/oura`, { headers: { 'x-vital-link-token': link_token } })).json()) as {
      oauth_url: string;
    };
    const consent = new URL(oauth_url);
    expect(consent.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{32}$/); // a state of its own, not the link token
    const answer = await fetch(new URL(oura.options.authorizePath, oura.url), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ ...Object.fromEntries(consent.searchParams), decision: 'approve' }).toString(),
      redirect: 'manual',
    });
    const callback = answer.headers.get('location')!;
    const first = await fetch(callback);
    expect(first.status).toBe(200);
    const again = await fetch(callback);
    expect(again.status).toBe(410);
    expect(await again.text()).toContain('already used');
    expect(await stack.app.deps.repos.connections.listForUser(stack.tenant.teamId, userId)).toHaveLength(1);
  });
});

describe('WHOOP tokens', () => {
  test('two workers refreshing one connection at once: one refresh reaches WHOOP, both use its token, and the connection stays healthy', async () => {
    const { userId, whoopUser, connectionId } = await connectedWhoopUser();
    const integration = integrationFor('whoop_v2')!;
    // Two processes' worth of repositories: separate database connections, as two workers have.
    const config = stack.app.deps.config;
    const mongos = await Promise.all([connectMongo(config.MONGO_URL, config.MONGO_DB), connectMongo(config.MONGO_URL, config.MONGO_DB)]);
    try {
      const workers = mongos.map((m) => ({ repos: createRepositories(m.db, dataCipher(config)), config }));
      const app = (await resolveApp(workers[0], stack.tenant.teamId, 'whoop_v2'))!;
      const before = whoop.tokenEndpointCalls('refresh_token');
      // The stored token is about to expire, as every worker sees it: each wants to refresh it before using it.
      await stack.app.inspect.collection('provider_tokens').updateOne({ _id: connectionId as never }, { $set: { expires_at: new Date(Date.now() + 1000) } });
      const tokens = await Promise.all([0, 1, 0, 1, 0, 1].map((w) => accessToken(workers[w], integration, app, connectionId)));
      expect(whoop.tokenEndpointCalls('refresh_token') - before).toBe(1);
      expect(new Set(tokens).size).toBe(1);
      const stored = (await stack.app.deps.repos.providerAuth.get(connectionId))!;
      expect(stored.access_token).toBe(tokens[0]);
      expect(whoop.refreshTokenValid(stored.refresh_token!)).toBe(true);
      expect(whoop.validRefreshTokens(whoopUser)).toEqual([stored.refresh_token]);
      // And the connection works with it: a sync fetches without any connection error.
      const served = whoop.apiRequests;
      expect((await stack.client.post(`/v2/user/refresh/${userId}`, {})).status).toBe(200);
      await eventually(async () => whoop.apiRequests >= served + 4, 60_000, 'the sync');

      // Without the lease, the same race loses the user at WHOOP: the second use of a refresh token is refused. (Shown
      // on another WHOOP user's tokens, issued as the token endpoint issues them, so this connection is untouched.)
      const other = whoop.addUser().id;
      const spare = (whoop as unknown as { issue(u: string, scope: string, family: string, refresh: boolean): { body: { refresh_token: string } } }).issue(
        other,
        'offline read:sleep',
        'spare',
        true,
      ).body.refresh_token;
      const [a, b] = await Promise.allSettled([
        refreshTokens(integration.oauth, app, spare, { baseUrl: app.baseUrl }),
        refreshTokens(integration.oauth, app, spare, { baseUrl: app.baseUrl }),
      ]);
      expect([a.status, b.status].sort()).toEqual(['fulfilled', 'rejected']);
      expect(((a.status === 'rejected' ? a : b) as PromiseRejectedResult).reason).toBeInstanceOf(OAuthError);
    } finally {
      await Promise.all(mongos.map((m) => m.close()));
    }
    expect(eventsOf(userId, 'provider.connection.error')).toEqual([]);
  }, 180_000);

  test('a refresh token WHOOP refuses (the user revoked us) breaks the connection: provider.connection.error with token_refresh_failed', async () => {
    const { userId, whoopUser } = await connectedWhoopUser();
    whoop.revokeUser(whoopUser);
    expect((await stack.client.post(`/v2/user/refresh/${userId}`, {})).status).toBe(200);
    const [event] = await eventually(
      async () => {
        const got = eventsOf(userId, 'provider.connection.error');
        return got.length ? got : null;
      },
      60_000,
      'provider.connection.error',
    );
    expect(event.data).toMatchObject({ error_type: 'token_refresh_failed', provider: { slug: 'whoop_v2' } });
    const providers = (await stack.client.get(`/v2/user/providers/${userId}`)).body.providers;
    expect(providers[0]).toMatchObject({ slug: 'whoop_v2', status: 'error' });
  }, 180_000);

  test('a 5xx at the token endpoint is retried, never taken for a revocation', async () => {
    const { userId, whoopUser, connectionId } = await connectedWhoopUser();
    const before = whoop.tokenEndpointCalls('refresh_token');
    whoop.expireAccessTokens(whoopUser);
    whoop.fail({ path: '/oauth/oauth2/token', status: 503, times: 1 });
    expect((await stack.client.post(`/v2/user/refresh/${userId}`, {})).status).toBe(200);
    // The first refresh met the 503; the next one (the next page, sync or retry) gets new tokens.
    await eventually(
      async () => whoop.tokenEndpointCalls('refresh_token') - before >= 1 && (await stack.app.deps.repos.providerAuth.get(connectionId))!.version > 1,
      60_000,
      'a successful refresh',
    );
    expect(eventsOf(userId, 'provider.connection.error')).toEqual([]);
    expect((await stack.client.get(`/v2/user/providers/${userId}`)).body.providers[0].status).toBe('connected');
  }, 180_000);
});
