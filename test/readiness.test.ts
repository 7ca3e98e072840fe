import { WORKER_HEARTBEAT_STALE_MS } from '../lib/platform/worker-heartbeats-store';
import { randomUUID } from 'node:crypto';
import { msToTs } from '@temporalio/common/lib/time';
import { SEARCH_ATTRIBUTES } from '../lib/labs/order-workflow-terms';
import { searchAttributesRegistered, temporalReadiness } from '../lib/platform/temporal';
import { eventually, httpClient, startTestApp } from './support/harness';
import { privateDeployment, startWorker, stopWorker } from './support/worker';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('GET /ready and the worker', () => {
  // Its own task queue and worker: the suite's worker polls the shared queue and would keep it ready.
  it('turns not ready within ~15 s after the only worker of its task queue is SIGKILLed', async () => {
    const deployment = privateDeployment('ready-probe');
    const app = await startTestApp(deployment);
    const client = httpClient(app.url);
    expect((await client.get('/ready')).body.checks.worker).toBe(false);
    const worker = startWorker(deployment);
    try {
      await eventually(async () => (await client.get('/ready')).status === 200, 90_000, 'ready once the worker runs');
      // A live, idle worker stays ready well past the staleness window (its heartbeats keep coming).
      const aliveUntil = Date.now() + WORKER_HEARTBEAT_STALE_MS + 5_000;
      while (Date.now() < aliveUntil) {
        expect((await client.get('/ready')).status).toBe(200);
        await sleep(1_000);
      }

      await stopWorker(worker, 'SIGKILL');
      const killedAt = Date.now();
      await eventually(async () => (await client.get('/ready')).status === 503, 60_000, 'not ready after the worker died');
      const detectedMs = Date.now() - killedAt;
      expect(detectedMs).toBeLessThanOrEqual(WORKER_HEARTBEAT_STALE_MS + 2_000);
      expect((await client.get('/ready')).body).toEqual({
        status: 'not_ready',
        checks: { mongodb: true, temporal: true, worker: false, search_attributes: true },
      });
      // Temporal alone still lists the dead poller (it did for ~300 s): the heartbeat is what noticed.
      expect((await temporalReadiness(app.deps.temporal)).worker).toBe(true);
    } finally {
      await stopWorker(worker, 'SIGKILL');
      await app.close();
    }
  }, 180_000);
});

describe('GET /ready and the search attributes', () => {
  it('needs the custom search attributes lab order workflows set: a namespace without them is not ready', async () => {
    const app = await startTestApp();
    try {
      const names = Object.values(SEARCH_ATTRIBUTES).map((k) => k.name);
      expect(await searchAttributesRegistered(app.deps.temporal, names)).toBe(true);
      expect((await httpClient(app.url).get('/ready')).body.checks.search_attributes).toBe(true);
      // A namespace of its own, registered without them.
      const namespace = `hb-no-attributes-${randomUUID().slice(0, 8)}`;
      await app.deps.temporal.connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
      const bare = { ...app.deps.temporal, namespace };
      await eventually(
        async () => (await app.deps.temporal.connection.workflowService.describeNamespace({ namespace }).catch(() => null)) !== null,
        30_000,
        'the namespace',
      );
      expect(await searchAttributesRegistered(bare, names)).toBe(false);
      expect(await searchAttributesRegistered(bare, [])).toBe(true); // the check itself answers for this namespace
    } finally {
      await app.close();
    }
  }, 60_000);
});
