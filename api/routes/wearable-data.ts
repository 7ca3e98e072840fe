import { Type } from '@sinclair/typebox';
import { notFound, ValidationError } from '../../lib/platform/errors';
import { publicBaseUrl } from '../../lib/platform/config';
import { connectProvider } from '../../lib/wearables/workflow-client';
import { ingestProviderData } from '../../lib/wearables/ingest';
import { checkIngestBatch } from '../../lib/wearables/ingest-batch';
import { SUMMARY_WRAPPERS, timeseriesResourceAtPath } from '../../lib/wearables/resources';
import { sampleView, sourceView, summaryView } from '../../lib/wearables/views';
import { ErrorDetail, HTTPValidationError } from '../../schemas/common';
import { UserIdParams } from '../../schemas/user';
import {
  GroupedTimeseriesQuery,
  GroupedTimeseriesResponse,
  IngestBody,
  IngestResponse,
  ProfileQuery,
  ProfileSummary,
  SummaryQuery,
  TimeseriesList,
  TimeseriesQuery,
  WorkoutIdParams,
  WorkoutStream as WorkoutStreamSchema,
} from '../../schemas/wearables';
import { defineRoute } from '../route';
import { decodeCursor, encodeCursor } from '../cursors';
import { jsonArrayStream } from '../json-stream';
import { activeUser } from '../../lib/users/views';

const errors = {
  404: { description: 'Unknown user or resource', schema: ErrorDetail },
  422: { description: 'Validation error', schema: HTTPValidationError },
};
/** Samples per page of the grouped timeseries endpoints. */
const GROUPED_PAGE = 5000;

/** `start_date`/`end_date` as instants: a date alone means 00:00:00 / 23:59:59.999 UTC; no end means now. */
function dateRange(query: { start_date: string; end_date?: string }): { from: Date; to: Date } {
  const instant = (value: string, endOfDay: boolean) => {
    if (/^\d{4}-\d{2}-\d{2}$/.test(value)) return new Date(`${value}T${endOfDay ? '23:59:59.999' : '00:00:00'}Z`);
    return new Date(/[zZ]|[+-]\d{2}:?\d{2}$/.test(value) ? value : `${value}Z`);
  };
  const from = instant(query.start_date, false);
  const to = query.end_date ? instant(query.end_date, true) : new Date(Date.now() + 86_400_000);
  if (Number.isNaN(from.getTime())) throw ValidationError.field(['query', 'start_date'], 'start_date is not a valid date.');
  if (Number.isNaN(to.getTime())) throw ValidationError.field(['query', 'end_date'], 'end_date is not a valid date.');
  if (to < from) throw ValidationError.field(['query', 'end_date'], 'end_date must not be before start_date.', 'value_error.date_order');
  return { from, to };
}

