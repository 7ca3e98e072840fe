import { isoLocal } from '../../../platform/time';
import { NO_WORKOUT_METRICS, type SampleInput, type SummaryInput } from '../../model';
import { timeseriesResource } from '../../resources';
import type { GetmeasBody, WithingsActivity, WithingsIntradayEntry, WithingsMeasure, WithingsMeasureGroup, WithingsWorkout } from './api-types';
import { localDate, localMidnightEpoch, offsetSecondsAt, utcIso, utcMidnightOf } from './time';

/**
 * Pure mapping of Withings payloads (./api-types.ts, which names the api-reference objects they follow) into our
 * summaries and samples. Codes and units are those of the api-reference and the AE examples
 * (examples/withings-measure-example.json, -activity-, -sleep-summary-).
 */

// ---- Measure types (Measure - Getmeas `meastype` table) -----------------------------------------------------------

export const MEASTYPE = {
  weight: 1,
  height: 4,
  fatFreeMass: 5,
  fatRatio: 6,
  fatMassWeight: 8,
  diastolic: 9,
  systolic: 10,
  heartPulse: 11,
  temperature: 12,
  spo2: 54,
  bodyTemperature: 71,
  skinTemperature: 73,
  muscleMass: 76,
  hydration: 77,
  boneMass: 88,
  pulseWaveVelocity: 91,
  vo2Max: 123,
  visceralFat: 170,
} as const;

/** Everything the `body` pull asks getmeas for: body composition, blood pressure + pulse, SpO2, temperatures, VO2 max. */
export const BODY_MEASTYPES = [1, 5, 6, 8, 9, 10, 11, 12, 54, 71, 73, 76, 77, 88, 91, 123, 170];
const BODY_COMPOSITION = new Set<number>([1, 5, 6, 8, 76, 77, 88, 170]);

/** `value × 10^unit` (measure_object), divided rather than multiplied for negative units so 65750e-3 is exactly 65.75. */
export const scaleMeasure = (m: Pick<WithingsMeasure, 'value' | 'unit'>): number => (m.unit < 0 ? m.value / 10 ** -m.unit : m.value * 10 ** m.unit);

export const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;
export const num = (x: unknown): number | null => (typeof x === 'number' && Number.isFinite(x) ? x : null);
const unitOf = (resource: string): string => {
  const r = timeseriesResource(resource);
  if (!r) throw new Error(`unknown timeseries resource ${resource}`);
  return r.unit;
};
export function point(resource: string, epochSeconds: number, value: number, timezoneOffset: number | null): SampleInput {
  return { resource, timestamp: utcIso(epochSeconds), unit: unitOf(resource), type: null, timezone_offset: timezoneOffset, value };
}
export function interval(resource: string, start: number, end: number, value: number, timezoneOffset: number | null): SampleInput {
  const timestamp = utcIso(start);
  return { resource, timestamp, start: timestamp, end: utcIso(end), unit: unitOf(resource), type: null, timezone_offset: timezoneOffset, value };
}

// ---- Measures (getmeas) -------------------------------------------------------------------------------------------

/** The latest height (metres) among getmeas groups, or null. */
export function latestHeightMetres(groups: WithingsMeasureGroup[]): number | null {
  let best: { date: number; metres: number } | null = null;
  for (const g of groups) {
    const h = g.measures.find((m) => m.type === MEASTYPE.height);
    if (h && (!best || g.date > best.date)) best = { date: g.date, metres: scaleMeasure(h) };
  }
  return best ? best.metres : null;
}

/**
 * One getmeas page: a `body` summary per group holding body composition (source_key = grpid, stable across
 * re-deliveries: "every time a measure is created/updated/deleted, the corresponding measure group is updated"), and the
 * samples of every group (weight, fat, lean_body_mass, body_mass_index, blood_pressure, heartrate, blood_oxygen,
 * body_temperature, vo2_max). Times are the group's `date` (UTC); the offset is that of the body's `timezone` there.
 */
