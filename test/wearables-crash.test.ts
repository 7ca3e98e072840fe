import type { ChildProcess } from 'node:child_process';
import { addDays, todayUtc } from '../lib/platform/time';
import { generateDemoData } from '../lib/wearables/demo-data';
import { createTenant, eventually, managementClient, startTestApp, teamClient, uniqueId, type TestApp } from './support/harness';
import { startReceiver, type Receiver } from './support/receiver';
import { privateDeployment, startWorker, stopWorker } from './support/worker';

/**
 * Crash test: a worker of this file's own is SIGKILLed while a demo connection's history is being pulled, then
 * started again. The pull finishes, every resource's completion is announced once, and the stored data is
 * exactly what the provider holds (one document per sample key: nothing lost, nothing twice).
 */
const deployment = privateDeployment('wearables-crash');
let worker: ChildProcess | null = null;
let app: TestApp;
let rx: Receiver;

beforeAll(async () => {
  app = await startTestApp(deployment);
});
afterAll(async () => {
  if (worker) await stopWorker(worker, 'SIGKILL');
  await rx?.close();
  await app.close();
});

test('SIGKILL of the worker mid-pull loses nothing and duplicates nothing', async () => {
  const tenant = await createTenant(app.deps, 'Wearables crash');
  const client = teamClient(app, tenant);
  rx = await startReceiver();
  await managementClient(app, tenant).post(`/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`, {
    url: rx.url,
    filter_types: ['historical.*', 'provider.*'],
  });
  const today = todayUtc();
  const start = addDays(today, -12);
  const userId = (await client.post('/v2/user/', { client_user_id: uniqueId('crash'), ingestion_start: start, fallback_time_zone: 'UTC' })).body.user_id;

  worker = startWorker(deployment);
  expect((await client.post('/v2/link/connect/demo', { user_id: userId, provider: 'fitbit' })).status).toBe(200);
  const pulls = async () => (await client.get(`/v2/introspect/historical_pull?user_id=${userId}`)).body.data[0]?.provider?.fitbit?.pulled ?? {};
  await eventually(async () => Object.values(await pulls()).some((p: any) => p.status === 'in_progress' || p.status === 'success'), 60000, 'pull under way');
  await stopWorker(worker, 'SIGKILL');
  const before = Object.values(await pulls()).map((p: any) => p.status);
  expect(before).toContain('scheduled'); // killed before the history was done
  worker = startWorker(deployment);

  const done = await eventually(
    async () => {
      const p = await pulls();
      return Object.keys(p).length === 12 && Object.values(p).every((s: any) => s.status === 'success') ? p : null;
    },
    150000,
    'history pulled after the restart',
  );
  expect(Object.keys(done).sort()).toEqual([
    'activity',
    'body',
    'calories_active',
    'distance',
    'fat',
    'heartrate',
    'meal',
    'profile',
    'sleep',
    'steps',
    'weight',
    'workouts',
  ]);

  // Each completion announced under one webhook-id (a redelivery may repeat an id, never an event).
  const announced = await eventually(
    async () => {
      const ids = new Map<string, string>();
      for (const r of rx.requests) ids.set(String(r.headers['webhook-id']), JSON.parse(r.body).event_type);
      return ids.size >= 13 ? ids : null;
    },
    60000,
    'historical events',
  );
  const types = [...announced.values()].sort();
  expect(types).toEqual([...new Set(types)]);
  expect(types.filter((t) => t.startsWith('historical.data.'))).toHaveLength(12);

  // The stored samples of the finished days are exactly the provider's.
  const yesterday = addDays(today, -1);
  for (const resource of ['heartrate', 'steps', 'weight']) {
    const expected = generateDemoData({
      seed: `${userId}:fitbit`,
      provider: 'fitbit',
      resource,
      startDate: start,
      endDate: yesterday,
      timezoneOffsetSeconds: 0,
    }).samples.length;
    // Day buckets (one per day and source), one entry of `offsets` per sample timestamp.
    const buckets = await app.inspect
      .collection('sample_buckets')
      .find({ user_id: userId, resource, day: { $gte: new Date(`${start}T00:00:00Z`), $lt: new Date(`${today}T00:00:00Z`) } })
      .toArray();
    const stored = buckets.reduce((n, b) => n + b.offsets.length, 0);
    expect({ resource, stored }).toEqual({ resource, stored: expected });
  }
}, 300000);
