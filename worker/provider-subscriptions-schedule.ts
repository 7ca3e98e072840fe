import { ScheduleAlreadyRunning, ScheduleOverlapPolicy } from '@temporalio/client';
import type { Logger } from '../lib/platform/logger';
import type { TemporalDeps } from '../lib/platform/temporal';
import { workflowIds } from '../workflows/ids';
import { providerSubscriptionsWorkflow } from '../workflows/provider-subscriptions';

/** How often the providers' push subscriptions are checked (Oura's expire after about 90 days; renewal is days early). */
const EVERY = '12h';

/**
 * The `provider-subscriptions:<task queue>` Temporal Schedule: every 12 hours it creates the providers' missing push
 * subscriptions and renews those about to expire (lib/wearables/providers/subscriptions.ts). A Schedule, not a loop:
 * operators see its runs, pause it and trigger it in the Temporal UI. Created by the worker at boot (an existing one is
 * kept) and triggered once, so a newly configured app is subscribed without waiting 12 hours.
 */
export async function startProviderSubscriptionsSchedule(temporal: TemporalDeps, logger: Logger): Promise<void> {
  const scheduleId = workflowIds.providerSubscriptionsSchedule(temporal.taskQueue);
  try {
    await temporal.client.schedule.create({
      scheduleId,
      spec: { intervals: [{ every: EVERY }] },
      action: {
        type: 'startWorkflow',
        workflowType: providerSubscriptionsWorkflow,
        taskQueue: temporal.taskQueue,
        workflowId: workflowIds.providerSubscriptionsRun(temporal.taskQueue),
      },
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
    });
    logger.info({ scheduleId, every: EVERY }, 'provider subscriptions schedule created');
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  await temporal.client.schedule.getHandle(scheduleId).trigger(ScheduleOverlapPolicy.SKIP);
}
