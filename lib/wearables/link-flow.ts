import { publicBaseUrl } from '../platform/config';
import { activeUser } from '../users/views';
import { DEMO_PROVIDERS } from './adapters';
import { SANDBOX_CREDENTIALS, type LinkSignIn } from './link-auth';
import { LINK_TOKEN_REFUSALS, type LinkTokenDoc } from './link-tokens-store';
import { providerLogoUrl } from './provider-catalogue';
import { connectProvider, type ConnectionDeps } from './workflow-client';
import { DEMO_ONLY_PROVIDERS, integrationFor, realIntegrations } from './providers/registry';
import { deploymentApp } from './providers/runtime';
import { teamDefaultRegion } from './providers/link-oauth';

/**
 * The link flow behind the hosted link page (api/routes/link-page.ts) and POST /v2/link/start: which providers a
 * token offers and how each connects, and the one use of a token. README "Wearable data: the link page".
 */

export type LinkMethod = 'demo' | 'oauth' | 'password' | 'email';

/** ProviderLinkResponse (the original's link outcome): `redirect_url` is the token's. */
export interface ProviderLinkResponse {
  state: 'success' | 'error';
  provider: string;
  connected: boolean;
  redirect_url: string | null;
  error_type?: string;
  error?: string;
  provider_id?: string;
}

const USED = LINK_TOKEN_REFUSALS.token_consumed;
const sandbox = (deps: Pick<ConnectionDeps, 'config'>) => deps.config.DEPLOYMENT_ENVIRONMENT === 'sandbox';

/**
 * How a provider connects on the link page, or null when it cannot be linked from a browser (SDK and app sources):
 * a real integration with an OAuth app (the team's own, else the deployment's) signs in at the provider, in every
 * environment; in the sandbox, the demo providers, the real integrations without an app and the integrations
 * that are demo-only (Fitbit, Garmin) connect with demo data; production does not offer those.
 */
export function linkMethod(deps: Pick<ConnectionDeps, 'config' | 'providers'>, slug: string, realApps: ReadonlySet<string>): LinkMethod | null {
  if (realApps.has(slug)) return 'oauth';
  if (demoCapable(slug)) return sandbox(deps) ? 'demo' : null;
  const authType = deps.providers.find(slug)?.auth_type;
  return authType === 'oauth' || authType === 'password' || authType === 'email' ? authType : null;
}

/** Providers that connect with demo data in the sandbox when they have no OAuth app: the demo ones, the real integrations, Fitbit and Garmin. */
export const demoCapable = (slug: string) => DEMO_PROVIDERS.includes(slug) || !!integrationFor(slug) || DEMO_ONLY_PROVIDERS.includes(slug);

/** The real integrations a team's users can connect for real: those with an OAuth app for this team (one read). */
export async function realAppsOf(deps: Pick<ConnectionDeps, 'config' | 'repos'>, teamId: string): Promise<Set<string>> {
  const slugs = realIntegrations().map((i) => i.slug);
  const own = await deps.repos.customCredentials.findForTeamProviders(teamId, slugs);
  return new Set(slugs.filter((slug) => own.some((c) => c.provider === slug) || deploymentApp(deps.config, slug)));
}

/**
 * The providers a token offers, in catalogue order: its `provider`, else its `filter_on_providers`, else all linkable;
 * never a deprecated entry (`replaced_by`), in any environment.
 */
export async function offeredProviders(deps: Pick<ConnectionDeps, 'config' | 'providers' | 'repos'>, token: LinkTokenDoc) {
  const only = token.provider ? [token.provider] : token.filter_on_providers?.length ? token.filter_on_providers : null;
  const baseUrl = publicBaseUrl(deps.config);
  const realApps = await realAppsOf(deps, token.team_id);
  const regionsOf = async (slug: string) => {
    const regions = realApps.has(slug) ? integrationFor(slug)?.regions : undefined;
    return regions ? { regions: regions.choices, default_region: await teamDefaultRegion(deps, token.team_id, slug) } : {};
  };
  const offered = deps.providers.entries.flatMap((entry, index) => {
    const method = linkMethod(deps, entry.slug, realApps);
    // A legacy twin (the password `whoop` beside `whoop_v2`) is never offered: a newcomer would pick it by its name.
    if (!method || entry.replaced_by || (only && !only.includes(entry.slug))) return [];
    return [
      {
        id: index + 1,
        name: entry.name,
        slug: entry.slug,
        description: entry.description,
        logo: providerLogoUrl(baseUrl, entry.slug),
        oauth_url: null,
        auth_type: entry.auth_type,
        // Ours: how the page connects it, whether that is the provider itself or demo data, and the fields of its
        // sign-in form (password and email providers).
        link_method: method,
        integration: realApps.has(entry.slug) ? 'real' : method === 'demo' ? 'demo' : 'unavailable',
        form_components: formComponents(deps, method),
      },
    ];
  });
  // A provider whose users' accounts live in one of several regions (Dexcom): the page asks which.
  return Promise.all(offered.map(async (p) => ({ ...p, ...(await regionsOf(p.slug)) })));
}

