import { canonicalTimeZone, parseInstant, zoneOffsetSeconds } from '../platform/time';
import type { SummaryInput } from '../wearables/model';
import {
  healthConnectSleepStage,
  healthConnectSport,
  healthKitSleepStage,
  healthKitSport,
  type SleepSegment,
  sleepSummary,
  workoutSummary,
} from './sleep-and-workouts';

/**
 * Raw records from a phone (`POST /v2/sdk/{user_id}/records`), as the platforms name them, mapped here: HealthKit
 * quantity samples (`HKQuantityTypeIdentifier…`, a value in the unit HealthKit reports) and Health Connect records
 * (`HeartRateRecord` with its samples, `StepsRecord` …). The phone sends what it reads; which types we take and how
 * they convert is decided here, so a mapping fix needs no app release. A type we do not map is counted as skipped,
 * never an error.
 *
 * Traps handled: HealthKit's heart rate variability is SDNN, not RMSSD (skipped until a resource holds SDNN);
 * HealthKit percentages are fractions (0.97 → 97 %); energy may come in `Cal` (= kcal) or `kJ`; distance in `km` or
 * `mi`; `HKTimeZone` metadata names the zone the sample was taken in.
 */

export interface RawRecord {
  type: string;
  /** HealthKit: the sample's UUID; Health Connect: the record id. */
  id?: string | null;
  /** HealthKit quantity sample. */
  value?: number | null;
  unit?: string | null;
  start_date?: string | null;
  end_date?: string | null;
  product_type?: string | null;
  metadata?: Record<string, unknown> | null;
  /** HealthKit workout (`HKWorkout`): its activity type (raw value or name) and totals in kcal and m. */
  workout_activity_type?: number | string | null;
  total_energy_burned?: number | null;
  total_distance?: number | null;
  /** Health Connect (its field names). */
  startTime?: string | null;
  endTime?: string | null;
  time?: string | null;
  count?: number | null;
  samples?: { time: string; beatsPerMinute: number }[] | null;
  energy?: { inKilocalories?: number } | null;
  distance?: { inMeters?: number } | null;
  percentage?: { value?: number } | number | null;
  rate?: number | null;
  weight?: { inKilograms?: number } | null;
  stages?: { startTime: string; endTime: string; stage: number }[] | null;
  exerciseType?: number | null;
  title?: string | null;
}

export interface MappedSample {
  resource: string;
  start: string;
  end: string | null;
  value: number;
  unit: string;
  sourceType: string;
  timezoneOffset: number | null;
  /** The platform's id of the sample (its key), where it has one. */
  platformId: string | null;
}

export type RecordOutcome =
  | { samples: MappedSample[] }
  /** A HealthKit sleep-analysis sample: the upload's samples of one source become sleeps together. */
  | { sleepSegment: SleepSegment; sourceType: string; offset: number }
  /** A sleep session (Health Connect) or a workout, whole. */
  | { summary: SummaryInput; sourceType: string }
  | { skipped: string }
  | { problem: { field: string; message: string } };

export type Converter = { resource: string; unit: string; interval: boolean; from: Record<string, (v: number) => number> };

const same = (v: number) => v;
/** HealthKit quantity types we map: the resource, its unit, and each HealthKit unit's conversion to it. */
const HEALTHKIT: Record<string, Converter> = {
  HKQuantityTypeIdentifierHeartRate: { resource: 'heartrate', unit: 'bpm', interval: false, from: { 'count/min': same, bpm: same } },
  HKQuantityTypeIdentifierStepCount: { resource: 'steps', unit: 'count', interval: true, from: { count: same } },
  HKQuantityTypeIdentifierFlightsClimbed: { resource: 'floors_climbed', unit: 'count', interval: true, from: { count: same } },
  HKQuantityTypeIdentifierActiveEnergyBurned: {
    resource: 'calories_active',
    unit: 'kcal',
    interval: true,
    from: { kcal: same, Cal: same, kJ: (v) => v / 4.184 },
  },
  HKQuantityTypeIdentifierBasalEnergyBurned: {
    resource: 'calories_basal',
    unit: 'kcal',
    interval: true,
    from: { kcal: same, Cal: same, kJ: (v) => v / 4.184 },
  },
  HKQuantityTypeIdentifierDistanceWalkingRunning: {
    resource: 'distance',
    unit: 'm',
    interval: true,
    from: { m: same, km: (v) => v * 1000, mi: (v) => v * 1609.344 },
  },
  HKQuantityTypeIdentifierOxygenSaturation: { resource: 'blood_oxygen', unit: '%', interval: false, from: { '%': (v) => (v <= 1 ? v * 100 : v) } },
  HKQuantityTypeIdentifierRespiratoryRate: { resource: 'respiratory_rate', unit: 'bpm', interval: false, from: { 'count/min': same } },
  HKQuantityTypeIdentifierBodyMass: { resource: 'weight', unit: 'kg', interval: false, from: { kg: same, g: (v) => v / 1000, lb: (v) => v * 0.45359237 } },
  HKQuantityTypeIdentifierBodyFatPercentage: { resource: 'fat', unit: '%', interval: false, from: { '%': (v) => (v <= 1 ? v * 100 : v) } },
  HKQuantityTypeIdentifierVO2Max: { resource: 'vo2_max', unit: 'mL/kg/min', interval: false, from: { 'ml/(kg*min)': same, 'mL/kg/min': same } },
  // SDNN, not RMSSD: stored in hrv with unit `sdnn` (lib/wearables/ingest-batch.ts OTHER_MEASURES).
  HKQuantityTypeIdentifierHeartRateVariabilitySDNN: { resource: 'hrv', unit: 'sdnn', interval: false, from: { ms: same } },
  HKQuantityTypeIdentifierBloodGlucose: {
    resource: 'glucose',
    unit: 'mmol/L',
    interval: false,
    from: { 'mmol<180.15588000005408>/L': same, 'mmol/L': same, 'mg/dL': (v) => v / 18.0156 },
  },
};