export const wearableDataRoutes = [
  defineRoute({
    operationId: 'ingestData',
    method: 'post',
    path: '/v2/ingest/{user_id}',
    summary: 'Push data from an app (sdk / app providers)',
    description:
      "Stores summaries, timeseries samples and workout streams the customer's app recorded (Apple HealthKit, Health Connect, manual …). " +
      'A sample with the same resource, provider, source type and timestamp replaces the earlier value; a summary with the same id replaces it. ' +
      'Changes publish daily.data.<resource>.created|updated; a resend of what is stored publishes nothing. Every item is validated first: ' +
      'a 422 names each invalid item by index and nothing of the batch is stored. The first push connects the provider.',
    tags: ['Data'],
    auth: 'team',
    params: UserIdParams,
    body: IngestBody,
    responses: { 200: { description: 'What changed', schema: IngestResponse }, ...errors },
    async handler({ params, body, auth, deps }) {
      const user = await activeUser(deps, auth.teamId, params.user_id);
      const data = checkIngestBatch(deps, body, auth.teamId, user._id);
      if (!(await deps.repos.connections.findLive(auth.teamId, user._id, body.provider))) {
        await connectProvider(deps, { teamId: auth.teamId, userId: user._id, provider: body.provider, adapter: 'sdk' });
      }
      const result = await ingestProviderData(deps, { teamId: auth.teamId, user, provider: body.provider, data, announce: true });
      return {
        body: { summaries: result.summaries, samples: result.samples, workout_streams: result.workout_streams, dropped: result.dropped, events: result.events },
      };
    },
  }),
  defineRoute({
    operationId: 'getProfile',
    method: 'get',
    path: '/v2/summary/profile/{user_id}',
    summary: "A user's profile",
    tags: ['Summary'],
    auth: 'team',
    params: UserIdParams,
    query: ProfileQuery,
    responses: { 200: { description: 'Latest profile', schema: ProfileSummary }, ...errors },
    async handler({ params, query, auth, deps }) {
      await activeUser(deps, auth.teamId, params.user_id);
      const doc = await deps.repos.wearableData.latestSummary(auth.teamId, params.user_id, 'profile', query.provider || undefined);
      if (!doc) throw notFound('No profile data for this user.');
      return { body: summaryView(doc, sourceView(deps.providers, publicBaseUrl(deps.config), doc.provider, doc.source_type)) };
    },
  }),
  defineRoute({
    operationId: 'getSummaries',
    method: 'get',
    path: '/v2/summary/{resource}/{user_id}',
    summary: 'Summaries of a user',
    description: 'resource: activity, sleep, workouts, body or meal. Sorted by time; `{<resource>: [...]}` (`{meals: [...]}` for meal).',
    tags: ['Summary'],
    auth: 'team',
    params: Type.Object({ resource: Type.String({ maxLength: 64 }), user_id: Type.String({ format: 'uuid' }) }),
    query: SummaryQuery,
    responses: { 200: { description: 'Summaries', schema: Type.Object({}, { additionalProperties: true }) }, ...errors },
    async handler({ params, query, auth, deps }) {
      const resource = params.resource as keyof typeof SUMMARY_WRAPPERS;
      if (!(resource in SUMMARY_WRAPPERS)) throw notFound(`Unknown summary resource '${params.resource}'; known: ${Object.keys(SUMMARY_WRAPPERS).join(', ')}.`);
      await activeUser(deps, auth.teamId, params.user_id);
      const { from, to } = dateRange(query);
      const docs = await deps.repos.wearableData.findSummaries(auth.teamId, params.user_id, resource, from, to, query.provider || undefined);
      const base = publicBaseUrl(deps.config);
      return { body: { [SUMMARY_WRAPPERS[resource]]: docs.map((d) => summaryView(d, sourceView(deps.providers, base, d.provider, d.source_type))) } };
    },
  }),
  defineRoute({
    operationId: 'getWorkoutStream',
    method: 'get',
    path: '/v2/timeseries/workouts/{workout_id}/stream',
    summary: "A workout's stream",
    description:
      'Parallel arrays (time in unix seconds, heartrate, velocity_smooth, distance, lat, lng …); announced by the shallow daily.data.workout_stream.* event.',
    tags: ['Timeseries'],
    auth: 'team',
    params: WorkoutIdParams,
    responses: { 200: { description: 'Stream', schema: WorkoutStreamSchema }, 404: errors[404] },
    async handler({ params, auth, deps }) {
      const doc = await deps.repos.wearableData.findStream(auth.teamId, params.workout_id);
      if (!doc) throw notFound('No stream for this workout.');
      return { body: doc.stream };
    },
  }),
  defineRoute({
    operationId: 'getTimeseriesGrouped',
    method: 'get',
    path: '/v2/timeseries/{user_id}/{resource}/grouped',
    summary: 'Timeseries, grouped by provider and source',
    description: `Pages of up to ${GROUPED_PAGE} samples: \`{groups: {<provider>: [{source, data}]}, next_cursor}\`.`,
    tags: ['Timeseries'],
    auth: 'team',
    params: Type.Object({ user_id: Type.String({ format: 'uuid' }), resource: Type.String({ maxLength: 64 }) }),
    query: GroupedTimeseriesQuery,
    responses: { 200: { description: 'Samples', schema: GroupedTimeseriesResponse }, ...errors },
    async handler({ params, query, auth, deps }) {
      const resource = timeseriesResourceAtPath(params.resource);
      if (!resource) throw notFound(`Unknown timeseries resource '${params.resource}'.`);
      await activeUser(deps, auth.teamId, params.user_id);
      const { from, to } = dateRange(query);
      const position = decodeCursor<{ at: number; after: string }>(query.next_cursor ?? query.cursor, { at: 'number', after: 'string' });
      const after = position ? { timestamp: new Date(position.at), id: position.after } : undefined;
      const docs = await deps.repos.wearableData.findSamples({
        teamId: auth.teamId,
        userId: params.user_id,
        resource: resource.name,
        from,
        to,
        provider: query.provider || undefined,
        after,
        limit: GROUPED_PAGE + 1,
      });
      const page = docs.slice(0, GROUPED_PAGE);
      const last = page[page.length - 1];
      const next = docs.length > GROUPED_PAGE ? encodeCursor({ at: last.timestamp.getTime(), after: last._id }) : null;
      const base = publicBaseUrl(deps.config);
      const groups: Record<string, { source: unknown; data: unknown[] }[]> = {};
      const bySource = new Map<string, { source: unknown; data: unknown[] }>();
      for (const doc of page) {
        const key = `${doc.provider}:${doc.source_type}`;
        let group = bySource.get(key);
        if (!group) {
          group = { source: sourceView(deps.providers, base, doc.provider, doc.source_type), data: [] };
          bySource.set(key, group);
          (groups[doc.provider] ??= []).push(group);
        }
        group.data.push(sampleView(doc, query.unit));
      }
      return { body: { groups, next, next_cursor: next } };
    },
  }),
  defineRoute({
    operationId: 'getTimeseries',
    method: 'get',
    path: '/v2/timeseries/{user_id}/{resource}',
    summary: 'Timeseries samples',
    description:
      'All samples of the resource in the range, oldest first (body_weight and body_fat read weight and fat). Streamed (chunked, no Content-Length): a database failure after the first byte cuts the response off, so a body that does not parse as JSON is incomplete.',
    tags: ['Timeseries'],
    auth: 'team',
    params: Type.Object({ user_id: Type.String({ format: 'uuid' }), resource: Type.String({ maxLength: 64 }) }),
    query: TimeseriesQuery,
    responses: { 200: { description: 'Samples', schema: TimeseriesList }, ...errors },
    async handler({ params, query, auth, deps }) {
      const resource = timeseriesResourceAtPath(params.resource);
      if (!resource?.flat)
        throw notFound(
          `Unknown timeseries resource '${params.resource}'${resource ? `; read it at /v2/timeseries/{user_id}/${params.resource}/grouped` : ''}.`,
        );
      await activeUser(deps, auth.teamId, params.user_id);
      const { from, to } = dateRange(query);
      const days = deps.repos.wearableData.readSamplesByDay({
        teamId: auth.teamId,
        userId: params.user_id,
        resource: resource.name,
        from,
        to,
        provider: query.provider || undefined,
      });
      // Streamed, a day at a time: a year of minute samples is 525,600 (api/json-stream.ts).
      return { body: await jsonArrayStream(days, (doc) => sampleView(doc, query.unit)), contentType: 'application/json' };
    },
  }),
];
