import type { Config } from '../lib/config';
import type { Repositories } from '../lib/repositories';

export function createMaintenanceActivities(deps: { repos: Repositories; config: Config }) {
  return {
    async pruneExpiredIdempotencyKeys(): Promise<number> {
      return deps.repos.labOrders.pruneIdempotencyKeys(new Date(Date.now() - deps.config.IDEMPOTENCY_KEY_RETENTION_SECONDS * 1000));
    },
  };
}

export type MaintenanceActivities = ReturnType<typeof createMaintenanceActivities>;
