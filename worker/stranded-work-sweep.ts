import { ScheduleNotFoundError } from '@temporalio/client';
import type { Config } from '../lib/platform/config';
import type { Logger } from '../lib/platform/logger';
import type { TemporalDeps } from '../lib/platform/temporal';
import { workflowIds } from '../workflows/ids';
import { strandedWorkSweepWorkflow, sweepNowSignal } from '../workflows/stranded-work-sweep';

/**
 * How often the sweep looks, unless WEBHOOK_SWEEP_INTERVAL_MS says: as often as the longest grace period it checks.
 * A repair takes only work older than its grace (WEBHOOK_SWEEP_GRACE_MS, 15 s, for a fan-out or a dispatcher's wake;
 * CONNECTION_STEPS_GRACE_MS, 60 s, for the second step of a two-step write), so work a crash stranded waits its grace
 * whatever the interval. Looking once per the longest grace finishes a two-step write within twice its grace (2 min)
 * and repairs a webhook within 75 s: late by about what the graces already accept, once a minute instead of twice.
 */
export function strandedWorkSweepEveryMs(config: Config): number {
  return config.WEBHOOK_SWEEP_INTERVAL_MS ?? Math.max(config.WEBHOOK_SWEEP_GRACE_MS, config.CONNECTION_STEPS_GRACE_MS);
}

/**
 * The `stranded-work-sweep:<task queue>` workflow (workflows/stranded-work-sweep.ts), one long-lived run that sweeps
 * every strandedWorkSweepEveryMs: every worker signals it at boot (starting it when it is not running, e.g. after an
 * operator terminated it) with its interval, and it sweeps at once. Earlier versions ran it from a Temporal Schedule of
 * the same id, one completed run per sweep; that Schedule is deleted here.
 */
export async function ensureStrandedWorkSweep(config: Config, temporal: TemporalDeps, logger: Logger): Promise<void> {
  const workflowId = workflowIds.strandedWorkSweep(temporal.taskQueue);
  const everyMs = strandedWorkSweepEveryMs(config);
  await temporal.client.workflow.signalWithStart(strandedWorkSweepWorkflow, {
    workflowId,
    taskQueue: temporal.taskQueue,
    args: [{ everyMs }],
    signal: sweepNowSignal,
    signalArgs: [{ everyMs }],
  });
  logger.info({ workflowId, everyMs }, 'stranded work sweep running');
  try {
    await temporal.client.schedule.getHandle(workflowId).delete();
    logger.info({ scheduleId: workflowId }, 'deleted the Schedule that ran the stranded work sweep before');
  } catch (err) {
    if (!(err instanceof ScheduleNotFoundError)) throw err;
  }
}
