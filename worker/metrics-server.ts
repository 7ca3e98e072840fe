import http from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import type { ActivityInboundCallsInterceptor, ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Config } from '../lib/platform/config';
import type { Logger } from '../lib/platform/logger';
import { activityDuration, activityExecutions, bearerMatches, metricsText } from '../lib/platform/metrics';

/**
 * The worker's `GET /metrics` (WORKER_METRICS_PORT): its own registry (activities, deliveries, database and
 * Temporal calls, the delivery queue) followed by the Temporal SDK's metrics (workflow and activity task
 * latencies, poller counts, sticky cache…), which the SDK's core serves on a loopback port of its own.
 */
export interface WorkerMetricsServer {
  port: number;
  close(): Promise<void>;
}

/** A free loopback port for the SDK's Prometheus exporter (bound by Runtime.install, before any connection). */
export async function freeLoopbackPort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export async function startWorkerMetricsServer(config: Config, logger: Logger, sdkMetricsPort: number | null): Promise<WorkerMetricsServer> {
  const server = http.createServer((req, res) => {
    void (async () => {
      if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('GET /metrics\n');
        return;
      }
      if (config.METRICS_TOKEN && !bearerMatches(req.headers.authorization, config.METRICS_TOKEN)) {
        res.writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer' }).end('Authorization: Bearer <METRICS_TOKEN> needed\n');
        return;
      }
      const own = await metricsText();
      const sdk = sdkMetricsPort
        ? await fetch(`http://127.0.0.1:${sdkMetricsPort}/metrics`, { signal: AbortSignal.timeout(2000) })
            .then((r) => r.text())
            .catch((err: Error) => `# the Temporal SDK's metrics did not answer: ${err.message}\n`)
        : '';
      res.writeHead(200, { 'content-type': own.contentType }).end(`${own.body}\n${sdk}`);
    })().catch((err: Error) => {
      logger.warn({ err }, 'worker metrics: scrape failed');
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new Error(
          `The worker's metrics port ${config.WORKER_METRICS_HOST}:${config.WORKER_METRICS_PORT} is not free (${err.code}); set WORKER_METRICS_PORT (0: any free port).`,
        ),
      ),
    );
    server.listen(config.WORKER_METRICS_PORT, config.WORKER_METRICS_HOST, resolve);
  });
  const { port } = server.address() as AddressInfo;
  logger.info({ port, host: config.WORKER_METRICS_HOST }, 'worker metrics on GET /metrics');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Counts and times each activity execution by type and outcome (a worker activity interceptor). */
export const activityMetrics: ActivityInterceptorsFactory = (ctx) => {
  const inbound: ActivityInboundCallsInterceptor = {
    async execute(input, next) {
      const activity = ctx.info.activityType;
      const end = activityDuration.startTimer({ activity });
      try {
        const result = await next(input);
        activityExecutions.inc({ activity, outcome: 'completed' });
        return result;
      } catch (err) {
        activityExecutions.inc({ activity, outcome: 'failed' });
        throw err;
      } finally {
        end();
      }
    },
  };
  return { inbound };
};
