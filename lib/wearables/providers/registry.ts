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

/**
 * Requests a second the provider allows one app (its documented limit, a little under): the rate of the provider's
 * activity task queue, so every worker together stays under it (Temporal enforces a task queue's rate across workers).
 */
export const APP_REQUESTS_PER_SECOND: Record<string, number> = {
  oura: (5000 / 300) * 0.95, // 5,000 per 5 minutes
  whoop_v2: (100 / 60) * 0.95, // 100 a minute (and 10,000 a day)
  polar: (500 / 900) * 0.95, // 500 + 20 per user per 15 minutes: the floor
  strava: (100 / 900) * 0.95, // 100 reads per 15 minutes
  dexcom_v3: (60000 / 3600) * 0.95, // 60,000 an hour
  withings: (120 / 60) * 0.95, // 120 a minute (unverified)
};
