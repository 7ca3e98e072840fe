/**
 * Deterministic synthetic wearable data for the demo provider adapters (oura, fitbit, apple_health_kit,
 * freestyle_libre, and a generic profile for the rest). Pure: no I/O, no clock, no Math.random().
 *
 * Everything derives from seeded PRNGs keyed by (seed, concept, day), never by the requested range, so a day
 * looks the same whichever range asks for it. A per-day *plan* (sleep, workout, meals, body reading, step
 * target) is shared by every resource, which keeps them coherent: heart rate drops during the sleep the sleep
 * summary reports, the step samples add up to the activity summary, the workout summary is computed from the
 * very stream `workout_stream` returns, glucose spikes after the meals `meal` returns.
 */
import { DAY_MS, isoLocal } from '../platform/time';
import type { ProviderData, SampleInput, SummaryInput } from './model';
import { isSummaryResource, timeseriesResource } from './resources';
import {
  MIN,
  SLOT,
  clamp,
  dateOf,
  dayNumber,
  dayWindow,
  gauss,
  inside,
  isoUtc,
  movement,
  nightsOf,
  personFor,
  plan,
  rngFor,
  round,
  stageAt,
  sum,
  toSecond,
  uniform,
  workoutFields,
  workoutHeartrate,
  workoutStream,
  type Ctx,
  type Rng,
  type Sleep,
  type Slot,
  type Stage,
} from './demo-world';

export interface DemoRequest {
  /** e.g. `${userId}:${provider}`; same seed, same data, always. */
  seed: string;
  provider: string;
  /** A summary resource, a timeseries resource of resources.ts, or 'workout_stream'. */
  resource: string;
  /** YYYY-MM-DD inclusive, in the user's local calendar. */
  startDate: string;
  endDate: string;
  /** Seconds east of UTC. */
  timezoneOffsetSeconds: number;
  /** ISO instant: nothing recorded at or after it (an unfinished day's activity covers what was recorded so far). */
  until?: string;
}

/** The device type each demo provider records with; other providers report 'unknown'. */
export const DEMO_SOURCE_TYPES: Record<string, string> = { oura: 'ring', fitbit: 'watch', apple_health_kit: 'watch', freestyle_libre: 'automatic' };

// ---- Point/interval samples -----------------------------------------------------------------------------------

type Raw = { t: number; end?: number; value?: number; systolic?: number; diastolic?: number };
const every = (from: number, to: number, stepMs: number) => Array.from({ length: Math.max(0, Math.ceil((to - from) / stepMs)) }, (_, i) => from + i * stepMs);
const STAGE_HR: Record<Stage, number> = { 1: 0, 2: 3, 3: 6, 4: 9 };
const STAGE_HRV: Record<Stage, number> = { 1: 12, 2: 0, 3: -6, 4: -10 };

function heartrateDay(ctx: Ctx, day: number): Raw[] {
  const p = plan(ctx, day),
    nights = nightsOf(ctx, day),
    slots = movement(ctx, day),
    w = p.workout,
    workoutHr = w && workoutHeartrate(ctx, day, w);
  const r = rngFor(ctx.seed, 'heartrate', day);
  return every(p.midnight, p.midnight + DAY_MS, 5 * MIN).map((t) => {
    const asleep = stageAt(nights, t);
    if (asleep) return { t, value: Math.round(asleep.sleep.hrLowest + STAGE_HR[asleep.stage] + Math.abs(gauss(r, 0, 2))) };
    if (w && workoutHr && inside(t, w)) return { t, value: workoutHr[Math.floor((t - w.start) / 5000)] };
    const spm = slots[Math.floor((t - p.midnight) / SLOT)].baseSteps / 15;
    return { t, value: Math.round(clamp(ctx.person.restingHr + 14 + Math.min(45, spm * 0.35) + gauss(r, 0, 4), 45, 150)) };
  });
}

