import { eraseUserOrders } from '../lib/lab/order-erasure';
import { eraseUserWebhookData } from '../lib/webhooks/commands';
import type { Repositories } from '../lib/repositories';
import type { TemporalDeps } from '../lib/temporal';

export interface UserRef {
  teamId: string;
  userId: string;
}

/**
 * A domain that holds data about end users. User deletion deregisters (at once) and erases (after the
 * grace period) through this list: a new domain (data, orders, insurance, events…) adds one entry here
 * and the deletion workflow picks it up without change.
 */
export interface UserDataDomain {
  name: string;
  /** Stops new data from flowing at deletion time (e.g. provider connections). */
  deregister?(user: UserRef): Promise<number>;
  /** Removes all of the user's data in this domain. Must be idempotent. */
  erase(user: UserRef): Promise<number>;
}

export function userDataDomains(deps: { repos: Repositories; temporal: TemporalDeps }): UserDataDomain[] {
  const { repos } = deps;
  return [
    {
      name: 'connections',
      deregister: async ({ teamId, userId }) => {
        const count = await repos.connections.deregisterAllForUser(teamId, userId);
        await repos.users.clearConnectedSources(teamId, userId);
        return count;
      },
      erase: ({ teamId, userId }) => repos.connections.eraseAllForUser(teamId, userId),
    },
    {
      // Lab orders keep their audit trail (ids, tests, sample id, physician, status history) and lose the
      // patient's identity and results; see README "Lab testing → Erasure".
      // Before events: a running order stops publishing before the user's events are erased.
      name: 'lab_orders',
      erase: ({ teamId, userId }) => eraseUserOrders(deps, teamId, userId),
    },
    {
      // Events about the user, their deliveries and attempts (webhook log).
      name: 'events',
      erase: ({ teamId, userId }) => eraseUserWebhookData(deps, teamId, userId),
    },
  ];
}