function formComponents(deps: Pick<ConnectionDeps, 'config'>, method: LinkMethod) {
  const hint = (value: string) => (sandbox(deps) ? { sandbox_value: value } : {});
  if (method === 'password') {
    return {
      fields: [
        { name: 'username', label: 'Username or email', type: 'text', autocomplete: 'username', ...hint(SANDBOX_CREDENTIALS.username) },
        { name: 'password', label: 'Password', type: 'password', autocomplete: 'current-password', ...hint(SANDBOX_CREDENTIALS.password) },
      ],
    };
  }
  if (method === 'email') return { fields: [{ name: 'email', label: 'Email', type: 'email', autocomplete: 'email', ...hint(SANDBOX_CREDENTIALS.email) }] };
  return null;
}

/** The brand the page shows: the team's brand information, else its name (no colour or logo: the page's own look). */
export async function linkBrand(deps: Pick<ConnectionDeps, 'repos'>, teamId: string) {
  const team = await deps.repos.tenancy.findTeamById(teamId);
  return {
    name: team?.brand_information?.company_name || team?.name || 'Healthbridge',
    brand_color: team?.brand_information?.brand_color ?? null,
    logo_url: team?.logo_url ?? null,
  };
}

/**
 * The OAuth app a token's team signs in with at `provider`: the team's own (team custom credentials), else this
 * deployment's (a real deployment registers one with each provider); the provider answers to our callback.
 */
export async function oauthClient(deps: Pick<ConnectionDeps, 'repos' | 'config'>, token: LinkTokenDoc, provider: string) {
  const team = await deps.repos.tenancy.findTeamById(token.team_id);
  const own = team ? (await deps.repos.customCredentials.list(team.org_id, [team._id])).find((c) => c.provider === provider) : undefined;
  return {
    clientId: own?.client_id ?? `healthbridge-${deps.config.DEPLOYMENT_ENVIRONMENT}`,
    redirectUri: own?.redirect_url_override ?? `${publicBaseUrl(deps.config)}/v2/link/oauth/callback/${provider}`,
  };
}

/** The sandbox's demo providers (and the demo-only and app-less integrations) sign in at once; anything else is not a demo here. */
export const demoSignIn = (deps: Pick<ConnectionDeps, 'config'>, provider: string): Promise<LinkSignIn> =>
  Promise.resolve(
    sandbox(deps) && demoCapable(provider)
      ? { accepted: true, adapter: 'demo' }
      : {
          accepted: false,
          errorType: 'provider_api_error',
          error: `${provider} cannot be connected with demo data here; sandbox demo providers: ${DEMO_PROVIDERS.join(', ')}.`,
        },
  );

/**
 * Connects the token's user to `provider` after `signIn` accepts, using the token once: its use is a unique claim
 * (LinkTokenRepository.consume), so of two tabs connecting with one token, one connects and the other is told the
 * token was used. Nothing is claimed before the provider accepts (a mistyped password leaves the link usable).
 */
export async function connectWithLinkToken(
  deps: ConnectionDeps,
  token: LinkTokenDoc,
  provider: string,
  signIn: () => Promise<LinkSignIn>,
): Promise<ProviderLinkResponse> {
  const outcome = { provider, redirect_url: token.redirect_url };
  const refused = (error_type: string, error: string): ProviderLinkResponse => ({ state: 'error', connected: false, ...outcome, error_type, error });
  if (!(await offeredProviders(deps, token)).some((p) => p.slug === provider)) return refused('invalid_token', `This link does not offer ${provider}.`);
  await activeUser(deps, token.team_id, token.user_id);
  if (await deps.repos.connections.findLive(token.team_id, token.user_id, provider)) {
    // A connection made with this very token (its claim comes first) is a reuse, not a duplicate.
    return (await deps.repos.linkTokens.isConsumed(token._id))
      ? refused('token_consumed', USED)
      : refused('duplicate_connection', `The user is already connected to ${provider}.`);
  }
  const signedIn = await signIn();
  if (!signedIn.accepted) return refused(signedIn.errorType, signedIn.error);
  if (!(await deps.repos.linkTokens.consume(token))) return refused('token_consumed', USED);
  const result = await connectProvider(deps, { teamId: token.team_id, userId: token.user_id, provider, adapter: signedIn.adapter, oauth: signedIn.oauth });
  if ('conflict' in result) return refused('duplicate_connection', `The user is already connected to ${provider}.`);
  return { state: 'success', connected: true, ...outcome, provider_id: result.created._id };
}
