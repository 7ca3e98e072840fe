import { randomUUID } from 'node:crypto';
import { notFound, ValidationError } from '../../lib/platform/errors';
import { TEAM_SETTING_DEFAULTS, type TeamChanges, type TeamDoc, type TeamSettings } from '../../lib/tenancy/model';
import { isoWithOffset } from '../../lib/platform/time';
import {
  Org,
  OrgParams,
  OrgPatchBody,
  OrgTeamParams,
  Team,
  TeamCreateBody,
  TeamFeatureFlagsPatchBody,
  TeamList,
  TeamPatchBody,
} from '../../schemas/management';
import type { AppDeps } from '../deps';
import { defineRoute } from '../route';
import { audited } from '../../lib/tenancy/audit';
import { deleteTeam } from '../../lib/tenancy/team-deletion';
import { conflict, managementErrors, teamInScope, teamNotFound } from '../management-scope';
import { toTeam } from '../../lib/tenancy/views';

const errors = managementErrors;

/** The settings among a request's fields (a name or region is not one). */
function settingsOf(body: Partial<TeamSettings>): Partial<TeamSettings> {
  return Object.fromEntries(
    Object.keys(TEAM_SETTING_DEFAULTS)
      .filter((k) => k in body)
      .map((k) => [k, body[k as keyof TeamSettings]]),
  );
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

const orgTags = ['Management: organisation'];

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
      const org = await audited(
        { deps, auth, requestId, log },
        { action: 'org.update', type: 'org', id: auth.orgId, teamId: null },
        async () => {
          const renamed = await deps.repos.tenancy.renameOrg(auth.orgId, body.name);
          if (!renamed) throw notFound('Organisation not found.');
          return renamed;
        },
        ['name'],
      );
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
];
