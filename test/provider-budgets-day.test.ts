import type { Config } from '../lib/platform/config';
import { budgetSlots } from '../lib/wearables/providers/budget';
import { integrationFor } from '../lib/wearables/providers/registry';
import { createTenant, eventually, teamClient, uniqueId, type HttpClient } from './support/harness';
import { startFakeWhoop, type FakeWhoop } from './support/fakes/whoop';
import { connectThroughOAuth, providerEnv } from './support/provider-stack';
import { startTimeSkippingStack, type TimeSkippingStack } from './support/time-skipping';

/**
 * A WHOOP app's daily quota (10,000 requests a UTC day) at its real length, on Temporal's time-skipping server
 * (test/support/time-skipping.ts): a history pull that meets the spent day sends nothing more, says why in
 * introspection, waits on a timer until midnight UTC, and then finishes.
 */
let fake: FakeWhoop;
let stack: TimeSkippingStack;
let api: HttpClient;

beforeAll(async () => {
  fake = await startFakeWhoop({ rateLimit: { limit: 100, windowSeconds: 60, dailyLimit: null } });
  const env = providerEnv([{ slug: 'whoop_v2', fake, clientId: fake.options.clientId, clientSecret: fake.options.clientSecret }]);
  stack = await startTimeSkippingStack('budget-day', env as Partial<Config>);
  api = teamClient(stack.app, await createTenant(stack.app.deps, 'Budget day'));
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await fake?.close();
});

const pulled = async (userId: string) =>
  (await api.get(`/v2/introspect/historical_pull?user_id=${userId}&provider=whoop_v2`)).body.data[0]?.provider?.whoop_v2?.pulled ?? {};

test("a day's quota reached: the pull pauses with the reason, sends nothing, and resumes after midnight UTC to finish", async () => {
  const userId = (await api.post('/v2/user/', { client_user_id: uniqueId('budget-day'), fallback_time_zone: 'UTC' })).body.user_id;
  const whoopUser = fake.addUser().id;
  // The app has spent its day but for the sign-in's two requests (the code exchange and "who is this user").
  const now = new Date();
  const day = budgetSlots(integrationFor('whoop_v2')!.budget, 'GET', 0, now).find((s) => s.window === 'day')!;
  expect(await stack.app.deps.repos.providerBudgets.take('whoop_v2', fake.options.clientId, [day], 10_000 - 2)).toBeNull();

  expect((await connectThroughOAuth({ client: api, app: stack.app }, userId, 'whoop_v2', fake, { asUser: whoopUser })).status).toBe(200);
  const waiting = await eventually(
    async () => {
      const p = await pulled(userId);
      return Object.values(p).some((s: any) => s.status === 'retrying') ? p : null;
    },
    60_000,
    'the pull waiting for the day',
  );
  const reason = Object.values(waiting).find((s: any) => s.status === 'retrying') as any;
  expect(reason.error_details).toBe('provider_rate_limit_exceeded');
  expect(reason.error_message).toMatch(
    new RegExp(
      `^daily quota of the WHOOP app ${fake.options.clientId} reached \\(10000 requests a day\\); resumes at ${new Date(day.endsAt).toISOString().slice(0, 15)}`,
    ),
  );
  const dataRequests = () => fake.requests.filter((r) => r.path.startsWith('/developer/') && r.path !== '/developer/v2/user/profile/basic').length;
  expect(dataRequests()).toBe(0);
  expect(fake.rateLimitedResponses).toBe(0);

  // Past midnight UTC (and the spread of a minute the waiters come back over): the pull goes on and finishes.
  await stack.skip(day.endsAt.getTime() - (await stack.serverNow()) + 2 * 60_000);
  const done = await eventually(
    async () => {
      const p = await pulled(userId);
      const statuses = Object.values(p).map((s: any) => s.status);
      return statuses.length === 4 && statuses.every((s) => s === 'success') ? p : null;
    },
    120_000,
    'the pull finished after the reset',
  );
  expect(Object.keys(done).sort()).toEqual(['activity', 'body', 'sleep', 'workouts']);
  expect(dataRequests()).toBeGreaterThan(4);
  expect(fake.rateLimitedResponses).toBe(0);
}, 300_000);
