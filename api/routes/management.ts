import { badRequest, notFound, ValidationError } from '../../lib/errors';
import type { ManagementKeyDoc, TeamApiKeyDoc, TeamDoc } from '../../lib/repositories/tenancy';
import { isoWithOffset } from '../../lib/time';
import { ErrorDetail, HTTPValidationError } from '../../schemas/common';
import {
  ManagementKeyCreateBody,
  ManagementKeyCreated,
  ManagementKeyList,
  Org,
  OrgEnvRegionParams,
  OrgKeyParams,
  OrgParams,
  OrgTeamParams,
  Team,
  TeamApiKeyCreateBody,
  TeamApiKeyCreated,
  TeamApiKeyDeleteQuery,
  TeamApiKeyList,
  TeamApiKeyListQuery,
  TeamCreateBody,
  TeamList,
  TeamPatchBody,
} from '../../schemas/management';
import type { AppDeps } from '../deps';
import type { ManagementPrincipal } from '../middleware/auth';
import { defineRoute } from '../route';

const errors = {
  401: { description: 'Missing or invalid management key', schema: ErrorDetail },
  403: { description: 'The key may not act here', schema: ErrorDetail },
  404: { description: 'Not found', schema: ErrorDetail },
  422: { description: 'Validation error', schema: HTTPValidationError },
};

export const toTeam = (t: TeamDoc) => ({
  id: t._id,
  org_id: t.org_id,
  name: t.name,
  environment: t.environment,
  region: t.region,
  created_at: isoWithOffset(t.created_at),
  updated_at: isoWithOffset(t.updated_at),
});
const toTeamApiKey = (k: TeamApiKeyDoc) => ({
  id: k._id,
  label: k.label,
  team_id: k.team_id,
  prefix: k.prefix,
  created_at: isoWithOffset(k.created_at),
});
const toManagementKey = (k: ManagementKeyDoc) => ({
  id: k._id,
  label: k.label,
  role: k.role,
  team_role_bindings: k.team_ids.map((team_id) => ({ team_id })),
  prefix: k.prefix,
  created_at: isoWithOffset(k.created_at),
});

/** The team, if it is in the org and the key may act on it (403 before 404 for scoped keys). */
export async function teamInScope(deps: AppDeps, auth: ManagementPrincipal, teamId: string): Promise<TeamDoc> {
  auth.assertTeamAccess(teamId);
  const team = await deps.repos.tenancy.findTeam(auth.orgId, teamId);
  if (!team) throw notFound(`Team ${teamId} not found in this organisation.`);
  return team;
}

function assertThisDeployment(deps: AppDeps, environment: string, region: string): void {
  const { DEPLOYMENT_ENVIRONMENT: env, DEPLOYMENT_REGION: reg } = deps.config;
  if (environment !== env || region !== reg) {
    throw badRequest(`This deployment serves ${env}/${reg}; manage ${environment}/${region} keys on that deployment.`);
  }
}

const orgTags = ['Management: organisation'];
const keyTags = ['Management: keys'];

