import { providerEnv, connectThroughOAuth } from './support/provider-stack';
import { createTenant, eventually, teamClient, uniqueId, type HttpClient } from './support/harness';
import { startFakeOura, type FakeOura } from './support/fakes/oura';
import { startTimeSkippingStack, type TimeSkippingStack } from './support/time-skipping';
import type { Config } from '../lib/platform/config';

/**
 * A provider's 429 is a wait, not a failure (README "Connecting real providers"): on Temporal's time-skipping server,
 * a pull told `Retry-After: 30` sends no request to the provider before those 30 seconds are over (a workflow timer,
 * and the app-wide block every worker checks), shows `retrying` with provider_rate_limit_exceeded meanwhile, and then
 * goes on to finish.
 */
let oura: FakeOura;
let stack: TimeSkippingStack;
let api: HttpClient;

beforeAll(async () => {
  oura = await startFakeOura();
  oura.setPageSize('heartrate', 1000);
  const env = providerEnv([{ slug: 'oura', fake: oura, clientId: oura.options.clientId, clientSecret: oura.options.clientSecret }]);
  stack = await startTimeSkippingStack('provider-429', env as Partial<Config>);
  api = teamClient(stack.app, await createTenant(stack.app.deps, 'Provider 429'));
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await oura?.close();
});

test('a 429 with Retry-After: 30 gets no request before 30 s; the pull shows retrying, then finishes', async () => {
  const userId = (await api.post('/v2/user/', { client_user_id: uniqueId('rl'), fallback_time_zone: 'UTC' })).body.user_id;
  const ouraUser = oura.addUser();
  // The daily activity pull (the second unit) is told to come back in 30 s.
  oura.failRateLimited({ path: '/v2/usercollection/daily_activity', retryAfterSeconds: 30 });
  expect((await connectThroughOAuth({ client: api, app: stack.app }, userId, 'oura', oura, { asUser: ouraUser.id })).status).toBe(200);

  const limited = await eventually(async () => oura.requests.find((r) => r.status === 429), 60_000, 'the 429');
  const requestsAfter = () => oura.requests.filter((r) => r.at > limited.at || (r !== limited && oura.requests.indexOf(r) > oura.requests.indexOf(limited)));
  const pull = async () => (await api.get(`/v2/introspect/historical_pull?user_id=${userId}`)).body.data[0].provider.oura.pulled;
  const waiting = await eventually(async () => ((await pull()).activity?.status === 'retrying' ? await pull() : null), 30_000, 'the activity pull retrying');
  expect(waiting.activity.error_details).toBe('provider_rate_limit_exceeded');

  // The clock moves to 28 s after the 429 (the server's clock runs in real time, and jumps when skipped): nothing sent.
  await new Promise((r) => setTimeout(r, 1000));
  expect(requestsAfter()).toEqual([]);
  await stack.skip(limited.at + 28_000 - (await stack.serverNow()));
  await new Promise((r) => setTimeout(r, 300));
  expect(requestsAfter()).toEqual([]);
  const blocked = await stack.app.inspect.collection('provider_apps').findOne({ _id: `oura:${oura.options.clientId}` as never });
  // Every worker of the app is held off until then (the instant Retry-After named, from the 429's arrival).
  expect(blocked?.blocked_until.getTime()).toBeGreaterThanOrEqual(limited.at + 30_000);
  expect(blocked?.blocked_until.getTime()).toBeLessThan(limited.at + 32_000);

  // Past the 30 s (measured on the clock the service reads), the same page is asked again and the pull goes on.
  for (let i = 0; i < 12 && !requestsAfter().length; i++) {
    await stack.skip(1_000);
    await new Promise((r) => setTimeout(r, 500));
  }
  const [next] = requestsAfter();
  expect(next.path).toBe('/v2/usercollection/daily_activity');
  expect(next.at - limited.at).toBeGreaterThanOrEqual(30_000);
  const done = await eventually(
    async () => {
      const p = await pull();
      return Object.values(p).length === 6 && Object.values(p).every((s: any) => s.status === 'success') ? p : null;
    },
    60_000,
    'the history finished',
  );
  expect(done.activity.error_details ?? null).toBeNull();
}, 180_000);
