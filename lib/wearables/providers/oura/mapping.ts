import { DAY_MS, isoLocal } from '../../../platform/time';
import { NO_WORKOUT_METRICS, type SampleInput, type SummaryInput } from '../../model';
import { timeseriesResource } from '../../resources';
import type { OuraDailyActivity, OuraDailySpo2, OuraHeartRateRow, OuraPersonalInfo, OuraSampleSeries, OuraSleep, OuraWorkout } from './api-types';
import { humanizeActivity, sportOf } from './sports';
import { localMidnightMs, parseOuraTime, utcIso } from './time';

/**
 * Pure mapping of Oura API v2 documents (./api-types.ts) into our summaries and samples (lib/wearables/model.ts),
 * with the field names and units of schemas/wearables.ts and the demo generator (lib/wearables/demo-data.ts).
 *
 * The traps, each handled once here:
 * - HRV is RMSSD: `average_hrv` and `hrv.items` go to `average_hrv` / the `hrv` resource (unit `rmssd`) unchanged.
 * - Times carry the user's offset inside the string: `time` is the instant in UTC, the local fields are rebuilt from
 *   the instant and the offset the string carried (never the offset added to an instant a second time).
 * - Stable source keys: Oura's document `id` for sleep periods and workouts, the calendar day for daily activity and
 *   body, `profile` for the profile; samples are keyed by their instant (the store's replacement key).
 */

const unitOf = (resource: string): string => {
  const unit = timeseriesResource(resource)?.unit;
  if (!unit) throw new Error(`resources.ts has no timeseries resource ${resource}`);
  return unit;
};

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const int = (v: unknown): number | null => (num(v) === null ? null : Math.round(v as number));
const round = (v: number, places: number) => Math.round(v * 10 ** places) / 10 ** places;
/** The deprecated `date` field: the calendar date at 00:00 UTC (demo-data.ts utcMidnightOf). */
const utcMidnightOf = (date: string) => `${date}T00:00:00+00:00`;

/** Oura reports `lowest_heart_rate: 255` for a period without heart-rate data (cassette multiple_sleep.json). */
const NO_HEART_RATE = 255;
const bpm = (v: unknown): number | null => {
  const n = int(v);
  return n === null || n <= 0 || n >= NO_HEART_RATE ? null : n;
};

// ---- Sleep ----------------------------------------------------------------------------------------------------

/**
 * Oura's `PublicSleepType` → our sleep `type` (long_sleep, short_sleep, acknowledged_nap, unknown). `deleted` (the
 * user deleted it) and `rest` ("falsely detected sleep / nap, rejected in confirm prompt by user") are not sleep and
 * are not mapped at all.
 */
export function sleepTypeOf(type: OuraSleep['type']): string | null {
  switch (type) {
    case 'long_sleep':
      return 'long_sleep';
    case 'sleep': // "user confirmed sleep / nap, min 15 minutes, max 3 hours"
      return 'short_sleep';
    case 'late_nap': // "user confirmed sleep / nap … ended after sleep day change (6 pm)"
      return 'acknowledged_nap';
    case 'deleted':
    case 'rest':
      return null;
    default:
      return 'unknown';
  }
}

/** Hypnogram values: Oura's phase characters are ours (deep=1, light=2, rem=3, awake=4; schemas SleepStream). */
const PHASES = new Set(['1', '2', '3', '4']);
const PHASE_SECONDS = 300;

/** Samples of a regular Oura series (`items[i]` at `timestamp + i·interval`), nulls (no reading) skipped. */
export function seriesSamples(series: OuraSampleSeries | null | undefined, resource: 'heartrate' | 'hrv', fallbackOffset: number | null): SampleInput[] {
  if (!series || !Array.isArray(series.items)) return [];
  const start = parseOuraTime(series.timestamp);
  const step = num(series.interval);
  if (!start || !step || step <= 0) return [];
  const unit = unitOf(resource);
  const offset = start.offsetSeconds ?? fallbackOffset;
  const out: SampleInput[] = [];
  series.items.forEach((value, i) => {
    if (typeof value !== 'number' || !Number.isFinite(value)) return;
    if (resource === 'heartrate' && bpm(value) === null) return;
    out.push({ resource, timestamp: utcIso(start.instantMs + i * step * 1000), value, unit, type: null, timezone_offset: offset });
  });
  return out;
}

