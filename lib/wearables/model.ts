/**
 * The wearable-data model shared by provider adapters, ingestion, storage and the read endpoints.
 * Adapters and the SDK ingestion endpoint produce these shapes; lib/wearables/ingest.ts stores them.
 */

/** Summary resources: one document per summary, identified by `id` (a later version replaces it). */
export const SUMMARY_RESOURCES = ['activity', 'sleep', 'workouts', 'body', 'profile', 'meal'] as const;
export type SummaryResource = (typeof SUMMARY_RESOURCES)[number];

/**
 * A summary as a provider reports it. `source_key` is the provider's own stable key for it (its id, or the
 * calendar date for daily summaries); the service's `id` is derived from (team, user, provider, resource,
 * source_key), so a provider resending a revised day replaces the same summary.
 */
export interface SummaryInput {
  resource: SummaryResource;
  source_key: string;
  /** YYYY-MM-DD in the user's local time (for profile: the day it was reported). */
  calendar_date: string;
  /** The instant the summary is anchored at (activity: local midnight; sleep: bedtime_start; workout: time_start; body/meal: timestamp). */
  time: string;
  /**
   * The client-facing fields except id, user_id, source, created_at and updated_at (which the service adds),
   * e.g. for activity: calories_total, steps, low, medium, high, heart_rate {...}, timezone_offset ...
   */
  fields: Record<string, unknown>;
}

/** Interval (start/end) or point sample of one timeseries resource. */
export interface SampleInput {
  resource: string;
  /** ISO 8601 instant; for interval samples equal to `start`. */
  timestamp: string;
  start?: string;
  end?: string;
  /** Absent for blood_pressure, which carries systolic/diastolic instead. */
  value?: number;
  systolic?: number;
  diastolic?: number;
  unit: string;
  type?: string | null;
  /** Seconds east of UTC; null means "unknown" and the user's fallback time zone fills it in. */
  timezone_offset?: number | null;
  /**
   * The phone platform's own id of the sample (a Health Connect record id, a HealthKit UUID): the sample's key where it
   * has one, so a sample the platform moved replaces its old place and a deletion can name it.
   */
  platform_id?: string | null;
}

/** Parallel arrays of one workout's stream (ClientFacingStream); `time` is unix seconds. */
export interface WorkoutStream {
  time: number[];
  heartrate?: (number | null)[];
  cadence?: (number | null)[];
  altitude?: (number | null)[];
  velocity_smooth?: (number | null)[];
  lat?: (number | null)[];
  lng?: (number | null)[];
  distance?: (number | null)[];
  power?: (number | null)[];
  resistance?: (number | null)[];
  temperature?: (number | null)[];
}

export interface WorkoutStreamInput {
  /** The `source_key` of the workout summary this stream belongs to. */
  workout_source_key: string;
  stream: WorkoutStream;
}

/** What one fetch of a provider (one resource, one date range) returns. */
export interface ProviderData {
  /** The source type of the device or app that recorded it (watch, ring, phone, app, manual_scan, ... or unknown). */
  source_type: string;
  summaries: SummaryInput[];
  samples: SampleInput[];
  workout_streams: WorkoutStreamInput[];
}

/**
 * A workout summary's metrics, none known: a provider's mapping spreads it first and then sets what the provider
 * reports, so every field the summary schema lists is present (null where the provider has nothing).
 */
export const NO_WORKOUT_METRICS: Readonly<Record<string, null>> = Object.freeze({
  average_hr: null,
  max_hr: null,
  hr_zones: null,
  calories: null,
  distance: null,
  moving_time: null,
  average_speed: null,
  max_speed: null,
  steps: null,
  total_elevation_gain: null,
  elev_high: null,
  elev_low: null,
  average_watts: null,
  device_watts: null,
  max_watts: null,
  weighted_average_watts: null,
});
