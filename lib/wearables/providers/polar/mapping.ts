/**
 * Pure mapping of Polar AccessLink v3 payloads (./api-types.ts) into our summaries and samples (lib/wearables/model.ts),
 * with the units of lib/wearables/resources.ts. Sources: the docs page copied at newpush/coach docs/apis/polar.md
 * (field meanings, units, enumerations) and the official spec tryAGI/Polar src/libs/Polar/openapi.yaml.
 *
 * Time zones — the traps:
 * - Exercises (./exercise.ts): local `start_time` without an offset plus `start_time_utc_offset` minutes, applied once.
 * - Sleep: `sleep_start_time` / `sleep_end_time` carry their offset; the hypnogram's `"HH:MM"` keys are wall times in it.
 * - Daily activity, step and zone samples, continuous heart rate and Nightly Recharge carry no offset at all (device
 *   time): the user's fallback offset (`PullWindow.timezoneOffsetSeconds`) places them.
 */
import { DAY_MS, isoLocal } from '../../../platform/time';
import type { ProviderData, SampleInput, SummaryInput } from '../../model';
import { emptyData, interval, num, point, round, sum, utcMidnightOf } from './samples';
import { clockMs, dateWall, isoUtc, parseWall, parseZoned, wallDate } from './time';
import type {
  PolarActivity,
  PolarContinuousHeartRateDay,
  PolarNightlyRecharge,
  PolarPhysicalInformation,
  PolarSleep,
  PolarSpo2TestResult,
  PolarSteps,
  PolarUser,
} from './api-types';

export { POLAR_SOURCE_TYPE, emptyData } from './samples';
export { exerciseStart, exerciseStream, mapExercise, sportOf } from './exercise';

/**
 * `"HH:MM"`-keyed samples of one night (sleep hypnogram, sleep heart rate, Nightly Recharge HRV and breathing) as wall
 * ms, in key order: the first key is placed on or after `firstWall` (less a minute of rounding), and each key earlier
 * than its predecessor has crossed midnight.
 */
function nightClock(keys: string[], firstWall: number): number[] {
  const out: number[] = [];
  let day = Math.floor(firstWall / DAY_MS) * DAY_MS;
  let previous = firstWall - 60_000;
  for (const key of keys) {
    const ms = clockMs(key);
    if (Number.isNaN(ms)) {
      out.push(Number.NaN);
      continue;
    }
    let t = day + ms;
    while (t < previous) t += DAY_MS;
    day = Math.floor(t / DAY_MS) * DAY_MS;
    previous = t;
    out.push(t);
  }
  return out;
}

// ---- Sleep ------------------------------------------------------------------------------------------------------

/** Polar hypnogram stage → ours (schemas/wearables.ts SleepStream: deep=1, light=2, rem=3, awake=4, missing_data=-1). */
export const HYPNOGRAM_STAGE: Record<number, number> = { 0: 4, 1: 3, 2: 2, 3: 2, 4: 1, 5: -1 };

/**
 * One night: a `sleep` summary keyed by the night's `date` (Polar's result date) — so the same night delivered twice
 * (the SLEEP webhook fires twice, polarofficial/accesslink-example-python#29; or once through the listing and once by
 * date) replaces itself — plus its `hypnogram` interval samples.
 */
