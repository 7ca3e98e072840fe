import { randomUUID } from 'node:crypto';
import { ApiError, badRequest, forbidden, notFound, ValidationError } from '../../lib/platform/errors';
import {
  MAX_MANAGEMENT_KEYS_PER_ORG,
  TEAM_SETTING_DEFAULTS,
  type KeyChangeOutcome,
  type KeyChangeRefusal,
  type ManagementKeyChanges,
  type ManagementKeyDoc,
  type TeamApiKeyDoc,
  type TeamChanges,
  type TeamDoc,
  type TeamSettings,
} from '../../lib/tenancy/model';
import { isoWithOffset } from '../../lib/platform/time';
import { ErrorDetail, HTTPValidationError } from '../../schemas/common';
import {
  ManagementKeyCreateBody,
  ManagementKeyCreated,
  ManagementKeyList,
  ManagementKeyPatchBody,
  ManagementKey,
  Org,
  OrgEnvRegionParams,
  OrgKeyParams,
  OrgParams,
  OrgPatchBody,
  OrgTeamParams,
  Team,
  TeamApiKeyCreateBody,
  TeamApiKeyCreated,
  TeamApiKeyDeleteQuery,
  TeamApiKeyList,
  TeamApiKeyListQuery,
  TeamCreateBody,
  TeamFeatureFlagsPatchBody,
  TeamList,
  TeamPatchBody,
} from '../../schemas/management';
import type { AppDeps } from '../deps';
import type { ManagementPrincipal } from '../middleware/auth';
import { defineRoute } from '../route';
import { audited } from '../../lib/tenancy/audit';
import { deleteTeam } from '../../lib/tenancy/team-deletion';

export const managementErrors = {
  401: { description: 'Missing or invalid management key', schema: ErrorDetail },
  403: { description: 'The key may not act here (a team-scoped key outside its teams, or at organisation level)', schema: ErrorDetail },
  404: { description: 'Not found', schema: ErrorDetail },
  422: { description: 'Validation error', schema: HTTPValidationError },
};
const errors = managementErrors;
const conflict = (description: string) => ({ 409: { description, schema: ErrorDetail } });
export const otherDeployment = { 400: { description: 'Another environment or region than this deployment serves', schema: ErrorDetail } };

