import { isoLocal, localDate } from '../platform/time';
import { NO_WORKOUT_METRICS, type SummaryInput } from '../wearables/model';
import { humanizeActivity, type Sport, sportOf } from '../wearables/providers/oura/sports';

/**
 * Sleep and workouts from phones, one mapping for every way they come (raw records, the SDKs' summary uploads, the
 * Apple Health export): the platforms' stage and activity ids to the spec's stages and our sports, and the summaries
 * built from them.
 */

export type SleepStage = 'in_bed' | 'asleep' | 'awake' | 'light' | 'deep' | 'rem' | 'out_of_bed';

/** `HKCategoryValueSleepAnalysis`: its raw values, and the names the export writes. */
const HEALTHKIT_STAGES: Record<string, SleepStage> = {
  0: 'in_bed',
  1: 'asleep',
  2: 'awake',
  3: 'light',
  4: 'deep',
  5: 'rem',
  HKCategoryValueSleepAnalysisInBed: 'in_bed',
  HKCategoryValueSleepAnalysisAsleep: 'asleep',
  HKCategoryValueSleepAnalysisAsleepUnspecified: 'asleep',
  HKCategoryValueSleepAnalysisAwake: 'awake',
  HKCategoryValueSleepAnalysisAsleepCore: 'light',
  HKCategoryValueSleepAnalysisAsleepDeep: 'deep',
  HKCategoryValueSleepAnalysisAsleepREM: 'rem',
};
/** Health Connect's `SleepSessionRecord.STAGE_TYPE_*`. */
const HEALTH_CONNECT_STAGES: Record<string, SleepStage> = {
  1: 'awake',
  2: 'asleep',
  3: 'out_of_bed',
  4: 'light',
  5: 'deep',
  6: 'rem',
  7: 'awake',
};
/** The Android SDKs' own stage ids in their sleep uploads (phones.md §1: deep 1, light 2, rem 3, awake 4, out-of-bed 5). */
const ANDROID_SDK_STAGES: Record<string, SleepStage> = { 1: 'deep', 2: 'light', 3: 'rem', 4: 'awake', 5: 'out_of_bed' };

export const healthKitSleepStage = (value: unknown): SleepStage | null => HEALTHKIT_STAGES[String(value)] ?? null;
export const healthConnectSleepStage = (value: unknown): SleepStage | null => HEALTH_CONNECT_STAGES[String(value)] ?? null;
/** A stage of a sleep upload (`POST /v2/summary/sleep/…`): HealthKit's raw values from iOS, the SDK's ids from Android. */
export const uploadedSleepStage = (provider: string, value: unknown): SleepStage | null =>
  provider === 'apple_health_kit' ? healthKitSleepStage(value) : (ANDROID_SDK_STAGES[String(value)] ?? null);

export interface SleepSegment {
  start: number;
  end: number;
  stage: SleepStage;
}

/** A gap longer than this between one stage and the next starts another sleep. */
const SLEEP_GAP_MS = 2 * 3_600_000;

/** Stage samples (one source) grouped into sleeps: sorted, a new one after a gap of more than two hours. */
export function sleepsOf(segments: SleepSegment[]): SleepSegment[][] {
  const sorted = [...segments].sort((a, b) => a.start - b.start || a.end - b.end);
  const sleeps: SleepSegment[][] = [];
  let end = -Infinity;
  for (const s of sorted) {
    if (s.start - end > SLEEP_GAP_MS || !sleeps.length) sleeps.push([]);
    sleeps[sleeps.length - 1].push(s);
    end = Math.max(end, s.end);
  }
  return sleeps;
}

/**
 * A sleep summary from its stages: bedtime from the first to the last stage (in bed included), seconds per stage
 * (HealthKit's core and unspecified asleep count as light; out of bed as awake), total asleep, efficiency and latency.
 * Overlapping stages (an in-bed sample under the staged ones) count once, the staged one winning.
 */
