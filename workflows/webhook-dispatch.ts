import { condition, continueAsNew, defineSignal, proxyActivities, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import type { WebhookDeliveryActivities } from '../activities/webhook-delivery';

export interface WebhookDispatchInput {
  endpointId: string;
}

/** Sent (signal-with-start) by the publisher, the sweeper and replay: "this endpoint may have due deliveries". */
export const wakeDispatcherSignal = defineSignal<[]>('wakeDispatcher');

const { deliverDueWebhooks } = proxyActivities<WebhookDeliveryActivities>({
  startToCloseTimeout: '10 minutes',
  // A worker that dies mid-batch is noticed within this time and the batch is retried elsewhere; the same
  // deliveries are then sent again with the same webhook-id (at-least-once). Not shorter: the SDK sends
  // heartbeats at most every 80% of it, and a busy 2-core machine measured false timeouts at 5 s.
  heartbeatTimeout: '20 seconds',
  // Our own transient faults only (database, Temporal); receiver failures are business outcomes handled
  // by the delivery schedule.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

const MAX_ITERATIONS = 500;

/**
 * The delivery loop of one endpoint (id `webhook-dispatch:<endpointId>`). Each iteration runs one activity
 * that sends a batch of due deliveries concurrently and records the outcomes; the loop then waits for a
 * wake signal or for the next due time (a Temporal timer), and honours the endpoint's rate limit by pacing
 * batches. Payloads stay in MongoDB: this workflow carries only the endpoint id. It continues-as-new to bound
 * its history and ends when the endpoint is gone or disabled (a later publish starts it again).
 */
export async function webhookDispatchWorkflow(input: WebhookDispatchInput): Promise<void> {
  let woken = false;
  setHandler(wakeDispatcherSignal, () => {
    woken = true;
  });
  for (let i = 0; i < MAX_ITERATIONS && !workflowInfo().continueAsNewSuggested; i++) {
    woken = false;
    const r = await deliverDueWebhooks({ endpointId: input.endpointId });
    if (r.stop) return;
    if (r.more) {
      if (r.waitMs > 0) await sleep(r.waitMs);
      continue;
    }
    if (r.nextDueInMs === null) await condition(() => woken);
    else await condition(() => woken, Math.max(1, r.nextDueInMs));
  }
  await continueAsNew<typeof webhookDispatchWorkflow>(input);
}
