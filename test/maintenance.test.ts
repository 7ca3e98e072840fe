import { WORKER_HEARTBEAT_RETENTION_MS } from '../lib/repositories/workers';
import { workflowIds } from '../workflows/ids';
import { eventually, startTestApp, uniqueId, type TestApp } from './support/harness';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

/**
 * Runs the maintenance Schedule now (instead of waiting for the hour) until `done` holds. A Schedule names a
 * triggered run by the second, so a trigger that lands while an earlier run of the same second (another
 * test's) is still going is dropped: trigger again until a run that started after this test's data did it.
 */
async function runMaintenanceUntil(done: () => Promise<boolean>, what: string): Promise<void> {
  const schedule = app.deps.temporal.client.schedule.getHandle(workflowIds.maintenanceSchedule(app.deps.config.TEMPORAL_TASK_QUEUE));
  const deadline = Date.now() + 45_000;
  for (;;) {
    await schedule.trigger('ALLOW_ALL'); // not skipped while an earlier run is still going (unless named alike)
    try {
      await eventually(async () => done(), 5_000, what);
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
  }
}

test('the maintenance Schedule removes idempotency keys past their retention and keeps younger ones', async () => {
  const repo = app.deps.repos.labOrders;
  const key = (id: string, ageSeconds: number) => ({
    _id: id,
    team_id: 'team',
    route: 'POST /v3/order',
    request_sha256: 'x',
    resource_id: id,
    state: 'done' as const,
    response_status: 200,
    response_body: { ok: true },
    created_at: new Date(Date.now() - ageSeconds * 1000),
    completed_at: new Date(),
  });
  const old = uniqueId('old-key');
  const young = uniqueId('young-key');
  await repo.claimIdempotencyKey(key(old, app.deps.config.IDEMPOTENCY_KEY_RETENTION_SECONDS + 60));
  await repo.claimIdempotencyKey(key(young, 60));

  // The worker created the Schedule at boot, hourly.
  const schedule = app.deps.temporal.client.schedule.getHandle(workflowIds.maintenanceSchedule(app.deps.config.TEMPORAL_TASK_QUEUE));
  const described = await schedule.describe();
  expect(described.spec.intervals?.[0]?.every).toBe(3_600_000);
  await runMaintenanceUntil(async () => (await repo.idempotencyKeys.findOne({ _id: old })) === null, 'the old key to be pruned');
  const stillThere = await repo.claimIdempotencyKey(key(young, 0));
  expect('existing' in stillThere).toBe(true);
});

test('the maintenance Schedule removes webhook events, finished deliveries and attempts older than WEBHOOK_RETENTION_DAYS', async () => {
  const store = app.deps.repos.webhookStore;
  const days = app.deps.config.WEBHOOK_RETENTION_DAYS;
  const at = (ageDays: number) => new Date(Date.now() - ageDays * 24 * 3_600_000);
  const teamId = uniqueId('retention-team');
  const policy = { schedule_ms: [0], timeout_ms: 1000, throttle_floor_ms: 100, disable_after_ms: 1000 };
  const docsAged = (name: string, ageDays: number, status: 'succeeded' | 'pending') => {
    const id = uniqueId(name);
    const created = at(ageDays);
    return {
      event: { _id: id, team_id: teamId, event_type: 'labtest.order.created', user_id: null, client_user_id: null, body: '{}', created_at: created, only_endpoint_id: null },
      delivery: {
        _id: `${id}:ep`, team_id: teamId, endpoint_id: 'ep', event_id: id, event_type: 'labtest.order.created', user_id: null, status, trigger: 'scheduled' as const,
        next_attempt_at: status === 'pending' ? new Date(Date.now() + 3_600_000) : null, attempts: 1, pass_attempts: 1, policy,
        last_status_code: 200, last_error: null, created_at: created, updated_at: created, finished_at: status === 'pending' ? null : created,
      },
      attempt: {
        _id: `${id}#1`, team_id: teamId, event_id: id, endpoint_id: 'ep', user_id: null, attempt: 1, trigger: 'scheduled' as const,
        timestamp: created, duration_ms: 1, status_code: 200, error_class: null, response_body: 'ok',
      },
    };
  };
  const old = docsAged('old', days + 1, 'succeeded');
  const oldPending = docsAged('old-pending', days + 1, 'pending'); // still owed: never removed while pending
  const young = docsAged('young', days - 1, 'succeeded');
  for (const d of [old, oldPending, young]) {
    await store.insertEvents([d.event]);
    await store.insertDeliveries([d.delivery]);
    await store.attempts.insertOne(d.attempt);
  }
  // Wait for all three: a run that began before this data was stored may remove only some of it.
  const oldRemoved = async () =>
    (await store.getEvent(old.event._id)) === null &&
    (await store.deliveries.findOne({ _id: old.delivery._id })) === null &&
    (await store.attempts.findOne({ _id: old.attempt._id })) === null;
  await runMaintenanceUntil(oldRemoved, 'the old event, delivery and attempt to be removed');
  expect(await store.deliveries.findOne({ _id: oldPending.delivery._id })).not.toBeNull();
  expect(await store.getEvent(young.event._id)).not.toBeNull();
  expect(await store.deliveries.findOne({ _id: young.delivery._id })).not.toBeNull();
  expect(await store.attempts.findOne({ _id: young.attempt._id })).not.toBeNull();
  await store.deliveries.deleteOne({ _id: oldPending.delivery._id });
});

test('the maintenance Schedule removes heartbeats of workers that died over an hour ago and keeps recent ones', async () => {
  const workers = app.deps.repos.workers;
  const taskQueue = app.deps.config.TEMPORAL_TASK_QUEUE;
  const heartbeat = (id: string, ageMs: number) => ({
    _id: id,
    task_queue: taskQueue,
    host: 'gone',
    pid: 1,
    started_at: new Date(Date.now() - ageMs - 60_000),
    last_seen_at: new Date(Date.now() - ageMs),
  });
  const dead = uniqueId('dead-worker');
  const recent = uniqueId('recently-dead-worker');
  await workers.beat(heartbeat(dead, WORKER_HEARTBEAT_RETENTION_MS + 60_000));
  await workers.beat(heartbeat(recent, 60_000));
  await runMaintenanceUntil(async () => (await workers.heartbeats.findOne({ _id: dead })) === null, 'the dead worker heartbeat to be removed');
  expect(await workers.heartbeats.findOne({ _id: recent })).not.toBeNull();
  await workers.remove(recent);
});

test('the maintenance Schedule removes link tokens an hour past their expiry, with their use records, and keeps live ones', async () => {
  const tokens = app.deps.repos.linkTokens;
  const token = (id: string, expiresInMs: number) => ({
    _id: id,
    team_id: 'team',
    user_id: uniqueId('user'),
    provider: null,
    redirect_url: null,
    expires_at: new Date(Date.now() + expiresInMs),
    created_at: new Date(),
  });
  const expired = token(uniqueId('expired-token'), -2 * 3_600_000);
  const live = token(uniqueId('live-token'), 600_000);
  await tokens.create(expired);
  await tokens.create(live);
  expect(await tokens.consume(expired)).toBe(true);
  await runMaintenanceUntil(async () => (await tokens.find(expired._id)) === null && !(await tokens.isConsumed(expired._id)), 'the expired token and its use record to be pruned');
  expect(await tokens.find(live._id)).not.toBeNull();
});
