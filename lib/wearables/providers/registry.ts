import type { ProviderIntegration } from './contract';
import { integration as dexcom } from './dexcom';
import { integration as oura } from './oura';
import { integration as polar } from './polar';
import { integration as strava } from './strava';
import { integration as whoop } from './whoop';
import { integration as withings } from './withings';

/**
 * The real provider integrations, one folder each. Fitbit (its Web API is switched off in 2026) and Garmin (no new
 * developers admitted) stay demo-only: README "Connecting real providers".
 */
const INTEGRATIONS: ProviderIntegration[] = [oura, whoop, polar, strava, dexcom, withings];

const bySlug = new Map(INTEGRATIONS.map((i) => [i.slug, i]));

/** OAuth providers this deployment integrates with demo data only, and why (the catalogue and README say so). */
export const DEMO_ONLY_REASONS: Record<string, string> = {
  fitbit: "Fitbit's Web API is being switched off (support ends 2026-09-30, the API on 2026-10-30); demo data only.",
  garmin: 'Garmin admits no new developers to its Connect Developer Program; demo data only.',
};
export const DEMO_ONLY_PROVIDERS = Object.keys(DEMO_ONLY_REASONS);

export const integrationFor = (slug: string): ProviderIntegration | undefined => bySlug.get(slug);
export const realIntegrations = (): ProviderIntegration[] => INTEGRATIONS;
