import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { WorkflowNotFoundError } from '@temporalio/client';
import { workflowIds } from '../workflows/ids';
import { createTenant, eventually, httpClient, managementClient, startTestApp, teamClient, uniqueId, type Tenant, type TestApp } from './support/harness';
import { createUser, labTestIds, orderBody, orderReaches, registrationBody } from './support/lab';
import { startReceiver, type Receiver } from './support/receiver';
import { freePort } from './support/free-port';
import { privateDeployment, startWorker, stopWorker } from './support/worker';

/**
 * Crash tests of the places that write a document and then start or signal a workflow (README "Crash between a
 * write and a workflow start"). For each, an api process of this build is started with a crash point armed
 * (lib/platform/failpoints.ts, HB_FAILPOINTS): the request kills it between the two steps. The half-done state is
 * checked while no worker runs (nothing can have repaired it yet), then a worker starts and the system converges
 * on its own: the workflow gives up or runs, its document shows it, and nothing needs a manual step.
 */
const deployment = privateDeployment('dual-writes');
// The sweeper looks every half second and repairs what is a second old.
const sweeper = { WEBHOOK_SWEEP_INTERVAL_MS: '500', WEBHOOK_SWEEP_GRACE_MS: '1000', CONNECTION_STEPS_GRACE_MS: '1000' };
let app: TestApp;
let tenant: Tenant;
const children: ChildProcess[] = [];

beforeAll(async () => {
  app = await startTestApp(deployment);
  tenant = await createTenant(app.deps, 'Dual writes');
});
afterEach(async () => {
  for (const child of children.splice(0)) await stopWorker(child, 'SIGKILL');
});
afterAll(() => app.close());

/**
 * An api process on this file's deployment with `failpoint` armed; `crash` sends the request that reaches it (a
 * `name:error` failpoint does not kill the process: send the request through `team` and see it fail).
 */
