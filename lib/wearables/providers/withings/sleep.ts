import { isoLocal } from '../../../platform/time';
import type { SampleInput, SummaryInput } from '../../model';
import type { WithingsSleepSegment, WithingsSleepSummary } from './api-types';
import { interval, num, point, round } from './mapping';
import { localDate, offsetSecondsAt, utcIso, utcMidnightOf } from './time';

/** Pure mapping of Withings' sleep payloads (Sleep v2 - Getsummary and Get); the rest is in mapping.ts. */

// ---- Sleep (getsummary, get) --------------------------------------------------------------------------------------

/** The data_fields the sleep pull asks getsummary for (sleep_summary_object). sdnn_1 is SDNN: never asked for, never used. */
export const SLEEP_SUMMARY_FIELDS = [
  'total_timeinbed',
  'total_sleep_time',
  'asleepduration',
  'lightsleepduration',
  'remsleepduration',
  'deepsleepduration',
  'sleep_efficiency',
  'sleep_latency',
  'wakeup_latency',
  'wakeupduration',
  'wakeupcount',
  'waso',
  'nb_rem_episodes',
  'out_of_bed_count',
  'hr_average',
  'hr_min',
  'hr_max',
  'rr_average',
  'rr_min',
  'rr_max',
  'breathing_disturbances_intensity',
  'snoring',
  'snoringepisodecount',
  'sleep_score',
  'rmssd_start_avg',
  'rmssd_end_avg',
];

/** A night of at least this long is a `long_sleep`; shorter ones are `short_sleep` (Withings has no nap flag). */
const LONG_SLEEP_SECONDS = 3 * 3600;

/**
 * One getsummary record → a `sleep` summary keyed by the Withings sleep id. The offset is that of the record's
 * `timezone` at `startdate`, applied once: `time` is the UTC instant of `startdate`, `bedtime_start`/`bedtime_stop` the
 * same instants written in local time. `average_hrv` is RMSSD: the mean of Withings' `rmssd_start_avg` and
 * `rmssd_end_avg` (the RMSSD averages at the start and end of the night; the summary has no whole-night RMSSD and SDNN
 * is never used). `sleep_efficiency` is a ratio ("total sleep time over time in bed") made a percentage.
 */
export function mapSleepSummary(s: WithingsSleepSummary, fallbackOffset: number): SummaryInput {
  const offset = offsetSecondsAt(s.timezone, s.startdate, fallbackOffset);
  const d = s.data ?? {};
  const light = num(d.lightsleepduration) ?? 0;
  const deep = num(d.deepsleepduration) ?? 0;
  const rem = num(d.remsleepduration) ?? 0;
  const total = num(d.total_sleep_time) ?? (light + deep + rem || num(d.asleepduration) || 0);
  const duration = Math.max(0, s.enddate - s.startdate);
  const efficiency = num(d.sleep_efficiency);
  const rmssd = [num(d.rmssd_start_avg), num(d.rmssd_end_avg)].filter((x): x is number => x !== null);
  const calendarDate = s.date ?? localDate(s.enddate, offset);
  return {
    resource: 'sleep',
    source_key: String(s.id),
    calendar_date: calendarDate,
    time: utcIso(s.startdate),
    fields: {
      date: utcMidnightOf(calendarDate),
      calendar_date: calendarDate,
      bedtime_start: isoLocal(s.startdate * 1000, offset),
      bedtime_stop: isoLocal(s.enddate * 1000, offset),
      type: duration >= LONG_SLEEP_SECONDS ? 'long_sleep' : 'short_sleep',
      state: s.completed === false ? 'tentative' : 'confirmed',
      timezone_offset: offset,
      duration,
      total,
      awake: num(d.wakeupduration) ?? Math.max(0, duration - total),
      light,
      rem,
      deep,
      score: num(d.sleep_score),
      hr_lowest: num(d.hr_min),
      hr_average: num(d.hr_average),
      hr_resting: null,
      efficiency: efficiency === null ? null : round(efficiency <= 1 ? efficiency * 100 : efficiency, 1),
      latency: num(d.sleep_latency) ?? num(d.durationtosleep),
      temperature_delta: null,
      average_hrv: rmssd.length ? round(rmssd.reduce((a, b) => a + b, 0) / rmssd.length, 1) : null,
      respiratory_rate: num(d.rr_average),
    },
  };
}

/** Sleep v2 - Get `state` → our hypnogram stage (deep=1, light=2, rem=3, awake=4, manual=5, missing_data=-1). */
export const SLEEP_STATE_TO_STAGE: Record<number, number> = { 0: 4, 1: 2, 2: 1, 3: 3, 4: 5, 5: -1, 15: 4 };

/** The data_fields the sleep pull asks Sleep v2 - Get for: HR, respiration, RMSSD. */
export const SLEEP_SERIES_FIELDS = ['hr', 'rr', 'rmssd'];

/**
 * Sleep v2 - Get segments → hypnogram intervals (one per state segment), heartrate, respiratory_rate and hrv points.
 * HRV is the `rmssd` series (RMSSD, ms); the `sdnn_1` series (SDNN) is ignored even when present. The series carries no
 * time zone: offsets are null (the user's fallback fills them in).
 */
export function mapSleepSeries(segments: WithingsSleepSegment[] | undefined): SampleInput[] {
  const out: SampleInput[] = [];
  const seen = new Set<string>();
  const add = (s: SampleInput) => {
    const key = `${s.resource}@${s.timestamp}`;
    if (!seen.has(key)) seen.add(key), out.push(s);
  };
  for (const seg of segments ?? []) {
    const stage = SLEEP_STATE_TO_STAGE[seg.state];
    if (stage !== undefined && seg.enddate > seg.startdate) add(interval('hypnogram', seg.startdate, seg.enddate, stage, null));
    for (const [resource, series] of [
      ['heartrate', seg.hr],
      ['respiratory_rate', seg.rr],
      ['hrv', seg.rmssd],
    ] as const) {
      for (const [ts, value] of Object.entries(series ?? {})) {
        if (num(value) !== null && Number.isFinite(Number(ts))) add(point(resource, Number(ts), value, null));
      }
    }
  }
  return out;
}
