import type { ProviderIntegration } from './contract';

/**
 * `resource_availability` of a connection (GET /v2/user/providers/{user_id}, provider.connection.created): per pull
 * unit, `available` unless the scopes the user granted (ProviderIntegration.grantedScopes, read at the callback) allow
 * none of what it needs; `scope_requirements` says which of its scopes the user granted and which they declined
 * (`optional`: a unit that still reads, but not everything, e.g. Strava without `activity:read_all` sees no private
 * activities). Providers without scope rules, and connections made before they were recorded: everything available.
 */
export function resourceAvailability(
  integration: ProviderIntegration | undefined,
  resources: readonly string[],
  granted: readonly string[] | null | undefined,
) {
  const rules = integration?.grantedScopes;
  return Object.fromEntries(
    resources.map((resource) => {
      const needs = rules?.resources[resource];
      if (!needs || !granted) return [resource, { status: 'available', scope_requirements: null }];
      const has = (s: string) => granted.includes(s);
      const readable = needs.anyOf.some(has);
      const requirements = {
        user_granted: { required: needs.anyOf.filter(has), optional: needs.full.filter((s) => has(s) && !needs.anyOf.includes(s)) },
        user_denied: { required: readable ? [] : needs.anyOf, optional: needs.full.filter((s) => !has(s)) },
      };
      return [resource, { status: readable ? 'available' : 'unavailable', scope_requirements: requirements }];
    }),
  );
}

/** Whether the granted scopes let the connection read anything (null: the provider said nothing, so all asked were granted). */
export function missingRequiredScopes(integration: ProviderIntegration, granted: readonly string[] | null): boolean {
  const rules = integration.grantedScopes;
  return !!rules && granted !== null && !rules.requireAnyOf.some((s) => granted.includes(s));
}
