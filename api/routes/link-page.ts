import { Type } from '@sinclair/typebox';
import { createLinkAuth } from '../../lib/wearables/link-auth';
import { connectWithLinkToken, oauthClient, type ProviderLinkResponse } from '../../lib/wearables/link-flow';
import { LINK_TOKEN_REFUSALS, type LinkTokenRefusal } from '../../lib/wearables/link-tokens-store';
import { LinkOAuthParams, OAuthCallbackQuery } from '../../schemas/link';
import { finishRealOAuth } from '../../lib/wearables/providers/link-oauth';
import { integrationFor } from '../../lib/wearables/providers/registry';
import type { AppDeps } from '../deps';
import { defineRoute, type Reply } from '../route';
import { fillTemplate, staticFolder, STATIC_PAGE_HEADERS } from '../static-pages';

/**
 * The hosted link page (README "Wearable data: the link page"): `link_web_url` of POST /v2/link/token. Static files
 * from api/link/ that call the link-token API (api/routes/link-providers.ts) only; a token that cannot be used is a
 * 4xx page saying why, and so is the end of an OAuth step that failed when the token has no redirect_url.
 */
const linkFolder = staticFolder('link', 'The link page', '/link', ['link.css', 'link.js', 'link-api.js']);
const tags = ['Link'];
const REFUSAL_STATUS: Record<LinkTokenRefusal, number> = { invalid_token: 404, token_expired: 410, token_consumed: 410 };
/** How an OAuth step's failure is answered when there is no redirect_url to send it to. */
const ERROR_STATUS: Record<string, number> = {
  provider_api_error: 502,
  user_cancelled: 400,
  provider_credential_error: 400,
  required_scopes_not_granted: 403,
  duplicate_connection: 409,
};

const messagePage = (status: number, title: string, message: string): Reply => ({
  status,
  body: fillTemplate(linkFolder.read('message.html'), { title, message }),
  contentType: 'text/html; charset=utf-8',
  headers: STATIC_PAGE_HEADERS,
});

const refusalPage = (refused: LinkTokenRefusal) =>
  messagePage(
    REFUSAL_STATUS[refused],
    refused === 'invalid_token' ? 'Link not valid' : refused === 'token_expired' ? 'Link expired' : 'Link already used',
    LINK_TOKEN_REFUSALS[refused],
  );

/** The link's outcome: to the token's redirect_url (`?state=…&provider=…`, the original's OAuth convention), else a page. */
function finish(deps: AppDeps, result: ProviderLinkResponse): Reply {
  const target = result.redirect_url ? safeRedirect(result.redirect_url) : null;
  if (target) {
    target.searchParams.set('state', result.state);
    target.searchParams.set('provider', result.provider);
    if (result.error_type) target.searchParams.set('error_type', result.error_type);
    if (result.error) target.searchParams.set('error', result.error);
    return { status: 307, headers: { Location: target.toString(), 'Cache-Control': 'no-store' } };
  }
  const name = deps.providers.find(result.provider)?.name ?? result.provider;
  if (result.state === 'success') return messagePage(200, `${name} connected`, `${name} is connected. You can close this window.`);
  return messagePage(ERROR_STATUS[result.error_type ?? ''] ?? 400, `${name} not connected`, result.error ?? 'The provider did not connect.');
}

/** Only http(s) destinations are followed (a `javascript:` redirect_url would run in our origin). */
function safeRedirect(url: string): URL | null {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? parsed : null;
  } catch {
    return null;
  }
}

export const linkPageRoutes = [
  defineRoute({
    operationId: 'linkPage',
    method: 'get',
    path: '/link',
    summary: 'Hosted link page',
    tags,
    auth: 'none',
    internal: true,
    query: Type.Object({ token: Type.Optional(Type.String({ maxLength: 256 })) }, { additionalProperties: true }),
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    async handler({ query, deps }) {
      if (!query.token)
        return messagePage(400, 'Link incomplete', 'This address has no link token. Open the whole link the app gave you, or ask it for a new one.');
      const checked = await deps.repos.linkTokens.check(query.token);
      if ('refused' in checked) return refusalPage(checked.refused);
      return { body: linkFolder.read('index.html'), contentType: 'text/html; charset=utf-8', headers: STATIC_PAGE_HEADERS };
    },
  }),
  linkFolder.assetRoute({ operationId: 'linkPageAsset', summary: 'Hosted link page assets', tags }),
  defineRoute({
    operationId: 'linkOAuthCallback',
    method: 'get',
    path: '/v2/link/oauth/callback/{oauth_provider}',
    summary: 'OAuth callback of the link flow',
    description:
      "Where the provider sends the user back (`state`: the step's, `code` or `error`): exchanges the code, connects and uses the link token, then redirects to " +
      "the token's redirect_url with `state=success|error`, `provider`, `error_type`, `error` (307), or shows the outcome. A real integration's `state` " +
      'is single-use (a replayed callback is a 410 page); a provider without an integration here cannot exchange the code: provider_api_error.',
    tags,
    auth: 'none',
    params: LinkOAuthParams,
    query: OAuthCallbackQuery,
    responses: {
      200: { description: 'Outcome page', contentType: 'text/html' },
      307: { description: "To the token's redirect_url" },
      404: { description: 'Unknown link', contentType: 'text/html' },
    },
    async handler({ params, query, deps }) {
      const provider = params.oauth_provider;
      const name = deps.providers.find(provider)?.name ?? provider;
      // A real integration's state: taken once (a reloaded or replayed callback finds it gone).
      const taken = integrationFor(provider) ? await deps.repos.providerAuth.takeState(query.state) : null;
      if (taken === 'expired') return messagePage(410, `${name} not connected`, `This sign-in took longer than 15 minutes. Start again from the link.`);
      if (taken) {
        const token = await deps.repos.linkTokens.checkHash(taken.link_token_id);
        if ('refused' in token) return refusalPage(token.refused);
        return finish(deps, await connectWithLinkToken(deps, token.doc, provider, () => finishRealOAuth(deps, taken, query, name)));
      }
      const checked = await deps.repos.linkTokens.checkHash(query.state);
      if ('refused' in checked) {
        if (checked.refused === 'invalid_token' && integrationFor(provider)) {
          return messagePage(410, `${name} not connected`, `This sign-in was already used or is not valid (a code works once). Start again from the link.`);
        }
        return refusalPage(checked.refused);
      }
      const { redirectUri } = await oauthClient(deps, checked.doc, provider);
      const linkAuth = createLinkAuth(deps);
      const result = await connectWithLinkToken(deps, checked.doc, provider, async () =>
        query.code && !query.error
          ? linkAuth.exchangeCode({ provider, code: query.code, redirectUri })
          : {
              accepted: false,
              errorType: query.error === 'access_denied' ? 'user_cancelled' : 'provider_api_error',
              error: `${provider} did not grant access (${query.error ?? 'no code'}).`,
            },
      );
      return finish(deps, result);
    },
  }),
];
