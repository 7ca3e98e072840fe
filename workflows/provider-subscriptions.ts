import { proxyActivities } from '@temporalio/workflow';
import type { WearableActivities } from '../activities/wearables';

const acts = proxyActivities<WearableActivities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '10 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes', maximumAttempts: 5 },
});

/**
 * One run of the `provider-subscriptions` Schedule (worker/provider-subscriptions-schedule.ts): the providers' push
 * subscriptions created where missing and renewed before they expire (Oura's expire), for every app.
 */
export async function providerSubscriptionsWorkflow(): Promise<Awaited<ReturnType<WearableActivities['ensureProviderSubscriptions']>>> {
  return acts.ensureProviderSubscriptions();
}
