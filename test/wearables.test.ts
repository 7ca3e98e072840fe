import { Webhook as StandardWebhook } from 'standardwebhooks';
import { addDays, todayUtc } from '../lib/platform/time';
import {
  ActivityResponse,
  GroupedTimeseriesResponse,
  HistoricalPullIntrospection,
  ProfileSummary,
  ResourcesIntrospection,
  SleepResponse,
  TimeseriesList,
  UserProvidersResponse,
} from '../schemas/wearables';
import {
  createTenant,
  eventually,
  expectSchema,
  startTestApp,
  teamClient,
  uniqueId,
  type HttpClient,
  type Tenant,
  type TestApp,
  subscribeReceiver,
} from './support/harness';
import type { Receiver } from './support/receiver';
import { privateDeployment, startWorker, stopWorker } from './support/worker';

/**
 * Wearable data through the real stack: demo connections pull their history in a Temporal workflow, data and
 * events reach a real receiver, the SDK ingestion endpoint stores with replacement semantics.
 */
let app: TestApp;
let tenant: Tenant;
let client: HttpClient;
let rx: Receiver;
let secret: string;
const today = todayUtc();
const startedAt = Date.now();

beforeAll(async () => {
  app = await startTestApp();
  tenant = await createTenant(app.deps, 'Wearables');
  client = teamClient(app, tenant);
  ({ rx, secret } = await subscribeReceiver(app, tenant, ['provider.*', 'historical.*', 'daily.*']));
});
afterAll(async () => {
  await rx.close();
  await app.close();
});

/** A user whose history window is the last `days` days (ingestion bounds keep pulls small). */
async function createUser(days = 2, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await client.post('/v2/user/', {
    client_user_id: uniqueId('wearer'),
    ingestion_start: addDays(today, -days),
    fallback_time_zone: 'UTC',
    ...extra,
  });
  expect(res.status).toBe(200);
  return res.body.user_id;
}

/** Verified events about one user, in arrival order. */
function eventsOf(userId: string, type?: string | RegExp) {
  const verifier = new StandardWebhook(secret);
  return rx.requests
    .map((r) => ({ id: String(r.headers['webhook-id']), body: verifier.verify(r.body, r.headers as Record<string, string>) as any }))
    .filter((e) => e.body.user_id === userId && (!type || (typeof type === 'string' ? e.body.event_type === type : type.test(e.body.event_type))));
}

async function pullsDone(userId: string, provider: string, count: number) {
  return eventually(
    async () => {
      const res = await client.get(`/v2/introspect/historical_pull?user_id=${userId}`);
      const pulled = res.body.data[0]?.provider?.[provider]?.pulled ?? {};
      const statuses = Object.values(pulled).map((s: any) => s.status);
      return statuses.length === count && statuses.every((s) => s === 'success' || s === 'failure') ? res.body : null;
    },
    90000,
    `${provider} history pulled`,
  );
}

