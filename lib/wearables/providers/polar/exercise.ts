/**
 * Polar exercises (schema `exerciseHashId`, GET /v3/exercises and /v3/exercises/{exerciseId}; docs copied at
 * newpush/coach docs/apis/polar.md) as our workouts, streams and workout samples.
 *
 * The trap: `start_time` is local wall time WITHOUT an offset and `start_time_utc_offset` its offset in MINUTES. The
 * instant is `wall − offset`, applied ONCE (open-wearables PR #1679 added it and stored exercises 2× the offset in
 * the future). A `start_time` that already carries a zone is an instant: the offset is not applied to it again.
 */
import { isoLocal } from '../../../platform/time';
import type { ProviderData, WorkoutStream } from '../../model';
import { emptyData, interval, num, round, sum } from './samples';
import { durationSeconds, hasZone, isoUtc, parseWall, wallDate } from './time';
import type { PolarExercise, PolarExerciseSample } from './api-types';

interface Sport {
  id: number;
  name: string;
  slug: string;
}
/** Our sports (ids as in the demo world and the event catalogue: running 1, cycling 2, walking 3); the rest by family. */
const SPORTS: Record<string, Sport> = {
  running: { id: 1, name: 'Running', slug: 'running' },
  cycling: { id: 2, name: 'Cycling', slug: 'cycling' },
  walking: { id: 3, name: 'Walking', slug: 'walking' },
  swimming: { id: 4, name: 'Swimming', slug: 'swimming' },
  hiking: { id: 5, name: 'Hiking', slug: 'hiking' },
  strength_training: { id: 6, name: 'Strength training', slug: 'strength_training' },
  other: { id: 0, name: 'Other', slug: 'other' },
};

/** Polar's `sport` / `detailed_sport_info` (docs appendix "Detailed sport info values") → our sport. */
export function sportOf(e: Pick<PolarExercise, 'sport' | 'detailed_sport_info'>): Sport {
  const name = `${e.detailed_sport_info ?? ''} ${e.sport ?? ''}`.toUpperCase();
  if (/RUNNING|JOGGING/.test(name)) return SPORTS.running;
  if (/CYCLING|BIKING|SPINNING/.test(name)) return SPORTS.cycling;
  if (/WALKING/.test(name)) return SPORTS.walking;
  if (/SWIMMING/.test(name)) return SPORTS.swimming;
  if (/HIKING/.test(name)) return SPORTS.hiking;
  if (/STRENGTH|WEIGHT/.test(name)) return SPORTS.strength_training;
  return SPORTS.other;
}

