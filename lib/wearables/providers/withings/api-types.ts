/**
 * Withings payload shapes, with the field names and units of the api-reference (developer.withings.com; copy at
 * api-evangelist/withings openapi/_original/withings-data-api-openapi.yml: measuregrp_object, measure_object,
 * activity_object, workout_object, sleep_summary_object, Sleep v2 - Get, Measure v2 - Getintradayactivity).
 */

export interface WithingsMeasure {
  value: number;
  type: number;
  /** Power of ten: real value = value × 10^unit. */
  unit: number;
  algo?: number;
  fm?: number;
  position?: number;
}
export interface WithingsMeasureGroup {
  grpid: number;
  attrib?: number;
  /** Epoch seconds when the measures were taken. */
  date: number;
  created?: number;
  modified?: number;
  category?: number;
  deviceid?: string | null;
  hash_deviceid?: string | null;
  measures: WithingsMeasure[];
  model?: string;
  model_id?: number;
  comment?: string | null;
}
export interface GetmeasBody {
  updatetime?: number | string;
  timezone?: string;
  measuregrps?: WithingsMeasureGroup[];
  more?: number | boolean;
  offset?: number;
}
export interface WithingsActivity {
  date: string;
  timezone?: string;
  deviceid?: string | null;
  hash_deviceid?: string | null;
  brand?: number;
  is_tracker?: boolean;
  modified?: number;
  steps?: number;
  distance?: number;
  elevation?: number;
  soft?: number;
  moderate?: number;
  intense?: number;
  active?: number;
  calories?: number;
  totalcalories?: number;
  hr_average?: number;
  hr_min?: number;
  hr_max?: number;
  hr_zone_0?: number;
  hr_zone_1?: number;
  hr_zone_2?: number;
  hr_zone_3?: number;
}
export interface WithingsWorkout {
  id: number;
  category: number;
  timezone?: string;
  model?: number;
  attrib?: number;
  startdate: number;
  enddate: number;
  date?: string;
  modified?: number;
  deviceid?: string | null;
  data?: Partial<
    Record<
      | 'calories'
      | 'intensity'
      | 'manual_intensity'
      | 'manual_distance'
      | 'manual_calories'
      | 'hr_average'
      | 'hr_min'
      | 'hr_max'
      | 'hr_zone_0'
      | 'hr_zone_1'
      | 'hr_zone_2'
      | 'hr_zone_3'
      | 'pause_duration'
      | 'algo_pause_duration'
      | 'spo2_average'
      | 'steps'
      | 'distance'
      | 'elevation'
      | 'pool_laps'
      | 'strokes'
      | 'pool_length',
      number | null
    >
  >;
}
export interface WithingsIntradayEntry {
  deviceid?: string;
  model?: string;
  model_id?: number;
  steps?: number;
  elevation?: number;
  calories?: number;
  distance?: number;
  stroke?: number;
  pool_lap?: number;
  duration?: number;
  heart_rate?: number;
  spo2_auto?: number;
}

// ---- Sleep (Sleep v2 - Getsummary, Get) ---------------------------------------------------------------------------

export interface WithingsSleepSummary {
  id: number;
  timezone?: string;
  model?: number;
  model_id?: number;
  startdate: number;
  enddate: number;
  date?: string;
  created?: number;
  modified?: number;
  hash_deviceid?: string | null;
  completed?: boolean;
  data?: Partial<Record<string, number | null>>;
}
export interface WithingsSleepSegment {
  startdate: number;
  enddate: number;
  /** 0 awake, 1 light, 2 deep, 3 REM, 4 manual, 5 unspecified, 15 out of bed (Sleep v2 - Get). */
  state: number;
  model?: string | number;
  model_id?: number;
  hash_deviceid?: string | null;
  hr?: Record<string, number>;
  rr?: Record<string, number>;
  snoring?: Record<string, number>;
  sdnn_1?: Record<string, number>;
  rmssd?: Record<string, number>;
  hrv_quality?: Record<string, number>;
}
