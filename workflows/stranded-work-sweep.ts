import { condition, continueAsNew, defineSignal, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { WebhookDeliveryActivities } from '../activities/webhook-delivery';
import type { MaintenanceActivities } from '../activities/maintenance';

const sweepOptions = {
  // Short: a sweep takes well under a second, and a sweep lost with a crashed worker is retried this soon.
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
} as const;
const { sweepWebhooks } = proxyActivities<WebhookDeliveryActivities>(sweepOptions);
const { finishStrandedConnectionSteps, finishBoundRegistrations, resumeStrandedLabMessages } = proxyActivities<MaintenanceActivities>(sweepOptions);

/** Sweeps in one run before it continues as new: about 25 history events each, so a run stays near 5,000 events. */
const SWEEPS_PER_RUN = 200;

export interface StrandedWorkSweepInput {
  /** Time between sweeps. */
  everyMs: number;
  /** A sweep was asked for (sweepNowSignal) during the previous run's last sweep. */
  sweepNow?: boolean;
}

/**
 * Sweep at once; with `everyMs`, sweep that often from then on. Every worker sends it at boot with its configuration
 * (signal-with-start), and an operator may send it by hand (`{}`) from the Temporal UI or CLI.
 */
export const sweepNowSignal = defineSignal<[{ everyMs?: number }]>('sweepNow');

/**
 * The sweep of the work a crash left stranded between a write and the workflow step that follows it: events whose
 * fan-out did not finish and destinations with overdue deliveries whose dispatcher missed its wake, connections whose
 * connect or deregister stopped before starting or stopping their workflow, kits whose registration was bound but
 * not taken by their order's workflow, and lab result messages stored and acknowledged whose applier was never told. Each repair reads its grace period from the current configuration.
 *
 * One long-lived workflow per task queue, `stranded-work-sweep:<task queue>` (worker/stranded-work-sweep.ts starts it):
 * it sweeps, waits on a timer, and continues as new every SWEEPS_PER_RUN sweeps, so the Temporal UI's workflow list
 * holds one running row and a few closed ones a day, not a completed run per sweep.
 */
export async function strandedWorkSweepWorkflow(input: StrandedWorkSweepInput): Promise<void> {
  let everyMs = input.everyMs;
  let sweepNow = input.sweepNow ?? false;
  setHandler(sweepNowSignal, (request) => {
    sweepNow = true;
    if (request.everyMs) everyMs = request.everyMs;
  });
  for (let sweeps = 0; sweeps < SWEEPS_PER_RUN && !workflowInfo().continueAsNewSuggested; sweeps++) {
    await condition(() => sweepNow, everyMs);
    sweepNow = false;
    await sweepWebhooks();
    await finishStrandedConnectionSteps();
    await finishBoundRegistrations();
    await resumeStrandedLabMessages();
  }
  // The handler only sets state, so a signal that came during the last sweep is carried, not lost.
  await continueAsNew<typeof strandedWorkSweepWorkflow>({ everyMs, sweepNow });
}