export function mapSleep(night: PolarSleep): ProviderData {
  const out = emptyData();
  if (!night.date || !night.sleep_start_time || !night.sleep_end_time) return out;
  const start = parseZoned(night.sleep_start_time);
  const end = parseZoned(night.sleep_end_time);
  if (Number.isNaN(start.utcMs) || Number.isNaN(end.utcMs) || end.utcMs < start.utcMs) return out;
  const offset = start.offsetSec; // the offset the sleep was recorded in, applied once: the strings are instants
  const startWall = start.utcMs + offset * 1000;
  const endWall = end.utcMs + offset * 1000;

  // Hypnogram: each key starts a stage that lasts until the next key; the first starts at sleep start, the last ends
  // at sleep end.
  const keys = Object.keys(night.hypnogram ?? {});
  const walls = nightClock(keys, startWall);
  const spans: { from: number; to: number; stage: number }[] = [];
  keys.forEach((key, i) => {
    const stage = HYPNOGRAM_STAGE[night.hypnogram![key]];
    if (stage === undefined || Number.isNaN(walls[i])) return;
    const next = walls.slice(i + 1).find((w) => !Number.isNaN(w));
    const from = Math.max(walls[i], startWall);
    const to = Math.min(next ?? endWall, endWall);
    if (to > from) spans.push({ from, to, stage });
  });
  for (const s of spans) out.samples.push(interval('hypnogram', s.from - offset * 1000, s.to - offset * 1000, s.stage, offset));

  const light = num(night.light_sleep) ?? 0,
    deep = num(night.deep_sleep) ?? 0,
    rem = num(night.rem_sleep) ?? 0;
  const unknown = num(night.unrecognized_sleep_stage) ?? 0;
  const duration = Math.round((end.utcMs - start.utcMs) / 1000);
  const total = light + deep + rem + unknown; // unrecognised is still sleep, of an unknown stage
  const hr = Object.values(night.heart_rate_samples ?? {}).filter((x): x is number => num(x) !== null);
  out.summaries.push({
    resource: 'sleep',
    source_key: night.date,
    calendar_date: night.date,
    time: isoUtc(start.utcMs),
    fields: {
      date: utcMidnightOf(night.date),
      calendar_date: night.date,
      bedtime_start: isoLocal(start.utcMs, offset),
      bedtime_stop: isoLocal(end.utcMs, offset),
      type: 'long_sleep',
      state: 'confirmed',
      timezone_offset: offset,
      duration,
      total,
      awake: num(night.total_interruption_duration) ?? 0,
      light,
      rem,
      deep,
      score: num(night.sleep_score),
      hr_lowest: hr.length ? Math.min(...hr) : null,
      hr_average: hr.length ? Math.round(sum(hr) / hr.length) : null,
      hr_resting: null,
      efficiency: duration > 0 ? round((100 * total) / duration, 1) : null,
      // Polar's sleep_start_time is when the user fell asleep: no time-in-bed, so no latency.
      latency: null,
      temperature_delta: null,
      // HRV and breathing come with Nightly Recharge (the `hrv` pull unit), not with the sleep.
      average_hrv: null,
      respiratory_rate: null,
    },
  });
  return out;
}

// ---- Nightly Recharge (HRV) -------------------------------------------------------------------------------------

/**
 * Nightly Recharge: `hrv_samples` as `hrv` (RMSSD in ms — the docs define heart_rate_variability_avg as "Root Mean
 * Square of Successive Differences (RMSSD)" and hrv_samples as its 5-minute averages in ms; never SDNN), and
 * `breathing_samples` as `respiratory_rate`. The keys are wall times of the night that ends on `date` and carry no
 * offset: the user's fallback offset places them; a key from 12:00 on belongs to the evening before `date`.
 */
export function mapNightlyRecharge(recharge: PolarNightlyRecharge, fallbackOffsetSec: number): ProviderData {
  const out = emptyData();
  if (!recharge.date) return out;
  const dayWall = dateWall(recharge.date);
  if (Number.isNaN(dayWall)) return out;
  const place = (key: string) => {
    const ms = clockMs(key);
    if (Number.isNaN(ms)) return Number.NaN;
    return (ms >= 12 * 3_600_000 ? dayWall - DAY_MS : dayWall) + ms - fallbackOffsetSec * 1000;
  };
  const series = (samples: Record<string, number> | undefined, resource: string) => {
    for (const [key, value] of Object.entries(samples ?? {})) {
      const at = place(key);
      if (!Number.isNaN(at) && num(value) !== null) out.samples.push(point(resource, at, value, fallbackOffsetSec));
    }
  };
  series(recharge.hrv_samples, 'hrv');
  series(recharge.breathing_samples, 'respiratory_rate');
  return out;
}

// ---- Daily activity ----------------------------------------------------------------------------------------------

/**
 * The day's steps as 'steps' interval samples. Polar filters out consecutive samples with the same count ("If time
 * between two consecutive samples is larger than interval_ms, one or more samples have been filtered out"), so a gap
 * of k intervals repeats the earlier count k times; what `total_steps` still lacks after the last sample is the last
 * count repeated (bounded by the day's end). Intervals of 0 steps are not emitted.
 */
