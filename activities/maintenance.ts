import type { Logger } from '../lib/platform/logger';
import { finishConnectionSteps, type ConnectionDeps } from '../lib/wearables/workflow-client';

/**
 * The sweeper's repairs of writes whose workflow start or signal a crash cut off (README "Crash between a write and a
 * workflow start"); workflows/webhook-sweeper.ts runs them every WEBHOOK_SWEEP_INTERVAL_MS.
 */
export function createMaintenanceActivities(deps: ConnectionDeps & { logger: Logger }) {
  return {
    /**
     * Finishes the steps (connected_sources, workflow start or stop) of connections whose connect or deregister
     * crashed before them: still marked `graceMs` after the write. At most 100 a sweep; the next takes the rest.
     */
    async finishStrandedConnectionSteps(input: { graceMs: number }): Promise<{ finished: number }> {
      const stranded = await deps.repos.connections.withStepsPendingBefore(new Date(Date.now() - input.graceMs), 100);
      for (const connection of stranded) await finishConnectionSteps(deps, connection);
      if (stranded.length) deps.logger.info({ finished: stranded.length }, 'sweeper finished the pending steps of connections');
      return { finished: stranded.length };
    },
  };
}

export type MaintenanceActivities = ReturnType<typeof createMaintenanceActivities>;
