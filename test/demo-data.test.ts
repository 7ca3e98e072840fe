/** The demo providers' synthetic data generator: pure, so no app, database or Temporal is needed here. */
import { DEMO_SOURCE_TYPES, generateDemoData, type DemoRequest } from '../lib/wearables/demo-data';
import type { SampleInput, SummaryInput } from '../lib/wearables/model';
import { TIMESERIES_RESOURCES, timeseriesResource } from '../lib/wearables/resources';

const TZ = 3600;
const base = { seed: 'user-1:oura', provider: 'oura', startDate: '2026-01-01', endDate: '2026-01-30', timezoneOffsetSeconds: TZ };
const gen = (resource: string, extra: Partial<DemoRequest> = {}) => generateDemoData({ ...base, resource, ...extra });
const localDate = (iso: string) => new Date(Date.parse(iso) + TZ * 1000).toISOString().slice(0, 10);
const FORBIDDEN = ['id', 'user_id', 'source', 'created_at', 'updated_at'];

describe('demo data generator', () => {
  it('returns deeply-equal output for the same request, and different data for another seed', () => {
    // Neither the clock nor Math.random may be consulted.
    const random = jest.spyOn(Math, 'random').mockImplementation(() => {
      throw new Error('Math.random used');
    });
    const now = jest.spyOn(Date, 'now').mockImplementation(() => {
      throw new Error('Date.now used');
    });
    for (const resource of ['heartrate', 'activity', 'sleep', 'workouts', 'workout_stream', 'glucose', 'hypnogram', 'meal', 'body', 'profile']) {
      expect(gen(resource)).toEqual(gen(resource));
    }
    expect(gen('heartrate', { seed: 'user-2:oura' }).samples).not.toEqual(gen('heartrate').samples);
    expect(gen('steps').source_type).toBe('ring');
    expect(DEMO_SOURCE_TYPES).toMatchObject({ fitbit: 'watch', apple_health_kit: 'watch', freestyle_libre: 'automatic' });
    random.mockRestore();
    now.mockRestore();
  });

  it("follows the user's local calendar for any offset", () => {
    for (const offset of [-18_000, 19_800]) {
      const sign = offset < 0 ? '-05:00' : '+05:30';
      const { summaries } = gen('sleep', { timezoneOffsetSeconds: offset, startDate: '2026-01-10', endDate: '2026-01-11' });
      expect(summaries.map((s) => s.calendar_date)).toEqual(['2026-01-10', '2026-01-11']);
      for (const { fields: f, calendar_date } of summaries) {
        expect(f.bedtime_start).toMatch(new RegExp(`\\${sign}$`));
        expect((f.bedtime_stop as string).slice(0, 10)).toBe(calendar_date); // woke up on the sleep's calendar date
        expect(f.timezone_offset).toBe(offset);
      }
      const activity = gen('activity', { timezoneOffsetSeconds: offset, startDate: '2026-01-10', endDate: '2026-01-10' }).summaries[0];
      expect(Date.parse(activity.time)).toBe(Date.parse(`2026-01-10T00:00:00${sign}`));
    }
  });

  it('gives a day the same data whichever range asks for it', () => {
    const day = { startDate: '2026-01-15', endDate: '2026-01-15' };
    for (const resource of [
      'heartrate',
      'hrv',
      'hypnogram',
      'steps',
      'glucose',
      'blood_oxygen',
      'respiratory_rate',
      'body_temperature_delta',
      'stress_level',
    ]) {
      const fromMonth = gen(resource).samples.filter((s) => localDate(s.timestamp) === '2026-01-15');
      expect(fromMonth.length).toBeGreaterThan(0);
      expect(gen(resource, day).samples).toEqual(fromMonth);
    }
    for (const resource of ['activity', 'sleep', 'workouts', 'meal']) {
      expect(gen(resource, day).summaries).toEqual(gen(resource).summaries.filter((s) => s.calendar_date === '2026-01-15'));
    }
    const fitbitBody = { seed: 'user-1:fitbit', provider: 'fitbit' };
    expect(gen('body', { ...fitbitBody, ...day }).summaries).toEqual(gen('body', fitbitBody).summaries.filter((s) => s.calendar_date === '2026-01-15'));
  });

  it('records nothing at or after `until`, and a later `until` revises today', () => {
    const today = { startDate: '2026-01-14', endDate: '2026-01-15' };
    const morning = '2026-01-15T10:00:00+01:00',
      evening = '2026-01-15T20:00:00+01:00';
    for (const resource of ['heartrate', 'steps', 'hypnogram', 'glucose', 'hrv']) {
      const samples = gen(resource, { ...today, until: morning }).samples;
      const later = gen(resource, { ...today, until: evening }).samples;
      expect(samples.length).toBeGreaterThan(0);
      for (const s of samples) {
        expect(Date.parse(s.timestamp)).toBeLessThan(Date.parse(morning));
        if (s.end) expect(Date.parse(s.end)).toBeLessThanOrEqual(Date.parse(morning));
      }
      // The earlier cut is a prefix of the later one (which has more, except for sleep-only resources).
      if (!['hypnogram', 'hrv'].includes(resource)) expect(later.length).toBeGreaterThan(samples.length);
      expect(later.slice(0, samples.length)).toEqual(samples);
    }
    const steps = (until: string) => gen('activity', { ...today, until }).summaries.find((s) => s.calendar_date === '2026-01-15')!.fields.steps as number;
    expect(steps(evening)).toBeGreaterThan(steps(morning));
    expect(steps(morning)).toBeGreaterThan(0);
    // The activity summary of the unfinished day adds up the step samples recorded so far.
    const sumSteps = gen('steps', { startDate: '2026-01-15', endDate: '2026-01-15', until: evening }).samples.reduce((a, s) => a + s.value!, 0);
    expect(steps(evening)).toBe(sumSteps);
    // Last night's sleep exists once it has ended; nothing for days that have not begun.
    expect(gen('sleep', { ...today, until: '2026-01-15T03:00:00+01:00' }).summaries.map((s) => s.calendar_date)).toEqual(['2026-01-14']);
    expect(gen('sleep', { ...today, until: morning }).summaries.map((s) => s.calendar_date)).toEqual(['2026-01-14', '2026-01-15']);
    expect(gen('activity', { until: morning }).summaries.at(-1)!.calendar_date).toBe('2026-01-15');
    expect(gen('profile', { until: morning }).summaries).toHaveLength(1);
  });

  it('emits samples with the unit of resources.ts, the offset, and interval samples whose timestamp is their start', () => {
    const problems: string[] = []; // collected rather than asserted one by one: there are thousands of samples
    for (const r of TIMESERIES_RESOURCES) {
      const { samples } = gen(r.name);
      const never = ['note', 'wheelchair_push', 'workout_swimming_stroke'],
        rare = ['fall', 'sleep_apnea_alert', 'heart_rate_alert', 'ige', 'igg'];
      if (!samples.length && ![...never, ...rare].includes(r.name)) problems.push(`${r.name}: no samples`);
      if (samples.length && never.includes(r.name)) problems.push(`${r.name}: samples of something this demo user never does`);
      for (const s of samples) {
        const bad = (what: string) => problems.push(`${r.name} ${what}: ${JSON.stringify(s)}`);
        if (s.resource !== r.name || s.unit !== r.unit || s.timezone_offset !== TZ || s.type !== null) bad('resource/unit/offset/type');
        if (r.name === 'blood_pressure' ? !(s.systolic! > s.diastolic!) : !Number.isFinite(s.value)) bad('value');
        if (r.interval && (s.timestamp !== s.start || !(Date.parse(s.start!) < Date.parse(s.end!)))) bad('interval');
        if (!r.interval && (s.start !== undefined || s.end !== undefined)) bad('point with start/end');
      }
    }
    expect(problems).toEqual([]);
    const hypnogram = gen('hypnogram').samples;
    expect(new Set(hypnogram.map((s) => s.value))).toEqual(new Set([1, 2, 3, 4]));
    const glucose = gen('glucose', { seed: 'u:freestyle_libre', provider: 'freestyle_libre' });
    expect(glucose.source_type).toBe('automatic');
    expect(glucose.samples).toHaveLength(30 * 96);
    for (const s of glucose.samples) expect(s.value).toBeGreaterThanOrEqual(3.9);
    for (const s of glucose.samples) expect(s.value).toBeLessThanOrEqual(10);
  });

  it('fills the fields the SDK requires, consistently, and none the service adds', () => {
    const required: Record<string, string[]> = {
      activity: ['date', 'calendar_date', 'steps', 'calories_total', 'calories_active', 'distance', 'low', 'medium', 'high', 'heart_rate', 'timezone_offset'],
      sleep: ['date', 'calendar_date', 'bedtime_start', 'bedtime_stop', 'type', 'duration', 'total', 'awake', 'light', 'rem', 'deep', 'timezone_offset'],
      workouts: ['calendar_date', 'time_start', 'time_end', 'provider_id', 'sport', 'timezone_offset'],
      body: ['date', 'calendar_date', 'weight', 'fat'],
      meal: ['priority_id', 'source_id', 'provider_id', 'timestamp', 'name', 'energy', 'macros'],
      profile: ['height', 'birth_date', 'gender', 'sex', 'wheelchair_use'],
    };
    const fitbit = { seed: 'user-1:fitbit', provider: 'fitbit' };
    const all: SummaryInput[] = [];
    for (const resource of Object.keys(required)) {
      const { summaries } = gen(resource, fitbit);
      expect(summaries.length).toBeGreaterThan(0);
      for (const s of summaries) {
        expect(s.resource).toBe(resource);
        for (const f of required[resource]) expect(s.fields[f]).toBeDefined();
        for (const f of FORBIDDEN) expect(s.fields).not.toHaveProperty(f);
        all.push(s);
      }
    }
    const sleep = all.filter((s) => s.resource === 'sleep');
    expect(sleep).toHaveLength(30);
    for (const { fields: f, source_key, time } of sleep) {
      expect(source_key).toBe(`sleep:${f.calendar_date}`);
      expect(f.total).toBe((f.light as number) + (f.rem as number) + (f.deep as number));
      expect(f.duration).toBe((f.total as number) + (f.awake as number));
      expect(Date.parse(f.bedtime_stop as string) - Date.parse(f.bedtime_start as string)).toBe((f.duration as number) * 1000);
      expect(Date.parse(time)).toBe(Date.parse(f.bedtime_start as string));
      expect(f.bedtime_start).toMatch(/\+01:00$/);
      expect(f).toMatchObject({ type: 'long_sleep', state: 'confirmed' });
    }
    for (const { fields: f, source_key, calendar_date, time } of all.filter((s) => s.resource === 'activity')) {
      expect(source_key).toBe(calendar_date);
      expect(localDate(time)).toBe(calendar_date);
      expect(f.steps).toBeGreaterThanOrEqual(3000);
      expect(f.steps).toBeLessThanOrEqual(15_000);
      expect(f.heart_rate).toEqual({ avg_bpm: expect.any(Number), min_bpm: expect.any(Number), max_bpm: expect.any(Number), resting_bpm: expect.any(Number) });
    }
    const meals = all.filter((s) => s.resource === 'meal');
    expect(meals.length).toBeGreaterThanOrEqual(60);
    expect(meals.length).toBeLessThanOrEqual(90);
    expect(meals[0].fields.energy).toEqual({ unit: 'kcal', value: expect.any(Number) });
    expect(all.filter((s) => s.resource === 'profile').map((s) => s.source_key)).toEqual(['profile']);
  });

  it('streams each workout under its summary source_key', () => {
    const workouts = gen('workouts').summaries,
      streams = gen('workout_stream').workout_streams;
    expect(workouts.length).toBeGreaterThan(3);
    expect(streams.map((s) => s.workout_source_key)).toEqual(workouts.map((w) => w.source_key));
    for (const [i, { stream }] of streams.entries()) {
      const w = workouts[i].fields;
      expect(w.provider_id).toBe(workouts[i].source_key);
      expect(stream.time[0]).toBe(Date.parse(w.time_start as string) / 1000);
      expect(stream.time[1] - stream.time[0]).toBe(5);
      for (const key of ['heartrate', 'velocity_smooth', 'distance', 'altitude', 'cadence', 'lat', 'lng', 'power'] as const) {
        expect(stream[key]).toHaveLength(stream.time.length);
      }
      expect(stream.distance!.at(-1)).toBeCloseTo(w.distance as number, 0);
      expect(Math.max(...(stream.heartrate as number[]))).toBe(w.max_hr);
      expect(stream.power!.every((p) => p === null)).toBe((w.sport as { slug: string }).slug !== 'cycling');
    }
    // Heart rate during a workout is the stream's, higher than while asleep.
    const hr = gen('heartrate').samples;
    const during = (from: string, to: string) =>
      hr.filter((s: SampleInput) => s.timestamp >= new Date(from).toISOString() && s.timestamp < new Date(to).toISOString());
    const w = workouts.find((x) => (x.fields.sport as { slug: string }).slug === 'running') ?? workouts[0];
    const sleep = gen('sleep').summaries[0].fields;
    const avg = (xs: SampleInput[]) => xs.reduce((a, s) => a + s.value!, 0) / xs.length;
    expect(avg(during(w.fields.time_start as string, w.fields.time_end as string))).toBeGreaterThan(
      avg(during(sleep.bedtime_start as string, sleep.bedtime_stop as string)) + 20,
    );
  });

  it('is fast: 30 days of heart rate', () => {
    const t0 = process.hrtime.bigint();
    const { samples } = gen('heartrate', { seed: 'timing:oura' });
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    expect(samples).toHaveLength(30 * 288);
    expect(timeseriesResource('heartrate')!.unit).toBe('bpm');
    console.log(`30 days of heartrate: ${ms.toFixed(1)} ms`);
    expect(ms).toBeLessThan(500); // generous for loaded CI machines; typically far less
  });
});
