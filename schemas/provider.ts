import { Type, type Static } from '@sinclair/typebox';
import { StringEnum } from './common';

export const AuthTypes = ['oauth', 'team_oauth', 'sdk', 'password', 'email', 'app'] as const;
export const SourceTypes = ['app', 'ble', 'device', 'lab', 'provider'] as const;

/** One entry of lib/catalogue/providers.json (validated at start-up). */
export const ProviderCatalogueEntry = Type.Object(
  {
    slug: Type.String({ pattern: '^[a-z0-9_]+$' }),
    name: Type.String({ minLength: 1 }),
    description: Type.String({ minLength: 1 }),
    /** A legacy entry kept for its existing connections: the integration that replaces it (another entry's slug). */
    replaced_by: Type.Optional(Type.String({ pattern: '^[a-z0-9_]+$' })),
    auth_type: StringEnum(AuthTypes),
    source_type: StringEnum(SourceTypes),
    supported_resources: Type.Array(Type.String({ pattern: '^[a-z0-9_]+$' }), { uniqueItems: true }),
  },
  { additionalProperties: false },
);
export type ProviderCatalogueEntry = Static<typeof ProviderCatalogueEntry>;

export const Provider = Type.Object(
  {
    name: Type.String(),
    slug: Type.String(),
    description: Type.String(),
    logo: Type.String({ format: 'uri' }),
    auth_type: Type.String({ description: `Non-exhaustive: ${AuthTypes.join(', ')}.` }),
    supported_resources: Type.Array(Type.String(), { description: 'Non-exhaustive resource names.' }),
    integration: Type.Optional(
      Type.String({
        description:
          "Ours: how it connects for this team. `real`: a real integration with an OAuth app (the team's own, or the deployment's); `demo_only`: sandbox demo data; `unavailable`: no app configured in production; `sdk`: a phone signs in as its user and uploads (apple_health_kit, health_connect, samsung_health; in a sandbox the demo connects them too); `app`: the customer's app or SDK sends the data; `credentials`: a password or email sign-in. Non-exhaustive.",
      }),
    ),
    deprecated: Type.Optional(
      Type.Boolean({
        description:
          'Ours: a legacy entry kept for the connections made with it (the password sign-ins `whoop` and `dexcom`). New users are not offered it: connect `replaced_by` instead.',
      }),
    ),
    replaced_by: Type.Optional(
      Type.Union([Type.String(), Type.Null()], { description: 'Ours: the provider that replaces a deprecated one (`whoop_v2`, `dexcom_v3`), else null.' }),
    ),
    integration_note: Type.Optional(
      Type.Union([Type.String(), Type.Null()], { description: 'Ours: why a provider is demo-only, or what makes it connect for real.' }),
    ),
  },
  { $id: 'Provider' },
);
export type Provider = Static<typeof Provider>;

export const ProviderList = Type.Array(Provider, { $id: 'ProviderList' });

export const ProviderListQuery = Type.Object(
  {
    source_type: Type.Optional(StringEnum(SourceTypes, { description: 'Only providers of this source type.' })),
  },
  { additionalProperties: true },
);

export const ProviderSlugParams = Type.Object({ slug: Type.String({ pattern: '^[a-z0-9_]+$' }) });
