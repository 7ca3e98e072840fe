/** Workflow ids are prefixed business keys, built only here (api and workflows import these). */
export const workflowIds = {
  userDeletion: (userId: string) => `user-deletion:${userId}`,
  /** One import per Apple Health export upload; the owner of the import's state once the upload is whole. */
  appleHealthImport: (importId: string) => `apple-health-import:${importId}`,
  /** One lifecycle per lab order; the single owner of the order document. */
  labOrder: (orderId: string) => `lab-order:${orderId}`,
  /** One lab account's applier of result messages (signal-with-start by the MLLP listener and the stranded-work sweep). */
  labResults: (accountId: string) => `lab-results:${accountId}`,
  /** One provider connection's pulls and syncs; the single owner of its historical-pull state. */
  wearableConnection: (connectionId: string) => `wearable-connection:${connectionId}`,
  /** One fetch per provider notification (its dedupe key), so a notification delivered twice fetches once. */
  providerPush: (provider: string, notification: string) => `provider-push:${provider}:${notification}`,
  providerHints: (connectionId: string) => `provider-hints:${connectionId}`,
  /** The Schedule that keeps providers' push subscriptions in place and renews those that expire. */
  providerSubscriptionsSchedule: (taskQueue: string) => `provider-subscriptions:${taskQueue}`,
  /** The runs that Schedule starts (Temporal appends each run's time to this id). */
  providerSubscriptionsRun: (taskQueue: string) => `provider-subscriptions-run:${taskQueue}`,
  /** One delivery loop per webhook endpoint (signal-with-start on publish). */
  destinationDispatch: (destinationId: string) => `destination-dispatch:${destinationId}`,
  /** The one long-lived sweep of stranded work per task queue (worker/stranded-work-sweep.ts). */
  strandedWorkSweep: (taskQueue: string) => `stranded-work-sweep:${taskQueue}`,
} as const;
