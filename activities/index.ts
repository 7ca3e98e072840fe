import type { Repositories } from '../lib/repositories';
import { createUserDeletionActivities } from './user-deletion';

export interface ActivityDeps {
  repos: Repositories;
}

/** Every activity the worker registers, built from their dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createUserDeletionActivities(deps.repos),
  };
}

export type Activities = ReturnType<typeof createActivities>;
