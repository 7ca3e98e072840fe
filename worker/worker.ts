import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel, type LogMetadata } from '@temporalio/worker';
import { createActivities } from '../activities';
import { createSenders } from '../activities/webhook-delivery';
import { activityMetrics } from './metrics-server';
import { loadLabCatalogue } from '../lib/labs/catalogue';
import type { Config } from '../lib/platform/config';
import type { Logger } from '../lib/platform/logger';
import type { Repositories } from '../lib/repositories';
import type { TemporalDeps } from '../lib/platform/temporal';

let runtimeInstalled = false;

/**
 * Routes the SDK's own logs (incl. workflow `log.*`) into our pino logger, and, given a port, has the SDK serve
 * its metrics in the Prometheus format on loopback there (the worker's /metrics appends them).
 */
export function installRuntimeLogger(logger: Logger, sdkMetricsPort: number | null = null): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const level = (logger.level === 'debug' || logger.level === 'trace' ? 'DEBUG' : 'INFO') as LogLevel;
  Runtime.install({
    ...(sdkMetricsPort ? { telemetryOptions: { metrics: { prometheus: { bindAddress: `127.0.0.1:${sdkMetricsPort}` } } } } : {}),
    logger: new DefaultLogger(level, (entry) => {
      const meta: LogMetadata = { ...entry.meta };
      const pinoLevel = entry.level.toLowerCase() as 'trace' | 'debug' | 'info' | 'warn' | 'error';
      logger[pinoLevel](meta, entry.message);
    }),
  });
}

export interface WorkerHandle {
  worker: Worker;
  connection: NativeConnection;
  /** Closes the connections to webhook endpoints and pipeline brokers (after the worker has stopped: they keep the process alive). */
  closeSenders(): Promise<void>;
}

export async function createWorker(config: Config, repos: Repositories, logger: Logger, temporal: TemporalDeps, sdkMetricsPort: number | null = null): Promise<WorkerHandle> {
  installRuntimeLogger(logger, sdkMetricsPort);
  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS });
  const senders = createSenders(config);
  const worker = await Worker.create({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    workflowsPath: require.resolve('../workflows'),
    activities: createActivities({ repos, config, logger, temporal, labCatalogue: loadLabCatalogue(), senders }),
    interceptors: { activity: [activityMetrics] },
    // SHUTDOWN_TIMEOUT_MS bounds the whole stop: activities get half of it to finish and are then cancelled; at 80%
    // the worker stops waiting for those that ignore it (Temporal retries them elsewhere), leaving time to close up.
    shutdownGraceTime: Math.floor(config.SHUTDOWN_TIMEOUT_MS / 2),
    shutdownForceTime: Math.floor(config.SHUTDOWN_TIMEOUT_MS * 0.8),
  });
  return { worker, connection, closeSenders: senders.close };
}
