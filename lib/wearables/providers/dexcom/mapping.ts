import type { SampleInput } from '../../model';
import type { DexcomCalibration, DexcomDataRangeWindow, DexcomEgv, DexcomEvent, DexcomRecordBase, DexcomRecordsResponse } from './api-types';
import { parseDexcomTime, recordOffsetSeconds } from './time';

/**
 * Pure mapping of Dexcom API v3 JSON (./api-types.ts) into our timeseries samples. Sources:
 * - developer.dexcom.com/docs/dexcomv3/operation/getEstimatedGlucoseValuesV3 (EGV fields, `value` "integer or null",
 *   `status` unknown|high|low|ok, `unit` unknown|mg/dL|mmol/L; "records sourced from mobile apps (displayDevice iOS or
 *   android) will have UTC offsets; records sourced from receivers will not have UTC offsets"),
 * - developer.dexcom.com/docs/dexcomv3/operation/getEventsV3 (eventType unknown|insulin|carbs|exercise|health|
 *   bloodGlucose|notes, eventStatus created|updated|deleted, unit unknown|grams|mg/dL|minutes|units, `value` typed
 *   "string" while its example shows a number: both are accepted here),
 * - api-evangelist/dexcom `openapi/dexcom-dexcom-api.yml` and `examples/dexcom-api-*-example.json` (secondary).
 */

// ---- Units ------------------------------------------------------------------------------------------------------

/** mg/dL per mmol/L of glucose (molar mass 180.16 g/mol ÷ 10). */
// Glucose unit conversions live with the timeseries resources (one place): Dexcom stores mg/dL, the read converts.
export { MGDL_PER_MMOL, mgdlToMmol, mmolToMgdl } from '../../resources';
import { mmolToMgdl } from '../../resources';

/**
 * The sensor's reporting range: Dexcom G6/G7 show LOW below 40 mg/dL and HIGH above 400 mg/dL (Dexcom product user
 * guides; not stated in the stored API pages). A `low`/`high` EGV without a value is stored at that bound with `type`
 * naming the status, so a hypoglycaemia is never dropped.
 */
export const EGV_LOW_MGDL = 40;
export const EGV_HIGH_MGDL = 400;

// ---- Mapping ----------------------------------------------------------------------------------------------------

const iso = (ms: number) => new Date(ms).toISOString();

/** The record's instant and offset, or null when its systemTime is missing or unreadable (the record is skipped). */
function recordTime(r: DexcomRecordBase): { timestamp: string; timezone_offset: number | null } | null {
  const system = parseDexcomTime(r.systemTime);
  if (!system) return null;
  return { timestamp: iso(system.instantMs), timezone_offset: recordOffsetSeconds(system, parseDexcomTime(r.displayTime)) };
}

function toNumber(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'string' && value.trim() !== '') {
    const n = Number(value);
    return Number.isFinite(n) ? n : null;
  }
  return null;
}

/**
 * A glucose value in mg/dL from a Dexcom value and unit. `unknown` (a documented enum value) is read as mg/dL unless
 * it is below 30, which no mg/dL reading can be (the sensor floor is 40) and every mmol/L reading is.
 */
export function glucoseMgdl(value: number, unit: string | null | undefined): number {
  if (unit === 'mmol/L' || (unit !== 'mg/dL' && value < 30)) return mmolToMgdl(value);
  return value;
}

/**
 * One EGV as a `glucose` sample in mg/dL. A value is kept as reported; a `low`/`high` EGV without a value is stored at
 * the sensor bound with `type` `low`/`high`; any other EGV without a value (sensor warm-up, `unknown`) is skipped.
 */
export function mapEgv(r: DexcomEgv): SampleInput | null {
  const time = recordTime(r);
  if (!time) return null;
  const status = r.status ?? null;
  const reported = toNumber(r.value);
  let value: number;
  if (reported !== null) value = glucoseMgdl(reported, r.unit);
  else if (status === 'low') value = EGV_LOW_MGDL;
  else if (status === 'high') value = EGV_HIGH_MGDL;
  else return null;
  return { resource: 'glucose', ...time, value, unit: 'mg/dL', type: status === 'low' || status === 'high' ? status : null };
}

export function mapEgvs(body: DexcomRecordsResponse<DexcomEgv> | undefined): SampleInput[] {
  return (body?.records ?? []).map(mapEgv).filter((s): s is SampleInput => s !== null);
}

/** A calibration (a fingerstick meter value the user entered) as a `glucose` sample in mg/dL. */
export function mapCalibration(r: DexcomCalibration): SampleInput | null {
  const time = recordTime(r);
  const value = toNumber(r.value);
  if (!time || value === null) return null;
  return { resource: 'glucose', ...time, value: glucoseMgdl(value, r.unit), unit: 'mg/dL', type: null };
}

export function mapCalibrations(body: DexcomRecordsResponse<DexcomCalibration> | undefined): SampleInput[] {
  return (body?.records ?? []).map(mapCalibration).filter((s): s is SampleInput => s !== null);
}

/** Dexcom insulin sub-types as our `insulin_injection` sample type (which must be a non-null string). */
const INSULIN_TYPES: Record<string, string> = { fastActing: 'fast_acting', longActing: 'long_acting' };

/**
 * One user-entered event as a sample of ours, or null:
 * - `carbs` (grams) → `carbohydrates` (g);
 * - `insulin` (units) → `insulin_injection` (IU), type `fast_acting` | `long_acting` | `unknown`;
 * - `bloodGlucose` (mg/dL) → `glucose` (mg/dL);
 * - `exercise`, `health`, `notes`, `unknown`: skipped (no resource of ours holds them: exercise is a duration with an
 *   intensity, not a workout; health is illness/stress/cycle/alcohol flags);
 * - `eventStatus: deleted`: skipped (a later pull no longer carries it; our samples cannot be deleted by a pull).
 */
export function mapEvent(r: DexcomEvent): SampleInput | null {
  if (r.eventStatus === 'deleted') return null;
  const time = recordTime(r);
  const value = toNumber(r.value);
  if (!time || value === null) return null;
  switch (r.eventType) {
    case 'carbs':
      return { resource: 'carbohydrates', ...time, value, unit: 'g', type: null };
    case 'insulin':
      return { resource: 'insulin_injection', ...time, value, unit: 'IU', type: INSULIN_TYPES[r.eventSubType ?? ''] ?? 'unknown' };
    case 'bloodGlucose':
      return { resource: 'glucose', ...time, value: glucoseMgdl(value, r.unit), unit: 'mg/dL', type: null };
    default:
      return null;
  }
}

export function mapEvents(body: DexcomRecordsResponse<DexcomEvent> | undefined): SampleInput[] {
  return (body?.records ?? []).map(mapEvent).filter((s): s is SampleInput => s !== null);
}

/** The instants a dataRange window spans for one kind, or null when the user has none of it. */
export function dataRangeSpan(window: DexcomDataRangeWindow | null | undefined): { startMs: number; endMs: number } | null {
  const start = parseDexcomTime(window?.start?.systemTime);
  const end = parseDexcomTime(window?.end?.systemTime);
  if (!start || !end || end.instantMs < start.instantMs) return null;
  return { startMs: start.instantMs, endMs: end.instantMs };
}