async function apiThatCrashesAt(failpoint: string, env: Record<string, string> = {}) {
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(__dirname, '..', 'dist', 'api', 'main.js')], {
    env: { ...process.env, LOG_LEVEL: 'error', ...deployment, API_PORT: String(port), HB_FAILPOINTS: failpoint, ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  children.push(child);
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
  const url = `http://127.0.0.1:${port}`;
  await eventually(async () => (await fetch(`${url}/health`).catch(() => null))?.ok, 30000, 'crashing api up');
  return {
    team: httpClient(url, { 'x-service-api-key': tenant.teamKey }),
    management: httpClient(url, { 'X-Management-Key': tenant.managementKey }),
    /**
     * Sends the request; the api dies of SIGKILL at the crash point, before answering (`mayAnswer`: a crash point
     * reached beside the answer, after what the request promises is stored, may come after it).
     */
    async crash(
      request: (api: { team: ReturnType<typeof httpClient>; management: ReturnType<typeof httpClient> }) => Promise<unknown>,
      { mayAnswer = false } = {},
    ) {
      const sent = request(this);
      if (mayAnswer) await sent.catch(() => undefined);
      else await expect(sent).rejects.toThrow();
      expect(await exited).toBe('SIGKILL');
    },
  };
}

function runWorker(): void {
  children.push(startWorker(deployment, sweeper));
}

const workflowStatus = async (workflowId: string) => {
  try {
    return (await app.deps.temporal.client.workflow.getHandle(workflowId).describe()).status.name;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return 'NOT_FOUND';
    throw err;
  }
};

/** A new user's walk-in order and the X-Idempotency-Key its request (and every retry of it) is sent with. */
async function newOrderUnderKey() {
  const client = teamClient(app, tenant);
  const userId = await createUser(client);
  const tests = await labTestIds(client);
  return { client, userId, body: orderBody(userId, tests.walk_in_test), key: { 'X-Idempotency-Key': uniqueId('order') } };
}

describe('lab order creation: the workflow is started, then the order stored', () => {
  it('a crash between leaves a workflow that gives up and no order; the retried request creates the order', async () => {
    const { client, body, key } = await newOrderUnderKey();
    const api = await apiThatCrashesAt('lab-order.workflow-started', { LAB_ORDER_STORE_GRACE_MS: '2000' });
    await api.crash(({ team }) => team.post('/v3/order', body, key));

    // The id the request was creating is its idempotency key's: its workflow exists, its order does not.
    const claimed = await app.inspect.collection('idempotency_keys').findOne({ team_id: tenant.teamId });
    const orderId = claimed!.resource_id as string;
    expect(await workflowStatus(workflowIds.labOrder(orderId))).toBe('RUNNING');
    expect((await client.get(`/v3/order/${orderId}`)).status).toBe(404);

    runWorker();
    await eventually(async () => (await workflowStatus(workflowIds.labOrder(orderId))) === 'FAILED', 60000, 'the run gives up');
    expect((await client.get(`/v3/order/${orderId}`)).status).toBe(404);

    // The client's retry (same key) resumes the crashed request once its lease lapses, under the same order id.
    const retried = await eventually(
      async () => {
        const res = await client.post('/v3/order', body, key);
        return res.status === 409 ? null : res;
      },
      60000,
      'the idempotency lease lapses',
    );
    expect(retried.status).toBe(200);
    expect(retried.body.order.id).toBe(orderId);
    await orderReaches(client, orderId, 'requisition_created', 60000);
  }, 180000);
});

describe('lab order creation: the order is stored, then the request fails', () => {
  it('the retry with the same key answers the stored order: one order for the user, the id and body a success gives', async () => {
    const { client, userId, body, key } = await newOrderUnderKey();
    // The api fails right after the order's insert, as a lost connection would: the client sees a 500.
    const api = await apiThatCrashesAt('lab-order.stored:error');
    const failed = await api.team.post('/v3/order', body, key);
    expect(failed.status).toBe(500);
    const ordersOfUser = async () => (await client.get(`/v3/orders?user_id=${userId}`)).body.orders as { id: string }[];
    const [stored] = await ordersOfUser();
    const claimed = await app.inspect.collection('idempotency_keys').findOne({ team_id: tenant.teamId, resource_id: stored.id });
    expect(claimed).toMatchObject({ state: 'pending', claim: null });

    // The retry comes at once (the failed request let go of its claim) and answers the stored order.
    const retried = await client.post('/v3/order', body, key);
    expect(retried.status).toBe(200);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    const shown = (await client.get(`/v3/order/${stored.id}`)).body;
    expect(retried.body).toEqual({ order: shown, status: 'success', message: 'Order created successfully' });
    expect((await ordersOfUser()).map((o) => o.id)).toEqual([stored.id]);
    // From then on the key replays that answer.
    const replayed = await client.post('/v3/order', body, key);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.body.order.id).toBe(stored.id);

    // Its one workflow runs it.
    runWorker();
    await orderReaches(client, stored.id, 'requisition_created', 60000);
    expect((await ordersOfUser()).map((o) => o.id)).toEqual([stored.id]);
  }, 180000);
});

describe('wearable connect: the connection is stored, then its workflow started', () => {
  it('a crash between is finished by the sweeper: connected_sources and the workflow', async () => {
    const client = teamClient(app, tenant);
    const userId = await createUser(client);
    const api = await apiThatCrashesAt('connection.created');
    await api.crash(({ team }) => team.post('/v2/link/connect/demo', { user_id: userId, provider: 'fitbit' }));

    const [connection] = await app.deps.repos.connections.listForUser(tenant.teamId, userId);
    expect(connection.steps_pending_since).toBeInstanceOf(Date);
    expect(await workflowStatus(workflowIds.wearableConnection(connection._id))).toBe('NOT_FOUND');
    expect((await client.get(`/v2/user/${userId}`)).body.connected_sources).toEqual([]);

    runWorker();
    await eventually(async () => (await app.deps.repos.connections.find(connection._id))?.steps_pending_since === undefined, 60000, 'the steps finished');
    expect((await client.get(`/v2/user/${userId}`)).body.connected_sources.map((c: { source: { slug: string } }) => c.source.slug)).toEqual(['fitbit']);
    expect(await workflowStatus(workflowIds.wearableConnection(connection._id))).toBe('RUNNING');
    // The workflow does its work: the history is being pulled.
    await eventually(
      async () => {
        const pulled = (await client.get(`/v2/introspect/historical_pull?user_id=${userId}`)).body.data[0]?.provider?.fitbit?.pulled ?? {};
        return Object.values(pulled).some((p: any) => p.status === 'success');
      },
      60000,
      'a resource pulled',
    );
  }, 180000);
});

