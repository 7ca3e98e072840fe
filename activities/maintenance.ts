import type { Logger } from '../lib/platform/logger';
import { finishConnectionSteps, type ConnectionDeps } from '../lib/wearables/workflow-client';
import { finishBoundRegistration } from '../lib/labs/order-creation';
import type { LabOrderDeps } from '../lib/labs/workflow-client';
import { signalLabResults } from '../lib/labs/lab-results-client';

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

    /**
     * Lab result messages the MLLP listener stored and acknowledged but whose applier never heard of them (the api died
     * between the store and the signal, or Temporal was unreachable): still `received` CONNECTION_STEPS_GRACE_MS after
     * they came, they are signalled again (the applier applies a message once, whatever it is told). At most 100 a sweep.
     */
    async resumeStrandedLabMessages(): Promise<{ resumed: number }> {
      const stranded = await deps.repos.labInbound.receivedBefore(new Date(Date.now() - deps.config.CONNECTION_STEPS_GRACE_MS), 100);
      for (const message of stranded) await signalLabResults(deps.temporal, message.account_id, message._id);
      if (stranded.length) deps.logger.info({ resumed: stranded.length }, 'sweeper resumed stranded lab result messages');
      return { resumed: stranded.length };
    },
  };
}

export type MaintenanceActivities = ReturnType<typeof createMaintenanceActivities>;