export function sleepSummary(segments: SleepSegment[], offset: number, key: { sourceKey?: string; sourceType: string }): SummaryInput {
  const start = Math.min(...segments.map((s) => s.start));
  const stop = Math.max(...segments.map((s) => s.end));
  const seconds = { awake: 0, light: 0, deep: 0, rem: 0 };
  // Walk the night's boundaries: each stretch counts for the most specific stage covering it.
  const bounds = [...new Set(segments.flatMap((s) => [s.start, s.end]))].sort((a, b) => a - b);
  const specific: SleepStage[] = ['deep', 'rem', 'light', 'asleep', 'awake', 'out_of_bed', 'in_bed'];
  let firstAsleep: number | null = null;
  for (let i = 0; i + 1 < bounds.length; i++) {
    const [from, to] = [bounds[i], bounds[i + 1]];
    const covering = segments.filter((s) => s.start <= from && s.end >= to).map((s) => s.stage);
    const stage = specific.find((st) => covering.includes(st));
    if (!stage || stage === 'in_bed') continue;
    const span = (to - from) / 1000;
    const counted = stage === 'asleep' ? 'light' : stage === 'out_of_bed' ? 'awake' : stage;
    seconds[counted] += span;
    if (counted !== 'awake' && firstAsleep === null) firstAsleep = from;
  }
  const total = seconds.light + seconds.deep + seconds.rem;
  const duration = (stop - start) / 1000;
  const calendarDate = localDate(new Date(stop), offset);
  return {
    resource: 'sleep',
    source_key: key.sourceKey ?? `${key.sourceType}:${new Date(start).toISOString()}`,
    calendar_date: calendarDate,
    time: new Date(start).toISOString(),
    fields: {
      calendar_date: calendarDate,
      bedtime_start: isoLocal(start, offset),
      bedtime_stop: isoLocal(stop, offset),
      type: duration >= 3 * 3600 ? 'long_sleep' : 'short_sleep',
      timezone_offset: offset,
      duration: Math.round(duration),
      total: Math.round(total),
      awake: Math.round(seconds.awake),
      light: Math.round(seconds.light),
      deep: Math.round(seconds.deep),
      rem: Math.round(seconds.rem),
      efficiency: duration > 0 ? Math.round((total / duration) * 100) / 100 : null,
      latency: firstAsleep === null ? null : Math.round((firstAsleep - start) / 1000),
    },
  };
}

/**
 * `HKWorkoutActivityType` raw values (HealthKit's enum, americanFootball = 1 on) and names (`HKWorkoutActivityType…`
 * in the export), and Health Connect's `ExerciseSessionRecord.EXERCISE_TYPE_*`, to our sports' names (the shared ids
 * of lib/wearables/providers/oura/sports.ts).
 */
