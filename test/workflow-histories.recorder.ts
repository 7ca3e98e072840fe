import { publishEvent } from '../lib/events/publisher';
import { workflowIds } from '../workflows/ids';
import { sweepNowSignal } from '../workflows/stranded-work-sweep';
import { createTenant, eventually, managementClient, startTestApp, teamClient, type TestApp } from './support/harness';
import { createUser, daysFromToday, labTestIds, orderBody, orderReaches, registrationBody } from './support/lab';
import { startReceiver } from './support/receiver';
import { oruMessage } from './support/hl7';
import { saveHistory } from './support/histories';
import { storeReceivedMessage } from './support/lab-inbound';
import { signalLabResults } from '../lib/labs/lab-results-client';
import { timeOrderedUuid } from '../lib/platform/keys';
import { startFakeLab } from './support/fake-lab';
import { generateExport } from './support/apple-health-export';

/**
 * Records the histories test/workflow-replay.test.ts replays: each workflow type run on the test stack through
 * its branches, its history written to test/histories/<name>.json. Not part of the suite (jest's testMatch is
 * `*.test.ts`); run it after a deliberate, versioned workflow change, to add histories of the new code:
 *
 *   npm test -- --testMatch '**\/test/workflow-histories.recorder.ts'
 *
 * Keep the histories of earlier code too, for as long as workflows started by it may still run.
 */
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp({ USER_DELETION_GRACE_SECONDS: 1 });
});
afterAll(async () => app.close());

const save = (name: string, workflowType: string, workflowId: string) => saveHistory(app, name, workflowType, workflowId);

/** A kit ordered unregistered (patch `unregistered-testkit`): shipped, registered by its sample id, completed. */
async function recordUnregisteredKit(api: ReturnType<typeof teamClient>, labTestId: string): Promise<void> {
  const shipping = {
    receiver_name: 'Front Desk',
    first_line: '500 Market St',
    city: 'San Francisco',
    state: 'CA',
    zip: '94105',
    country: 'US',
    phone_number: '+14155550100',
  };
  const kit = (await api.post('/v3/order/testkit', { user_id: await createUser(api), lab_test_id: labTestId, shipping_details: shipping })).body.order;
  await eventually(async () => (await api.get(`/v3/order/${kit.id}`)).body.details.data.shipment, 60_000, 'the kit shipped');
  expect((await api.post('/v3/order/testkit/register', registrationBody(await createUser(api), kit.sample_id))).status).toBe(200);
  expect((await api.post(`/v3/order/${kit.id}/test?final_status=completed.testkit.completed&delay=0`, {})).status).toBe(200);
  await orderReaches(api, kit.id, 'completed', 60_000);
  await app.deps.temporal.client.workflow.getHandle(workflowIds.labOrder(kit.id)).result();
  await save('lab-order-testkit-unregistered', 'labOrderWorkflow', workflowIds.labOrder(kit.id));
}

