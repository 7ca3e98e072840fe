import { hashKey } from '../lib/platform/keys';
import { SummaryUploadResponse, UploadResponse } from '../schemas/phones';
import { PhoneSimulator } from './support/phone-simulator';
import { createTenant, eventually, expectSchema, startTestApp, teamClient, uniqueId, type HttpClient, type TestApp } from './support/harness';

/**
 * A phone's sync on the real stack, driven by test/support/phone-simulator.ts (an SDK as the references' behave): it
 * signs in, connects, backfills 90 days and syncs daily with the 3-day re-read of hourly buckets; a timed-out upload
 * sent again stores once; two uploads racing a token refresh both go through; the user's deletion ends the sign-in;
 * sleeps and workouts from either platform, as summaries or raw records, map to the same stages and sports.
 */
let app: TestApp;
let api: HttpClient;
let teamKey: string;
let teamId: string;

beforeAll(async () => {
  app = await startTestApp();
  const tenant = await createTenant(app.deps, 'Phone sync');
  teamKey = tenant.teamKey;
  teamId = tenant.teamId;
  api = teamClient(app, tenant);
});
afterAll(() => app.close());

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const newUser = async (): Promise<string> => (await api.post('/v2/user/', { client_user_id: uniqueId('phone') })).body.user_id;
const connectedPhone = async (options: Parameters<typeof PhoneSimulator.signIn>[3] = {}) => {
  const userId = await newUser();
  const phone = await PhoneSimulator.signIn(app.url, teamKey, userId, options);
  expect((await phone.connect()).status).toBe(200);
  return phone;
};
const iso = (ms: number) => new Date(ms).toISOString();
/** Midnight UTC today, from which the phone's days count back. */
const today = Math.floor(Date.now() / DAY) * DAY;
const stored = (userId: string, resource: string, from = today - 100 * DAY) =>
  app.deps.repos.wearableData.findSamples({ teamId, userId, resource, from: new Date(from), to: new Date(today + 2 * DAY), provider: 'apple_health_kit' });
const eventsOf = (userId: string, eventType: string) =>
  app.inspect
    .collection('webhook_events')
    .find({ user_id: userId, event_type: eventType } as object)
    .toArray();
/** Heart rate every 12 minutes over `days` days before today. */
const heartRates = (days: number) =>
  Array.from({ length: days * 120 }, (_, i) => {
    const t = today - days * DAY + i * 12 * 60_000;
    return { value: 55 + (i % 40), start_date: iso(t), end_date: iso(t), unit: 'bpm', type: 'watch' };
  });
/** Hourly step buckets (HealthKit's statistics), `multiple_sources`. */
const stepHours = (from: number, hours: number, value: (hour: number) => number) =>
  Array.from({ length: hours }, (_, h) => ({
    value: value(h),
    start_date: iso(from + h * HOUR),
    end_date: iso(from + (h + 1) * HOUR),
    unit: 'count',
    type: 'multiple_sources',
  }));