/** Why a known type is not taken (said in the answer's `skipped`). */
const NOT_TAKEN: Record<string, string> = {
  HKQuantityTypeIdentifierRestingHeartRate: "a day's resting value, not a measured beat: the heartrate series would mix the two",
  HKQuantityTypeIdentifierBloodPressureSystolic: 'read with its diastolic value from their HKCorrelationTypeIdentifierBloodPressure',
  HKQuantityTypeIdentifierBloodPressureDiastolic: 'read with its systolic value from their HKCorrelationTypeIdentifierBloodPressure',
};

/** How a HealthKit quantity type maps (resource, unit, conversions), if it does. */
export const healthKitConverter = (type: string): Converter | undefined => HEALTHKIT[type];

/** Why a HealthKit type is not taken. */
const healthKitSkipReason = (type: string): string => NOT_TAKEN[type] ?? 'not a type this service maps';

/** Watch or phone, from the product type (HealthKit's `HKDevice.model`/`productType`, or the export's `device`). */
export const sourceTypeOf = (record: Pick<RawRecord, 'product_type'>) => (/watch/i.test(record.product_type ?? '') ? 'watch' : 'phone');

const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
export const instant = (v: unknown): v is string => typeof v === 'string' && !Number.isNaN(parseInstant(v));

/** The zone a HealthKit sample names (HKTimeZone), else the upload's. */
function zoneOf(record: RawRecord, uploadZone: string | null): string | null {
  const named = record.metadata?.HKTimeZone;
  return (typeof named === 'string' && canonicalTimeZone(named)) || uploadZone;
}

function healthKit(record: RawRecord, uploadZone: string | null): RecordOutcome {
  if (record.type === 'HKCategoryTypeIdentifierSleepAnalysis' || record.type === 'HKWorkout') {
    if (!instant(record.start_date) || !instant(record.end_date)) return { problem: { field: 'start_date', message: 'start_date and end_date are required.' } };
    const zone = zoneOf(record, uploadZone);
    const offset = zone ? zoneOffsetSeconds(zone, new Date(record.start_date)) : 0;
    const [start, end] = [parseInstant(record.start_date), parseInstant(record.end_date)];
    if (record.type === 'HKWorkout') {
      const sourceKey = record.id ?? `${sourceTypeOf(record)}:${new Date(start).toISOString()}`;
      return {
        summary: workoutSummary({
          sourceKey,
          start,
          end,
          offset,
          sport: healthKitSport(record.workout_activity_type),
          calories: finite(record.total_energy_burned) ? record.total_energy_burned : null,
          distance: finite(record.total_distance) ? record.total_distance : null,
          averageHr: null,
          maxHr: null,
          steps: null,
        }),
        sourceType: sourceTypeOf(record),
      };
    }
    const stage = healthKitSleepStage(record.value);
    if (!stage) return { problem: { field: 'value', message: 'An HKCategoryValueSleepAnalysis value (0–5) is required.' } };
    return { sleepSegment: { start, end, stage }, sourceType: sourceTypeOf(record), offset };
  }
  const converter = HEALTHKIT[record.type];
  if (!converter) return { skipped: healthKitSkipReason(record.type) };
  if (!finite(record.value)) return { problem: { field: 'value', message: 'A number is required.' } };
  if (!instant(record.start_date)) return { problem: { field: 'start_date', message: 'An ISO 8601 date-time is required.' } };
  if (converter.interval && !instant(record.end_date)) return { problem: { field: 'end_date', message: 'An ISO 8601 date-time is required.' } };
  const convert = converter.from[record.unit ?? ''];
  if (!convert) {
    return { problem: { field: 'unit', message: `${record.type} in '${record.unit}' is not mapped; send one of ${Object.keys(converter.from).join(', ')}.` } };
  }
  const zone = zoneOf(record, uploadZone);
  return {
    samples: [
      {
        resource: converter.resource,
        start: record.start_date,
        end: converter.interval ? (record.end_date as string) : null,
        value: convert(record.value),
        unit: converter.unit,
        sourceType: sourceTypeOf(record),
        timezoneOffset: zone ? zoneOffsetSeconds(zone, new Date(record.start_date)) : null,
        platformId: record.id ?? null,
      },
    ],
  };
}

