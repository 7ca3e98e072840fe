/**
 * The demo world behind demo-data.ts: a seeded person and, per day, a plan (sleep and its stages, a workout and
 * its 5-second stream, meals, a body reading, the day's movement in 15-minute slots) that every resource reads, so
 * the resources agree with each other. Pure and deterministic, as demo-data.ts says.
 */
import { createHash } from 'node:crypto';
import { DAY_MS, isoLocal } from '../platform/time';
import type { WorkoutStream } from './model';

export const MIN = 60_000;
export const SLOT = 15 * MIN,
  SLOTS_PER_DAY = 96;
/** Age and trends are computed against a fixed year, not the clock, so output never changes over time. */
const REFERENCE_YEAR = 2026;

// ---- Deterministic randomness -------------------------------------------------------------------------------

export type Rng = () => number;
const digest = (parts: (string | number)[]) => createHash('sha256').update(parts.join('\u0000')).digest();
/** sfc32 seeded with 128 bits of sha256(parts). */
export function rngFor(...parts: (string | number)[]): Rng {
  const h = digest(parts);
  let a = h.readUInt32LE(0),
    b = h.readUInt32LE(4),
    c = h.readUInt32LE(8),
    d = h.readUInt32LE(12);
  return () => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (((c << 21) | (c >>> 11)) + t) | 0;
    return (t >>> 0) / 4294967296;
  };
}
const hexId = (...parts: (string | number)[]) => digest(parts).toString('hex').slice(0, 24);
export const uniform = (r: Rng, lo: number, hi: number) => lo + (hi - lo) * r();
export const gauss = (r: Rng, mean: number, sd: number) => mean + sd * Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
export const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));
export const round = (x: number, digits = 0) => Math.round(x * 10 ** digits) / 10 ** digits;
export const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

// ---- Calendar -----------------------------------------------------------------------------------------------

export function dayNumber(date: string): number {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date) || Number.isNaN(Date.parse(`${date}T00:00:00Z`))) throw new Error(`invalid date: ${date}`);
  return Date.parse(`${date}T00:00:00Z`) / DAY_MS;
}
export const dateOf = (day: number) => new Date(day * DAY_MS).toISOString().slice(0, 10);
const pad = (n: number, width = 2) => String(n).padStart(width, '0');
const TWO_DIGITS = Array.from({ length: 60 }, (_, i) => pad(i));
const HOURS_MINUTES = Array.from({ length: 1440 }, (_, i) => `${pad(Math.floor(i / 60))}:${pad(i % 60)}`);
const datePrefixes = new Map<number, string>(); // a bounded memo of day number -> YYYY-MM-DD
/** Same output as Date#toISOString, several times faster (that call dominated 30 days of heart rate). */
export function isoUtc(ms: number): string {
  const day = Math.floor(ms / DAY_MS),
    rest = ms - day * DAY_MS;
  if (datePrefixes.size > 10_000) datePrefixes.clear();
  if (!datePrefixes.has(day)) datePrefixes.set(day, dateOf(day));
  const minute = Math.floor(rest / MIN),
    millis = rest % 1000;
  return `${datePrefixes.get(day)}T${HOURS_MINUTES[minute]}:${TWO_DIGITS[Math.floor(rest / 1000) % 60]}.${millis ? pad(millis, 3) : '000'}Z`;
}

// ---- The person and their days -------------------------------------------------------------------------------

const HOMES: [number, number][] = [
  [51.5072, -0.1276],
  [52.52, 13.405],
  [40.7128, -74.006],
  [48.8566, 2.3522],
  [37.7749, -122.4194],
];

