import { isoLocal } from '../../../platform/time';
import { NO_WORKOUT_METRICS, type SampleInput, type SummaryInput } from '../../model';
import { timeseriesResource } from '../../resources';
import type { WhoopBodyMeasurement, WhoopCycle, WhoopRecovery, WhoopSleep, WhoopWorkout } from './api-types';
import { sportOf } from './sports';

/**
 * WHOOP v2 records → our summaries and samples. Pure functions; field meanings and units from the official OpenAPI
 * (api-evangelist/whoop-co `openapi/_original/whoop-api-openapi.yml`).
 *
 * Times: WHOOP gives every instant in UTC plus the user's `timezone_offset` at the time. The offset is applied exactly
 * once, to write local wall-clock fields (`bedtime_start`, `time_start`…) and to pick the local calendar date; `time`
 * and sample timestamps stay the UTC instant as WHOOP gave it.
 *
 * Records not yet scored (`PENDING_SCORE`) or never scorable (`UNSCORABLE`) carry no `score`: their times are mapped
 * and every scored field is null. Their `source_key` is the record's id, so when WHOOP scores one later the mapped
 * summary replaces the unscored one.
 */

/** The WHOOP strap is worn on the wrist (or bicep) and records continuously, like a watch. */
export const WHOOP_SOURCE_TYPE = 'watch';
const KJ_PER_KCAL = 4.184;
const HOUR_MS = 3_600_000;

const unit = (resource: string): string => {
  const u = timeseriesResource(resource)?.unit;
  if (!u) throw new Error(`whoop_v2: ${resource} is not a timeseries resource`);
  return u;
};
const UNITS = { hrv: unit('hrv'), blood_oxygen: unit('blood_oxygen'), body_temperature: unit('body_temperature'), respiratory_rate: unit('respiratory_rate') };

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const round = (v: number | null, digits = 0): number | null => (v === null ? null : Math.round(v * 10 ** digits) / 10 ** digits);
/** Milliseconds → whole seconds, null when absent. */
const seconds = (ms: unknown): number | null => round(num(ms) === null ? null : (ms as number) / 1000);
const kcal = (kj: unknown): number | null => round(num(kj) === null ? null : (kj as number) / KJ_PER_KCAL, 1);
const instant = (iso: string | null | undefined): number => (typeof iso === 'string' ? Date.parse(iso) : NaN);

/**
 * Seconds east of UTC of a Time Zone Designator: '+hh:mm', '-hh:mm' or 'Z' (the spec's format for `timezone_offset`);
 * `fallback` (the user's fallback zone) when it is missing or unreadable.
 */
export function offsetSeconds(tzd: string | null | undefined, fallback: number): number {
  if (typeof tzd !== 'string') return fallback;
  const s = tzd.trim();
  if (s === 'Z' || s === 'z') return 0;
  const m = /^([+-])(\d{2}):?(\d{2})(?::?(\d{2}))?$/.exec(s);
  if (!m) return fallback;
  const value = Number(m[2]) * 3600 + Number(m[3]) * 60 + Number(m[4] ?? 0);
  return m[1] === '-' ? -value : value;
}

/** The local calendar date (YYYY-MM-DD) of an instant. */
export const localDate = (ms: number, offsetS: number): string => new Date(ms + offsetS * 1000).toISOString().slice(0, 10);
/** Local midnight of a calendar date, as a UTC ISO instant. */
export const localMidnightUtc = (date: string, offsetS: number): string => new Date(Date.parse(`${date}T00:00:00Z`) - offsetS * 1000).toISOString();
const utcMidnightOf = (date: string) => `${date}T00:00:00+00:00`; // the deprecated `date` field

// ---- Recovery: joined onto its sleep -------------------------------------------------------------------------

/** What a scored recovery adds to its sleep (RMSSD, never SDNN: the spec names hrv_rmssd_milli RMSSD in ms). */
export interface RecoveryFacts {
  recoveryScore: number | null;
  restingHeartRate: number | null;
  hrvRmssdMs: number | null;
  spo2Percentage: number | null;
  skinTempCelsius: number | null;
}

/** A recovery's facts, or null when it has none yet (PENDING_SCORE, UNSCORABLE). */
export function recoveryFacts(r: WhoopRecovery): RecoveryFacts | null {
  if (r.score_state !== 'SCORED' || !r.score) return null;
  return {
    recoveryScore: num(r.score.recovery_score),
    restingHeartRate: num(r.score.resting_heart_rate),
    hrvRmssdMs: num(r.score.hrv_rmssd_milli),
    spo2Percentage: num(r.score.spo2_percentage),
    skinTempCelsius: num(r.score.skin_temp_celsius),
  };
}

const FACT_KEYS = ['recoveryScore', 'restingHeartRate', 'hrvRmssdMs', 'spo2Percentage', 'skinTempCelsius'] as const;