/** Samples at the night's own cadence (from its start), kept when they fall on this local day. */
function duringSleep(ctx: Ctx, name: string, day: number, stepMs: number, value: (sl: Sleep, stage: Stage, r: Rng) => number): Raw[] {
  const p = plan(ctx, day),
    out: Raw[] = [];
  for (const [i, sleep] of nightsOf(ctx, day).entries()) {
    const r = rngFor(ctx.seed, name, day + i);
    for (const t of every(sleep.start, sleep.end, stepMs)) {
      const v = value(sleep, stageAt([sleep], t)!.stage, r); // draw for every sample so both days see the same values
      if (inside(t, dayWindow(p))) out.push({ t, value: v });
    }
  }
  return out;
}

function glucoseDay(ctx: Ctx, day: number): Raw[] {
  const p = plan(ctx, day),
    r = rngFor(ctx.seed, 'glucose', day);
  let drift = 0;
  return every(p.midnight, p.midnight + DAY_MS, SLOT).map((t) => {
    drift = 0.8 * drift + gauss(r, 0, 0.12);
    // Gamma-shaped post-meal excursion peaking ~45 min after eating, sized by the meal's carbs.
    const spikes = sum(
      p.meals.map((m) => {
        const x = (t - m.time) / (45 * MIN);
        return x > 0 ? (m.carbs / 30) * x * Math.exp(1 - x) : 0;
      }),
    );
    return { t, value: round(clamp(ctx.person.glucoseBase + drift + spikes, 3.9, 10), 1) };
  });
}

/**
 * Other resources: [low, high, local hours, interval seconds (-1: the value's minutes), chance per reading, integer].
 * Unlisted ones get a reading every waking hour.
 */
type Generic = [number, number, number[], number, number, boolean?];
const WAKING = [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20];
const GENERIC: Record<string, Generic> = {
  caffeine: [0.06, 0.2, [8, 13], 0, 1],
  cholesterol: [4, 5.8, [8], 0, 0.1],
  electrocardiogram_voltage: [-0.3, 1.2, [9], 0, 0.1],
  ige: [0.1, 3, [9], 0, 0.05],
  igg: [0.1, 3, [9], 0, 0.05],
  mindfulness_minutes: [5, 15, [21], -1, 0.5, true],
  stress_level: [10, 70, WAKING, 0, 1, true],
  vo2_max: [38, 48, [8], 0, 1],
  water: [200, 500, [8, 10, 12, 15, 18, 20], 0, 1, true],
  afib_burden: [0, 2, [0], 86_400, 1],
  basal_body_temperature: [36.2, 36.8, [7], 0, 1],
  body_temperature: [36.3, 37.1, [8, 14, 20], 60, 1],
  carbohydrates: [20, 90, [8, 13, 19], 0, 1],
  daylight_exposure: [5, 40, [9, 12, 16], -1, 1, true],
  fall: [1, 1, [15], 0, 0.02],
  forced_expiratory_volume_1: [2.8, 3.8, [9], 0, 1],
  forced_vital_capacity: [3.8, 4.8, [9], 0, 1],
  handwashing: [1, 1, [8, 12, 13, 18, 19], 20, 1],
  heart_rate_alert: [120, 140, [15], 600, 0.03, true],
  heart_rate_recovery_one_minute: [15, 35, [18], 0, 0.4, true],
  inhaler_usage: [1, 2, [9, 21], 0, 0.2, true],
  insulin_injection: [2, 10, [8, 13, 19], 0, 1, true],
  peak_expiratory_flow_rate: [400, 550, [9], 0, 1, true],
  sleep_apnea_alert: [1, 1, [3], 3600, 0.02],
  sleep_breathing_disturbance: [0, 5, [2], 3600, 1, true],
  stand_duration: [1, 10, WAKING, 3600, 1, true],
  stand_hour: [1, 1, WAKING, 3600, 0.75],
  uv_exposure: [0, 6, [11, 14], 1800, 1, true],
  waist_circumference: [78, 95, [7], 0, 0.15],
  wheelchair_push: [0, 0, [], 0, 0],
  workout_swimming_stroke: [0, 0, [], 0, 0],
  note: [0, 0, [], 0, 0], // no wheelchair, no swims, no text notes
};
function genericDay(ctx: Ctx, name: string, day: number): Raw[] {
  const interval = timeseriesResource(name)?.interval ?? false;
  const [lo, hi, hours, seconds, chance, integer] = GENERIC[name] ?? [1, 10, WAKING, interval ? 60 : 0, 1];
  const p = plan(ctx, day),
    r = rngFor(ctx.seed, name, day);
  return hours.flatMap((h) => {
    const jitter = seconds >= 3600 ? 0 : uniform(r, 0, 40) * MIN; // hour-long (or day-long) intervals stay on the hour
    const t = toSecond(p.midnight + h * 3600_000 + jitter),
      v = integer ? Math.round(uniform(r, lo, hi)) : round(uniform(r, lo, hi), 2);
    if (r() >= chance) return [];
    const length = seconds < 0 ? v * 60 : seconds || (interval ? 60 : 0);
    return [{ t, end: interval ? t + length * 1000 : undefined, value: v }];
  });
}