/** The 5-minute phases as hypnogram intervals from bedtime_start; the last one ends at bedtime_end. */
export function hypnogramSamples(sleep: OuraSleep): SampleInput[] {
  const start = parseOuraTime(sleep.bedtime_start);
  const end = parseOuraTime(sleep.bedtime_end);
  if (!start || !end || typeof sleep.sleep_phase_5_min !== 'string') return [];
  const unit = unitOf('hypnogram');
  const out: SampleInput[] = [];
  [...sleep.sleep_phase_5_min].forEach((phase, i) => {
    const from = start.instantMs + i * PHASE_SECONDS * 1000;
    const to = Math.min(from + PHASE_SECONDS * 1000, end.instantMs);
    if (!PHASES.has(phase) || to <= from) return;
    const timestamp = utcIso(from);
    out.push({
      resource: 'hypnogram',
      timestamp,
      start: timestamp,
      end: utcIso(to),
      value: Number(phase),
      unit,
      type: null,
      timezone_offset: start.offsetSeconds,
    });
  });
  return out;
}

export interface MappedSleep {
  summary: SummaryInput;
  samples: SampleInput[];
}

/**
 * One sleep period → a `sleep` summary and its samples (`heartrate` and `hrv` from the 5-minute series, `hypnogram`
 * from `sleep_phase_5_min`, `body_temperature_delta` over the period from readiness.temperature_deviation).
 * `dailyScore` is the day's sleep score (`/daily_sleep`), given to the day's long sleep only. Null for a period
 * that is not sleep (deleted, rejected) or whose bedtimes do not parse.
 */
export function mapSleep(sleep: OuraSleep, dailyScore: number | null): MappedSleep | null {
  const type = sleepTypeOf(sleep.type);
  const start = parseOuraTime(sleep.bedtime_start);
  const end = parseOuraTime(sleep.bedtime_end);
  if (!type || !start || !end || typeof sleep.id !== 'string' || typeof sleep.day !== 'string') return null;
  // The offset of bedtime_start is the user's at bedtime; bedtime_end's is used only if bedtime_start has none.
  const offset = start.offsetSeconds ?? end.offsetSeconds ?? 0;
  const lowest = bpm(sleep.lowest_heart_rate);
  const temperatureDelta = num(sleep.readiness?.temperature_deviation);
  const summary: SummaryInput = {
    resource: 'sleep',
    source_key: sleep.id,
    calendar_date: sleep.day,
    time: utcIso(start.instantMs),
    fields: {
      date: utcMidnightOf(sleep.day),
      calendar_date: sleep.day,
      bedtime_start: isoLocal(start.instantMs, offset),
      bedtime_stop: isoLocal(end.instantMs, end.offsetSeconds ?? offset),
      type,
      state: 'confirmed',
      timezone_offset: offset,
      duration: int(sleep.time_in_bed) ?? Math.round((end.instantMs - start.instantMs) / 1000),
      total: int(sleep.total_sleep_duration) ?? 0,
      awake: int(sleep.awake_time) ?? 0,
      light: int(sleep.light_sleep_duration) ?? 0,
      rem: int(sleep.rem_sleep_duration) ?? 0,
      deep: int(sleep.deep_sleep_duration) ?? 0,
      score: sleep.type === 'long_sleep' ? dailyScore : null,
      recovery_readiness_score: num(sleep.readiness?.score),
      hr_lowest: lowest,
      hr_average: bpm(sleep.average_heart_rate),
      // Oura's resting heart rate is the lowest heart rate of the night (the app's "Resting heart rate").
      hr_resting: lowest,
      efficiency: num(sleep.efficiency),
      latency: int(sleep.latency),
      temperature_delta: temperatureDelta,
      // RMSSD in ms, as Oura reports it: never converted, never SDNN.
      average_hrv: num(sleep.average_hrv),
      respiratory_rate: num(sleep.average_breath),
    },
  };
  const samples = [...seriesSamples(sleep.heart_rate, 'heartrate', offset), ...seriesSamples(sleep.hrv, 'hrv', offset), ...hypnogramSamples(sleep)];
  if (temperatureDelta !== null) {
    const timestamp = utcIso(start.instantMs);
    samples.push({
      resource: 'body_temperature_delta',
      timestamp,
      start: timestamp,
      end: utcIso(end.instantMs),
      value: temperatureDelta,
      unit: unitOf('body_temperature_delta'),
      type: null,
      timezone_offset: offset,
    });
  }
  return { summary, samples };
}

