import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { MongoClient } from 'mongodb';
import { placerNumberOf } from '../lib/labs/placer-number';
import { courseTo } from '../lib/labs/statuses';
import { addDays, todayUtc } from '../lib/platform/time';
import { createTenant, eventually, httpClient, managementClient, startTestApp, teamClient, type HttpClient, type TestApp } from './support/harness';
import { workflowIds } from '../workflows/ids';
import { startFakeLab, type FakeLab } from './support/fake-lab';
import { freePort } from './support/free-port';
import { createLabAccount, createUser, labTestIds, lowOf, orderBody, orderReaches } from './support/lab';
import { startLabProxy, type LabProxy } from './support/lab-proxy';
import { startReceiver, type Receiver } from './support/receiver';
import { startPrivateStack, type PrivateStack } from './support/private-stack';
import { startWorker, stopWorker } from './support/worker';

/**
 * Recovery from every fault, on a stack of this file's own, supervised as `npm run dev` supervises its servers
 * (test/support/stack-driver.mjs; Temporal's state on disk): demo wearable connections pulling their history, lab
 * orders walking through simulated statuses, one webhook endpoint, and orders to a real laboratory (the fake one,
 * test/support/fake-lab.ts, behind a relay that is down through every fault). Then kill -9 of the worker (started
 * again after a second, as the dev supervisor does), of the Temporal server, of the database (PostgreSQL); the
 * stack's supervisor starts the servers again. While a server is down the api answers 503 with Retry-After, and
 * /ready, within about a second. Afterwards every pull, order and delivery completes with no manual step, the lab's
 * orders waited visibly and, once the lab is back, reach it once each, and a SIGTERM stops the worker within its
 * shutdown timeout.
 *
 * Its own jest run (scripts/test.mjs runs `test/*.scenario.ts` after the suite): it loads the machine for minutes.
 * Alone: `npm test -- --testMatch '**\/test/recovery.scenario.ts'`.
 */
const USERS = 30;
const ORDERS = 30;
const HISTORY_DAYS = 30;
/** Orders to the real (fake) lab, waiting through every fault while the lab is unreachable. */
const LAB_ORDERS = 10;
/** The supervisor's first restart delay: the window in which the test sees a server down. */
const RESTART_DELAY_MS = 5_000;
const SHUTDOWN_TIMEOUT_MS = 4_000;
/** "About a second": the api's answer while a dependency is down, measured here at the client. */
const PROMPT_MS = 1_500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Timed {
  what: string;
  status: number;
  retryAfter: string | null;
  ms: number;
}

const stateDir = path.join(process.env.HB_TEST_STATE_DIR ?? path.join(__dirname, '..', '.devstack', 'test-adhoc'), `recovery-${process.pid}`);
let stack: PrivateStack;
let app: TestApp;
let worker: ChildProcess | null = null;
let rx: Receiver;
let raw: MongoClient;
let deployment: { TEMPORAL_TASK_QUEUE: string; MONGO_DB: string };
let workerEnv: Record<string, string>;
let fake: FakeLab;
let labRelay: LabProxy;
let metricsPort = 0;

beforeAll(async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, STACK_RESTART_DELAY_MS: String(RESTART_DELAY_MS), STACK_PERSIST: '1' };
  delete env.MONGO_URL;
  delete env.TEMPORAL_ADDRESS;
  stack = await startPrivateStack(stateDir, env, 'the private stack');
  const { info } = stack;
  deployment = { MONGO_DB: 'recovery', TEMPORAL_TASK_QUEUE: 'hb-recovery' };
  const servers = { MONGO_URL: info.mongoUrl, TEMPORAL_ADDRESS: info.temporalAddress };
  metricsPort = await freePort();
  workerEnv = {
    ...servers,
    // A known port (the run's default is any free one), the same for the restarted worker: the test reads the gauges.
    WORKER_METRICS_PORT: String(metricsPort),
    SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
    WEBHOOK_SWEEP_INTERVAL_MS: '1000',
    WEBHOOK_SWEEP_GRACE_MS: '2000',
    LOG_LEVEL: 'error',
  };
  app = await startTestApp({ ...deployment, ...servers });
  raw = await MongoClient.connect(info.mongoUrl, { serverSelectionTimeoutMS: 1_000 });
  rx = await startReceiver();
  fake = await startFakeLab();
  // The lab as the worker sees it: a relay that can vanish and come back on the same port.
  labRelay = await startLabProxy({ port: fake.port });
}, 120_000);