test('records a history of every workflow type', async () => {
  const tenant = await createTenant(app.deps, 'Histories');
  const api = teamClient(app, tenant);
  const mgmt = managementClient(app, tenant);
  const tests = await labTestIds(api);

  // Lab orders through each branch: every method to completion, a corrected result, a failure, one scheduled for
  // tomorrow (activate_by: it waits, then dispatches), an order cancelled.
  for (const [name, method, final, extra] of [
    ['lab-order-testkit-completed', 'testkit', 'completed.testkit.completed', {}],
    ['lab-order-walk-in-completed', 'walk_in_test', 'completed.walk_in_test.completed', {}],
    ['lab-order-phlebotomy-completed', 'at_home_phlebotomy', 'completed.at_home_phlebotomy.completed', {}],
    ['lab-order-testkit-corrected', 'testkit', 'completed.testkit.corrected', {}],
    ['lab-order-testkit-sample-error', 'testkit', 'failed.testkit.sample_error', {}],
    ['lab-order-scheduled-completed', 'walk_in_test', 'completed.walk_in_test.completed', { activate_by: daysFromToday(1) }],
  ] as const) {
    const order = (await api.post('/v3/order', orderBody(await createUser(api), tests[method], extra))).body.order;
    await orderReaches(api, order.id, 'requisition_created', 60_000);
    expect((await api.post(`/v3/order/${order.id}/test?final_status=${final}&delay=0`, {})).status).toBe(200);
    await orderReaches(api, order.id, final.split('.')[2], 60_000);
    await app.deps.temporal.client.workflow.getHandle(workflowIds.labOrder(order.id)).result();
    await save(name, 'labOrderWorkflow', workflowIds.labOrder(order.id));
  }
  const cancelled = (await api.post('/v3/order', orderBody(await createUser(api), tests.testkit))).body.order;
  await orderReaches(api, cancelled.id, 'requisition_created');
  expect((await api.post(`/v3/order/${cancelled.id}/cancel`)).status).toBe(200);
  await app.deps.temporal.client.workflow.getHandle(workflowIds.labOrder(cancelled.id)).result();
  await save('lab-order-cancelled', 'labOrderWorkflow', workflowIds.labOrder(cancelled.id));
  await recordUnregisteredKit(api, tests.testkit);

  // A demo wearable connection, once its history is pulled (the workflow goes on running: a partial history replays too).
  const wearer = await createUser(api);
  expect((await api.post('/v2/link/connect/demo', { user_id: wearer, provider: 'oura' })).status).toBe(200);
  const connection = await eventually(async () => (await app.deps.repos.connections.listForUser(tenant.teamId, wearer))[0], 30_000, 'the connection');
  await eventually(
    async () => {
      const res = await api.get(`/v2/introspect/historical_pull?user_id=${wearer}`);
      const pulled = Object.values(res.body.data?.[0]?.provider?.oura?.pulled ?? {}) as { status: string }[];
      return pulled.length > 0 && pulled.every((s) => s.status === 'success' || s.status === 'failure');
    },
    90_000,
    'the history pulled',
  );
  await save('wearable-connection-demo', 'wearableConnectionWorkflow', workflowIds.wearableConnection(connection._id));

  // A webhook endpoint's dispatcher after deliveries.
  const rx = await startReceiver();
  try {
    const hook = (await mgmt.post(`/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`, { url: rx.url })).body;
    for (let i = 0; i < 3; i++) await publishEvent(app.deps, { teamId: tenant.teamId, eventType: 'labtest.order.updated', data: { i } });
    await rx.waitFor(3, 30_000);
    await new Promise((r) => setTimeout(r, 2000)); // the run hands back and the workflow waits for the next wake
    await save('destination-dispatch', 'destinationDispatchWorkflow', workflowIds.destinationDispatch(hook.id));
  } finally {
    await rx.close();
  }
}, 300_000);

/** The stranded-work sweep of the suite's worker (started at its boot): sweeps on its timer, and one on a signal. */
test('records the stranded-work sweep', async () => {
  const handle = app.deps.temporal.client.workflow.getHandle(workflowIds.strandedWorkSweep(app.deps.config.TEMPORAL_TASK_QUEUE));
  const sweeps = async () =>
    ((await handle.fetchHistory()).events ?? []).filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'sweepWebhooks').length;
  await eventually(async () => (await sweeps()) >= 2, 60_000, 'two sweeps');
  await handle.signal(sweepNowSignal, {});
  const before = await sweeps();
  await eventually(async () => (await sweeps()) > before, 30_000, 'a sweep on the signal');
  await eventually(async () => ((await handle.fetchHistory()).events ?? []).at(-1)?.timerStartedEventAttributes, 30_000, 'waiting for the next');
  await save('stranded-work-sweep', 'strandedWorkSweepWorkflow', handle.workflowId);
}, 120_000);