export function expandSteps(steps: PolarSteps, dayEndWall: number, offsetSec: number): SampleInput[] {
  const raw = (steps.samples ?? [])
    .map((s) => ({ wall: s.timestamp ? parseWall(s.timestamp) : Number.NaN, steps: num(s.steps) }))
    .filter((s): s is { wall: number; steps: number } => !Number.isNaN(s.wall) && s.steps !== null)
    .sort((a, b) => a.wall - b.wall);
  const intervalMs = num(steps.interval_ms) ?? 0;
  const spans: { from: number; to: number; steps: number }[] = [];
  raw.forEach((s, i) => {
    const next = raw[i + 1]?.wall;
    if (intervalMs <= 0) {
      // No interval given: each sample lasts until the next one (the last one: a minute).
      spans.push({ from: s.wall, to: Math.min(next ?? s.wall + 60_000, dayEndWall), steps: s.steps });
      return;
    }
    const repeats = next === undefined ? 1 : Math.max(1, Math.round((next - s.wall) / intervalMs));
    for (let k = 0; k < repeats; k++) spans.push({ from: s.wall + k * intervalMs, to: s.wall + (k + 1) * intervalMs, steps: s.steps });
  });
  const last = raw[raw.length - 1];
  const total = num(steps.total_steps);
  if (last && intervalMs > 0 && total !== null && last.steps > 0) {
    let missing = total - sum(spans.map((s) => s.steps));
    let from = spans[spans.length - 1].to;
    while (missing >= last.steps && from + intervalMs <= dayEndWall) {
      spans.push({ from, to: from + intervalMs, steps: last.steps });
      missing -= last.steps;
      from += intervalMs;
    }
  }
  return spans
    .filter((s) => s.steps > 0 && s.to > s.from)
    .map((s) => interval('steps', s.from - offsetSec * 1000, s.to - offsetSec * 1000, s.steps, offsetSec));
}

/** Minutes per activity zone from the zone-change samples: each zone lasts until the next change or the day's end. */
export function zoneMinutes(zones: { zone?: string; timestamp?: string }[], dayEndWall: number): Record<string, number> {
  const points = zones
    .map((z) => ({ zone: z.zone ?? '', wall: z.timestamp ? parseWall(z.timestamp) : Number.NaN }))
    .filter((z) => z.zone && !Number.isNaN(z.wall))
    .sort((a, b) => a.wall - b.wall);
  const minutes: Record<string, number> = {};
  points.forEach((p, i) => {
    const to = Math.min(points[i + 1]?.wall ?? dayEndWall, dayEndWall);
    if (to > p.wall) minutes[p.zone] = (minutes[p.zone] ?? 0) + (to - p.wall) / 60_000;
  });
  return minutes;
}

/**
 * One day of activity: an `activity` summary keyed by its date, the day's `steps` samples, and the day's active
 * calories and distance as one interval sample each (Polar gives no finer split of them). Polar's activity times are
 * device-local (the docs call start_time "UTC", but its example day runs 00:00–23:59:59 local and the deprecated
 * transactional API says "Begin and end of day are determined by the time set on the device used. No timezone
 * information is available."): the user's fallback offset places the day.
 */
export function mapActivity(a: PolarActivity, fallbackOffsetSec: number): ProviderData {
  const out = emptyData();
  const date = a.start_time?.slice(0, 10) || a.samples?.date;
  if (!date || Number.isNaN(dateWall(date))) return out;
  const tz = fallbackOffsetSec;
  const midnight = dateWall(date);
  const endWall = a.end_time ? parseWall(a.end_time) : Number.NaN;
  // The day ends at the next midnight, or earlier when Polar says the recorded day ends earlier (an unfinished day).
  const dayEnd = Number.isNaN(endWall) ? midnight + DAY_MS : Math.min(midnight + DAY_MS, endWall + 1000);
  const zones = a.samples?.activity_zones?.samples;
  const minutes = zones?.length ? zoneMinutes(zones, dayEnd) : null;
  const distance = num(a.distance_from_steps);
  out.summaries.push({
    resource: 'activity',
    source_key: date,
    calendar_date: date,
    time: isoUtc(midnight - tz * 1000),
    fields: {
      date: utcMidnightOf(date),
      calendar_date: date,
      timezone_offset: tz,
      steps: num(a.steps),
      calories_active: num(a.active_calories),
      calories_total: num(a.calories),
      distance,
      daily_movement: distance,
      low: minutes ? Math.round(minutes.LIGHT ?? 0) : null,
      medium: minutes ? Math.round(minutes.MODERATE ?? 0) : null,
      high: minutes ? Math.round(minutes.VIGOROUS ?? 0) : null,
      floors_climbed: null,
      heart_rate: null,
    },
  });
  if (a.samples?.steps) out.samples.push(...expandSteps(a.samples.steps, dayEnd, tz));
  const active = num(a.active_calories);
  if (active !== null) out.samples.push(interval('calories_active', midnight - tz * 1000, dayEnd - tz * 1000, active, tz));
  if (distance !== null) out.samples.push(interval('distance', midnight - tz * 1000, dayEnd - tz * 1000, distance, tz));
  return out;
}

// ---- Continuous heart rate ---------------------------------------------------------------------------------------

