import { addDays, todayUtc } from '../lib/platform/time';
import type { WhoopSleep, WhoopWorkout } from '../lib/wearables/providers/whoop/api-types';
import { WorkflowNotFoundError } from '@temporalio/client';
import { workflowIds } from '../workflows/ids';
import { pushHintsStateQuery } from '../workflows/wearable-connection';
import { eventually } from './support/harness';
import { startFakeDexcom, type DexcomFakeUser, type FakeDexcom } from './support/fakes/dexcom';
import type { FakeProvider, FakeUser } from './support/fakes/fake-provider';
import { startFakeOura, type FakeOura } from './support/fakes/oura';
import { startFakePolar, type FakePolar } from './support/fakes/polar';
import { startFakeStrava, type FakeStrava } from './support/fakes/strava';
import { startFakeWhoop, type FakeWhoop } from './support/fakes/whoop';
import { startFakeWithings, type WithingsFake } from './support/fakes/withings';
import { connectThroughOAuth, createUser, startProviderStack, type ProviderStack } from './support/provider-stack';

/**
 * Every real provider on one real stack (README "Connecting real providers"): users connected through the OAuth flow
 * to each provider's fake, their histories pulled page by page on the providers' own task queues, and what landed read
 * back through our API and compared with what the fake served; pushes fetched once however often they are delivered,
 * forged ones refused, connections deleted (revoked at the provider) or ended by the provider.
 *
 * The six histories are started together in beforeAll (each provider has its own task queue and rate, so they pull side
 * by side): the file then takes about as long as its slowest provider (Strava's 100 reads per 15 minutes make about
 * one request every 10 s), not the sum of all six.
 */
const DAY_MS = 86_400_000;

let stack: ProviderStack;
let oura: FakeOura;
let whoop: FakeWhoop;
let polar: FakePolar;
let strava: FakeStrava;
let dexcom: FakeDexcom;
let withings: WithingsFake;

/** A user of ours connected to a provider user of the fake. */
interface Connected {
  userId: string;
  fakeUser: FakeUser;
  connectionId: string;
}

/** Our users' zones match their provider users' offsets (the zone fills in samples that carry none, e.g. Withings'). */
const ZONES = {
  oura: { offset: 3600, zone: 'Etc/GMT-1' },
  whoop_v2: { offset: -4 * 3600, zone: 'Etc/GMT+4' },
  polar: { offset: 2 * 3600, zone: 'Etc/GMT-2' },
  strava: { offset: 3600, zone: 'Etc/GMT-1' },
  dexcom_v3: { offset: -5 * 3600, zone: 'Etc/GMT+5' },
  withings: { offset: 2 * 3600, zone: 'Etc/GMT-2' },
} as const;
type Slug = keyof typeof ZONES;

/** The pull units of each integration: one historical pull (and one `historical.data.*` event) each. */
const PULL_UNITS: Record<Slug, string[]> = {
  oura: ['profile', 'activity', 'sleep', 'workouts', 'heartrate', 'blood_oxygen'],
  whoop_v2: ['sleep', 'activity', 'workouts', 'body'],
  polar: ['profile', 'body', 'activity', 'sleep', 'hrv', 'workouts', 'heartrate', 'blood_oxygen'],
  strava: ['profile', 'workouts', 'workout_stream'],
  dexcom_v3: ['glucose'],
  withings: ['profile', 'body', 'activity', 'workouts', 'sleep', 'heartrate'],
};

const connecting = {} as Record<Slug, Promise<Connected>>;

beforeAll(async () => {
  oura = await startFakeOura();
  oura.setPageSize('heartrate', 1000);
  // Generous app limits: the rates of the providers' task queues pace the pulls, not the fakes' 429s.
  whoop = await startFakeWhoop({ rateLimit: { limit: 10_000, dailyLimit: null } });
  // A history to compare with what lands: AccessLink serves none to a new connection (README, Polar), the fake can.
  polar = await startFakePolar({ preRegistrationHistory: true });
  polar.rateLimits = { short: 100_000, long: 1_000_000 };
  strava = await startFakeStrava({ rateLimits: { overall: [10_000, 100_000], read: [10_000, 100_000] } });
  dexcom = await startFakeDexcom();
  withings = await startFakeWithings();
  const fakes: [Slug, FakeProvider][] = [
    ['oura', oura],
    ['whoop_v2', whoop],
    ['polar', polar],
    ['strava', strava],
    ['dexcom_v3', dexcom],
    ['withings', withings],
  ];
  stack = await startProviderStack(
    'pulls',
    fakes.map(([slug, fake]) => ({ slug, fake, clientId: fake.options.clientId, clientSecret: fake.options.clientSecret })),
  );
  connecting.oura = connect('oura', oura, oura.addUser({ zoneOffsetSeconds: ZONES.oura.offset }));
  connecting.whoop_v2 = connect('whoop_v2', whoop, whoop.addUser({ zoneOffsetSeconds: ZONES.whoop_v2.offset }));
  connecting.polar = connect('polar', polar, polar.addUser({ zoneOffsetSeconds: ZONES.polar.offset }));
  // Six days of activities: Strava's history costs a request per activity's streams, at ~10 s a request.
  connecting.strava = connect('strava', strava, strava.addUser({ zoneOffsetSeconds: ZONES.strava.offset, dataStartMs: Date.now() - 6 * DAY_MS }));
  connecting.dexcom_v3 = connect(
    'dexcom_v3',
    dexcom,
    dexcom.addUser({ zoneOffsetSeconds: ZONES.dexcom_v3.offset, displayDevice: 'receiver' } as Partial<DexcomFakeUser>),
  );
  connecting.withings = connect('withings', withings, withings.addUser({ zoneOffsetSeconds: ZONES.withings.offset }));
  // Each test awaits its own; a failed connect fails that provider's tests, not the file.
  for (const p of Object.values(connecting)) p.catch(() => undefined);
}, 120_000);

afterAll(async () => {
  await stack?.close();
  for (const fake of [oura, whoop, polar, strava, dexcom, withings]) await fake?.close();
});

// ---- Helpers ------------------------------------------------------------------------------------------------------

/** Connects a new user of ours, in the fake user's zone, through the OAuth flow as the fake user. */
async function connect(slug: Slug, fake: FakeProvider, fakeUser: FakeUser): Promise<Connected> {
  const userId = await createUser(stack, { fallback_time_zone: ZONES[slug].zone });
  const done = await connectThroughOAuth(stack, userId, slug, fake, { asUser: fakeUser.id });
  if (done.status !== 200 || !/connected/i.test(done.text)) throw new Error(`${slug} connect ended ${done.status}: ${done.text.slice(0, 300)}`);
  const connection = await stack.app.inspect.collection('connections').findOne({ user_id: userId, provider: slug });
  if (!connection) throw new Error(`no ${slug} connection stored for ${userId}`);
  return { userId, fakeUser, connectionId: String(connection._id) };
}

