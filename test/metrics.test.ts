import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { collectLines } from './support/child-lines';
import { publishEvent } from '../lib/webhooks/publisher';
import { createTenant, eventually, managementClient, startTestApp, teamClient, uniqueId, type TestApp } from './support/harness';
import { startReceiver, type Receiver } from './support/receiver';
import { privateDeployment, startWorker, stopWorker } from './support/worker';

/**
 * Prometheus metrics, scraped as Prometheus would: the api's GET /metrics after real requests, and a worker's
 * own metrics port after real deliveries (its registry, then the Temporal SDK's series).
 */

/** The sum of the samples of `name` whose labels include `labels` (Prometheus text format). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  let found = false;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) {
      sum += Number(m[3]);
      found = true;
    }
  }
  return found ? sum : NaN;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

describe('the api', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => app.close());

  test('counts and times requests by route template and status, database commands and Temporal calls; no ids in labels', async () => {
    const tenant = await createTenant(app.deps, 'Metrics');
    const api = teamClient(app, tenant);
    const scrape = async () => {
      const res = await fetch(`${app.url}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      return res.text();
    };
    const before = await scrape();
    const route = { method: 'GET', route: '/v2/providers/', status: '200' }; // the route as the table writes it
    const providersBefore = sample(before, 'healthbridge_http_requests_total', route) || 0;
    for (let i = 0; i < 3; i++) expect((await api.get('/v2/providers')).status).toBe(200);
    const user = (await api.post('/v2/user/', { client_user_id: uniqueId('metrics') })).body;
    expect((await api.get(`/v2/user/${user.user_id}`)).status).toBe(200);
    expect((await api.del(`/v2/user/${user.user_id}`)).status).toBe(200);
    expect((await api.get('/v2/no-such-route')).status).toBe(404);

    const after = await scrape();
    expect(sample(after, 'healthbridge_http_requests_total', route) - providersBefore).toBe(3);
    expect(sample(after, 'healthbridge_http_request_duration_seconds_count', route) - (sample(before, 'healthbridge_http_request_duration_seconds_count', route) || 0)).toBe(3);
    // The user's own path is counted under its template, never its id.
    expect(sample(after, 'healthbridge_http_requests_total', { method: 'GET', route: '/v2/user/{user_id}', status: '200' })).toBeGreaterThanOrEqual(1);
    expect(sample(after, 'healthbridge_http_requests_total', { route: 'unmatched', status: '404' })).toBeGreaterThanOrEqual(1);
    // The deletion's workflow, started through Temporal (update-with-start), by type.
    expect(sample(after, 'healthbridge_temporal_calls_total', { call: 'startUpdateWithStart', workflow: 'userDeletionWorkflow', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(sample(after, 'healthbridge_temporal_call_duration_seconds_count', { call: 'startUpdateWithStart' })).toBeGreaterThanOrEqual(1);
    expect(sample(after, 'healthbridge_database_command_duration_seconds_count', { command: 'find', outcome: 'ok' })).toBeGreaterThan(sample(before, 'healthbridge_database_command_duration_seconds_count', { command: 'find', outcome: 'ok' }) || 0);
    for (const secret of [user.user_id, tenant.teamId, tenant.orgId, tenant.teamKey, user.client_user_id]) expect(after).not.toContain(secret);
  });

  test('with METRICS_TOKEN set, a scrape needs it as a bearer token', async () => {
    const token = 'metrics-token-0123456789';
    const guarded = await startTestApp({ METRICS_TOKEN: token });
    try {
      expect((await fetch(`${guarded.url}/metrics`)).status).toBe(401);
      expect((await fetch(`${guarded.url}/metrics`, { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);
      const ok = await fetch(`${guarded.url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toContain('healthbridge_http_requests_total');
    } finally {
      await guarded.close();
    }
  });
});

describe('the worker', () => {
  const deployment = privateDeployment('metrics');
  let app: TestApp;
  let worker: ChildProcess;
  let rx: Receiver;
  let port: number;

  beforeAll(async () => {
    app = await startTestApp({ ...deployment });
    port = await freePort();
    worker = startWorker(deployment, { WORKER_METRICS_PORT: String(port) });
    rx = await startReceiver();
  }, 60_000);
  afterAll(async () => {
    if (worker) await stopWorker(worker, 'SIGTERM');
    await rx?.close();
    await app?.close();
  }, 30_000);

  test('serves its activities, deliveries, delivery queue and the Temporal SDK metrics on its own port', async () => {
    const tenant = await createTenant(app.deps, 'Worker metrics');
    const mgmt = managementClient(app, tenant);
    const hooks = `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`;
    expect((await mgmt.post(hooks, { url: rx.url })).status).toBe(200);
    for (let i = 0; i < 5; i++) await publishEvent(app.deps, { teamId: tenant.teamId, eventType: 'labtest.order.updated', data: { i } });
    await rx.waitFor(5, 60_000);
    const scrape = async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const text = await eventually(async () => {
      const t = await scrape().catch(() => '');
      // The delivery run's activity completes once nothing more is due (it lingers briefly first).
      const delivered = sample(t, 'healthbridge_deliveries_total', { destination: 'webhook', outcome: 'succeeded' }) >= 5;
      return delivered && sample(t, 'healthbridge_activity_executions_total', { activity: 'deliverDueWebhooks', outcome: 'completed' }) >= 1 ? t : null;
    }, 30_000, 'the deliveries and their activity in the worker metrics');
    expect(sample(text, 'healthbridge_delivery_attempts_total', { destination: 'webhook', result: 'ok' })).toBeGreaterThanOrEqual(5);
    expect(sample(text, 'healthbridge_activity_executions_total', { activity: 'deliverDueWebhooks', outcome: 'completed' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'healthbridge_activity_duration_seconds_count', { activity: 'deliverDueWebhooks' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'healthbridge_deliveries_pending', { process: 'worker' })).toBe(0);
    expect(sample(text, 'healthbridge_delivery_oldest_due_seconds')).toBe(0);
    expect(sample(text, 'healthbridge_process_resident_memory_bytes')).toBeGreaterThan(0);
    // The SDK's own series follow ours (served by its core on a loopback port, appended here).
    expect(text).toMatch(/^temporal_\w+/m);
    expect((await fetch(`http://127.0.0.1:${port}/other`)).status).toBe(404);
  }, 90_000);

  test("every panel of the Grafana dashboard is a query a real Prometheus scraping both processes answers", async () => {
    const dashboard = JSON.parse(readFileSync(path.join(__dirname, '..', 'scripts', 'monitoring', 'grafana', 'dashboards', 'healthbridge.json'), 'utf8'));
    const targets = (dashboard.panels as { type: string; title: string; targets?: { expr: string }[] }[])
      .filter((p) => p.type !== 'row')
      .flatMap((p) => (p.targets ?? []).map((t) => ({ title: p.title, expr: t.expr })));
    expect(targets.length).toBeGreaterThanOrEqual(15);
    const stateDir = path.join(process.env.HB_TEST_STATE_DIR ?? path.join(__dirname, '..', '.devstack', 'test-adhoc'), `prometheus-${process.pid}`);
    const driver = spawn(process.execPath, [path.join(__dirname, 'support', 'prometheus-driver.mjs')], {
      env: {
        ...process.env,
        PROMETHEUS_STATE_DIR: stateDir,
        PROMETHEUS_TARGETS: JSON.stringify([
          { job: 'healthbridge-api', address: new URL(app.url).host },
          { job: 'healthbridge-worker', address: `127.0.0.1:${port}` },
        ]),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines = collectLines(driver);
    const prometheus = {
      url: await eventually(async () => lines.find((l) => l.startsWith('ready '))?.slice('ready '.length), 60_000, `Prometheus (${lines.join(' | ')})`),
    };
    try {
      const query = async (expr: string) => {
        const res = await fetch(`${prometheus.url}/api/v1/query?query=${encodeURIComponent(expr)}`);
        return (await res.json()) as { status: string; error?: string; data: { result: unknown[] } };
      };
      // Traffic while it scrapes every second: requests to the api, deliveries by the worker.
      const tenant = await createTenant(app.deps, 'Dashboard');
      const mgmt = managementClient(app, tenant);
      expect((await mgmt.post(`/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`, { url: rx.url })).status).toBe(200);
      // What this traffic must show; the other panels stay empty until their events happen (a disabled endpoint...).
      const mustShow = ['API requests by route and status', 'API p99 latency by route', 'Readiness of scraped processes', 'Deliveries finished by outcome',
        'Delivery attempts by result', 'Pending deliveries', 'Most overdue delivery (alert above 300 s)', 'Workflow starts by type', 'Activity p99 duration by type',
        'Database command p99 by command', 'Temporal call p99 by call', 'Process memory (RSS)', 'Event loop lag p99'];
      // Traffic while it scrapes every 2 s (requests to the api, deliveries by the worker), until every panel that
      // traffic feeds has series (a rate needs two scrapes of a series: a loaded machine scrapes late).
      let trafficOn = true;
      const traffic = (async () => {
        for (let i = 0; trafficOn; i++) {
          await publishEvent(app.deps, { teamId: tenant.teamId, eventType: 'labtest.order.updated', data: { i } });
          await teamClient(app, tenant).get('/v2/providers');
          await new Promise((r) => setTimeout(r, 200));
        }
      })();
      const empty = async () => (await Promise.all(targets.filter((t) => mustShow.includes(t.title)).map(async (t) => ((await query(t.expr)).data?.result.length ? null : t.title)))).filter(Boolean);
      // Waits up to 60 s; if some stay empty, the assertion below names them.
      await eventually(async () => (await empty()).length === 0, 60_000, 'series in every panel the traffic feeds')
        .catch(() => undefined)
        .finally(() => (trafficOn = false));
      await traffic;
      const answers = await Promise.all(targets.map(async (t) => ({ ...t, answer: await query(t.expr) })));
      expect(answers.filter((a) => a.answer.status !== 'success').map((a) => `${a.title}: ${a.answer.error}`)).toEqual([]);
      expect(answers.filter((a) => mustShow.includes(a.title) && a.answer.data.result.length === 0).map((a) => a.title)).toEqual([]);
      expect(mustShow.every((title) => answers.some((a) => a.title === title))).toBe(true);
    } finally {
      const gone = new Promise((r) => driver.once('exit', r));
      driver.kill('SIGTERM');
      await gone;
    }
    expect(lines).toContain('stopped');
  }, 120_000);
});
