import { proxyActivities } from '@temporalio/workflow';
import type { WebhookDeliveryActivities } from '../activities/webhook-delivery';
import type { MaintenanceActivities } from '../activities/maintenance';

const sweepOptions = {
  // Short: a sweep takes well under a second, and a sweep lost with a crashed worker is retried this soon.
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
} as const;
const { sweepWebhooks } = proxyActivities<WebhookDeliveryActivities>(sweepOptions);
const { finishStrandedConnectionSteps, finishBoundRegistrations } = proxyActivities<MaintenanceActivities>(sweepOptions);

/**
 * One sweep of the work a crash left stranded between a write and the workflow step that follows it: events whose
 * fan-out did not finish and destinations with overdue deliveries whose dispatcher missed its wake, connections whose
 * connect or deregister stopped before starting or stopping their workflow, and kits whose registration was bound but
 * not taken by their order's workflow. Started by the `stranded-work-sweep:<task queue>` Schedule
 * (worker/stranded-work-sweep-schedule.ts); each repair reads its grace period from the current configuration.
 */
export async function strandedWorkSweepWorkflow(): Promise<void> {
  await sweepWebhooks();
  await finishStrandedConnectionSteps();
  await finishBoundRegistrations();
}
