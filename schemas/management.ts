import { Type, type Static } from '@sinclair/typebox';
import { Nullable, StringEnum, Timestamp, Uuid } from './common';

export const Environment = StringEnum(['sandbox', 'production']);
export const Region = StringEnum(['us', 'eu']);

export const OrgParams = Type.Object({ org_id: Uuid() });
export const OrgTeamParams = Type.Object({ org_id: Uuid(), team_id: Uuid() });
export const OrgEnvRegionParams = Type.Object({ org_id: Uuid(), environment: Environment, region: Region });
export const OrgKeyParams = Type.Object({ org_id: Uuid(), key_id: Uuid() });

export const Org = Type.Object({ id: Uuid(), name: Type.String(), created_at: Timestamp() }, { $id: 'Org' });
export const OrgPatchBody = Type.Object({ name: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false, $id: 'OrgPatchBody' });

const HttpUrl = (description: string) =>
  Type.String({
    format: 'uri',
    pattern: '^[hH][tT][tT][pP][sS]?://',
    maxLength: 2048,
    description,
    'x-messages': { pattern: 'Input should be an http(s) URL.' },
  });
const Email = (description: string) => Type.String({ format: 'email', maxLength: 320, description });
const ShortText = (description: string, maxLength = 200) => Type.String({ minLength: 1, maxLength, description });

export const BrandInformation = Type.Object(
  {
    company_name: ShortText('Shown to patients in lab-testing communication. Needs `logo_url` on the team.'),
    company_website: Type.Optional(Nullable(HttpUrl('Company website.'))),
    support_email: Type.Optional(Nullable(Email('Where patients write for help.'))),
    support_contact: Type.Optional(Nullable(ShortText('Support phone number or contact line.'))),
    company_address: Type.Optional(Nullable(ShortText('Postal address, one line.', 1000))),
    brand_color: Type.Optional(Nullable(Type.String({ pattern: '^#[0-9a-fA-F]{6}$', description: 'Hex colour, `#RRGGBB`.' }))),
  },
  { additionalProperties: false, $id: 'BrandInformation' },
);

/** Team settings, as in the reference API's team body (flat, each optional in a request). */
const teamSettings = {
  logo_url: Type.Optional(Nullable(HttpUrl('Logo for patient communication; required while `brand_information` has a `company_name`.'))),
  brand_information: Type.Optional(Nullable(BrandInformation)),
  lab_tests_patient_sms_communication_enabled: Type.Optional(Type.Boolean({ description: 'Text patients about their lab tests (default true).' })),
  lab_tests_patient_email_communication_enabled: Type.Optional(Type.Boolean({ description: 'E-mail patients about their lab tests (default true).' })),
  critical_result_notification_email: Type.Optional(Nullable(Email('Who is told of critical lab results.'))),
  reject_duplicate_connection: Type.Optional(
    Type.Boolean({ description: 'Refuse connecting a provider account that another user of the team has connected already (default false).' }),
  ),
};

export const TeamFeatureFlags = Type.Object(
  { insurance: Type.Boolean({ description: 'Insurance records and insurance billing (closed beta).' }) },
  { $id: 'TeamFeatureFlags' },
);
const featureFlagChanges = {
  properties: { insurance: Type.Optional(Type.Boolean({ description: 'Insurance records and insurance billing (closed beta).' })) },
  options: { additionalProperties: false, description: 'Org management keys only. Flags not given keep their value.' },
};
// Two objects, not one nested in the other: the validator refuses a schema whose `$id` it has already met nested.
export const TeamFeatureFlagsPatchBody = Type.Object(featureFlagChanges.properties, { ...featureFlagChanges.options, $id: 'TeamFeatureFlagsPatchBody' });
const FeatureFlagChanges = Type.Object(featureFlagChanges.properties, featureFlagChanges.options);

