import { proxyActivities } from '@temporalio/workflow';
import type { MaintenanceActivities } from '../activities/maintenance';

const { pruneExpiredIdempotencyKeys } = proxyActivities<MaintenanceActivities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/**
 * Retention (run hourly by the Temporal Schedule `maintenance:<taskQueue>`, since FerretDB has no TTL
 * indexes): removes stored X-Idempotency-Key responses older than IDEMPOTENCY_KEY_RETENTION_SECONDS.
 */
export async function maintenanceWorkflow(): Promise<{ idempotencyKeysRemoved: number }> {
  return { idempotencyKeysRemoved: await pruneExpiredIdempotencyKeys() };
}
