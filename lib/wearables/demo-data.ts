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
import { createHash } from 'node:crypto';
import type { ProviderData, SampleInput, SummaryInput, WorkoutStream } from './model';
import { isSummaryResource, timeseriesResource } from './resources';

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

const MIN = 60_000, DAY = 86_400_000;
const SLOT = 15 * MIN, SLOTS_PER_DAY = 96;
/** Age and trends are computed against a fixed year, not the clock, so output never changes over time. */
const REFERENCE_YEAR = 2026;

// ---- Deterministic randomness -------------------------------------------------------------------------------

type Rng = () => number;
const digest = (parts: (string | number)[]) => createHash('sha256').update(parts.join('\u0000')).digest();
/** sfc32 seeded with 128 bits of sha256(parts). */
function rngFor(...parts: (string | number)[]): Rng {
  const h = digest(parts);
  let a = h.readUInt32LE(0), b = h.readUInt32LE(4), c = h.readUInt32LE(8), d = h.readUInt32LE(12);
  return () => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = ((c << 21) | (c >>> 11)) + t | 0;
    return (t >>> 0) / 4294967296;
  };
}
const hexId = (...parts: (string | number)[]) => digest(parts).toString('hex').slice(0, 24);
const uniform = (r: Rng, lo: number, hi: number) => lo + (hi - lo) * r();
const gauss = (r: Rng, mean: number, sd: number) => mean + sd * Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));
const round = (x: number, digits = 0) => Math.round(x * 10 ** digits) / 10 ** digits;
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

// ---- Calendar -----------------------------------------------------------------------------------------------

function dayNumber(date: string): number {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date) || Number.isNaN(Date.parse(`${date}T00:00:00Z`))) throw new Error(`invalid date: ${date}`);
  return Date.parse(`${date}T00:00:00Z`) / DAY;
}
const dateOf = (day: number) => new Date(day * DAY).toISOString().slice(0, 10);
const pad = (n: number, width = 2) => String(n).padStart(width, '0');
const TWO_DIGITS = Array.from({ length: 60 }, (_, i) => pad(i));
const HOURS_MINUTES = Array.from({ length: 1440 }, (_, i) => `${pad(Math.floor(i / 60))}:${pad(i % 60)}`);
const datePrefixes = new Map<number, string>(); // a bounded memo of day number -> YYYY-MM-DD
/** Same output as Date#toISOString, several times faster (that call dominated 30 days of heart rate). */
function isoUtc(ms: number): string {
  const day = Math.floor(ms / DAY), rest = ms - day * DAY;
  if (datePrefixes.size > 10_000) datePrefixes.clear();
  if (!datePrefixes.has(day)) datePrefixes.set(day, dateOf(day));
  const minute = Math.floor(rest / MIN), millis = rest % 1000;
  return `${datePrefixes.get(day)}T${HOURS_MINUTES[minute]}:${TWO_DIGITS[Math.floor(rest / 1000) % 60]}.${millis ? pad(millis, 3) : '000'}Z`;
}
/** The instant as local wall-clock time with the user's offset, e.g. 2026-01-14T23:05:00+01:00. */
function isoLocal(ms: number, offsetS: number): string {
  const abs = Math.abs(offsetS);
  return `${new Date(ms + offsetS * 1000).toISOString().slice(0, 19)}${offsetS < 0 ? '-' : '+'}${pad(Math.floor(abs / 3600))}:${pad(Math.floor((abs % 3600) / 60))}`;
}

// ---- The person and their days -------------------------------------------------------------------------------

const HOMES: [number, number][] = [[51.5072, -0.1276], [52.52, 13.405], [40.7128, -74.006], [48.8566, 2.3522], [37.7749, -122.4194]];