describe('a demo connection', () => {
  let userId: string;
  const resources = [
    'profile',
    'activity',
    'sleep',
    'workouts',
    'heartrate',
    'hrv',
    'blood_oxygen',
    'steps',
    'calories_active',
    'respiratory_rate',
    'hypnogram',
  ];

  beforeAll(async () => {
    userId = await createUser(2);
    const res = await client.post('/v2/link/connect/demo', { user_id: userId, provider: 'oura' });
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
  });

  it('announces the connection, pulls the history resource by resource and says when each is done', async () => {
    const body = await pullsDone(userId, 'oura', resources.length);
    expectSchema(HistoricalPullIntrospection, body);
    const pulled = body.data[0].provider.oura.pulled;
    for (const r of resources) expect(pulled[r]).toMatchObject({ status: 'success', error_details: null, days_requested: 3 });
    expect(pulled.heartrate.days_with_data).toBe(3);

    const created = await rx.waitFor(1, 30000, (r) => r.body.includes('provider.connection.created') && r.body.includes(userId));
    expect(created).toHaveLength(1);
    const [announce] = eventsOf(userId, 'provider.connection.created');
    expect(announce.body.data).toMatchObject({ user_id: userId, source: { slug: 'oura', name: 'Oura' } });
    expect(typeof announce.body.data.source.logo).toBe('string');

    await eventually(async () => eventsOf(userId, /^historical\.data\./).length === resources.length, 30000, 'historical events');
    const historical = eventsOf(userId, /^historical\.data\./);
    expect(historical.map((e) => e.body.event_type).sort()).toEqual(resources.map((r) => `historical.data.${r}.created`).sort());
    expect(historical[0].body.data).toMatchObject({ user_id: userId, is_final: true, provider: 'oura' });
    // History is stored silently: no daily.data events for it.
    expect(eventsOf(userId, /^daily\.data\./)).toEqual([]);

    const stats = (await client.get(`/v2/introspect/resources?user_id=${userId}`)).body;
    expectSchema(ResourcesIntrospection, stats);
    expect(stats.data[0].provider.oura.heartrate.sent_count).toBeGreaterThan(100);
  });

  it('serves the pulled data through the read endpoints', async () => {
    await pullsDone(userId, 'oura', resources.length);
    const activity = await client.get(`/v2/summary/activity/${userId}?start_date=${addDays(today, -2)}&end_date=${today}`);
    expect(activity.status).toBe(200);
    expectSchema(ActivityResponse, activity.body);
    // Today's summary exists once its first 15-minute slot has ended (the demo records what happened so far): a run
    // just after midnight UTC has only the two days before.
    const days = activity.body.activity.map((a: any) => a.calendar_date);
    expect(days.slice(0, 2)).toEqual([addDays(today, -2), addDays(today, -1)]);
    if (startedAt - Date.parse(`${today}T00:00:00Z`) > 20 * 60_000) expect(days).toEqual([addDays(today, -2), addDays(today, -1), today]);
    else expect(days.length).toBeLessThanOrEqual(3);
    expect(activity.body.activity[0]).toMatchObject({ user_id: userId, source: { provider: 'oura' } });

    const sleep = await client.get(`/v2/summary/sleep/${userId}?start_date=${addDays(today, -3)}`);
    expectSchema(SleepResponse, sleep.body);
    expect(sleep.body.sleep.length).toBeGreaterThanOrEqual(1);

    const profile = await client.get(`/v2/summary/profile/${userId}`);
    expectSchema(ProfileSummary, profile.body);

    const hr = await client.get(`/v2/timeseries/${userId}/heartrate?start_date=${addDays(today, -1)}&end_date=${addDays(today, -1)}`);
    expect(hr.status).toBe(200);
    expectSchema(TimeseriesList, hr.body);
    expect(hr.body.length).toBe(288); // every 5 minutes of a whole day
    expect(hr.body[0]).toMatchObject({ unit: 'bpm', timezone_offset: 0 });
    const times = hr.body.map((s: any) => Date.parse(s.timestamp));
    expect(times).toEqual([...times].sort((a, b) => a - b));

    const steps = await client.get(`/v2/timeseries/${userId}/steps?start_date=${addDays(today, -1)}&end_date=${addDays(today, -1)}`);
    expect(steps.body[0]).toHaveProperty('start');
    expect(steps.body[0]).toHaveProperty('end');

    const grouped = await client.get(`/v2/timeseries/${userId}/heartrate/grouped?start_date=${addDays(today, -1)}&end_date=${addDays(today, -1)}`);
    expectSchema(GroupedTimeseriesResponse, grouped.body);
    expect(grouped.body.groups.oura[0].data).toHaveLength(288);
    expect(grouped.body.next_cursor).toBeNull();

    expect((await client.get(`/v2/timeseries/${userId}/not_a_resource?start_date=${today}`)).status).toBe(404);
    expect((await client.get(`/v2/summary/nonsense/${userId}?start_date=${today}`)).status).toBe(404);
    const bad = await client.get(`/v2/timeseries/${userId}/heartrate?start_date=2024-13-45`);
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(['query', 'start_date']);
    expect((await client.get(`/v2/timeseries/${userId}/heartrate`)).status).toBe(422);
  });

  it('lists the connection, refuses a duplicate and syncs on refresh', async () => {
    await pullsDone(userId, 'oura', resources.length);
    const providers = await client.get(`/v2/user/providers/${userId}`);
    expectSchema(UserProvidersResponse, providers.body);
    expect(providers.body.providers).toEqual([expect.objectContaining({ slug: 'oura', status: 'connected' })]);
    expect((await client.get(`/v2/user/${userId}`)).body.connected_sources).toEqual([
      expect.objectContaining({ source: expect.objectContaining({ slug: 'oura' }) }),
    ]);
    const again = await client.post('/v2/link/connect/demo', { user_id: userId, provider: 'oura' });
    expect(again.status).toBe(400);
    expect(again.body.detail).toMatch(/already connected to oura/);

    // Lose yesterday's data; the next sync fetches yesterday and today again and announces what it restores.
    const yesterday = addDays(today, -1);
    // Samples live in day buckets, as columns parallel to `offsets` (ms into the day): drop those of 00:00-06:00.
    for (const bucket of await app.inspect
      .collection('sample_buckets')
      .find({ user_id: userId, resource: 'heartrate', day: new Date(`${yesterday}T00:00:00Z`) })
      .toArray()) {
      const kept = (bucket.offsets as number[]).map((offset) => offset >= 6 * 3_600_000);
      expect(kept).toContain(false);
      const columns = Object.entries(bucket).filter(([, column]) => Array.isArray(column));
      const set = Object.fromEntries(columns.map(([field, column]) => [field, (column as unknown[]).filter((_, i) => kept[i])]));
      await app.inspect.collection('sample_buckets').updateOne({ _id: bucket._id }, { $set: set, $inc: { version: 1 } });
    }
    await app.inspect.collection('summaries').deleteMany({ user_id: userId, resource: 'activity', calendar_date: yesterday });
    // A day far outside the provider's history window, as a connection years old would have recorded it.
    await app.inspect.collection('historical_pulls').updateMany({ user_id: userId }, { $push: { data_days: '2000-01-01' } as never });
    const planted = new Date();
    const refresh = await client.post(`/v2/user/refresh/${userId}`);
    expect(refresh.body).toMatchObject({ success: true, in_progress_sources: ['oura'] });
    await eventually(
      async () => eventsOf(userId, 'daily.data.heartrate.created').length > 0 && eventsOf(userId, 'daily.data.activity.created').length > 0,
      60000,
      'sync events',
    );
    const restored = eventsOf(userId, 'daily.data.heartrate.created').flatMap((e) => e.body.data.data);
    expect(restored.filter((s: any) => s.timestamp.startsWith(yesterday) && s.timestamp < `${yesterday}T06`)).toHaveLength(72);
    const [hrEvent] = eventsOf(userId, 'daily.data.heartrate.created');
    expect(hrEvent.body.data).toMatchObject({ user_id: userId, source: { slug: 'oura' } });
    expect(Number.isInteger(hrEvent.body.data.source_id)).toBe(true);
    const activity = eventsOf(userId, 'daily.data.activity.created').find((e) => e.body.data.calendar_date === yesterday);
    expect(activity?.body.data).toMatchObject({ user_id: userId, calendar_date: yesterday });
    expect(activity?.body.data.steps).toEqual(expect.any(Number));
    // The sync keeps data_days bounded to the history window: the old day is gone, the recent ones stay.
    await eventually(
      async () => {
        const pulls = await app.inspect.collection('historical_pulls').find({ user_id: userId }).toArray();
        // Rewritten by this sync (demo data may leave a resource without any day: workouts are random).
        return pulls.length === resources.length && pulls.every((p) => p.updated_at > planted && !p.data_days.includes('2000-01-01'));
      },
      30000,
      'data_days bounded by the sync',
    );
  });

  it('deregisters, and a reconnect pulls only the days without data', async () => {
    await pullsDone(userId, 'oura', resources.length);
    const gone = await client.del(`/v2/user/${userId}/oura`);
    expect(gone.body).toEqual({ success: true });
    expect((await client.get(`/v2/user/providers/${userId}`)).body.providers).toEqual([]);
    expect((await client.get(`/v2/user/${userId}`)).body.connected_sources).toEqual([]);
    expect((await client.del(`/v2/user/${userId}/oura`)).status).toBe(404);

    // Widen the window by two days: the reconnect asks the provider for those two days only.
    expect((await client.patch(`/v2/user/${userId}`, { ingestion_start: addDays(today, -4) })).status).toBe(204);
    expect((await client.post('/v2/link/connect/demo', { user_id: userId, provider: 'oura' })).status).toBe(200);
    const body = await eventually(
      async () => {
        const res = await client.get(`/v2/introspect/historical_pull?user_id=${userId}&provider=oura`);
        const hr = res.body.data[0].provider.oura.pulled.heartrate;
        return hr.status === 'success' && hr.days_requested === 2 ? res.body : null;
      },
      90000,
      'gap pulled',
    );
    const hr = body.data[0].provider.oura.pulled.heartrate;
    expect(hr.range_start.slice(0, 10)).toBe(addDays(today, -4));
    expect(hr.range_end.slice(0, 10)).toBe(addDays(today, -3));
    const all = await client.get(`/v2/timeseries/${userId}/heartrate?start_date=${addDays(today, -4)}&end_date=${addDays(today, -3)}`);
    expect(all.body).toHaveLength(2 * 288);
  });
});