export const toTeam = (t: TeamDoc) => ({
  id: t._id,
  org_id: t.org_id,
  name: t.name,
  environment: t.environment,
  region: t.region,
  logo_url: t.logo_url,
  brand_information: t.brand_information,
  lab_tests_patient_sms_communication_enabled: t.lab_tests_patient_sms_communication_enabled,
  lab_tests_patient_email_communication_enabled: t.lab_tests_patient_email_communication_enabled,
  critical_result_notification_email: t.critical_result_notification_email,
  reject_duplicate_connection: t.reject_duplicate_connection,
  feature_flags: t.feature_flags,
  status: t.deletion_started_at ? ('deleting' as const) : ('active' as const),
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

/** The settings among a request's fields (a name or region is not one). */
function settingsOf(body: Partial<TeamSettings>): Partial<TeamSettings> {
  return Object.fromEntries(Object.keys(TEAM_SETTING_DEFAULTS).filter((k) => k in body).map((k) => [k, body[k as keyof TeamSettings]]));
}

/** A company name is shown with its logo: a team with brand information has a `logo_url`. */
function assertLogoForBrand(team: Pick<TeamSettings, 'logo_url' | 'brand_information'>): void {
  if (team.brand_information?.company_name && !team.logo_url) {
    throw ValidationError.field(['body', 'logo_url'], 'logo_url is required while brand_information has a company_name.', 'missing');
  }
}

/** Fields left undefined keep their value. */
async function updateTeamOrFail(deps: AppDeps, orgId: string, teamId: string, changes: TeamChanges): Promise<TeamDoc> {
  for (const field of Object.keys(changes) as (keyof TeamChanges)[]) if (changes[field] === undefined) delete changes[field];
  const updated = await deps.repos.tenancy.updateTeam(orgId, teamId, changes, assertLogoForBrand);
  if (!updated) throw teamNotFound(teamId);
  return updated;
}

const uniqueTeamIds = (bindings: { team_id: string }[]) => [...new Set(bindings.map((b) => b.team_id))];

/** The error a refused change of management keys answers with. */
function refusalError(refusal: KeyChangeRefusal, keyId: string): ApiError {
  if (refusal === 'not_found') return notFound(`Management key ${keyId} not found.`);
  if (refusal === 'last_org_admin') {
    return new ApiError(409, 'This is the last org_admin key of the organisation; create another org_admin key before deleting or demoting it.');
  }
  if (refusal === 'actor_not_org_admin') return forbidden('The key making this request was deleted or demoted by another request meanwhile.');
  if (refusal === 'too_many_keys') {
    return new ApiError(409, `The organisation has ${MAX_MANAGEMENT_KEYS_PER_ORG} management keys, the most it can hold; delete one it no longer uses first.`);
  }
  return ValidationError.field(['body', 'team_role_bindings'], `Unknown team(s) in this organisation: ${refusal.unknown_team_ids.join(', ')}.`);
}

function keyOrRefusal(outcome: KeyChangeOutcome, keyId: string): ManagementKeyDoc {
  if ('refused' in outcome) throw refusalError(outcome.refused, keyId);
  return outcome.key;
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
    operationId: 'updateOrg',
    method: 'patch',
    path: '/v1/org/{org_id}',
    summary: 'Rename organisation',
    description: 'Needs an org management key (role org_admin).',
    tags: orgTags,
    auth: 'management',
    params: OrgParams,
    body: OrgPatchBody,
    responses: { 200: { description: 'The organisation', schema: Org }, ...errors },
    async handler({ auth, body, deps, requestId, log }) {
      auth.assertOrgAdmin('Changing the organisation');
      const org = await audited({ deps, auth, requestId, log }, { action: 'org.update', type: 'org', id: auth.orgId, teamId: null }, async () => {
        const renamed = await deps.repos.tenancy.renameOrg(auth.orgId, body.name);
        if (!renamed) throw notFound('Organisation not found.');
        return renamed;
      }, ['name']);
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
    description:
      "Needs an org management key. The team lives in this deployment's environment and region. " +
      '`logo_url` is required when `brand_information` is given (it names the company). Feature flags start off.',
    tags: orgTags,
    auth: 'management',
    params: OrgParams,
    body: TeamCreateBody,
    responses: { 200: { description: 'The team', schema: Team }, ...errors },
    async handler({ auth, body, deps, requestId, log }) {
      auth.assertOrgAdmin('Creating a team');
      const region = deps.config.DEPLOYMENT_REGION;
      if (body.region && body.region !== region) {
        throw ValidationError.field(['body', 'region'], `This deployment serves region ${region}; create ${body.region} teams there.`);
      }
      const settings = settingsOf(body);
      assertLogoForBrand({ ...TEAM_SETTING_DEFAULTS, ...settings });
      const id = randomUUID();
      const team = await audited(
        { deps, auth, requestId, log },
        { action: 'team.create', type: 'team', id, teamId: id },
        () => deps.repos.tenancy.createTeam(auth.orgId, body.name, deps.config.DEPLOYMENT_ENVIRONMENT, region, settings, id),
        Object.keys(body),
      );
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
    summary: 'Update team',
    description:
      'Name, settings and feature flags; only the fields given change (`brand_information` is replaced whole, null removes it). ' +
      'A team management key may update its own teams, except their `feature_flags` (org keys only; also PATCH …/feature_flags).',
    tags: orgTags,
    auth: 'management',
    params: OrgTeamParams,
    body: TeamPatchBody,
    responses: { 200: { description: 'The team', schema: Team }, ...conflict('The team is being deleted'), ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      if (body.feature_flags) auth.assertOrgAdmin('Setting feature flags');
      await teamInScope(deps, auth, params.team_id);
      const { feature_flags: flags, ...fields } = body;
      const changed = [...Object.keys(fields), ...Object.keys(flags ?? {}).map((flag) => `feature_flags.${flag}`)];
      // A flag change is its own action in the audit log (filterable), beside the update of other fields.
      const actions = [...(Object.keys(fields).length || !flags ? ['team.update' as const] : []), ...(flags ? ['team.feature_flags.update' as const] : [])];
      const team = await audited(
        { deps, auth, requestId, log },
        actions.map((action) => ({ action, type: 'team' as const, id: params.team_id, teamId: params.team_id })),
        () => updateTeamOrFail(deps, auth.orgId, params.team_id, { ...settingsOf(fields), name: fields.name, feature_flags: flags }),
        changed,
      );
      return { body: toTeam(team) };
    },
  }),
  defineRoute({
    operationId: 'deleteTeam',
    method: 'delete',
    path: '/v1/org/{org_id}/team/{team_id}',
    summary: 'Delete team',
    description:
      'Needs an org management key. Refused (409) while the team has active users or webhook endpoints: delete those first. ' +
      "Revokes the team's API keys at once, deletes its custom credentials and removes it from management keys' bindings. " +
      'Users pending deletion are erased as scheduled. If a DELETE is interrupted the team shows `status: deleting` and ' +
      'takes no other change; repeating the DELETE finishes it.',
    tags: orgTags,
    auth: 'management',
    params: OrgTeamParams,
    responses: { 204: { description: 'Deleted' }, ...conflict('The team still has users or webhook endpoints'), ...errors },
    async handler({ auth, params, deps, requestId, log }) {
      auth.assertOrgAdmin('Deleting a team');
      await audited({ deps, auth, requestId, log }, { action: 'team.delete', type: 'team', id: params.team_id, teamId: params.team_id }, () =>
        deleteTeam(deps, auth.orgId, params.team_id),
      );
      return { status: 204 };
    },
  }),
  defineRoute({
    operationId: 'updateTeamFeatureFlags',
    method: 'patch',
    path: '/v1/org/{org_id}/team/{team_id}/feature_flags',
    summary: 'Set team feature flags',
    description:
      'Needs an org management key. Turns closed-beta features on or off for the team; flags not given keep their value. ' +
      '`insurance`: insurance records (POST /v2/user/{user_id}/insurance) and insurance billing.',
    tags: orgTags,
    auth: 'management',
    params: OrgTeamParams,
    body: TeamFeatureFlagsPatchBody,
    responses: { 200: { description: 'The team', schema: Team }, ...conflict('The team is being deleted'), ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      auth.assertOrgAdmin('Setting feature flags');
      const team = await audited(
        { deps, auth, requestId, log },
        { action: 'team.feature_flags.update', type: 'team', id: params.team_id, teamId: params.team_id },
        () => updateTeamOrFail(deps, auth.orgId, params.team_id, { feature_flags: body }),
        Object.keys(body).map((flag) => `feature_flags.${flag}`),
      );
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
    responses: { 200: { description: 'Keys', schema: TeamApiKeyList }, ...otherDeployment, ...errors },
    async handler({ auth, params, query, deps }) {
      assertThisDeployment(deps, params.environment, params.region);
      const keys = await deps.repos.tenancy.listTeamApiKeys(auth.orgId, listedTeams(auth, query.team_id));
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
    responses: { 200: { description: 'The new key', schema: TeamApiKeyCreated }, ...otherDeployment, ...conflict('The team is being deleted'), ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      assertThisDeployment(deps, params.environment, params.region);
      const team = await teamInScope(deps, auth, body.team_id);
      const id = randomUUID();
      const { doc, value } = await audited(
        { deps, auth, requestId, log },
        { action: 'team_api_key.create', type: 'team_api_key', id, teamId: team._id },
        () => deps.repos.tenancy.createTeamApiKey(team, body.label, id),
        ['label'],
      );
      return { body: { ...toTeamApiKey(doc), value } };
    },
  }),
  defineRoute({
    operationId: 'deleteTeamApiKeys',
    method: 'delete',
    path: '/v1/org/{org_id}/team_api_keys/{environment}/{region}',
    summary: 'Delete team API keys',
    description:
      'Revoked keys stop working at once, on every api process (unless the deployment opts into caching verified keys with AUTH_CACHE_TTL_MS > 0).',
    tags: keyTags,
    auth: 'management',
    params: OrgEnvRegionParams,
    query: TeamApiKeyDeleteQuery,
    responses: { 204: { description: 'Deleted' }, ...otherDeployment, ...errors },
    async handler({ auth, params, query, deps, requestId, log }) {
      assertThisDeployment(deps, params.environment, params.region);
      const ids = [...new Set(query.api_key_id)];
      const keys = await deps.repos.tenancy.findTeamApiKeys(auth.orgId, ids);
      const missing = ids.filter((id) => !keys.some((k) => k._id === id));
      if (missing.length) throw notFound(`Team API key(s) not found: ${missing.join(', ')}.`);
      for (const key of keys) auth.assertTeamAccess(key.team_id);
      const targets = keys.map((k) => ({ action: 'team_api_key.delete' as const, type: 'team_api_key' as const, id: k._id, teamId: k.team_id }));
      await audited({ deps, auth, requestId, log }, targets, () => deps.repos.tenancy.deleteTeamApiKeys(auth.orgId, ids));
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
      'Needs an org management key. role org_admin: full control of the organisation. role team_admin: scoped to the teams in ' +
      'team_role_bindings (one or more), without organisation-level actions. A key bound to two or more teams can be created only ' +
      'through this API, not through the dashboard.',
    tags: keyTags,
    auth: 'management',
    params: OrgParams,
    body: ManagementKeyCreateBody,
    responses: { 200: { description: 'The new key (value shown once)', schema: ManagementKeyCreated }, ...errors },
    async handler({ auth, body, deps, requestId, log }) {
      auth.assertOrgAdmin('Creating management keys');
      // The schema holds the role rules (team_admin: one or more bindings; org_admin: none).
      const teamIds = uniqueTeamIds(body.team_role_bindings);
      const id = randomUUID();
      const created = await audited(
        { deps, auth, requestId, log },
        { action: 'management_key.create', type: 'management_key', id, teamId: null },
        async () => {
          const outcome = await deps.repos.tenancy.createBoundManagementKey(auth.orgId, body.label, body.role, teamIds, id);
          if ('refused' in outcome) throw refusalError(outcome.refused, id);
          return outcome;
        },
        Object.keys(body),
      );
      return { body: { ...toManagementKey(created.key), value: created.value } };
    },
  }),
  defineRoute({
    operationId: 'updateManagementKey',
    method: 'patch',
    path: '/v1/org/{org_id}/management_key/{key_id}',
    summary: 'Update management key',
    description:
      'Needs an org management key. Changes label, role and team_role_bindings (only the fields given). Binding a key to two or ' +
      'more teams is possible only through this API and key creation, not through the dashboard. The last org_admin key cannot be ' +
      'demoted (409), also when requests race.',
    tags: keyTags,
    auth: 'management',
    params: OrgKeyParams,
    body: ManagementKeyPatchBody,
    responses: { 200: { description: 'The key', schema: ManagementKey }, ...conflict('It is the last org_admin key'), ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      auth.assertOrgAdmin('Changing management keys');
      const bindings = body.team_role_bindings && uniqueTeamIds(body.team_role_bindings);
      const changes: ManagementKeyChanges = { label: body.label, role: body.role, team_ids: bindings };
      for (const field of Object.keys(changes) as (keyof ManagementKeyChanges)[]) if (changes[field] === undefined) delete changes[field];
      const roleRules = (merged: ManagementKeyDoc) => {
        if (merged.role === 'org_admin' && bindings?.length) {
          throw ValidationError.field(['body', 'team_role_bindings'], 'An org_admin key covers every team and takes no team_role_bindings.');
        }
        if (merged.role === 'team_admin' && !merged.team_ids.length) {
          throw ValidationError.field(['body', 'team_role_bindings'], 'A team_admin key needs one or more team_role_bindings.');
        }
      };
      const key = await audited(
        { deps, auth, requestId, log },
        { action: 'management_key.update', type: 'management_key', id: params.key_id, teamId: null },
        async () => keyOrRefusal(await deps.repos.tenancy.updateManagementKey(auth.orgId, params.key_id, auth.keyId, changes, roleRules), params.key_id),
        Object.keys(body),
      );
      return { body: toManagementKey(key) };
    },
  }),
  defineRoute({
    operationId: 'deleteManagementKey',
    method: 'delete',
    path: '/v1/org/{org_id}/management_key/{key_id}',
    summary: 'Delete management key',
    description: 'Needs an org management key. The last org_admin key cannot be deleted (409; the organisation would be locked out), also when requests race.',
    tags: keyTags,
    auth: 'management',
    params: OrgKeyParams,
    responses: { 204: { description: 'Deleted' }, ...conflict('It is the last org_admin key'), ...errors },
    async handler({ auth, params, deps, requestId, log }) {
      auth.assertOrgAdmin('Deleting management keys');
      await audited({ deps, auth, requestId, log }, { action: 'management_key.delete', type: 'management_key', id: params.key_id, teamId: null }, async () =>
        keyOrRefusal(await deps.repos.tenancy.deleteManagementKey(auth.orgId, params.key_id, auth.keyId), params.key_id),
      );
      return { status: 204 };
    },
  }),
];
