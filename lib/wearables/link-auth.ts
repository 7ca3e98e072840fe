import type { Config } from '../platform/config';
import type { ConnectionDoc } from './connections-store';
import type { ProviderCatalogue } from './provider-catalogue';
import type { TokenSet } from './providers/contract';

/** What a real provider's code exchange gave: the tokens (stored sealed) and who the user is at the provider. */
export interface OAuthGrant {
  tokens: TokenSet;
  externalUserId: string | null;
  clientId: string;
  /** The scopes the user granted, where the provider says (ProviderIntegration.grantedScopes); null: all asked for. */
  grantedScopes?: string[] | null;
  /** At a provider with regions (Dexcom): the region the user signed in at. */
  region?: string | null;
}

/**
 * How an end user grants access to a provider on the hosted link page (README "Wearable data: the link page"):
 * OAuth providers send the user to the provider's authorization URL and come back with a code; password and
 * email providers take the user's credentials. A real provider integration implements this interface beside its
 * ProviderAdapter (lib/wearables/adapters.ts); this deployment has no internet access, so the one here signs in
 * the sandbox's demo credentials only and cannot exchange an OAuth code.
 */
export interface LinkAuthAdapter {
  /** Where the user signs in at an OAuth provider, or null when this provider's authorization endpoint is unknown. */
  authorizationUrl(req: { provider: string; clientId: string; redirectUri: string; state: string }): string | null;
  /** An OAuth provider's answer (its `code`) exchanged for access: what the connection is. */
  exchangeCode(req: { provider: string; code: string; redirectUri: string }): Promise<LinkSignIn>;
  /** A password or email provider signed in with the user's credentials: what the connection is. */
  signIn(req: { provider: string; credentials: LinkCredentials }): Promise<LinkSignIn>;
}

export interface LinkCredentials {
  username?: string;
  password?: string;
  email?: string;
}

export type LinkSignIn =
  | { accepted: true; adapter: ConnectionDoc['adapter']; oauth?: OAuthGrant }
  | { accepted: false; errorType: 'provider_credential_error' | 'provider_api_error' | 'user_cancelled' | 'required_scopes_not_granted'; error: string };

/** What the sandbox accepts for every password and email provider (the page shows them there). */
export const SANDBOX_CREDENTIALS = { username: 'demo', password: 'demo', email: 'demo@example.com' };

/**
 * The OAuth 2 authorization endpoints of providers with no integration here (their developer documentation), for the
 * link page's step; the real integrations (lib/wearables/providers/) build their own, and Fitbit and Garmin are demo-only.
 */
const AUTHORIZATION_ENDPOINTS: Record<string, { url: string; scope: string }> = {
  wahoo: { url: 'https://api.wahooligan.com/oauth/authorize', scope: 'user_read workouts_read' },
  google_fit: { url: 'https://accounts.google.com/o/oauth2/v2/auth', scope: 'https://www.googleapis.com/auth/fitness.activity.read' },
};

export function createLinkAuth({ config, providers }: { config: Pick<Config, 'DEPLOYMENT_ENVIRONMENT'>; providers: ProviderCatalogue }): LinkAuthAdapter {
  const sandbox = config.DEPLOYMENT_ENVIRONMENT === 'sandbox';
  const noInternet = (provider: string): LinkSignIn => ({
    accepted: false,
    errorType: 'provider_api_error',
    error: `${providers.find(provider)?.name ?? provider} cannot be reached from this deployment (it has no internet access).`,
  });
  return {
    authorizationUrl({ provider, clientId, redirectUri, state }) {
      const endpoint = AUTHORIZATION_ENDPOINTS[provider];
      if (!endpoint) return null;
      const url = new URL(endpoint.url);
      url.search = new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: redirectUri,
        state,
        ...(endpoint.scope ? { scope: endpoint.scope } : {}),
      }).toString();
      return url.toString();
    },
    async exchangeCode({ provider }) {
      return noInternet(provider);
    },
    async signIn({ provider, credentials }) {
      if (!sandbox) return noInternet(provider);
      const demo =
        credentials.email !== undefined
          ? credentials.email.trim().toLowerCase() === SANDBOX_CREDENTIALS.email
          : credentials.username?.trim() === SANDBOX_CREDENTIALS.username && credentials.password === SANDBOX_CREDENTIALS.password;
      if (!demo) {
        const expected =
          credentials.email !== undefined
            ? `the email “${SANDBOX_CREDENTIALS.email}”`
            : `username “${SANDBOX_CREDENTIALS.username}” and password “${SANDBOX_CREDENTIALS.password}”`;
        return {
          accepted: false,
          errorType: 'provider_credential_error',
          error: `${providers.find(provider)?.name ?? provider} did not accept these credentials. In the sandbox, sign in with ${expected}.`,
        };
      }
      // The sandbox connection's data is the demo adapter's synthetic data (adapters.ts).
      return { accepted: true, adapter: 'demo' };
    },
  };
}
