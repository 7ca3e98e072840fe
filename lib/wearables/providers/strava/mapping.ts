import { isoLocal } from '../../../platform/time';
import type { ProviderData, SampleInput, SummaryInput, WorkoutStream, WorkoutStreamInput } from '../../model';
import { timeseriesResource } from '../../resources';
import type { StravaActivity, StravaAthlete, StravaStream, StravaStreamSet } from './api-types';
import { sportOf } from './sports';

/**
 * Pure mapping of Strava API v3 JSON (api-types.ts) into our summaries, samples and workout streams. No I/O.
 *
 * Time zones (the trap): `start_date` is the UTC instant; `start_date_local` is the local wall clock written with a
 * `Z` although it is not UTC; `timezone` ("(GMT-08:00) America/Los_Angeles") names the zone's STANDARD offset while
 * `utc_offset` is the offset in force (the swagger's list example: -25200 in May under "(GMT-08:00)"). The offset is
 * therefore taken once, from `utc_offset`, and applied once, to the UTC instant; `start_date_local` is never parsed as
 * an instant and `timezone` is never parsed for an offset.
 */

/** Strava is an aggregator: an activity comes from a watch, a bike computer, the phone app or a manual entry. */
export const STRAVA_SOURCE_TYPE = 'unknown';

/**
 * kcal burned per kJ of mechanical work: 1 kcal = 4.184 kJ at a human efficiency of ~24%, i.e. ≈ 1 (Strava support
 * "Calorie Calculation": rides use power output and a coefficient for human efficiency). Used only when an activity
 * carries `kilojoules` but no `calories` (SummaryActivity never carries `calories`; DetailedActivity does).
 */
const KCAL_PER_KJ_OF_WORK = 1 / (4.184 * 0.24);

const unitOf = (resource: string): string => {
  const unit = timeseriesResource(resource)?.unit;
  if (!unit) throw new Error(`resources.ts has no timeseries resource ${resource}`);
  return unit;
};
const UNITS = {
  heartrate: unitOf('heartrate'),
  distance: unitOf('distance'),
  calories_active: unitOf('calories_active'),
  workout_distance: unitOf('workout_distance'),
  workout_duration: unitOf('workout_duration'),
};

export const emptyData = (): ProviderData => ({ source_type: STRAVA_SOURCE_TYPE, summaries: [], samples: [], workout_streams: [] });

const localDateOf = (ms: number, offsetSeconds: number) => new Date(ms + offsetSeconds * 1000).toISOString().slice(0, 10);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const int = (v: unknown): number | null => (num(v) === null ? null : Math.round(v as number));
const round1 = (v: number) => Math.round(v * 10) / 10;

/**
 * Seconds east of UTC in force at the activity's start: `utc_offset`; without it (older payloads), the difference of
 * the local wall clock and the UTC instant (both read as if UTC, which is what the `Z` on start_date_local invites);
 * without either, the user's fallback offset.
 */
export function activityOffsetSeconds(a: Pick<StravaActivity, 'utc_offset' | 'start_date' | 'start_date_local'>, fallbackSeconds: number): number {
  const offset = num(a.utc_offset);
  if (offset !== null) return Math.round(offset);
  if (a.start_date_local) {
    const wallClock = Date.parse(`${a.start_date_local.replace(/(Z|[+-]\d\d:?\d\d)$/, '')}Z`);
    const utc = Date.parse(a.start_date);
    if (Number.isFinite(wallClock) && Number.isFinite(utc)) return Math.round((wallClock - utc) / 1000);
  }
  return fallbackSeconds;
}

/** Where an activity sits in time: its UTC start (ms), its end (start + elapsed) and its offset. */
export interface ActivityTiming {
  startMs: number;
  endMs: number;
  offsetSeconds: number;
}

export function activityTiming(a: StravaActivity, fallbackOffsetSeconds: number): ActivityTiming | null {
  const startMs = Date.parse(a.start_date);
  if (!Number.isFinite(startMs) || !/(Z|[+-]\d\d:?\d\d)$/.test(a.start_date)) return null; // not a UTC instant: cannot be placed
  const elapsed = num(a.elapsed_time) ?? num(a.moving_time) ?? 0;
  return { startMs, endMs: startMs + elapsed * 1000, offsetSeconds: activityOffsetSeconds(a, fallbackOffsetSeconds) };
}

