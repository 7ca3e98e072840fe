import { SUMMARY_RESOURCES, type SummaryResource } from './model';

/**
 * Timeseries resources: the name used in events and storage, the path segment of the read endpoints
 * (`body_weight` reads `weight`, `body_fat` reads `fat`), the unit samples carry, whether a sample covers an
 * interval (start/end) or a point, and whether the flat read endpoint exists (the rest are grouped-only),
 * per ../shared/reference/real-api-facts.md §4.
 */
export interface TimeseriesResource {
  name: string;
  path: string;
  unit: string;
  interval: boolean;
  flat: boolean;
}

const t = (name: string, unit: string, interval: boolean, flat: boolean, path = name): TimeseriesResource => ({ name, path, unit, interval, flat });

export const TIMESERIES_RESOURCES: TimeseriesResource[] = [
  // Flat and grouped.
  t('blood_oxygen', '%', false, true),
  t('blood_pressure', 'mmHg', false, true),
  t('fat', '%', false, true, 'body_fat'),
  t('weight', 'kg', false, true, 'body_weight'),
  t('caffeine', 'g', false, true),
  t('calories_active', 'kcal', true, true),
  t('calories_basal', 'kcal', true, true),
  t('cholesterol', 'mmol/L', false, true),
  t('distance', 'm', true, true),
  t('electrocardiogram_voltage', 'mV', false, true),
  t('floors_climbed', 'count', true, true),
  t('glucose', 'mmol/L', false, true),
  t('heartrate', 'bpm', false, true),
  t('hrv', 'rmssd', false, true),
  t('hypnogram', 'stage', true, true),
  t('ige', 'FSU', false, true),
  t('igg', 'FSU', false, true),
  t('mindfulness_minutes', 'min', true, true),
  t('respiratory_rate', 'bpm', false, true),
  t('steps', 'count', true, true),
  t('stress_level', 'stress_score', false, true),
  t('vo2_max', 'mL/kg/min', false, true),
  t('water', 'mL', false, true),
  // Grouped only.
  t('afib_burden', '%', true, false),
  t('basal_body_temperature', '°C', false, false),
  t('body_mass_index', 'kg/m2', false, false),
  t('body_temperature', '°C', true, false),
  t('body_temperature_delta', '°C', true, false),
  t('carbohydrates', 'g', false, false),
  t('daylight_exposure', 'min', true, false),
  t('fall', 'count', false, false),
  t('forced_expiratory_volume_1', 'L', false, false),
  t('forced_vital_capacity', 'L', false, false),
  t('handwashing', 'count', true, false),
  t('heart_rate_alert', 'bpm', true, false),
  t('heart_rate_recovery_one_minute', 'bpm', false, false),
  t('inhaler_usage', 'count', false, false),
  t('insulin_injection', 'IU', false, false),
  t('lean_body_mass', 'kg', false, false),
  t('note', 'text', false, false),
  t('peak_expiratory_flow_rate', 'L/min', false, false),
  t('sleep_apnea_alert', 'count', true, false),
  t('sleep_breathing_disturbance', 'count', true, false),
  t('stand_duration', 'min', true, false),
  t('stand_hour', 'count', true, false),
  t('uv_exposure', 'index', true, false),
  t('waist_circumference', 'cm', false, false),
  t('wheelchair_push', 'count', true, false),
  t('workout_distance', 'm', true, false),
  t('workout_duration', 'min', true, false),
  t('workout_swimming_stroke', 'count', true, false),
];

const byName = new Map(TIMESERIES_RESOURCES.map((r) => [r.name, r]));
const byPath = new Map(TIMESERIES_RESOURCES.map((r) => [r.path, r]));

export const timeseriesResource = (name: string) => byName.get(name);
/** The resource a read path names (`body_weight` → weight), or undefined. */
export const timeseriesResourceAtPath = (path: string) => byPath.get(path);

/** Summary read paths and the key their list is wrapped in (`{meals: [...]}` for meal). */
export const SUMMARY_WRAPPERS: Record<Exclude<SummaryResource, 'profile'>, string> = {
  activity: 'activity',
  sleep: 'sleep',
  workouts: 'workouts',
  body: 'body',
  meal: 'meals',
};

export const isSummaryResource = (r: string): r is SummaryResource => (SUMMARY_RESOURCES as readonly string[]).includes(r);

/** mg/dL per mmol/L of glucose (molar mass 180.16 g/mol). */
export const MGDL_PER_MMOL = 18.0182;

/**
 * Glucose in mmol/L from mg/dL, rounded to 1 decimal. Dexcom's samples are stored in mg/dL, the unit Dexcom reports
 * in; the timeseries reads offer either unit (`?unit=`).
 */
export function mgdlToMmol(value: number): number {
  return Math.round((value / MGDL_PER_MMOL) * 10) / 10;
}

/** mg/dL from mmol/L, as an integer (meters report whole mg/dL). */
export function mmolToMgdl(value: number): number {
  return Math.round(value * MGDL_PER_MMOL);
}

/** Glucose units a read may ask for. */
export const GLUCOSE_UNITS = ['mg/dL', 'mmol/L'] as const;

/** A sample's value in `unit` (glucose: mg/dL ⇄ mmol/L); other resources and units are returned as stored. */
export function inUnit<T extends { unit: string; value?: number }>(sample: T, unit: string | undefined): T {
  if (!unit || sample.unit === unit || sample.value === undefined) return sample;
  if (sample.unit === 'mg/dL' && unit === 'mmol/L') return { ...sample, unit, value: mgdlToMmol(sample.value) };
  if (sample.unit === 'mmol/L' && unit === 'mg/dL') return { ...sample, unit, value: mmolToMgdl(sample.value) };
  return sample;
}
