import { workflowIds } from '../workflows/ids';
import { eventually, startTestApp, uniqueId, type TestApp } from './support/harness';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

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

  // The worker created the Schedule at boot; run it now instead of waiting for the hour.
  const schedule = app.deps.temporal.client.schedule.getHandle(workflowIds.maintenanceSchedule(app.deps.config.TEMPORAL_TASK_QUEUE));
  const described = await schedule.describe();
  expect(described.spec.intervals?.[0]?.every).toBe(3_600_000);
  await schedule.trigger();
  await eventually(async () => !(await repo.claimIdempotencyKey(key(old, 0)).then((r) => 'existing' in r)), 30000, 'the old key to be pruned');
  const stillThere = await repo.claimIdempotencyKey(key(young, 0));
  expect('existing' in stillThere).toBe(true);
});