export function mapMeasureGroups(
  body: GetmeasBody,
  opts: { heightMetres: number | null; fallbackOffset: number },
): { summaries: SummaryInput[]; samples: SampleInput[] } {
  const summaries: SummaryInput[] = [];
  const samples: SampleInput[] = [];
  for (const g of body.measuregrps ?? []) {
    if (g.category !== undefined && g.category !== 1) continue; // 2 = user objectives, not measures
    const offset = offsetSecondsAt(body.timezone, g.date, opts.fallbackOffset);
    const byType = new Map<number, number>();
    for (const m of g.measures ?? []) byType.set(m.type, scaleMeasure(m));
    const v = (t: number) => byType.get(t) ?? null;
    const weight = v(MEASTYPE.weight);
    const bmi = weight !== null && opts.heightMetres ? round(weight / opts.heightMetres ** 2, 1) : null;
    const pct = (kg: number | null) => (kg !== null && weight ? round((100 * kg) / weight, 1) : null);

    if (weight !== null) samples.push(point('weight', g.date, weight, offset));
    if (v(MEASTYPE.fatRatio) !== null) samples.push(point('fat', g.date, v(MEASTYPE.fatRatio)!, offset));
    if (v(MEASTYPE.fatFreeMass) !== null) samples.push(point('lean_body_mass', g.date, v(MEASTYPE.fatFreeMass)!, offset));
    if (bmi !== null) samples.push(point('body_mass_index', g.date, bmi, offset));
    const sys = v(MEASTYPE.systolic),
      dia = v(MEASTYPE.diastolic);
    if (sys !== null && dia !== null)
      samples.push({
        resource: 'blood_pressure',
        timestamp: utcIso(g.date),
        unit: unitOf('blood_pressure'),
        type: null,
        timezone_offset: offset,
        systolic: sys,
        diastolic: dia,
      });
    if (v(MEASTYPE.heartPulse) !== null) samples.push(point('heartrate', g.date, v(MEASTYPE.heartPulse)!, offset));
    if (v(MEASTYPE.spo2) !== null) samples.push(point('blood_oxygen', g.date, v(MEASTYPE.spo2)!, offset));
    // Body temperature is an interval resource here; a thermometer reading is an instant: start = end.
    const temp = v(MEASTYPE.bodyTemperature) ?? v(MEASTYPE.temperature);
    if (temp !== null) samples.push(interval('body_temperature', g.date, g.date, temp, offset));
    if (v(MEASTYPE.vo2Max) !== null) samples.push(point('vo2_max', g.date, v(MEASTYPE.vo2Max)!, offset));

    if ([...byType.keys()].some((t) => BODY_COMPOSITION.has(t))) {
      const calendarDate = localDate(g.date, offset);
      summaries.push({
        resource: 'body',
        source_key: String(g.grpid),
        calendar_date: calendarDate,
        time: utcIso(g.date),
        fields: {
          date: utcMidnightOf(calendarDate),
          calendar_date: calendarDate,
          timezone_offset: offset,
          weight,
          fat: v(MEASTYPE.fatRatio),
          body_mass_index: bmi,
          lean_body_mass_kilogram: v(MEASTYPE.fatFreeMass),
          fat_mass_kilogram: v(MEASTYPE.fatMassWeight),
          muscle_mass_percentage: pct(v(MEASTYPE.muscleMass)),
          water_percentage: pct(v(MEASTYPE.hydration)),
          bone_mass_percentage: pct(v(MEASTYPE.boneMass)),
          visceral_fat_index: v(MEASTYPE.visceralFat),
        },
      });
    }
  }
  return { summaries, samples };
}

/** The `profile` summary from the latest height measure (the Public API has no user-info service: User v2 - Get is for SDK/cellular partners only). */
export function mapProfile(groups: WithingsMeasureGroup[], reportedOn: string, offset: number): SummaryInput[] {
  const metres = latestHeightMetres(groups);
  if (metres === null) return [];
  return [
    {
      resource: 'profile',
      source_key: 'profile',
      calendar_date: reportedOn,
      time: utcIso(localMidnightEpoch(reportedOn, offset)),
      fields: { height: Math.round(metres * 100), birth_date: null, gender: null, sex: null, wheelchair_use: null },
    },
  ];
}

// ---- Daily activity (getactivity) ---------------------------------------------------------------------------------

