import { condition, continueAsNew, defineSignal, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { LabResultsActivities } from '../activities/lab-results';

/**
 * Messages the MLLP listener stored for this workflow's lab account (signal-with-start; also the stranded-work sweep).
 * Several per signal: the listener sends the ids stored while its previous signal was on its way in one.
 */
export const labMessageStoredSignal = defineSignal<[{ messageIds: string[] }]>('labMessageStored');

export interface LabResultsInput {
  accountId: string;
  /** Messages carried over from the previous run (continue-as-new). */
  pending?: string[];
}

// A recorded activity (not a local one): it hands results to orders' workflows and waits for them to record them, and
// a write from a lost workflow task must not replay over itself. Retried until it succeeds: a message is never dropped.
const { applyLabMessages } = proxyActivities<LabResultsActivities>({
  // A batch waits for each matched order's workflow to record its share (up to a minute each): a worker that died is
  // noticed by the heartbeat timeout, not by this one.
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** Batches applied per run before it continues as new (keeps the history short: ten events or so a batch). */
const BATCHES_PER_RUN = 200;
/**
 * Messages handed to one activity at most: a backlog is applied in batches, each a few round trips to the store
 * however many messages it has (lib/labs/lab-results-apply.ts), so the applier catches up as messages pile up.
 */
const MESSAGES_PER_BATCH = 100;
/** A run with nothing to do for this long ends; the next message starts a new one. */
const IDLE_MS = 10 * 60_000;

/**
 * The applier of one lab account's result messages (`lab-results:<accountId>`): in arrival order (message ids are
 * time-ordered), the messages waiting (up to MESSAGES_PER_BATCH) at a time, through the recorded activity
 * `applyLabMessages`, which matches them to their orders and hands those their results one message after another
 * (lib/labs/lab-results-apply.ts). The listener has already stored and acknowledged every message it names: a worker
 * that is down only delays them.
 */
export async function labResultsWorkflow(input: LabResultsInput): Promise<void> {
  const queue: string[] = [...(input.pending ?? [])];
  const seen = new Set(queue);
  setHandler(labMessageStoredSignal, ({ messageIds }) => {
    for (const messageId of messageIds) {
      if (seen.has(messageId)) continue;
      seen.add(messageId);
      // Arrival order: signals from several connections may cross; the ids (UUIDv7) say which came first.
      const at = queue.findIndex((id) => id > messageId);
      if (at < 0) queue.push(messageId);
      else queue.splice(at, 0, messageId);
    }
  });
  let batches = 0;
  while (batches < BATCHES_PER_RUN && !workflowInfo().continueAsNewSuggested) {
    if (!(await condition(() => queue.length > 0, IDLE_MS))) return;
    const batch = queue.slice(0, MESSAGES_PER_BATCH);
    await applyLabMessages({ messageIds: batch });
    // By id: a signal during the activity may have placed an earlier message among these.
    for (const messageId of batch) queue.splice(queue.indexOf(messageId), 1);
    batches += 1;
  }
  await continueAsNew<typeof labResultsWorkflow>({ accountId: input.accountId, pending: queue });
}
