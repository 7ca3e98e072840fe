import { setTimeout as sleep } from 'node:timers/promises';
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
 * How long the signaller gathers ids after a signal before it sends the next to the same applier. Every signal is a
 * workflow task (and history events) in Temporal: under a stream of results, a few signals a second carrying many ids
 * cost it far less than one per round trip, for at most this much more latency.
 */
const SIGNAL_GATHER_MS = 200;

/**
 * The listener's signals to the appliers: at most one on its way per account, and after it the ids stored within
 * SIGNAL_GATHER_MS go together in the next (a quiet account's first message goes at once). `settled` waits for the
 * signals not yet sent (the listener's close).
 */
export function labResultsSignaller(temporal: TemporalDeps, onFailure: (err: unknown, accountId: string, messageIds: string[]) => void) {
  const waiting = new Map<string, string[]>();
  const draining = new Map<string, Promise<void>>();
  async function drain(accountId: string): Promise<void> {
    for (let ids = waiting.get(accountId); ids?.length; ids = waiting.get(accountId)) {
      waiting.delete(accountId);
      await signalLabResults(temporal, accountId, ids).catch((err) => onFailure(err, accountId, ids!));
      await sleep(SIGNAL_GATHER_MS);
    }
  }
  return {
    tell(accountId: string, messageId: string): void {
      const ids = waiting.get(accountId) ?? [];
      ids.push(messageId);
      waiting.set(accountId, ids);
      if (draining.has(accountId)) return;
      draining.set(
        accountId,
        drain(accountId).finally(() => draining.delete(accountId)),
      );
    },
    async settled(): Promise<void> {
      while (draining.size) await Promise.all(draining.values());
    },
  };
}
