import { ValidationError } from '../platform/errors';
import { ActivitySummary, BodySummary, type IngestBody, MealSummary, ProfileSummary, SleepSummary, WorkoutSummary } from '../../schemas/wearables';
import { toFieldErrors, validatorFor, type FieldError } from '../../schemas/validator';
import type { ProviderData, SampleInput, SummaryInput, SummaryResource, WorkoutStream } from './model';
import type { ProviderCatalogue } from './provider-catalogue';
import { timeseriesResource } from './resources';

/**
 * The checks of data an app or a phone pushes (POST /v2/ingest, a phone's uploads and records) before anything of it
 * is stored: one place, so every way in refuses the same things with the same words.
 */

/** The client-facing schema of each summary resource (what SDK-pushed summaries must satisfy too). */
const SUMMARY_SCHEMAS = {
  activity: ActivitySummary,
  sleep: SleepSummary,
  workouts: WorkoutSummary,
  body: BodySummary,
  profile: ProfileSummary,
  meal: MealSummary,
} as const;
/**
 * Measures a resource holds besides its own, told apart by each sample's unit: heart rate variability is RMSSD, and
 * Apple's (SDNN, a different measure) is stored in it as `sdnn`, never as RMSSD.
 */
const OTHER_MEASURES: Record<string, string[]> = { hrv: ['sdnn'] };

/** Which field anchors a summary in time, and is its default id. */
const SUMMARY_ANCHOR: Record<SummaryResource, string | null> = {
  activity: null,
  body: null,
  profile: null,
  sleep: 'bedtime_start',
  workouts: 'time_start',
  meal: 'timestamp',
};

/**
 * Checks every item of an ingestion batch beyond its JSON Schema (resource supported by the provider, value vs
 * interval vs blood pressure fields, the resource's unit, summary fields) and converts it. All problems are
 * reported at once, by index; nothing is stored when any item is invalid.
 */
export function checkIngestBatch(deps: { providers: ProviderCatalogue }, body: IngestBody, _teamId: string, userId: string): ProviderData {
  const problems: FieldError[] = [];
  const at = (loc: (string | number)[], msg: string, type = 'value_error') => problems.push({ loc: ['body', ...loc], msg, type });
  const entry = deps.providers.find(body.provider);
  if (!entry) at(['provider'], `Unknown provider '${body.provider}' (GET /v2/providers lists them).`);
  else if (entry.auth_type !== 'sdk' && entry.auth_type !== 'app')
    at(
      ['provider'],
      `${body.provider} is a ${entry.auth_type} provider: its data is pulled, not pushed. Push data for sdk or app providers (e.g. apple_health_kit, health_connect, manual).`,
    );
  const supported = new Set(entry?.supported_resources ?? []);
  const samples: SampleInput[] = [];
  (body.samples ?? []).forEach((item, i) => {
    const resource = timeseriesResource(item.resource);
    if (!resource) return at(['samples', i, 'resource'], `'${item.resource}' is not a timeseries resource.`);
    if (entry && !supported.has(item.resource)) return at(['samples', i, 'resource'], `${body.provider} does not provide ${item.resource}.`);
    const otherMeasure = item.unit !== undefined && OTHER_MEASURES[item.resource]?.includes(item.unit);
    if (item.unit !== undefined && item.unit !== resource.unit && !otherMeasure)
      at(['samples', i, 'unit'], `${item.resource} samples are in ${resource.unit}.`);
    if (item.resource === 'blood_pressure') {
      if (item.systolic === undefined) at(['samples', i, 'systolic'], 'Field required for blood_pressure.', 'missing');
      if (item.diastolic === undefined) at(['samples', i, 'diastolic'], 'Field required for blood_pressure.', 'missing');
    } else if (item.value === undefined) at(['samples', i, 'value'], 'Field required.', 'missing');
    if (resource.interval) {
      if (!item.start || !item.end)
        at(['samples', i, item.start ? 'end' : 'start'], `${item.resource} samples cover an interval: start and end are required.`, 'missing');
      else if (Date.parse(item.end) < Date.parse(item.start)) at(['samples', i, 'end'], 'end must not be before start.');
    }
    samples.push({
      ...item,
      unit: otherMeasure ? (item.unit as string) : resource.unit,
      timestamp: resource.interval && item.start ? item.start : item.timestamp,
    });
  });
  const summaries: SummaryInput[] = [];
  (body.summaries ?? []).forEach((item, i) => {
    const { resource, id, calendar_date, ...fields } = item as typeof item & Record<string, unknown>;
    if (entry && !supported.has(resource)) return at(['summaries', i, 'resource'], `${body.provider} does not provide ${resource}.`);
    const anchor = SUMMARY_ANCHOR[resource];
    const time = anchor ? (fields[anchor] as string | undefined) : `${calendar_date}T00:00:00Z`;
    const candidate = {
      date: `${calendar_date}T00:00:00+00:00`,
      ...fields,
      calendar_date,
      id: 'x',
      user_id: userId,
      source: { provider: body.provider },
      created_at: new Date().toISOString(),
      updated_at: new Date().toISOString(),
    };
    const validate = validatorFor(SUMMARY_SCHEMAS[resource]);
    if (!validate(candidate))
      return problems.push(...toFieldErrors('body', validate.errors).map((e) => ({ ...e, loc: ['body', 'summaries', i, ...e.loc.slice(1)] })));
    if (!time || Number.isNaN(Date.parse(time))) return at(['summaries', i, anchor ?? 'calendar_date'], 'A valid date-time is required here.', 'missing');
    summaries.push({
      resource,
      source_key: id ?? (anchor ? time : resource === 'profile' ? 'profile' : calendar_date),
      calendar_date,
      time,
      fields: { date: candidate.date, ...fields, calendar_date },
    });
  });
  const workoutStreams = (body.workout_streams ?? []).map((s, i) => {
    if (!Array.isArray(s.stream.time) || s.stream.time.some((t) => typeof t !== 'number'))
      at(['workout_streams', i, 'stream', 'time'], 'time (unix seconds, no nulls) is required.', 'missing');
    return { workout_source_key: s.workout_id, stream: s.stream as unknown as WorkoutStream };
  });
  if (problems.length) throw new ValidationError(problems);
  return { source_type: body.source_type ?? 'unknown', summaries, samples, workout_streams: workoutStreams };
}