describe('SDK ingestion', () => {
  const at = (h: number) => `${addDays(today, -1)}T${String(h).padStart(2, '0')}:00:00+00:00`;
  const heartrate = (h: number, value: number) => ({ resource: 'heartrate', timestamp: at(h), value });

  it('stores new data once, publishes it, and a revised sample replaces the old value with an .updated event', async () => {
    const userId = await createUser(3, { fallback_time_zone: 'Asia/Tokyo' });
    const batch = {
      provider: 'apple_health_kit',
      source_type: 'watch',
      samples: [
        heartrate(1, 61),
        heartrate(2, 62),
        { resource: 'heartrate', timestamp: at(3), value: 63, timezone_offset: null },
        { resource: 'steps', timestamp: at(4), start: at(4), end: at(5), value: 900 },
      ],
      summaries: [{ resource: 'activity', calendar_date: addDays(today, -1), steps: 900, calories_total: 2100 }],
    };
    const first = await client.post(`/v2/ingest/${userId}`, batch);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ samples: { created: 4, updated: 0, unchanged: 0 }, summaries: { created: 1 }, dropped: 0 });
    await eventually(async () => eventsOf(userId, /^daily\.data\./).length >= 3, 30000, 'data events');
    const hr = eventsOf(userId, 'daily.data.heartrate.created');
    expect(hr).toHaveLength(1);
    expect(hr[0].body.data.data.map((s: any) => s.value)).toEqual([61, 62, 63]);
    expect(hr[0].body.data.data[2].timezone_offset).toBe(9 * 3600); // tz-less: the user's fallback zone
    expect(eventsOf(userId, 'daily.data.steps.created')[0].body.data.data[0]).toMatchObject({ value: 900, unit: 'count' });
    const activity = eventsOf(userId, 'daily.data.activity.created');
    expect(activity[0].body.data).toMatchObject({ steps: 900, calories_total: 2100, user_id: userId, source: { provider: 'apple_health_kit', type: 'watch' } });
    await eventually(async () => eventsOf(userId, 'provider.connection.created').length === 1, 30000, 'connection announced');

    const resend = await client.post(`/v2/ingest/${userId}`, batch);
    expect(resend.body).toMatchObject({ samples: { created: 0, updated: 0, unchanged: 4 }, summaries: { unchanged: 1 }, events: 0 });

    const revised = await client.post(`/v2/ingest/${userId}`, { provider: 'apple_health_kit', source_type: 'watch', samples: [heartrate(2, 70)] });
    expect(revised.body.samples).toEqual({ created: 0, updated: 1, unchanged: 0 });
    await eventually(async () => eventsOf(userId, 'daily.data.heartrate.updated').length === 1, 30000, 'updated event');
    expect(eventsOf(userId, 'daily.data.heartrate.updated')[0].body.data.data).toEqual([expect.objectContaining({ value: 70 })]);
    const stored = await client.get(`/v2/timeseries/${userId}/heartrate?start_date=${addDays(today, -1)}&end_date=${addDays(today, -1)}`);
    expect(stored.body.map((s: any) => s.value)).toEqual([61, 70, 63]);
    // Another source type is another sample (the key includes it).
    const phone = await client.post(`/v2/ingest/${userId}`, { provider: 'apple_health_kit', source_type: 'phone', samples: [heartrate(2, 80)] });
    expect(phone.body.samples.created).toBe(1);
    // ...announced as created, for that source (a fifth data event: the resend announced nothing).
    await eventually(async () => eventsOf(userId, /^daily\.data\./).length === 5, 30000, "the phone's sample announced");
    const created = eventsOf(userId, 'daily.data.heartrate.created');
    expect(created.map((e) => e.body.data.source?.type ?? e.body.data.source_type)).toEqual(['watch', 'phone']);
  });

  it('rejects a batch with invalid items by index and stores nothing of it', async () => {
    const userId = await createUser(3);
    const res = await client.post(`/v2/ingest/${userId}`, {
      provider: 'apple_health_kit',
      samples: [
        heartrate(1, 60),
        { resource: 'heartrate', timestamp: at(2) },
        { resource: 'teleportation', timestamp: at(3), value: 1 },
        { resource: 'steps', timestamp: at(4), value: 5 },
      ],
      summaries: [{ resource: 'sleep', calendar_date: addDays(today, -1) }],
    });
    expect(res.status).toBe(422);
    const locs = res.body.detail.map((d: any) => d.loc.join('.'));
    expect(locs).toEqual(expect.arrayContaining(['body.samples.1.value', 'body.samples.2.resource', 'body.samples.3.start', 'body.summaries.0.bedtime_start']));
    expect(await app.inspect.collection('sample_buckets').countDocuments({ user_id: userId })).toBe(0);
    const pulled = await client.post(`/v2/ingest/${userId}`, { provider: 'oura', samples: [heartrate(1, 60)] });
    expect(pulled.status).toBe(422);
    expect(pulled.body.detail[0].loc).toEqual(['body', 'provider']);
  });

  it('drops data outside the user ingestion bounds', async () => {
    const userId = await createUser(1, { ingestion_end: addDays(today, -1) });
    const res = await client.post(`/v2/ingest/${userId}`, {
      provider: 'apple_health_kit',
      samples: [
        heartrate(1, 60),
        { resource: 'heartrate', timestamp: `${addDays(today, -5)}T01:00:00Z`, value: 60 },
        { resource: 'heartrate', timestamp: `${today}T00:30:00Z`, value: 60 },
      ],
    });
    expect(res.body).toMatchObject({ samples: { created: 1 }, dropped: 2 });
  });
});