type Person = ReturnType<typeof personFor>;
export function personFor(seed: string) {
  const r = rngFor(seed, 'person');
  const sex: 'female' | 'male' = r() < 0.5 ? 'female' : 'male';
  const birthYear = 1965 + Math.floor(r() * 36);
  const birthDate = `${birthYear}-${pad(1 + Math.floor(r() * 12))}-${pad(1 + Math.floor(r() * 28))}`;
  const age = REFERENCE_YEAR - birthYear;
  const heightCm = Math.round(gauss(r, sex === 'female' ? 165 : 178, 6));
  const weightKg = round(uniform(r, 20.5, 27.5) * (heightCm / 100) ** 2, 1);
  const bmr = 10 * weightKg + 6.25 * heightCm - 5 * age + (sex === 'male' ? 5 : -161); // Mifflin-St Jeor
  return {
    sex,
    birthDate,
    age,
    heightCm,
    weightKg,
    bmr,
    fatPct: uniform(r, sex === 'female' ? 24 : 14, sex === 'female' ? 32 : 24),
    restingHr: Math.round(uniform(r, 50, 66)),
    maxHr: Math.round(208 - 0.7 * age),
    hrv: uniform(r, 35, 70),
    stepLevel: uniform(r, 4500, 9000),
    bedtimeMin: uniform(r, 22 * 60, 23 * 60 + 45),
    sleepHours: uniform(r, 6.6, 8.2),
    glucoseBase: uniform(r, 4.6, 5.4),
    home: HOMES[Math.floor(r() * HOMES.length)],
  };
}

/** Hypnogram values: deep=1, light=2, rem=3, awake=4. */
export type Stage = 1 | 2 | 3 | 4;
interface StageSpan {
  start: number;
  end: number;
  stage: Stage;
}
export interface Sleep {
  start: number;
  end: number;
  stages: StageSpan[];
  hrLowest: number;
  hrAverage: number;
  hrv: number;
  respiratoryRate: number;
  temperatureDelta: number;
  spo2: number;
}
interface Sport {
  id: number;
  name: string;
  slug: string;
  speed: [number, number];
  met: number;
  cadence: number;
  hr: number;
  verb: string;
}
const SPORTS: Sport[] = [
  { id: 1, name: 'Running', slug: 'running', speed: [2.5, 3.4], met: 9.8, cadence: 168, hr: 0.75, verb: 'Run' },
  { id: 2, name: 'Cycling', slug: 'cycling', speed: [6, 8.5], met: 7.5, cadence: 88, hr: 0.65, verb: 'Ride' },
  { id: 3, name: 'Walking', slug: 'walking', speed: [1.25, 1.6], met: 3.8, cadence: 112, hr: 0.4, verb: 'Walk' },
];
interface Workout {
  id: string;
  sport: Sport;
  start: number;
  end: number;
  speed: number;
  distance: number;
  calories: number;
  steps: number;
  pauseAt: number;
  pauseS: number;
  watts: number;
}
interface Meal {
  key: string;
  time: number;
  name: string;
  kcal: number;
  carbs: number;
  protein: number;
  fat: number;
  logged: boolean;
}
interface DayPlan {
  day: number;
  date: string;
  midnight: number;
  sleep: Sleep;
  workout?: Workout;
  meals: Meal[];
  stepTarget: number;
  body?: { time: number; weight: number; fatPct: number };
}

export interface Ctx {
  seed: string;
  provider: string;
  tz: number;
  until: number;
  person: Person;
  plans: Map<number, DayPlan>;
  workoutHr: Map<number, number[]>;
}

export const inside = (t: number, s: { start: number; end: number }) => t >= s.start && t < s.end;
export const dayWindow = (p: DayPlan) => ({ start: p.midnight, end: p.midnight + DAY_MS });
export const toSecond = (ms: number) => Math.round(ms / 1000) * 1000;

/** Sleep cycles of ~90 min: deep sleep dominates early cycles, REM the late ones; spans tile [start, end) exactly. */
function buildStages(r: Rng, start: number, end: number): StageSpan[] {
  const spans: StageSpan[] = [];
  let t = start;
  const push = (stage: Stage, minutes: number) => {
    const e = Math.min(end, t + Math.round(minutes * 60) * 1000);
    if (e <= t) return;
    const last = spans[spans.length - 1];
    if (last && last.stage === stage) last.end = e;
    else spans.push({ start: t, end: e, stage });
    t = e;
  };
  push(4, uniform(r, 4, 22)); // falling asleep
  for (let cycle = 0; t < end - 10 * MIN; cycle++) {
    push(2, uniform(r, 15, 30));
    push(1, uniform(r, 30, 50) - cycle * 12);
    push(2, uniform(r, 8, 20));
    push(3, uniform(r, 8, 15) + cycle * 6);
    if (r() < 0.35) push(4, uniform(r, 1, 6));
  }
  push(4, (end - t) / MIN);
  return spans;
}

