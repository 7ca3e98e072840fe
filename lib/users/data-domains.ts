import { eraseUserOrders } from '../labs/order-erasure';
import { eraseUserWebhookData } from '../events/dispatcher-commands';
import type { Repositories } from '../repositories';
import type { TemporalDeps } from '../platform/temporal';
import { signalConnection } from '../wearables/workflow-client';

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
      // Summaries, timeseries samples, workout streams and the per-resource pull state: each delete is served by
      // the user's index, so every erasure runs them all.
      name: 'wearable_data',
      // The first domain erased: it marks the erasure begun first, so a writer racing it removes what it wrote (ingest.ts).
      erase: async ({ teamId, userId }) => {
        await repos.users.markErasing(teamId, userId);
        return (await repos.wearableData.eraseAllForUser(teamId, userId)) + (await repos.historicalPulls.eraseAllForUser(teamId, userId));
      },
    },
    {
      name: 'connections',
      // Deregistered at once (each connection's workflow stops pulling); kept as history until erasure.
      deregister: async ({ teamId, userId }) => {
        const live = await repos.connections.listLiveForUser(teamId, userId);
        for (const connection of live) {
          await repos.connections.deregister(connection._id);
          await signalConnection(deps, connection._id, 'stop');
        }
        await repos.users.clearConnectedSources(teamId, userId);
        return live.length;
      },
      // Each connection's workflow revoked its provider access when it stopped; tokens left (a provider that refused) go here.
      erase: async ({ teamId, userId }) =>
        (await repos.connections.eraseAllForUser(teamId, userId)) +
        (await repos.linkTokens.eraseAllForUser(teamId, userId)) +
        (await repos.providerAuth.eraseAllForUser(teamId, userId)),
    },
    {
      // A phone's sign-ins end when the deletion starts (its tokens stop working at once), and go at erasure.
      name: 'phone_sign_ins',
      deregister: ({ teamId, userId }) => repos.sdkSessions.revokeUser(teamId, userId, 'user_deletion'),
      erase: ({ teamId, userId }) => repos.sdkSessions.eraseAllForUser(teamId, userId),
    },
    {
      // Apple Health exports: the uploaded files and their imports' records (what they imported is wearable_data's).
      name: 'apple_health_imports',
      erase: ({ teamId, userId }) => repos.appleHealthImports.eraseAllForUser(teamId, userId),
    },
    {
      // Lab orders keep their audit trail (ids, tests, sample id, physician, status history) and lose the
      // patient's identity and results; see README "Lab testing → Erasure".
      // Before events: a running order stops publishing before the user's events are erased.
      name: 'lab_orders',
      erase: ({ teamId, userId }) => eraseUserOrders(deps, teamId, userId),
    },
    {
      // Insurance records (closed beta), personal fields encrypted.
      name: 'insurance',
      erase: ({ teamId, userId }) => repos.insurance.eraseAllForUser(teamId, userId),
    },
    {
      // Events about the user, their deliveries and attempts (webhook log).
      name: 'events',
      erase: ({ teamId, userId }) => eraseUserWebhookData(deps, teamId, userId),
    },
  ];
}
