import { ProviderFetchError } from '../provider-errors';
import type { LinkSignIn } from '../link-auth';
import type { LinkTokenDoc } from '../link-tokens-store';
import { OAuthError, RateLimitedError } from './contract';
import { authorizeUrl, exchangeCode, pkcePair } from './oauth-client';
import { integrationFor } from './registry';
import { createProviderHttp } from './http';
import { appGate, resolveApp, type RuntimeDeps } from './runtime';
import { connectionRegion, defaultRegion, oauthInRegion } from './regions';
import type { OAuthStateDoc } from '../provider-auth-store';
import { missingRequiredScopes } from './scopes';

/**
 * The link page's OAuth step with a real provider (README "Connecting real providers"): a single-use `state` of 15
 * minutes (with the PKCE verifier where the provider takes one) is stored, the user consents at the provider, and the
 * callback takes the state once, exchanges the code with the app's client authentication, and asks the provider who
 * the user is (Polar: registers the user first). Nothing is connected until all of that succeeded.
 */
export async function realAuthorizationUrl(deps: RuntimeDeps, token: LinkTokenDoc, slug: string, askedRegion?: string): Promise<string | null> {
  const integration = integrationFor(slug);
  const app = integration && (await resolveApp(deps, token.team_id, slug));
  if (!integration || !app) return null;
  // Where the user's account lives at a provider with regions: as the page asked, else the team's default.
  const region = integration.regions ? (askedRegion ?? (await teamDefaultRegion(deps, token.team_id, slug))) : null;
  const pkce = integration.oauth.pkce ? pkcePair() : null;
  const state = await deps.repos.providerAuth.createState({
    link_token_id: token._id,
    team_id: token.team_id,
    user_id: token.user_id,
    provider: slug,
    client_id: app.clientId,
    redirect_uri: app.redirectUri,
    code_verifier: pkce?.verifier ?? null,
    region,
  });
  return authorizeUrl(oauthInRegion(integration, region), app, state._id, { baseUrl: app.baseUrl, codeChallenge: pkce?.challenge });
}

/** The region the link page proposes at `slug` to the users of a team (from the team's region); null without regions. */
export async function teamDefaultRegion(deps: RuntimeDeps, teamId: string, slug: string): Promise<string | null> {
  const integration = integrationFor(slug);
  if (!integration?.regions) return null;
  const team = await deps.repos.tenancy.findTeamById(teamId);
  return defaultRegion(integration, team?.region ?? deps.config.DEPLOYMENT_REGION);
}

const SIGN_IN_BOOK_AHEAD_MS = 15_000;

/** The provider's answer at the callback, turned into the link's sign-in outcome. */
export async function finishRealOAuth(
  deps: RuntimeDeps,
  state: OAuthStateDoc,
  answer: { code?: string; error?: string; error_description?: string; [param: string]: unknown },
  name: string,
): Promise<LinkSignIn> {
  const integration = integrationFor(state.provider)!;
  if (answer.error || !answer.code) {
    return answer.error === 'access_denied'
      ? {
          accepted: false,
          errorType: 'user_cancelled',
          error: `You did not allow access at ${name}; nothing was connected. You can try again from the same link.`,
        }
      : {
          accepted: false,
          errorType: 'provider_api_error',
          error: `${name} did not grant access (${answer.error ?? 'no code'}${answer.error_description ? `: ${answer.error_description}` : ''}).`,
        };
  }
  // What the user granted is checked before the code is exchanged: a refused link leaves no token issued.
  const granted = integration.grantedScopes?.fromCallback(answer) ?? null;
  if (missingRequiredScopes(integration, granted)) {
    return {
      accepted: false,
      errorType: 'required_scopes_not_granted',
      error: `${name} was not connected: the access you granted lets us read none of your data. ${integration.grantedScopes!.consentAdvice}`,
    };
  }
  const app = await resolveApp(deps, state.team_id, state.provider);
  if (!app || app.clientId !== state.client_id)
    return { accepted: false, errorType: 'provider_api_error', error: `The ${name} app this sign-in started with is no longer configured; start again.` };
  const region = connectionRegion(integration, state.region);
  try {
    // The user waits in the browser: the sign-in's two requests book the app's next budget slots with room, up to
    // SIGN_IN_BOOK_AHEAD_MS ahead, before the pages and pushes waiting for the same budget.
    const gate = appGate(deps, integration.slug, app.clientId, SIGN_IN_BOOK_AHEAD_MS);
    const tokens = await exchangeCode(oauthInRegion(integration, region), { ...app, redirectUri: state.redirect_uri }, answer.code, {
      baseUrl: app.baseUrl,
      codeVerifier: state.code_verifier ?? undefined,
      gate,
    });
    // Who the user is at the provider, with the fresh token (no connection, so no stored tokens, exists yet).
    const client = { clientId: app.clientId, clientSecret: app.clientSecret };
    const http = createProviderHttp({ integration, baseUrl: app.baseUrl, client, accessToken: async () => tokens.access_token, gate });
    const ctx = { http, externalUserId: null, tokenExtras: tokens.extras, client, region };
    const { externalUserId } = integration.afterConnect ? await integration.afterConnect(ctx) : { externalUserId: null };
    return {
      accepted: true,
      adapter: 'oauth',
      oauth: {
        tokens: { ...tokens, scope: tokens.scope ?? granted?.join(',') ?? null },
        externalUserId,
        clientId: app.clientId,
        grantedScopes: granted,
        region,
      },
    };
  } catch (err) {
    if (err instanceof OAuthError)
      return {
        accepted: false,
        errorType: 'provider_credential_error',
        error: `${name} refused the sign-in (${err.error}): the code was already used or has expired. Start again from the link.`,
      };
    if (err instanceof ProviderFetchError)
      return {
        accepted: false,
        errorType: 'provider_api_error',
        error: `${name} could not be reached to finish the sign-in (${err.message}). Try again in a moment.`,
      };
    // The app's request budget at the provider is spent until then: no request before it, this one included.
    if (err instanceof RateLimitedError)
      return {
        accepted: false,
        errorType: 'provider_api_error',
        error: `${name} is busy (its rate limit for this app resets at ${err.retryAt.toISOString()}). Start again from the link after that.`,
      };
    throw err;
  }
}
