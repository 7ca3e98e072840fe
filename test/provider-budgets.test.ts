import { startTestApp, uniqueId, type TestApp } from './support/harness';
import { startFakeWhoop, type FakeWhoop } from './support/fakes/whoop';
import { RateLimitedError, type RequestBudget } from '../lib/wearables/providers/contract';
import { budgetSlots, takeFromBudget } from '../lib/wearables/providers/budget';
import { authorizeUrl, exchangeCode } from '../lib/wearables/providers/oauth-client';
import { createProviderHttp } from '../lib/wearables/providers/http';
import { integrationFor } from '../lib/wearables/providers/registry';
import { accessToken, appGate, connectionContext, type ProviderApp } from '../lib/wearables/providers/runtime';

/**
 * Every request to a provider draws from its OAuth app's budget in the store (README "Connecting real providers",
 * lib/wearables/providers/budget.ts): the app's windows hold across every process, a spent window waits instead of
 * drawing a 429, two apps of one provider count apart, and token refreshes and revocations count like pages.
 */
const whoop = integrationFor('whoop_v2')!;
let app: TestApp;
let fake: FakeWhoop;

beforeAll(async () => {
  app = await startTestApp();
  fake = await startFakeWhoop({ rateLimit: { limit: 20, windowSeconds: 4, dailyLimit: null } });
});
afterAll(async () => {
  await fake?.close();
  await app?.close();
});

/** The fake's WHOOP app, under a client id of its own (unique: budgets in the shared store start empty). */
const whoopApp = (clientId = uniqueId('whoop-app')): ProviderApp => ({
  provider: 'whoop_v2',
  clientId,
  clientSecret: fake.options.clientSecret,
  redirectUri: 'http://127.0.0.1/cb',
  baseUrl: fake.url,
  source: 'team',
});

const DAY_MS = 86_400_000;
const daySlot = (now: Date) => budgetSlots(whoop.budget, 'GET', 0, now).find((s) => s.window === 'day')!;

describe('an app at its window', () => {
  // The fake refuses more than 20 requests in any 4 seconds (rolling); the app's budget says 12. The budget counts a
  // request when it is drawn, the fake when it handles it: a stall of the test process (a busy machine: seconds) bunches
  // requests drawn apart into one window of the fake's. Against a window this short that needs a wide margin; a
  // provider's minute or quarter hour makes such stalls small beside the budget's own margin of a slot (1.6 s, 24 s).
  const budget: RequestBudget = { provider: 'WHOOP', windows: [{ per: '4 seconds', ms: 4000, limit: 12 }] };
  const burst = async (clientId: string, withBudget: boolean) => {
    const user = fake.addUser();
    const { access } = fake.issueTokens(user.id, { accessTtlSeconds: 3600, scope: 'read:profile' });
    const gate = {
      ...appGate(app.deps, 'whoop_v2', clientId),
      take: (method: string, now: Date) => takeFromBudget(app.deps.repos, { slug: 'whoop_v2', clientId, budget }, method, now),
    };
    const http = createProviderHttp({
      integration: whoop,
      baseUrl: fake.url,
      client: { clientId, clientSecret: 'x' },
      accessToken: async () => access.token,
      ...(withBudget ? { gate } : {}),
    });
    const refusedBefore = fake.rateLimitedResponses;
    const started = Date.now();
    const results = await Promise.allSettled(
      Array.from({ length: 30 }, () => http.request({ url: 'https://api.prod.whoop.com/developer/v2/user/profile/basic' })),
    );
    return {
      ok: results.filter((r) => r.status === 'fulfilled').length,
      refused: fake.rateLimitedResponses - refusedBefore,
      seconds: (Date.now() - started) / 1000,
    };
  };

  test('30 requests at once against 20 per 4 seconds: each waits for room in the budget, and none draws a 429', async () => {
    const without = await burst(uniqueId('whoop-app'), false);
    expect(without.refused).toBeGreaterThan(0); // the fake does refuse a burst the budget does not pace
    await new Promise((resolve) => setTimeout(resolve, 4500)); // the fake's rolling window empties

    const paced = await burst(uniqueId('whoop-app'), true);
    expect(paced).toMatchObject({ ok: 30, refused: 0 });
    // 95 % of 12 per 4 s is 11.4 per 4 s: 30 requests need more than two windows.
    expect(paced.seconds).toBeGreaterThan(8);
  }, 90_000);
});