/** One getactivity record → an `activity` summary keyed by its date; its offset is that of its `timezone` at local noon. */
export function mapActivity(a: WithingsActivity, fallbackOffset: number): SummaryInput {
  const noon = Date.parse(`${a.date}T12:00:00Z`) / 1000;
  const offset = offsetSecondsAt(a.timezone, noon, fallbackOffset);
  const minutes = (s: number | undefined) => (typeof s === 'number' ? Math.round(s / 60) : null);
  const hr = [a.hr_average, a.hr_min, a.hr_max].some((x) => typeof x === 'number')
    ? { avg_bpm: num(a.hr_average), min_bpm: num(a.hr_min), max_bpm: num(a.hr_max), resting_bpm: null }
    : null;
  return {
    resource: 'activity',
    source_key: a.date,
    calendar_date: a.date,
    time: utcIso(localMidnightEpoch(a.date, offset)),
    fields: {
      date: utcMidnightOf(a.date),
      calendar_date: a.date,
      time_zone: a.timezone ?? null,
      timezone_offset: offset,
      steps: num(a.steps),
      calories_active: num(a.calories),
      calories_total: num(a.totalcalories),
      distance: num(a.distance),
      daily_movement: num(a.distance),
      low: minutes(a.soft),
      medium: minutes(a.moderate),
      high: minutes(a.intense),
      // "elevation: Number of floors climbed" (activity_object).
      floors_climbed: num(a.elevation),
      heart_rate: hr,
    },
  };
}

// ---- Intraday (getintradayactivity) -------------------------------------------------------------------------------

/**
 * getintradayactivity `series` ({epoch: entry}) → heartrate and blood_oxygen points, and steps / distance /
 * calories_active / floors_climbed intervals of the entry's `duration`. The series carries no time zone: offsets are
 * left null (unknown; the user's fallback zone fills them in).
 */
export function mapIntraday(series: Record<string, WithingsIntradayEntry> | unknown[] | undefined): SampleInput[] {
  const out: SampleInput[] = [];
  if (!series || Array.isArray(series)) return out; // an empty series is sent as [] by PHP-style JSON
  for (const [key, e] of Object.entries(series)) {
    const t = Number(key);
    if (!Number.isFinite(t)) continue;
    if (num(e.heart_rate) !== null) out.push(point('heartrate', t, e.heart_rate!, null));
    if (num(e.spo2_auto) !== null) out.push(point('blood_oxygen', t, e.spo2_auto!, null));
    const end = t + (num(e.duration) ?? 60);
    if (num(e.steps) !== null) out.push(interval('steps', t, end, e.steps!, null));
    if (num(e.distance) !== null) out.push(interval('distance', t, end, e.distance!, null));
    if (num(e.calories) !== null) out.push(interval('calories_active', t, end, e.calories!, null));
    if (num(e.elevation) !== null) out.push(interval('floors_climbed', t, end, e.elevation!, null));
  }
  return out;
}

// ---- Workouts (getworkouts) ---------------------------------------------------------------------------------------

