/**
 * Dexcom API v3 JSON (developer.dexcom.com/docs/dexcomv3: getEstimatedGlucoseValuesV3, getCalibrationsV3, getEventsV3,
 * getDataRangeV3; api-evangelist/dexcom `openapi/dexcom-dexcom-api.yml`). Every field optional: mapping.ts checks.
 */

export interface DexcomRecordBase {
  recordId?: string;
  systemTime?: string;
  displayTime?: string;
  transmitterId?: string | null;
  transmitterGeneration?: string;
  displayDevice?: string | null;
}

export interface DexcomEgv extends DexcomRecordBase {
  transmitterTicks?: number;
  value?: number | null;
  status?: 'unknown' | 'high' | 'low' | 'ok' | null;
  trend?: string | null;
  trendRate?: number | null;
  unit?: string;
  rateUnit?: string;
}

export interface DexcomCalibration extends DexcomRecordBase {
  transmitterTicks?: number;
  value?: number | null;
  unit?: string;
}

export interface DexcomEvent extends DexcomRecordBase {
  eventType?: string;
  eventSubType?: string | null;
  value?: number | string | null;
  unit?: string | null;
  eventStatus?: 'created' | 'updated' | 'deleted';
}

export interface DexcomRecordsResponse<T> {
  recordType?: string;
  recordVersion?: string;
  userId?: string;
  records?: T[];
}

export interface DexcomDataRangeMoment {
  systemTime?: string | null;
  displayTime?: string | null;
}

export interface DexcomDataRangeWindow {
  start?: DexcomDataRangeMoment | null;
  end?: DexcomDataRangeMoment | null;
}

export interface DexcomDataRange {
  recordType?: string;
  recordVersion?: string;
  userId?: string;
  calibrations?: DexcomDataRangeWindow | null;
  egvs?: DexcomDataRangeWindow | null;
  events?: DexcomDataRangeWindow | null;
}