export function plan(ctx: Ctx, day: number): DayPlan {
  const cached = ctx.plans.get(day);
  if (cached) return cached;
  const { person: me, tz } = ctx;
  const r = rngFor(ctx.seed, 'plan', day);
  const midnight = day * DAY_MS - tz * 1000;
  // The night that ends on this day's morning (its calendar_date is this day).
  const start = toSecond(midnight - DAY_MS + gauss(r, me.bedtimeMin, 30) * MIN);
  const end = toSecond(start + clamp(gauss(r, me.sleepHours, 0.6), 5, 9.5) * 3600_000);
  const sleep: Sleep = {
    start,
    end,
    stages: buildStages(r, start, end),
    hrLowest: me.restingHr - Math.round(uniform(r, 2, 6)),
    hrAverage: me.restingHr + Math.round(uniform(r, 0, 5)),
    hrv: round(gauss(r, me.hrv, 6), 1),
    respiratoryRate: round(gauss(r, 14.5, 0.8), 1),
    temperatureDelta: round(gauss(r, 0, 0.25), 2),
    spo2: uniform(r, 95.5, 98),
  };
  let workout: Workout | undefined;
  if (r() < 0.4) {
    const sport = SPORTS[Math.floor(r() * SPORTS.length)];
    const begin = toSecond(r() < 0.35 ? end + uniform(r, 30, 75) * MIN : midnight + uniform(r, 17 * 60, 19.5 * 60) * MIN);
    const durationS = Math.round(uniform(r, 25, sport.slug === 'running' ? 55 : 75) * 60);
    const pauseS = sport.slug === 'cycling' || r() < 0.5 ? 0 : Math.round(uniform(r, 30, 120));
    const speed = uniform(r, ...sport.speed);
    const movingMin = (durationS - pauseS) / 60;
    workout = {
      id: hexId(ctx.seed, 'workout', day),
      sport,
      start: begin,
      end: begin + durationS * 1000,
      speed,
      distance: speed * movingMin * 60,
      calories: round(((sport.met * me.weightKg * movingMin) / 60) * uniform(r, 0.9, 1.1), 1),
      steps: sport.slug === 'cycling' ? 0 : Math.round(sport.cadence * movingMin),
      pauseAt: Math.round(uniform(r, 0.3, 0.7) * durationS),
      pauseS,
      watts: uniform(r, 140, 210),
    };
  }
  const meal = (n: number, name: string, time: number, kcal: number, logged: boolean): Meal => {
    const carbs = round((kcal * uniform(r, 0.4, 0.55)) / 4, 1),
      protein = round((kcal * uniform(r, 0.15, 0.25)) / 4, 1);
    return {
      key: `meal:${dateOf(day)}:${n}`,
      name,
      time: toSecond(time),
      kcal: round(kcal),
      carbs,
      protein,
      fat: round((kcal - 4 * carbs - 4 * protein) / 9, 1),
      logged,
    };
  };
  const meals = [
    meal(1, 'Breakfast', end + uniform(r, 20, 60) * MIN, uniform(r, 300, 550), r() < 0.6), // logged 2-3 meals a day
    meal(2, 'Lunch', midnight + uniform(r, 12 * 60, 13.5 * 60) * MIN, uniform(r, 500, 850), true),
    meal(3, 'Dinner', midnight + uniform(r, 18.5 * 60, 20.5 * 60) * MIN, uniform(r, 550, 950), true),
  ];
  const stepTarget = clamp(me.stepLevel * Math.exp(gauss(r, 0, 0.3)), 3000, Math.max(3000, 14_500 - (workout?.steps ?? 0))); // 3k-15k a day
  const weighsIn = r() < (ctx.provider === 'fitbit' ? 0.85 : 0.4); // a smart scale most mornings vs. now and then
  const body = weighsIn
    ? {
        time: toSecond(end + uniform(r, 5, 20) * MIN),
        weight: round(me.weightKg + 0.8 * Math.sin((2 * Math.PI * day) / 45) + gauss(r, 0, 0.25), 1),
        fatPct: round(me.fatPct + gauss(r, 0, 0.4), 1),
      }
    : undefined;
  const p: DayPlan = { day, date: dateOf(day), midnight, sleep, workout, meals, stepTarget, body };
  ctx.plans.set(day, p);
  return p;
}

