import type { Logger } from '../lib/platform/logger';
import { finishConnectionSteps, type ConnectionDeps } from '../lib/wearables/workflow-client';
import { finishBoundRegistration } from '../lib/labs/order-creation';
import type { LabOrderDeps } from '../lib/labs/workflow-client';

/**
 * The sweeper's repairs of writes whose workflow start or signal a crash cut off (README "Crash between a write and a
 * workflow start"); workflows/stranded-work-sweep.ts runs them (worker/stranded-work-sweep.ts says how often).
 */
export function createMaintenanceActivities(deps: ConnectionDeps & LabOrderDeps & { logger: Logger }) {
  return {
    /**
     * Finishes the steps (connected_sources, workflow start or stop) of connections whose connect or deregister
     * crashed before them: still marked CONNECTION_STEPS_GRACE_MS after the write. At most 100 a sweep; the next takes the rest.
     */
    async finishStrandedConnectionSteps(): Promise<{ finished: number }> {
      const stranded = await deps.repos.connections.withStepsPendingBefore(new Date(Date.now() - deps.config.CONNECTION_STEPS_GRACE_MS), 100);
      for (const connection of stranded) await finishConnectionSteps(deps, connection);
      if (stranded.length) deps.logger.info({ finished: stranded.length }, 'sweeper finished the pending steps of connections');
      return { finished: stranded.length };
    },

    /**
     * Finishes kit registrations whose request crashed between binding the patient to the order and telling the
     * order's workflow (still marked CONNECTION_STEPS_GRACE_MS after the bind): the workflow takes it now, or refuses it and the
     * patient is taken off again. A kit whose workflow already took it only loses the mark. At most 100 a sweep.
     */
    async finishBoundRegistrations(): Promise<{ finished: number }> {
      const kits = await deps.repos.labOrders.registrationsPendingBefore(new Date(Date.now() - deps.config.CONNECTION_STEPS_GRACE_MS), 100);
      for (const kit of kits) {
        const registrationId = kit.registration_id!;
        if (kit.low_level_status !== 'awaiting_registration') await deps.repos.labOrders.registrationSettled(kit._id, registrationId);
        else
          await finishBoundRegistration(deps, kit, kit.user_id, registrationId).catch((err) =>
            deps.logger.warn(
              { err, orderId: kit._id },
              'could not finish a bound kit registration (refused: its patient was taken off; otherwise the next sweep tries again)',
            ),
          );
      }
      if (kits.length) deps.logger.info({ finished: kits.length }, 'sweeper finished bound kit registrations');
      return { finished: kits.length };
    },
  };
}

export type MaintenanceActivities = ReturnType<typeof createMaintenanceActivities>;
