import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel, type LogMetadata } from '@temporalio/worker';
import { createActivities } from '../activities';
import { createSenders } from '../activities/webhook-delivery';
import { providerTaskQueue } from '../activities/wearables';
import { realIntegrations } from '../lib/wearables/providers/registry';
import { activityMetrics } from './metrics-server';
import { createLabConnections } from '../lib/labs/lab-connections';
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
  const bridge = sdkLogBridge(logger);
  Runtime.install({
    telemetryOptions: {
      // The SDK core's own logs (Rust) go through our logger too, instead of raw coloured lines on stderr.
      logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} },
      ...(sdkMetricsPort ? { metrics: { prometheus: { bindAddress: `127.0.0.1:${sdkMetricsPort}` } } } : {}),
    },
    logger: new DefaultLogger(level, bridge),
  });
}

/** How long the same SDK message is held back after it was logged (a Temporal outage repeats one warning per poll). */
const REPEAT_WINDOW_MS = 30_000;
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g;

/**
 * SDK log entries as one pino line each: colour codes stripped; a multi-line message (webpack's bundle report) keeps
 * its first line, with the whole text at debug; the same message again within REPEAT_WINDOW_MS is counted rather than
 * logged, and its next line says how many were held back.
 */
export function sdkLogBridge(logger: Logger, now = () => Date.now()) {
  const recent = new Map<string, { at: number; held: number }>();
  return (entry: { level: LogLevel; message: string; meta?: LogMetadata }) => {
    // The provider workers host activities only, by design (createProviderWorkers): not worth a warning each.
    if (entry.message.startsWith('No workflows registered')) entry = { ...entry, level: 'DEBUG' };
    const pinoLevel = entry.level.toLowerCase() as 'trace' | 'debug' | 'info' | 'warn' | 'error';
    const text = entry.message.replace(ANSI, '');
    const [first, ...rest] = text.split('\n');
    const meta: LogMetadata = { ...entry.meta };
    if (rest.length) {
      meta.more_lines = rest.length;
      logger.debug({ ...entry.meta, text }, first);
    }
    const key = `${pinoLevel}:${first}`;
    const seen = recent.get(key);
    if (seen && now() - seen.at < REPEAT_WINDOW_MS) {
      seen.held++;
      return;
    }
    if (seen?.held) meta.repeated = seen.held;
    recent.set(key, { at: now(), held: 0 });
    if (recent.size > 1_000) recent.delete(recent.keys().next().value!);
    logger[pinoLevel](meta, first);
  };
}

export interface WorkerHandle {
  worker: Worker;
  /** One per real provider: its page activities, on the provider's own task queue. */
  providerWorkers: Worker[];
  connection: NativeConnection;
  /** Closes the connections to webhook endpoints, pipeline brokers and laboratories (after the worker has stopped: they keep the process alive). */
  closeSenders(): Promise<void>;
}

export async function createWorker(
  config: Config,
  repos: Repositories,
  logger: Logger,
  temporal: TemporalDeps,
  sdkMetricsPort: number | null = null,
): Promise<WorkerHandle> {
  installRuntimeLogger(logger, sdkMetricsPort);
  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS });
  const senders = createSenders(config);
  const labConnections = createLabConnections({ log: logger, outbound: repos.labOutbound });
  const activities = createActivities({ repos, config, logger, temporal, labCatalogue: loadLabCatalogue(), senders, labConnections });
  const worker = await Worker.create({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    workflowsPath: require.resolve('../workflows'),
    activities,
    interceptors: { activity: [activityMetrics] },
    // SHUTDOWN_TIMEOUT_MS bounds the whole stop: activities get half of it to finish and are then cancelled; at 80%
    // the worker stops waiting for those that ignore it (Temporal retries them elsewhere), leaving time to close up.
    shutdownGraceTime: Math.floor(config.SHUTDOWN_TIMEOUT_MS / 2),
    shutdownForceTime: Math.floor(config.SHUTDOWN_TIMEOUT_MS * 0.8),
  });
  const providerWorkers = await createProviderWorkers(config, connection, activities);
  const closeSenders = async () => {
    await senders.close();
    await labConnections.close();
  };
  return { worker, providerWorkers, connection, closeSenders };
}

/**
 * A worker per real provider on the provider's own task queue, running only its page activities, so that pages
 * waiting for their app's budget never hold up the main queue's work. The queue has no activity rate: a rate is per
 * queue, so per provider, and would make every app of a provider (the deployment's, each team's own) share one app's
 * budget. Each request draws from its own app's budget in the store instead (lib/wearables/providers/budget.ts):
 * 500 users connected at once wait for WHOOP's 100 requests a minute of their app instead of drawing 429s.
 */
export async function createProviderWorkers(config: Config, connection: NativeConnection, activities: object): Promise<Worker[]> {
  return Promise.all(
    realIntegrations().map((integration) =>
      Worker.create({
        connection,
        namespace: config.TEMPORAL_NAMESPACE,
        taskQueue: providerTaskQueue(config.TEMPORAL_TASK_QUEUE, integration.slug),
        activities,
        interceptors: { activity: [activityMetrics] },
        shutdownGraceTime: Math.floor(config.SHUTDOWN_TIMEOUT_MS / 2),
        shutdownForceTime: Math.floor(config.SHUTDOWN_TIMEOUT_MS * 0.8),
      }),
    ),
  );
}