/** A test of its own, so its histories can be recorded alone: `-t 'user deletion'` after the command above. */
test('records the user deletion histories: erased after its grace period, and undone within it', async () => {
  const tenant = await createTenant(app.deps, 'Histories of user deletion');
  const api = teamClient(app, tenant);
  const erased = await createUser(api);
  expect((await api.del(`/v2/user/${erased}`)).status).toBe(200);
  await app.deps.temporal.client.workflow.getHandle(workflowIds.userDeletion(erased)).result();
  await save('user-deletion-erased', 'userDeletionWorkflow', workflowIds.userDeletion(erased));
  const undoneApp = await startTestApp({ USER_DELETION_GRACE_SECONDS: 3600 });
  try {
    const undoneApi = teamClient(undoneApp, tenant);
    const undone = await createUser(undoneApi);
    expect((await undoneApi.del(`/v2/user/${undone}`)).status).toBe(200);
    expect((await undoneApi.post(`/v2/user/undo_delete?user_id=${undone}`)).status).toBe(200);
    await app.deps.temporal.client.workflow.getHandle(workflowIds.userDeletion(undone)).result();
    await save('user-deletion-undone', 'userDeletionWorkflow', workflowIds.userDeletion(undone));
  } finally {
    await undoneApp.close();
  }
}, 120_000);

/** Results from a lab's HL7 messages: a final report (the order's run), then its correction (a run of its own). */
test('records a lab correction after completion (HL7 intake)', async () => {
  const tenant = await createTenant(app.deps, 'Histories HL7');
  const api = teamClient(app, tenant);
  const thyroid = app.deps.labCatalogue.markers.find((m) => m.type === 'panel' && m.slug === 'thyroid_panel' && m.lab_id === 3)!;
  const test = (await api.post('/v3/lab_tests', { name: 'Histories thyroid', method: 'walk_in_test', description: 'HL7', marker_ids: [thyroid.id] })).body;
  const order = (await api.post('/v3/order', orderBody(await createUser(api), test.id))).body.order;
  await orderReaches(api, order.id, 'requisition_created');
  const groups = [{ panel: thyroid, markers: app.deps.labCatalogue.resultMarkersFor({ marker_ids: [thyroid.id] }) }];
  const lab = app.deps.labCatalogue.labById(3)!;
  const hl7 = { 'content-type': 'application/hl7-v2' };
  expect((await api.post('/v3/lab/intake/hl7', oruMessage(order, { lab, groups }), hl7)).status).toBe(200);
  await orderReaches(api, order.id, 'completed');
  await save('lab-order-hl7-completed', 'labOrderWorkflow', workflowIds.labOrder(order.id));
  const correction = oruMessage(order, { lab, groups, reportStatus: 'C', overrides: { tsh: { value: '7.9', flags: 'H' } } });
  expect((await api.post('/v3/lab/intake/hl7', correction, hl7)).status).toBe(200);
  await orderReaches(api, order.id, 'corrected');
  await save('lab-order-hl7-correction', 'labOrderCorrectionWorkflow', workflowIds.labOrder(order.id));
}, 120_000);

/** A lab account's results applier (MLLP listener): a stored final report applied to its order. Alone: `-t 'results applier'`. */
test('records a lab results applier (MLLP)', async () => {
  const tenant = await createTenant(app.deps, 'Histories lab results');
  const api = teamClient(app, tenant);
  const tests = await labTestIds(api);
  const order = (await api.post('/v3/order', orderBody(await createUser(api), tests.walk_in_test))).body.order;
  await orderReaches(api, order.id, 'requisition_created');
  const doc = (await app.deps.repos.labOrders.findById(order.id))!;
  const markers = app.deps.labCatalogue.resultMarkersFor(doc);
  const lab = app.deps.labCatalogue.labById(doc.lab_test.lab_id)!;
  const text = oruMessage(order, { lab, groups: [{ panel: null, markers }], placerOrderNumber: doc.placer_number }).replace(/\r?$/, '');
  const accountId = timeOrderedUuid();
  const messageId = await storeReceivedMessage(app, { accountId, orgId: tenant.orgId, labSlug: lab.slug, text });
  await signalLabResults(app.deps.temporal, accountId, [messageId]);
  await orderReaches(api, order.id, 'completed');
  await eventually(async () => (await app.deps.repos.labInbound.find(messageId))?.state === 'applied', 30_000, 'the message applied');
  await save('lab-results-applied', 'labResultsWorkflow', workflowIds.labResults(accountId));
}, 120_000);