type Person = ReturnType<typeof personFor>;
function personFor(seed: string) {
  const r = rngFor(seed, 'person');
  const sex: 'female' | 'male' = r() < 0.5 ? 'female' : 'male';
  const birthYear = 1965 + Math.floor(r() * 36);
  const birthDate = `${birthYear}-${pad(1 + Math.floor(r() * 12))}-${pad(1 + Math.floor(r() * 28))}`;
  const age = REFERENCE_YEAR - birthYear;
  const heightCm = Math.round(gauss(r, sex === 'female' ? 165 : 178, 6));
  const weightKg = round(uniform(r, 20.5, 27.5) * (heightCm / 100) ** 2, 1);
  const bmr = 10 * weightKg + 6.25 * heightCm - 5 * age + (sex === 'male' ? 5 : -161); // Mifflin-St Jeor
  return {
    sex, birthDate, age, heightCm, weightKg, bmr, fatPct: uniform(r, sex === 'female' ? 24 : 14, sex === 'female' ? 32 : 24),
    restingHr: Math.round(uniform(r, 50, 66)), maxHr: Math.round(208 - 0.7 * age), hrv: uniform(r, 35, 70),
    stepLevel: uniform(r, 4500, 9000), bedtimeMin: uniform(r, 22 * 60, 23 * 60 + 45), sleepHours: uniform(r, 6.6, 8.2),
    glucoseBase: uniform(r, 4.6, 5.4), home: HOMES[Math.floor(r() * HOMES.length)],
  };
}

/** Hypnogram values: deep=1, light=2, rem=3, awake=4. */
type Stage = 1 | 2 | 3 | 4;
interface StageSpan { start: number; end: number; stage: Stage }
interface Sleep { start: number; end: number; stages: StageSpan[]; hrLowest: number; hrAverage: number; hrv: number; respiratoryRate: number; temperatureDelta: number; spo2: number }
interface Sport { id: number; name: string; slug: string; speed: [number, number]; met: number; cadence: number; hr: number; verb: string }
const SPORTS: Sport[] = [
  { id: 1, name: 'Running', slug: 'running', speed: [2.5, 3.4], met: 9.8, cadence: 168, hr: 0.75, verb: 'Run' },
  { id: 2, name: 'Cycling', slug: 'cycling', speed: [6, 8.5], met: 7.5, cadence: 88, hr: 0.65, verb: 'Ride' },
  { id: 3, name: 'Walking', slug: 'walking', speed: [1.25, 1.6], met: 3.8, cadence: 112, hr: 0.4, verb: 'Walk' },
];
interface Workout { id: string; sport: Sport; start: number; end: number; speed: number; distance: number; calories: number; steps: number; pauseAt: number; pauseS: number; watts: number }
interface Meal { key: string; time: number; name: string; kcal: number; carbs: number; protein: number; fat: number; logged: boolean }
interface DayPlan {
  day: number; date: string; midnight: number; sleep: Sleep; workout?: Workout; meals: Meal[]; stepTarget: number;
  body?: { time: number; weight: number; fatPct: number };
}

interface Ctx { seed: string; provider: string; tz: number; until: number; person: Person; plans: Map<number, DayPlan>; workoutHr: Map<number, number[]> }

const inside = (t: number, s: { start: number; end: number }) => t >= s.start && t < s.end;
const dayWindow = (p: DayPlan) => ({ start: p.midnight, end: p.midnight + DAY });
const toSecond = (ms: number) => Math.round(ms / 1000) * 1000;

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

