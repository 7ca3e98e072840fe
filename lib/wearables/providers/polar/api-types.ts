/**
 * Polar AccessLink v3 payloads, as the official spec (tryAGI/Polar src/libs/Polar/openapi.yaml) and the docs page
 * (newpush/coach docs/apis/polar.md, "Schemas") name them. Every field is optional there; so it is here. Both the
 * integration and the loopback fake (test/support/fakes/polar.ts) use these shapes.
 */

/** Token endpoint answer (docs "Token endpoint"): no refresh token; `x_user_id` is the Polar user id (a long). */
export interface PolarTokenResponse {
  access_token: string;
  token_type: 'bearer';
  expires_in: number;
  x_user_id: number;
}

/** Schema `user` (GET /v3/users/{user-id}, and the 200 of POST /v3/users). */
export interface PolarUser {
  'polar-user-id'?: number;
  'member-id'?: string;
  'registration-date'?: string;
  'first-name'?: string;
  'last-name'?: string;
  birthdate?: string;
  gender?: 'MALE' | 'FEMALE' | string;
  weight?: number;
  height?: number;
  'extra-info'?: { value: string; index: number; name: string }[] | null;
}

/** Schema `activity-step-sample2`: `timestamp` is device-local wall time (`2025-08-14T00:02`). */
export interface PolarStepSample {
  steps?: number;
  timestamp?: string;
}

/** Schema `activity-steps2`. Consecutive samples with the same count are filtered out (docs). */
export interface PolarSteps {
  interval_ms?: number;
  total_steps?: number;
  samples?: PolarStepSample[];
}

export type PolarActivityZone = 'SLEEP' | 'SEDENTARY' | 'LIGHT' | 'MODERATE' | 'VIGOROUS' | 'NON_WEAR';

/** Schema `activity-day-with-samples`. */
export interface PolarActivityDaySamples {
  date?: string;
  steps?: PolarSteps;
  activity_zones?: { samples?: { zone?: PolarActivityZone | string; timestamp?: string }[] };
  inactivity_stamps?: { stamp?: string }[];
}

/** Schema `activity-summary-with-all-samples` (GET /v3/users/activities). */
export interface PolarActivity {
  start_time?: string;
  end_time?: string;
  active_duration?: string;
  inactive_duration?: string;
  daily_activity?: number;
  calories?: number;
  active_calories?: number;
  steps?: number;
  inactivity_alert_count?: number;
  distance_from_steps?: number;
  samples?: PolarActivityDaySamples;
}

/** Schema `sleep` (GET /v3/users/sleep, /v3/users/sleep/{date}). Durations in seconds. */
export interface PolarSleep {
  polar_user?: string;
  date?: string;
  sleep_start_time?: string;
  sleep_end_time?: string;
  device_id?: string;
  continuity?: number;
  continuity_class?: number;
  light_sleep?: number;
  deep_sleep?: number;
  rem_sleep?: number;
  unrecognized_sleep_stage?: number;
  sleep_score?: number;
  total_interruption_duration?: number;
  sleep_charge?: number;
  sleep_goal?: number;
  sleep_rating?: number;
  short_interruption_duration?: number;
  long_interruption_duration?: number;
  sleep_cycles?: number;
  group_duration_score?: number;
  group_solidity_score?: number;
  group_regeneration_score?: number;
  /** `"HH:MM"` → stage: 0 WAKE, 1 REM, 2 LIGHTER NON-REM, 3 LIGHT NON-REM, 4 DEEP NON-REM, 5 UNKNOWN. */
  hypnogram?: Record<string, number>;
  /** `"HH:MM"` → bpm (5-minute averages). */
  heart_rate_samples?: Record<string, number>;
}

/** Schema `nightly-recharge` (GET /v3/users/nightly-recharge[/{date}]). */
export interface PolarNightlyRecharge {
  polar_user?: string;
  date?: string;
  heart_rate_avg?: number;
  beat_to_beat_avg?: number;
  /** RMSSD in ms ("The Heart rate variability is Root Mean Square of Successive Differences (RMSSD)"). */
  heart_rate_variability_avg?: number;
  breathing_rate_avg?: number;
  nightly_recharge_status?: number;
  ans_charge?: number;
  ans_charge_status?: number;
  /** `"HH:MM"` → ms, 5-minute averages. */
  hrv_samples?: Record<string, number>;
  /** `"HH:MM"` → breaths per minute. */
  breathing_samples?: Record<string, number>;
}