/**
 * An api and a worker of their own with `overrides` in both: a connection's workflow reads its pull and sync settings
 * from the worker's configuration (an activity), so settings a test shortens must be the worker's.
 */
async function ownDeploymentWith(name: string, overrides: Record<string, string | number>) {
  const deployment = privateDeployment(name);
  const worker = startWorker(deployment, Object.fromEntries(Object.entries(overrides).map(([k, v]) => [k, String(v)])));
  const own = await startTestApp({ ...deployment, ...overrides });
  const ownTenant = await createTenant(own.deps, name);
  return {
    app: own,
    tenant: ownTenant,
    client: teamClient(own, ownTenant),
    async close() {
      await stopWorker(worker, 'SIGTERM');
      await own.close();
    },
  };
}

describe('historical pull failures', () => {
  let fast: Awaited<ReturnType<typeof ownDeploymentWith>>;
  let c: HttpClient;
  beforeAll(async () => {
    fast = await ownDeploymentWith('pull-retries', {
      HISTORICAL_PULL_RETRY_INITIAL_SECONDS: 1.5,
      HISTORICAL_PULL_RETRY_MAX_SECONDS: 3,
      HISTORICAL_PULL_RETRY_QUOTA: 3,
    });
    c = fast.client;
  }, 60_000);
  afterAll(() => fast.close());

  it('retries retriable failures (retrying → success, retrying → failure) and fails non-retriable ones at once', async () => {
    const userId = (await c.post('/v2/user/', { client_user_id: uniqueId('faulty'), ingestion_start: addDays(today, -1) })).body.user_id;
    const connect = await c.post('/v2/link/connect/demo', {
      user_id: userId,
      provider: 'fitbit',
      sandbox_faults: [
        { resource: 'profile', transient_failures: 2, error_type: 'provider_rate_limit_exceeded' },
        { resource: 'activity', transient_failures: 10 },
        { resource: 'sleep', permanent: true },
      ],
    });
    expect(connect.status).toBe(200);
    const seen = new Set<string>();
    const pulled = await eventually(
      async () => {
        const res = await c.get(`/v2/introspect/historical_pull?user_id=${userId}&provider=fitbit`);
        const p = res.body.data[0]?.provider?.fitbit?.pulled;
        if (p?.profile) seen.add(`profile:${p.profile.status}`);
        if (p?.activity) seen.add(`activity:${p.activity.status}`);
        const settled = p && Object.values(p).every((s: any) => s.status === 'success' || s.status === 'failure');
        return settled && p.activity.status === 'failure' ? p : null;
      },
      90000,
      'pulls settled',
    );
    expect(seen).toContain('profile:retrying');
    expect(seen).toContain('activity:retrying');
    expect(pulled.profile).toMatchObject({ status: 'success', attempts: 3, error_details: null });
    expect(pulled.activity).toMatchObject({ status: 'failure', attempts: 3, error_details: 'retry_quota_exhausted' });
    expect(pulled.sleep).toMatchObject({ status: 'failure', attempts: 1, error_details: 'non_retriable_error' });
    expect(pulled.activity.timeline.ended_at).not.toBeNull();
    expect(pulled.heartrate.status).toBe('success');
  });

  it('gives up a pull that cannot make progress (a stalled adapter) after HISTORICAL_PULL_GIVE_UP_SECONDS, and goes on', async () => {
    const bounded = await ownDeploymentWith('pull-give-up', { HISTORICAL_PULL_GIVE_UP_SECONDS: 5 });
    try {
      const bc = bounded.client;
      const userId = (await bc.post('/v2/user/', { client_user_id: uniqueId('stalled'), ingestion_start: today })).body.user_id;
      const connect = await bc.post('/v2/link/connect/demo', {
        user_id: userId,
        provider: 'fitbit',
        sandbox_faults: [{ resource: 'sleep', stall_seconds: 120 }],
      });
      expect(connect.status).toBe(200);
      const pulled = await eventually(
        async () => {
          const p = (await bc.get(`/v2/introspect/historical_pull?user_id=${userId}&provider=fitbit`)).body.data[0]?.provider?.fitbit?.pulled;
          return p && Object.keys(p).length === 12 && Object.values(p).every((s: any) => s.status === 'success' || s.status === 'failure') ? p : null;
        },
        90000,
        'pulls settled',
      );
      // Recorded as failed by us, long before the stalled call (120 s) or a heartbeat timeout loop would end it.
      expect(pulled.sleep).toMatchObject({ status: 'failure', error_details: 'unexpected_error' });
      expect(pulled.sleep.timeline.ended_at).not.toBeNull();
      expect(pulled.heartrate.status).toBe('success'); // the resources after it were pulled
    } finally {
      await bounded.close();
    }
  });

  it('fails retriable errors at once for connections made before the retrying cut-over', async () => {
    const old = await startTestApp({ HISTORICAL_PULL_RETRYING_SINCE: '2999-01-01' });
    try {
      const oc = teamClient(old, tenant);
      const userId = (await oc.post('/v2/user/', { client_user_id: uniqueId('old'), ingestion_start: today })).body.user_id;
      await oc.post('/v2/link/connect/demo', {
        user_id: userId,
        provider: 'freestyle_libre',
        sandbox_faults: [{ resource: 'glucose', transient_failures: 1 }],
      });
      const pulled = await eventually(
        async () => {
          const p = (await oc.get(`/v2/introspect/historical_pull?user_id=${userId}`)).body.data[0]?.provider?.freestyle_libre?.pulled;
          return p?.glucose?.status === 'failure' ? p : null;
        },
        60000,
        'glucose failed',
      );
      expect(pulled.glucose).toMatchObject({ attempts: 1, error_details: 'provider_unavailable' });
    } finally {
      await old.close();
    }
  });
});