const pushUrl = (slug: string) => `${stack.app.url}/v2/providers/${slug}/webhook`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every resource's historical pull status, once all are final. */
async function historyDone(c: Connected, slug: Slug): Promise<Record<string, string>> {
  const units = PULL_UNITS[slug];
  return eventually(
    async () => {
      const res = await stack.client.get(`/v2/introspect/historical_pull?user_id=${c.userId}&provider=${slug}`);
      const pulled: Record<string, { status: string }> = res.body.data?.[0]?.provider?.[slug]?.pulled ?? {};
      const statuses = Object.fromEntries(Object.entries(pulled).map(([r, s]) => [r, s.status]));
      return Object.keys(statuses).length === units.length && Object.values(statuses).every((s) => s === 'success' || s === 'failure') ? statuses : null;
    },
    540_000,
    `${slug} history pulled`,
  );
}

/** The whole history window (and more) in the read endpoints' query. */
const wide = () => `start_date=${addDays(todayUtc(), -120)}&end_date=${addDays(todayUtc(), 2)}`;

async function summaries(c: Connected, resource: string, slug: Slug): Promise<any[]> {
  const res = await stack.client.get(`/v2/summary/${resource}/${c.userId}?${wide()}&provider=${slug}`);
  expect(res.status).toBe(200);
  return res.body[resource];
}

async function series(c: Connected, resource: string, slug: Slug, extra = ''): Promise<any[]> {
  const res = await stack.client.get(`/v2/timeseries/${c.userId}/${resource}?${wide()}&provider=${slug}${extra}`);
  expect(res.status).toBe(200);
  return res.body;
}

/** Every sample of a grouped-only resource, page by page. */
async function grouped(c: Connected, resource: string, slug: Slug, extra = ''): Promise<any[]> {
  const out: any[] = [];
  let cursor: string | null = null;
  do {
    const res: { status: number; body: any } = await stack.client.get(
      `/v2/timeseries/${c.userId}/${resource}/grouped?${wide()}&provider=${slug}${extra}${cursor ? `&next_cursor=${cursor}` : ''}`,
    );
    expect(res.status).toBe(200);
    for (const group of res.body.groups[slug] ?? []) out.push(...group.data);
    cursor = res.body.next_cursor;
  } while (cursor);
  return out;
}

async function profile(c: Connected, slug: Slug): Promise<any> {
  const res = await stack.client.get(`/v2/summary/profile/${c.userId}?provider=${slug}`);
  expect(res.status).toBe(200);
  return res.body;
}

