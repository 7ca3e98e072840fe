import { randomUUID } from 'node:crypto';
import { ApiError, forbidden, notFound, ValidationError } from '../../lib/platform/errors';
import {
  MAX_MANAGEMENT_KEYS_PER_ORG,
  type KeyChangeOutcome,
  type KeyChangeRefusal,
  type ManagementKeyChanges,
  type ManagementKeyDoc,
} from '../../lib/tenancy/model';
import {
  ManagementKeyCreateBody,
  ManagementKeyCreated,
  ManagementKeyList,
  ManagementKeyPatchBody,
  ManagementKey,
  OrgEnvRegionParams,
  OrgKeyParams,
  OrgParams,
  TeamApiKeyCreateBody,
  TeamApiKeyCreated,
  TeamApiKeyDeleteQuery,
  TeamApiKeyList,
  TeamApiKeyListQuery,
} from '../../schemas/management';
import { defineRoute } from '../route';
import { audited } from '../../lib/tenancy/audit';
import { assertThisDeployment, listedTeams, conflict, managementErrors, otherDeployment, teamInScope } from '../management-scope';
import { toManagementKey, toTeamApiKey } from '../../lib/tenancy/views';

const errors = managementErrors;

const keyTags = ['Management: keys'];

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

export const managementKeyRoutes = [
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
    description: 'Revoked keys stop working at once, on every api process (unless the deployment opts into caching verified keys with AUTH_CACHE_TTL_MS > 0).',
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