export const Team = Type.Object(
  {
    id: Uuid(),
    org_id: Uuid(),
    name: Type.String(),
    environment: Type.String({ description: 'Environment of this deployment the team lives in.' }),
    region: Type.String(),
    logo_url: Nullable(Type.String()),
    brand_information: Nullable(BrandInformation),
    lab_tests_patient_sms_communication_enabled: Type.Boolean(),
    lab_tests_patient_email_communication_enabled: Type.Boolean(),
    critical_result_notification_email: Nullable(Type.String()),
    reject_duplicate_connection: Type.Boolean(),
    feature_flags: TeamFeatureFlags,
    status: StringEnum(['active', 'deleting'], {
      description: '`deleting`: a DELETE began and did not finish (repeat it); the team takes no changes meanwhile. Non-exhaustive.',
    }),
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
    ...teamSettings,
  },
  { additionalProperties: false, $id: 'TeamCreateBody' },
);
export type TeamCreateBody = Static<typeof TeamCreateBody>;
export const TeamPatchBody = Type.Object(
  { name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })), ...teamSettings, feature_flags: Type.Optional(FeatureFlagChanges) },
  {
    additionalProperties: false,
    $id: 'TeamPatchBody',
    description: 'Only the fields given change; `brand_information` is replaced as a whole (null removes it); `feature_flags` needs an org key.',
  },
);
export type TeamPatchBody = Static<typeof TeamPatchBody>;

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
  { api_key_id: Type.Array(Uuid(), { minItems: 1, maxItems: 100, description: 'Repeat to delete several.' }) },
  { additionalProperties: true },
);

export const ManagementRole = StringEnum(['org_admin', 'team_admin']);
export const TeamRoleBinding = Type.Object({ team_id: Uuid() });
const TeamRoleBindings = (options: Record<string, unknown> = {}) =>
  Type.Array(TeamRoleBinding, {
    maxItems: 100,
    description: 'The teams a team_admin key may act on (one or more); empty or omitted for org_admin.',
    ...options,
  });