/** An instant as local wall-clock time with its offset (`2026-05-24T19:18:00-04:00`): our own, not the modules'. */
function wall(ms: number, offsetSeconds: number): string {
  const abs = Math.abs(offsetSeconds);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${new Date(ms + offsetSeconds * 1000).toISOString().slice(0, 19)}${offsetSeconds < 0 ? '-' : '+'}${two(Math.floor(abs / 3600))}:${two(Math.floor((abs % 3600) / 60))}`;
}

const eventsOf = (userId: string) => stack.events().filter((e) => e.user_id === userId);

/** The history is announced by signed events (stack.events() verifies each signature): one per pull unit. */
async function expectHistoricalEvents(c: Connected, slug: Slug): Promise<void> {
  const units = PULL_UNITS[slug];
  const events = await eventually(
    async () => {
      const got = eventsOf(c.userId).filter((e) => e.event_type.startsWith('historical.data.'));
      return got.length >= units.length ? got : null;
    },
    60_000,
    `${slug} historical events`,
  );
  expect(events.map((e) => e.event_type).sort()).toEqual(units.map((r) => `historical.data.${r}.created`).sort());
  for (const e of events) expect(e.data).toMatchObject({ user_id: c.userId, provider: slug, is_final: true });
  expect(eventsOf(c.userId).filter((e) => e.event_type === 'provider.connection.created')).toHaveLength(1);
}

/** Every resource stored for the user (summaries, samples, workout streams) is one the catalogue says the provider has. */
async function expectCatalogueCovers(c: Connected, slug: Slug): Promise<string[]> {
  const db = stack.app.inspect;
  const stored = new Set<string>([
    ...((await db.collection('summaries').distinct('resource', { user_id: c.userId })) as string[]),
    ...((await db.collection('sample_buckets').distinct('resource', { user_id: c.userId })) as string[]),
  ]);
  if (await db.collection('workout_streams').countDocuments({ user_id: c.userId })) stored.add('workout_stream');
  const catalogue = (await stack.client.get('/v2/providers/')).body.find((p: { slug: string }) => p.slug === slug);
  expect(catalogue.integration).toBe('real');
  const missing = [...stored].filter((r) => !catalogue.supported_resources.includes(r));
  expect({ slug, missing }).toEqual({ slug, missing: [] });
  return [...stored].sort();
}

/** The `provider-push:` workflows started for one connection (one per notification and pull unit). */
async function pushWorkflows(slug: Slug, c: Connected): Promise<{ workflowId: string; status: string }[]> {
  const out: { workflowId: string; status: string }[] = [];
  for await (const wf of stack.app.deps.temporal.client.workflow.list({ query: `WorkflowId STARTS_WITH 'provider-push:${slug}:${c.connectionId}:'` })) {
    out.push({ workflowId: wf.workflowId, status: wf.status.name });
  }
  return out;
}

/** Waits until exactly `n` push workflows of the connection exist and all completed (visibility lags a little). */
async function pushesCompleted(slug: Slug, c: Connected, n: number): Promise<void> {
  await eventually(
    async () => {
      const wfs = await pushWorkflows(slug, c);
      return wfs.length >= n && wfs.every((w) => w.status === 'COMPLETED') ? wfs : null;
    },
    180_000,
    `${n} ${slug} push workflows completed`,
  );
  await sleep(1000);
  expect(await pushWorkflows(slug, c)).toHaveLength(n);
}

/**
 * The hints of an unsigned provider's pushes (Withings, Strava) acted on for the connection, once none waits (its
 * hints workflow coalesces them: test/provider-pushes.test.ts): `n` exactly, after a settle.
 */
async function hintsHandled(c: Connected, n: number): Promise<void> {
  const state = async () => {
    try {
      return await stack.app.deps.temporal.client.workflow.getHandle(workflowIds.providerHints(c.connectionId)).query(pushHintsStateQuery);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return { pending: 0, handled: 0 };
      throw err;
    }
  };
  await eventually(
    async () => {
      const s = await state();
      return s.handled >= n && s.pending === 0 ? s : null;
    },
    180_000,
    `${n} pushed hints handled`,
  );
  await sleep(1000);
  expect(await state()).toEqual({ pending: 0, handled: n });
}

/** The daily.data events of one resource for the user that `about` picks, once at least one arrived, after a settle. */
async function dataEvents(c: Connected, resource: string, about: (data: any) => boolean): Promise<{ event_type: string; data: any }[]> {
  const pick = () => eventsOf(c.userId).filter((e) => e.event_type.startsWith(`daily.data.${resource}.`) && about(e.data));
  await eventually(async () => pick().length > 0, 60_000, `daily.data.${resource} event`);
  await sleep(2000);
  return pick();
}

/** Deleting the connection ends it: the provider revokes our access, and our tokens are forgotten. */
async function deleteConnection(c: Connected, slug: Slug): Promise<void> {
  expect(await stack.app.inspect.collection('provider_tokens').countDocuments({ _id: c.connectionId } as object)).toBe(1);
  const res = await stack.client.del(`/v2/user/${c.userId}/${slug}`);
  expect(res.status).toBe(200);
  const live = (await stack.client.get(`/v2/user/providers/${c.userId}`)).body.providers;
  expect(live.map((p: { slug: string }) => p.slug)).not.toContain(slug);
}

async function tokensGone(c: Connected): Promise<void> {
  await eventually(
    async () => (await stack.app.inspect.collection('provider_tokens').countDocuments({ _id: c.connectionId } as object)) === 0,
    60_000,
    'provider_tokens deleted',
  );
}

/** A deauthorization push ends the connection with `provider.connection.error` (`deregistered_per_provider`). */
async function expectDeregisteredByProvider(c: Connected, slug: Slug): Promise<void> {
  const deregistered = () =>
    eventsOf(c.userId).filter((e) => e.event_type === 'provider.connection.error' && e.data.error_type === 'deregistered_per_provider');
  const error = await eventually(async () => deregistered()[0], 180_000, `${slug} connection error event`); // a check at the provider first, on its paced queue
  expect(error.data).toMatchObject({ user_id: c.userId, error_type: 'deregistered_per_provider' });
  expect(error.data.provider.slug).toBe(slug);
  await eventually(
    async () => (await stack.app.inspect.collection('connections').findOne({ _id: c.connectionId } as object))?.status === 'deregistered',
    30_000,
    'connection deregistered',
  );
  expect((await stack.client.get(`/v2/user/providers/${c.userId}`)).body.providers).toEqual([]);
  expect(deregistered()).toHaveLength(1);
}

/** The stored push configuration of the deployment's app at a provider. */
const storedApp = (slug: Slug, clientId: string) => stack.app.deps.repos.providerAuth.getApp(slug, clientId);

// ---- Oura -----------------------------------------------------------------------------------------------------------

describe('Oura', () => {
  let c: Connected;

  test('connects and pulls its history (its counts: test/providers-stack.test.ts)', async () => {
    c = await connecting.oura;
    expect(Object.values(await historyDone(c, 'oura')).every((s) => s === 'success')).toBe(true);
    await expectHistoricalEvents(c, 'oura');
    await expectCatalogueCovers(c, 'oura');
  }, 600_000);

  test('the subscriptions the deployment made at Oura passed its verification GET with our verify token', async () => {
    // The `provider-subscriptions` schedule (worker boot) subscribes every data type through Oura's API; Oura checks
    // the callback with `verification_token` + `challenge`, which our handshake answers only for the stored token.
    const subs = await eventually(async () => (oura.subscriptions.size >= 10 ? [...oura.subscriptions.values()] : null), 60_000, 'Oura subscriptions');
    expect(subs.every((s) => s.callback_url === pushUrl('oura'))).toBe(true);
    const token = (await storedApp('oura', oura.options.clientId))?.verify_token;
    expect(token).toEqual(expect.any(String));
    expect((await oura.verify(pushUrl('oura'), token!)).ok).toBe(true);
    expect((await oura.verify(pushUrl('oura'), 'not-our-token')).ok).toBe(false);
  }, 90_000);

  test('a workout update pushed twice is fetched once and announced once', async () => {
    const workout = oura.servedDocuments(c.fakeUser.id, 'workout').at(-1) as Record<string, unknown> & { id: string; day: string };
    const calories = Math.round(Number(workout.calories)) + 111;
    oura.put(c.fakeUser.id, 'workout', { ...workout, calories });
    const eventTime = `${new Date().toISOString().slice(0, 19)}+00:00`;
    for (let i = 0; i < 2; i++) {
      const res = await oura.sendPush(pushUrl('oura'), { dataType: 'workout', eventType: 'update', objectId: workout.id, userId: c.fakeUser.id, eventTime });
      expect(res.status).toBe(200);
    }
    await pushesCompleted('oura', c, 1);
    expect(oura.requestsTo(`/v2/usercollection/workout/${workout.id}`)).toHaveLength(1);
    const stored = (await summaries(c, 'workouts', 'oura')).filter((w) => w.provider_id === workout.id);
    expect(stored).toHaveLength(1);
    expect(stored[0].calories).toBe(calories);
    const events = await dataEvents(c, 'workouts', (d) => d.provider_id === workout.id);
    expect(events.map((e) => e.event_type)).toEqual(['daily.data.workouts.updated']);
    expect(events[0].data.calories).toBe(calories);
  }, 240_000);

  test('a forged, stale or unsigned push is refused (401) and fetches nothing', async () => {
    const before = { requests: oura.requestsTo(/^\/v2\/usercollection\//).length, workflows: (await pushWorkflows('oura', c)).length };
    const workout = oura.servedDocuments(c.fakeUser.id, 'workout')[0] as { id: string };
    const event = { dataType: 'workout', eventType: 'update', objectId: workout.id, userId: c.fakeUser.id };
    expect((await oura.sendPush(pushUrl('oura'), event, { secret: 'not-the-client-secret' })).status).toBe(401);
    expect((await oura.sendPush(pushUrl('oura'), event, { timestampSeconds: Math.floor(Date.now() / 1000) - 600 })).status).toBe(401);
    expect((await oura.sendPush(pushUrl('oura'), event, { signature: null })).status).toBe(401);
    await sleep(2000);
    expect(oura.requestsTo(/^\/v2\/usercollection\//)).toHaveLength(before.requests);
    expect(await pushWorkflows('oura', c)).toHaveLength(before.workflows);
  }, 60_000);

  test('deleting the connection revokes our access at Oura and forgets the tokens', async () => {
    await deleteConnection(c, 'oura');
    await eventually(async () => oura.revocations.some((r) => r.userId === c.fakeUser.id), 60_000, 'Oura revocation');
    await tokensGone(c);
    expect(oura.tokenState(c.fakeUser.id).access.every((t) => !t.active)).toBe(true);
  }, 120_000);
});

// ---- WHOOP ----------------------------------------------------------------------------------------------------------

describe('WHOOP', () => {
  let c: Connected;
  const off = ZONES.whoop_v2.offset;

  test('a 90-day history lands exactly what the fake served: sleeps joined with recovery (HRV as RMSSD), cycles, workouts, body', async () => {
    c = await connecting.whoop_v2;
    expect(await historyDone(c, 'whoop_v2')).toEqual({ sleep: 'success', activity: 'success', workouts: 'success', body: 'success' });
    const u = c.fakeUser.id;
    const all = { from: new Date(Date.now() - 200 * DAY_MS), to: new Date() };
    const sleepsById = new Map(whoop.records(u, 'sleep', all.from, all.to).map((s) => [s.id, s]));
    const servedSleeps = [...new Set(whoop.servedIds(u, 'sleep'))].map((id) => sleepsById.get(id)!);
    // Unscored sleeps have no stage times: no summary (mapping.ts); every scored one lands once.
    const scored = servedSleeps.filter((s) => s.score_state === 'SCORED' && s.score?.stage_summary);
    expect(scored.length).toBeGreaterThan(80);
    const servedRecoveries = new Set(whoop.servedIds(u, 'recovery'));
    const recovered = scored.filter((s) => servedRecoveries.has(s.id) && whoop.recoveryOfSleep(u, s.id)?.score_state === 'SCORED');
    expect(recovered.length).toBeGreaterThan(80);

    const sleeps = await summaries(c, 'sleep', 'whoop_v2');
    expect(sleeps).toHaveLength(scored.length);
    const activity = await summaries(c, 'activity', 'whoop_v2');
    expect(activity).toHaveLength(new Set(whoop.servedIds(u, 'cycle')).size);
    expect(activity.length).toBeGreaterThanOrEqual(90);
    const workouts = await summaries(c, 'workouts', 'whoop_v2');
    const servedWorkouts = new Set(whoop.servedIds(u, 'workout'));
    expect(workouts).toHaveLength(servedWorkouts.size);
    expect(new Set(workouts.map((w) => w.provider_id))).toEqual(servedWorkouts);
    const body = await summaries(c, 'body', 'whoop_v2');
    expect(body).toHaveLength(1);
    expect(whoop.servedCount(u).body_measurement).toBe(1);

    const hrv = await series(c, 'hrv', 'whoop_v2');
    expect(hrv).toHaveLength(recovered.length);
    expect(hrv.every((s) => s.unit === 'rmssd' && s.timezone_offset === off)).toBe(true);
    const spo2 = await series(c, 'blood_oxygen', 'whoop_v2');
    expect(spo2).toHaveLength(recovered.length);
    expect(spo2.every((s) => s.unit === '%')).toBe(true);
    const breathing = await series(c, 'respiratory_rate', 'whoop_v2');
    expect(breathing).toHaveLength(scored.filter((s) => typeof s.score?.respiratory_rate === 'number').length);
    expect(await grouped(c, 'body_temperature', 'whoop_v2')).toHaveLength(recovered.length);

    // Values: local times with WHOOP's offset applied once, HRV = the recovery's RMSSD, kcal from kJ.
    const bySleepStart = new Map(sleeps.map((s) => [s.bedtime_start, s]));
    for (const raw of recovered.slice(0, 5)) {
      const recovery = whoop.recoveryOfSleep(u, raw.id)!;
      const s = bySleepStart.get(wall(Date.parse(raw.start), off));
      expect(s).toBeDefined();
      expect(s.bedtime_stop).toBe(wall(Date.parse(raw.end!), off));
      expect(s.timezone_offset).toBe(off);
      expect(s.average_hrv).toBe(recovery.score!.hrv_rmssd_milli);
      expect(hrv.find((x) => Date.parse(x.timestamp) === Date.parse(raw.end!))?.value).toBe(recovery.score!.hrv_rmssd_milli);
    }
    const rawWorkouts = whoop.records(u, 'workout', all.from, all.to).filter((w) => w.score);
    for (const raw of rawWorkouts.slice(0, 5)) {
      const w = workouts.find((x) => x.provider_id === raw.id);
      expect(w.time_start).toBe(wall(Date.parse(raw.start), off));
      expect(w.calories).toBe(Math.round((raw.score!.kilojoule / 4.184) * 10) / 10);
    }
    const measurement = whoop.bodyMeasurement(u);
    expect(body[0].weight).toBe(measurement.weight_kilogram);
    expect((await profile(c, 'whoop_v2')).height).toBe(Math.round(measurement.height_meter * 100));

    await expectHistoricalEvents(c, 'whoop_v2');
    await expectCatalogueCovers(c, 'whoop_v2');
  }, 600_000);

  test('a workout.updated push delivered twice (same trace_id) fetches the workout once and announces it once', async () => {
    const u = c.fakeUser.id;
    const raw = whoop.records(u, 'workout', new Date(Date.now() - 30 * DAY_MS), new Date()).find((w) => w.score) as WhoopWorkout;
    const kilojoule = raw.score!.kilojoule + 500;
    whoop.putRecord(u, 'workout', { ...raw, updated_at: new Date().toISOString(), score: { ...raw.score!, kilojoule } });
    for (let i = 0; i < 2; i++) {
      const res = await whoop.sendPush(pushUrl('whoop_v2'), { type: 'workout.updated', id: raw.id, userId: u, traceId: 'trace-workout-updated-1' });
      expect(res.status).toBe(200);
    }
    await pushesCompleted('whoop_v2', c, 1);
    expect(whoop.requestsTo(`/developer/v2/activity/workout/${raw.id}`)).toHaveLength(1);
    const kcal = Math.round((kilojoule / 4.184) * 10) / 10;
    expect((await summaries(c, 'workouts', 'whoop_v2')).find((w) => w.provider_id === raw.id).calories).toBe(kcal);
    const events = await dataEvents(c, 'workouts', (d) => d.provider_id === raw.id);
    expect(events.map((e) => e.event_type)).toEqual(['daily.data.workouts.updated']);
    expect(events[0].data.calories).toBe(kcal);
  }, 240_000);

  test('a push signed with another secret, or too old, is refused (401) and fetches nothing', async () => {
    const u = c.fakeUser.id;
    const sleepRecord = whoop.records(u, 'sleep', new Date(Date.now() - 10 * DAY_MS), new Date()).find((s) => !s.nap) as WhoopSleep;
    const before = { requests: whoop.apiRequests, workflows: (await pushWorkflows('whoop_v2', c)).length };
    expect((await whoop.sendPush(pushUrl('whoop_v2'), { type: 'sleep.updated', id: sleepRecord.id, userId: u, secret: 'not-the-client-secret' })).status).toBe(
      401,
    );
    expect(
      (await whoop.sendPush(pushUrl('whoop_v2'), { type: 'sleep.updated', id: sleepRecord.id, userId: u, timestampMs: Date.now() - 10 * 60_000 })).status,
    ).toBe(401);
    await sleep(2000);
    expect(whoop.apiRequests).toBe(before.requests);
    expect(await pushWorkflows('whoop_v2', c)).toHaveLength(before.workflows);
  }, 60_000);

  test('deleting the connection revokes our access at WHOOP (DELETE /v2/user/access) and forgets the tokens', async () => {
    await deleteConnection(c, 'whoop_v2');
    await eventually(async () => whoop.revokedThroughApi.includes(c.fakeUser.id), 60_000, 'WHOOP revocation');
    expect(whoop.requestsTo('/developer/v2/user/access', c.fakeUser.id).map((r) => [r.method, r.status])).toEqual([['DELETE', 204]]);
    await tokensGone(c);
  }, 120_000);
});

// ---- Polar ----------------------------------------------------------------------------------------------------------

describe('Polar', () => {
  let c: Connected;
  const off = ZONES.polar.offset;

  test('a 90-day history lands exactly what the fake served (activity, sleep, Nightly Recharge, exercises, heart rate, SpO2, body)', async () => {
    c = await connecting.polar;
    expect(Object.values(await historyDone(c, 'polar')).every((s) => s === 'success')).toBe(true);
    const u = c.fakeUser.id;
    const served = polar.servedCount(u);
    const activity = await summaries(c, 'activity', 'polar');
    expect(activity).toHaveLength(served.activity);
    expect(activity.length).toBeGreaterThanOrEqual(85);
    const sleeps = await summaries(c, 'sleep', 'polar');
    expect(sleeps).toHaveLength(served.sleep);
    expect(sleeps.length).toBeGreaterThanOrEqual(25);
    const workouts = await summaries(c, 'workouts', 'polar');
    expect(workouts).toHaveLength(served.exercises);
    expect(workouts.length).toBeGreaterThan(3);
    expect(await summaries(c, 'body', 'polar')).toHaveLength(served.physical_info);
    const hrv = await series(c, 'hrv', 'polar');
    expect(hrv).toHaveLength(served.hrv_samples);
    expect(hrv.length).toBeGreaterThan(0);
    expect(hrv.every((s) => s.unit === 'rmssd' && s.timezone_offset === off)).toBe(true);
    expect(await series(c, 'respiratory_rate', 'polar')).toHaveLength(served.breathing_samples);
    const heartrate = await series(c, 'heartrate', 'polar');
    expect(heartrate).toHaveLength(served.heartrate);
    const spo2 = await series(c, 'blood_oxygen', 'polar');
    expect(spo2).toHaveLength(served.spo2_passed);
    expect(spo2.every((s) => s.unit === '%')).toBe(true);

    // Local times: Polar's own offsets applied once.
    const night = addDays(todayUtc(), -3);
    const raw = polar.sleepFor(u, night)!;
    expect(raw.sleep_start_time!.endsWith('+02:00')).toBe(true);
    expect(sleeps.find((s) => s.calendar_date === night).bedtime_start).toBe(raw.sleep_start_time);
    for (const w of workouts) {
      const exercise = polar.exercisesFor(u, w.calendar_date).find((e) => e.id === w.provider_id)!;
      expect(exercise.start_time_utc_offset).toBe(off / 60);
      expect(w.time_start).toBe(`${exercise.start_time}+02:00`);
      expect(Date.parse(w.time_start)).toBe(Date.parse(`${exercise.start_time}Z`) - off * 1000);
    }
    const day = addDays(todayUtc(), -5);
    const first = polar.heartRateFor(u, day)!.heart_rate_samples![0];
    const at = Date.parse(`${day}T${first.sample_time}Z`) - off * 1000;
    expect(heartrate.find((s) => Date.parse(s.timestamp) === at)).toMatchObject({ value: first.heart_rate, unit: 'bpm', timezone_offset: off });
    expect((await profile(c, 'polar')).height).toEqual(expect.any(Number));

    await expectHistoricalEvents(c, 'polar');
    await expectCatalogueCovers(c, 'polar');
  }, 600_000);

  test('an EXERCISE push delivered twice fetches the exercise once and announces it once', async () => {
    // The `provider-subscriptions` schedule created Polar's webhook through its API (worker boot) and stored the
    // signature secret Polar returned once; the fake signs with that same secret.
    await eventually(
      async () => polar.webhook?.url === pushUrl('polar') && (await storedApp('polar', polar.options.clientId))?.webhook_secret === polar.webhook.secret,
      60_000,
      'Polar webhook',
    );
    const u = c.fakeUser.id;
    const start = new Date(Date.now() + off * 1000 - 3 * 3600_000).toISOString().slice(0, 19);
    const id = 'PUSHED1';
    polar.addExercise(u, {
      id,
      upload_time: new Date(Date.now() - 60_000).toISOString(),
      start_time: start,
      start_time_utc_offset: off / 60,
      duration: 'PT45M',
      sport: 'RUNNING',
      calories: 456,
      distance: 7000,
      heart_rate: { average: 141, maximum: 170 },
    });
    const timestamp = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    for (let i = 0; i < 2; i++)
      expect((await polar.sendPush(pushUrl('polar'), { event: 'EXERCISE', userId: u, entityId: id }, { timestamp })).status).toBe(200);
    await pushesCompleted('polar', c, 1);
    expect(polar.requestsTo(`/v3/exercises/${id}`, u)).toHaveLength(1);
    const stored = (await summaries(c, 'workouts', 'polar')).filter((w) => w.provider_id === id);
    expect(stored).toHaveLength(1);
    expect(stored[0]).toMatchObject({ calories: 456, distance: 7000, time_start: `${start}+02:00` });
    const events = await dataEvents(c, 'workouts', (d) => d.provider_id === id);
    expect(events.map((e) => e.event_type)).toEqual(['daily.data.workouts.created']);
  }, 240_000);

  test('a push signed with another key, or stale, is refused (401) and fetches nothing', async () => {
    const u = c.fakeUser.id;
    const date = addDays(todayUtc(), -1);
    const before = { requests: polar.requestsTo(/^\/v3\/(users|exercises)/, u).length, workflows: (await pushWorkflows('polar', c)).length };
    expect((await polar.sendPush(pushUrl('polar'), { event: 'SLEEP', userId: u, date }, { secret: 'not-the-signature-key' })).status).toBe(401);
    const stale = new Date(Date.now() - 10 * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    expect((await polar.sendPush(pushUrl('polar'), { event: 'SLEEP', userId: u, date }, { timestamp: stale })).status).toBe(401);
    await sleep(2000);
    expect(polar.requestsTo(/^\/v3\/(users|exercises)/, u)).toHaveLength(before.requests);
    expect(await pushWorkflows('polar', c)).toHaveLength(before.workflows);
  }, 60_000);

  test('deleting the connection deregisters the user at Polar (which revokes the token) and forgets the tokens', async () => {
    const token = polar.tokensOf(c.fakeUser.id).active[0];
    await deleteConnection(c, 'polar');
    await eventually(
      async () => polar.requestsTo(`/v3/users/${c.fakeUser.id}`).some((r) => r.method === 'DELETE' && r.status === 204),
      60_000,
      'Polar deregistration',
    );
    expect(polar.tokensOf(c.fakeUser.id).revoked).toContain(token);
    await tokensGone(c);
  }, 120_000);
});

// ---- Strava ---------------------------------------------------------------------------------------------------------

describe('Strava', () => {
  let c: Connected;
  const off = ZONES.strava.offset;

  test('the history lands exactly what the fake served: activities, their streams and heart rate, the athlete', async () => {
    c = await connecting.strava;
    expect(await historyDone(c, 'strava')).toEqual({ profile: 'success', workouts: 'success', workout_stream: 'success' });
    const u = c.fakeUser.id;
    const served = strava.servedCount(u);
    expect(served.activities).toBeGreaterThan(0);
    const workouts = await summaries(c, 'workouts', 'strava');
    expect(workouts).toHaveLength(served.activities);
    expect(new Set(workouts.map((w) => w.provider_id))).toEqual(new Set(strava.listedIds(u).map(String)));
    for (const w of workouts) {
      const raw = strava.activity(u, Number(w.provider_id))!.detail as { start_date: string; start_date_local: string; distance: number };
      expect(w.time_start).toBe(`${raw.start_date_local.replace(/Z$/, '')}+01:00`);
      expect(Date.parse(w.time_start)).toBe(Date.parse(raw.start_date));
      expect(w.distance).toBe(raw.distance);
      expect(w.timezone_offset).toBe(off);
    }
    const heartrate = await series(c, 'heartrate', 'strava');
    expect(heartrate).toHaveLength(served.heartrate_samples);
    expect(heartrate.every((s) => s.unit === 'bpm')).toBe(true);
    let streams = 0;
    for (const w of workouts) {
      const res = await stack.client.get(`/v2/timeseries/workouts/${w.id}/stream`);
      if (res.status === 200) streams++;
      else expect(res.status).toBe(404);
    }
    expect(streams).toBe(served.streams);
    expect((await profile(c, 'strava')).sex).toEqual(expect.any(String));
    expect(await summaries(c, 'body', 'strava')).toHaveLength(1);

    await expectHistoricalEvents(c, 'strava');
    await expectCatalogueCovers(c, 'strava');
  }, 600_000);

  test('an activity create pushed twice is fetched once (and its streams once), an update once more; one event each', async () => {
    // The `provider-subscriptions` schedule made Strava's push subscription through its API (answering its
    // hub.challenge) and stored its id, which is what every event must name.
    await eventually(
      async () =>
        strava.subscription?.callbackUrl === pushUrl('strava') &&
        (await storedApp('strava', strava.options.clientId))?.webhook_secret === String(strava.subscription.id),
      60_000,
      'Strava subscription',
    );
    const u = c.fakeUser.id;
    const detail = strava.addActivity(u, { start: new Date(Date.now() - 3 * 3600_000), sportType: 'Run', durationMinutes: 40, heartrate: true });
    const id = Number(detail.id);
    const created = strava.event({ object_type: 'activity', object_id: id, aspect_type: 'create', owner_id: Number(u) });
    for (let i = 0; i < 2; i++) expect((await strava.sendPush(pushUrl('strava'), created)).status).toBe(200);
    // A create names two pull units: the workout, and its streams (which need the activity's start first).
    await hintsHandled(c, 2);
    expect(strava.requestsTo(`/api/v3/activities/${id}`)).toHaveLength(2);
    expect(strava.requestsTo(`/api/v3/activities/${id}/streams`)).toHaveLength(1);
    const createdEvents = await dataEvents(c, 'workouts', (d) => d.provider_id === String(id));
    expect(createdEvents.map((e) => e.event_type)).toEqual(['daily.data.workouts.created']);
    const stored = (await summaries(c, 'workouts', 'strava')).find((w) => w.provider_id === String(id));
    expect((await stack.client.get(`/v2/timeseries/workouts/${stored.id}/stream`)).status).toBe(200);

    strava.activity(u, id)!.detail.name = 'Renamed after the run';
    const updated = strava.event({
      object_type: 'activity',
      object_id: id,
      aspect_type: 'update',
      owner_id: Number(u),
      updates: { title: 'Renamed after the run' },
    });
    for (let i = 0; i < 2; i++) expect((await strava.sendPush(pushUrl('strava'), updated)).status).toBe(200);
    await hintsHandled(c, 3);
    expect(strava.requestsTo(`/api/v3/activities/${id}`)).toHaveLength(3);
    const events = await dataEvents(c, 'workouts', (d) => d.provider_id === String(id) && d.title === 'Renamed after the run');
    expect(events.map((e) => e.event_type)).toEqual(['daily.data.workouts.updated']);
    expect(eventsOf(c.userId).filter((e) => e.event_type.startsWith('daily.data.workouts.') && e.data.provider_id === String(id))).toHaveLength(2);
  }, 300_000);

  test('an event naming another subscription, or an hour old, is answered 200 like any other (no oracle for the subscription id) and fetches nothing', async () => {
    const u = c.fakeUser.id;
    const id = strava.listedIds(u)[0];
    const before = strava.requestsTo(/^\/api\/v3\/(activities|athlete)/).length;
    const forged = strava.event({ object_type: 'activity', object_id: id, aspect_type: 'update', owner_id: Number(u), subscription_id: 999_999 });
    const right = (await storedApp('strava', strava.options.clientId))!.webhook_secret;
    expect(String(forged.subscription_id)).not.toBe(right);
    expect((await strava.sendPush(pushUrl('strava'), forged)).status).toBe(200);
    const old = strava.event({
      object_type: 'activity',
      object_id: id,
      aspect_type: 'update',
      owner_id: Number(u),
      event_time: Math.floor(Date.now() / 1000) - 2 * 3600,
    });
    expect((await strava.sendPush(pushUrl('strava'), old)).status).toBe(200);
    await sleep(2000);
    expect(strava.requestsTo(/^\/api\/v3\/(activities|athlete)/)).toHaveLength(before);
    await hintsHandled(c, 3);
    // The subscription id is kept sealed only: no plaintext copy beside it.
    const raw = await stack.app.inspect.collection('provider_apps').findOne({ _id: `strava:${strava.options.clientId}` } as object);
    expect(JSON.stringify(raw)).not.toContain(String(strava.subscription!.id));
  }, 60_000);

  test('deleting the connection revokes the token at Strava (POST /oauth/revoke) and forgets the tokens', async () => {
    await deleteConnection(c, 'strava');
    await eventually(async () => strava.requestsTo('/oauth/revoke').some((r) => r.status === 200), 60_000, 'Strava revocation');
    expect(strava.tokenState(c.fakeUser.id).access.every((t) => !t.valid)).toBe(true);
    expect(strava.tokenState(c.fakeUser.id).refresh.every((t) => !t.valid)).toBe(true);
    await tokensGone(c);
  }, 120_000);

  test('a forged athlete deauthorization changes nothing; the athlete removing the app at Strava ends the connection as deregistered_per_provider', async () => {
    // A second athlete without activities: its history is three requests.
    const fakeUser = strava.addUser({ zoneOffsetSeconds: off, dataStartMs: Date.now() });
    const second = await connect('strava', strava, fakeUser);
    const id = Number(fakeUser.id);
    const revocations = () => strava.requestsTo(/^\/oauth\/(revoke|deauthorize)$/).length;
    const before = revocations();
    // Forged: the event is well formed and names our subscription (its id is no secret), but the athlete granted on.
    const forged = strava.event({ object_type: 'athlete', object_id: id, aspect_type: 'update', owner_id: id, updates: { authorized: 'false' } });
    expect((await strava.sendPush(pushUrl('strava'), forged)).status).toBe(200);
    await hintsHandled(second, 1);
    expect(strava.requestsTo('/api/v3/athlete', fakeUser.id).at(-1)?.status).toBe(200); // the check, with the athlete's token
    expect(
      (await stack.client.get(`/v2/user/providers/${second.userId}`)).body.providers.map((p: { slug: string; status: string }) => [p.slug, p.status]),
    ).toEqual([['strava', 'connected']]);
    expect(revocations()).toBe(before);
    expect(eventsOf(second.userId).filter((e) => e.event_type === 'provider.connection.error')).toEqual([]);
    // The athlete really removes our app: Strava revokes the tokens and sends the same kind of event.
    expect(await strava.deauthorizeFromSettings(fakeUser.id)).toMatchObject({ status: 200 });
    await expectDeregisteredByProvider(second, 'strava');
    await tokensGone(second);
  }, 420_000);
});

// ---- Dexcom ---------------------------------------------------------------------------------------------------------

describe('Dexcom', () => {
  let c: Connected;
  const off = ZONES.dexcom_v3.offset;

  test('a 90-day history lands every served EGV and calibration as glucose in mg/dL (mmol/L on request), and the events', async () => {
    c = await connecting.dexcom_v3;
    expect(await historyDone(c, 'dexcom_v3')).toEqual({ glucose: 'success' });
    const u = c.fakeUser.id;
    const distinct = <T extends { recordId: string }>(rs: T[]) => [...new Map(rs.map((r) => [r.recordId, r])).values()];
    const egvs = distinct(dexcom.servedRecords(u, 'egvs'));
    const calibrations = distinct(dexcom.servedRecords(u, 'calibrations'));
    const events = distinct(dexcom.servedRecords(u, 'events')).filter((e) => e.eventStatus !== 'deleted');
    expect(egvs.length).toBeGreaterThan(85 * 288);

    const glucose = await series(c, 'glucose', 'dexcom_v3');
    expect(glucose).toHaveLength(egvs.length + calibrations.length);
    expect(glucose.every((s) => s.unit === 'mg/dL' && s.timezone_offset === off)).toBe(true);
    // A receiver's systemTime has no offset: it is UTC (displayTime is local), placed once.
    const byTime = new Map(glucose.map((s) => [Date.parse(s.timestamp), s]));
    for (const r of egvs.filter((x) => x.status === 'ok').slice(0, 50)) expect(byTime.get(Date.parse(`${r.systemTime}Z`))?.value).toBe(r.value);
    const low = egvs.find((x) => x.status === 'low');
    if (low) expect(byTime.get(Date.parse(`${low.systemTime}Z`))).toMatchObject({ type: 'low' });
    const mmol = await series(c, 'glucose', 'dexcom_v3', '&unit=mmol/L');
    expect(mmol).toHaveLength(glucose.length);
    expect(mmol.every((s) => s.unit === 'mmol/L')).toBe(true);
    for (let i = 0; i < glucose.length; i += 997) {
      expect(mmol[i].timestamp).toBe(glucose[i].timestamp);
      expect(mmol[i].value).toBe(Math.round((glucose[i].value / 18.0182) * 10) / 10);
    }
    // The grouped read converts the same way (mg/dL kept, or mmol/L on request), across its pages.
    const groupedMmol = await grouped(c, 'glucose', 'dexcom_v3', '&unit=mmol/L');
    expect(groupedMmol).toHaveLength(glucose.length);
    expect(groupedMmol.every((s) => s.unit === 'mmol/L' && s.value < 30)).toBe(true);
    expect(await grouped(c, 'carbohydrates', 'dexcom_v3')).toHaveLength(events.filter((e) => e.eventType === 'carbs').length);
    const insulin = await grouped(c, 'insulin_injection', 'dexcom_v3');
    expect(insulin).toHaveLength(events.filter((e) => e.eventType === 'insulin').length);
    expect(insulin.every((s) => s.unit === 'IU' && ['fast_acting', 'long_acting'].includes(s.type))).toBe(true);

    await expectHistoricalEvents(c, 'dexcom_v3');
    expect(await expectCatalogueCovers(c, 'dexcom_v3')).toEqual(['carbohydrates', 'glucose', 'insulin_injection']);
  }, 600_000);

  test('deleting the connection forgets the tokens (Dexcom has no revocation API: nothing is sent)', async () => {
    const before = dexcom.requests.length;
    await deleteConnection(c, 'dexcom_v3');
    await tokensGone(c);
    expect(dexcom.requests.slice(before).map((r) => r.path)).toEqual([]);
  }, 120_000);
});

// ---- Withings -------------------------------------------------------------------------------------------------------

describe('Withings', () => {
  let c: Connected;
  const off = ZONES.withings.offset;

  test('a 90-day history lands exactly what the fake served: activity, workouts, sleep and its series, intraday, measures', async () => {
    c = await connecting.withings;
    expect(Object.values(await historyDone(c, 'withings')).every((s) => s === 'success')).toBe(true);
    const u = c.fakeUser.id;
    const served = withings.servedCount(u);
    const n = (k: string) => served[k] ?? 0;
    const activity = await summaries(c, 'activity', 'withings');
    expect(activity).toHaveLength(n('activities'));
    expect(activity.length).toBeGreaterThanOrEqual(90);
    const workouts = await summaries(c, 'workouts', 'withings');
    expect(workouts).toHaveLength(n('workouts'));
    const sleeps = await summaries(c, 'sleep', 'withings');
    expect(sleeps).toHaveLength(n('sleep_summaries'));
    expect(sleeps.length).toBeGreaterThanOrEqual(85);
    expect(await summaries(c, 'body', 'withings')).toHaveLength(n('meastype_1'));

    const heartrate = await series(c, 'heartrate', 'withings');
    expect(heartrate).toHaveLength(n('intraday_heart_rate') + n('sleep_hr') + n('meastype_11'));
    const hrv = await series(c, 'hrv', 'withings');
    expect(hrv).toHaveLength(n('sleep_rmssd'));
    expect(hrv.length).toBeGreaterThan(0);
    expect(hrv.every((s) => s.unit === 'rmssd' && s.timezone_offset === off)).toBe(true);
    expect(n('sleep_sdnn_1')).toBe(0);
    expect(await series(c, 'respiratory_rate', 'withings')).toHaveLength(n('sleep_rr'));
    expect(await series(c, 'hypnogram', 'withings')).toHaveLength(n('sleep_segments'));
    expect(await series(c, 'steps', 'withings')).toHaveLength(n('intraday_steps'));
    expect(await series(c, 'distance', 'withings')).toHaveLength(n('intraday_distance'));
    expect(await series(c, 'calories_active', 'withings')).toHaveLength(n('intraday_calories'));
    expect(await series(c, 'floors_climbed', 'withings')).toHaveLength(n('intraday_elevation'));
    expect(await series(c, 'blood_oxygen', 'withings')).toHaveLength(n('intraday_spo2_auto') + n('meastype_54'));
    const weight = await series(c, 'body_weight', 'withings');
    expect(weight).toHaveLength(n('meastype_1'));
    expect(weight.every((s) => s.unit === 'kg' && s.value > 30 && s.value < 150)).toBe(true);
    expect(await series(c, 'body_fat', 'withings')).toHaveLength(n('meastype_6'));
    expect(await series(c, 'blood_pressure', 'withings')).toHaveLength(n('meastype_10'));

    // Local times with the record's zone applied once.
    const today = todayUtc();
    const rawWorkouts = withings.workoutsFor(u, addDays(today, -89), addDays(today, -1));
    for (const raw of rawWorkouts.slice(0, 5)) {
      const w = workouts.find((x) => x.provider_id === String(raw.id));
      expect(w.time_start).toBe(wall(raw.startdate * 1000, off));
      expect(w.timezone_offset).toBe(off);
    }
    const night = withings.sleepSummariesFor(u, addDays(today, -10), addDays(today, -10))[0];
    const s = sleeps.find((x) => x.calendar_date === night.date);
    expect(s.bedtime_start).toBe(wall(night.startdate * 1000, off));
    expect(s.total).toBe(night.data.total_sleep_time);
    const day = withings.activitiesFor(u, addDays(today, -7), addDays(today, -7))[0];
    expect(activity.find((a) => a.calendar_date === day.date)).toMatchObject({ steps: day.steps, timezone_offset: off });
    const heightCm = withings.measureGroupsFor(u, 0, Math.floor(Date.now() / 1000)).find((g) => g.measures[0]?.type === 4)!.measures[0].value;
    expect((await profile(c, 'withings')).height).toBe(heightCm);

    await expectHistoricalEvents(c, 'withings');
    await expectCatalogueCovers(c, 'withings');
  }, 600_000);

  test('an activity notification delivered twice fetches its days once and announces the changed day once', async () => {
    const u = c.fakeUser.id;
    const today = todayUtc();
    const changedDay = addDays(today, -10);
    // Withings data as the fake holds it, with one day's steps revised (as after a late sync of the tracker).
    const activities = withings
      .activitiesFor(u, addDays(today, -120), addDays(today, -1))
      .map((a) => (a.date === changedDay ? { ...a, steps: a.steps + 1234 } : a));
    const steps = activities.find((a) => a.date === changedDay)!.steps;
    withings.setData(u, { activities });
    const noon = Math.floor(Date.parse(`${changedDay}T12:00:00Z`) / 1000) - off;
    const isActivityCall = (body: string) => new URLSearchParams(body).get('action') === 'getactivity';
    const before = withings.requestsTo('/v2/measure', u).filter((r) => isActivityCall(r.body)).length;
    for (let i = 0; i < 2; i++)
      expect((await withings.sendPush(pushUrl('withings'), { userid: u, appli: 16, startdate: noon - 3600, enddate: noon })).status).toBe(200);
    // appli 16 names activity, workouts and intraday (heartrate) over the notified days, widened by a day each side.
    await hintsHandled(c, 3);
    const calls = withings
      .requestsTo('/v2/measure', u)
      .filter((r) => isActivityCall(r.body))
      .slice(before);
    expect(calls).toHaveLength(1);
    expect(new URLSearchParams(calls[0].body).get('startdateymd')).toBe(addDays(changedDay, -1));
    expect(new URLSearchParams(calls[0].body).get('enddateymd')).toBe(addDays(changedDay, 1));
    expect((await summaries(c, 'activity', 'withings')).find((a) => a.calendar_date === changedDay).steps).toBe(steps);
    const events = await dataEvents(c, 'activity', () => true);
    expect(events.map((e) => [e.event_type, e.data.calendar_date, e.data.steps])).toEqual([['daily.data.activity.updated', changedDay, steps]]);
  }, 240_000);

  test('Withings signs nothing: a body that is no notification, or one for a user we do not know, is answered 200 and fetches nothing', async () => {
    const before = withings.requests.length;
    const json = await fetch(pushUrl('withings'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userid: c.fakeUser.id, appli: 16 }),
    });
    expect(json.status).toBe(200);
    expect((await withings.sendPush(pushUrl('withings'), { userid: 'not-a-number', appli: 16 })).status).toBe(200);
    expect(
      (
        await withings.sendPush(pushUrl('withings'), {
          userid: 12345,
          appli: 16,
          startdate: Math.floor(Date.now() / 1000) - 3600,
          enddate: Math.floor(Date.now() / 1000),
        })
      ).status,
    ).toBe(200);
    await sleep(2000);
    expect(withings.requests.length).toBe(before);
    await hintsHandled(c, 3);
  }, 60_000);

  test('deleting the connection revokes our access at Withings (signed OAuth2 - Revoke) and forgets the tokens', async () => {
    await deleteConnection(c, 'withings');
    await eventually(async () => withings.revocations.includes(c.fakeUser.id), 60_000, 'Withings revocation');
    expect(withings.subscriptionsOf(c.fakeUser.id)).toEqual([]);
    await tokensGone(c);
  }, 120_000);

  test('a forged unlink (appli 46, action=unlink) changes nothing; once the user unlinked our app at Withings, the same notification ends the connection as deregistered_per_provider', async () => {
    const fakeUser = withings.addUser({ zoneOffsetSeconds: off });
    const second = await connect('withings', withings, fakeUser);
    const unlink = { userid: fakeUser.id, appli: 46, action: 'unlink', date: todayUtc() };
    // Unsigned, from anyone, even without a content type: a hint, checked with the user's token (Notify - List).
    const forged = await fetch(pushUrl('withings'), {
      method: 'POST',
      body: Buffer.from(new URLSearchParams(Object.entries(unlink).map(([k, v]): [string, string] => [k, String(v)])).toString()),
    });
    expect(forged.status).toBe(200);
    await hintsHandled(second, 1);
    expect(
      (await stack.client.get(`/v2/user/providers/${second.userId}`)).body.providers.map((p: { slug: string; status: string }) => [p.slug, p.status]),
    ).toEqual([['withings', 'connected']]);
    expect(withings.revocations).not.toContain(fakeUser.id);
    expect(eventsOf(second.userId).filter((e) => e.event_type === 'provider.connection.error')).toEqual([]);
    expect(await stack.app.inspect.collection('provider_tokens').countDocuments({ _id: second.connectionId } as object)).toBe(1);
    // The user unlinks our app at Withings (the grant is revoked there); the same notification now ends the connection.
    withings.revokeUser(fakeUser.id);
    expect((await withings.sendPush(pushUrl('withings'), unlink)).status).toBe(200);
    await expectDeregisteredByProvider(second, 'withings');
    await tokensGone(second);
  }, 420_000);
});