function healthConnect(record: RawRecord, uploadZone: string | null): RecordOutcome {
  const offsetAt = (at: string) => (uploadZone ? zoneOffsetSeconds(uploadZone, new Date(at)) : null);
  const point = (resource: string, unit: string, at: unknown, value: unknown, field: string): RecordOutcome => {
    if (!instant(at)) return { problem: { field: 'time', message: 'An ISO 8601 date-time is required.' } };
    if (!finite(value)) return { problem: { field, message: 'A number is required.' } };
    return { samples: [{ resource, start: at, end: null, value, unit, sourceType: 'phone', timezoneOffset: offsetAt(at), platformId: record.id ?? null }] };
  };
  const span = (resource: string, unit: string, value: unknown, field: string): RecordOutcome => {
    if (!instant(record.startTime) || !instant(record.endTime)) return { problem: { field: 'startTime', message: 'startTime and endTime are required.' } };
    if (!finite(value)) return { problem: { field, message: 'A number is required.' } };
    return {
      samples: [
        {
          resource,
          start: record.startTime,
          end: record.endTime,
          value,
          unit,
          sourceType: 'phone',
          timezoneOffset: offsetAt(record.startTime),
          platformId: record.id ?? null,
        },
      ],
    };
  };
  switch (record.type) {
    case 'HeartRateRecord': {
      const samples = record.samples ?? [];
      if (!Array.isArray(samples) || samples.some((s) => !instant(s?.time) || !finite(s?.beatsPerMinute))) {
        return { problem: { field: 'samples', message: 'Each sample needs a time and beatsPerMinute.' } };
      }
      return {
        samples: samples.map((s) => ({
          resource: 'heartrate',
          start: s.time,
          end: null,
          value: s.beatsPerMinute,
          unit: 'bpm',
          sourceType: 'phone',
          timezoneOffset: offsetAt(s.time),
          // One record holds many samples: each is the record's id at its time.
          platformId: record.id ? `${record.id}@${s.time}` : null,
        })),
      };
    }
    case 'StepsRecord':
      return span('steps', 'count', record.count, 'count');
    case 'ActiveCaloriesBurnedRecord':
      return span('calories_active', 'kcal', record.energy?.inKilocalories, 'energy');
    case 'DistanceRecord':
      return span('distance', 'm', record.distance?.inMeters, 'distance');
    case 'OxygenSaturationRecord':
      return point('blood_oxygen', '%', record.time, typeof record.percentage === 'number' ? record.percentage : record.percentage?.value, 'percentage');
    case 'RespiratoryRateRecord':
      return point('respiratory_rate', 'bpm', record.time, record.rate, 'rate');
    case 'WeightRecord':
      return point('weight', 'kg', record.time, record.weight?.inKilograms, 'weight');
    case 'SleepSessionRecord': {
      if (!instant(record.startTime) || !instant(record.endTime)) return { problem: { field: 'startTime', message: 'startTime and endTime are required.' } };
      const stages = record.stages ?? [];
      const segments: SleepSegment[] = [];
      for (const s of Array.isArray(stages) ? stages : []) {
        const stage = healthConnectSleepStage(s?.stage);
        if (!instant(s?.startTime) || !instant(s?.endTime) || !stage) {
          return { problem: { field: 'stages', message: 'Each stage needs a startTime, an endTime and a SleepSessionRecord.STAGE_TYPE_* stage (1–7).' } };
        }
        segments.push({ start: parseInstant(s.startTime), end: parseInstant(s.endTime), stage });
      }
      // A session without stages is time asleep from start to end.
      if (!segments.length) segments.push({ start: parseInstant(record.startTime), end: parseInstant(record.endTime), stage: 'asleep' });
      const offset = offsetAt(record.startTime) ?? 0;
      return { summary: sleepSummary(segments, offset, { sourceKey: record.id ?? undefined, sourceType: 'phone' }), sourceType: 'phone' };
    }
    case 'ExerciseSessionRecord': {
      if (!instant(record.startTime) || !instant(record.endTime)) return { problem: { field: 'startTime', message: 'startTime and endTime are required.' } };
      const start = parseInstant(record.startTime);
      return {
        summary: workoutSummary({
          sourceKey: record.id ?? `phone:${new Date(start).toISOString()}`,
          start,
          end: parseInstant(record.endTime),
          offset: offsetAt(record.startTime) ?? 0,
          sport: healthConnectSport(record.exerciseType),
          calories: null,
          distance: null,
          averageHr: null,
          maxHr: null,
          steps: null,
        }),
        sourceType: 'phone',
      };
    }
    default:
      return { skipped: 'not a type this service maps' };
  }
}

/** One record of `provider`'s platform, mapped to samples, skipped (with why), or refused (with the field). */
export function mapRecord(provider: string, record: RawRecord, uploadZone: string | null): RecordOutcome {
  if (typeof record?.type !== 'string') return { problem: { field: 'type', message: 'The record type is required.' } };
  return provider === 'apple_health_kit' ? healthKit(record, uploadZone) : healthConnect(record, uploadZone);
}