export const ManagementKeyCreateBody = Type.Object(
  {
    label: Type.String({ minLength: 1, maxLength: 200, default: 'default' }),
    role: ManagementRole,
    team_role_bindings: TeamRoleBindings({ default: [] }),
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
export const ManagementKeyPatchBody = Type.Object(
  {
    label: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    role: Type.Optional(ManagementRole),
    team_role_bindings: Type.Optional(TeamRoleBindings()),
  },
  {
    additionalProperties: false,
    $id: 'ManagementKeyPatchBody',
    description:
      'Only the fields given change. The result must hold the role rules: team_admin with one or more bindings, org_admin with none ' +
      '(turning a team_admin key into org_admin drops its bindings).',
  },
);
export type ManagementKeyPatchBody = Static<typeof ManagementKeyPatchBody>;
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

// ------------------------------------------------------------------ team custom credentials

export const CustomCredentialsBody = Type.Object(
  {
    team_id: Uuid(),
    provider: Type.String({ minLength: 1, maxLength: 100, description: 'Slug of an OAuth provider (GET /v2/providers).' }),
    client_id: ShortText("Your OAuth application's client id at the provider.", 500),
    client_secret: ShortText("Your OAuth application's client secret. Stored encrypted; never shown again in full.", 2000),
    details: Type.Optional(
      Type.Record(Type.String({ maxLength: 100 }), Type.Unknown(), {
        maxProperties: 50,
        description: 'Provider-specific settings. Stored encrypted (they may hold secrets) and not shown again.',
      }),
    ),
    redirect_url_override: Type.Optional(Nullable(HttpUrl('OAuth redirect URL registered with your application, if not ours.'))),
  },
  { additionalProperties: false, $id: 'CustomCredentialsBody' },
);
export type CustomCredentialsBody = Static<typeof CustomCredentialsBody>;
export const CustomCredentials = Type.Object(
  {
    team_id: Uuid(),
    provider: Type.String(),
    client_id: Type.String(),
    client_secret_hint: Type.String({ description: 'The secret masked: its last 4 characters at most (none for secrets under 12 characters).' }),
    has_details: Type.Boolean(),
    redirect_url_override: Nullable(Type.String()),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { $id: 'CustomCredentials' },
);
export const CustomCredentialsList = Type.Object({ data: Type.Array(CustomCredentials) }, { $id: 'CustomCredentialsList' });
export const CustomCredentialsListQuery = Type.Object({ team_id: Type.Optional(Uuid()) }, { additionalProperties: true });
export const CustomCredentialsDeleteQuery = Type.Object(
  { team_id: Uuid(), provider: Type.String({ minLength: 1, maxLength: 100 }) },
  { additionalProperties: true },
);

// ------------------------------------------------------------------ audit log

export const AUDIT_ACTIONS = [
  'org.update',
  'team.create',
  'team.update',
  'team.delete',
  'team.feature_flags.update',
  'management_key.create',
  'management_key.update',
  'management_key.delete',
  'team_api_key.create',
  'team_api_key.delete',
  'team_custom_credentials.set',
  'team_custom_credentials.delete',
  // Lab accounts (api/routes/lab-accounts.ts).
  'lab_account.create',
  'lab_account.update',
  'lab_account.delete',
  // The lab result review inbox (api/routes/lab-result-reviews.ts), and a lab's result for an erased order (answered as unknown).
  'lab_result_review.match',
  'lab_result_review.reject',
  'lab_results.erased_order',
  // Webhook endpoint management (api/routes/webhooks.ts): changes only, never reads.
  'webhook.create',
  'webhook.update',
  'webhook.delete',
  'webhook.headers.update',
  'webhook.secret.rotate',
  'webhook.test',
  'webhook.event.resend',
  'webhook.recover',
  // Pipeline management (api/routes/pipelines.ts).
  'pipeline.create',
  'pipeline.update',
  'pipeline.delete',
  'pipeline.test',
  'pipeline.event.resend',
  'pipeline.recover',
  // The delivery-log page (api/routes/console.ts): a sign-in link made, and used.
  'console.link.create',
  'console.link.use',
  // A lab's HL7 result message refused (lib/labs/hl7-intake.ts): the actor is the team API key it came with.
  'lab_intake.hl7.refused',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export const AuditLogEntry = Type.Object(
  {
    id: Uuid(),
    org_id: Uuid(),
    team_id: Nullable(Uuid()),
    action: Type.String({ description: `Non-exhaustive: ${AUDIT_ACTIONS.join(', ')}.` }),
    target: Type.Object({ type: Type.String(), id: Type.String() }),
    actor: Type.Object({
      management_key_id: Type.Union([Uuid(), Type.Null()], { description: 'null when a team API key acted (a lab sending results: lab_intake.hl7.refused).' }),
      team_api_key_id: Type.Optional(Uuid()),
      header: Type.String({
        description:
          'The header the key came in (X-Management-Key, or the deprecated X-Service-Org-Key), or Authorization for a delivery-log page session the key opened.',
      }),
    }),
    request_id: Type.String(),
    status: StringEnum(['pending', 'succeeded', 'failed'], {
      description:
        '`pending`: written before the change; one that stays pending means the process stopped before recording the outcome ' +
        '(the change may or may not have been made: look at the target). Non-exhaustive.',
    }),
    error: Nullable(Type.Object({ status: Type.Integer(), detail: Type.String() })),
    changes: Type.Array(Type.String(), { description: 'Names of the fields the request set (never their values).' }),
    created_at: Timestamp(),
    completed_at: Nullable(Timestamp()),
  },
  { $id: 'AuditLogEntry' },
);
export const AuditLogPage = Type.Object(
  {
    data: Type.Array(AuditLogEntry),
    next_cursor: Nullable(Type.String({ description: 'Pass as next_cursor for the next page; null on the last.' })),
  },
  { $id: 'AuditLogPage' },
);
export const AuditLogQuery = Type.Object(
  {
    team_id: Type.Optional(Uuid()),
    action: Type.Optional(Type.String({ maxLength: 100 })),
    next_cursor: Type.Optional(Type.String({ maxLength: 200 })),
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 50 }),
  },
  { additionalProperties: true },
);
