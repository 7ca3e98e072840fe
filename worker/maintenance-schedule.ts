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
  await terminateRetiredRuns(temporal, logger);
}

const RETIRED_WORKFLOW_TYPE = 'maintenanceWorkflow';

/**
 * A run the Schedule started before it was deleted would fail its workflow task every few seconds for ever (this
 * worker no longer hosts its type): terminate such runs. Best effort: a failure here is logged, not fatal.
 */
async function terminateRetiredRuns(temporal: TemporalDeps, logger: Logger): Promise<void> {
  try {
    const query = `WorkflowType = '${RETIRED_WORKFLOW_TYPE}' AND ExecutionStatus = 'Running' AND TaskQueue = '${temporal.taskQueue}'`;
    for await (const run of temporal.client.workflow.list({ query })) {
      await temporal.client.workflow.getHandle(run.workflowId, run.runId).terminate('maintenanceWorkflow is retired: TTL indexes expire documents now');
      logger.info({ workflowId: run.workflowId }, 'retired maintenance run terminated');
    }
  } catch (err) {
    logger.warn({ err }, 'could not look for retired maintenance runs to terminate');
  }
}