/** Schema `continuous-heartrate`: `sample_time` is device time (`HH:MM:SS`) on `date`. */
export interface PolarContinuousHeartRateDay {
  polar_user?: string;
  date?: string;
  heart_rate_samples?: { heart_rate?: number; sample_time?: string }[];
}

/** Schema `zone`. */
export interface PolarHeartRateZone {
  index?: number;
  'lower-limit'?: number;
  'upper-limit'?: number;
  'in-zone'?: string;
}

/** Schema `sample`: `data` is comma-separated values (may hold nulls); types in the docs' "Exercise sample types". */
export interface PolarExerciseSample {
  'recording-rate'?: number | null;
  'sample-type'?: string;
  data?: string;
}

/**
 * Schema `exerciseHashId` (GET /v3/exercises, /v3/exercises/{exerciseId}). `start_time` is LOCAL time without an
 * offset; `start_time_utc_offset` is that offset in MINUTES (docs: "The offset from UTC (in minutes) when the training
 * session was started").
 */
export interface PolarExercise {
  id?: string;
  upload_time?: string;
  polar_user?: string;
  device?: string;
  device_id?: string;
  start_time?: string;
  start_time_utc_offset?: number;
  duration?: string;
  calories?: number;
  distance?: number;
  heart_rate?: { average?: number; maximum?: number };
  training_load?: number;
  sport?: string;
  has_route?: boolean;
  detailed_sport_info?: string;
  fat_percentage?: number;
  carbohydrate_percentage?: number;
  protein_percentage?: number;
  'running-index'?: number;
  heart_rate_zones?: PolarHeartRateZone[];
  samples?: PolarExerciseSample[];
  route?: { latitude?: number; longitude?: number; time?: string; satellites?: number; fix?: number }[];
}

/** Schema `spo2-test-result` (GET /v3/users/biosensing/spo2): `test_time` unix seconds, `time_zone_offset` minutes. */
export interface PolarSpo2TestResult {
  source_device_id?: string;
  test_time?: number;
  time_zone_offset?: number;
  test_status?: string;
  blood_oxygen_percent?: number;
  spo2_class?: string;
  spo2_value_deviation_from_baseline?: string;
  spo2_quality_average_percent?: number;
  average_heart_rate_bpm?: number;
  heart_rate_variability_ms?: number;
  spo2_hrv_deviation_from_baseline?: string;
  altitude_meters?: number;
}

/** Schema `physical-information`: weight kg, height cm, `created` UTC (`2016-04-27T20:11:33.000Z`). */
export interface PolarPhysicalInformation {
  id?: number;
  'transaction-id'?: number;
  created?: string;
  'polar-user'?: string;
  weight?: number;
  height?: number;
  'maximum-heart-rate'?: number;
  'resting-heart-rate'?: number;
  'aerobic-threshold'?: number;
  'anaerobic-threshold'?: number;
  'vo2-max'?: number;
  'weight-source'?: string;
}

/** Schema `transaction-location` (201 of POST .../physical-information-transactions). */
export interface PolarTransactionLocation {
  'transaction-id'?: number;
  'resource-uri'?: string;
}

/** Webhook event types (schema `webhookType`), plus PING (schema `webhookPing`). */
export type PolarWebhookEvent = 'EXERCISE' | 'SLEEP' | 'CONTINUOUS_HEART_RATE' | 'SLEEP_WISE_CIRCADIAN_BEDTIME' | 'SLEEP_WISE_ALERTNESS' | 'ACTIVITY_SUMMARY';

/** Schemas `webhookPayload*` and `webhookPing`. */
export interface PolarWebhookPayload {
  event?: string;
  user_id?: number | string;
  entity_id?: string;
  date?: string;
  from?: string;
  to?: string;
  timestamp?: string;
  url?: string;
}

/** Schema `error`. */
export interface PolarError {
  timestamp?: string;
  status?: number;
  errorType?: string;
  message?: string;
  corrId?: string;
}
