import { ScheduleAlreadyRunning, ScheduleOverlapPolicy } from '@temporalio/client';
import type { Config } from '../lib/platform/config';
import type { Logger } from '../lib/platform/logger';
import type { TemporalDeps } from '../lib/platform/temporal';
import { workflowIds } from '../workflows/ids';
import { strandedWorkSweepWorkflow } from '../workflows/stranded-work-sweep';

/** A Schedule's interval has a granularity of a second. */
const MIN_INTERVAL_MS = 1000;

/**
 * The `stranded-work-sweep:<task queue>` Temporal Schedule: every WEBHOOK_SWEEP_INTERVAL_MS it starts one sweep
 * (workflows/stranded-work-sweep.ts), skipping a start while the previous sweep still runs. A Schedule, not a loop, so
 * operators see its runs, pause it and trigger it in the Temporal UI. Every worker makes it at boot and sets its
 * interval from the current configuration (a changed value reaches it with the next restart of any worker).
 */
export async function ensureStrandedWorkSweepSchedule(config: Config, temporal: TemporalDeps, logger: Logger): Promise<void> {
  const scheduleId = workflowIds.strandedWorkSweepSchedule(temporal.taskQueue);
  const every = Math.max(MIN_INTERVAL_MS, config.WEBHOOK_SWEEP_INTERVAL_MS);
  const action = { type: 'startWorkflow' as const, workflowType: strandedWorkSweepWorkflow, taskQueue: temporal.taskQueue, workflowId: workflowIds.strandedWorkSweepRun(temporal.taskQueue) };
  try {
    await temporal.client.schedule.create({ scheduleId, spec: { intervals: [{ every }] }, action, policies: { overlap: ScheduleOverlapPolicy.SKIP } });
    logger.info({ scheduleId, everyMs: every }, 'stranded work sweep schedule created');
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    await temporal.client.schedule.getHandle(scheduleId).update((previous) => ({ ...previous, spec: { intervals: [{ every }] }, action }));
  }
}
