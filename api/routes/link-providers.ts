import { badRequest, ValidationError } from '../../lib/platform/errors';
import { integrationFor } from '../../lib/wearables/providers/registry';
import { isoWithOffset } from '../../lib/platform/time';
import { createLinkAuth, type LinkCredentials } from '../../lib/wearables/link-auth';
import { connectWithLinkToken, demoSignIn, linkBrand, oauthClient, offeredProviders } from '../../lib/wearables/link-flow';
import { ErrorDetail } from '../../schemas/common';
import { realAuthorizationUrl } from '../../lib/wearables/providers/link-oauth';
import {
  EmailLinkBody,
  LinkOAuthParams,
  LinkOAuthQuery,
  LinkProviderParams,
  LinkState,
  OAuthSource,
  PasswordLinkBody,
  ProviderLinkResponse,
  SourceLinkList,
} from '../../schemas/link';
import { defineRoute } from '../route';

/**
 * The link-token API (x-vital-link-token, no API key): what the hosted link page (api/routes/link-page.ts) and the
 * original's link widget call to show a token's providers and connect one. README "Wearable data: the link page".
 */
const tags = ['Link'];
const refusals = {
  401: { description: 'Missing, unknown, expired or used link token (the detail says which)', schema: ErrorDetail },
  404: { description: 'The user was deleted', schema: ErrorDetail },
};
const outcome = { 200: { description: 'Link outcome: state success, or error with error_type', schema: ProviderLinkResponse }, ...refusals };

const credentialsRoute = (kind: 'password' | 'email') =>
  defineRoute({
    operationId: kind === 'password' ? 'connectPasswordProvider' : 'connectEmailProvider',
    method: 'post',
    path: `/v2/link/provider/${kind}/{provider}`,
    summary: kind === 'password' ? 'Connect a password provider' : 'Connect an email provider',
    description:
      `Signs in at a ${kind} provider with the user's ${kind === 'password' ? 'username and password' : 'email'} and connects it, using the link token once. ` +
      'This deployment has no internet access: the sandbox accepts its demo credentials (the connection then gets demo data) and refuses others with provider_credential_error; production answers provider_api_error.',
    tags,
    auth: 'link',
    params: LinkProviderParams,
    body: kind === 'password' ? PasswordLinkBody : EmailLinkBody,
    responses: outcome,
    async handler({ params, body, auth, deps }) {
      if (deps.providers.find(params.provider)?.auth_type !== kind) throw badRequest(`${params.provider} is not a ${kind} provider.`);
      const credentials: LinkCredentials = 'email' in body ? { email: body.email } : { username: body.username, password: body.password };
      const linkAuth = createLinkAuth(deps);
      return { body: await connectWithLinkToken(deps, auth.token, params.provider, () => linkAuth.signIn({ provider: params.provider, credentials })) };
    },
  });

export const linkProviderRoutes = [
  defineRoute({
    operationId: 'getLinkTokenState',
    method: 'get',
    path: '/v2/link/state',
    summary: "A link token's state and its team's brand",
    description: 'Whether the token can still be used (an unusable one is a 401 saying why), whom it connects, and the brand the link page shows.',
    tags,
    auth: 'link',
    responses: { 200: { description: 'Usable', schema: LinkState }, 401: refusals[401] },
    async handler({ auth, deps }) {
      const { token } = auth;
      return {
        body: {
          state: 'pending',
          user_id: token.user_id,
          provider: token.provider,
          expires_at: isoWithOffset(token.expires_at),
          redirect_url: token.redirect_url,
          environment: deps.config.DEPLOYMENT_ENVIRONMENT,
          team: await linkBrand(deps, token.team_id),
        },
      };
    },
  }),
  defineRoute({
    operationId: 'getLinkProviders',
    method: 'get',
    path: '/v2/link/providers',
    summary: 'Providers a link token offers',
    description: "The token's `provider`, else its `filter_on_providers`, else every provider a browser can connect; `link_method` says how.",
    tags,
    auth: 'link',
    responses: { 200: { description: 'Providers', schema: SourceLinkList }, 401: refusals[401] },
    handler: async ({ auth, deps }) => ({ body: await offeredProviders(deps, auth.token) }),
  }),
  defineRoute({
    operationId: 'connectDemoProviderWithLinkToken',
    method: 'post',
    path: '/v2/link/provider/demo/{provider}',
    summary: 'Connect a demo provider with a link token (sandbox)',
    description: "The link page's demo connect: as POST /v2/link/connect/demo, for the token's user, using the token once.",
    tags,
    auth: 'link',
    params: LinkProviderParams,
    responses: outcome,
    async handler({ params, auth, deps }) {
      return { body: await connectWithLinkToken(deps, auth.token, params.provider, () => demoSignIn(deps, params.provider)) };
    },
  }),
  defineRoute({
    operationId: 'generateOAuthLink',
    method: 'get',
    path: '/v2/link/provider/oauth/{oauth_provider}',
    summary: "An OAuth provider's authorization URL",
    description:
      "`oauth_url` is where the user signs in at the provider and grants access (the team's own OAuth app when set in team custom credentials); the provider " +
      'answers to GET /v2/link/oauth/callback/{oauth_provider}, which connects and uses the token. Does not use the token.',
    tags,
    auth: 'link',
    params: LinkOAuthParams,
    query: LinkOAuthQuery,
    responses: {
      200: { description: 'The provider with its oauth_url', schema: OAuthSource },
      400: { description: 'Not an OAuth provider this link offers', schema: ErrorDetail },
      401: refusals[401],
      422: { description: 'A `region` the provider does not have (or a provider without regions)', schema: ErrorDetail },
    },
    async handler({ params, query, auth, deps }) {
      const slug = params.oauth_provider;
      const offered = (await offeredProviders(deps, auth.token)).find((p) => p.slug === slug && p.link_method === 'oauth');
      if (!offered) throw badRequest(`This link does not offer ${slug} as an OAuth provider.`);
      if (query.region !== undefined && !(offered.integration === 'real' && integrationFor(slug)?.regions?.hostFor(query.region))) {
        const ids = offered.regions?.map((r) => r.id);
        throw ValidationError.field(['query', 'region'], ids ? `${offered.name} has the regions ${ids.join(', ')}.` : `${offered.name} takes no region here.`);
      }
      // A real integration: a single-use state of its own (PKCE where the provider takes it); otherwise the token's.
      const url =
        offered.integration === 'real'
          ? await realAuthorizationUrl(deps, auth.token, slug, query.region)
          : createLinkAuth(deps).authorizationUrl({ provider: slug, ...(await oauthClient(deps, auth.token, slug)), state: auth.token._id });
      if (!url) throw badRequest(`${offered.name} sign-in is not available on this deployment (its authorization endpoint is not configured).`);
      return { body: { ...offered, oauth_url: url, source_type: deps.providers.find(slug)!.source_type, is_active: true } };
    },
  }),
  credentialsRoute('password'),
  credentialsRoute('email'),
];