afterAll(async () => {
  if (worker) await stopWorker(worker, 'SIGKILL');
  await rx?.close();
  await labRelay?.close();
  await fake?.close();
  await raw?.close();
  await app?.close();
  await stack?.stop();
}, 60_000);

async function timed(what: string, call: () => Promise<{ status: number; headers: Headers }>): Promise<Timed> {
  const started = Date.now();
  const res = await call();
  return { what, status: res.status, retryAfter: res.headers.get('retry-after'), ms: Date.now() - started };
}

/** Kills a server of the stack and waits until its supervisor has logged the exit; returns the old pid. */
async function killServer(name: 'temporal' | 'postgres', label: string): Promise<number> {
  const { lines, currentPid } = stack;
  const pid = currentPid(name);
  process.kill(pid, 'SIGKILL');
  await eventually(
    async () => lines.some((l) => l.includes(`${label} (pid ${pid}) exited unexpectedly (signal SIGKILL)`)),
    10_000,
    `${label}'s exit to be seen`,
  );
  return pid;
}

async function restarted(name: 'temporal' | 'postgres', label: string, killed: number): Promise<void> {
  const { lines, currentPid } = stack;
  await eventually(
    async () => currentPid(name) !== killed && lines.some((l) => l.includes(`${label} restarted (pid ${currentPid(name)})`)),
    60_000,
    `${label} restarted`,
  );
}

/** The worker's gauge of lab messages stored and not answered (read from the database at each scrape). */
async function unansweredLabMessages(): Promise<number | null> {
  const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { signal: AbortSignal.timeout(5_000) });
  if (!res.ok) return null; // e.g. the worker's database connection still coming back
  // One series, with the registry's default labels (process="worker").
  const sample = /^healthbridge_lab_messages_unanswered(?:\{[^}]*\})? (\S+)$/m.exec(await res.text());
  return sample ? Number(sample[1]) : null;
}

const pullsOf = async (client: HttpClient, userId: string): Promise<Record<string, { status: string }>> =>
  (await client.get(`/v2/introspect/historical_pull?user_id=${userId}`)).body.data?.[0]?.provider?.fitbit?.pulled ?? {};

