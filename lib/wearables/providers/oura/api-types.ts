/**
 * The Oura API v2 JSON this integration reads, after the official OpenAPI (tgrk/ex_oura `test/support/openapi-1.29.json`,
 * components.schemas) and the recorded responses in tgrk/ex_oura `test/fixture/vcr_cassettes/*.json`. Only the fields
 * we use or the fake serves are typed; every nullable field of the spec is `| null` here.
 */

/** `LocalizedDateTime`: ISO 8601 with the user's offset, e.g. `2024-10-10T01:01:59+02:00` (sample series add `.000`). */
export type LocalizedDateTime = string;

/** `Metadata` (1.29): required on every collection document; absent from the 2024 cassettes, so optional here. */
export interface OuraMetadata {
  updated_at: string;
  version: number;
}

/** `PublicSample`: a regular series, `items[i]` at `timestamp + i * interval` seconds; items may be null (no reading). */
export interface OuraSampleSeries {
  interval: number;
  items: (number | null)[];
  timestamp: LocalizedDateTime;
}

/** Every multi-document route answers `{data, next_token}` (MultiDocumentResponse_*, TimeSeriesResponse_*). */
export interface OuraList<T> {
  data: T[];
  next_token?: string | null;
}

/** `PersonalInfoResponse`: height in metres (cassette `single_personal_info.json`: `"height": 1.8`), weight in kg. */
export interface OuraPersonalInfo {
  id: string;
  age?: number | null;
  weight?: number | null;
  height?: number | null;
  biological_sex?: string | null;
  email?: string | null;
}

/** `PublicReadiness`, embedded in a sleep period. */
export interface OuraReadiness {
  contributors: Record<string, number | null>;
  score?: number | null;
  /** Degrees Celsius. */
  temperature_deviation?: number | null;
  temperature_trend_deviation?: number | null;
}

/** `PublicSleepType`: deleted, sleep (a confirmed nap, 15 min–3 h), long_sleep (> 3 h), late_nap, rest (rejected by the user). */
export type OuraSleepType = 'deleted' | 'sleep' | 'long_sleep' | 'late_nap' | 'rest';

/** `PublicModifiedSleepModel`: one sleep period (a user can have several per day). Durations in seconds. */
export interface OuraSleep {
  id: string;
  meta?: OuraMetadata;
  average_breath?: number | null;
  average_heart_rate?: number | null;
  /** Average HRV during sleep: RMSSD in ms (Oura's HRV is RMSSD; shared/reference/providers.md §3 "sleep hrv.items (RMSSD)"). */
  average_hrv?: number | null;
  awake_time?: number | null;
  bedtime_end: LocalizedDateTime;
  bedtime_start: LocalizedDateTime;
  /** The day the sleep belongs to (the morning it ends on). */
  day: string;
  deep_sleep_duration?: number | null;
  efficiency?: number | null;
  heart_rate?: OuraSampleSeries | null;
  hrv?: OuraSampleSeries | null;
  latency?: number | null;
  light_sleep_duration?: number | null;
  low_battery_alert: boolean;
  /** bpm; 255 when the period has no heart-rate data (cassette `multiple_sleep.json`, a nap with `heart_rate: null`). */
  lowest_heart_rate?: number | null;
  movement_30_sec?: string | null;
  period: number;
  readiness?: OuraReadiness | null;
  readiness_score_delta?: number | null;
  rem_sleep_duration?: number | null;
  restless_periods?: number | null;
  sleep_algorithm_version?: 'v1' | 'v2' | null;
  sleep_analysis_reason?: 'foreground_sleep_analysis' | 'bedtime_edit' | null;
  /** One character per 5 minutes from bedtime_start: '1' deep, '2' light, '3' REM, '4' awake. */
  sleep_phase_5_min?: string | null;
  sleep_phase_30_sec?: string | null;
  sleep_score_delta?: number | null;
  time_in_bed: number;
  total_sleep_duration?: number | null;
  type?: OuraSleepType | null;
  ring_id?: string | null;
}

