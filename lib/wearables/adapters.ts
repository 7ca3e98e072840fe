import type { ProviderCatalogue } from './provider-catalogue';
import type { ConnectionDoc } from './connections-store';
import { generateDemoData } from './demo-data';
import type { ProviderData } from './model';
import type { ProviderIntegration } from './providers/contract';
import { integrationFor } from './providers/registry';

export { RETRIABLE_PULL_ERRORS, NON_RETRIABLE_PULL_ERRORS, CONNECTION_ERRORS, ProviderFetchError } from './provider-errors';
import { ProviderFetchError } from './provider-errors';

export interface FetchRequest {
  connection: ConnectionDoc;
  resource: string;
  /** Local calendar dates, inclusive. */
  startDate: string;
  endDate: string;
  /** Nothing recorded after this instant is returned (today is partial). */
  until: Date;
  timezoneOffsetSeconds: number;
  /** 1 for the first try of a pull, counting retries (demo fault plans use it). */
  attempt: number;
  /** A history pull or a later sync (sandbox fault plans apply to history pulls). */
  purpose: 'history' | 'sync';
}

/**
 * How the service talks to one provider: which resources it can pull, how far back a new connection's
 * history goes, and how to fetch a date range of one resource. A failed fetch throws ProviderFetchError;
 * its type says whether a retry can help. Real OAuth / password providers implement this interface too.
 */
export interface ProviderAdapter {
  slug: string;
  /** `pull`: the service fetches the data; `push`: the customer's app sends it (SDK ingestion). */
  mode: 'pull' | 'push';
  /** Resources a history pull and a sync fetch, in order. */
  resources: string[];
  /** Default historical window in days (../shared/reference/real-api-facts.md §2). */
  historyDays: number;
  fetch(req: FetchRequest): Promise<ProviderData>;
  /** A real provider (lib/wearables/providers/<slug>/): pulled page by page, one provider request per activity. */
  integration?: ProviderIntegration;
}

/** Demo providers (sandbox): realistic synthetic data, the same for the same user every time. */
const DEMO_RESOURCES: Record<string, string[]> = {
  oura: ['profile', 'activity', 'sleep', 'workouts', 'heartrate', 'hrv', 'blood_oxygen', 'steps', 'calories_active', 'respiratory_rate', 'hypnogram'],
  fitbit: ['profile', 'activity', 'sleep', 'body', 'workouts', 'meal', 'heartrate', 'steps', 'calories_active', 'distance', 'weight', 'fat'],
  apple_health_kit: [
    'profile',
    'activity',
    'sleep',
    'body',
    'workouts',
    'workout_stream',
    'heartrate',
    'hrv',
    'steps',
    'calories_active',
    'distance',
    'blood_oxygen',
  ],
  freestyle_libre: ['glucose'],
};
export const DEMO_PROVIDERS = Object.keys(DEMO_RESOURCES);
/**
 * A sandbox connection to another provider (demo credentials signed in on the link page, lib/wearables/link-auth.ts)
 * gets the same synthetic data for the resources the demo generator makes and the provider offers.
 */
const DEMO_GENERATED = [...new Set(Object.values(DEMO_RESOURCES).flat())];
/** The reference backfills 30 days for demo connections. */
const DEMO_HISTORY_DAYS = 30;

function demoAdapter(slug: string, supported: string[]): ProviderAdapter {
  return {
    slug,
    mode: 'pull',
    resources: (DEMO_RESOURCES[slug] ?? DEMO_GENERATED).filter((r) => supported.includes(r)),
    historyDays: DEMO_HISTORY_DAYS,
    async fetch(req) {
      await injectSandboxFault(req);
      return generateDemoData({
        seed: `${req.connection.user_id}:${slug}`,
        provider: slug,
        resource: req.resource,
        startDate: req.startDate,
        endDate: req.endDate,
        timezoneOffsetSeconds: req.timezoneOffsetSeconds,
        until: req.until.toISOString(),
      });
    },
  };
}

/** A connection's sandbox fault plan for this resource, applied before any data is produced. */
async function injectSandboxFault(req: FetchRequest): Promise<void> {
  const fault = req.connection.sandbox_faults?.find((f) => f.resource === req.resource);
  if (!fault || req.purpose !== 'history') return;
  if (fault.stall_seconds) {
    await new Promise((resolve) => setTimeout(resolve, fault.stall_seconds! * 1000));
    throw new Error(`Sandbox fault: ${req.resource} stalled for ${fault.stall_seconds} s`);
  }
  if (fault.permanent) throw new ProviderFetchError(fault.error_type ?? 'non_retriable_error', `Sandbox fault: ${req.resource} always fails.`);
  if (req.attempt <= (fault.transient_failures ?? 0)) {
    throw new ProviderFetchError(
      fault.error_type ?? 'provider_unavailable',
      `Sandbox fault: ${req.resource} attempt ${req.attempt} of ${fault.transient_failures} failing attempts.`,
    );
  }
}

/** SDK / app providers: the customer's app pushes data (POST /v2/ingest/...); nothing to pull. */
function pushAdapter(slug: string, supported: string[]): ProviderAdapter {
  return {
    slug,
    mode: 'push',
    resources: supported,
    historyDays: 0,
    fetch: async () => ({ source_type: 'unknown', summaries: [], samples: [], workout_streams: [] }),
  };
}

/** A real provider: its pages are fetched by the page activities (activities/wearables.ts), never through `fetch`. */
function realAdapter(integration: ProviderIntegration): ProviderAdapter {
  return {
    slug: integration.slug,
    mode: 'pull',
    resources: integration.resources,
    historyDays: integration.historyDays,
    integration,
    fetch: () => Promise.reject(new Error(`${integration.slug} is pulled page by page, not through ProviderAdapter.fetch`)),
  };
}

export interface AdapterRegistry {
  /** The adapter of a connection made through the demo link (pull) or by the app's SDK (push). */
  forConnection(connection: Pick<ConnectionDoc, 'provider' | 'adapter'>): ProviderAdapter | undefined;
}

export function createAdapterRegistry(providers: ProviderCatalogue): AdapterRegistry {
  return {
    forConnection(connection) {
      const entry = providers.find(connection.provider);
      if (!entry) return undefined;
      if (connection.adapter === 'demo') return demoAdapter(entry.slug, entry.supported_resources);
      if (connection.adapter === 'sdk') return pushAdapter(entry.slug, entry.supported_resources);
      const integration = connection.adapter === 'oauth' ? integrationFor(entry.slug) : undefined;
      if (integration) return realAdapter(integration);
      return undefined;
    },
  };
}
