import { Type, type Static } from '@sinclair/typebox';
import { StringEnum, Timestamp, Uuid } from './common';

export const Environment = StringEnum(['sandbox', 'production']);
export const Region = StringEnum(['us', 'eu']);

export const OrgParams = Type.Object({ org_id: Uuid() });
export const OrgTeamParams = Type.Object({ org_id: Uuid(), team_id: Uuid() });
export const OrgEnvRegionParams = Type.Object({ org_id: Uuid(), environment: Environment, region: Region });
export const OrgKeyParams = Type.Object({ org_id: Uuid(), key_id: Uuid() });

export const Org = Type.Object({ id: Uuid(), name: Type.String(), created_at: Timestamp() }, { $id: 'Org' });

export const Team = Type.Object(
  {
    id: Uuid(),
    org_id: Uuid(),
    name: Type.String(),
    environment: Type.String({ description: 'Environment of this deployment the team lives in.' }),
    region: Type.String(),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { $id: 'Team' },
);
export type Team = Static<typeof Team>;
export const TeamList = Type.Object({ data: Type.Array(Team) }, { $id: 'TeamList' });

export const TeamCreateBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    region: Type.Optional(Region),
  },
  { additionalProperties: false, $id: 'TeamCreateBody' },
);
export const TeamPatchBody = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 200 }) },
  { additionalProperties: false, $id: 'TeamPatchBody' },
);

export const TeamApiKeyCreateBody = Type.Object(
  { team_id: Uuid(), label: Type.String({ minLength: 1, maxLength: 200, default: 'default' }) },
  { additionalProperties: false, $id: 'TeamApiKeyCreateBody' },
);
export const TeamApiKey = Type.Object(
  {
    id: Uuid(),
    label: Type.String(),
    team_id: Uuid(),
    prefix: Type.String({ description: 'First characters of the key, to recognise it.' }),
    created_at: Timestamp(),
  },
  { $id: 'TeamApiKey' },
);
export const TeamApiKeyCreated = Type.Intersect([TeamApiKey, Type.Object({ value: Type.String({ description: 'The key. Shown once.' }) })], {
  $id: 'TeamApiKeyCreated',
});
export const TeamApiKeyList = Type.Object({ data: Type.Array(TeamApiKey) }, { $id: 'TeamApiKeyList' });
export const TeamApiKeyListQuery = Type.Object({ team_id: Type.Optional(Uuid()) }, { additionalProperties: true });
export const TeamApiKeyDeleteQuery = Type.Object(
  { api_key_id: Type.Array(Uuid(), { minItems: 1, description: 'Repeat to delete several.' }) },
  { additionalProperties: true },
);

export const ManagementRole = StringEnum(['org_admin', 'team_admin']);
export const TeamRoleBinding = Type.Object({ team_id: Uuid() });
export const ManagementKeyCreateBody = Type.Object(
  {
    label: Type.String({ minLength: 1, maxLength: 200, default: 'default' }),
    role: ManagementRole,
    team_role_bindings: Type.Array(TeamRoleBinding, {
      default: [],
      maxItems: 100,
      description: 'The teams a team_admin key may act on (one or more); empty or omitted for org_admin.',
    }),
  },
  {
    additionalProperties: false,
    $id: 'ManagementKeyCreateBody',
    // team_admin needs at least one binding; org_admin covers every team and takes none.
    if: { properties: { role: { const: 'team_admin' } }, required: ['role'] },
    then: { properties: { team_role_bindings: { minItems: 1 } }, required: ['team_role_bindings'] },
    else: { properties: { team_role_bindings: { maxItems: 0 } } },
  },
);
export const ManagementKey = Type.Object(
  {
    id: Uuid(),
    label: Type.String(),
    role: Type.String(),
    team_role_bindings: Type.Array(TeamRoleBinding),
    prefix: Type.String(),
    created_at: Timestamp(),
  },
  { $id: 'ManagementKey' },
);
export const ManagementKeyCreated = Type.Intersect([ManagementKey, Type.Object({ value: Type.String() })], {
  $id: 'ManagementKeyCreated',
});
export const ManagementKeyList = Type.Object({ data: Type.Array(ManagementKey) }, { $id: 'ManagementKeyList' });
