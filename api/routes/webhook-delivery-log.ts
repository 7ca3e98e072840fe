import { badRequest } from '../../lib/platform/errors';
import { deliveryFilter, listAttempts, listDeliveries, listEventDeliveries, listEvents, toAttempt, toDelivery, toEvent } from '../../lib/webhooks/delivery-log';
import { ErrorDetail } from '../../schemas/common';
import { EVENT_CATALOGUE } from '../../schemas/event-catalogue';
import {
  AttemptListQuery,
  CursorQuery,
  DeliveryListQuery,
  EventListQuery,
  EventParams,
  EventTypeList,
  RecoverAccepted,
  RecoverBody,
  ResendAccepted,
  WebhookAttemptList,
  WebhookDeliveryList,
  WebhookEnvParams,
  WebhookEventList,
  WebhookEventParams,
  WebhookParams,
} from '../../schemas/webhook';
import { defineRoute } from '../route';
import { afterCursor, cursorPageBody } from '../cursors';
import { audited } from '../../lib/tenancy/audit';
import { endpointInTeam, recoverFailed, resendEvent, webhookTarget } from '../../lib/webhooks/endpoint-requests';
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
        { eventType: query.event_type, userId: query.user_id, since: query.since ? new Date(query.since) : undefined, until: query.until ? new Date(query.until) : undefined },
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
      const page = await listAttempts(deps.repos.webhookStore, teamId, { eventId: params.event_id }, afterCursor(query.next_cursor), query.limit);
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
      const page = await listEventDeliveries(deps.repos.webhookStore, teamId, params.event_id, afterCursor(query.next_cursor), query.limit);
      return { body: cursorPageBody(page, toDelivery) };
    },
  }),
  defineRoute({
    operationId: 'listWebhookAttempts',
    method: 'get',
    path: `${base}/{webhook_id}/attempts`,
    summary: 'List delivery attempts to a webhook',
    tags,
    auth: 'management',
    params: WebhookParams,
    query: AttemptListQuery,
    responses: { 200: { description: 'Attempts, newest first', schema: WebhookAttemptList }, ...errors },
    async handler({ auth, params, query, deps }) {
      const teamId = await scope(deps, auth, params);
      await endpointInTeam(deps, teamId, params.webhook_id);
      const page = await listAttempts(
        deps.repos.webhookStore,
        teamId,
        { endpointId: params.webhook_id, eventId: query.event_id },
        afterCursor(query.next_cursor),
        query.limit,
      );
      return { body: cursorPageBody(page, toAttempt) };
    },
  }),
  defineRoute({
    operationId: 'listWebhookDeliveries',
    method: 'get',
    path: `${base}/{webhook_id}/deliveries`,
    summary: 'List deliveries to a webhook',
    description: 'Pending (queued or waiting to retry) and finished deliveries, newest first; filter by status, event_type, user_id and a [since, until) window.',
    tags,
    auth: 'management',
    params: WebhookParams,
    query: DeliveryListQuery,
    responses: { 200: { description: 'Deliveries', schema: WebhookDeliveryList }, ...errors },
    async handler({ auth, params, query, deps }) {
      const teamId = await scope(deps, auth, params);
      await endpointInTeam(deps, teamId, params.webhook_id);
      const page = await listDeliveries(
        deps.repos.webhookStore,
        teamId,
        params.webhook_id,
        deliveryFilter(query),
        afterCursor(query.next_cursor),
        query.limit,
      );
      return { body: cursorPageBody(page, toDelivery) };
    },
  }),
  defineRoute({
    operationId: 'resendWebhookEvent',
    method: 'post',
    path: `${base}/{webhook_id}/events/{event_id}/resend`,
    summary: 'Resend an event to a webhook',
    description: 'One manual attempt (not rescheduled on failure), with the same webhook-id as the original delivery.',
    tags,
    auth: 'management',
    params: WebhookEventParams,
    responses: { 202: { description: 'Queued', schema: ResendAccepted }, 409: { description: 'Webhook disabled', schema: ErrorDetail }, ...errors },
    async handler({ auth, params, deps, requestId, log }) {
      const teamId = await scope(deps, auth, params);
      const endpoint = await endpointInTeam(deps, teamId, params.webhook_id);
      // The target is the event as sent to this webhook: `<webhook id>:<event id>`.
      await audited(
        { deps, auth, requestId, log },
        { action: 'webhook.event.resend', type: 'webhook_event', id: `${endpoint._id}:${params.event_id}`, teamId },
        () => resendEvent(deps, endpoint, params.event_id),
      );
      return { status: 202, body: { event_id: params.event_id, webhook_id: endpoint._id } };
    },
  }),
  defineRoute({
    operationId: 'recoverWebhook',
    method: 'post',
    path: `${base}/{webhook_id}/recover`,
    summary: 'Recover failed deliveries',
    description: 'Resends every failed delivery to this webhook whose event was delivered in [since, until) (until defaults to now).',
    tags,
    auth: 'management',
    params: WebhookParams,
    body: RecoverBody,
    responses: { 202: { description: 'Queued', schema: RecoverAccepted }, 409: { description: 'Webhook disabled', schema: ErrorDetail }, ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      const teamId = await scope(deps, auth, params);
      const endpoint = await endpointInTeam(deps, teamId, params.webhook_id);
      const since = new Date(body.since);
      const until = body.until ? new Date(body.until) : undefined;
      if (until && until <= since) throw badRequest('until must be after since.');
      const resent = await audited(
        { deps, auth, requestId, log },
        webhookTarget('webhook.recover', teamId, endpoint._id),
        () => recoverFailed(deps, endpoint, since, until),
        Object.keys(body),
      );
      return { status: 202, body: { resent } };
    },
  }),
];