/**
 * Recoveries by sleep id as one flat string for a page cursor (`id,score,rhr,hrv,spo2,skin;...`, empty for null):
 * the sleep pages of a chunk need the recoveries fetched by the page before them.
 */
export function encodeRecoveries(bySleep: Map<string, RecoveryFacts>): string {
  return [...bySleep].map(([id, f]) => [id, ...FACT_KEYS.map((k) => (f[k] === null ? '' : String(f[k])))].join(',')).join(';');
}

export function decodeRecoveries(text: string | null | undefined): Map<string, RecoveryFacts> {
  const out = new Map<string, RecoveryFacts>();
  for (const entry of (text ?? '').split(';')) {
    const [id, ...values] = entry.split(',');
    if (!id || values.length !== FACT_KEYS.length) continue;
    const facts = Object.fromEntries(FACT_KEYS.map((k, i) => [k, values[i] === '' ? null : num(Number(values[i]))])) as unknown as RecoveryFacts;
    out.set(id, facts);
  }
  return out;
}

// ---- Sleep ----------------------------------------------------------------------------------------------------

/**
 * One sleep (and its recovery, when WHOOP has scored one for it) → a `sleep` summary keyed by the sleep's UUID, plus
 * `hrv` (RMSSD ms), `blood_oxygen` (%), `body_temperature` (the recovery's skin temperature, °C, type `skin`, over
 * the sleep) and `respiratory_rate` samples at the sleep's end. The calendar date is the local date the sleep ends
 * (the morning it belongs to). A sleep still in progress (no `end`) is skipped: its update will bring it.
 */
export function mapSleep(s: WhoopSleep, recovery: RecoveryFacts | null, fallbackOffset: number): { summaries: SummaryInput[]; samples: SampleInput[] } {
  const start = instant(s.start);
  const end = instant(s.end);
  if (!s.id || !Number.isFinite(start) || !Number.isFinite(end) || end < start) return { summaries: [], samples: [] };
  const tz = offsetSeconds(s.timezone_offset, fallbackOffset);
  const calendarDate = localDate(end, tz);
  const score = s.score_state === 'SCORED' && s.score ? s.score : null;
  // Not yet scored (PENDING_SCORE) or never scorable (UNSCORABLE): no stage times, which a sleep summary requires
  // (schemas/wearables.ts SleepSummary, the SDK's ClientFacingSleep). A pending one arrives, replacing nothing, once
  // WHOOP scores it (its sleep.updated push, or the next sync); an unscorable one never becomes a sleep summary.
  if (!score?.stage_summary) return { summaries: [], samples: [] };
  const stages = score.stage_summary;
  const [light, deep, rem, awake] = [
    stages?.total_light_sleep_time_milli,
    stages?.total_slow_wave_sleep_time_milli,
    stages?.total_rem_sleep_time_milli,
    stages?.total_awake_time_milli,
  ].map(seconds);
  const total = light !== null && deep !== null && rem !== null ? light + deep + rem : null;
  const summary: SummaryInput = {
    resource: 'sleep',
    source_key: s.id,
    calendar_date: calendarDate,
    time: new Date(start).toISOString(),
    fields: {
      date: utcMidnightOf(calendarDate),
      calendar_date: calendarDate,
      bedtime_start: isoLocal(start, tz),
      bedtime_stop: isoLocal(end, tz),
      type: s.nap ? 'short_sleep' : 'long_sleep',
      state: 'confirmed',
      timezone_offset: tz,
      duration: Math.round((end - start) / 1000),
      total,
      awake,
      light,
      rem,
      deep,
      // Sleep Performance (% of the sleep needed that was slept) is WHOOP's sleep score.
      score: round(num(score?.sleep_performance_percentage)),
      recovery_readiness_score: recovery?.recoveryScore ?? null,
      hr_lowest: null,
      hr_average: null,
      hr_resting: round(recovery?.restingHeartRate ?? null),
      efficiency: num(score?.sleep_efficiency_percentage),
      latency: null,
      temperature_delta: null,
      skin_temperature: recovery?.skinTempCelsius ?? null,
      average_hrv: recovery?.hrvRmssdMs ?? null,
      respiratory_rate: num(score?.respiratory_rate),
    },
  };
  const at = new Date(end).toISOString();
  const samples: SampleInput[] = [];
  const point = (resource: keyof typeof UNITS, value: number | null) => {
    if (value !== null) samples.push({ resource, timestamp: at, unit: UNITS[resource], type: null, timezone_offset: tz, value });
  };
  point('hrv', recovery?.hrvRmssdMs ?? null);
  point('blood_oxygen', recovery?.spo2Percentage ?? null);
  point('respiratory_rate', num(score?.respiratory_rate));
  if (recovery?.skinTempCelsius != null) {
    const from = new Date(start).toISOString();
    samples.push({
      resource: 'body_temperature',
      timestamp: from,
      start: from,
      end: at,
      unit: UNITS.body_temperature,
      type: 'skin',
      timezone_offset: tz,
      value: recovery.skinTempCelsius,
    });
  }
  return { summaries: [summary], samples };
}