function plan(ctx: Ctx, day: number): DayPlan {
  const cached = ctx.plans.get(day);
  if (cached) return cached;
  const { person: me, tz } = ctx;
  const r = rngFor(ctx.seed, 'plan', day);
  const midnight = day * DAY - tz * 1000;
  // The night that ends on this day's morning (its calendar_date is this day).
  const start = toSecond(midnight - DAY + gauss(r, me.bedtimeMin, 30) * MIN);
  const end = toSecond(start + clamp(gauss(r, me.sleepHours, 0.6), 5, 9.5) * 3600_000);
  const sleep: Sleep = {
    start, end, stages: buildStages(r, start, end), hrLowest: me.restingHr - Math.round(uniform(r, 2, 6)),
    hrAverage: me.restingHr + Math.round(uniform(r, 0, 5)), hrv: round(gauss(r, me.hrv, 6), 1),
    respiratoryRate: round(gauss(r, 14.5, 0.8), 1), temperatureDelta: round(gauss(r, 0, 0.25), 2), spo2: uniform(r, 95.5, 98),
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
      id: hexId(ctx.seed, 'workout', day), sport, start: begin, end: begin + durationS * 1000, speed, distance: speed * movingMin * 60,
      calories: round((sport.met * me.weightKg * movingMin) / 60 * uniform(r, 0.9, 1.1), 1),
      steps: sport.slug === 'cycling' ? 0 : Math.round(sport.cadence * movingMin), pauseAt: Math.round(uniform(r, 0.3, 0.7) * durationS),
      pauseS, watts: uniform(r, 140, 210),
    };
  }
  const meal = (n: number, name: string, time: number, kcal: number, logged: boolean): Meal => {
    const carbs = round((kcal * uniform(r, 0.4, 0.55)) / 4, 1), protein = round((kcal * uniform(r, 0.15, 0.25)) / 4, 1);
    return { key: `meal:${dateOf(day)}:${n}`, name, time: toSecond(time), kcal: round(kcal), carbs, protein, fat: round((kcal - 4 * carbs - 4 * protein) / 9, 1), logged };
  };
  const meals = [
    meal(1, 'Breakfast', end + uniform(r, 20, 60) * MIN, uniform(r, 300, 550), r() < 0.6), // logged 2-3 meals a day
    meal(2, 'Lunch', midnight + uniform(r, 12 * 60, 13.5 * 60) * MIN, uniform(r, 500, 850), true),
    meal(3, 'Dinner', midnight + uniform(r, 18.5 * 60, 20.5 * 60) * MIN, uniform(r, 550, 950), true),
  ];
  const stepTarget = clamp(me.stepLevel * Math.exp(gauss(r, 0, 0.3)), 3000, Math.max(3000, 14_500 - (workout?.steps ?? 0))); // 3k-15k a day
  const weighsIn = r() < (ctx.provider === 'fitbit' ? 0.85 : 0.4); // a smart scale most mornings vs. now and then
  const body = weighsIn
    ? { time: toSecond(end + uniform(r, 5, 20) * MIN), weight: round(me.weightKg + 0.8 * Math.sin((2 * Math.PI * day) / 45) + gauss(r, 0, 0.25), 1), fatPct: round(me.fatPct + gauss(r, 0, 0.4), 1) }
    : undefined;
  const p: DayPlan = { day, date: dateOf(day), midnight, sleep, workout, meals, stepTarget, body };
  ctx.plans.set(day, p);
  return p;
}

/** The sleep stage at t, from the night ending this morning or the one starting this evening. */
function stageAt(sleeps: Sleep[], t: number): { sleep: Sleep; stage: Stage } | undefined {
  for (const sleep of sleeps) if (inside(t, sleep)) return { sleep, stage: sleep.stages.find((s) => inside(t, s))!.stage };
  return undefined;
}
const nightsOf = (ctx: Ctx, day: number) => [plan(ctx, day).sleep, plan(ctx, day + 1).sleep];

// ---- Movement: 15-minute slots shared by steps, distance, calories, floors and the activity summary -------------

interface Slot { start: number; end: number; steps: number; baseSteps: number; distance: number; active: number; basal: number; floors: number; workoutMin: number }
/** Steps cluster around the commute and lunch; none while asleep. */
const dayShape = (h: number) => 0.35 + Math.exp(-(((h - 8.3) / 0.8) ** 2)) + 0.8 * Math.exp(-(((h - 12.7) / 0.8) ** 2)) + Math.exp(-(((h - 17.8) / 1.1) ** 2));

function movement(ctx: Ctx, day: number): Slot[] {
  const p = plan(ctx, day), nights = nightsOf(ctx, day), me = ctx.person, w = p.workout;
  const r = rngFor(ctx.seed, 'movement', day);
  const weights = Array.from({ length: SLOTS_PER_DAY }, (_, i) => {
    const mid = p.midnight + i * SLOT + SLOT / 2;
    return stageAt(nights, mid) ? 0 : dayShape(i / 4) * (0.15 + 1.7 * r() ** 2);
  });
  const total = sum(weights) || 1, stride = me.heightCm * 0.0041, kcalPerStep = (0.04 * me.weightKg) / 70;
  let cumulative = 0;
  return weights.map((weight, i) => {
    const start = p.midnight + i * SLOT, end = start + SLOT;
    const before = Math.round(cumulative);
    const baseSteps = Math.round((cumulative += (p.stepTarget * weight) / total)) - before; // rounding keeps the day's total
    const overlap = w ? Math.max(0, Math.min(end, w.end) - Math.max(start, w.start)) : 0;
    const share = w ? overlap / (w.end - w.start) : 0;
    return {
      start, end, baseSteps, steps: baseSteps + Math.round((w?.steps ?? 0) * share),
      distance: round(baseSteps * stride + (w?.distance ?? 0) * share, 1), active: round(baseSteps * kcalPerStep + (w?.calories ?? 0) * share, 2),
      basal: round(me.bmr / SLOTS_PER_DAY, 2), floors: baseSteps > 200 && r() < 0.12 ? 1 + Math.floor(r() * 3) : 0, workoutMin: overlap / MIN,
    };
  });
}

