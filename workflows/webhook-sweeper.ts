import { continueAsNew, proxyActivities, sleep } from '@temporalio/workflow';
import type { WebhookDeliveryActivities } from '../activities/webhook-delivery';
import type { MaintenanceActivities } from '../activities/maintenance';

export interface WebhookSweeperInput {
  intervalMs: number;
  graceMs: number;
  /** CONNECTION_STEPS_GRACE_MS; absent in runs started before connections were swept (they use its default). */
  connectionStepsGraceMs?: number;
}

const DEFAULT_CONNECTION_STEPS_GRACE_MS = 60_000;

const sweepOptions = {
  // Short: a sweep takes well under a second, and a sweep lost with a crashed worker is retried this soon.
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
} as const;
const { sweepWebhooks } = proxyActivities<WebhookDeliveryActivities>(sweepOptions);
const { finishStrandedConnectionSteps } = proxyActivities<MaintenanceActivities>(sweepOptions);

/**
 * Repairs what a crash left behind (id `webhook-sweeper:<taskQueue>`, started by every worker at boot with
 * USE_EXISTING): events whose fan-out did not finish, endpoints with overdue deliveries whose dispatcher
 * missed its wake, and connections whose connect or deregister stopped before starting or stopping their
 * workflow. Runs every `intervalMs` (a Temporal timer) and continues-as-new to bound its history.
 */
export async function webhookSweeperWorkflow(input: WebhookSweeperInput): Promise<void> {
  for (let i = 0; i < 100; i++) {
    await sweepWebhooks({ graceMs: input.graceMs });
    await finishStrandedConnectionSteps({ graceMs: input.connectionStepsGraceMs ?? DEFAULT_CONNECTION_STEPS_GRACE_MS });
    await sleep(input.intervalMs);
  }
  await continueAsNew<typeof webhookSweeperWorkflow>(input);
}