// ---- Daily activity ---------------------------------------------------------------------------------------------

/**
 * One Oura activity day → an `activity` summary (anchored at local midnight of `day`, the offset from `timestamp`)
 * and one interval sample each of `steps`, `calories_active` and `calories_basal` (total − active) over Oura's
 * activity day: "a 24-hour period starting at 4 a.m." (PublicDailyActivity), i.e. from `timestamp` for 24 h.
 * Distance is `equivalent_walking_distance` (metres); the activity levels come in seconds and go out in minutes.
 */
export function mapDailyActivity(activity: OuraDailyActivity): { summary: SummaryInput; samples: SampleInput[] } | null {
  const stamp = parseOuraTime(activity.timestamp);
  if (typeof activity.day !== 'string' || typeof activity.id !== 'string') return null;
  const offset = stamp?.offsetSeconds ?? 0;
  const minutes = (seconds: unknown) => (num(seconds) === null ? null : round((seconds as number) / 60, 1));
  const distance = num(activity.equivalent_walking_distance);
  const active = num(activity.active_calories);
  const total = num(activity.total_calories);
  const summary: SummaryInput = {
    resource: 'activity',
    source_key: activity.day,
    calendar_date: activity.day,
    time: utcIso(localMidnightMs(activity.day, offset)),
    fields: {
      date: utcMidnightOf(activity.day),
      calendar_date: activity.day,
      timezone_offset: offset,
      steps: int(activity.steps),
      calories_active: active,
      calories_total: total,
      distance,
      daily_movement: distance,
      low: minutes(activity.low_activity_time),
      medium: minutes(activity.medium_activity_time),
      high: minutes(activity.high_activity_time),
      // Oura counts no floors and has no heart rate in its activity day (heart rate comes from /heartrate).
      floors_climbed: null,
      heart_rate: null,
    },
  };
  const samples: SampleInput[] = [];
  if (stamp) {
    const timestamp = utcIso(stamp.instantMs);
    const end = utcIso(stamp.instantMs + DAY_MS);
    const interval = (resource: string, value: number | null) => {
      if (value !== null && value >= 0)
        samples.push({ resource, timestamp, start: timestamp, end, value, unit: unitOf(resource), type: null, timezone_offset: offset });
    };
    interval('steps', int(activity.steps));
    interval('calories_active', active);
    interval('calories_basal', total !== null && active !== null ? total - active : null);
  }
  return { summary, samples };
}

// ---- Workouts ---------------------------------------------------------------------------------------------------

/** One Oura workout → a `workouts` summary (Oura reports activity, intensity, calories and distance; no heart rate). */
export function mapWorkout(workout: OuraWorkout): SummaryInput | null {
  const start = parseOuraTime(workout.start_datetime);
  const end = parseOuraTime(workout.end_datetime);
  if (!start || !end || typeof workout.id !== 'string' || typeof workout.day !== 'string') return null;
  const offset = start.offsetSeconds ?? end.offsetSeconds ?? 0;
  const sport = sportOf(workout.activity);
  const label = typeof workout.label === 'string' && workout.label.trim() ? workout.label.trim() : null;
  return {
    resource: 'workouts',
    source_key: workout.id,
    calendar_date: workout.day,
    time: utcIso(start.instantMs),
    fields: {
      ...NO_WORKOUT_METRICS,
      title: label ?? (sport.slug === 'other' ? humanizeActivity(String(workout.activity ?? '')) : sport.name),
      timezone_offset: offset,
      calendar_date: workout.day,
      time_start: isoLocal(start.instantMs, offset),
      time_end: isoLocal(end.instantMs, end.offsetSeconds ?? offset),
      sport,
      provider_id: workout.id,
      calories: num(workout.calories),
      distance: num(workout.distance),
    },
  };
}

