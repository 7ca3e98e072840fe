import { createHash, randomBytes } from 'node:crypto';
import { ProviderFetchError } from '../provider-errors';
import { OAuthError, type OAuthSettings, type TokenResponse, type TokenSet } from './contract';
import { basicAuth, drawFromBudget, forwardedHost, rebase, type RateLimitGate } from './http';

/**
 * The OAuth 2 authorization-code client every real provider shares (RFC 6749, PKCE RFC 7636): the authorize URL,
 * the code exchange and the refresh, with each provider's client authentication and quirks from its OAuthSettings.
 * The caller stores the tokens (the token store seals them); nothing here logs a token.
 */
export interface OAuthClientCredentials {
  clientId: string;
  clientSecret: string;
  redirectUri: string;
}

/** A PKCE verifier (43–128 characters) and its S256 challenge. */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(48).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export function authorizeUrl(
  settings: OAuthSettings,
  client: Omit<OAuthClientCredentials, 'clientSecret'>,
  state: string,
  opts: { baseUrl?: string; codeChallenge?: string },
): string {
  const url = new URL(rebase(settings.authorizeUrl, opts.baseUrl));
  const params: Record<string, string> = {
    response_type: 'code',
    client_id: client.clientId,
    redirect_uri: client.redirectUri,
    state,
    ...(settings.scopes.length ? { scope: settings.scopes.join(settings.scopeSeparator) } : {}),
    ...settings.authorizeParams,
  };
  if (settings.pkce && opts.codeChallenge) Object.assign(params, { code_challenge: opts.codeChallenge, code_challenge_method: 'S256' });
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return url.toString();
}

export interface TokenRequestOptions {
  baseUrl?: string;
  now?: Date;
  /** PROVIDER_REQUEST_TIMEOUT_MS: past it the request counts as unanswered (ProviderFetchError provider_unavailable). */
  timeoutMs?: number;
  /** The app's budget, drawn from before the token request is sent (runtime.ts appGate). */
  gate?: Pick<RateLimitGate, 'take'>;
}

export async function exchangeCode(
  settings: OAuthSettings,
  client: OAuthClientCredentials,
  code: string,
  opts: TokenRequestOptions & { codeVerifier?: string },
): Promise<TokenSet> {
  return tokenRequest(
    settings,
    client,
    { grant_type: 'authorization_code', code, redirect_uri: client.redirectUri, ...(opts.codeVerifier ? { code_verifier: opts.codeVerifier } : {}) },
    opts,
    null,
  );
}

export async function refreshTokens(
  settings: OAuthSettings,
  client: Omit<OAuthClientCredentials, 'redirectUri'>,
  refreshToken: string,
  opts: TokenRequestOptions,
): Promise<TokenSet> {
  return tokenRequest(settings, client, { grant_type: 'refresh_token', refresh_token: refreshToken }, opts, refreshToken);
}

/**
 * One token request. A refused grant (400/401 with an OAuth error, or the provider's own refusal) is an OAuthError;
 * a network error, a timeout or a 5xx is ProviderFetchError('provider_unavailable'): retried, never taken for a
 * revocation.
 */
async function tokenRequest(
  settings: OAuthSettings,
  client: Omit<OAuthClientCredentials, 'redirectUri'>,
  grant: Record<string, string>,
  opts: TokenRequestOptions,
  previousRefresh: string | null,
): Promise<TokenSet> {
  const form: Record<string, string> = { ...settings.tokenParams, ...grant };
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
    ...forwardedHost(settings.tokenUrl, opts.baseUrl),
  };
  if (settings.clientAuth === 'basic') headers.authorization = basicAuth(client.clientId, client.clientSecret);
  else Object.assign(form, { client_id: client.clientId, client_secret: client.clientSecret });
  const url = rebase(settings.tokenUrl, opts.baseUrl);
  // Nothing is sent when the app's budget is spent: RateLimitedError, before the request (no grant is used up).
  await drawFromBudget(opts.gate, 'POST');
  let res: Response;
  try {
    res = await fetch(url, { method: 'POST', headers, body: new URLSearchParams(form).toString(), signal: AbortSignal.timeout(opts.timeoutMs ?? 30_000) });
  } catch (err) {
    throw new ProviderFetchError('provider_unavailable', `Token endpoint ${new URL(url).host} unreachable: ${(err as Error).message}`);
  }
  const text = await res.text();
  if (res.status >= 500 || res.status === 429) throw new ProviderFetchError('provider_unavailable', `Token endpoint answered ${res.status}`);
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : {};
  } catch {
    throw new ProviderFetchError('provider_unavailable', `Token endpoint answered ${res.status} with a body that is not JSON`);
  }
  if (!res.ok) {
    const body = (json ?? {}) as { error?: string; error_description?: string; message?: string };
    throw new OAuthError(
      body.error ?? 'invalid_grant',
      `Token endpoint refused the ${grant.grant_type} grant (${res.status} ${body.error ?? ''}${body.error_description ? `: ${body.error_description}` : body.message ? `: ${body.message}` : ''})`,
    );
  }
  const tokens: TokenResponse = settings.unwrapTokenResponse ? settings.unwrapTokenResponse(json) : (json as TokenResponse);
  if (!tokens || typeof tokens.access_token !== 'string' || !tokens.access_token)
    throw new ProviderFetchError('provider_unavailable', 'Token endpoint answered without an access_token');
  const { access_token, refresh_token, expires_in, scope, token_type: _type, ...extras } = tokens;
  const now = opts.now ?? new Date();
  return {
    access_token,
    // A refresh answered without a new refresh token keeps the one it used (OAuth 2 §6: the server MAY issue one).
    refresh_token: typeof refresh_token === 'string' && refresh_token ? refresh_token : previousRefresh,
    expires_at: typeof expires_in === 'number' ? new Date(now.getTime() + expires_in * 1000) : null,
    scope: typeof scope === 'string' ? scope : null,
    extras,
  };
}
