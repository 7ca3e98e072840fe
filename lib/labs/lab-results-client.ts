import type { TemporalDeps } from '../platform/temporal';
import { workflowIds } from '../../workflows/ids';
import { labMessageStoredSignal, labResultsWorkflow } from '../../workflows/lab-results';

/**
 * Tells the lab account's applier workflow (`lab-results:<accountId>`) that messages are stored, starting it when it
 * is not running (signal-with-start: one running applier per account). The listener calls it after the ACK is on its
 * way; if this fails (Temporal unreachable), the stranded-work sweep sends it later (activities/maintenance.ts).
 */
export async function signalLabResults(temporal: TemporalDeps, accountId: string, messageIds: string[]): Promise<void> {
  await temporal.client.workflow.signalWithStart(labResultsWorkflow, {
    workflowId: workflowIds.labResults(accountId),
    taskQueue: temporal.taskQueue,
    args: [{ accountId }],
    signal: labMessageStoredSignal,
    signalArgs: [{ messageIds }],
  });
}

/**
 * The listener's signals to the appliers: at most one on its way per account; the ids stored meanwhile go together in
 * the next. Under a burst of results this is one signal (one workflow task) per round trip instead of per message.
 */
export function labResultsSignaller(temporal: TemporalDeps, onFailure: (err: unknown, accountId: string, messageIds: string[]) => void) {
  const waiting = new Map<string, string[]>();
  const sending = new Set<string>();
  async function drain(accountId: string): Promise<void> {
    sending.add(accountId);
    try {
      for (let ids = waiting.get(accountId); ids?.length; ids = waiting.get(accountId)) {
        waiting.delete(accountId);
        await signalLabResults(temporal, accountId, ids).catch((err) => onFailure(err, accountId, ids!));
      }
    } finally {
      sending.delete(accountId);
    }
  }
  return (accountId: string, messageId: string) => {
    const ids = waiting.get(accountId) ?? [];
    ids.push(messageId);
    waiting.set(accountId, ids);
    if (!sending.has(accountId)) void drain(accountId);
  };
}