function rawSamples(ctx: Ctx, name: string, day: number): Raw[] {
  const p = plan(ctx, day),
    w = p.workout,
    b = p.body;
  const slotSeries = (f: (s: Slot) => number) => movement(ctx, day).map((s) => ({ t: s.start, end: s.end, value: f(s) }));
  switch (name) {
    case 'heartrate':
      return heartrateDay(ctx, day);
    case 'glucose':
      return glucoseDay(ctx, day);
    case 'steps':
      return slotSeries((s) => s.steps);
    case 'distance':
      return slotSeries((s) => s.distance);
    case 'calories_active':
      return slotSeries((s) => s.active);
    case 'calories_basal':
      return slotSeries((s) => s.basal);
    case 'floors_climbed':
      return slotSeries((s) => s.floors);
    case 'hrv':
      return duringSleep(ctx, name, day, 5 * MIN, (sl, st, r) => round(clamp(gauss(r, sl.hrv + STAGE_HRV[st], 7), 10, 150), 1));
    case 'respiratory_rate':
      return duringSleep(ctx, name, day, 5 * MIN, (sl, st, r) => round(gauss(r, sl.respiratoryRate + (st === 3 ? 0.8 : 0), 0.5), 1));
    case 'blood_oxygen':
      return duringSleep(ctx, name, day, 60 * MIN, (sl, _st, r) => round(clamp(gauss(r, sl.spo2, 0.8), 92, 100), 1));
    case 'hypnogram':
      return nightsOf(ctx, day)
        .flatMap((sl) => sl.stages)
        .filter((s) => inside(s.start, dayWindow(p)))
        .map((s) => ({ t: s.start, end: s.end, value: s.stage }));
    case 'body_temperature_delta':
      return nightsOf(ctx, day)
        .filter((sl) => inside(sl.start, dayWindow(p)))
        .map((sl) => ({ t: sl.start, end: sl.end, value: sl.temperatureDelta }));
    case 'weight':
      return b ? [{ t: b.time, value: b.weight }] : [];
    case 'fat':
      return b ? [{ t: b.time, value: b.fatPct }] : [];
    case 'body_mass_index':
      return b ? [{ t: b.time, value: round(b.weight / (ctx.person.heightCm / 100) ** 2, 1) }] : [];
    case 'lean_body_mass':
      return b ? [{ t: b.time, value: round(b.weight * (1 - b.fatPct / 100), 1) }] : [];
    case 'workout_distance':
      return w ? [{ t: w.start, end: w.end, value: round(w.distance, 1) }] : [];
    case 'workout_duration':
      return w ? [{ t: w.start, end: w.end, value: round((w.end - w.start) / MIN, 1) }] : [];
    case 'blood_pressure': {
      const r = rngFor(ctx.seed, name, day);
      return [8, 20].map((h) => ({
        t: toSecond(p.midnight + (h * 60 + uniform(r, 0, 40)) * MIN),
        systolic: Math.round(uniform(r, 108, 132)),
        diastolic: Math.round(uniform(r, 68, 86)),
      }));
    }
    default:
      return genericDay(ctx, name, day);
  }
}

// ---- Summaries ----------------------------------------------------------------------------------------------