const HEALTHKIT_ACTIVITIES: Record<number, string> = {
  9: 'Climbing',
  13: 'Cycling',
  14: 'Dance',
  16: 'Elliptical',
  20: 'FunctionalStrengthTraining',
  21: 'Golf',
  24: 'Hiking',
  31: 'PaddleSports',
  35: 'Rowing',
  37: 'Running',
  38: 'Sailing',
  41: 'Soccer',
  43: 'Squash',
  44: 'StairClimbing',
  45: 'SurfingSports',
  46: 'Swimming',
  47: 'TableTennis',
  48: 'Tennis',
  50: 'TraditionalStrengthTraining',
  51: 'Volleyball',
  52: 'Walking',
  57: 'Yoga',
  60: 'CrossCountrySkiing',
  61: 'DownhillSkiing',
  63: 'HighIntensityIntervalTraining',
  66: 'Pilates',
  67: 'Snowboarding',
  73: 'MixedCardio',
  77: 'CardioDance',
  78: 'SocialDance',
  79: 'Pickleball',
  4: 'Badminton',
  6: 'Basketball',
  10: 'Cricket',
};
const ACTIVITY_SPORTS: Record<string, string> = {
  TraditionalStrengthTraining: 'strength_training',
  FunctionalStrengthTraining: 'strength_training',
  HighIntensityIntervalTraining: 'hiit',
  MixedCardio: 'hiit',
  StairClimbing: 'stair_climbing',
  Climbing: 'climbing',
  SocialDance: 'dance',
  CardioDance: 'dance',
  DownhillSkiing: 'skiing',
  CrossCountrySkiing: 'cross_country_skiing',
  PaddleSports: 'stand_up_paddling',
  SurfingSports: 'surfing',
  TableTennis: 'table_tennis',
};
const HEALTH_CONNECT_EXERCISES: Record<number, string> = {
  2: 'badminton',
  5: 'basketball',
  8: 'cycling',
  9: 'indoor_cycling',
  14: 'cricket',
  16: 'dance',
  25: 'elliptical',
  32: 'golf',
  36: 'hiit',
  37: 'hiking',
  39: 'ice_skating',
  46: 'stand_up_paddling',
  48: 'pilates',
  51: 'rock_climbing',
  53: 'rowing',
  54: 'rowing',
  56: 'running',
  57: 'running',
  58: 'sailing',
  61: 'skiing',
  62: 'snowboarding',
  64: 'soccer',
  66: 'squash',
  68: 'stair_climbing',
  69: 'stair_climbing',
  70: 'strength_training',
  72: 'surfing',
  73: 'swimming',
  74: 'swimming',
  75: 'table_tennis',
  76: 'tennis',
  78: 'volleyball',
  79: 'walking',
  81: 'strength_training',
  83: 'yoga',
};

/** A HealthKit workout's activity (raw value or name) → our sport, and its own words for a title. */
export function healthKitSport(activity: unknown): { sport: Sport; name: string } {
  const raw = typeof activity === 'number' ? (HEALTHKIT_ACTIVITIES[activity] ?? `Activity ${activity}`) : String(activity ?? '');
  const name = raw.replace(/^HKWorkoutActivityType/, '');
  const sport = sportOf(ACTIVITY_SPORTS[name] ?? name.replace(/([a-z])([A-Z])/g, '$1_$2').toLowerCase());
  return { sport, name };
}

/** A Health Connect exercise type → our sport. */
export function healthConnectSport(exerciseType: unknown): { sport: Sport; name: string } {
  const slug = HEALTH_CONNECT_EXERCISES[Number(exerciseType)];
  return { sport: sportOf(slug), name: slug ?? `exercise type ${exerciseType}` };
}

export interface WorkoutFacts {
  sourceKey: string;
  start: number;
  end: number;
  offset: number;
  sport: { sport: Sport; name: string };
  /** kcal, m, bpm, count: null where not known. */
  calories: number | null;
  distance: number | null;
  averageHr: number | null;
  maxHr: number | null;
  steps: number | null;
}

const round = (v: number | null, digits: number) => (v === null ? null : Math.round(v * 10 ** digits) / 10 ** digits);

/** A workout summary from what a phone knows of it. */
export function workoutSummary(w: WorkoutFacts): SummaryInput {
  const calendarDate = localDate(new Date(w.start), w.offset);
  const seconds = (w.end - w.start) / 1000;
  return {
    resource: 'workouts',
    source_key: w.sourceKey,
    calendar_date: calendarDate,
    time: new Date(w.start).toISOString(),
    fields: {
      ...NO_WORKOUT_METRICS,
      title: w.sport.sport.id ? w.sport.sport.name : humanizeActivity(w.sport.name),
      timezone_offset: w.offset,
      calendar_date: calendarDate,
      time_start: isoLocal(w.start, w.offset),
      time_end: isoLocal(w.end, w.offset),
      sport: w.sport.sport,
      provider_id: w.sourceKey,
      average_hr: w.averageHr === null ? null : Math.round(w.averageHr),
      max_hr: w.maxHr === null ? null : Math.round(w.maxHr),
      calories: round(w.calories, 1),
      distance: round(w.distance, 1),
      moving_time: Math.round(seconds),
      average_speed: w.distance !== null && seconds > 0 ? round(w.distance / seconds, 2) : null,
      steps: w.steps === null ? null : Math.round(w.steps),
    },
  };
}
