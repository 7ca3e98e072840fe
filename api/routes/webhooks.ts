import { randomUUID } from 'node:crypto';
import { ApiError, badRequest, ValidationError } from '../../lib/errors';
import { publishEvent } from '../../lib/events';
import { eventData, type AttemptDoc, type EventDoc } from '../../lib/repositories/webhooks';
import { isoWithOffset } from '../../lib/time';
import { generateSecret, isValidSecret } from '../../lib/webhook-signing';
import { ErrorDetail, HTTPValidationError } from '../../schemas/common';
import { EVENT_CATALOGUE, findEventType } from '../../schemas/event-catalogue';
import {
  AttemptListQuery,
  CursorQuery,
  DeliveryListQuery,
  EventAccepted,
  EventListQuery,
  EventParams,
  EventTypeList,
  RecoverAccepted,
  RecoverBody,
  ResendAccepted,
  Webhook,
  WebhookAttemptList,
  WebhookCreateBody,
  WebhookDeliveryList,
  WebhookEnvParams,
  WebhookEventList,
  WebhookEventParams,
  WebhookHeaders,
  WebhookList,
  WebhookParams,
  WebhookPatchBody,
  WebhookSecret,
  WebhookTestBody,
} from '../../schemas/webhook';
import type { AppDeps } from '../deps';
import type { ManagementPrincipal } from '../middleware/auth';
import { defineRoute } from '../route';
import {
  assertThisEnvironment,
  assertUrlAllowed,
  decodeCursor,
  endpointInTeam,
  recoverFailed,
  pageBody,
  resendEvent,
  toWebhook,
} from '../services/webhooks';
import { teamInScope } from './management';

const tags = ['Management: webhooks'];
const base = '/v1/org/{org_id}/team/{team_id}/{environment}/webhook';
const errors = {
  400: { description: 'Another environment', schema: ErrorDetail },
  401: { description: 'Missing or invalid management key', schema: ErrorDetail },
  403: { description: 'The key may not act on this team', schema: ErrorDetail },
  404: { description: 'Not found', schema: ErrorDetail },
  422: { description: 'Validation error (including a refused URL)', schema: HTTPValidationError },
};

async function scope(deps: AppDeps, auth: ManagementPrincipal, params: { team_id: string; environment: string }): Promise<string> {
  await teamInScope(deps, auth, params.team_id);
  assertThisEnvironment(deps, params.environment);
  return params.team_id;
}

const toEvent = (e: EventDoc) => ({
  id: e._id,
  event_type: e.event_type,
  team_id: e.team_id,
  user_id: e.user_id,
  client_user_id: e.client_user_id,
  data: eventData(e),
  created_at: isoWithOffset(e.created_at),
});
const toAttempt = (a: AttemptDoc) => ({
  id: a._id,
  event_id: a.event_id,
  webhook_id: a.endpoint_id,
  attempt: a.attempt,
  trigger: a.trigger,
  timestamp: isoWithOffset(a.timestamp),
  duration_ms: a.duration_ms,
  status_code: a.status_code,
  error_class: a.error_class,
  response_body: a.response_body,
});

