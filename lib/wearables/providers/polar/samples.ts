/** What every Polar mapping shares: the source type, empty data, our units (resources.ts) and sample builders. */
import type { ProviderData, SampleInput } from '../../model';
import { timeseriesResource } from '../../resources';
import { isoUtc } from './time';

/** Polar records with watches (and the Verity/H10 sensors, which also upload through a watch or the Flow app). */
export const POLAR_SOURCE_TYPE = 'watch';

export const emptyData = (): ProviderData => ({ source_type: POLAR_SOURCE_TYPE, summaries: [], samples: [], workout_streams: [] });

export const unitOf = (resource: string): string => {
  const unit = timeseriesResource(resource)?.unit;
  if (unit === undefined) throw new Error(`resources.ts has no timeseries resource ${resource}`);
  return unit;
};

export const num = (x: unknown): number | null => (typeof x === 'number' && Number.isFinite(x) ? x : null);
export const round = (x: number, digits = 0) => Math.round(x * 10 ** digits) / 10 ** digits;
export const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
/** The deprecated `date` field of our summaries: the calendar date at 00:00 UTC. */
export const utcMidnightOf = (date: string) => `${date}T00:00:00+00:00`;

export function point(resource: string, utcMs: number, value: number, offsetSec: number): SampleInput {
  return { resource, timestamp: isoUtc(utcMs), value, unit: unitOf(resource), type: null, timezone_offset: offsetSec };
}

export function interval(resource: string, startMs: number, endMs: number, value: number, offsetSec: number): SampleInput {
  const start = isoUtc(startMs);
  return { resource, timestamp: start, start, end: isoUtc(endMs), value, unit: unitOf(resource), type: null, timezone_offset: offsetSec };
}