// ---- Workout stream (5 s) and the summary computed from it ---------------------------------------------------

const streamLength = (w: Workout) => Math.floor((w.end - w.start) / 5000) + 1;
const isPaused = (w: Workout, i: number) => i * 5 >= w.pauseAt && i * 5 < w.pauseAt + w.pauseS;

/** The workout's heart rate every 5 s, on its own PRNG so the heartrate timeseries needn't build the whole stream. */
function workoutHeartrate(ctx: Ctx, day: number, w: Workout): number[] {
  const cached = ctx.workoutHr.get(day);
  if (cached) return cached;
  const r = rngFor(ctx.seed, 'workout-hr', day), me = ctx.person, target = me.restingHr + (me.maxHr - me.restingHr) * w.sport.hr;
  let bpm = me.restingHr + 25, noise = 0;
  const hr = Array.from({ length: streamLength(w) }, (_, i) => {
    noise = 0.9 * noise + gauss(r, 0, 0.8);
    bpm += ((isPaused(w, i) ? target - 30 : target + i * 0.004) - bpm) * 0.04; // settles towards the effort, drifting up
    return Math.round(clamp(bpm + noise, 60, me.maxHr));
  });
  ctx.workoutHr.set(day, hr);
  return hr;
}

function workoutStream(ctx: Ctx, day: number, w: Workout): WorkoutStream {
  const r = rngFor(ctx.seed, 'workout', day), me = ctx.person, n = streamLength(w);
  let drift = 0;
  const v = Array.from({ length: n }, (_, i) => {
    drift = 0.95 * drift + gauss(r, 0, 0.02);
    return isPaused(w, i) ? 0 : Math.max(0.3, w.speed * (1 + drift) * Math.min(1, (i * 5 + 30) / 120)); // warm-up ramp
  });
  const scale = w.distance / (sum(v.slice(1)) * 5); // make the stream's distance the planned one exactly
  const base = uniform(r, 20, 200), radius = w.distance / (2 * Math.PI);
  const s = { time: [] as number[], heartrate: workoutHeartrate(ctx, day, w), velocity_smooth: [] as number[], distance: [] as number[], altitude: [] as number[], cadence: [] as number[], lat: [] as number[], lng: [] as number[], power: [] as (number | null)[] };
  let dist = 0;
  for (let i = 0; i < n; i++) {
    const speed = v[i] * scale, angle = (2 * Math.PI * (dist += i > 0 ? speed * 5 : 0)) / w.distance; // one smooth loop back home
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

function workoutFields(ctx: Ctx, p: DayPlan, w: Workout, s: WorkoutStream): Record<string, unknown> {
  const hr = s.heartrate as number[], alt = s.altitude as number[], speed = s.velocity_smooth as number[], dist = s.distance as number[];
  const zones = [0, 0, 0, 0, 0, 0];
  for (const bpm of hr) zones[clamp(Math.floor((bpm / ctx.person.maxHr - 0.4) * 10), 0, 5)] += 5;
  const movingTime = Math.round((w.end - w.start) / 1000) - w.pauseS, distance = dist[dist.length - 1];
  const watts = s.power!.filter((x): x is number => x !== null), avgWatts = watts.length ? Math.round(sum(watts) / watts.length) : null;
  const startHour = (w.start - p.midnight) / 3600_000;
  return {
    title: `${startHour < 12 ? 'Morning' : startHour < 17 ? 'Afternoon' : 'Evening'} ${w.sport.verb}`,
    timezone_offset: ctx.tz, calendar_date: p.date, time_start: isoLocal(w.start, ctx.tz), time_end: isoLocal(w.end, ctx.tz),
    sport: { id: w.sport.id, name: w.sport.name, slug: w.sport.slug }, provider_id: w.id,
    average_hr: Math.round(sum(hr) / hr.length), max_hr: Math.max(...hr), hr_zones: zones, calories: w.calories, distance,
    moving_time: movingTime, average_speed: round(distance / movingTime, 2), max_speed: Math.max(...speed), steps: w.steps || null,
    total_elevation_gain: round(sum(alt.slice(1).map((a, i) => Math.max(0, a - alt[i]))), 1), elev_high: Math.max(...alt), elev_low: Math.min(...alt),
    average_watts: avgWatts, device_watts: avgWatts, max_watts: watts.length ? Math.max(...watts) : null,
    weighted_average_watts: watts.length ? Math.round((sum(watts.map((x) => x ** 4)) / watts.length) ** 0.25) : null, // normalised-power style
  };
}

// ---- Point/interval samples -----------------------------------------------------------------------------------

type Raw = { t: number; end?: number; value?: number; systolic?: number; diastolic?: number };
const every = (from: number, to: number, stepMs: number) => Array.from({ length: Math.max(0, Math.ceil((to - from) / stepMs)) }, (_, i) => from + i * stepMs);
const STAGE_HR: Record<Stage, number> = { 1: 0, 2: 3, 3: 6, 4: 9 };
const STAGE_HRV: Record<Stage, number> = { 1: 12, 2: 0, 3: -6, 4: -10 };

function heartrateDay(ctx: Ctx, day: number): Raw[] {
  const p = plan(ctx, day), nights = nightsOf(ctx, day), slots = movement(ctx, day), w = p.workout, workoutHr = w && workoutHeartrate(ctx, day, w);
  const r = rngFor(ctx.seed, 'heartrate', day);
  return every(p.midnight, p.midnight + DAY, 5 * MIN).map((t) => {
    const asleep = stageAt(nights, t);
    if (asleep) return { t, value: Math.round(asleep.sleep.hrLowest + STAGE_HR[asleep.stage] + Math.abs(gauss(r, 0, 2))) };
    if (w && workoutHr && inside(t, w)) return { t, value: workoutHr[Math.floor((t - w.start) / 5000)] };
    const spm = slots[Math.floor((t - p.midnight) / SLOT)].baseSteps / 15;
    return { t, value: Math.round(clamp(ctx.person.restingHr + 14 + Math.min(45, spm * 0.35) + gauss(r, 0, 4), 45, 150)) };
  });
}

/** Samples at the night's own cadence (from its start), kept when they fall on this local day. */
function duringSleep(ctx: Ctx, name: string, day: number, stepMs: number, value: (sl: Sleep, stage: Stage, r: Rng) => number): Raw[] {
  const p = plan(ctx, day), out: Raw[] = [];
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
  const p = plan(ctx, day), r = rngFor(ctx.seed, 'glucose', day);
  let drift = 0;
  return every(p.midnight, p.midnight + DAY, SLOT).map((t) => {
    drift = 0.8 * drift + gauss(r, 0, 0.12);
    // Gamma-shaped post-meal excursion peaking ~45 min after eating, sized by the meal's carbs.
    const spikes = sum(p.meals.map((m) => { const x = (t - m.time) / (45 * MIN); return x > 0 ? (m.carbs / 30) * x * Math.exp(1 - x) : 0; }));
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
  caffeine: [0.06, 0.2, [8, 13], 0, 1], cholesterol: [4, 5.8, [8], 0, 0.1], electrocardiogram_voltage: [-0.3, 1.2, [9], 0, 0.1],
  ige: [0.1, 3, [9], 0, 0.05], igg: [0.1, 3, [9], 0, 0.05], mindfulness_minutes: [5, 15, [21], -1, 0.5, true],
  stress_level: [10, 70, WAKING, 0, 1, true], vo2_max: [38, 48, [8], 0, 1], water: [200, 500, [8, 10, 12, 15, 18, 20], 0, 1, true],
  afib_burden: [0, 2, [0], 86_400, 1], basal_body_temperature: [36.2, 36.8, [7], 0, 1], body_temperature: [36.3, 37.1, [8, 14, 20], 60, 1],
  carbohydrates: [20, 90, [8, 13, 19], 0, 1], daylight_exposure: [5, 40, [9, 12, 16], -1, 1, true], fall: [1, 1, [15], 0, 0.02],
  forced_expiratory_volume_1: [2.8, 3.8, [9], 0, 1], forced_vital_capacity: [3.8, 4.8, [9], 0, 1], handwashing: [1, 1, [8, 12, 13, 18, 19], 20, 1],
  heart_rate_alert: [120, 140, [15], 600, 0.03, true], heart_rate_recovery_one_minute: [15, 35, [18], 0, 0.4, true], inhaler_usage: [1, 2, [9, 21], 0, 0.2, true],
  insulin_injection: [2, 10, [8, 13, 19], 0, 1, true], peak_expiratory_flow_rate: [400, 550, [9], 0, 1, true],
  sleep_apnea_alert: [1, 1, [3], 3600, 0.02], sleep_breathing_disturbance: [0, 5, [2], 3600, 1, true], stand_duration: [1, 10, WAKING, 3600, 1, true],
  stand_hour: [1, 1, WAKING, 3600, 0.75], uv_exposure: [0, 6, [11, 14], 1800, 1, true], waist_circumference: [78, 95, [7], 0, 0.15],
  wheelchair_push: [0, 0, [], 0, 0], workout_swimming_stroke: [0, 0, [], 0, 0], note: [0, 0, [], 0, 0], // no wheelchair, no swims, no text notes
};
function genericDay(ctx: Ctx, name: string, day: number): Raw[] {
  const interval = timeseriesResource(name)?.interval ?? false;
  const [lo, hi, hours, seconds, chance, integer] = GENERIC[name] ?? [1, 10, WAKING, interval ? 60 : 0, 1];
  const p = plan(ctx, day), r = rngFor(ctx.seed, name, day);
  return hours.flatMap((h) => {
    const jitter = seconds >= 3600 ? 0 : uniform(r, 0, 40) * MIN; // hour-long (or day-long) intervals stay on the hour
    const t = toSecond(p.midnight + h * 3600_000 + jitter), v = integer ? Math.round(uniform(r, lo, hi)) : round(uniform(r, lo, hi), 2);
    if (r() >= chance) return [];
    const length = seconds < 0 ? v * 60 : seconds || (interval ? 60 : 0);
    return [{ t, end: interval ? t + length * 1000 : undefined, value: v }];
  });
}

function rawSamples(ctx: Ctx, name: string, day: number): Raw[] {
  const p = plan(ctx, day), w = p.workout, b = p.body;
  const slotSeries = (f: (s: Slot) => number) => movement(ctx, day).map((s) => ({ t: s.start, end: s.end, value: f(s) }));
  switch (name) {
    case 'heartrate': return heartrateDay(ctx, day);
    case 'glucose': return glucoseDay(ctx, day);
    case 'steps': return slotSeries((s) => s.steps);
    case 'distance': return slotSeries((s) => s.distance);
    case 'calories_active': return slotSeries((s) => s.active);
    case 'calories_basal': return slotSeries((s) => s.basal);
    case 'floors_climbed': return slotSeries((s) => s.floors);
    case 'hrv': return duringSleep(ctx, name, day, 5 * MIN, (sl, st, r) => round(clamp(gauss(r, sl.hrv + STAGE_HRV[st], 7), 10, 150), 1));
    case 'respiratory_rate': return duringSleep(ctx, name, day, 5 * MIN, (sl, st, r) => round(gauss(r, sl.respiratoryRate + (st === 3 ? 0.8 : 0), 0.5), 1));
    case 'blood_oxygen': return duringSleep(ctx, name, day, 60 * MIN, (sl, _st, r) => round(clamp(gauss(r, sl.spo2, 0.8), 92, 100), 1));
    case 'hypnogram': return nightsOf(ctx, day).flatMap((sl) => sl.stages).filter((s) => inside(s.start, dayWindow(p))).map((s) => ({ t: s.start, end: s.end, value: s.stage }));
    case 'body_temperature_delta': return nightsOf(ctx, day).filter((sl) => inside(sl.start, dayWindow(p))).map((sl) => ({ t: sl.start, end: sl.end, value: sl.temperatureDelta }));
    case 'weight': return b ? [{ t: b.time, value: b.weight }] : [];
    case 'fat': return b ? [{ t: b.time, value: b.fatPct }] : [];
    case 'body_mass_index': return b ? [{ t: b.time, value: round(b.weight / (ctx.person.heightCm / 100) ** 2, 1) }] : [];
    case 'lean_body_mass': return b ? [{ t: b.time, value: round(b.weight * (1 - b.fatPct / 100), 1) }] : [];
    case 'workout_distance': return w ? [{ t: w.start, end: w.end, value: round(w.distance, 1) }] : [];
    case 'workout_duration': return w ? [{ t: w.start, end: w.end, value: round((w.end - w.start) / MIN, 1) }] : [];
    case 'blood_pressure': {
      const r = rngFor(ctx.seed, name, day);
      return [8, 20].map((h) => ({ t: toSecond(p.midnight + (h * 60 + uniform(r, 0, 40)) * MIN), systolic: Math.round(uniform(r, 108, 132)), diastolic: Math.round(uniform(r, 68, 86)) }));
    }
    default: return genericDay(ctx, name, day);
  }
}

// ---- Summaries ----------------------------------------------------------------------------------------------

const utcMidnightOf = (date: string) => `${date}T00:00:00+00:00`; // the deprecated `date` field: calendar date at UTC 00:00

function activity(ctx: Ctx, day: number): SummaryInput[] {
  const p = plan(ctx, day), slots = movement(ctx, day).filter((s) => s.end <= ctx.until); // an unfinished day: what was recorded so far
  if (!slots.length) return [];
  const hr = heartrateDay(ctx, day).filter((x) => x.t < ctx.until).map((x) => x.value as number);
  let low = 0, medium = 0, high = 0;
  for (const s of slots) {
    if (p.workout?.sport.slug === 'walking') medium += s.workoutMin;
    else high += s.workoutMin;
    const rest = SLOT / MIN - s.workoutMin;
    if (s.baseSteps / 15 >= 60) medium += rest;
    else low += Math.min(rest, s.baseSteps / 70);
  }
  const distance = round(sum(slots.map((s) => s.distance)), 1), active = sum(slots.map((s) => s.active));
  const fields = {
    date: utcMidnightOf(p.date), calendar_date: p.date, timezone_offset: ctx.tz, steps: sum(slots.map((s) => s.steps)),
    calories_active: round(active, 1), calories_total: round(active + sum(slots.map((s) => s.basal)), 1), distance, daily_movement: distance,
    low: Math.round(low), medium: Math.round(medium), high: Math.round(high), floors_climbed: sum(slots.map((s) => s.floors)), wheelchair_use: false,
    heart_rate: hr.length
      ? { avg_bpm: Math.round(sum(hr) / hr.length), min_bpm: Math.min(...hr), max_bpm: Math.max(...hr), resting_bpm: ctx.person.restingHr }
      : null,
  };
  return [{ resource: 'activity', source_key: p.date, calendar_date: p.date, time: isoUtc(p.midnight), fields }];
}

function sleepSummary(ctx: Ctx, day: number): SummaryInput[] {
  const p = plan(ctx, day), sl = p.sleep;
  if (sl.end > ctx.until) return []; // not over yet
  const secs = (stage: Stage) => sum(sl.stages.filter((s) => s.stage === stage).map((s) => (s.end - s.start) / 1000));
  const [deep, light, rem, awake] = [secs(1), secs(2), secs(3), secs(4)], total = deep + light + rem, duration = total + awake;
  const efficiency = (100 * total) / duration;
  return [{
    resource: 'sleep', source_key: `sleep:${p.date}`, calendar_date: p.date, time: isoUtc(sl.start),
    fields: {
      date: utcMidnightOf(p.date), calendar_date: p.date, bedtime_start: isoLocal(sl.start, ctx.tz), bedtime_stop: isoLocal(sl.end, ctx.tz),
      type: 'long_sleep', state: 'confirmed', timezone_offset: ctx.tz, duration, total, awake, light, rem, deep,
      score: Math.round(clamp(20 + 5 * (total / 3600) + 0.5 * (efficiency - 85) + ((deep + rem) / total) * 30, 1, 100)),
      hr_lowest: sl.hrLowest, hr_average: sl.hrAverage, hr_resting: ctx.person.restingHr, efficiency: round(efficiency, 1),
      latency: sl.stages[0].stage === 4 ? (sl.stages[0].end - sl.stages[0].start) / 1000 : 0, temperature_delta: sl.temperatureDelta,
      average_hrv: sl.hrv, respiratory_rate: sl.respiratoryRate,
    },
  }];
}

function daySummaries(ctx: Ctx, resource: string, day: number): SummaryInput[] {
  const p = plan(ctx, day), w = p.workout;
  switch (resource) {
    case 'activity': return activity(ctx, day);
    case 'sleep': return sleepSummary(ctx, day);
    case 'workouts':
      return w && w.end <= ctx.until ? [{ resource: 'workouts', source_key: w.id, calendar_date: p.date, time: isoUtc(w.start), fields: workoutFields(ctx, p, w, workoutStream(ctx, day, w)) }] : [];
    case 'body': {
      const b = p.body;
      if (!b || b.time >= ctx.until) return [];
      const fields = { date: utcMidnightOf(p.date), calendar_date: p.date, weight: b.weight, fat: b.fatPct, body_mass_index: round(b.weight / (ctx.person.heightCm / 100) ** 2, 1), lean_body_mass_kilogram: round(b.weight * (1 - b.fatPct / 100), 1) };
      return [{ resource: 'body', source_key: p.date, calendar_date: p.date, time: isoUtc(b.time), fields }];
    }
    case 'meal':
      return p.meals.filter((m) => m.logged && m.time < ctx.until).map((m) => ({
        resource: 'meal', source_key: m.key, calendar_date: p.date, time: isoUtc(m.time),
        fields: {
          priority_id: 0, source_id: 0, provider_id: m.key, timestamp: isoLocal(m.time, ctx.tz), calendar_date: p.date, name: m.name,
          energy: { unit: 'kcal', value: m.kcal }, macros: { carbs: m.carbs, protein: m.protein, fats: { total: m.fat, saturated: round(m.fat * 0.35, 1) }, fibre: round(m.carbs * 0.1, 1), sugar: round(m.carbs * 0.3, 1) },
        },
      }));
    default: return [];
  }
}

// ---- Entry point --------------------------------------------------------------------------------------------

export function generateDemoData(req: DemoRequest): ProviderData {
  const until = req.until === undefined ? Infinity : Date.parse(req.until);
  if (Number.isNaN(until)) throw new Error(`invalid until: ${req.until}`);
  const ctx: Ctx = { seed: req.seed, provider: req.provider, tz: req.timezoneOffsetSeconds, until, person: personFor(req.seed), plans: new Map(), workoutHr: new Map() };
  const out: ProviderData = { source_type: DEMO_SOURCE_TYPES[req.provider] ?? 'unknown', summaries: [], samples: [], workout_streams: [] };
  const first = dayNumber(req.startDate), last = dayNumber(req.endDate);
  const unit = timeseriesResource(req.resource)?.unit;
  if (req.resource === 'profile') {
    // Reported on the last requested day that has begun by `until`.
    const me = ctx.person, lastDay = Math.min(last, Math.floor((until - 1 + ctx.tz * 1000) / DAY));
    out.summaries.push({
      resource: 'profile', source_key: 'profile', calendar_date: dateOf(lastDay), time: isoUtc(lastDay * DAY - ctx.tz * 1000),
      fields: { height: me.heightCm, birth_date: me.birthDate, gender: me.sex, sex: me.sex, wheelchair_use: false },
    });
    return out;
  }
  for (let day = first; day <= last && day * DAY - ctx.tz * 1000 < until; day++) {
    if (isSummaryResource(req.resource)) out.summaries.push(...daySummaries(ctx, req.resource, day));
    else if (req.resource === 'workout_stream') {
      const w = plan(ctx, day).workout;
      if (w && w.end <= until) out.workout_streams.push({ workout_source_key: w.id, stream: workoutStream(ctx, day, w) });
    } else if (unit !== undefined) {
      for (const x of rawSamples(ctx, req.resource, day)) {
        if (x.t >= until || (x.end !== undefined && x.end > until)) continue; // an interval still in progress is not recorded yet
        const timestamp = isoUtc(x.t), sample: SampleInput = { resource: req.resource, timestamp, unit, type: null, timezone_offset: ctx.tz };
        if (x.end !== undefined) [sample.start, sample.end] = [timestamp, isoUtc(x.end)];
        if (x.value !== undefined) sample.value = x.value;
        else [sample.systolic, sample.diastolic] = [x.systolic, x.diastolic];
        out.samples.push(sample);
      }
    }
  }
  return out;
}