describe('one budget per app', () => {
  test('the slot a request draws from holds its instant, at every millisecond around slot bounds', () => {
    const start = Date.UTC(2026, 0, 1);
    for (let t = start; t < start + 5000; t++) {
      const minute = budgetSlots(whoop.budget, 'GET', 0, new Date(t))[0];
      expect([minute.startsAt.getTime() <= t, t < minute.endsAt.getTime()]).toEqual([true, true]);
    }
  });

  test("two apps of one provider count apart: one app's spent minute and day leave the other's untouched", async () => {
    const [a, b] = [uniqueId('whoop-a'), uniqueId('whoop-b')];
    const now = new Date();
    const take = (clientId: string) => takeFromBudget(app.deps.repos, { slug: 'whoop_v2', clientId, budget: whoop.budget }, 'GET', now);
    // The minute's slot admits 2 or 3 (100 a minute in 38 slots, 1/40 each): app A spends it.
    const minute = budgetSlots(whoop.budget, 'GET', 0, now).find((s) => s.window === 'minute')!;
    for (let i = 0; i < minute.cap; i++) expect(await take(a)).toBeNull();
    const refused = await take(a);
    expect(refused?.retryAt.getTime()).toBeGreaterThanOrEqual(minute.endsAt.getTime());
    expect(refused?.reason).toContain(`request budget of the WHOOP app ${a} spent for now (100 requests a minute)`);
    expect(await take(b)).toBeNull();

    // A spends its day: it waits until midnight UTC, B goes on.
    expect(await app.deps.repos.providerBudgets.take('whoop_v2', a, [daySlot(now)], 10_000 - minute.cap)).toBeNull();
    const later = new Date(minute.endsAt.getTime() + 10);
    const dayRefusal = await takeFromBudget(app.deps.repos, { slug: 'whoop_v2', clientId: a, budget: whoop.budget }, 'GET', later);
    const midnight = Math.ceil(now.getTime() / DAY_MS) * DAY_MS;
    expect(dayRefusal?.retryAt.getTime()).toBeGreaterThanOrEqual(midnight);
    expect(dayRefusal?.reason).toMatch(
      new RegExp(`^daily quota of the WHOOP app ${a} reached \\(10000 requests a day\\); resumes at ${new Date(midnight).toISOString().slice(0, 13)}`),
    );
    expect(await takeFromBudget(app.deps.repos, { slug: 'whoop_v2', clientId: b, budget: whoop.budget }, 'GET', later)).toBeNull();
    // The refused draw of the minute was given back: A's minute slot after the day's refusal still counts what was sent.
    expect(await app.deps.repos.providerBudgets.used('whoop_v2', a, budgetSlots(whoop.budget, 'GET', 0, later)[0])).toBe(0);
  });

  test('a call that needs two requests draws both before the first goes: with room for one, neither is sent', async () => {
    // Three a day: a refusal waits for midnight, beyond what a request waits here, so it is handed to the caller.
    const budget: RequestBudget = { provider: 'WHOOP', windows: [{ per: 'day', ms: DAY_MS, limit: 3 }] };
    const user = fake.addUser();
    const { access } = fake.issueTokens(user.id, { accessTtlSeconds: 3600, scope: 'read:profile' });
    const url = 'https://api.prod.whoop.com/developer/v2/user/profile/basic';
    const httpOf = (clientId: string) =>
      createProviderHttp({
        integration: whoop,
        baseUrl: fake.url,
        client: { clientId, clientSecret: 'x' },
        accessToken: async () => access.token,
        gate: {
          ...appGate(app.deps, 'whoop_v2', clientId),
          take: (method, now, requests) => takeFromBudget(app.deps.repos, { slug: 'whoop_v2', clientId, budget }, method, now, 0, requests),
        },
      });
    const day = (clientId: string) => app.deps.repos.providerBudgets.used('whoop_v2', clientId, budgetSlots(budget, 'GET', 0, new Date())[0]);
    const sent = () => fake.requestsTo('/developer/v2/user/profile/basic').length;

    const tight = uniqueId('whoop-pair');
    await httpOf(tight).request({ url });
    await httpOf(tight).request({ url });
    const before = sent();
    await expect(httpOf(tight).reserve(2)).rejects.toBeInstanceOf(RateLimitedError);
    expect(sent()).toBe(before);
    expect(await day(tight)).toBe(2); // the refused pair was given back whole

    const roomy = uniqueId('whoop-pair');
    const http = httpOf(roomy);
    await http.reserve(2);
    expect(await day(roomy)).toBe(2);
    await http.request({ url });
    await http.request({ url });
    expect([sent(), await day(roomy)]).toEqual([before + 2, 2]); // the reserved pair drew nothing more
    await http.request({ url });
    expect(await day(roomy)).toBe(3);
  });

  test('racing draws from one fresh slot: exactly its cap get through', async () => {
    const clientId = uniqueId('whoop-race');
    const slot = { window: 'race', startsAt: new Date(0), endsAt: new Date(60_000), cap: 7 };
    const results = await Promise.all(Array.from({ length: 30 }, () => app.deps.repos.providerBudgets.take('whoop_v2', clientId, [slot])));
    expect(results.filter((r) => r === null)).toHaveLength(7);
    expect(await app.deps.repos.providerBudgets.used('whoop_v2', clientId, slot)).toBe(7);
  });
});

