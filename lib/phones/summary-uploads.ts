import { localDate, zoneOffsetSeconds } from '../platform/time';
import type { SummaryInput } from '../wearables/model';
import type { FieldError } from '../../schemas/validator';
import { instant, sourceTypeOf } from './records';
import { healthConnectSport, healthKitSport, type SleepSegment, sleepSummary, uploadedSleepStage, workoutSummary } from './sleep-and-workouts';

/**
 * The items of a phone's summary upload (`POST /v2/summary/{resource}/{user_id}`), mapped to summaries: sleeps with
 * their stages in the platform's ids (HealthKit's raw values from iOS, the Android SDKs' own ids), workouts with the
 * platform's activity type, days of activity, body measurements. The stages and sports map as raw records do
 * (lib/phones/sleep-and-workouts.ts).
 */

export const SUMMARY_UPLOAD_RESOURCES = ['sleep', 'workouts', 'activity', 'body'] as const;
export type SummaryUploadResource = (typeof SUMMARY_UPLOAD_RESOURCES)[number];

export interface SummaryUploadItem {
  id?: string | null;
  start_date?: string;
  end_date?: string;
  date?: string;
  timestamp?: string;
  type?: string | null;
  product_type?: string | null;
  stages?: { start_date: string; end_date: string; stage: number }[];
  sport?: number | string;
  calories?: number | null;
  distance?: number | null;
  average_hr?: number | null;
  max_hr?: number | null;
  steps?: number | null;
  calories_active?: number | null;
  calories_total?: number | null;
  floors_climbed?: number | null;
  weight?: number | null;
  fat?: number | null;
}

const orNull = (v: number | null | undefined) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

export function summariesOfUpload(
  provider: string,
  resource: SummaryUploadResource,
  items: SummaryUploadItem[],
  timeZone: string,
): { summaries: { sourceType: string; summary: SummaryInput }[]; problems: FieldError[] } {
  const problems: FieldError[] = [];
  const summaries: { sourceType: string; summary: SummaryInput }[] = [];
  const problem = (i: number, field: string, msg: string) => problems.push({ loc: ['body', 'data', i, field], msg, type: 'value_error' });
  items.forEach((item, i) => {
    const sourceType = item.type || sourceTypeOf(item);
    const offsetAt = (at: string) => zoneOffsetSeconds(timeZone, new Date(at));
    if (resource === 'sleep' || resource === 'workouts') {
      if (!instant(item.start_date) || !instant(item.end_date)) return problem(i, 'start_date', 'start_date and end_date are required.');
      const [start, end] = [Date.parse(item.start_date), Date.parse(item.end_date)];
      if (end < start) return problem(i, 'end_date', 'end_date must not be before start_date.');
      const offset = offsetAt(item.start_date);
      if (resource === 'sleep') {
        const segments: SleepSegment[] = [];
        for (const [k, s] of (item.stages ?? []).entries()) {
          const stage = uploadedSleepStage(provider, s.stage);
          if (!stage || !instant(s.start_date) || !instant(s.end_date)) {
            return problem(
              i,
              'stages',
              `Stage ${k} needs start_date, end_date and a stage (${provider === 'apple_health_kit' ? "HealthKit's HKCategoryValueSleepAnalysis, 0–5" : 'deep 1, light 2, rem 3, awake 4, out of bed 5'}).`,
            );
          }
          segments.push({ start: Date.parse(s.start_date), end: Date.parse(s.end_date), stage });
        }
        if (!segments.length) segments.push({ start, end, stage: 'asleep' });
        // The session's own span is time in bed around its stages.
        segments.push({ start, end, stage: 'in_bed' });
        summaries.push({ sourceType, summary: sleepSummary(segments, offset, { sourceKey: item.id ?? undefined, sourceType }) });
        return;
      }
      summaries.push({
        sourceType,
        summary: workoutSummary({
          sourceKey: item.id ?? `${sourceType}:${new Date(start).toISOString()}`,
          start,
          end,
          offset,
          sport: provider === 'apple_health_kit' ? healthKitSport(item.sport) : healthConnectSport(item.sport),
          calories: orNull(item.calories),
          distance: orNull(item.distance),
          averageHr: orNull(item.average_hr),
          maxHr: orNull(item.max_hr),
          steps: orNull(item.steps),
        }),
      });
      return;
    }
    if (resource === 'activity') {
      if (!/^\d{4}-\d\d-\d\d$/.test(item.date ?? '')) return problem(i, 'date', 'The local day, YYYY-MM-DD, is required.');
      const day = item.date as string;
      const offset = offsetAt(`${day}T12:00:00Z`);
      summaries.push({
        sourceType,
        summary: {
          resource: 'activity',
          source_key: day,
          calendar_date: day,
          time: new Date(Date.parse(`${day}T00:00:00Z`) - offset * 1000).toISOString(),
          fields: {
            calendar_date: day,
            calories_active: orNull(item.calories_active),
            calories_total: orNull(item.calories_total),
            steps: orNull(item.steps) === null ? null : Math.round(item.steps as number),
            distance: orNull(item.distance),
            floors_climbed: orNull(item.floors_climbed) === null ? null : Math.round(item.floors_climbed as number),
            time_zone: timeZone,
            timezone_offset: offset,
          },
        },
      });
      return;
    }
    if (!instant(item.timestamp)) return problem(i, 'timestamp', 'timestamp is required.');
    const offset = offsetAt(item.timestamp);
    const day = localDate(new Date(item.timestamp), offset);
    summaries.push({
      sourceType,
      summary: {
        resource: 'body',
        source_key: item.id ?? new Date(item.timestamp).toISOString(),
        calendar_date: day,
        time: new Date(item.timestamp).toISOString(),
        fields: { calendar_date: day, weight: orNull(item.weight), fat: orNull(item.fat) },
      },
    });
  });
  return { summaries, problems };
}
