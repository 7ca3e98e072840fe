import { badRequest } from '../../lib/platform/errors';
import { pipelineInTeam, pipelineTarget } from '../../lib/pipelines/requests';
import { deliveryFilter, listAttempts, listDeliveries, toAttempt, toDelivery } from '../../lib/webhooks/delivery-log';
import { recoverFailed, resendEvent } from '../../lib/webhooks/endpoint-requests';
import { ErrorDetail } from '../../schemas/common';
import { PipelineEventParams, PipelineParams, PipelineResendAccepted } from '../../schemas/pipeline';
import { AttemptListQuery, DeliveryListQuery, RecoverAccepted, RecoverBody, WebhookAttemptList, WebhookDeliveryList } from '../../schemas/webhook';
import { audited } from '../../lib/tenancy/audit';
import { afterCursor, cursorPageBody } from '../cursors';
import { PIPELINE_ROUTES_BASE as base, PIPELINE_TAGS as tags, webhookErrors as errors, webhookTeam as scope } from '../management-scope';
import { defineRoute } from '../route';

/**
 * A pipeline's part of the delivery log: its deliveries and attempts are webhook deliveries and attempts whose
 * `webhook_id` is the pipeline's id (the team-wide event list and an event's attempts, under …/webhook/events,
 * show both). Resend and recover go through the pipeline's dispatcher, as for an endpoint.
 */
const asDestination = (p: { _id: string; team_id: string; disabled: boolean }) => ({ ...p, noun: 'Pipeline' });

export const pipelineDeliveryLogRoutes = [
  defineRoute({
    operationId: 'listPipelineDeliveries',
    method: 'get',
    path: `${base}/{pipeline_id}/deliveries`,
    summary: 'List deliveries to a pipeline',
    description: 'Pending (queued, held back behind a user\'s earlier event, or waiting to retry) and finished deliveries, newest first.',
    tags,
    auth: 'management',
    params: PipelineParams,
    query: DeliveryListQuery,
    responses: { 200: { description: 'Deliveries', schema: WebhookDeliveryList }, ...errors },
    async handler({ auth, params, query, deps }) {
      const teamId = await scope(deps, auth, params);
      await pipelineInTeam(deps, teamId, params.pipeline_id);
      const page = await listDeliveries(deps.repos.webhookStore, teamId, params.pipeline_id, deliveryFilter(query), afterCursor(query.next_cursor), query.limit);
      return { body: cursorPageBody(page, toDelivery) };
    },
  }),
  defineRoute({
    operationId: 'listPipelineAttempts',
    method: 'get',
    path: `${base}/{pipeline_id}/attempts`,
    summary: 'List delivery attempts to a pipeline',
    description: 'Each publish to the broker: error_class is broker_error, broker_nack, unroutable (no queue bound), held_back, auth_error, refused_address, dns_error or timeout.',
    tags,
    auth: 'management',
    params: PipelineParams,
    query: AttemptListQuery,
    responses: { 200: { description: 'Attempts, newest first', schema: WebhookAttemptList }, ...errors },
    async handler({ auth, params, query, deps }) {
      const teamId = await scope(deps, auth, params);
      await pipelineInTeam(deps, teamId, params.pipeline_id);
      const filter = { endpointId: params.pipeline_id, eventId: query.event_id };
      const page = await listAttempts(deps.repos.webhookStore, teamId, filter, afterCursor(query.next_cursor), query.limit);
      return { body: cursorPageBody(page, toAttempt) };
    },
  }),
  defineRoute({
    operationId: 'resendPipelineEvent',
    method: 'post',
    path: `${base}/{pipeline_id}/events/{event_id}/resend`,
    summary: 'Resend an event to a pipeline',
    description: 'One manual attempt (not rescheduled on failure) with the same message id, by the route that takes the event.',
    tags,
    auth: 'management',
    params: PipelineEventParams,
    responses: { 202: { description: 'Queued', schema: PipelineResendAccepted }, 409: { description: 'Pipeline disabled', schema: ErrorDetail }, ...errors },
    async handler({ auth, params, deps, requestId, log }) {
      const teamId = await scope(deps, auth, params);
      const pipeline = await pipelineInTeam(deps, teamId, params.pipeline_id);
      await audited(
        { deps, auth, requestId, log },
        { action: 'pipeline.event.resend', type: 'pipeline_event', id: `${pipeline._id}:${params.event_id}`, teamId },
        () => resendEvent(deps, asDestination(pipeline), params.event_id),
      );
      return { status: 202, body: { event_id: params.event_id, pipeline_id: pipeline._id } };
    },
  }),
  defineRoute({
    operationId: 'recoverPipeline',
    method: 'post',
    path: `${base}/{pipeline_id}/recover`,
    summary: 'Replay failed deliveries of a time range',
    description: 'Sends again every failed delivery to this pipeline whose event was published in [since, until) (until defaults to now).',
    tags,
    auth: 'management',
    params: PipelineParams,
    body: RecoverBody,
    responses: { 202: { description: 'Queued', schema: RecoverAccepted }, 409: { description: 'Pipeline disabled', schema: ErrorDetail }, ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      const teamId = await scope(deps, auth, params);
      const pipeline = await pipelineInTeam(deps, teamId, params.pipeline_id);
      const since = new Date(body.since);
      const until = body.until ? new Date(body.until) : undefined;
      if (until && until <= since) throw badRequest('until must be after since.');
      const resent = await audited(
        { deps, auth, requestId, log },
        pipelineTarget('pipeline.recover', teamId, pipeline._id),
        () => recoverFailed(deps, asDestination(pipeline), since, until),
        Object.keys(body),
      );
      return { status: 202, body: { resent } };
    },
  }),
];
