import { continueAsNew, proxyActivities, sleep } from '@temporalio/workflow';
import type { WebhookDeliveryActivities } from '../activities/webhook-delivery';

export interface WebhookSweeperInput {
  intervalMs: number;
  graceMs: number;
}

const { sweepWebhooks } = proxyActivities<WebhookDeliveryActivities>({
  // Short: a sweep takes well under a second, and a sweep lost with a crashed worker is retried this soon.
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * Repairs what a crash left behind (id `webhook-sweeper:<taskQueue>`, started by every worker at boot with
 * USE_EXISTING): events whose fan-out did not finish, and endpoints with overdue deliveries whose dispatcher
 * missed its wake. Runs every `intervalMs` (a Temporal timer) and continues-as-new to bound its history.
 */
export async function webhookSweeperWorkflow(input: WebhookSweeperInput): Promise<void> {
  for (let i = 0; i < 100; i++) {
    await sweepWebhooks({ graceMs: input.graceMs });
    await sleep(input.intervalMs);
  }
  await continueAsNew<typeof webhookSweeperWorkflow>(input);
}