describe('a phone syncing', () => {
  test('signs in, connects, backfills 90 days, syncs daily re-reading three days of hours, and reports its progress', async () => {
    const phone = await connectedPhone();
    expect((await phone.connect()).status).toBe(409);
    const state = await phone.syncState();
    expect(state.body).toMatchObject({ status: 'active', pull_preferences: { historical_days_to_pull: 90 }, chunk_sizes: { foreground: 10_000 } });
    const window = { start: iso(today - 90 * DAY), end: iso(today) };

    // 10,800 heart-rate samples: a full chunk of 10,000 and the rest, the last one final.
    const heart = await phone.backfill('heartrate', window, heartRates(90));
    expect(heart.map((r) => [r.status, r.body.samples.created, r.body.historical_event])).toEqual([
      [200, 10_000, false],
      [200, 800, true],
    ]);
    expectSchema(UploadResponse, heart[0].body);
    const steps = await phone.backfill(
      'steps',
      window,
      stepHours(today - 90 * DAY, 90 * 24, (h) => 100 + (h % 24) * 10),
    );
    expect([steps[0].body.samples.created, steps[0].body.historical_event]).toEqual([2160, true]);
    expect(await stored(phone.userId, 'heartrate')).toHaveLength(10_800);
    expect((await eventsOf(phone.userId, 'historical.data.heartrate.created')).length).toBe(1);
    const pulled = (await api.get(`/v2/introspect/historical_pull?user_id=${phone.userId}`)).body.data[0].provider.apple_health_kit.pulled;
    expect([pulled.heartrate.status, pulled.steps.status]).toEqual(['success', 'success']);

    // The daily sync reads the last three days of hours again: one hour changed, one new, the rest as they were.
    const reread = stepHours(today - 3 * DAY, 3 * 24 + 1, (h) => (h === 70 ? 5_000 : 100 + (h % 24) * 10));
    const daily = await phone.uploadTimeseries('steps', { stage: 'daily', start_date: iso(today - 3 * DAY), data: reread });
    expect([daily.status, daily.body.samples]).toEqual([200, { created: 1, updated: 1, unchanged: 71 }]);
    const hour70 = (await stored(phone.userId, 'steps', today - 3 * DAY)).find((s) => s.timestamp.getTime() === today - 3 * DAY + 70 * HOUR);
    expect(hour70?.value).toBe(5_000);
    expect((await eventsOf(phone.userId, 'daily.data.steps.updated')).length).toBeGreaterThan(0);

    // The same daily chunk once more (the phone lost the answer): nothing new, success.
    const again = await phone.uploadTimeseries('steps', { stage: 'daily', start_date: iso(today - 3 * DAY), data: reread });
    expect([again.status, again.body.samples, again.body.events]).toEqual([200, { created: 0, updated: 0, unchanged: 73 }, 0]);

    // Its progress report, kept for the customer's backend.
    const report = {
      resources: { heartrate: { status: 'synced', last_synced_at: iso(Date.now()), sent: 10_800 } },
      device: { model: 'iPhone15,2', os: '18.1' },
    };
    expect((await phone.syncProgress(report)).status).toBe(200);
    const seen = await api.get(`/v2/user/${phone.userId}/sdk_sync_progress/apple_health_kit`);
    expect([seen.status, seen.body.report]).toEqual([200, report]);
  });

  test('a deletion removes its range and says so', async () => {
    const phone = await connectedPhone();
    const day = today - 2 * DAY;
    await phone.uploadTimeseries('steps', { stage: 'daily', start_date: iso(day), data: stepHours(day, 24, () => 300) });
    const deleted = await phone.uploadTimeseries('steps', {
      stage: 'daily',
      start_date: iso(day),
      data: [],
      deleted: [{ start_date: iso(day + 6 * HOUR), end_date: iso(day + 12 * HOUR), type: 'multiple_sources' }],
    });
    expect([deleted.status, deleted.body.deleted]).toEqual([200, 6]);
    expect(await stored(phone.userId, 'steps', day)).toHaveLength(18);
  });

  test('a problem in an upload or in raw records names its place in the body, and nothing of it is stored', async () => {
    const phone = await connectedPhone();
    const day = today - 3 * DAY;
    const samples = [0, 1, 2].map((k) => ({ value: 60 + k, start_date: iso(day + k * 60_000), end_date: iso(day + k * 60_000), unit: 'bpm', type: 'watch' }));
    const bad = await phone.uploadTimeseries('heartrate', {
      stage: 'daily',
      start_date: iso(day),
      data: [samples[0], { ...samples[1], unit: 'kg' }, samples[2]],
    });
    expect([bad.status, bad.body.detail.map((d: { loc: unknown }) => d.loc)]).toEqual([422, [['body', 'data', 1, 'unit']]]);
    const steps = (start: number, end: number) => ({
      type: 'HKQuantityTypeIdentifierStepCount',
      value: 10,
      unit: 'count',
      start_date: iso(start),
      end_date: iso(end),
    });
    const badRecords = await phone.records([steps(day, day + 60_000), steps(day + 120_000, day + 60_000)]);
    expect([badRecords.status, badRecords.body.detail.map((d: { loc: unknown }) => d.loc)]).toEqual([422, [['body', 'records', 1, 'end']]]);
    expect(await stored(phone.userId, 'heartrate', day)).toHaveLength(0);
    expect(await stored(phone.userId, 'steps', day)).toHaveLength(0);
  });

  test('samples keyed by their platform id: one the platform moved replaces its old place; a deletion names ids', async () => {
    const phone = await connectedPhone({ provider: 'health_connect' });
    const day = today - 2 * DAY;
    const beat = (id: string, t: number, value: number) => ({ id, value, start_date: iso(t), end_date: iso(t), unit: 'bpm', type: 'watch' });
    const first = await phone.uploadTimeseries('heartrate', {
      stage: 'daily',
      start_date: iso(day),
      data: [beat('hc-1', day + HOUR, 60), beat('hc-2', day + 2 * HOUR, 61), beat('hc-3', day + 3 * HOUR, 62)],
    });
    expect(first.body.samples).toEqual({ created: 3, updated: 0, unchanged: 0 });
    // The platform corrected hc-2's time (Health Connect records keep their id when updated): one sample, at its new time.
    const moved = await phone.uploadTimeseries('heartrate', { stage: 'daily', start_date: iso(day), data: [beat('hc-2', day + 2 * HOUR + 30 * 60_000, 61)] });
    expect(moved.body.samples.created).toBe(1);
    const hcStored = (from: number) =>
      app.deps.repos.wearableData.findSamples({
        teamId,
        userId: phone.userId,
        resource: 'heartrate',
        from: new Date(from),
        to: new Date(today + DAY),
        provider: 'health_connect',
      });
    expect((await hcStored(day)).map((s) => [s.platform_id, s.timestamp.getTime() - day])).toEqual([
      ['hc-1', HOUR],
      ['hc-2', 2 * HOUR + 30 * 60_000],
      ['hc-3', 3 * HOUR],
    ]);
    // Deleted on the phone by id: gone, and a daily.data update says which.
    const deleted = await phone.uploadTimeseries('heartrate', {
      stage: 'daily',
      start_date: iso(day),
      data: [],
      deleted: [{ ids: ['hc-1', 'hc-3', 'hc-unknown'] }],
    });
    expect([deleted.status, deleted.body.deleted]).toEqual([200, 2]);
    expect((await hcStored(day)).map((s) => s.platform_id)).toEqual(['hc-2']);
    const said = (await eventsOf(phone.userId, 'daily.data.heartrate.updated')).length;
    expect(said).toBeGreaterThan(0);
    // Raw records carry their ids too: a StepsRecord sent again with new times moves.
    const steps = (startTime: number, count: number) => ({
      type: 'StepsRecord',
      id: 'hc-steps-1',
      startTime: iso(startTime),
      endTime: iso(startTime + 10 * 60_000),
      count,
    });
    await phone.records([steps(day + 5 * HOUR, 400)]);
    await phone.records([steps(day + 6 * HOUR, 450)]);
    const stepSamples = await app.deps.repos.wearableData.findSamples({
      teamId,
      userId: phone.userId,
      resource: 'steps',
      from: new Date(day),
      to: new Date(today),
      provider: 'health_connect',
    });
    expect(stepSamples.map((s) => [s.platform_id, s.value, s.timestamp.getTime() - day])).toEqual([['hc-steps-1', 450, 6 * HOUR]]);
  });

  test('an upload that timed out on the phone and was sent again is stored once', async () => {
    const phone = await connectedPhone();
    const data = heartRates(84).slice(0, 10_000);
    // The first send gives up after 30 ms (the server may finish storing it anyway); the SDK sends it again.
    const reply = await phone.uploadTimeseries('heartrate', { stage: 'daily', start_date: data[0].start_date, data }, { firstTimeoutMs: 30 });
    expect([reply.status, reply.attempts]).toEqual([200, 2]);
    expect(reply.body.samples.created + reply.body.samples.unchanged + reply.body.samples.updated).toBe(10_000);
    // The first send may still be storing its share: both settle on the one set of samples.
    await eventually(async () => (await stored(phone.userId, 'heartrate')).length === 10_000, 30_000);
    const samples = await stored(phone.userId, 'heartrate');
    expect(new Set(samples.map((s) => s.timestamp.getTime())).size).toBe(10_000);
  });

  test('two uploads meeting an expired token refresh at once, and both go through; the sign-in lives on', async () => {
    const phone = await connectedPhone();
    await app.inspect
      .collection('sdk_tokens')
      .updateOne({ _id: hashKey(phone.currentAccessToken) } as object, { $set: { expires_at: new Date(Date.now() - 1000) } });
    const day = today - DAY;
    const [a, b] = await Promise.all([
      phone.uploadTimeseries('steps', { stage: 'daily', start_date: iso(day), data: stepHours(day, 12, () => 10) }),
      phone.uploadTimeseries('steps', { stage: 'daily', start_date: iso(day), data: stepHours(day + 12 * HOUR, 12, () => 20) }),
    ]);
    expect([a.status, b.status, phone.refreshes, phone.signedOut]).toEqual([200, 200, 2, false]);
    expect(await stored(phone.userId, 'steps', day)).toHaveLength(24);
    expect((await phone.syncState()).status).toBe(200);
  });

  test("the user's deletion ends the phone's sign-in at once", async () => {
    const phone = await connectedPhone();
    expect((await api.del(`/v2/user/${phone.userId}`)).status).toBe(200);
    // The deletion workflow's first step revokes the sign-in; until then the user, pending deletion, takes nothing (404).
    const refused = await eventually(async () => {
      const reply = await phone.uploadTimeseries('steps', { stage: 'daily', start_date: iso(today), data: stepHours(today - HOUR, 1, () => 1) });
      expect([401, 404]).toContain(reply.status);
      return reply.status === 401 && reply;
    }, 30_000);
    expect([refused.status, phone.signedOut]).toEqual([401, true]);
    expect(await stored(phone.userId, 'steps')).toHaveLength(0);
  });
});