test('after kill -9 of the worker, then Temporal, then the database, every pull, order and delivery completes', async () => {
  worker = startWorker(deployment, workerEnv);
  const ready = httpClient(app.url);
  await eventually(async () => (await ready.get('/ready')).status === 200, 120_000, 'the api and worker ready');

  const tenant = await createTenant(app.deps, 'Recovery');
  const client = teamClient(app, tenant);
  await managementClient(app, tenant).post(`/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`, { url: rx.url });
  const tests = await labTestIds(client);

  // Orders to a real lab that is unreachable from before they are placed until after the last fault: they wait in
  // `ordered`, their sends failing and retried with backoff. Placed before the load, so the faults' pace is unchanged.
  const { labTestId, name: labName } = await createLabAccount(app, tenant, client, labRelay.port);
  await labRelay.down();
  const labOrders: { id: string; placer: string }[] = [];
  for (let i = 0; i < LAB_ORDERS; i++) {
    const res = await client.post('/v3/order', orderBody(await createUser(client), labTestId));
    expect(res.status).toBe(200);
    labOrders.push({ id: res.body.order.id, placer: placerNumberOf(res.body.order.id) });
  }
  // Visible in the Temporal UI: each order's pending send, retried, its last failure naming the lab and why.
  for (const order of labOrders) {
    const handle = app.deps.temporal.client.workflow.getHandle(workflowIds.labOrder(order.id));
    const pending = await eventually(
      async () => {
        const activity = (await handle.describe()).raw.pendingActivities?.find((a) => a.activityType?.name === 'sendOrderToLab');
        return activity && (activity.attempt ?? 0) >= 2 && activity.lastFailure ? activity : null;
      },
      60_000,
      `order ${order.id}'s send to the lab retrying`,
    );
    expect(pending.lastFailure?.message).toContain(labName);
    expect(pending.lastFailure?.message).toContain('no connection');
  }

  // The load: connections pulling their history, orders walking through their statuses one a second.
  const start = addDays(todayUtc(), -HISTORY_DAYS);
  const users: string[] = [];
  for (let i = 0; i < USERS; i++) {
    const userId = (await client.post('/v2/user/', { client_user_id: `recovery-${i}-${randomUUID()}`, ingestion_start: start, fallback_time_zone: 'UTC' })).body
      .user_id;
    expect((await client.post('/v2/link/connect/demo', { user_id: userId, provider: 'fitbit' })).status).toBe(200);
    users.push(userId);
  }
  const patient = await createUser(client);
  const orders: string[] = [];
  for (let i = 0; i < ORDERS; i++) orders.push((await client.post('/v3/order', orderBody(patient, tests.testkit))).body.order.id);
  for (const id of orders) await orderReaches(client, id, 'requisition_created', 60_000);
  for (const id of orders) expect((await client.post(`/v3/order/${id}/test?final_status=completed.testkit.completed&delay=1`, {})).status).toBe(200);
  await eventually(
    async () => Object.values(await pullsOf(client, users[0])).some((p) => p.status === 'in_progress' || p.status === 'success'),
    60_000,
    'pulls under way',
  );

  // 1. The worker, mid-pull and mid-walk; started again a second later.
  await stopWorker(worker, 'SIGKILL');
  await sleep(1_000); // the behaviour: a second with no worker
  worker = startWorker(deployment, workerEnv);

  // 2. Temporal. While it is down, what needs it is refused at once with 503 and Retry-After.
  await sleep(3_000); // the scenario's pace: the restarted worker works a while before the next fault
  const throwaway = await createUser(client);
  const temporalKilled = await killServer('temporal', 'Temporal');
  const duringTemporal = await Promise.all([
    timed('GET /ready', () => ready.get('/ready')),
    timed('POST /v3/order', () => client.post('/v3/order', orderBody(throwaway, tests.testkit))),
    timed('POST /v2/link/connect/demo', () => client.post('/v2/link/connect/demo', { user_id: throwaway, provider: 'oura' })),
    timed('DELETE /v2/user', () => client.del(`/v2/user/${throwaway}`)),
  ]);
  await restarted('temporal', 'Temporal', temporalKilled);

  // 3. The database (PostgreSQL, under FerretDB).
  await sleep(3_000); // the scenario's pace, as above
  const databaseKilled = await killServer('postgres', 'PostgreSQL');
  const duringDatabase = await Promise.all([timed('GET /ready', () => ready.get('/ready')), timed('GET /v2/user', () => client.get(`/v2/user/${users[0]}`))]);
  await restarted('postgres', 'PostgreSQL', databaseKilled);

  for (const answer of [...duringTemporal, ...duringDatabase]) {
    expect({ ...answer, ms: answer.ms < PROMPT_MS }).toEqual({
      what: answer.what,
      status: 503,
      retryAfter: answer.what === 'GET /ready' ? null : '5',
      ms: true,
    });
  }

  // The lab orders, still waiting after every restart: none reached the lab, none moved on, and the worker's gauge
  // (from the restarted database) counts each one's stored message as unanswered.
  for (const order of labOrders) {
    // Read once the api has its database again (restarted() waits for the server, not for the api's connection).
    const now = await eventually(
      async () => {
        const res = await client.get(`/v3/order/${order.id}`);
        return res.status === 200 ? res.body : null;
      },
      60_000,
      `order ${order.id}`,
    );
    expect(lowOf(now.last_event.status)).toBe('ordered');
  }
  expect(fake.received).toHaveLength(0);
  const gauge = await eventually(
    async () => {
      const n = await unansweredLabMessages();
      return n === null ? null : { n };
    },
    60_000,
    "the worker's lab gauge",
  );
  expect(gauge.n).toBe(LAB_ORDERS);
  // The lab comes back on the same address.
  await labRelay.up();

  // Everything completes with no manual step: every resource of every connection pulled...
  for (const userId of users) {
    const pulled = await eventually(
      async () => {
        const p = await pullsOf(client, userId);
        return Object.keys(p).length === 12 && Object.values(p).every((s) => s.status === 'success') ? p : null;
      },
      240_000,
      `the history of user ${userId}`,
    );
    expect(Object.keys(pulled)).toHaveLength(12);
  }
  // ...every order walked to completion, each status once...
  const course = ['ordered', 'requisition_created', ...courseTo('testkit', 'requisition_created', 'completed')!];
  for (const id of orders) {
    const done = await orderReaches(client, id, 'completed', 120_000);
    expect(done.events.map((e: { status: string }) => lowOf(e.status))).toEqual(course);
  }
  // ...every lab order reached the lab once (resends carry the same control id and bytes) and went on, once...
  for (const order of labOrders) {
    // The send's backoff reaches 5 minutes while the lab is down: the next try may come that long after it is back.
    const done = await orderReaches(client, order.id, 'requisition_created', 420_000);
    expect(done.events.map((e: { status: string }) => lowOf(e.status))).toEqual(['ordered', 'requisition_created']);
    const held = fake.orders().get(order.placer);
    expect(new Set(held?.controlIds)).toEqual(new Set([`${order.placer}O`]));
    const frames = fake.received.filter((r) => r.controlId.startsWith(order.placer));
    expect(frames).toHaveLength(held!.sends);
    expect(frames.every((f) => f.bytes.equals(frames[0].bytes))).toBe(true);
  }
  expect(fake.orders().size).toBe(LAB_ORDERS);
  expect(await unansweredLabMessages()).toBe(0);
  // ...and every event of the team fanned out and delivered to the endpoint.
  const db = raw.db('recovery');
  const delivered = await eventually(
    async () => {
      const [outbox, undelivered] = await Promise.all([
        db.collection('webhook_outbox').countDocuments({}), // publish spans not fanned out (a killed process's, until the sweeper repairs them)
        db.collection('webhook_deliveries').countDocuments({ team_id: tenant.teamId, status: { $ne: 'succeeded' } }),
      ]);
      if (outbox || undelivered) return null;
      const events = await db
        .collection('webhook_events')
        .find({ team_id: tenant.teamId }, { projection: { _id: 1 } })
        .toArray();
      const received = new Set(rx.requests.map((r) => String(r.headers['webhook-id'])));
      return events.every((e) => received.has(String(e._id))) ? events.length : null;
    },
    180_000,
    'every event delivered',
  );
  expect(delivered).toBeGreaterThan(USERS * 13 + ORDERS * course.length + LAB_ORDERS * 2 - 1);

  // SIGTERM stops the worker within its shutdown timeout.
  const stopping = Date.now();
  await stopWorker(worker, 'SIGTERM');
  expect(Date.now() - stopping).toBeLessThan(SHUTDOWN_TIMEOUT_MS + 1_000);
  worker = null;
}, 1_200_000); // the lab orders' last wait (up to the 5-minute backoff) on top of the rest