// ---- Cycle → daily activity -------------------------------------------------------------------------------------

/**
 * A WHOOP physiological cycle runs from one sleep onset to the next, so it starts the evening before the day it
 * stands for. Its calendar date is the local date 6 h after its start (a 23:18 onset on May 24 → May 25; a 02:00 onset
 * on May 25 → May 25).
 */
const CYCLE_DAY_SHIFT_MS = 6 * HOUR_MS;

/**
 * One cycle → the `activity` summary of its day (keyed by the date: a re-scored cycle replaces it): total calories
 * from its kilojoules, average and max heart rate. WHOOP has no steps, distance or intensity minutes.
 */
export function mapCycle(c: WhoopCycle, fallbackOffset: number): SummaryInput[] {
  const start = instant(c.start);
  if (!Number.isFinite(start)) return [];
  const tz = offsetSeconds(c.timezone_offset, fallbackOffset);
  const calendarDate = localDate(start + CYCLE_DAY_SHIFT_MS, tz);
  const score = c.score_state === 'SCORED' && c.score ? c.score : null;
  return [
    {
      resource: 'activity',
      source_key: calendarDate,
      calendar_date: calendarDate,
      time: localMidnightUtc(calendarDate, tz),
      fields: {
        date: utcMidnightOf(calendarDate),
        calendar_date: calendarDate,
        timezone_offset: tz,
        calories_total: kcal(score?.kilojoule),
        calories_active: null,
        steps: null,
        distance: null,
        daily_movement: null,
        low: null,
        medium: null,
        high: null,
        floors_climbed: null,
        heart_rate: score
          ? { avg_bpm: round(num(score.average_heart_rate)), min_bpm: null, max_bpm: round(num(score.max_heart_rate)), resting_bpm: null }
          : null,
      },
    },
  ];
}

// ---- Workout ----------------------------------------------------------------------------------------------------

/** One workout → a `workouts` summary keyed by its UUID: sport, kcal from kJ, heart rate, zones (s), distance, climb. */
export function mapWorkout(w: WhoopWorkout, fallbackOffset: number): SummaryInput[] {
  const start = instant(w.start);
  const end = instant(w.end);
  if (!w.id || !Number.isFinite(start) || !Number.isFinite(end) || end < start) return [];
  const tz = offsetSeconds(w.timezone_offset, fallbackOffset);
  const calendarDate = localDate(start, tz);
  const score = w.score_state === 'SCORED' && w.score ? w.score : null;
  const z = score?.zone_durations;
  const sport = sportOf(w.sport_name, w.sport_id);
  return [
    {
      resource: 'workouts',
      source_key: w.id,
      calendar_date: calendarDate,
      time: new Date(start).toISOString(),
      fields: {
        ...NO_WORKOUT_METRICS,
        title: sport.name,
        timezone_offset: tz,
        calendar_date: calendarDate,
        time_start: isoLocal(start, tz),
        time_end: isoLocal(end, tz),
        sport,
        provider_id: w.id,
        average_hr: round(num(score?.average_heart_rate)),
        max_hr: round(num(score?.max_heart_rate)),
        hr_zones: z
          ? [z.zone_zero_milli, z.zone_one_milli, z.zone_two_milli, z.zone_three_milli, z.zone_four_milli, z.zone_five_milli].map((ms) => seconds(ms) ?? 0)
          : null,
        calories: kcal(score?.kilojoule),
        distance: num(score?.distance_meter),
        total_elevation_gain: num(score?.altitude_gain_meter),
      },
    },
  ];
}

// ---- Body measurement → body + profile ----------------------------------------------------------------------------

/**
 * The user's current body measurement (WHOOP keeps one, with no date) → a `body` summary of `asOfDate` (weight, BMI)
 * and the `profile` (height in whole cm). `max_heart_rate` has no field of ours.
 */
export function mapBodyMeasurement(b: WhoopBodyMeasurement, asOfDate: string, offsetS: number): SummaryInput[] {
  const weight = num(b.weight_kilogram);
  const height = num(b.height_meter);
  const time = localMidnightUtc(asOfDate, offsetS);
  const out: SummaryInput[] = [];
  if (weight !== null) {
    out.push({
      resource: 'body',
      source_key: asOfDate,
      calendar_date: asOfDate,
      time,
      fields: {
        date: utcMidnightOf(asOfDate),
        calendar_date: asOfDate,
        weight,
        fat: null,
        body_mass_index: height ? round(weight / height ** 2, 1) : null,
        lean_body_mass_kilogram: null,
      },
    });
  }
  if (height !== null) {
    out.push({
      resource: 'profile',
      source_key: 'profile',
      calendar_date: asOfDate,
      time,
      fields: { height: Math.round(height * 100), birth_date: null, gender: null, sex: null, wheelchair_use: null },
    });
  }
  return out;
}
