import { Type, type Static } from '@sinclair/typebox';
import { Nullable, StringEnum } from './common';

/** The link-token API the hosted link page calls (x-vital-link-token): README "Wearable data: the link page". */
const Open = { additionalProperties: true } as const;
const ProviderSlug = Type.String({ pattern: '^[a-z0-9_]+$', maxLength: 64 });

export const LinkProviderParams = Type.Object({ provider: ProviderSlug }, { additionalProperties: false });
export const LinkOAuthParams = Type.Object({ oauth_provider: ProviderSlug }, { additionalProperties: false });
export const LinkOAuthQuery = Type.Object(
  {
    region: Type.Optional(
      Type.String({ maxLength: 16, description: "At a provider with `regions` (Dexcom): where the user's account lives; default `default_region`." }),
    ),
  },
  { additionalProperties: true },
);

export const LinkState = Type.Object(
  {
    state: Type.Literal('pending', { description: 'The token can still be used (an unusable one is a 401 saying why).' }),
    user_id: Type.String(),
    provider: Nullable(Type.String({ description: 'The provider the token was made for, if any.' })),
    expires_at: Type.String(),
    redirect_url: Nullable(Type.String()),
    environment: StringEnum(['sandbox', 'production']),
    team: Type.Object(
      { name: Type.String(), brand_color: Nullable(Type.String()), logo_url: Nullable(Type.String()) },
      { ...Open, description: "The team's brand (brand_information.company_name, brand_color, logo_url), or its name." },
    ),
  },
  { ...Open, $id: 'LinkTokenState', description: 'A usable link token: who it connects and whose brand the page shows.' },
);

export const SourceLink = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    slug: Type.String(),
    description: Type.String(),
    logo: Type.String(),
    oauth_url: Nullable(Type.String()),
    auth_type: Type.String(),
    link_method: StringEnum(['demo', 'oauth', 'password', 'email'], { description: 'Ours: how the link page connects it (demo: at once, sandbox only).' }),
    form_components: Nullable(Type.Object({}, { ...Open, description: 'The sign-in form fields of a password or email provider.' })),
    regions: Type.Optional(
      Type.Array(Type.Object({ id: Type.String(), label: Type.String() }), {
        description:
          "Ours, at a provider that keeps each account in one region (Dexcom): where the user's account can live; pass the chosen `id` as `region` to GET /v2/link/provider/oauth/{oauth_provider}.",
      }),
    ),
    default_region: Type.Optional(Type.String({ description: "Ours, with `regions`: the one proposed, from the team's region." })),
  },
  { ...Open, $id: 'SourceLink' },
);
export const SourceLinkList = Type.Array(SourceLink, { description: 'The providers the token offers.' });

export const OAuthSource = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    slug: Type.String(),
    description: Type.String(),
    logo: Type.String(),
    oauth_url: Type.String({ description: "The provider's authorization URL; it answers to GET /v2/link/oauth/callback." }),
    auth_type: Type.String(),
    source_type: Type.String(),
    is_active: Type.Boolean(),
  },
  { ...Open, $id: 'Source' },
);

export const PasswordLinkBody = Type.Object(
  {
    username: Type.String({ minLength: 1, maxLength: 256 }),
    password: Type.String({ minLength: 1, maxLength: 256 }),
    region: Type.Optional(Nullable(Type.String({ maxLength: 16 }))),
  },
  { additionalProperties: false, $id: 'IndividualProviderData' },
);
export const EmailLinkBody = Type.Object(
  {
    email: Type.String({ minLength: 3, maxLength: 320 }),
    provider: Type.Optional(Nullable(ProviderSlug)),
    region: Type.Optional(Nullable(Type.String({ maxLength: 16 }))),
  },
  { additionalProperties: false, $id: 'EmailProviderAuthLink' },
);

export const ProviderLinkResponse = Type.Object(
  {
    state: StringEnum(['success', 'error']),
    provider: Type.String(),
    connected: Type.Boolean(),
    redirect_url: Nullable(Type.String()),
    error_type: Type.Optional(
      Type.String({ description: 'invalid_token, token_consumed, provider_credential_error, provider_api_error, duplicate_connection, …' }),
    ),
    error: Type.Optional(Type.String()),
    provider_id: Type.Optional(Type.String()),
  },
  { ...Open, $id: 'ProviderLinkResponse' },
);

export const OAuthCallbackQuery = Type.Object(
  { state: Type.String({ maxLength: 128 }), code: Type.Optional(Type.String({ maxLength: 2048 })), error: Type.Optional(Type.String({ maxLength: 256 })) },
  { additionalProperties: true },
);
export type OAuthCallbackQuery = Static<typeof OAuthCallbackQuery>;