describe('wearable deregister: the connection is marked deregistered, then its workflow stopped', () => {
  it('a crash between is finished by the sweeper: the workflow stops and connected_sources drops it', async () => {
    const client = teamClient(app, tenant);
    const userId = await createUser(client);
    expect((await client.post('/v2/link/connect/demo', { user_id: userId, provider: 'oura' })).status).toBe(200);
    const [connection] = await app.deps.repos.connections.listForUser(tenant.teamId, userId);
    const api = await apiThatCrashesAt('connection.deregistered');
    await api.crash(({ team }) => team.del(`/v2/user/${userId}/oura`));

    expect((await app.deps.repos.connections.find(connection._id))?.status).toBe('deregistered');
    expect(await workflowStatus(workflowIds.wearableConnection(connection._id))).toBe('RUNNING');
    expect((await client.get(`/v2/user/${userId}`)).body.connected_sources).toHaveLength(1);

    runWorker();
    await eventually(async () => (await workflowStatus(workflowIds.wearableConnection(connection._id))) === 'COMPLETED', 60000, 'the workflow stopped');
    await eventually(async () => (await app.deps.repos.connections.find(connection._id))?.steps_pending_since === undefined, 60000, 'the steps finished');
    expect((await client.get(`/v2/user/${userId}`)).body.connected_sources).toEqual([]);
  }, 180000);
});

describe('webhook publish: the event is stored, then its deliveries queued and the dispatcher woken', () => {
  let rx: Receiver;
  beforeAll(async () => {
    rx = await startReceiver();
  });
  afterAll(() => rx.close());

  // The publish returns once the event is stored, so the api may answer before it queues the deliveries and dies.
  it.each([
    ['webhook.events-stored', 0, false],
    ['webhook.deliveries-queued', 1, true],
  ])(
    'a crash at %s is repaired by the sweeper: the event is delivered',
    async (failpoint, deliveriesAtCrash, mayAnswer) => {
      const base = `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`;
      const hook = (await managementClient(app, tenant).post(base, { url: `${rx.url}/${failpoint}` })).body;
      const api = await apiThatCrashesAt(failpoint);
      await api.crash(({ management }) => management.post(`${base}/${hook.id}/test`, {}), { mayAnswer });

      const event = await app.inspect.collection('webhook_events').findOne({ team_id: tenant.teamId, only_destination_id: hook.id });
      expect(event).not.toBeNull();
      expect(await app.inspect.collection('webhook_deliveries').countDocuments({ destination_id: hook.id })).toBe(deliveriesAtCrash);

      runWorker();
      // The team's other traffic (the wearable connection of a test above pulls on) reaches this endpoint too: wait for the test event.
      const [received] = await rx.waitFor(1, 60000, (r) => r.path.endsWith(failpoint) && JSON.parse(r.body).event_type === 'webhook.test');
      expect(JSON.parse(received.body)).toMatchObject({ event_type: 'webhook.test', data: { webhook_id: hook.id } });
    },
    120000,
  );
});

describe('kit registration: the patient is bound to the order, then its workflow told', () => {
  it('a crash between is finished by the sweeper: the kit ends registered without a client retry', async () => {
    runWorker();
    const client = teamClient(app, tenant);
    const userId = await createUser(client);
    const tests = await labTestIds(client);
    const shipping = {
      receiver_name: 'Front Desk',
      first_line: '500 Market St',
      city: 'San Francisco',
      state: 'CA',
      zip: '94105',
      country: 'US',
      phone_number: '+14155550100',
    };
    const kit = (await client.post('/v3/order/testkit', { user_id: userId, lab_test_id: tests.testkit, shipping_details: shipping })).body.order;
    await orderReaches(client, kit.id, 'awaiting_registration', 60000);

    const api = await apiThatCrashesAt('testkit.registration-bound');
    await api.crash(({ team }) => team.post('/v3/order/testkit/register', registrationBody(userId, kit.sample_id)));
    const bound = await app.deps.repos.labOrders.findById(kit.id);
    expect(bound?.registration_id).toBeTruthy();
    expect(bound?.registration_pending_since).toBeInstanceOf(Date);

    const registered = await orderReaches(client, kit.id, 'testkit_registered', 60000);
    expect(registered.patient_details).toMatchObject({ first_name: expect.any(String) });
    await eventually(async () => (await app.deps.repos.labOrders.findById(kit.id))?.registration_pending_since === undefined, 30000, 'the mark cleared');
  }, 180000);
});