/** The sleep stage at t, from the night ending this morning or the one starting this evening. */
export function stageAt(sleeps: Sleep[], t: number): { sleep: Sleep; stage: Stage } | undefined {
  for (const sleep of sleeps) if (inside(t, sleep)) return { sleep, stage: sleep.stages.find((s) => inside(t, s))!.stage };
  return undefined;
}
export const nightsOf = (ctx: Ctx, day: number) => [plan(ctx, day).sleep, plan(ctx, day + 1).sleep];

// ---- Movement: 15-minute slots shared by steps, distance, calories, floors and the activity summary -------------

export interface Slot {
  start: number;
  end: number;
  steps: number;
  baseSteps: number;
  distance: number;
  active: number;
  basal: number;
  floors: number;
  workoutMin: number;
}
/** Steps cluster around the commute and lunch; none while asleep. */
const dayShape = (h: number) => 0.35 + Math.exp(-(((h - 8.3) / 0.8) ** 2)) + 0.8 * Math.exp(-(((h - 12.7) / 0.8) ** 2)) + Math.exp(-(((h - 17.8) / 1.1) ** 2));

export function movement(ctx: Ctx, day: number): Slot[] {
  const p = plan(ctx, day),
    nights = nightsOf(ctx, day),
    me = ctx.person,
    w = p.workout;
  const r = rngFor(ctx.seed, 'movement', day);
  const weights = Array.from({ length: SLOTS_PER_DAY }, (_, i) => {
    const mid = p.midnight + i * SLOT + SLOT / 2;
    return stageAt(nights, mid) ? 0 : dayShape(i / 4) * (0.15 + 1.7 * r() ** 2);
  });
  const total = sum(weights) || 1,
    stride = me.heightCm * 0.0041,
    kcalPerStep = (0.04 * me.weightKg) / 70;
  let cumulative = 0;
  return weights.map((weight, i) => {
    const start = p.midnight + i * SLOT,
      end = start + SLOT;
    const before = Math.round(cumulative);
    const baseSteps = Math.round((cumulative += (p.stepTarget * weight) / total)) - before; // rounding keeps the day's total
    const overlap = w ? Math.max(0, Math.min(end, w.end) - Math.max(start, w.start)) : 0;
    const share = w ? overlap / (w.end - w.start) : 0;
    return {
      start,
      end,
      baseSteps,
      steps: baseSteps + Math.round((w?.steps ?? 0) * share),
      distance: round(baseSteps * stride + (w?.distance ?? 0) * share, 1),
      active: round(baseSteps * kcalPerStep + (w?.calories ?? 0) * share, 2),
      basal: round(me.bmr / SLOTS_PER_DAY, 2),
      floors: baseSteps > 200 && r() < 0.12 ? 1 + Math.floor(r() * 3) : 0,
      workoutMin: overlap / MIN,
    };
  });
}

// ---- Workout stream (5 s) and the summary computed from it ---------------------------------------------------

const streamLength = (w: Workout) => Math.floor((w.end - w.start) / 5000) + 1;
const isPaused = (w: Workout, i: number) => i * 5 >= w.pauseAt && i * 5 < w.pauseAt + w.pauseS;

/** The workout's heart rate every 5 s, on its own PRNG so the heartrate timeseries needn't build the whole stream. */
export function workoutHeartrate(ctx: Ctx, day: number, w: Workout): number[] {
  const cached = ctx.workoutHr.get(day);
  if (cached) return cached;
  const r = rngFor(ctx.seed, 'workout-hr', day),
    me = ctx.person,
    target = me.restingHr + (me.maxHr - me.restingHr) * w.sport.hr;
  let bpm = me.restingHr + 25,
    noise = 0;
  const hr = Array.from({ length: streamLength(w) }, (_, i) => {
    noise = 0.9 * noise + gauss(r, 0, 0.8);
    bpm += ((isPaused(w, i) ? target - 30 : target + i * 0.004) - bpm) * 0.04; // settles towards the effort, drifting up
    return Math.round(clamp(bpm + noise, 60, me.maxHr));
  });
  ctx.workoutHr.set(day, hr);
  return hr;
}