export const webhookRoutes = [
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
      const cursor = decodeCursor(query.next_cursor);
      const page = await deps.repos.webhooks.listEvents(
        teamId,
        { eventType: query.event_type, userId: query.user_id, since: query.since ? new Date(query.since) : undefined, until: query.until ? new Date(query.until) : undefined },
        cursor && { created_at: cursor.at, id: cursor.id },
        query.limit,
      );
      return { body: pageBody(page, toEvent, (e) => e.created_at) };
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
      const cursor = decodeCursor(query.next_cursor);
      const page = await deps.repos.webhooks.listAttempts(teamId, { eventId: params.event_id }, cursor && { timestamp: cursor.at, id: cursor.id }, query.limit);
      return { body: pageBody(page, toAttempt, (a) => a.timestamp) };
    },
  }),
  defineRoute({
    operationId: 'listWebhooks',
    method: 'get',
    path: base,
    summary: 'List webhooks',
    tags,
    auth: 'management',
    params: WebhookEnvParams,
    query: CursorQuery,
    responses: { 200: { description: 'Webhooks', schema: WebhookList }, ...errors },
    async handler({ auth, params, query, deps }) {
      const teamId = await scope(deps, auth, params);
      const cursor = decodeCursor(query.next_cursor);
      const page = await deps.repos.webhooks.listEndpoints(teamId, cursor && { created_at: cursor.at, id: cursor.id }, query.limit);
      return { body: pageBody(page, toWebhook, (e) => e.created_at) };
    },
  }),
  defineRoute({
    operationId: 'createWebhook',
    method: 'post',
    path: base,
    summary: 'Create webhook',
    description:
      'URL rules: https only in production; hosts resolving to private, link-local or cloud-metadata addresses are refused (at ' +
      'creation and again at every delivery); loopback is refused in production and allowed in sandbox by default; ' +
      'WEBHOOK_URL_ALLOWLIST admits specific host:port receivers. A refused URL is a 422 naming the reason.',
    tags,
    auth: 'management',
    params: WebhookEnvParams,
    body: WebhookCreateBody,
    responses: { 200: { description: 'The webhook', schema: Webhook }, ...errors },
    async handler({ auth, params, body, deps }) {
      const teamId = await scope(deps, auth, params);
      await assertUrlAllowed(deps, body.url);
      if (body.secret !== undefined && !isValidSecret(body.secret)) {
        throw ValidationError.field(['body', 'secret'], 'A secret is `whsec_` followed by base64 of 24 to 64 random bytes.');
      }
      const now = new Date();
      const doc = await deps.repos.webhooks.createEndpoint({
        _id: randomUUID(),
        team_id: teamId,
        url: body.url,
        description: body.description,
        filter_types: body.filter_types,
        disabled: body.disabled,
        disabled_reason: body.disabled ? 'manual' : null,
        rate_limit: body.rate_limit ?? null,
        headers: {},
        secrets: [{ key: body.secret ?? generateSecret(), created_at: now, expires_at: null }],
        failing_since: null,
        created_at: now,
        updated_at: now,
      });
      return { body: toWebhook(doc) };
    },
  }),
  defineRoute({
    operationId: 'getWebhook',
    method: 'get',
    path: `${base}/{webhook_id}`,
    summary: 'Get webhook',
    tags,
    auth: 'management',
    params: WebhookParams,
    responses: { 200: { description: 'The webhook', schema: Webhook }, ...errors },
    async handler({ auth, params, deps }) {
      const teamId = await scope(deps, auth, params);
      return { body: toWebhook(await endpointInTeam(deps, teamId, params.webhook_id)) };
    },
  }),
  defineRoute({
    operationId: 'updateWebhook',
    method: 'patch',
    path: `${base}/{webhook_id}`,
    summary: 'Update webhook',
    description: 'Re-enabling (disabled=false) resets the failure clock.',
    tags,
    auth: 'management',
    params: WebhookParams,
    body: WebhookPatchBody,
    responses: { 200: { description: 'The webhook', schema: Webhook }, ...errors },
    async handler({ auth, params, body, deps }) {
      const teamId = await scope(deps, auth, params);
      await endpointInTeam(deps, teamId, params.webhook_id);
      if (body.url !== undefined) await assertUrlAllowed(deps, body.url);
      const set: Record<string, unknown> = { ...body };
      if (body.disabled === true) set.disabled_reason = 'manual';
      if (body.disabled === false) Object.assign(set, { disabled_reason: null, failing_since: null });
      const doc = await deps.repos.webhooks.updateEndpoint(teamId, params.webhook_id, set);
      if (!doc) throw new ApiError(404, `Webhook ${params.webhook_id} not found.`);
      return { body: toWebhook(doc) };
    },
  }),
  defineRoute({
    operationId: 'deleteWebhook',
    method: 'delete',
    path: `${base}/{webhook_id}`,
    summary: 'Delete webhook',
    description: 'Pending deliveries to it are cancelled.',
    tags,
    auth: 'management',
    params: WebhookParams,
    responses: { 204: { description: 'Deleted' }, ...errors },
    async handler({ auth, params, deps }) {
      const teamId = await scope(deps, auth, params);
      if (!(await deps.repos.webhooks.deleteEndpoint(teamId, params.webhook_id))) throw new ApiError(404, `Webhook ${params.webhook_id} not found.`);
      return { status: 204 };
    },
  }),
  defineRoute({
    operationId: 'getWebhookHeaders',
    method: 'get',
    path: `${base}/{webhook_id}/headers`,
    summary: 'Get custom headers',
    tags,
    auth: 'management',
    params: WebhookParams,
    responses: { 200: { description: 'Headers', schema: WebhookHeaders }, ...errors },
    async handler({ auth, params, deps }) {
      const teamId = await scope(deps, auth, params);
      return { body: { headers: (await endpointInTeam(deps, teamId, params.webhook_id)).headers } };
    },
  }),
  defineRoute({
    operationId: 'setWebhookHeaders',
    method: 'put',
    path: `${base}/{webhook_id}/headers`,
    summary: 'Replace custom headers',
    description: 'Sent with every delivery. content-type, content-length, host and the webhook-*/svix-* signature headers cannot be set.',
    tags,
    auth: 'management',
    params: WebhookParams,
    body: WebhookHeaders,
    responses: { 200: { description: 'Headers', schema: WebhookHeaders }, ...errors },
    async handler({ auth, params, body, deps }) {
      const teamId = await scope(deps, auth, params);
      await endpointInTeam(deps, teamId, params.webhook_id);
      const reserved = /^(webhook-|svix-)|^(content-type|content-length|host|transfer-encoding|connection)$/i;
      const bad = Object.keys(body.headers).filter((h) => reserved.test(h));
      if (bad.length) throw ValidationError.field(['body', 'headers', bad[0]], `Header ${bad.join(', ')} is reserved and cannot be set.`);
      const doc = await deps.repos.webhooks.updateEndpoint(teamId, params.webhook_id, { headers: body.headers });
      return { body: { headers: doc!.headers } };
    },
  }),
  defineRoute({
    operationId: 'getWebhookSecret',
    method: 'get',
    path: `${base}/{webhook_id}/secret`,
    summary: 'Get signing secret',
    tags,
    auth: 'management',
    params: WebhookParams,
    responses: { 200: { description: 'The current secret', schema: WebhookSecret }, ...errors },
    async handler({ auth, params, deps }) {
      const teamId = await scope(deps, auth, params);
      const endpoint = await endpointInTeam(deps, teamId, params.webhook_id);
      return { body: { key: endpoint.secrets[endpoint.secrets.length - 1].key } };
    },
  }),
  defineRoute({
    operationId: 'rotateWebhookSecret',
    method: 'post',
    path: `${base}/{webhook_id}/secret/rotate`,
    summary: 'Rotate signing secret',
    description: 'A new secret signs from now on; the previous one keeps signing too (a second signature) for 24 hours (WEBHOOK_SECRET_OVERLAP_MS).',
    tags,
    auth: 'management',
    params: WebhookParams,
    responses: { 200: { description: 'The new secret', schema: WebhookSecret }, ...errors },
    async handler({ auth, params, deps }) {
      const teamId = await scope(deps, auth, params);
      await endpointInTeam(deps, teamId, params.webhook_id);
      const key = generateSecret();
      const doc = await deps.repos.webhooks.rotateSecret(teamId, params.webhook_id, key, new Date(Date.now() + deps.config.WEBHOOK_SECRET_OVERLAP_MS));
      if (!doc) throw new ApiError(404, `Webhook ${params.webhook_id} not found.`);
      return { body: { key } };
    },
  }),
  defineRoute({
    operationId: 'testWebhook',
    method: 'post',
    path: `${base}/{webhook_id}/test`,
    summary: 'Send a test event',
    description:
      'Publishes a `webhook.test` event (or the named catalogue type with sample data) to this webhook only, through the ' +
      'normal signing, retry and logging path. Answers 202 with the event id.',
    tags,
    auth: 'management',
    params: WebhookParams,
    body: WebhookTestBody,
    responses: { 202: { description: 'Accepted', schema: EventAccepted }, 409: { description: 'Webhook disabled', schema: ErrorDetail }, ...errors },
    async handler({ auth, params, body, deps }) {
      const teamId = await scope(deps, auth, params);
      const endpoint = await endpointInTeam(deps, teamId, params.webhook_id);
      if (endpoint.disabled) throw new ApiError(409, `Webhook ${endpoint._id} is disabled; enable it before testing.`);
      const type = body.event_type ?? 'webhook.test';
      const entry = findEventType(type);
      if (!entry) throw ValidationError.field(['body', 'event_type'], `Unknown event type '${type}'. See GET ${base}/event_types.`);
      const data = type === 'webhook.test' ? { ...entry.sample, webhook_id: endpoint._id } : entry.sample;
      const event = await publishEvent(deps, { teamId, eventType: type, data, onlyEndpointId: endpoint._id });
      return { status: 202, body: { event_id: event.id } };
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
      const cursor = decodeCursor(query.next_cursor);
      const page = await deps.repos.webhooks.listAttempts(
        teamId,
        { endpointId: params.webhook_id, eventId: query.event_id },
        cursor && { timestamp: cursor.at, id: cursor.id },
        query.limit,
      );
      return { body: pageBody(page, toAttempt, (a) => a.timestamp) };
    },
  }),
  defineRoute({
    operationId: 'listWebhookDeliveries',
    method: 'get',
    path: `${base}/{webhook_id}/deliveries`,
    summary: 'List deliveries to a webhook',
    description: 'Pending (queued or waiting to retry) and finished deliveries, newest first.',
    tags,
    auth: 'management',
    params: WebhookParams,
    query: DeliveryListQuery,
    responses: { 200: { description: 'Deliveries', schema: WebhookDeliveryList }, ...errors },
    async handler({ auth, params, query, deps }) {
      const teamId = await scope(deps, auth, params);
      await endpointInTeam(deps, teamId, params.webhook_id);
      const since = query.since ? new Date(query.since) : undefined;
      const until = query.until ? new Date(query.until) : undefined;
      const w = deps.repos.webhooks;
      const pending =
        !query.status || query.status === 'pending'
          ? (await w.activeItems(teamId, params.webhook_id))
              .filter((i) => (!since || i.created_at >= since) && (!until || i.created_at < until))
              .map((i) => ({
                event_id: i.event_id,
                webhook_id: params.webhook_id,
                event_type: i.event_type,
                status: 'pending' as const,
                attempts: i.attempts,
                next_attempt_at: isoWithOffset(i.next_attempt_at),
                last_status_code: i.last_status_code,
                last_error: i.last_error,
                created_at: isoWithOffset(i.created_at),
              }))
          : [];
      const done =
        query.status === 'pending'
          ? []
          : (await w.listDeliveries(teamId, params.webhook_id, { status: query.status, since, until }, query.limit)).map((d) => ({
              event_id: d.event_id,
              webhook_id: d.endpoint_id,
              event_type: d.event_type,
              status: d.status,
              attempts: d.attempts,
              next_attempt_at: null,
              last_status_code: d.last_status_code,
              last_error: d.last_error,
              created_at: isoWithOffset(d.created_at),
            }));
      return { body: { data: [...pending, ...done].slice(0, query.limit) } };
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
    async handler({ auth, params, deps }) {
      const teamId = await scope(deps, auth, params);
      const endpoint = await endpointInTeam(deps, teamId, params.webhook_id);
      await resendEvent(deps, endpoint, params.event_id);
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
    async handler({ auth, params, body, deps }) {
      const teamId = await scope(deps, auth, params);
      const endpoint = await endpointInTeam(deps, teamId, params.webhook_id);
      const since = new Date(body.since);
      const until = body.until ? new Date(body.until) : undefined;
      if (until && until <= since) throw badRequest('until must be after since.');
      return { status: 202, body: { resent: await recoverFailed(deps, endpoint, since, until) } };
    },
  }),
];