const humanize = (s: string) => {
  const words = s.toLowerCase().replace(/_/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
};

/** The instant and offset of an exercise's start: local `start_time` minus `start_time_utc_offset` minutes, once. */
export function exerciseStart(e: Pick<PolarExercise, 'start_time' | 'start_time_utc_offset'>): { utcMs: number; offsetSec: number } | null {
  if (!e.start_time) return null;
  const offsetSec = Math.round((num(e.start_time_utc_offset) ?? 0) * 60);
  if (hasZone(e.start_time)) {
    // Already an instant: never shift it by the offset again.
    const utcMs = Date.parse(e.start_time);
    return Number.isNaN(utcMs) ? null : { utcMs, offsetSec };
  }
  const wall = parseWall(e.start_time);
  return Number.isNaN(wall) ? null : { utcMs: wall - offsetSec * 1000, offsetSec };
}

/** Sample type (docs appendix "Exercise sample types") → stream key and unit conversion. RR intervals (11) are not a stream. */
const STREAM_OF: Record<string, { key: keyof Omit<WorkoutStream, 'time'>; scale?: number }> = {
  '0': { key: 'heartrate' },
  '1': { key: 'velocity_smooth', scale: 1 / 3.6 }, // km/h → m/s
  '2': { key: 'cadence' },
  '3': { key: 'altitude' },
  '4': { key: 'power' },
  '8': { key: 'cadence' }, // running cadence (spm); a run has no bike cadence
  '9': { key: 'temperature' },
  '10': { key: 'distance' },
};

function parseSeries(s: PolarExerciseSample): (number | null)[] {
  return (s.data ?? '').split(',').map((x) => {
    const v = Number(x.trim());
    return x.trim() === '' || /^null$/i.test(x.trim()) || !Number.isFinite(v) ? null : v;
  });
}

/** The exercise's samples as one stream on a common time axis (the finest recording rate among them). */
export function exerciseStream(e: PolarExercise, startUtcMs: number): WorkoutStream | null {
  const series = (e.samples ?? [])
    .map((s) => ({ map: STREAM_OF[String(s['sample-type'] ?? '')], rate: num(s['recording-rate']), values: parseSeries(s) }))
    .filter(
      (s): s is { map: { key: keyof Omit<WorkoutStream, 'time'>; scale?: number }; rate: number; values: (number | null)[] } =>
        !!s.map && s.rate !== null && s.rate > 0 && s.values.length > 0,
    );
  if (!series.length) return null;
  const rate = Math.min(...series.map((s) => s.rate));
  const length = Math.max(...series.map((s) => Math.ceil((s.values.length * s.rate) / rate)));
  const start = Math.round(startUtcMs / 1000);
  const stream: WorkoutStream = { time: Array.from({ length }, (_, k) => start + k * rate) };
  for (const s of series) {
    if (stream[s.map.key]) continue; // the first series of a kind wins
    stream[s.map.key] = Array.from({ length }, (_, k) => {
      const v = s.values[Math.floor((k * rate) / s.rate)];
      return v === undefined || v === null ? null : s.map.scale ? round(v * s.map.scale, 3) : v;
    });
  }
  return stream;
}

/**
 * One exercise: a `workouts` summary keyed by Polar's hashed exercise id, its stream (when fetched with
 * `samples=true`), and its `workout_distance` / `workout_duration` interval samples.
 */
export function mapExercise(e: PolarExercise): ProviderData {
  const out = emptyData();
  const start = exerciseStart(e);
  if (!e.id || !start) return out;
  const { utcMs, offsetSec } = start;
  const seconds = durationSeconds(e.duration);
  const durationS = Number.isNaN(seconds) ? 0 : seconds;
  const endMs = utcMs + durationS * 1000;
  const calendarDate = wallDate(utcMs + offsetSec * 1000);
  const stream = exerciseStream(e, utcMs);
  const present = (xs: (number | null)[] | undefined) => (xs ?? []).filter((x): x is number => x !== null);
  const speeds = present(stream?.velocity_smooth),
    altitude = present(stream?.altitude),
    watts = present(stream?.power);
  const distance = num(e.distance);
  const zones = [...(e.heart_rate_zones ?? [])].sort((a, b) => (a.index ?? 0) - (b.index ?? 0)).map((z) => Math.round(durationSeconds(z['in-zone']) || 0));
  const avgWatts = watts.length ? Math.round(sum(watts) / watts.length) : null;
  const sport = sportOf(e);
  out.summaries.push({
    resource: 'workouts',
    source_key: e.id,
    calendar_date: calendarDate,
    time: isoUtc(utcMs),
    fields: {
      title: e.detailed_sport_info ? humanize(e.detailed_sport_info) : e.sport ? humanize(e.sport) : sport.name,
      timezone_offset: offsetSec,
      calendar_date: calendarDate,
      time_start: isoLocal(utcMs, offsetSec),
      time_end: isoLocal(endMs, offsetSec),
      sport,
      provider_id: e.id,
      average_hr: num(e.heart_rate?.average),
      max_hr: num(e.heart_rate?.maximum),
      hr_zones: zones.length ? zones : null,
      calories: num(e.calories),
      distance,
      // Polar's summary has no pause time: the whole duration counts as moving.
      moving_time: durationS ? Math.round(durationS) : null,
      average_speed: distance !== null && durationS > 0 ? round(distance / durationS, 2) : null,
      max_speed: speeds.length ? round(Math.max(...speeds), 2) : null,
      steps: null,
      total_elevation_gain: altitude.length ? round(sum(altitude.slice(1).map((a, i) => Math.max(0, a - altitude[i]))), 1) : null,
      elev_high: altitude.length ? Math.max(...altitude) : null,
      elev_low: altitude.length ? Math.min(...altitude) : null,
      average_watts: avgWatts,
      device_watts: avgWatts,
      max_watts: watts.length ? Math.max(...watts) : null,
      weighted_average_watts: watts.length ? Math.round((sum(watts.map((x) => x ** 4)) / watts.length) ** 0.25) : null,
    },
  });
  if (stream) out.workout_streams.push({ workout_source_key: e.id, stream });
  if (distance !== null) out.samples.push(interval('workout_distance', utcMs, endMs, distance, offsetSec));
  if (durationS > 0) out.samples.push(interval('workout_duration', utcMs, endMs, round(durationS / 60, 1), offsetSec));
  return out;
}
