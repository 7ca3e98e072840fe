import type { OAuthSettings, ProviderIntegration } from './contract';
import { rebase } from './http';

/**
 * Providers that keep each user's account on the server of the user's region (contract `regions`; Dexcom): which
 * region a link or a connection uses, and the OAuth URLs of that region. README "Connecting real providers", Dexcom.
 */
type Regional = Pick<ProviderIntegration, 'regions'>;

/**
 * The region a connection's requests go to: the one it keeps, else the first (the host every connection used before
 * regions were kept); null at a provider with one host.
 */
export function connectionRegion(integration: Regional, stored: string | null | undefined): string | null {
  const regions = integration.regions;
  if (!regions) return null;
  return stored && regions.hostFor(stored) ? stored : regions.choices[0].id;
}

/** The region the link page proposes to a team of deployment region `teamRegion`; null at a provider with one host. */
export const defaultRegion = (integration: Regional, teamRegion: string): string | null => integration.regions?.defaultFor(teamRegion) ?? null;

/** The integration's OAuth settings with the authorize and token URLs on `region`'s host (as they are without regions). */
export function oauthInRegion(integration: Pick<ProviderIntegration, 'oauth' | 'regions'>, region: string | null): OAuthSettings {
  const host = region ? integration.regions?.hostFor(region) : null;
  if (!host) return integration.oauth;
  return { ...integration.oauth, authorizeUrl: rebase(integration.oauth.authorizeUrl, host), tokenUrl: rebase(integration.oauth.tokenUrl, host) };
}