export function workoutStream(ctx: Ctx, day: number, w: Workout): WorkoutStream {
  const r = rngFor(ctx.seed, 'workout', day),
    me = ctx.person,
    n = streamLength(w);
  let drift = 0;
  const v = Array.from({ length: n }, (_, i) => {
    drift = 0.95 * drift + gauss(r, 0, 0.02);
    return isPaused(w, i) ? 0 : Math.max(0.3, w.speed * (1 + drift) * Math.min(1, (i * 5 + 30) / 120)); // warm-up ramp
  });
  const scale = w.distance / (sum(v.slice(1)) * 5); // make the stream's distance the planned one exactly
  const base = uniform(r, 20, 200),
    radius = w.distance / (2 * Math.PI);
  const s = {
    time: [] as number[],
    heartrate: workoutHeartrate(ctx, day, w),
    velocity_smooth: [] as number[],
    distance: [] as number[],
    altitude: [] as number[],
    cadence: [] as number[],
    lat: [] as number[],
    lng: [] as number[],
    power: [] as (number | null)[],
  };
  let dist = 0;
  for (let i = 0; i < n; i++) {
    const speed = v[i] * scale,
      angle = (2 * Math.PI * (dist += i > 0 ? speed * 5 : 0)) / w.distance; // one smooth loop back home
    const lat = me.home[0] + (radius * Math.sin(angle)) / 111_320;
    s.time.push(Math.round(w.start / 1000) + i * 5);
    s.velocity_smooth.push(round(speed, 2));
    s.distance.push(round(dist, 1));
    s.altitude.push(round(base + 12 * Math.sin(2 * angle) + 3 * Math.sin(dist / 150), 1));
    s.cadence.push(isPaused(w, i) ? 0 : Math.round(w.sport.cadence + gauss(r, 0, 3)));
    s.lat.push(round(lat, 6));
    s.lng.push(round(me.home[1] + (radius * (1 - Math.cos(angle))) / (111_320 * Math.cos((lat * Math.PI) / 180)), 6));
    s.power.push(w.sport.slug !== 'cycling' ? null : isPaused(w, i) ? 0 : Math.round(w.watts * (speed / w.speed) ** 2 * (1 + gauss(r, 0, 0.06))));
  }
  return s;
}

export function workoutFields(ctx: Ctx, p: DayPlan, w: Workout, s: WorkoutStream): Record<string, unknown> {
  const hr = s.heartrate as number[],
    alt = s.altitude as number[],
    speed = s.velocity_smooth as number[],
    dist = s.distance as number[];
  const zones = [0, 0, 0, 0, 0, 0];
  for (const bpm of hr) zones[clamp(Math.floor((bpm / ctx.person.maxHr - 0.4) * 10), 0, 5)] += 5;
  const movingTime = Math.round((w.end - w.start) / 1000) - w.pauseS,
    distance = dist[dist.length - 1];
  const watts = s.power!.filter((x): x is number => x !== null),
    avgWatts = watts.length ? Math.round(sum(watts) / watts.length) : null;
  const startHour = (w.start - p.midnight) / 3600_000;
  return {
    title: `${startHour < 12 ? 'Morning' : startHour < 17 ? 'Afternoon' : 'Evening'} ${w.sport.verb}`,
    timezone_offset: ctx.tz,
    calendar_date: p.date,
    time_start: isoLocal(w.start, ctx.tz),
    time_end: isoLocal(w.end, ctx.tz),
    sport: { id: w.sport.id, name: w.sport.name, slug: w.sport.slug },
    provider_id: w.id,
    average_hr: Math.round(sum(hr) / hr.length),
    max_hr: Math.max(...hr),
    hr_zones: zones,
    calories: w.calories,
    distance,
    moving_time: movingTime,
    average_speed: round(distance / movingTime, 2),
    max_speed: Math.max(...speed),
    steps: w.steps || null,
    total_elevation_gain: round(sum(alt.slice(1).map((a, i) => Math.max(0, a - alt[i]))), 1),
    elev_high: Math.max(...alt),
    elev_low: Math.min(...alt),
    average_watts: avgWatts,
    device_watts: avgWatts,
    max_watts: watts.length ? Math.max(...watts) : null,
    weighted_average_watts: watts.length ? Math.round((sum(watts.map((x) => x ** 4)) / watts.length) ** 0.25) : null, // normalised-power style
  };
}
