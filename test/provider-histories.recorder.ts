import { addDays, todayUtc } from '../lib/platform/time';
import { workflowIds } from '../workflows/ids';
import { pushHintsStateQuery } from '../workflows/wearable-connection';
import { eventually } from './support/harness';
import { saveHistory } from './support/histories';
import { startFakeOura, type FakeOura } from './support/fakes/oura';
import { startFakeStrava, type FakeStrava } from './support/fakes/strava';
import { connectThroughOAuth, createUser, startProviderStack, type ProviderStack } from './support/provider-stack';

/**
 * Records the histories of the real-provider workflows for test/workflow-replay.test.ts (see
 * test/workflow-histories.recorder.ts for when to run it):
 *
 *   npm test -- --testMatch '**\/test/provider-histories.recorder.ts'
 *
 * An Oura connection pulled page by page and then disconnected (its access revoked), a Strava connection disconnected
 * while a page of its history was in flight, a signed push's fetch, an unsigned push's hints (a forged Strava
 * deauthorization, checked with the athlete's token and ignored), and a run of the provider-subscriptions Schedule.
 */
let oura: FakeOura;
let strava: FakeStrava;
let stack: ProviderStack;

beforeAll(async () => {
  oura = await startFakeOura();
  oura.setPageSize('heartrate', 1000);
  strava = await startFakeStrava();
  stack = await startProviderStack('histories', [
    { slug: 'oura', fake: oura, clientId: oura.options.clientId, clientSecret: oura.options.clientSecret },
    { slug: 'strava', fake: strava, clientId: strava.options.clientId, clientSecret: strava.options.clientSecret },
  ]);
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await oura?.close();
  await strava?.close();
});

test('records the real-provider workflows', async () => {
  const save = (name: string, type: string, id: string) => saveHistory(stack.app, name, type, id);
  // The worker's boot ran the subscriptions Schedule: Oura's subscriptions exist at the fake.
  const completed = async (type: string) => {
    const runs = [];
    for await (const w of stack.app.deps.temporal.client.workflow.list({
      query: `WorkflowType = '${type}' AND ExecutionStatus = 'Completed' AND TaskQueue = '${stack.deployment.TEMPORAL_TASK_QUEUE}'`,
    }))
      runs.push(w);
    return runs.length ? runs : null;
  };
  const [run] = await eventually(() => completed('providerSubscriptionsWorkflow'), 60_000, 'the subscriptions run');
  expect(oura.subscriptions.size).toBe(10);
  await save('provider-subscriptions', 'providerSubscriptionsWorkflow', run.workflowId);

  const userId = await createUser(stack);
  const ouraUser = oura.addUser({ zoneOffsetSeconds: 3600 });
  expect((await connectThroughOAuth(stack, userId, 'oura', oura, { asUser: ouraUser.id })).status).toBe(200);
  const connection = (await stack.app.deps.repos.connections.listForUser(stack.tenant.teamId, userId))[0];
  await eventually(
    async () => {
      const pulled = Object.values(
        (await stack.client.get(`/v2/introspect/historical_pull?user_id=${userId}`)).body.data?.[0]?.provider?.oura?.pulled ?? {},
      ) as { status: string }[];
      return pulled.length === 6 && pulled.every((p) => p.status === 'success');
    },
    120_000,
    'the history pulled',
  );

  const sleep = oura.documents(ouraUser.id, 'sleep', addDays(todayUtc(), -10), todayUtc()).pop()!;
  const pushed = await oura.sendPush(`${stack.app.url}/v2/providers/oura/webhook`, {
    dataType: 'sleep',
    eventType: 'update',
    objectId: String(sleep.id),
    userId: ouraUser.id,
  });
  expect(pushed.status).toBe(200);
  const [push] = await eventually(() => completed('providerPushWorkflow'), 60_000, 'the push fetched');
  await save('provider-push-oura', 'providerPushWorkflow', push.workflowId);

  expect((await stack.client.del(`/v2/user/${userId}/oura`)).status).toBe(200);
  await stack.app.deps.temporal.client.workflow.getHandle(workflowIds.wearableConnection(connection._id)).result();
  await save('wearable-connection-oura-revoked', 'wearableConnectionWorkflow', workflowIds.wearableConnection(connection._id));

  // Stopped while its history is paging: the page in flight is cancelled (Strava's queue holds pages ~9.5 s apart).
  const athleteOf = await createUser(stack);
  const athlete = strava.addUser({ zoneOffsetSeconds: 3600 });
  expect((await connectThroughOAuth(stack, athleteOf, 'strava', strava, { asUser: athlete.id })).status).toBe(200);
  const stravaConnection = (await stack.app.deps.repos.connections.listForUser(stack.tenant.teamId, athleteOf))[0];
  const handle = stack.app.deps.temporal.client.workflow.getHandle(workflowIds.wearableConnection(stravaConnection._id));
  const pagesScheduled = async () =>
    ((await handle.fetchHistory()).events ?? []).filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'pullHistoricalPage').length;
  await eventually(async () => (await pagesScheduled()) >= 2, 90_000, 'a second page scheduled');
  expect((await stack.client.del(`/v2/user/${athleteOf}/strava`)).status).toBe(200);
  await handle.result();
  expect(((await handle.fetchHistory()).events ?? []).some((e) => e.activityTaskCancelRequestedEventAttributes)).toBe(true);
  await save('wearable-connection-strava-stopped-paging', 'wearableConnectionWorkflow', workflowIds.wearableConnection(stravaConnection._id));

  // An unsigned push: a forged deauthorization of a connected athlete (no activities: a short history), checked with
  // the athlete's token at Strava, which still answers, so nothing ends. The hints workflow lingers for more: its
  // history so far is recorded.
  await eventually(
    async () => (await stack.app.deps.repos.providerAuth.getApp('strava', strava.options.clientId))?.webhook_secret,
    60_000,
    'the Strava subscription',
  );
  const hinted = await createUser(stack);
  const quiet = strava.addUser({ zoneOffsetSeconds: 3600, dataStartMs: Date.now() });
  expect((await connectThroughOAuth(stack, hinted, 'strava', strava, { asUser: quiet.id })).status).toBe(200);
  const hintedConnection = (await stack.app.deps.repos.connections.listForUser(stack.tenant.teamId, hinted))[0];
  const id = Number(quiet.id);
  expect(
    (
      await strava.sendPush(
        `${stack.app.url}/v2/providers/strava/webhook`,
        strava.event({ object_type: 'athlete', object_id: id, aspect_type: 'update', owner_id: id, updates: { authorized: 'false' } }),
      )
    ).status,
  ).toBe(200);
  const hints = stack.app.deps.temporal.client.workflow.getHandle(workflowIds.providerHints(hintedConnection._id));
  await eventually(async () => (await hints.query(pushHintsStateQuery).catch(() => null))?.handled === 1, 180_000, 'the deauthorization checked');
  await save('provider-hints-strava', 'providerHintsWorkflow', workflowIds.providerHints(hintedConnection._id));
}, 600_000);
