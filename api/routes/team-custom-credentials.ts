import { notFound, ValidationError } from '../../lib/platform/errors';
import type { CustomCredentialsDoc } from '../../lib/tenancy/custom-credentials-store';
import { isoWithOffset } from '../../lib/platform/time';
import { ErrorDetail } from '../../schemas/common';
import {
  CustomCredentials,
  CustomCredentialsBody,
  CustomCredentialsDeleteQuery,
  CustomCredentialsList,
  CustomCredentialsListQuery,
  OrgEnvRegionParams,
} from '../../schemas/management';
import { defineRoute } from '../route';
import { audited } from '../../lib/tenancy/audit';
import { assertThisDeployment, listedTeams, managementErrors as errors, otherDeployment, teamInScope, teamNotFound } from '../management-scope';

const tags = ['Management: team custom credentials'];
const path = '/v1/org/{org_id}/team_custom_credentials/{environment}/{region}';

const toCustomCredentials = (d: CustomCredentialsDoc) => ({
  team_id: d.team_id,
  provider: d.provider,
  client_id: d.client_id,
  client_secret_hint: d.client_secret_hint,
  has_details: d.details !== null,
  redirect_url_override: d.redirect_url_override,
  created_at: isoWithOffset(d.created_at),
  updated_at: isoWithOffset(d.updated_at),
});

export const teamCustomCredentialsRoutes = [
  defineRoute({
    operationId: 'listTeamCustomCredentials',
    method: 'get',
    path,
    summary: 'List team custom credentials',
    description: "Teams' own OAuth applications per provider. Client secrets are shown only as a hint (their last 4 characters).",
    tags,
    auth: 'management',
    params: OrgEnvRegionParams,
    query: CustomCredentialsListQuery,
    responses: { 200: { description: 'Credentials', schema: CustomCredentialsList }, ...otherDeployment, ...errors },
    async handler({ auth, params, query, deps }) {
      assertThisDeployment(deps, params.environment, params.region);
      const docs = await deps.repos.customCredentials.list(auth.orgId, listedTeams(auth, query.team_id));
      return { body: { data: docs.map(toCustomCredentials) } };
    },
  }),
  defineRoute({
    operationId: 'setTeamCustomCredentials',
    method: 'post',
    path,
    summary: 'Set team custom credentials',
    description:
      "Uses the team's own OAuth application (client id and secret) when its users connect `provider`; replaces earlier credentials " +
      'for that provider. The secret and `details` are stored encrypted and never shown again in full.',
    tags,
    auth: 'management',
    params: OrgEnvRegionParams,
    body: CustomCredentialsBody,
    responses: {
      200: { description: 'The credentials (secret masked)', schema: CustomCredentials },
      ...otherDeployment,
      409: { description: 'The team is being deleted', schema: ErrorDetail },
      ...errors,
    },
    async handler({ auth, params, body, deps, requestId, log }) {
      assertThisDeployment(deps, params.environment, params.region);
      await teamInScope(deps, auth, body.team_id);
      const provider = deps.providers.find(body.provider);
      if (provider?.auth_type !== 'oauth') {
        const msg = provider ? `${body.provider} does not use OAuth; custom credentials are for OAuth providers.` : `Unknown provider ${body.provider}.`;
        throw ValidationError.field(['body', 'provider'], msg);
      }
      const doc = await audited(
        { deps, auth, requestId, log },
        { action: 'team_custom_credentials.set', type: 'team_custom_credentials', id: `${body.team_id}:${body.provider}`, teamId: body.team_id },
        async () => {
          const stored = await deps.repos.tenancy.addToLiveTeam(
            auth.orgId,
            body.team_id,
            (team) =>
              deps.repos.customCredentials.put({
                org_id: team.org_id,
                team_id: team._id,
                provider: body.provider,
                environment: team.environment,
                region: team.region,
                client_id: body.client_id,
                client_secret: body.client_secret,
                details: body.details ?? null,
                redirect_url_override: body.redirect_url_override ?? null,
              }),
            (put) => deps.repos.customCredentials.delete(put.team_id, put.provider),
          );
          if (!stored) throw teamNotFound(body.team_id);
          return stored;
        },
        Object.keys(body).filter((k) => k !== 'team_id' && k !== 'provider'),
      );
      return { body: toCustomCredentials(doc) };
    },
  }),
  defineRoute({
    operationId: 'deleteTeamCustomCredentials',
    method: 'delete',
    path,
    summary: 'Delete team custom credentials',
    description: "The team's users then connect the provider through our OAuth application.",
    tags,
    auth: 'management',
    params: OrgEnvRegionParams,
    query: CustomCredentialsDeleteQuery,
    responses: { 204: { description: 'Deleted' }, ...otherDeployment, ...errors },
    async handler({ auth, params, query, deps, requestId, log }) {
      assertThisDeployment(deps, params.environment, params.region);
      await teamInScope(deps, auth, query.team_id);
      await audited(
        { deps, auth, requestId, log },
        { action: 'team_custom_credentials.delete', type: 'team_custom_credentials', id: `${query.team_id}:${query.provider}`, teamId: query.team_id },
        async () => {
          if (!(await deps.repos.tenancy.findLiveTeam(auth.orgId, query.team_id))) throw teamNotFound(query.team_id);
          if (!(await deps.repos.customCredentials.delete(query.team_id, query.provider)))
            throw notFound(`Team ${query.team_id} has no custom credentials for ${query.provider}.`);
        },
      );
      return { status: 204 };
    },
  }),
];
