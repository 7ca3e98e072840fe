import type { Config } from '../lib/config';
import type { Repositories } from '../lib/repositories';
import { WORKER_HEARTBEAT_RETENTION_MS } from '../lib/repositories/workers';

const DAY_MS = 24 * 60 * 60 * 1000;

export function createMaintenanceActivities(deps: { repos: Repositories; config: Config }) {
  return {
    async pruneExpiredIdempotencyKeys(): Promise<number> {
      return deps.repos.labOrders.pruneIdempotencyKeys(new Date(Date.now() - deps.config.IDEMPOTENCY_KEY_RETENTION_SECONDS * 1000));
    },

    /** The webhook log's retention (WEBHOOK_RETENTION_DAYS): events, finished deliveries and attempts. */
    async pruneWebhookHistory(): Promise<{ events: number; deliveries: number; attempts: number }> {
      return deps.repos.webhookStore.removeOlderThan(new Date(Date.now() - deps.config.WEBHOOK_RETENTION_DAYS * DAY_MS));
    },

    /** Link tokens an hour past their expiry (and their use records): they can no longer be used. */
    async pruneExpiredLinkTokens(): Promise<number> {
      return deps.repos.linkTokens.removeExpired(new Date(Date.now() - 60 * 60 * 1000));
    },

    /** Heartbeats left by workers of this task queue that died without removing theirs. */
    async pruneStaleWorkerHeartbeats(): Promise<number> {
      return deps.repos.workers.removeOlderThan(deps.config.TEMPORAL_TASK_QUEUE, new Date(Date.now() - WORKER_HEARTBEAT_RETENTION_MS));
    },
  };
}

export type MaintenanceActivities = ReturnType<typeof createMaintenanceActivities>;
