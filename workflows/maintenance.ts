import { proxyActivities } from '@temporalio/workflow';
import type { MaintenanceActivities } from '../activities/maintenance';

const { pruneExpiredIdempotencyKeys, pruneWebhookHistory, pruneStaleWorkerHeartbeats, pruneExpiredLinkTokens } = proxyActivities<MaintenanceActivities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

export interface MaintenanceResult {
  idempotencyKeysRemoved: number;
  webhookHistoryRemoved: { events: number; deliveries: number; attempts: number };
  workerHeartbeatsRemoved: number;
  /** Absent in results of runs before link tokens were swept. */
  linkTokensRemoved?: number;
}

/**
 * Retention, run hourly by the Temporal Schedule `maintenance:<taskQueue>` (FerretDB has no TTL indexes):
 * stored X-Idempotency-Key responses older than IDEMPOTENCY_KEY_RETENTION_SECONDS, and webhook events,
 * finished deliveries and attempts older than WEBHOOK_RETENTION_DAYS, heartbeats of dead workers, and link
 * tokens an hour past their expiry.
 */
export async function maintenanceWorkflow(): Promise<MaintenanceResult> {
  return {
    idempotencyKeysRemoved: await pruneExpiredIdempotencyKeys(),
    webhookHistoryRemoved: await pruneWebhookHistory(),
    workerHeartbeatsRemoved: await pruneStaleWorkerHeartbeats(),
    // Last, so a run in flight during an upgrade replays its earlier steps unchanged.
    linkTokensRemoved: await pruneExpiredLinkTokens(),
  };
}
