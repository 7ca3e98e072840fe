import type { Config } from '../lib/config';
import type { Logger } from '../lib/logger';
import type { Repositories } from '../lib/repositories';
import type { TemporalDeps } from '../lib/temporal';
import { createUserDeletionActivities } from './user-deletion';
import { createWebhookDeliveryActivities } from './webhook-delivery';

export interface ActivityDeps {
  repos: Repositories;
  config: Config;
  logger: Logger;
  /** A Temporal client (wakes webhook dispatchers). */
  temporal: TemporalDeps;
}

/** Every activity the worker registers, built from their dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createUserDeletionActivities(deps.repos),
    ...createWebhookDeliveryActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