describe('the sync loop', () => {
  it('continues as new after WEARABLE_SYNCS_PER_RUN syncs without pulling the history again, and stops on deregistration', async () => {
    const quick = await ownDeploymentWith('sync-loop', { WEARABLE_SYNC_INTERVAL_SECONDS: 1, WEARABLE_SYNCS_PER_RUN: 2 });
    const { rx: ownRx, secret: ownSecret } = await subscribeReceiver(quick.app, quick.tenant, ['historical.*']);
    const historicalEvents = (userId: string) =>
      ownRx.requests
        .map((r) => new StandardWebhook(ownSecret).verify(r.body, r.headers as Record<string, string>) as { event_type: string; data: { user_id?: string } })
        .filter((e) => e.data.user_id === userId);
    try {
      const qc = quick.client;
      const userId = (await qc.post('/v2/user/', { client_user_id: uniqueId('looping'), ingestion_start: today })).body.user_id;
      const connect = await qc.post('/v2/link/connect/demo', { user_id: userId, provider: 'freestyle_libre' });
      expect(connect.status).toBe(200);
      const connection = await quick.app.inspect.collection('connections').findOne({ user_id: userId, provider: 'freestyle_libre' });
      const workflowId = `wearable-connection:${connection!._id}`;
      const client = quick.app.deps.temporal.client.workflow;
      const runs = new Set<string>();
      await eventually(
        async () => {
          runs.add((await client.getHandle(workflowId).describe()).runId);
          return runs.size >= 3;
        },
        90000,
        'two continue-as-new',
      );
      const [firstRun] = runs;
      expect((await client.getHandle(workflowId, firstRun).describe()).status.name).toBe('CONTINUED_AS_NEW');

      // The history was pulled once, by the first run; later runs only sync.
      await eventually(
        async () => historicalEvents(userId).filter((e) => e.event_type === 'historical.data.glucose.created').length === 1,
        30000,
        'historical event',
      );
      const pulled = (await qc.get(`/v2/introspect/historical_pull?user_id=${userId}`)).body.data[0].provider.freestyle_libre.pulled;
      expect(pulled.glucose).toMatchObject({ status: 'success', attempts: 1 });
      expect(historicalEvents(userId).filter((e) => /^historical\.data\./.test(e.event_type))).toHaveLength(1);

      expect((await qc.del(`/v2/user/${userId}/freestyle_libre`)).status).toBe(200);
      await eventually(async () => (await client.getHandle(workflowId).describe()).status.name === 'COMPLETED', 30000, 'the latest run to stop');
    } finally {
      await ownRx.close();
      await quick.close();
    }
  });
});

