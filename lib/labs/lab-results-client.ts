import type { TemporalDeps } from '../platform/temporal';
import { workflowIds } from '../../workflows/ids';
import { labMessageStoredSignal, labResultsWorkflow } from '../../workflows/lab-results';

/**
 * Tells the lab account's applier workflow (`lab-results:<accountId>`) that a message is stored, starting it when it
 * is not running (signal-with-start: one running applier per account). The listener calls it after the ACK is on its
 * way; if this fails (Temporal unreachable), the stranded-work sweep sends it later (activities/maintenance.ts).
 */
export async function signalLabResults(temporal: TemporalDeps, accountId: string, messageId: string): Promise<void> {
  await temporal.client.workflow.signalWithStart(labResultsWorkflow, {
    workflowId: workflowIds.labResults(accountId),
    taskQueue: temporal.taskQueue,
    args: [{ accountId }],
    signal: labMessageStoredSignal,
    signalArgs: [{ messageId }],
  });
}