export const managementRoutes = [
  defineRoute({
    operationId: 'getOrg',
    method: 'get',
    path: '/v1/org/{org_id}',
    summary: 'Get organisation',
    tags: orgTags,
    auth: 'management',
    params: OrgParams,
    responses: { 200: { description: 'The organisation', schema: Org }, ...errors },
    async handler({ auth, deps }) {
      const org = await deps.repos.tenancy.findOrg(auth.orgId);
      if (!org) throw notFound('Organisation not found.');
      return { body: { id: org._id, name: org.name, created_at: isoWithOffset(org.created_at) } };
    },
  }),
  defineRoute({
    operationId: 'listTeams',
    method: 'get',
    path: '/v1/org/{org_id}/team',
    summary: 'List teams',
    description: 'A team management key sees only the teams it is bound to.',
    tags: orgTags,
    auth: 'management',
    params: OrgParams,
    responses: { 200: { description: 'Teams', schema: TeamList }, ...errors },
    async handler({ auth, deps }) {
      const teams = await deps.repos.tenancy.listTeams(auth.orgId, auth.role === 'org_admin' ? undefined : auth.teamIds);
      return { body: { data: teams.map(toTeam) } };
    },
  }),
  defineRoute({
    operationId: 'createTeam',
    method: 'post',
    path: '/v1/org/{org_id}/team',
    summary: 'Create team',
    description: "Needs an org management key. The team lives in this deployment's environment and region.",
    tags: orgTags,
    auth: 'management',
    params: OrgParams,
    body: TeamCreateBody,
    responses: { 200: { description: 'The team', schema: Team }, ...errors },
    async handler({ auth, body, deps }) {
      auth.assertOrgAdmin('Creating a team');
      const region = deps.config.DEPLOYMENT_REGION;
      if (body.region && body.region !== region) {
        throw ValidationError.field(['body', 'region'], `This deployment serves region ${region}; create ${body.region} teams there.`);
      }
      const team = await deps.repos.tenancy.createTeam(auth.orgId, body.name, deps.config.DEPLOYMENT_ENVIRONMENT, region);
      return { body: toTeam(team) };
    },
  }),
  defineRoute({
    operationId: 'getTeam',
    method: 'get',
    path: '/v1/org/{org_id}/team/{team_id}',
    summary: 'Get team',
    tags: orgTags,
    auth: 'management',
    params: OrgTeamParams,
    responses: { 200: { description: 'The team', schema: Team }, ...errors },
    async handler({ auth, params, deps }) {
      return { body: toTeam(await teamInScope(deps, auth, params.team_id)) };
    },
  }),
  defineRoute({
    operationId: 'updateTeam',
    method: 'patch',
    path: '/v1/org/{org_id}/team/{team_id}',
    summary: 'Rename team',
    tags: orgTags,
    auth: 'management',
    params: OrgTeamParams,
    body: TeamPatchBody,
    responses: { 200: { description: 'The team', schema: Team }, ...errors },
    async handler({ auth, params, body, deps }) {
      await teamInScope(deps, auth, params.team_id);
      const team = await deps.repos.tenancy.renameTeam(auth.orgId, params.team_id, body.name);
      if (!team) throw notFound(`Team ${params.team_id} not found in this organisation.`);
      return { body: toTeam(team) };
    },
  }),
  defineRoute({
    operationId: 'listTeamApiKeys',
    method: 'get',
    path: '/v1/org/{org_id}/team_api_keys/{environment}/{region}',
    summary: 'List team API keys',
    description: 'Key values are never shown again; `prefix` helps recognise them.',
    tags: keyTags,
    auth: 'management',
    params: OrgEnvRegionParams,
    query: TeamApiKeyListQuery,
    responses: { 200: { description: 'Keys', schema: TeamApiKeyList }, 400: { description: 'Other deployment', schema: ErrorDetail }, ...errors },
    async handler({ auth, params, query, deps }) {
      assertThisDeployment(deps, params.environment, params.region);
      if (query.team_id) auth.assertTeamAccess(query.team_id);
      const teamIds = query.team_id ? [query.team_id] : auth.role === 'org_admin' ? undefined : auth.teamIds;
      const keys = await deps.repos.tenancy.listTeamApiKeys(auth.orgId, teamIds);
      return { body: { data: keys.map(toTeamApiKey) } };
    },
  }),
  defineRoute({
    operationId: 'createTeamApiKey',
    method: 'post',
    path: '/v1/org/{org_id}/team_api_keys/{environment}/{region}',
    summary: 'Create team API key',
    description: 'The response carries the key value once; only its hash is stored.',
    tags: keyTags,
    auth: 'management',
    params: OrgEnvRegionParams,
    body: TeamApiKeyCreateBody,
    responses: { 200: { description: 'The new key', schema: TeamApiKeyCreated }, 400: { description: 'Other deployment', schema: ErrorDetail }, ...errors },
    async handler({ auth, params, body, deps }) {
      assertThisDeployment(deps, params.environment, params.region);
      const team = await teamInScope(deps, auth, body.team_id);
      const { doc, value } = await deps.repos.tenancy.createTeamApiKey(team, body.label);
      return { body: { ...toTeamApiKey(doc), value } };
    },
  }),
  defineRoute({
    operationId: 'deleteTeamApiKeys',
    method: 'delete',
    path: '/v1/org/{org_id}/team_api_keys/{environment}/{region}',
    summary: 'Delete team API keys',
    tags: keyTags,
    auth: 'management',
    params: OrgEnvRegionParams,
    query: TeamApiKeyDeleteQuery,
    responses: { 204: { description: 'Deleted' }, 400: { description: 'Other deployment', schema: ErrorDetail }, ...errors },
    async handler({ auth, params, query, deps }) {
      assertThisDeployment(deps, params.environment, params.region);
      const keys = await deps.repos.tenancy.findTeamApiKeys(auth.orgId, query.api_key_id);
      const missing = query.api_key_id.filter((id) => !keys.some((k) => k._id === id));
      if (missing.length) throw notFound(`Team API key(s) not found: ${missing.join(', ')}.`);
      for (const key of keys) auth.assertTeamAccess(key.team_id);
      await deps.repos.tenancy.deleteTeamApiKeys(auth.orgId, query.api_key_id);
      return { status: 204 };
    },
  }),
  defineRoute({
    operationId: 'listManagementKeys',
    method: 'get',
    path: '/v1/org/{org_id}/management_key',
    summary: 'List management keys',
    tags: keyTags,
    auth: 'management',
    params: OrgParams,
    responses: { 200: { description: 'Keys', schema: ManagementKeyList }, ...errors },
    async handler({ auth, deps }) {
      auth.assertOrgAdmin('Listing management keys');
      const keys = await deps.repos.tenancy.listManagementKeys(auth.orgId);
      return { body: { data: keys.map(toManagementKey) } };
    },
  }),
  defineRoute({
    operationId: 'createManagementKey',
    method: 'post',
    path: '/v1/org/{org_id}/management_key',
    summary: 'Create management key',
    description:
      'role org_admin: full control of the organisation. role team_admin: scoped to the teams in team_role_bindings (one or more).',
    tags: keyTags,
    auth: 'management',
    params: OrgParams,
    body: ManagementKeyCreateBody,
    responses: { 200: { description: 'The new key (value shown once)', schema: ManagementKeyCreated }, ...errors },
    async handler({ auth, body, deps }) {
      auth.assertOrgAdmin('Creating management keys');
      // The schema holds the role rules (team_admin: one or more bindings; org_admin: none).
      const teamIds = [...new Set(body.team_role_bindings.map((b) => b.team_id))];
      const found = await deps.repos.tenancy.listTeams(auth.orgId, teamIds);
      const unknown = teamIds.filter((id) => !found.some((t) => t._id === id));
      if (unknown.length) {
        throw ValidationError.field(['body', 'team_role_bindings'], `Unknown team(s) in this organisation: ${unknown.join(', ')}.`);
      }
      const { doc, value } = await deps.repos.tenancy.createManagementKey(auth.orgId, body.label, body.role, teamIds);
      return { body: { ...toManagementKey(doc), value } };
    },
  }),
  defineRoute({
    operationId: 'deleteManagementKey',
    method: 'delete',
    path: '/v1/org/{org_id}/management_key/{key_id}',
    summary: 'Delete management key',
    description: 'The last org_admin key cannot be deleted (the organisation would be locked out).',
    tags: keyTags,
    auth: 'management',
    params: OrgKeyParams,
    responses: { 204: { description: 'Deleted' }, 400: { description: 'Last org key', schema: ErrorDetail }, ...errors },
    async handler({ auth, params, deps }) {
      auth.assertOrgAdmin('Deleting management keys');
      const keys = await deps.repos.tenancy.listManagementKeys(auth.orgId);
      const target = keys.find((k) => k._id === params.key_id);
      if (!target) throw notFound(`Management key ${params.key_id} not found.`);
      if (target.role === 'org_admin' && keys.filter((k) => k.role === 'org_admin').length === 1) {
        throw badRequest('This is the last org_admin key of the organisation; create another one before deleting it.');
      }
      await deps.repos.tenancy.deleteManagementKey(auth.orgId, params.key_id);
      return { status: 204 };
    },
  }),
];