/** Orders to a real lab (a lab account, the fake laboratory over MLLP): one accepted then cancelled (CR), one refused (AE). */
test('records lab orders sent to a real lab over MLLP', async () => {
  const fake = await startFakeLab();
  try {
    const tenant = await createTenant(app.deps, 'Histories MLLP');
    const api = teamClient(app, tenant);
    const lab = app.deps.labCatalogue.labById(3)!;
    const thyroid = app.deps.labCatalogue.markers.find((m) => m.type === 'panel' && m.slug === 'thyroid_panel' && m.lab_id === 3)!;
    const { DEPLOYMENT_ENVIRONMENT: env, DEPLOYMENT_REGION: region } = app.deps.config;
    const account = await managementClient(app, tenant).post(`/v1/org/${tenant.orgId}/lab_account/${env}/${region}`, {
      lab_slug: lab.slug,
      name: 'Histories lab',
      account_number: '70012345',
      mllp: { host: '127.0.0.1', port: fake.port },
      msh: { sending_application: 'HEALTHBRIDGE', sending_facility: 'HB', receiving_application: 'LAB', receiving_facility: 'FAKE' },
      profile: 'LOI_2.5.1',
      results_from: ['127.0.0.1'],
      order_codes: { [thyroid.id]: { code: '001453' } },
      ack_timeout_ms: 2000,
    });
    expect([200, 201]).toContain(account.status);
    const test = (
      await api.post('/v3/lab_tests', {
        name: 'Histories MLLP thyroid',
        method: 'walk_in_test',
        description: 'MLLP',
        marker_ids: [thyroid.id],
        lab_account_id: account.body.id,
      })
    ).body;
    const accepted = (await api.post('/v3/order', orderBody(await createUser(api), test.id))).body.order;
    await orderReaches(api, accepted.id, 'requisition_created', 60_000);
    expect((await api.post(`/v3/order/${accepted.id}/cancel`)).status).toBe(200);
    await app.deps.temporal.client.workflow.getHandle(workflowIds.labOrder(accepted.id)).result();
    await save('lab-order-real-lab-cancelled', 'labOrderWorkflow', workflowIds.labOrder(accepted.id));
    fake.refuseNext('AE', 'Unknown client account');
    const refused = (await api.post('/v3/order', orderBody(await createUser(api), test.id))).body.order;
    await orderReaches(api, refused.id, 'sample_error', 60_000);
    await app.deps.temporal.client.workflow.getHandle(workflowIds.labOrder(refused.id)).result();
    await save('lab-order-real-lab-refused', 'labOrderWorkflow', workflowIds.labOrder(refused.id));
  } finally {
    await fake.close();
  }
}, 120_000);

/** An Apple Health export imported: `-t 'Apple Health'` after the command above. */
test('records the Apple Health import history', async () => {
  const tenant = await createTenant(app.deps, 'Histories of Apple Health imports');
  const api = teamClient(app, tenant);
  const userId = await createUser(api);
  const { xml } = generateExport({ days: 5, lastDay: '2026-06-30' });
  const res = await fetch(`${app.url}/v2/user/${userId}/import/apple_health`, {
    method: 'POST',
    headers: { 'x-service-api-key': tenant.teamKey, 'content-type': 'application/xml' },
    body: xml,
  });
  expect(res.status).toBe(201);
  const { id } = (await res.json()) as { id: string };
  await app.deps.temporal.client.workflow.getHandle(workflowIds.appleHealthImport(id)).result();
  await save('apple-health-import-completed', 'appleHealthImportWorkflow', workflowIds.appleHealthImport(id));
}, 120_000);