describe('sleeps and workouts from either platform', () => {
  const night = today - DAY - 2 * HOUR; // 22:00 UTC the evening before yesterday
  const minutes = (m: number) => m * 60_000;
  // 30 light, 60 deep, 10 awake, 90 light, 40 rem: 3h50 asleep-or-awake in bed from 22:00.
  const plan: [string, number][] = [
    ['light', 30],
    ['deep', 60],
    ['awake', 10],
    ['light', 90],
    ['rem', 40],
  ];
  const healthKitValue: Record<string, number> = { light: 3, deep: 4, awake: 2, rem: 5 };
  const androidSdkId: Record<string, number> = { deep: 1, light: 2, rem: 3, awake: 4 };
  const healthConnectStage: Record<string, number> = { awake: 1, light: 4, deep: 5, rem: 6 };
  const stages = (ids: Record<string, number>, keys: [string, string, string] = ['start_date', 'end_date', 'stage']) => {
    let t = night;
    return plan.map(([stage, m]) => {
      const s = { [keys[0]]: iso(t), [keys[1]]: iso(t + minutes(m)), [keys[2]]: ids[stage] };
      t += minutes(m);
      return s;
    });
  };
  const end = night + minutes(230);
  const expectedSleep = { light: 120 * 60, deep: 60 * 60, rem: 40 * 60, awake: 10 * 60, total: 220 * 60, duration: 230 * 60, type: 'long_sleep' };
  const sleepOf = async (userId: string, provider: string) => {
    const found = await app.deps.repos.wearableData.findSummaries(teamId, userId, 'sleep', new Date(night - DAY), new Date(end + DAY), provider);
    expect(found).toHaveLength(1);
    const d = found[0].data as Record<string, unknown>;
    return { light: d.light, deep: d.deep, rem: d.rem, awake: d.awake, total: d.total, duration: d.duration, type: d.type };
  };
  const workoutOf = async (userId: string, provider: string) => {
    const found = await app.deps.repos.wearableData.findSummaries(teamId, userId, 'workouts', new Date(night - DAY), new Date(end + DAY), provider);
    expect(found).toHaveLength(1);
    return found[0].data as { sport: { slug: string }; calories: number | null; distance: number | null; moving_time: number };
  };

  test('summary uploads: an iPhone sends HealthKit stage values, an Android phone its SDK ids, and both come to the same night', async () => {
    const iphone = await connectedPhone();
    const sleep = await iphone.uploadSummaries('sleep', {
      stage: 'daily',
      start_date: iso(night),
      data: [{ id: 'hk-sleep-1', start_date: iso(night), end_date: iso(end), stages: stages(healthKitValue) }],
    });
    expect([sleep.status, sleep.body.summaries.created]).toEqual([200, 1]);
    expectSchema(SummaryUploadResponse, sleep.body);
    expect(await sleepOf(iphone.userId, 'apple_health_kit')).toEqual(expectedSleep);
    // Sent again: unchanged.
    const again = await iphone.uploadSummaries('sleep', {
      stage: 'daily',
      start_date: iso(night),
      data: [{ id: 'hk-sleep-1', start_date: iso(night), end_date: iso(end), stages: stages(healthKitValue) }],
    });
    expect(again.body.summaries).toEqual({ created: 0, updated: 0, unchanged: 1 });
    const run = await iphone.uploadSummaries('workouts', {
      stage: 'daily',
      start_date: iso(night),
      data: [{ id: 'hk-w-1', start_date: iso(night - 5 * HOUR), end_date: iso(night - 4 * HOUR), sport: 37, calories: 512.3, distance: 10_020 }],
    });
    expect(run.status).toBe(200);
    expect(await workoutOf(iphone.userId, 'apple_health_kit')).toMatchObject({
      sport: { slug: 'running' },
      calories: 512.3,
      distance: 10_020,
      moving_time: 3600,
    });

    const android = await connectedPhone({ provider: 'health_connect' });
    const androidSleep = await android.uploadSummaries('sleep', {
      stage: 'daily',
      start_date: iso(night),
      data: [{ id: 'hc-sleep-1', start_date: iso(night), end_date: iso(end), stages: stages(androidSdkId) }],
    });
    expect(androidSleep.status).toBe(200);
    expect(await sleepOf(android.userId, 'health_connect')).toEqual(expectedSleep);
    const bad = await android.uploadSummaries('sleep', {
      stage: 'daily',
      start_date: iso(night),
      data: [{ start_date: iso(night), end_date: iso(end), stages: [{ start_date: iso(night), end_date: iso(end), stage: 9 }] }],
    });
    expect([bad.status, bad.body.detail[0].loc]).toEqual([422, ['body', 'data', 0, 'stages']]);
  });

  test("raw records: HealthKit's sleep-analysis samples and HKWorkout, Health Connect's SleepSessionRecord and ExerciseSessionRecord", async () => {
    const iphone = await connectedPhone();
    const hk = await iphone.records([
      ...stages(healthKitValue).map((s, i) => ({
        type: 'HKCategoryTypeIdentifierSleepAnalysis',
        id: `hk-stage-${i}`,
        value: s.stage,
        start_date: s.start_date,
        end_date: s.end_date,
        product_type: 'Watch6,2',
      })),
      {
        type: 'HKWorkout',
        id: 'hk-workout-9',
        workout_activity_type: 'HKWorkoutActivityTypeTraditionalStrengthTraining',
        start_date: iso(night - 3 * HOUR),
        end_date: iso(night - 2 * HOUR),
        total_energy_burned: 300,
      },
    ]);
    expect([hk.status, hk.body.summaries]).toEqual([200, { created: 2, updated: 0, unchanged: 0 }]);
    expect(await sleepOf(iphone.userId, 'apple_health_kit')).toEqual(expectedSleep);
    expect((await workoutOf(iphone.userId, 'apple_health_kit')).sport.slug).toBe('strength_training');

    const android = await connectedPhone({ provider: 'health_connect' });
    const hc = await android.records([
      {
        type: 'SleepSessionRecord',
        id: 'hc-session-1',
        startTime: iso(night),
        endTime: iso(end),
        stages: stages(healthConnectStage, ['startTime', 'endTime', 'stage']),
      },
      { type: 'ExerciseSessionRecord', id: 'hc-exercise-1', startTime: iso(night - 3 * HOUR), endTime: iso(night - 2 * HOUR), exerciseType: 56 },
    ]);
    expect([hc.status, hc.body.summaries]).toEqual([200, { created: 2, updated: 0, unchanged: 0 }]);
    expect(await sleepOf(android.userId, 'health_connect')).toEqual(expectedSleep);
    expect((await workoutOf(android.userId, 'health_connect')).sport.slug).toBe('running');
  });
});
