import { condition, continueAsNew, defineSignal, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { LabResultsActivities } from '../activities/lab-results';

/** A message the MLLP listener stored for this workflow's lab account (signal-with-start; also the stranded-work sweep). */
export const labMessageStoredSignal = defineSignal<[{ messageId: string }]>('labMessageStored');

export interface LabResultsInput {
  accountId: string;
  /** Messages carried over from the previous run (continue-as-new). */
  pending?: string[];
}

// A recorded activity (not a local one): it hands results to orders' workflows and waits for them to record them, and
// a write from a lost workflow task must not replay over itself. Retried until it succeeds: a message is never dropped.
const { applyLabMessage } = proxyActivities<LabResultsActivities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** Messages applied per run before it continues as new (keeps the history short). */
const MESSAGES_PER_RUN = 500;
/** A run with nothing to do for this long ends; the next message starts a new one. */
const IDLE_MS = 10 * 60_000;

/**
 * The applier of one lab account's result messages (`lab-results:<accountId>`): one message at a time, in arrival
 * order (message ids are time-ordered), each through the recorded activity `applyLabMessage`, which matches it to
 * its orders and hands them their results (lib/labs/lab-results-apply.ts). The listener has already stored and
 * acknowledged every message it names: a worker that is down only delays them.
 */
export async function labResultsWorkflow(input: LabResultsInput): Promise<void> {
  const queue: string[] = [...(input.pending ?? [])];
  const seen = new Set(queue);
  setHandler(labMessageStoredSignal, ({ messageId }) => {
    if (seen.has(messageId)) return;
    seen.add(messageId);
    // Arrival order: signals from several connections may cross; the ids (UUIDv7) say which came first.
    const at = queue.findIndex((id) => id > messageId);
    if (at < 0) queue.push(messageId);
    else queue.splice(at, 0, messageId);
  });
  let applied = 0;
  while (applied < MESSAGES_PER_RUN && !workflowInfo().continueAsNewSuggested) {
    if (!(await condition(() => queue.length > 0, IDLE_MS))) return;
    await applyLabMessage({ messageId: queue[0] });
    queue.shift();
    applied += 1;
  }
  await continueAsNew<typeof labResultsWorkflow>({ accountId: input.accountId, pending: queue });
}
