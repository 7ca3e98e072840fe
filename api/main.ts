import { loadPayorCatalogue } from '../lib/insurance/payor-catalogue';
import type { Server } from 'node:http';
import { loadProviderCatalogue } from '../lib/wearables/provider-catalogue';
import { dataCipher, loadConfig, publicBaseUrl } from '../lib/platform/config';
import { EventPublisher } from '../lib/events/publisher';
import { createLogger } from '../lib/platform/logger';
import { connectMongo } from '../lib/platform/database/mongo';
import { createRepositories, ensureIndexes } from '../lib/repositories';
import { retentionFrom } from '../lib/platform/database/indexes';
import { connectTemporal } from '../lib/platform/temporal';
import { loadLabCatalogue } from '../lib/labs/catalogue';
import { listenApi } from './app';
import { listenerTlsFrom, startLabListener } from '../lib/labs/lab-listener';
import { initProcessMetrics } from '../lib/platform/metrics';

/** API process: listens, and on SIGTERM stops accepting, finishes in-flight requests, then closes. */
async function main(): Promise<void> {
  const config = loadConfig();
  initProcessMetrics('api');
  const cipher = dataCipher(config);
  const logger = createLogger(config.LOG_LEVEL, 'api');
  const providers = loadProviderCatalogue();
  const labCatalogue = loadLabCatalogue();
  const payors = loadPayorCatalogue();
  const mongo = await connectMongo(config.MONGO_URL, config.MONGO_DB, { queryShapeLog: config.MONGO_QUERY_SHAPE_LOG });
  const repos = createRepositories(mongo.db, cipher);
  await ensureIndexes(repos, retentionFrom(config));
  const temporal = await connectTemporal(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE, config.TEMPORAL_TASK_QUEUE, { failFast: true });
  const publisher = new EventPublisher({ config, repos, temporal, logger });
  const deps = { config, logger, db: mongo.db, repos, temporal, providers, labCatalogue, payors, publisher };
  const server: Server = await listenApi(deps, config.API_PORT, config.API_HOST);
  // Lab results over MLLP (lib/labs/lab-listener.ts): only when LAB_MLLP_PORT is set.
  const labListener =
    config.LAB_MLLP_PORT === undefined
      ? null
      : await startLabListener(deps, { port: config.LAB_MLLP_PORT, host: config.LAB_MLLP_HOST ?? config.API_HOST, tls: listenerTlsFrom(config) });
  if (labListener) logger.info({ port: labListener.port, tls: Boolean(config.LAB_MLLP_TLS_CERT) }, 'lab results MLLP listener listening');
  logger.info(
    { url: publicBaseUrl(config), environment: config.DEPLOYMENT_ENVIRONMENT, region: config.DEPLOYMENT_REGION, node: process.version },
    'api listening',
  );

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'api shutting down');
    const force = setTimeout(() => server.closeAllConnections(), config.SHUTDOWN_TIMEOUT_MS);
    force.unref();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    });
    clearTimeout(force);
    // Messages in progress are stored and answered before it closes; a lab resends what got no ACK.
    await labListener?.close();
    await publisher.settle();
    await temporal.connection.close();
    await mongo.close();
    logger.info('api stopped');
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((err) => {
  console.error(`api failed to start: ${(err as Error).message}`);
  process.exit(1);
});