describe('token refreshes and revocations draw from the budget', () => {
  /** A stored connection of a fake WHOOP user, granted through the fake's consent, whose access token has expired. */
  async function expiredConnection() {
    const user = fake.addUser();
    fake.nextConsentUser = user.id;
    const client = { clientId: fake.options.clientId, clientSecret: fake.options.clientSecret, redirectUri: 'http://127.0.0.1/cb' };
    const consent = new URL(authorizeUrl(whoop.oauth, client, 'state-0123456789', { baseUrl: fake.url }));
    const answer = await fetch(new URL(fake.options.authorizePath, fake.url), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ ...Object.fromEntries(consent.searchParams), decision: 'approve' }).toString(),
      redirect: 'manual',
    });
    const code = new URL(answer.headers.get('location')!).searchParams.get('code')!;
    const tokens = await exchangeCode(whoop.oauth, client, code, { baseUrl: fake.url });
    const connectionId = uniqueId('conn');
    await app.deps.repos.providerAuth.saveInitial(
      { connectionId, teamId: uniqueId('team'), userId: uniqueId('user'), provider: 'whoop_v2' },
      { ...tokens, expires_at: new Date(Date.now() - 1000) },
    );
    return { connectionId, user };
  }
  const usedToday = (clientId: string) => app.deps.repos.providerBudgets.used('whoop_v2', clientId, daySlot(new Date()));

  test('a refresh counts one request; with the day spent it is not sent, and the refresh token stays unused', async () => {
    const own = whoopApp(fake.options.clientId);
    const first = await expiredConnection();
    const before = await usedToday(own.clientId);
    const token = await accessToken(app.deps, whoop, own, first.connectionId);
    expect(token).not.toBe('');
    expect(await usedToday(own.clientId)).toBe(before + 1);

    const spent = whoopApp(uniqueId('whoop-spent'));
    await app.deps.repos.providerBudgets.take('whoop_v2', spent.clientId, [daySlot(new Date())], 10_000);
    const second = await expiredConnection();
    const calls = fake.tokenEndpointCalls('refresh_token');
    await expect(accessToken(app.deps, whoop, spent, second.connectionId)).rejects.toBeInstanceOf(RateLimitedError);
    expect(fake.tokenEndpointCalls('refresh_token')).toBe(calls);
    expect(fake.validRefreshTokens(second.user.id)).toHaveLength(1);
  });

  test('a revocation counts one request; with the day spent it is not sent', async () => {
    const own = whoopApp(fake.options.clientId);
    const user = fake.addUser();
    const { access } = fake.issueTokens(user.id, { accessTtlSeconds: 3600 });
    const connectionId = uniqueId('conn');
    await app.deps.repos.providerAuth.saveInitial(
      { connectionId, teamId: uniqueId('team'), userId: uniqueId('user'), provider: 'whoop_v2' },
      { access_token: access.token, refresh_token: null, expires_at: null, scope: null, extras: {} },
    );
    const before = await usedToday(own.clientId);
    await whoop.revoke!(connectionContext(app.deps, whoop, own, { _id: connectionId, external_user_id: null }, {}));
    expect(fake.revokedThroughApi).toContain(user.id);
    expect(await usedToday(own.clientId)).toBe(before + 1);

    const spent = whoopApp(uniqueId('whoop-spent'));
    await app.deps.repos.providerBudgets.take('whoop_v2', spent.clientId, [daySlot(new Date())], 10_000);
    const other = fake.addUser();
    const { access: otherAccess } = fake.issueTokens(other.id, { accessTtlSeconds: 3600 });
    const otherId = uniqueId('conn');
    await app.deps.repos.providerAuth.saveInitial(
      { connectionId: otherId, teamId: uniqueId('team'), userId: uniqueId('user'), provider: 'whoop_v2' },
      { access_token: otherAccess.token, refresh_token: null, expires_at: null, scope: null, extras: {} },
    );
    await expect(whoop.revoke!(connectionContext(app.deps, whoop, spent, { _id: otherId, external_user_id: null }, {}))).rejects.toThrow(
      /daily quota of the WHOOP app/,
    );
    expect(fake.revokedThroughApi).not.toContain(other.id);
  });
});
