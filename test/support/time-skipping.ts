import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { jest } from '@jest/globals';
import { temporal } from '@temporalio/proto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type ActivityInboundCallsInterceptor } from '@temporalio/worker';
import { installRuntimeLogger } from '../../worker/worker';
import { createActivities } from '../../activities';
import { createSenders } from '../../activities/webhook-delivery';
import { providerTaskQueue } from '../../activities/wearables';
import { realIntegrations } from '../../lib/wearables/providers/registry';
import { loadLabCatalogue } from '../../lib/labs/catalogue';
import { SEARCH_ATTRIBUTES } from '../../lib/labs/order-workflow-terms';
import type { Config } from '../../lib/platform/config';
import { createLogger } from '../../lib/platform/logger';
import { startTestApp, type TestApp } from './harness';
import { privateDeployment } from './worker';

/**
 * Multi-day timers at their real durations: Temporal's time-skipping test server (the Java SDK's, fetched by
 * scripts/stack/temporal-test-server.mjs), the real app and a worker of this file's own with the real workflows
 * and activities, on a private task queue and database of the suite's MongoDB-wire server.
 *
 * The server's clock stands still relative to real time until a test skips it (`skip`): timers due on the way fire
 * and their workflow tasks and activities run at the server's time. Skips are always bounded: a clock left free to
 * run while nothing is due jumps to the next timer, which for a run waiting on a signal is the server's default run
 * timeout, 10 years ahead. The activities and the api
 * read the wall clock (next attempt times, `failing_since`, today's date), as in production where Temporal's
 * clock is the wall clock: so this process's `Date` follows the server's clock (jest's fake Date; timers, and
 * `performance`, which the MongoDB driver times with, stay real). It is brought to the server's time after
 * every skip and before every activity.
 */
export interface TimeSkippingStack {
  env: TestWorkflowEnvironment;
  app: TestApp;
  /** The server's time (ms since the epoch). */
  serverNow(): Promise<number>;
  /** Moves the server's clock `ms` ahead; returns once every timer due on the way has fired and been handled. */
  skip(ms: number): Promise<void>;
  /** A workflow's result, awaited without letting the clock run (the time-skipping client's own result() would). */
  result<T = unknown>(workflowId: string): Promise<T>;
  close(): Promise<void>;
}

const REPO = path.join(__dirname, '..', '..');

/** The launcher of the cached test server (fetched now if `npm test` has not already: jest run on its own). */
function testServerExecutable(): string {
  const script = path.join(REPO, 'scripts', 'stack', 'temporal-test-server.mjs');
  return execFileSync(process.execPath, [script, 'executable'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

export async function startTimeSkippingStack(name: string, overrides: Partial<Config> = {}): Promise<TimeSkippingStack> {
  const logger = createLogger(process.env.LOG_LEVEL ?? 'warn', 'worker-time-skipping');
  installRuntimeLogger(logger); // the SDK's own logs at the test's level (before the environment creates the runtime)
  const env = await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: testServerExecutable() } } });
  const serverNow = () => env.currentTimeMs();
  const syncClock = async () => jest.setSystemTime(Math.max(Date.now(), await serverNow()));

  // The lab order workflows set these, as on the dev server (scripts/stack/binaries.mjs registers them there).
  const keyword = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;
  await env.connection.operatorService.addSearchAttributes({
    namespace: env.namespace ?? 'default',
    searchAttributes: Object.fromEntries(Object.values(SEARCH_ATTRIBUTES).map((k) => [k.name, keyword])),
  });

  const deployment = privateDeployment(name);
  // Real durations: the defaults, and a day of activate_by lasting a day.
  const app = await startTestApp({ ...deployment, TEMPORAL_ADDRESS: env.address, LAB_ACTIVATION_TIME_SCALE: 1, ...overrides });
  const config = app.deps.config;
  const senders = createSenders(config);
  const clockFollower: ActivityInboundCallsInterceptor = {
    async execute(input, next) {
      await syncClock();
      return next(input);
    },
  };
  const activities = createActivities({ repos: app.deps.repos, config, logger, temporal: app.deps.temporal, labCatalogue: loadLabCatalogue(), senders });
  const worker = await Worker.create({
    connection: env.nativeConnection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    workflowsPath: require.resolve('../../workflows'),
    activities,
    interceptors: { activity: [() => ({ inbound: clockFollower })] },
  });
  // The real providers' page activities, on their own task queues, following the server's clock too.
  const providerWorkers = await Promise.all(
    realIntegrations().map((integration) =>
      Worker.create({
        connection: env.nativeConnection,
        namespace: config.TEMPORAL_NAMESPACE,
        taskQueue: providerTaskQueue(config.TEMPORAL_TASK_QUEUE, integration.slug),
        activities,
        interceptors: { activity: [() => ({ inbound: clockFollower })] },
      }),
    ),
  );
  const running = Promise.all([worker.run(), ...providerWorkers.map((w) => w.run())]);
  // Only Date is faked (after the worker has bundled its workflows: they keep Temporal's deterministic Date). It
  // runs on in real time from wherever it was last set to the server's clock.
  jest.useFakeTimers({
    now: await serverNow(),
    advanceTimers: true,
    doNotFake: [
      'hrtime',
      'nextTick',
      'performance',
      'queueMicrotask',
      'requestAnimationFrame',
      'cancelAnimationFrame',
      'requestIdleCallback',
      'cancelIdleCallback',
      'setImmediate',
      'clearImmediate',
      'setInterval',
      'clearInterval',
      'setTimeout',
      'clearTimeout',
    ],
  });

  return {
    env,
    app,
    serverNow,
    async skip(ms) {
      await env.sleep(ms);
      await syncClock();
    },
    result: (workflowId) => app.deps.temporal.client.workflow.getHandle(workflowId).result(),
    async close() {
      for (const w of [worker, ...providerWorkers]) w.shutdown();
      await running;
      await senders.close();
      await app.close();
      await env.teardown();
      jest.useRealTimers();
    },
  };
}