/** workout_object `category` codes and names (api-reference, workout_object). */
const CATEGORY_NAMES: Record<number, string> = Object.fromEntries(
  (
    '1:Walk|2:Run|3:Hiking|4:Skating|5:BMX|6:Bicycling|7:Swimming|8:Surfing|9:Kitesurfing|10:Windsurfing|11:Bodyboard|12:Tennis|' +
    '13:Table tennis|14:Squash|15:Badminton|16:Lift weights|17:Fitness|18:Elliptical|19:Pilates|20:Basket-ball|21:Soccer|22:Football|' +
    '23:Rugby|24:Volley-ball|25:Waterpolo|26:Horse riding|27:Golf|28:Yoga|29:Dancing|30:Boxing|31:Fencing|32:Wrestling|33:Martial arts|' +
    '34:Skiing|35:Snowboarding|36:Other|128:No activity|187:Rowing|188:Zumba|191:Baseball|192:Handball|193:Hockey|194:Ice hockey|' +
    '195:Climbing|196:Ice skating|272:Multi-sport|306:Indoor walk|307:Indoor running|308:Indoor cycling|455:Standup Paddleboarding|' +
    '456:Padel|457:Gaming|490:Beach volleyball|491:Stair Stepper|492:Skateboarding|493:Parkour|494:Kayaking|495:Canoeing|496:Sailing|' +
    '497:Fishing|498:Trail Running|499:Snowshoeing|500:Paintball|501:Archery|502:Scuba Diving|503:Baseball Training|504:Biathlon|' +
    '505:Bocce|506:Pétanque|507:Paragliding|508:Frisbee|509:Skydiving|510:Pickleball|511:Cornhole|512:Dodgeball|513:Ultimate|' +
    '514:Teqball|515:Pushing a Wheelchair (Running Pace)|516:Pushing a Wheelchair (Walking Pace)|517:Athletics|518:Track Cycling|' +
    '519:Pentathlon|520:Sport Shooting|521:Triathlon|522:Diving|523:Mountain Biking|524:Gravel Biking|525:E-Biking|526:E-Mountain Biking|' +
    '527:Handcycling|528:Velomobile|529:Backcountry Skiing|530:Nordic Skiing|531:Roller Skiing|532:Racquetball|534:Hip Hop|535:Muaythai|' +
    '536:Taekwondo|537:Judo|538:Trampoline|539:Standing Frame|540:Seated Strength|541:Seated Cardio|542:Walk With Walker|' +
    '543:Walk With Cane|544:Breaking|545:Chores|546:Crossfit|547:Spinclass|548:Cricket|549:Flamenco Dancing|550:HIIT|551:Meditation|' +
    '552:Stretching|553:Yard Work Gardening|554:Cleaning|555:Public Speaking|556:Spikeball|557:Lacrosse|558:Baby Wearing|559:Dog Walking|' +
    '560:Breathing exercises|561:Balance Drills|562:Pushing a Stroller|563:Toddler Wearing|564:Bowling|565:Lasertag|566:Nordic Walking|' +
    '567:Sumo Wrestling|568:Cooking'
  )
    .split('|')
    .map((pair) => {
      const [id, name] = pair.split(':');
      return [Number(id), name];
    }),
);
const slugify = (name: string) =>
  name
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_|_$/g, '');

export function sportOf(category: number): { id: number; name: string; slug: string } {
  const name = CATEGORY_NAMES[category] ?? 'Other';
  return { id: category, name, slug: slugify(name) };
}

/** One getworkouts record → a `workouts` summary keyed by the Withings workout id; offset from its `timezone` at its start. */
export function mapWorkout(w: WithingsWorkout, fallbackOffset: number): SummaryInput {
  const offset = offsetSecondsAt(w.timezone, w.startdate, fallbackOffset);
  const d = w.data ?? {};
  const sport = sportOf(w.category);
  const elapsed = Math.max(0, w.enddate - w.startdate);
  const movingTime = Math.max(0, elapsed - (num(d.pause_duration) ?? 0) - (num(d.algo_pause_duration) ?? 0));
  const distance = num(d.distance) ?? num(d.manual_distance);
  const zones = [d.hr_zone_0, d.hr_zone_1, d.hr_zone_2, d.hr_zone_3];
  const calendarDate = localDate(w.startdate, offset);
  return {
    resource: 'workouts',
    source_key: String(w.id),
    calendar_date: calendarDate,
    time: utcIso(w.startdate),
    fields: {
      // The rest unknown; Withings' workout `elevation` is a number of floors, not metres: no elevation gain to report.
      ...NO_WORKOUT_METRICS,
      title: sport.name,
      timezone_offset: offset,
      calendar_date: calendarDate,
      time_start: isoLocal(w.startdate * 1000, offset),
      time_end: isoLocal(w.enddate * 1000, offset),
      sport,
      provider_id: String(w.id),
      average_hr: num(d.hr_average),
      max_hr: num(d.hr_max),
      hr_zones: zones.every((z) => num(z) === null) ? null : zones.map((z) => num(z) ?? 0),
      calories: num(d.calories) ?? num(d.manual_calories),
      distance,
      moving_time: movingTime,
      average_speed: distance && movingTime ? round(distance / movingTime, 2) : null,
      steps: num(d.steps),
    },
  };
}

// Sleep (getsummary, get) is mapped in sleep.ts.
export {
  mapSleepSeries,
  mapSleepSummary,
  SLEEP_SERIES_FIELDS,
  SLEEP_STATE_TO_STAGE,
  SLEEP_SUMMARY_FIELDS,
} from './sleep';
