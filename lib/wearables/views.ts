import { providerLogoUrl, type ProviderCatalogue } from './provider-catalogue';
import type { SampleReading } from './sample-buckets';
import type { SummaryDoc } from './data-store';
import { isoWithOffset } from '../platform/time';
import { inUnit } from './resources';

/**
 * The client-facing shapes of stored wearable data, one way for the read endpoints and the data events
 * (../shared/reference/real-api-facts.md §4, §6).
 */
export interface SourceView {
  provider: string;
  type: string;
  app_id: string | null;
  device_id: string | null;
  /** Deprecated duplicates of the provider, kept for older clients. */
  name: string;
  slug: string;
  logo: string;
}

export function sourceView(providers: ProviderCatalogue, baseUrl: string, provider: string, sourceType: string): SourceView {
  const entry = providers.find(provider);
  return {
    provider,
    type: sourceType,
    app_id: null,
    device_id: null,
    name: entry?.name ?? provider,
    slug: provider,
    logo: providerLogoUrl(baseUrl, provider),
  };
}

/** The integer `source_id` of timeseries events: the provider's position in the catalogue (stable, 1-based). */
export function sourceId(providers: ProviderCatalogue, provider: string): number {
  const i = providers.entries.findIndex((e) => e.slug === provider);
  return i < 0 ? 0 : i + 1;
}

export function summaryView(doc: SummaryDoc, source: SourceView): Record<string, unknown> {
  return {
    ...doc.data,
    id: doc._id,
    user_id: doc.user_id,
    source,
    created_at: isoWithOffset(doc.created_at),
    updated_at: isoWithOffset(doc.updated_at),
  };
}

/**
 * A sample as the API shows it, its value in `unit` when a read asks for one (glucose: mg/dL ⇄ mmol/L). Samples read
 * from buckets expose their fields as getters (BucketSample): they are read one by one here, never spread.
 */
export function sampleView(doc: SampleReading, unit?: string): Record<string, unknown> {
  const shown = unit ? inUnit({ unit: doc.unit, value: doc.value }, unit) : doc;
  const view: Record<string, unknown> = {
    timestamp: isoWithOffset(doc.timestamp),
    timezone_offset: doc.timezone_offset,
    type: doc.type,
    unit: shown.unit,
  };
  if (shown.value !== undefined) view.value = shown.value;
  if (doc.systolic !== undefined) {
    view.systolic = doc.systolic;
    view.diastolic = doc.diastolic;
  }
  if (doc.start) {
    view.start = isoWithOffset(doc.start);
    view.end = isoWithOffset(doc.end ?? doc.start);
  }
  return view;
}