const utcMidnightOf = (date: string) => `${date}T00:00:00+00:00`; // the deprecated `date` field: calendar date at UTC 00:00

function activity(ctx: Ctx, day: number): SummaryInput[] {
  const p = plan(ctx, day),
    slots = movement(ctx, day).filter((s) => s.end <= ctx.until); // an unfinished day: what was recorded so far
  if (!slots.length) return [];
  const hr = heartrateDay(ctx, day)
    .filter((x) => x.t < ctx.until)
    .map((x) => x.value as number);
  let low = 0,
    medium = 0,
    high = 0;
  for (const s of slots) {
    if (p.workout?.sport.slug === 'walking') medium += s.workoutMin;
    else high += s.workoutMin;
    const rest = SLOT / MIN - s.workoutMin;
    if (s.baseSteps / 15 >= 60) medium += rest;
    else low += Math.min(rest, s.baseSteps / 70);
  }
  const distance = round(sum(slots.map((s) => s.distance)), 1),
    active = sum(slots.map((s) => s.active));
  const fields = {
    date: utcMidnightOf(p.date),
    calendar_date: p.date,
    timezone_offset: ctx.tz,
    steps: sum(slots.map((s) => s.steps)),
    calories_active: round(active, 1),
    calories_total: round(active + sum(slots.map((s) => s.basal)), 1),
    distance,
    daily_movement: distance,
    low: Math.round(low),
    medium: Math.round(medium),
    high: Math.round(high),
    floors_climbed: sum(slots.map((s) => s.floors)),
    wheelchair_use: false,
    heart_rate: hr.length
      ? { avg_bpm: Math.round(sum(hr) / hr.length), min_bpm: Math.min(...hr), max_bpm: Math.max(...hr), resting_bpm: ctx.person.restingHr }
      : null,
  };
  return [{ resource: 'activity', source_key: p.date, calendar_date: p.date, time: isoUtc(p.midnight), fields }];
}

function sleepSummary(ctx: Ctx, day: number): SummaryInput[] {
  const p = plan(ctx, day),
    sl = p.sleep;
  if (sl.end > ctx.until) return []; // not over yet
  const secs = (stage: Stage) => sum(sl.stages.filter((s) => s.stage === stage).map((s) => (s.end - s.start) / 1000));
  const [deep, light, rem, awake] = [secs(1), secs(2), secs(3), secs(4)],
    total = deep + light + rem,
    duration = total + awake;
  const efficiency = (100 * total) / duration;
  return [
    {
      resource: 'sleep',
      source_key: `sleep:${p.date}`,
      calendar_date: p.date,
      time: isoUtc(sl.start),
      fields: {
        date: utcMidnightOf(p.date),
        calendar_date: p.date,
        bedtime_start: isoLocal(sl.start, ctx.tz),
        bedtime_stop: isoLocal(sl.end, ctx.tz),
        type: 'long_sleep',
        state: 'confirmed',
        timezone_offset: ctx.tz,
        duration,
        total,
        awake,
        light,
        rem,
        deep,
        score: Math.round(clamp(20 + 5 * (total / 3600) + 0.5 * (efficiency - 85) + ((deep + rem) / total) * 30, 1, 100)),
        hr_lowest: sl.hrLowest,
        hr_average: sl.hrAverage,
        hr_resting: ctx.person.restingHr,
        efficiency: round(efficiency, 1),
        latency: sl.stages[0].stage === 4 ? (sl.stages[0].end - sl.stages[0].start) / 1000 : 0,
        temperature_delta: sl.temperatureDelta,
        average_hrv: sl.hrv,
        respiratory_rate: sl.respiratoryRate,
      },
    },
  ];
}

