import { earliestOf } from '../lib/platform/time';
import { dataCipher, loadConfig } from '../lib/platform/config';
import { createLogger } from '../lib/platform/logger';
import { connectMongo } from '../lib/platform/database/mongo';
import { createRepositories, ensureIndexes } from '../lib/repositories';
import { retentionFrom } from '../lib/platform/database/indexes';
import { connectTemporal } from '../lib/platform/temporal';
import { startWorkerHeartbeat } from './heartbeat';
import { runUntilStopped } from './run-until-stopped';
import { ensureStrandedWorkSweep } from './stranded-work-sweep';
import { createWorker, installRuntimeLogger } from './worker';
import { startProviderSubscriptionsSchedule } from './provider-subscriptions-schedule';
import { freeLoopbackPort, startWorkerMetricsServer } from './metrics-server';
import { initProcessMetrics, registerDeliveryQueueMetrics, registerLabOutboundMetrics } from '../lib/platform/metrics';

/** Worker process: hosts workflows and activities; SIGTERM drains in-flight tasks, then closes. */
async function main(): Promise<void> {
  const config = loadConfig();
  initProcessMetrics('worker');
  const cipher = dataCipher(config);
  const logger = createLogger(config.LOG_LEVEL, 'worker');
  const mongo = await connectMongo(config.MONGO_URL, config.MONGO_DB, { queryShapeLog: config.MONGO_QUERY_SHAPE_LOG });
  const repos = createRepositories(mongo.db, cipher);
  await ensureIndexes(repos, retentionFrom(config));
  // The SDK's exporter port is bound by Runtime.install, which must come before any Temporal connection.
  const sdkMetricsPort = await freeLoopbackPort();
  installRuntimeLogger(logger, sdkMetricsPort);
  const metrics = await startWorkerMetricsServer(config, logger, sdkMetricsPort);
  // Pending deliveries: delivery documents, and the events of pipelines' queued batches.
  registerDeliveryQueueMetrics({
    pendingDeliveryCount: async () => (await repos.webhookStore.pendingDeliveryCount()) + (await repos.pipelineBatches.queuedEventCount()),
    nextDueAt: async () => {
      const [deliveries, batches] = await Promise.all([repos.webhookStore.nextDueAt(), repos.pipelineBatches.soonestDueAt()]);
      return earliestOf(deliveries, batches);
    },
  });
  registerLabOutboundMetrics(repos.labOutbound);
  const temporal = await connectTemporal(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE, config.TEMPORAL_TASK_QUEUE);
  const { worker, providerWorkers, connection, closeSenders } = await createWorker(config, repos, logger, temporal, sdkMetricsPort);
  await ensureStrandedWorkSweep(config, temporal, logger);
  await startProviderSubscriptionsSchedule(temporal, logger);

  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      // Ctrl-C in `npm run dev` delivers SIGINT to the whole group and the supervisor then sends SIGTERM: stop once
      // (a second worker.shutdown() throws IllegalStateError).
      if (stopping) return;
      stopping = true;
      logger.info({ signal, timeoutMs: config.SHUTDOWN_TIMEOUT_MS }, 'worker shutting down');
      for (const w of [worker, ...providerWorkers]) w.shutdown();
      // Whatever still holds the process (a connection that does not close while its server is down) does not
      // keep it past its timeout: what was in flight is retried by Temporal on another worker.
      setTimeout(() => {
        logger.error({ timeoutMs: config.SHUTDOWN_TIMEOUT_MS }, 'worker did not stop within SHUTDOWN_TIMEOUT_MS; exiting');
        process.exit(1);
      }, config.SHUTDOWN_TIMEOUT_MS).unref();
    });
  }
  logger.info({ taskQueue: config.TEMPORAL_TASK_QUEUE, temporal: config.TEMPORAL_ADDRESS, node: process.version }, 'worker running');
  const running = runUntilStopped([worker.run(), ...providerWorkers.map((w) => w.run())]);
  // GET /ready looks for a fresh heartbeat: Temporal lists a killed worker's poller for minutes.
  const heartbeat = startWorkerHeartbeat(repos, worker, config.TEMPORAL_TASK_QUEUE, logger);
  try {
    // Activities that ignored their cancellation are left to their retries on another worker.
    if ((await running).graceExpired) logger.warn('worker stopped without waiting for every activity');
  } finally {
    await heartbeat.stop();
  }
  await closeSenders();
  await metrics.close();
  await connection.close();
  await temporal.connection.close();
  await mongo.close();
  logger.info('worker stopped');
}

main().catch((err) => {
  console.error(`worker failed: ${(err as Error).message}`);
  process.exit(1);
});