describe('link tokens', () => {
  it('are one-time and connect a demo provider', async () => {
    const userId = await createUser(0);
    const token = await client.post('/v2/link/token', { user_id: userId, provider: 'freestyle_libre' });
    expect(token.status).toBe(200);
    expect(token.body.link_web_url).toContain(encodeURIComponent(token.body.link_token));
    expect((await client.post('/v2/link/token/isValid', { token: token.body.link_token })).body.valid).toBe(true);
    const uses = await Promise.all([1, 2].map(() => client.post('/v2/link/start', { link_token: token.body.link_token, provider: 'freestyle_libre' })));
    expect(uses.map((u) => u.body.state).sort()).toEqual(['error', 'success']);
    expect(uses.find((u) => u.body.state === 'error')?.body.error_type).toBe('token_consumed');
    expect((await client.post('/v2/link/token/isValid', { token: token.body.link_token })).body.valid).toBe(false);
    expect((await client.post('/v2/link/token', { user_id: userId, provider: 'nope' })).status).toBe(400);
  });
});

describe('events and erasure', () => {
  const yesterday = addDays(today, -1);
  const at = (h: number, m = 0) => `${yesterday}T${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:00+00:00`;

  it('splits a large timeseries batch into events under the size limit', async () => {
    const small = await startTestApp({ WEBHOOK_MAX_EVENT_BYTES: 4096 });
    try {
      const c = teamClient(small, tenant);
      const userId = (await c.post('/v2/user/', { client_user_id: uniqueId('chunky'), fallback_time_zone: 'UTC' })).body.user_id;
      const samples = Array.from({ length: 100 }, (_, i) => ({ resource: 'heartrate', timestamp: at(Math.floor(i / 60), i % 60), value: 60 + (i % 30) }));
      const res = await c.post(`/v2/ingest/${userId}`, { provider: 'apple_health_kit', samples });
      expect(res.body.samples.created).toBe(100);
      expect(res.body.events).toBeGreaterThan(2);
      await eventually(async () => eventsOf(userId, 'daily.data.heartrate.created').length === res.body.events, 30000, 'every chunk');
      const chunks = rx.requests.filter((r) => r.body.includes('daily.data.heartrate.created') && r.body.includes(userId));
      for (const r of chunks) expect(Buffer.byteLength(r.body)).toBeLessThanOrEqual(4096);
      const values = eventsOf(userId, 'daily.data.heartrate.created')
        .flatMap((e) => e.body.data.data)
        .sort((a: any, b: any) => Date.parse(a.timestamp) - Date.parse(b.timestamp))
        .map((s: any) => s.value);
      expect(values).toEqual(samples.map((s) => s.value));
    } finally {
      await small.close();
    }
  });

  it('stores a workout stream, announces it shallowly and serves it', async () => {
    const userId = await createUser(3);
    const stream = { time: [1_700_000_000, 1_700_000_005, 1_700_000_010], heartrate: [120, 125, 131], distance: [0, 14.2, 29.0] };
    const res = await client.post(`/v2/ingest/${userId}`, {
      provider: 'apple_health_kit',
      summaries: [
        {
          resource: 'workouts',
          id: 'run-1',
          calendar_date: yesterday,
          time_start: at(7),
          time_end: at(8),
          provider_id: 'run-1',
          sport: { id: 1, name: 'Running', slug: 'running' },
        },
      ],
      workout_streams: [{ workout_id: 'run-1', stream }],
    });
    expect(res.body.workout_streams).toEqual({ created: 1, updated: 0, unchanged: 0 });
    await eventually(async () => eventsOf(userId, 'daily.data.workout_stream.created').length === 1, 30000, 'stream event');
    const [event] = eventsOf(userId, 'daily.data.workout_stream.created');
    expect(Object.keys(event.body.data).sort()).toEqual(['message', 'provider_id', 'source', 'sport', 'user_id', 'workout_id']);
    expect(event.body.data).toMatchObject({ provider_id: 'run-1', sport: { slug: 'running' }, user_id: userId });
    const workouts = (await client.get(`/v2/summary/workouts/${userId}?start_date=${yesterday}&end_date=${yesterday}`)).body.workouts;
    expect(workouts.map((w: any) => w.id)).toEqual([event.body.data.workout_id]);
    const served = await client.get(`/v2/timeseries/workouts/${event.body.data.workout_id}/stream`);
    expect(served.body).toEqual(stream);
    const again = await client.post(`/v2/ingest/${userId}`, { provider: 'apple_health_kit', workout_streams: [{ workout_id: 'run-1', stream }] });
    expect(again.body).toMatchObject({ workout_streams: { unchanged: 1 }, events: 0 });
  });

  it('marks a connection whose credentials fail as error and publishes provider.connection.error', async () => {
    const userId = await createUser(0);
    await client.post('/v2/link/connect/demo', {
      user_id: userId,
      provider: 'freestyle_libre',
      sandbox_faults: [{ resource: 'glucose', permanent: true, error_type: 'provider_credential_error' }],
    });
    await eventually(async () => eventsOf(userId, 'provider.connection.error').length === 1, 60000, 'connection error event');
    expect(eventsOf(userId, 'provider.connection.error')[0].body.data).toMatchObject({
      user_id: userId,
      error_type: 'provider_credential_error',
      provider: { slug: 'freestyle_libre' },
    });
    const providers = (await client.get(`/v2/user/providers/${userId}`)).body;
    expectSchema(UserProvidersResponse, providers);
    expect(providers.providers[0]).toMatchObject({ slug: 'freestyle_libre', status: 'error', error_details: { error_type: 'provider_credential_error' } });
  });

  it("a connection's error expires with it: it takes the connection's end date, also when recorded after the end", async () => {
    const userId = await createUser(0);
    await client.post('/v2/link/connect/demo', {
      user_id: userId,
      provider: 'freestyle_libre',
      sandbox_faults: [{ resource: 'glucose', permanent: true, error_type: 'provider_credential_error' }],
    });
    await eventually(async () => eventsOf(userId, 'provider.connection.error').length === 1, 60000, 'connection error event');
    const [connection] = await app.deps.repos.connections.listForUser(tenant.teamId, userId);
    const errorOf = () => app.inspect.collection('connection_errors').findOne({ _id: connection._id as never });
    // While the connection lives, so does its error (the TTL index skips a document without the date).
    expect(await errorOf()).toMatchObject({ error_details: { error_type: 'provider_credential_error' } });
    expect((await errorOf())!.deregistered_at).toBeUndefined();

    expect((await client.del(`/v2/user/${userId}/freestyle_libre`)).status).toBe(200);
    const endedAt = (await app.deps.repos.connections.find(connection._id))!.deregistered_at;
    expect(endedAt).toBeInstanceOf(Date);
    expect((await errorOf())!.deregistered_at).toEqual(endedAt);

    // An error that an activity under way records after the end gets the same date: it cannot outlive the connection.
    await app.deps.repos.connections.recordError(connection, { error_type: 'provider_unavailable', error_message: 'late', errored_at: new Date() });
    expect(await errorOf()).toMatchObject({ error_details: { error_type: 'provider_unavailable' }, deregistered_at: endedAt });
    // Once the connection is erased, a late error does not stay behind.
    await app.deps.repos.connections.eraseAllForUser(tenant.teamId, userId);
    await app.deps.repos.connections.recordError(connection, { error_type: 'provider_unavailable', error_message: 'later', errored_at: new Date() });
    expect(await errorOf()).toBeNull();
  });

  it("erases the user's connections and data when the deletion grace period ends", async () => {
    const shortGrace = await startTestApp({ USER_DELETION_GRACE_SECONDS: 2 });
    try {
      const c = teamClient(shortGrace, tenant);
      const userId = (await c.post('/v2/user/', { client_user_id: uniqueId('leaving'), ingestion_start: today })).body.user_id;
      await c.post(`/v2/ingest/${userId}`, {
        provider: 'apple_health_kit',
        samples: [{ resource: 'heartrate', timestamp: `${today}T00:00:00Z`, value: 60 }],
        summaries: [{ resource: 'activity', calendar_date: today, steps: 10 }],
      });
      await c.post('/v2/link/connect/demo', { user_id: userId, provider: 'freestyle_libre' });
      await eventually(
        async () =>
          (await c.get(`/v2/introspect/historical_pull?user_id=${userId}`)).body.data[0]?.provider?.freestyle_libre?.pulled?.glucose?.status === 'success',
        60000,
        'glucose pulled',
      );
      expect((await c.del(`/v2/user/${userId}`)).status).toBe(200);
      const result = await shortGrace.deps.temporal.client.workflow.getHandle(`user-deletion:${userId}`).result();
      expect(result.erased.connections).toBe(2);
      expect(result.erased.wearable_data).toBeGreaterThan(2);
      for (const name of ['sample_buckets', 'summaries', 'historical_pulls', 'connections', 'link_tokens']) {
        expect({ name, left: await shortGrace.inspect.collection(name).countDocuments({ user_id: userId }) }).toEqual({ name, left: 0 });
      }
    } finally {
      await shortGrace.close();
    }
  });
});