/** kcal: the activity's own `calories` (DetailedActivity), else an estimate from `kilojoules` of work (rides with power). */
export function activityCalories(a: StravaActivity): number | null {
  const calories = num(a.calories);
  if (calories !== null && calories > 0) return round1(calories);
  const kj = num(a.kilojoules);
  return kj !== null && kj > 0 ? round1(kj * KCAL_PER_KJ_OF_WORK) : null;
}

/**
 * One activity → its workout summary (source_key = the Strava activity id: a re-delivered or updated activity
 * replaces itself) and its interval samples (workout_distance, workout_duration, distance, calories_active).
 */
export function mapActivity(a: StravaActivity, fallbackOffsetSeconds: number): { summary: SummaryInput; samples: SampleInput[] } | null {
  const timing = activityTiming(a, fallbackOffsetSeconds);
  if (!timing) return null;
  const { startMs, endMs, offsetSeconds } = timing;
  const sourceKey = String(a.id);
  const calendarDate = localDateOf(startMs, offsetSeconds);
  const distance = num(a.distance);
  const calories = activityCalories(a);
  const averageWatts = num(a.average_watts);
  const fields: Record<string, unknown> = {
    title: a.name ?? null,
    timezone_offset: offsetSeconds,
    calendar_date: calendarDate,
    time_start: isoLocal(startMs, offsetSeconds),
    time_end: isoLocal(endMs, offsetSeconds),
    sport: sportOf(a.sport_type, a.type),
    provider_id: sourceKey,
    average_hr: int(a.average_heartrate),
    max_hr: int(a.max_heartrate),
    // Seconds per heart-rate zone need GET /activities/{id}/zones (a subscriber-only "Summit" feature): not fetched.
    hr_zones: null,
    calories,
    distance,
    moving_time: int(a.moving_time),
    average_speed: num(a.average_speed),
    max_speed: num(a.max_speed),
    steps: null, // Strava has no step counts
    total_elevation_gain: num(a.total_elevation_gain),
    elev_high: num(a.elev_high),
    elev_low: num(a.elev_low),
    average_watts: averageWatts,
    // Our `device_watts` is a number (the schema's OptNumber): the average power when a power meter measured it;
    // Strava's `device_watts` is the boolean "measured, not estimated".
    device_watts: a.device_watts === true ? averageWatts : null,
    max_watts: num(a.max_watts),
    weighted_average_watts: num(a.weighted_average_watts),
    map: a.map ? { polyline: a.map.polyline ?? null, summary_polyline: a.map.summary_polyline ?? null } : null,
  };
  const summary: SummaryInput = { resource: 'workouts', source_key: sourceKey, calendar_date: calendarDate, time: new Date(startMs).toISOString(), fields };
  const start = new Date(startMs).toISOString(),
    end = new Date(endMs).toISOString();
  const interval = (resource: keyof typeof UNITS, value: number): SampleInput => ({
    resource,
    timestamp: start,
    start,
    end,
    value,
    unit: UNITS[resource],
    type: null,
    timezone_offset: offsetSeconds,
  });
  const samples: SampleInput[] = [];
  if (endMs > startMs) samples.push(interval('workout_duration', round1((endMs - startMs) / 60_000)));
  if (distance !== null && distance > 0) samples.push(interval('workout_distance', distance), interval('distance', distance));
  if (calories !== null) samples.push(interval('calories_active', calories));
  return { summary, samples };
}

/** A page of activities (GET /athlete/activities) or one activity (GET /activities/{id}). */
export function mapActivities(activities: StravaActivity[], fallbackOffsetSeconds: number): ProviderData {
  const out = emptyData();
  for (const a of activities) {
    const mapped = mapActivity(a, fallbackOffsetSeconds);
    if (!mapped) continue; // an activity without a UTC start cannot be placed in time
    out.summaries.push(mapped.summary);
    out.samples.push(...mapped.samples);
  }
  return out;
}