function daySummaries(ctx: Ctx, resource: string, day: number): SummaryInput[] {
  const p = plan(ctx, day),
    w = p.workout;
  switch (resource) {
    case 'activity':
      return activity(ctx, day);
    case 'sleep':
      return sleepSummary(ctx, day);
    case 'workouts':
      return w && w.end <= ctx.until
        ? [
            {
              resource: 'workouts',
              source_key: w.id,
              calendar_date: p.date,
              time: isoUtc(w.start),
              fields: workoutFields(ctx, p, w, workoutStream(ctx, day, w)),
            },
          ]
        : [];
    case 'body': {
      const b = p.body;
      if (!b || b.time >= ctx.until) return [];
      const fields = {
        date: utcMidnightOf(p.date),
        calendar_date: p.date,
        weight: b.weight,
        fat: b.fatPct,
        body_mass_index: round(b.weight / (ctx.person.heightCm / 100) ** 2, 1),
        lean_body_mass_kilogram: round(b.weight * (1 - b.fatPct / 100), 1),
      };
      return [{ resource: 'body', source_key: p.date, calendar_date: p.date, time: isoUtc(b.time), fields }];
    }
    case 'meal':
      return p.meals
        .filter((m) => m.logged && m.time < ctx.until)
        .map((m) => ({
          resource: 'meal',
          source_key: m.key,
          calendar_date: p.date,
          time: isoUtc(m.time),
          fields: {
            priority_id: 0,
            source_id: 0,
            provider_id: m.key,
            timestamp: isoLocal(m.time, ctx.tz),
            calendar_date: p.date,
            name: m.name,
            energy: { unit: 'kcal', value: m.kcal },
            macros: {
              carbs: m.carbs,
              protein: m.protein,
              fats: { total: m.fat, saturated: round(m.fat * 0.35, 1) },
              fibre: round(m.carbs * 0.1, 1),
              sugar: round(m.carbs * 0.3, 1),
            },
          },
        }));
    default:
      return [];
  }
}

// ---- Entry point --------------------------------------------------------------------------------------------

export function generateDemoData(req: DemoRequest): ProviderData {
  const until = req.until === undefined ? Infinity : Date.parse(req.until);
  if (Number.isNaN(until)) throw new Error(`invalid until: ${req.until}`);
  const ctx: Ctx = {
    seed: req.seed,
    provider: req.provider,
    tz: req.timezoneOffsetSeconds,
    until,
    person: personFor(req.seed),
    plans: new Map(),
    workoutHr: new Map(),
  };
  const out: ProviderData = { source_type: DEMO_SOURCE_TYPES[req.provider] ?? 'unknown', summaries: [], samples: [], workout_streams: [] };
  const first = dayNumber(req.startDate),
    last = dayNumber(req.endDate);
  const unit = timeseriesResource(req.resource)?.unit;
  if (req.resource === 'profile') {
    // Reported on the last requested day that has begun by `until`.
    const me = ctx.person,
      lastDay = Math.min(last, Math.floor((until - 1 + ctx.tz * 1000) / DAY_MS));
    out.summaries.push({
      resource: 'profile',
      source_key: 'profile',
      calendar_date: dateOf(lastDay),
      time: isoUtc(lastDay * DAY_MS - ctx.tz * 1000),
      fields: { height: me.heightCm, birth_date: me.birthDate, gender: me.sex, sex: me.sex, wheelchair_use: false },
    });
    return out;
  }
  for (let day = first; day <= last && day * DAY_MS - ctx.tz * 1000 < until; day++) {
    if (isSummaryResource(req.resource)) out.summaries.push(...daySummaries(ctx, req.resource, day));
    else if (req.resource === 'workout_stream') {
      const w = plan(ctx, day).workout;
      if (w && w.end <= until) out.workout_streams.push({ workout_source_key: w.id, stream: workoutStream(ctx, day, w) });
    } else if (unit !== undefined) {
      for (const x of rawSamples(ctx, req.resource, day)) {
        if (x.t >= until || (x.end !== undefined && x.end > until)) continue; // an interval still in progress is not recorded yet
        const timestamp = isoUtc(x.t),
          sample: SampleInput = { resource: req.resource, timestamp, unit, type: null, timezone_offset: ctx.tz };
        if (x.end !== undefined) [sample.start, sample.end] = [timestamp, isoUtc(x.end)];
        if (x.value !== undefined) sample.value = x.value;
        else [sample.systolic, sample.diastolic] = [x.systolic, x.diastolic];
        out.samples.push(sample);
      }
    }
  }
  return out;
}