// ---- Heart rate, SpO2 ---------------------------------------------------------------------------------------------

/**
 * `/heartrate` rows → `heartrate` samples. Their timestamps are UTC and say nothing of the user's zone, so
 * `timezone_offset` is null ("unknown": ingest fills in the user's fallback zone) rather than a guess.
 */
export function mapHeartRateRows(rows: OuraHeartRateRow[]): SampleInput[] {
  const unit = unitOf('heartrate');
  const out: SampleInput[] = [];
  for (const row of rows) {
    const at = parseOuraTime(row.timestamp) ?? (num(row.timestamp_unix) !== null ? { instantMs: row.timestamp_unix as number, offsetSeconds: 0 } : null);
    const value = bpm(row.bpm);
    if (!at || value === null) continue;
    out.push({ resource: 'heartrate', timestamp: utcIso(at.instantMs), value, unit, type: null, timezone_offset: null });
  }
  return out;
}

/**
 * A night's average SpO2 → one `blood_oxygen` sample (percent). The document has only a `day`, no time and no
 * offset: the sample sits at local midnight of that day in the user's fallback zone (`offsetSeconds`), inside the
 * night the average was recorded in. A day without a reading (`spo2_percentage: null`) gives none.
 */
export function mapDailySpo2(spo2: OuraDailySpo2, offsetSeconds: number): SampleInput | null {
  const average = num(spo2.spo2_percentage?.average);
  if (average === null || typeof spo2.day !== 'string') return null;
  return {
    resource: 'blood_oxygen',
    timestamp: utcIso(localMidnightMs(spo2.day, offsetSeconds)),
    value: average,
    unit: unitOf('blood_oxygen'),
    type: null,
    timezone_offset: offsetSeconds,
  };
}

// ---- Personal info ------------------------------------------------------------------------------------------------

/** Oura's height is in metres (cassette `single_personal_info.json`: 1.8); a value above 3 can only be centimetres. */
export function heightCm(height: unknown): number | null {
  const h = num(height);
  if (h === null || h <= 0) return null;
  return Math.round(h > 3 ? h : h * 100);
}

const SEXES = new Set(['male', 'female']);

/**
 * `/personal_info` → the `profile` summary (height in cm, sex; Oura gives an age, not a birth date) and, when it
 * knows a weight, a `body` summary for `date` (the day it was read: Oura keeps one current weight, no history).
 */
export function mapPersonalInfo(info: OuraPersonalInfo, date: string, offsetSeconds: number): SummaryInput[] {
  const time = utcIso(localMidnightMs(date, offsetSeconds));
  const sexRaw = typeof info.biological_sex === 'string' ? info.biological_sex.trim().toLowerCase() : '';
  const sex = sexRaw ? (SEXES.has(sexRaw) ? sexRaw : 'other') : null;
  const height = heightCm(info.height);
  const out: SummaryInput[] = [
    { resource: 'profile', source_key: 'profile', calendar_date: date, time, fields: { height, birth_date: null, gender: sex, sex } },
  ];
  const weight = num(info.weight);
  if (weight !== null && weight > 0) {
    const bmi = height ? round(weight / (height / 100) ** 2, 1) : null;
    out.push({
      resource: 'body',
      source_key: date,
      calendar_date: date,
      time,
      fields: { date: utcMidnightOf(date), calendar_date: date, weight, fat: null, body_mass_index: bmi, lean_body_mass_kilogram: null },
    });
  }
  return out;
}
