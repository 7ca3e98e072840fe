import { ScheduleNotFoundError } from '@temporalio/client';
import type { Logger } from '../lib/platform/logger';
import type { TemporalDeps } from '../lib/platform/temporal';
import { workflowIds } from '../workflows/ids';

/**
 * Earlier versions removed expired documents with an hourly Temporal Schedule; TTL indexes do it now
 * (lib/platform/database/indexes.ts, Retention). Every worker deletes that Schedule at boot, if it is still there, so
 * it starts no more runs of a workflow this worker no longer hosts.
 */
export async function deleteRetiredMaintenanceSchedule(temporal: TemporalDeps, logger: Logger): Promise<void> {
  const scheduleId = workflowIds.retiredMaintenanceSchedule(temporal.taskQueue);
  try {
    await temporal.client.schedule.getHandle(scheduleId).delete();
    logger.info({ scheduleId }, 'retired maintenance schedule deleted (TTL indexes expire documents now)');
  } catch (err) {
    if (!(err instanceof ScheduleNotFoundError)) throw err;
  }
}
