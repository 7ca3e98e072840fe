import { badRequest, notFound } from '../lib/platform/errors';
import type { TeamDoc } from '../lib/tenancy/model';
import { assertThisEnvironment } from '../lib/events/destinations/webhook/requests';
import { ErrorDetail, HTTPValidationError } from '../schemas/common';
import type { AppDeps } from './deps';
import type { ManagementPrincipal } from './middleware/auth';

/** What every management route checks about where it acts (the key's teams, this deployment), and the errors it declares. */

export const managementErrors = {
  401: { description: 'Missing or invalid management key', schema: ErrorDetail },
  403: { description: 'The key may not act here (a team-scoped key outside its teams, or at organisation level)', schema: ErrorDetail },
  404: { description: 'Not found', schema: ErrorDetail },
  422: { description: 'Validation error', schema: HTTPValidationError },
};
export const otherDeployment = { 400: { description: 'Another environment or region than this deployment serves', schema: ErrorDetail } };

export const teamNotFound = (teamId: string) => notFound(`Team ${teamId} not found in this organisation.`);

/** The team, if it is in the org and the key may act on it (403 before 404 for scoped keys). */
export async function teamInScope(deps: AppDeps, auth: ManagementPrincipal, teamId: string): Promise<TeamDoc> {
  auth.assertTeamAccess(teamId);
  const team = await deps.repos.tenancy.findTeam(auth.orgId, teamId);
  if (!team) throw teamNotFound(teamId);
  return team;
}

/** Team API keys and custom credentials are managed per `{environment}/{region}`: this deployment's only. */
export function assertThisDeployment(deps: AppDeps, environment: string, region: string): void {
  const { DEPLOYMENT_ENVIRONMENT: env, DEPLOYMENT_REGION: reg } = deps.config;
  if (environment !== env || region !== reg) {
    throw badRequest(`This deployment serves ${env}/${reg}; manage ${environment}/${region} on that deployment.`);
  }
}

/** The teams a listing covers: the one asked for (if the key may see it), else all the key may see. */
export function listedTeams(auth: ManagementPrincipal, teamId: string | undefined): string[] | undefined {
  if (teamId) {
    auth.assertTeamAccess(teamId);
    return [teamId];
  }
  return auth.role === 'org_admin' ? undefined : auth.teamIds;
}

/** The errors every webhook management route declares. */
export const webhookErrors = {
  400: { description: 'Another environment', schema: ErrorDetail },
  401: { description: 'Missing or invalid management key', schema: ErrorDetail },
  403: { description: 'The key may not act on this team', schema: ErrorDetail },
  404: { description: 'Not found', schema: ErrorDetail },
  422: { description: 'Validation error (including a refused URL)', schema: HTTPValidationError },
};

/** The team of a webhook route's path, if the key may act on it and the path names this deployment's environment. */
export async function webhookTeam(deps: AppDeps, auth: ManagementPrincipal, params: { team_id: string; environment: string }): Promise<string> {
  await teamInScope(deps, auth, params.team_id);
  assertThisEnvironment(deps, params.environment);
  return params.team_id;
}

/** A 409 a management route declares, with what it means there. */
export const conflict = (description: string) => ({ 409: { description, schema: ErrorDetail } });

/** Where the webhook management routes live, and their OpenAPI tag. */
export const WEBHOOK_ROUTES_BASE = '/v1/org/{org_id}/team/{team_id}/{environment}/webhook';
export const WEBHOOK_TAGS = ['Management: webhooks'];

/** Where the pipeline management routes live, and their OpenAPI tag. */
export const PIPELINE_ROUTES_BASE = '/v1/org/{org_id}/team/{team_id}/{environment}/pipeline';
export const PIPELINE_TAGS = ['Management: pipelines'];
