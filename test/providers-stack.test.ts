import { addDays, todayUtc } from '../lib/platform/time';
import { eventually } from './support/harness';
import { startFakeOura, type FakeOura } from './support/fakes/oura';
import { connectThroughOAuth, createUser, startProviderStack, type ProviderStack } from './support/provider-stack';

/**
 * Real providers on the real stack (README "Connecting real providers"): the api and a worker of this file's own,
 * pointed at the providers' fakes (test/support/fakes/) through PROVIDER_<SLUG>_BASE_URL, connect users through the
 * OAuth flow, pull their history page by page, receive pushes, refresh tokens and disconnect.
 */
let oura: FakeOura;
let stack: ProviderStack;

beforeAll(async () => {
  oura = await startFakeOura();
  oura.setPageSize('heartrate', 1000);
  stack = await startProviderStack('providers', [{ slug: 'oura', fake: oura, clientId: oura.options.clientId, clientSecret: oura.options.clientSecret }]);
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await oura?.close();
});

const pulled = async (userId: string, slug: string) => (await stack.client.get(`/v2/introspect/historical_pull?user_id=${userId}&provider=${slug}`)).body.data[0]?.provider?.[slug]?.pulled ?? {};
const historyDone = (userId: string, slug: string, resources: number) =>
  eventually(async () => {
    const p = await pulled(userId, slug);
    const statuses = Object.values(p).map((s: any) => s.status);
    return statuses.length === resources && statuses.every((s) => s === 'success' || s === 'failure') ? p : null;
  }, 120_000, `${slug} history pulled`);

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
    expect(Object.fromEntries(Object.entries(statuses).map(([r, s]: [string, any]) => [r, s.status]))).toEqual({ profile: 'success', activity: 'success', sleep: 'success', workouts: 'success', heartrate: 'success', blood_oxygen: 'success' });

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
    const events = await eventually(async () => {
      const got = stack.events().filter((e) => e.user_id === userId);
      return got.filter((e) => e.event_type.startsWith('historical.data.')).length >= 6 ? got : null;
    }, 60_000, 'historical events');
    expect(events.filter((e) => e.event_type === 'provider.connection.created')).toHaveLength(1);
    expect(new Set(events.filter((e) => e.event_type.startsWith('historical.data.')).map((e) => e.event_type))).toEqual(
      new Set(['profile', 'activity', 'sleep', 'workouts', 'heartrate', 'blood_oxygen'].map((r) => `historical.data.${r}.created`)),
    );
    // Tokens are stored sealed, never in plaintext.
    const stored = await stack.app.inspect.collection('provider_tokens').findOne({ user_id: userId });
    expect(JSON.stringify(stored)).not.toContain(oura.tokenState(ouraUser.id).access[0].token);
  }, 180_000);
});