/** The activity a stream set belongs to: its id (the workout's source_key), UTC start and offset. */
export interface StreamOwner {
  activityId: string;
  startMs: number;
  offsetSeconds: number;
}

/**
 * A StreamSet (key_by_type=true) → the workout's stream (parallel arrays indexed like `time`, which becomes unix
 * seconds: Strava's `time` counts seconds from the start) and one heart-rate sample per recorded beat value.
 */
export function mapStreams(owner: StreamOwner, set: StravaStreamSet | null | undefined): ProviderData {
  const out = emptyData();
  const offsets = set?.time?.data;
  if (!set || !offsets?.length) return out;
  const n = offsets.length;
  const startSeconds = Math.floor(owner.startMs / 1000);
  const aligned = <T, R>(s: StravaStream<T> | undefined, f: (v: T) => R | null): (R | null)[] | undefined =>
    s?.data?.length ? Array.from({ length: n }, (_, i) => (s.data[i] === undefined || s.data[i] === null ? null : f(s.data[i]))) : undefined;
  const asNumber = (v: number | null) => num(v);
  const stream: WorkoutStream = { time: offsets.map((t) => startSeconds + Math.round(t)) };
  const optional: Partial<WorkoutStream> = {
    heartrate: aligned(set.heartrate, (v) => int(v)),
    cadence: aligned(set.cadence, asNumber),
    altitude: aligned(set.altitude, asNumber),
    velocity_smooth: aligned(set.velocity_smooth, asNumber),
    lat: aligned(set.latlng, (p) => num(p?.[0])),
    lng: aligned(set.latlng, (p) => num(p?.[1])),
    distance: aligned(set.distance, asNumber),
    power: aligned(set.watts, asNumber),
    temperature: aligned(set.temp, asNumber),
  };
  for (const [key, values] of Object.entries(optional)) if (values) (stream as unknown as Record<string, unknown>)[key] = values;
  const input: WorkoutStreamInput = { workout_source_key: owner.activityId, stream };
  out.workout_streams.push(input);
  stream.heartrate?.forEach((bpm, i) => {
    if (bpm === null || bpm <= 0) return;
    out.samples.push({
      resource: 'heartrate',
      timestamp: new Date((startSeconds + offsets[i]) * 1000).toISOString(),
      unit: UNITS.heartrate,
      type: null,
      timezone_offset: owner.offsetSeconds,
      value: bpm,
    });
  });
  return out;
}

const SEX: Record<string, string> = { M: 'male', F: 'female' };

/**
 * The athlete (GET /athlete) → the profile summary (Strava knows the sex; not the height nor the birth date) and, when
 * the athlete has set a weight (0 = never set, swagger example), a body summary. The weight is a profile setting, not
 * a dated measurement: it is anchored at the athlete's `updated_at` and keyed by that day, so every sync re-reads the
 * same body record and a profile change adds one.
 */
export function mapAthlete(athlete: StravaAthlete, report: { date: string; offsetSeconds: number }): ProviderData {
  const out = emptyData();
  const reportMidnight = Date.parse(`${report.date}T00:00:00Z`) - report.offsetSeconds * 1000;
  const sex = SEX[athlete.sex ?? ''] ?? null;
  out.summaries.push({
    resource: 'profile',
    source_key: 'profile',
    calendar_date: report.date,
    time: new Date(reportMidnight).toISOString(),
    fields: { height: null, birth_date: null, gender: sex, sex, wheelchair_use: null },
  });
  const weight = num(athlete.weight);
  if (weight !== null && weight > 0) {
    const updated = athlete.updated_at ? Date.parse(athlete.updated_at) : NaN;
    const at = Number.isFinite(updated) ? updated : reportMidnight;
    const date = localDateOf(at, report.offsetSeconds);
    out.summaries.push({
      resource: 'body',
      source_key: `athlete_weight:${date}`,
      calendar_date: date,
      time: new Date(at).toISOString(),
      fields: { date: `${date}T00:00:00+00:00`, calendar_date: date, weight, fat: null, body_mass_index: null, lean_body_mass_kilogram: null },
    });
  }
  return out;
}
