import type { Config } from '../lib/platform/config';
import type { Logger } from '../lib/platform/logger';
import type { TemporalDeps } from '../lib/platform/temporal';
import { workflowIds } from '../workflows/ids';
import { webhookSweeperWorkflow } from '../workflows/webhook-sweeper';

/** Starts this task queue's sweeper (webhooks, connections' pending steps) if it is not running (idempotent: every worker calls it at boot). */
export async function startWebhookSweeper(config: Config, temporal: TemporalDeps, logger: Logger): Promise<void> {
  try {
    await temporal.client.workflow.start(webhookSweeperWorkflow, {
      workflowId: workflowIds.webhookSweeper(temporal.taskQueue),
      taskQueue: temporal.taskQueue,
      args: [{ intervalMs: config.WEBHOOK_SWEEP_INTERVAL_MS, graceMs: config.WEBHOOK_SWEEP_GRACE_MS, connectionStepsGraceMs: config.CONNECTION_STEPS_GRACE_MS }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
  } catch (err) {
    logger.error({ err }, 'could not start the webhook sweeper');
    throw err;
  }
}