/** `PublicDailySleep`: the day's sleep score (its `timestamp` is the day at 00:00 +00:00 in the cassettes). */
export interface OuraDailySleep {
  id: string;
  meta?: OuraMetadata;
  contributors: Record<string, number | null>;
  day: string;
  score?: number | null;
  timestamp: LocalizedDateTime;
}

/**
 * `PublicDailyActivity`: "a daily activity that is a 24-hour period starting at 4 a.m." — `timestamp` is that 4 a.m.
 * with the user's offset (cassette: `2024-11-11T04:00:00+01:00`). Calories in kcal, distances in metres, `*_time` in seconds.
 */
export interface OuraDailyActivity {
  id: string;
  meta?: OuraMetadata;
  active_calories: number;
  average_met_minutes: number;
  class_5_min?: string | null;
  contributors: Record<string, number | null>;
  day: string;
  equivalent_walking_distance: number;
  high_activity_met_minutes: number;
  high_activity_time: number;
  inactivity_alerts: number;
  low_activity_met_minutes: number;
  low_activity_time: number;
  medium_activity_met_minutes: number;
  medium_activity_time: number;
  met: OuraSampleSeries;
  meters_to_target: number;
  non_wear_time: number;
  resting_time: number;
  score?: number | null;
  sedentary_met_minutes: number;
  sedentary_time: number;
  steps: number;
  target_calories: number;
  target_meters: number;
  timestamp: LocalizedDateTime;
  total_calories: number;
}

/** `PublicWorkout`. `activity` is a lowercase string such as `walking` (cassette `multiple_workout.json`). */
export interface OuraWorkout {
  id: string;
  meta?: OuraMetadata;
  activity: string;
  calories?: number | null;
  day: string;
  distance?: number | null;
  end_datetime: LocalizedDateTime;
  intensity: 'easy' | 'moderate' | 'hard';
  label?: string | null;
  source: 'manual' | 'autodetected' | 'confirmed' | 'workout_heart_rate';
  start_datetime: LocalizedDateTime;
}

/** `PublicHeartRateRow`: a discrete sample, `timestamp` in UTC (`UtcDateTime`, `+00:00` in the cassettes). */
export interface OuraHeartRateRow {
  bpm: number;
  source: 'awake' | 'workout' | 'rest' | 'sleep' | 'live' | 'session';
  timestamp: string;
  /** Unix milliseconds (required in 1.29; absent from the 2024 cassette). */
  timestamp_unix?: number;
}

/** `PublicDailySpO2`: the night's average SpO2 in percent (Gen 3 rings only). No timestamp, only the day. */
export interface OuraDailySpo2 {
  id: string;
  meta?: OuraMetadata;
  breathing_disturbance_index?: number | null;
  day: string;
  spo2_percentage?: { average: number } | null;
}

/** `ExtApiV2DataType` (1.29): what a webhook subscription and a push name. */
export const OURA_DATA_TYPES = [
  'tag',
  'enhanced_tag',
  'workout',
  'session',
  'sleep',
  'daily_sleep',
  'daily_readiness',
  'daily_activity',
  'daily_spo2',
  'sleep_time',
  'rest_mode_period',
  'ring_configuration',
  'daily_stress',
  'daily_cycle_phases',
  'activation_status',
  'daily_cardiovascular_age',
  'daily_resilience',
  'vo2_max',
  'period_start',
  'pregnancy',
  'fertile_window',
  'ovulation_confirmed',
  'blood_glucose',
] as const;
export type OuraDataType = (typeof OURA_DATA_TYPES)[number];

/** `WebhookOperation`. */
export const OURA_EVENT_TYPES = ['create', 'update', 'delete'] as const;
export type OuraEventType = (typeof OURA_EVENT_TYPES)[number];

/** `WebhookSubscriptionModel`. */
export interface OuraWebhookSubscription {
  id: string;
  callback_url: string;
  event_type: OuraEventType;
  data_type: OuraDataType;
  expiration_time: string;
}

/** The body of an event POST (1.37 "Webhook Subscription Routes", Step 4). `event_time` e.g. `2023-01-01T08:00:00+00:00`. */
export interface OuraWebhookEvent {
  event_type: string;
  data_type: string;
  object_id: string;
  event_time: string;
  user_id: string;
}
