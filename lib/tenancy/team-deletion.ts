import { ApiError, notFound } from '../platform/errors';
import type { Repositories } from '../repositories';

type TeamDeletionDeps = { repos: Repositories };

const counted = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** What must be gone before a team may be deleted: its active users, webhook endpoints and pipelines. */
async function blockersOf(deps: TeamDeletionDeps, teamId: string): Promise<string[]> {
  const [users, endpoints, pipelines] = await Promise.all([
    deps.repos.users.countActive(teamId),
    deps.repos.webhooks.endpointIdsOfTeam(teamId),
    deps.repos.pipelines.pipelineIdsOfTeam(teamId),
  ]);
  const blockers: string[] = [];
  if (users) blockers.push(counted(users, 'user', 'users'));
  if (endpoints.length) blockers.push(counted(endpoints.length, 'webhook endpoint', 'webhook endpoints'));
  if (pipelines.length) blockers.push(counted(pipelines.length, 'pipeline', 'pipelines'));
  return blockers;
}

/**
 * Deletes a team, refusing (409) while it has active users or webhook endpoints: their data and deliveries
 * would outlive it with nobody able to reach them. Users pending deletion do not block; their grace period
 * runs out and they are erased as scheduled (undo needs a team key, and the team's keys are revoked).
 *
 * Crash-safe order: the team is claimed and marked first (from then on it takes no new keys, credentials,
 * bindings or changes), then its API keys are revoked, its custom credentials deleted and its management-key
 * bindings removed, and the team document goes last. Each step is idempotent, so a DELETE repeated after a crash
 * finishes (once the crashed one's claim has lapsed: a minute).
 */
export async function deleteTeam(deps: TeamDeletionDeps, orgId: string, teamId: string): Promise<void> {
  const { tenancy, customCredentials } = deps.repos;
  const begun = await tenancy.beginTeamDeletion(orgId, teamId, () => blockersOf(deps, teamId));
  if (!begun) throw notFound(`Team ${teamId} not found in this organisation.`);
  if ('blocked' in begun) {
    throw new ApiError(
      409,
      `Team ${teamId} still has ${begun.blocked.join(' and ')}. Delete them first (users with DELETE /v2/user/{user_id}, ` +
        'webhook endpoints with DELETE …/webhook/{webhook_id}, pipelines with DELETE …/pipeline/{pipeline_id}), then repeat this request.',
    );
  }
  const steps = [
    () => tenancy.deleteTeamApiKeysOfTeam(orgId, teamId),
    () => customCredentials.deleteAllOfTeam(orgId, teamId),
    () => tenancy.unbindTeam(orgId, teamId),
  ];
  for (const step of steps) {
    // Renewed before each step: a DELETE that stalled past its claim stops, and the one that took over finishes.
    if (!(await tenancy.renewDeletionClaim(teamId, begun.claim))) throw takenOver(teamId);
    await step();
  }
  if (!(await tenancy.deleteMarkedTeam(teamId, begun.claim))) throw takenOver(teamId);
}

const takenOver = (teamId: string) =>
  new ApiError(503, `Another DELETE of team ${teamId} took its deletion over; retry to see it finished.`, { 'Retry-After': '1' });
