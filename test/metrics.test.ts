import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { freePort } from './support/free-port';
import { publishEvent } from '../lib/events/publisher';
import { createTenant, eventually, managementClient, startTestApp, teamClient, uniqueId, type TestApp } from './support/harness';
import { startTestPrometheus, type TestPrometheus } from './support/prometheus';
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
    expect(
      sample(after, 'healthbridge_http_request_duration_seconds_count', route) -
        (sample(before, 'healthbridge_http_request_duration_seconds_count', route) || 0),
    ).toBe(3);
    // The user's own path is counted under its template, never its id.
    expect(sample(after, 'healthbridge_http_requests_total', { method: 'GET', route: '/v2/user/{user_id}', status: '200' })).toBeGreaterThanOrEqual(1);
    expect(sample(after, 'healthbridge_http_requests_total', { route: 'unmatched', status: '404' })).toBeGreaterThanOrEqual(1);
    // The deletion's workflow, started through Temporal (update-with-start), by type.
    expect(
      sample(after, 'healthbridge_temporal_calls_total', { call: 'startUpdateWithStart', workflow: 'userDeletionWorkflow', outcome: 'ok' }),
    ).toBeGreaterThanOrEqual(1);
    expect(sample(after, 'healthbridge_temporal_call_duration_seconds_count', { call: 'startUpdateWithStart' })).toBeGreaterThanOrEqual(1);
    expect(sample(after, 'healthbridge_database_command_duration_seconds_count', { command: 'find', outcome: 'ok' })).toBeGreaterThan(
      sample(before, 'healthbridge_database_command_duration_seconds_count', { command: 'find', outcome: 'ok' }) || 0,
    );
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
    const text = await eventually(
      async () => {
        const t = await scrape().catch(() => '');
        // The delivery run's activity completes once nothing more is due (it lingers briefly first).
        const delivered = sample(t, 'healthbridge_deliveries_total', { destination: 'webhook', outcome: 'succeeded' }) >= 5;
        return delivered && sample(t, 'healthbridge_activity_executions_total', { activity: 'deliverDueWebhooks', outcome: 'completed' }) >= 1 ? t : null;
      },
      30_000,
      'the deliveries and their activity in the worker metrics',
    );
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

  describe('the Grafana dashboard, against a real Prometheus scraping both processes', () => {
    const dashboard = JSON.parse(readFileSync(path.join(__dirname, '..', 'scripts', 'monitoring', 'grafana', 'dashboards', 'healthbridge.json'), 'utf8'));
    const targets = (dashboard.panels as { type: string; title: string; targets?: { expr: string }[] }[])
      .filter((p) => p.type !== 'row')
      .flatMap((p) => (p.targets ?? []).map((t) => ({ title: p.title, expr: t.expr })));
    // The panels the traffic below cannot feed, and why; every other panel must show series.
    const notFedByTraffic: Record<string, string> = {
      'API 5xx responses': 'the traffic makes no server errors',
      'Destinations disabled (1 h)': 'no endpoint fails long enough to be disabled',
      'Activity failures by type': 'no activity fails',
      'Lab orders entering each status (1 h)': 'the traffic orders no lab tests',
      'Wearable samples ingested by resource': 'the traffic connects no wearable',
    };
    const mustShow = [...new Set(targets.map((t) => t.title))].filter((title) => !(title in notFedByTraffic));
    let prometheus: TestPrometheus;
    const query = async (expr: string) => {
      const res = await fetch(`${prometheus.url}/api/v1/query?query=${encodeURIComponent(expr)}`);
      return (await res.json()) as { status: string; error?: string; data: { result: { value: [number, string] }[] } };
    };
    // Series with a value: a quantile of no observations in the window is NaN, which a panel cannot draw.
    const withValues = (answer: Awaited<ReturnType<typeof query>>) => answer.data?.result.filter((r) => Number.isFinite(Number(r.value[1]))) ?? [];

    beforeAll(async () => {
      prometheus = await startTestPrometheus([
        { job: 'healthbridge-api', address: new URL(app.url).host },
        { job: 'healthbridge-worker', address: `127.0.0.1:${port}` },
      ]);
      const tenant = await createTenant(app.deps, 'Dashboard');
      const mgmt = managementClient(app, tenant);
      expect((await mgmt.post(`/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`, { url: rx.url })).status).toBe(
        200,
      );
      // Traffic while it scrapes every 2 s (requests to the api, deliveries by the worker), until every panel that
      // traffic feeds has series (a rate needs two scrapes of a series: a loaded machine scrapes late).
      let trafficOn = true;
      const traffic = (async () => {
        for (let i = 0; trafficOn; i++) {
          await publishEvent(app.deps, { teamId: tenant.teamId, eventType: 'labtest.order.updated', data: { i } });
          await teamClient(app, tenant).get('/v2/providers');
          // Longer than a dispatcher lingers with nothing due, so delivery runs end and their activity is timed.
          await new Promise((r) => setTimeout(r, 400));
        }
      })();
      const empty = async () =>
        (
          await Promise.all(targets.filter((t) => mustShow.includes(t.title)).map(async (t) => (withValues(await query(t.expr)).length ? null : t.title)))
        ).filter(Boolean);
      // At least 30 s of scrapes, so the preview's charts have lines to draw (a rate starts at the second scrape);
      // then waits up to 60 s more; if some stay empty, the tests below name them.
      const history = () => Date.now() - prometheus.startedAt > 30_000;
      await eventually(async () => history() && (await empty()).length === 0, 90_000, 'series in every panel the traffic feeds')
        .catch(() => undefined)
        .finally(() => (trafficOn = false));
      await traffic;
    }, 150_000);
    afterAll(async () => {
      if (prometheus) expect(await prometheus.stop()).toBe(true);
    }, 30_000);

    test('every panel is a query Prometheus answers, with series in each panel the traffic feeds', async () => {
      expect(targets.length).toBeGreaterThanOrEqual(15);
      const answers = await Promise.all(targets.map(async (t) => ({ ...t, answer: await query(t.expr) })));
      expect(answers.filter((a) => a.answer.status !== 'success').map((a) => `${a.title}: ${a.answer.error}`)).toEqual([]);
      expect(answers.filter((a) => mustShow.includes(a.title) && withValues(a.answer).length === 0).map((a) => a.title)).toEqual([]);
      expect(Object.keys(notFedByTraffic).filter((title) => !targets.some((t) => t.title === title))).toEqual([]); // no stale excuse
    });
  });
});