/**
 * The days of a continuous heart-rate answer. The spec names the single-day schema for the range endpoint too; real
 * range answers wrap the days in `heart_rates` (open-wearables backend/app/services/providers/polar/data_247.py): all
 * three shapes are read.
 */
export function continuousHeartRateDays(body: unknown): PolarContinuousHeartRateDay[] {
  if (!body || typeof body !== 'object') return [];
  if (Array.isArray(body)) return body as PolarContinuousHeartRateDay[];
  const wrapped = (body as { heart_rates?: unknown }).heart_rates;
  if (Array.isArray(wrapped)) return wrapped as PolarContinuousHeartRateDay[];
  return 'heart_rate_samples' in body ? [body as PolarContinuousHeartRateDay] : [];
}

/** 5-minute heart-rate samples; `sample_time` is device time on `date`, placed with the fallback offset. */
export function mapContinuousHeartRate(day: PolarContinuousHeartRateDay, fallbackOffsetSec: number): SampleInput[] {
  if (!day.date) return [];
  const midnight = dateWall(day.date);
  if (Number.isNaN(midnight)) return [];
  const out: SampleInput[] = [];
  for (const s of day.heart_rate_samples ?? []) {
    const ms = s.sample_time ? clockMs(s.sample_time) : Number.NaN;
    const bpm = num(s.heart_rate);
    if (Number.isNaN(ms) || bpm === null) continue;
    out.push(point('heartrate', midnight + ms - fallbackOffsetSec * 1000, bpm, fallbackOffsetSec));
  }
  return out;
}

// ---- SpO2 -------------------------------------------------------------------------------------------------------

export const SPO2_PASSED = 'SPO2_TEST_PASSED';

/**
 * SpO2 test results as `blood_oxygen` samples (`test_time` unix seconds, `time_zone_offset` minutes). Inconclusive
 * tests carry no trustworthy value and are skipped. The test's `heart_rate_variability_ms` is not mapped: the docs do
 * not say which HRV measure it is, and `hrv` holds RMSSD only.
 */
export function mapSpo2(results: PolarSpo2TestResult[]): SampleInput[] {
  return results
    .filter((r) => r.test_status === SPO2_PASSED && num(r.blood_oxygen_percent) !== null && num(r.test_time) !== null)
    .map((r) => point('blood_oxygen', r.test_time! * 1000, r.blood_oxygen_percent!, Math.round((num(r.time_zone_offset) ?? 0) * 60)));
}

// ---- Body and profile ------------------------------------------------------------------------------------------

/** One physical-information entry: a `body` summary keyed by its local date (a later entry that day replaces it) and `vo2_max`. */
export function mapPhysicalInformation(info: PolarPhysicalInformation, fallbackOffsetSec: number): ProviderData {
  const out = emptyData();
  const at = info.created ? Date.parse(info.created) : Number.NaN;
  if (Number.isNaN(at)) return out;
  const date = wallDate(at + fallbackOffsetSec * 1000);
  const weight = num(info.weight),
    height = num(info.height);
  out.summaries.push({
    resource: 'body',
    source_key: date,
    calendar_date: date,
    time: isoUtc(at),
    fields: {
      date: utcMidnightOf(date),
      calendar_date: date,
      weight,
      fat: null,
      body_mass_index: weight !== null && height ? round(weight / (height / 100) ** 2, 1) : null,
      lean_body_mass_kilogram: null,
    },
  });
  const vo2 = num(info['vo2-max']);
  if (vo2 !== null && vo2 > 0) out.samples.push(point('vo2_max', at, vo2, fallbackOffsetSec));
  return out;
}

/** GET /v3/users/{user-id} as our `profile` (one per user, replaced on every pull). */
export function mapUser(user: PolarUser, reportedOn: string, fallbackOffsetSec: number): SummaryInput {
  const gender = typeof user.gender === 'string' ? user.gender.toLowerCase() : null;
  const height = num(user.height);
  return {
    resource: 'profile',
    source_key: 'profile',
    calendar_date: reportedOn,
    time: isoUtc(dateWall(reportedOn) - fallbackOffsetSec * 1000),
    fields: {
      height: height !== null ? Math.round(height) : null,
      birth_date: user.birthdate ?? null,
      gender: gender === 'male' || gender === 'female' ? gender : gender ? 'other' : null,
      sex: gender === 'male' || gender === 'female' ? gender : null,
    },
  };
}

/** Concatenates pages of data. */
export function mergeData(parts: ProviderData[]): ProviderData {
  const out = emptyData();
  for (const p of parts) {
    out.summaries.push(...p.summaries);
    out.samples.push(...p.samples);
    out.workout_streams.push(...p.workout_streams);
  }
  return out;
}
