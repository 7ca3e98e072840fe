/**
 * The WHOOP API v2 JSON this integration reads, as the official OpenAPI 3.0.1 "WHOOP API 2.0.0" defines it
 * (copy: api-evangelist/whoop-co `openapi/_original/whoop-api-openapi.yml`, components.schemas; examples in the same
 * repo's `examples/whoop-list-sleep-example.json`, `whoop-list-workouts-example.json`, `whoop-get-recovery-example.json`).
 * Instants are UTC ISO strings; `timezone_offset` is a Time Zone Designator ('+hh:mm', '-hh:mm' or 'Z').
 */

/**
 * `SCORED`: `score` is present. `PENDING_SCORE`: WHOOP is still evaluating it. `UNSCORABLE`: not enough data. Only a
 * SCORED record has a `score` (spec: "Only present if the score state is `SCORED`").
 */
export type WhoopScoreState = 'SCORED' | 'PENDING_SCORE' | 'UNSCORABLE';

/** A page of a collection: `next_token` absent (or null, as the examples show) on the last page. */
export interface WhoopPage<T> {
  records: T[];
  next_token?: string | null;
}

export interface WhoopCycle {
  /** int64. */
  id: number;
  user_id: number;
  created_at: string;
  updated_at: string;
  start: string;
  /** Absent while the user is in this cycle. */
  end?: string | null;
  timezone_offset: string;
  score_state: WhoopScoreState;
  score?: WhoopCycleScore | null;
}

export interface WhoopCycleScore {
  /** 0–21. */
  strain: number;
  /** Energy expended during the cycle, kJ. */
  kilojoule: number;
  average_heart_rate: number;
  max_heart_rate: number;
}

export interface WhoopSleep {
  /** UUID. */
  id: string;
  cycle_id: number;
  v1_id?: number | null;
  user_id: number;
  created_at: string;
  updated_at: string;
  start: string;
  /** Required by the spec; absent while a sleep is still in progress (seen in third-party schemas), so optional here. */
  end?: string | null;
  timezone_offset: string;
  nap: boolean;
  score_state: WhoopScoreState;
  score?: WhoopSleepScore | null;
}

export interface WhoopSleepScore {
  stage_summary: WhoopSleepStageSummary;
  sleep_needed: {
    baseline_milli: number;
    need_from_sleep_debt_milli: number;
    need_from_recent_strain_milli: number;
    need_from_recent_nap_milli: number;
  };
  respiratory_rate?: number | null;
  sleep_performance_percentage?: number | null;
  sleep_consistency_percentage?: number | null;
  sleep_efficiency_percentage?: number | null;
}

/** Milliseconds, all of them. */
export interface WhoopSleepStageSummary {
  total_in_bed_time_milli: number;
  total_awake_time_milli: number;
  total_no_data_time_milli: number;
  total_light_sleep_time_milli: number;
  total_slow_wave_sleep_time_milli: number;
  total_rem_sleep_time_milli: number;
  sleep_cycle_count: number;
  disturbance_count: number;
}

export interface WhoopRecovery {
  cycle_id: number;
  /** UUID of the sleep the recovery is computed from. */
  sleep_id: string;
  user_id: number;
  created_at: string;
  updated_at: string;
  score_state: WhoopScoreState;
  score?: WhoopRecoveryScore | null;
}

export interface WhoopRecoveryScore {
  user_calibrating: boolean;
  /** 0–100 %. */
  recovery_score: number;
  /** bpm. */
  resting_heart_rate: number;
  /** RMSSD, ms ("Heart Rate Variability measured using Root Mean Square of Successive Differences (RMSSD)"). */
  hrv_rmssd_milli: number;
  /** WHOOP 4.0 and later only. */
  spo2_percentage?: number | null;
  /** Skin (not core) temperature, °C; WHOOP 4.0 and later only. */
  skin_temp_celsius?: number | null;
}

export interface WhoopWorkout {
  /** UUID. */
  id: string;
  v1_id?: number | null;
  user_id: number;
  created_at: string;
  updated_at: string;
  start: string;
  end: string;
  timezone_offset: string;
  /** Lowercase hyphenated slug, e.g. `running`, `hiking-rucking`. */
  sport_name: string;
  /** Deprecated ("Will not exist past 09/01/2025") but still sent by some accounts. */
  sport_id?: number | null;
  score_state: WhoopScoreState;
  score?: WhoopWorkoutScore | null;
}

export interface WhoopWorkoutScore {
  strain: number;
  average_heart_rate: number;
  max_heart_rate: number;
  /** kJ. */
  kilojoule: number;
  percent_recorded: number;
  distance_meter?: number | null;
  altitude_gain_meter?: number | null;
  altitude_change_meter?: number | null;
  zone_durations: WhoopZoneDurations;
}

/** Milliseconds in each heart-rate zone, 0 (very light) to 5 (maximum effort). */
export interface WhoopZoneDurations {
  zone_zero_milli: number;
  zone_one_milli: number;
  zone_two_milli: number;
  zone_three_milli: number;
  zone_four_milli: number;
  zone_five_milli: number;
}

export interface WhoopBasicProfile {
  user_id: number;
  email: string;
  first_name: string;
  last_name: string;
}

export interface WhoopBodyMeasurement {
  height_meter: number;
  weight_kilogram: number;
  max_heart_rate: number;
}

/** The webhook body (developer.whoop.com/docs/developing/webhooks; api-evangelist/whoop-co examples/whoop-webhook-sleep-updated-example.json). */
export interface WhoopWebhookBody {
  user_id: number;
  /** v2 webhooks: the workout or sleep UUID; for recovery events the UUID of the recovery's sleep. */
  id: string;
  type: WhoopWebhookType;
  trace_id?: string;
}

export const WHOOP_WEBHOOK_TYPES = ['workout.updated', 'workout.deleted', 'sleep.updated', 'sleep.deleted', 'recovery.updated', 'recovery.deleted'] as const;
export type WhoopWebhookType = (typeof WHOOP_WEBHOOK_TYPES)[number];
