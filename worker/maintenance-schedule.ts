import { ScheduleAlreadyRunning } from '@temporalio/client';
import type { Logger } from '../lib/logger';
import type { TemporalDeps } from '../lib/temporal';
import { workflowIds } from '../workflows/ids';
import { maintenanceWorkflow } from '../workflows/maintenance';

/** Creates this task queue's hourly maintenance Schedule if it does not exist (every worker calls it at boot). */
export async function ensureMaintenanceSchedule(temporal: TemporalDeps, logger: Logger): Promise<void> {
  const scheduleId = workflowIds.maintenanceSchedule(temporal.taskQueue);
  try {
    await temporal.client.schedule.create({
      scheduleId,
      spec: { intervals: [{ every: '1 hour' }] },
      action: { type: 'startWorkflow', workflowType: maintenanceWorkflow, taskQueue: temporal.taskQueue, args: [] },
      policies: { overlap: 'SKIP', catchupWindow: '1 hour' },
    });
    logger.info({ scheduleId }, 'maintenance schedule created');
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
}
