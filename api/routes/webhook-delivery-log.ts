import { listAttempts, listEventDeliveries, listEvents, toAttempt, toDelivery, toEvent } from '../../lib/events/delivery-log';
import { EVENT_CATALOGUE } from '../../schemas/event-catalogue';
import {
  CursorQuery,
  EventListQuery,
  EventParams,
  EventTypeList,
  WebhookAttemptList,
  WebhookDeliveryList,
  WebhookEnvParams,
  WebhookEventList,
} from '../../schemas/webhook';
import { defineRoute } from '../route';
import { webhookDestinationLogRoutes } from './webhooks';
import { afterCursor, cursorPageBody } from '../cursors';
import { WEBHOOK_ROUTES_BASE as base, WEBHOOK_TAGS as tags, webhookErrors as errors, webhookTeam as scope } from '../management-scope';

/** The delivery log of a team's webhooks (events, deliveries, attempts), and resending and recovering deliveries. */

export const webhookDeliveryLogRoutes = [
  defineRoute({
    operationId: 'listEventTypes',
    method: 'get',
    path: `${base}/event_types`,
    summary: 'List event types',
    description: 'The catalogue of event types this service emits, with the JSON Schema of each `data`. The set is open: tolerate unknown types.',
    tags,
    auth: 'management',
    params: WebhookEnvParams,
    responses: { 200: { description: 'Event types', schema: EventTypeList }, ...errors },
    async handler({ auth, params, deps }) {
      await scope(deps, auth, params);
      return { body: { data: EVENT_CATALOGUE.map((e) => ({ name: e.name, description: e.description, schema: e.schema })) } };
    },
  }),
  defineRoute({
    operationId: 'listWebhookEvents',
    method: 'get',
    path: `${base}/events`,
    summary: 'List events (delivery log)',
    description: 'Events published to this team, newest first; filter by event_type, user_id and a [since, until) window.',
    tags,
    auth: 'management',
    params: WebhookEnvParams,
    query: EventListQuery,
    responses: { 200: { description: 'Events', schema: WebhookEventList }, ...errors },
    async handler({ auth, params, query, deps }) {
      const teamId = await scope(deps, auth, params);
      const page = await listEvents(
        deps.repos.webhookStore,
        teamId,
        {
          eventType: query.event_type,
          userId: query.user_id,
          since: query.since ? new Date(query.since) : undefined,
          until: query.until ? new Date(query.until) : undefined,
        },
        afterCursor(query.next_cursor),
        query.limit,
      );
      return { body: cursorPageBody(page, toEvent) };
    },
  }),
  defineRoute({
    operationId: 'listEventAttempts',
    method: 'get',
    path: `${base}/events/{event_id}/attempts`,
    summary: 'List delivery attempts of an event',
    tags,
    auth: 'management',
    params: EventParams,
    query: CursorQuery,
    responses: { 200: { description: 'Attempts, newest first', schema: WebhookAttemptList }, ...errors },
    async handler({ auth, params, query, deps }) {
      const teamId = await scope(deps, auth, params);
      const page = await listAttempts(
        deps.repos.webhookStore,
        teamId,
        { eventId: params.event_id },
        afterCursor(query.next_cursor),
        query.limit,
        deps.repos.pipelineBatches,
      );
      return { body: cursorPageBody(page, toAttempt) };
    },
  }),
  defineRoute({
    operationId: 'listEventDeliveries',
    method: 'get',
    path: `${base}/events/{event_id}/deliveries`,
    summary: 'List deliveries of an event',
    description: 'Its delivery to each webhook and pipeline it reached (webhook_id names either), with status and next retry.',
    tags,
    auth: 'management',
    params: EventParams,
    query: CursorQuery,
    responses: { 200: { description: 'Deliveries', schema: WebhookDeliveryList }, ...errors },
    async handler({ auth, params, query, deps }) {
      const teamId = await scope(deps, auth, params);
      const batches = { store: deps.repos.pipelineBatches, pipelineIds: await deps.repos.pipelines.pipelineIdsOfTeam(teamId) };
      const page = await listEventDeliveries(deps.repos.webhookStore, teamId, params.event_id, afterCursor(query.next_cursor), query.limit, batches);
      return { body: cursorPageBody(page, toDelivery) };
    },
  }),
  ...webhookDestinationLogRoutes,
];
