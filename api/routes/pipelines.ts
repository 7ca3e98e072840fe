import { ApiError, ValidationError } from '../../lib/platform/errors';
import { timeOrderedUuid } from '../../lib/platform/keys';
import { audited } from '../../lib/tenancy/audit';
import { PIPELINE_TEST_EVENT, routeOf, type PipelineDoc } from '../../lib/events/destinations/pipeline/model';
import { assertRoutes, destinationFromRequest, pipelineInTeam, pipelineTarget, toPipeline } from '../../lib/events/destinations/pipeline/requests';
import { publishEvent } from '../../lib/events/publisher';
import { ErrorDetail } from '../../schemas/common';
import { findEventType } from '../../schemas/event-catalogue';
import {
  Pipeline,
  PipelineCreateBody,
  PipelineEnvParams,
  PipelineEventParams,
  PipelineList,
  PipelineParams,
  PipelinePatchBody,
  PipelineResendAccepted,
  PipelineTestBody,
} from '../../schemas/pipeline';
import { EventAccepted } from '../../schemas/webhook';
import { PIPELINE_ROUTES_BASE as base, PIPELINE_TAGS as tags, webhookErrors as errors, webhookTeam as scope } from '../management-scope';
import { defineRoute } from '../route';
import { destinationRoutes } from './destination-routes';

/**
 * A team's event-streaming pipelines (lib/events/destinations/pipeline): the same auth, scope and audit log as webhook endpoints.
 */

/** Sets `disabled` (and what goes with it): re-enabling resets the failure clock. */
const disabledFields = (disabled: boolean): Partial<PipelineDoc> =>
  disabled ? { disabled: true, disabled_reason: 'manual' } : { disabled: false, disabled_reason: null, failing_since: null };

const enableRoute = (disabled: boolean) =>
  defineRoute({
    operationId: disabled ? 'disablePipeline' : 'enablePipeline',
    method: 'post',
    path: `${base}/{pipeline_id}/${disabled ? 'disable' : 'enable'}`,
    summary: disabled ? 'Disable pipeline' : 'Enable pipeline',
    description: disabled
      ? 'Stops sending; pending messages are ended as failed (`endpoint_disabled`) and can be recovered once enabled.'
      : 'Sends again; the failure clock starts over. Recover what failed meanwhile with POST …/recover.',
    tags,
    auth: 'management',
    params: PipelineParams,
    responses: { 200: { description: 'The pipeline', schema: Pipeline }, ...errors },
    async handler({ auth, params, deps, requestId, log }) {
      const teamId = await scope(deps, auth, params);
      const doc = await pipeline.change({ deps, auth, requestId, log }, teamId, params.pipeline_id, 'pipeline.update', ['disabled'], disabledFields(disabled));
      return { body: toPipeline(doc) };
    },
  });

/** A pipeline as a destination of events (the routes it shares with webhook endpoints: destination-routes.ts). */
const pipeline = destinationRoutes<PipelineDoc>({
  noun: 'Pipeline',
  audit: 'pipeline',
  idParam: 'pipeline_id',
  base,
  tags,
  envParams: PipelineEnvParams,
  params: PipelineParams,
  eventParams: PipelineEventParams,
  schema: Pipeline,
  listSchema: PipelineList,
  resendAccepted: PipelineResendAccepted,
  page: (deps, teamId, after, limit) => deps.repos.pipelines.listPipelines(teamId, after, limit),
  inTeam: pipelineInTeam,
  insert: (deps, doc) => deps.repos.pipelines.createPipeline(doc),
  update: (deps, teamId, id, set) => deps.repos.pipelines.updatePipeline(teamId, id, set),
  remove: (deps, teamId, id) => deps.repos.pipelines.deletePipeline(teamId, id),
  toPublic: toPipeline,
  target: pipelineTarget,
  text: {
    list: 'Pipelines, oldest first',
    delete: 'Pending messages to it are cancelled; what already reached the broker stays there.',
    deliveries: {
      summary: 'List deliveries to a pipeline',
      description: "Pending (queued, held back behind a user's earlier event, or waiting to retry) and finished deliveries, newest first.",
    },
    attempts: {
      summary: 'List delivery attempts to a pipeline',
      description:
        'Each publish to the broker: error_class is broker_error, broker_nack, unroutable (no queue bound), held_back, auth_error, refused_address, dns_error or timeout.',
    },
    resend: {
      summary: 'Resend an event to a pipeline',
      description: 'One manual attempt (not rescheduled on failure) with the same message id, by the route that takes the event.',
    },
    recover: {
      operationId: 'recoverPipeline',
      summary: 'Replay failed deliveries of a time range',
      description: 'Sends again every failed delivery to this pipeline whose event was published in [since, until) (until defaults to now).',
    },
  },
});

/**
 * A pipeline's part of the delivery log: its deliveries and attempts are webhook deliveries and attempts whose
 * `webhook_id` is the pipeline's id (the team-wide event list and an event's attempts, under …/webhook/events, show
 * both). Resend and recover go through the pipeline's dispatcher, as for an endpoint.
 */
export const pipelineDestinationLogRoutes = [pipeline.deliveries, pipeline.attempts, pipeline.resend, pipeline.recover];

export const pipelineRoutes = [
  pipeline.list,
  defineRoute({
    operationId: 'createPipeline',
    method: 'post',
    path: base,
    summary: 'Create pipeline',
    description:
      "Sends the team's events to its own RabbitMQ (AMQP 0-9-1: publisher confirms, persistent messages, a durable exchange) or Kafka " +
      '(idempotent producer, key = user_id) broker. An event takes the first route whose event_type_prefix starts its type; an event no route ' +
      'takes is not sent to this pipeline. Broker addresses follow the webhook URL rules (private addresses refused unless in ' +
      'PIPELINE_BROKER_ALLOWLIST; TLS in production). The password is stored encrypted and never returned.',
    tags,
    auth: 'management',
    params: PipelineEnvParams,
    body: PipelineCreateBody,
    responses: { 200: { description: 'The pipeline', schema: Pipeline }, ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      const teamId = await scope(deps, auth, params);
      const { destination, credentials } = await destinationFromRequest(deps, body.destination);
      assertRoutes(body.routes, destination);
      const now = new Date();
      const id = timeOrderedUuid();
      const stored: PipelineDoc = {
        _id: id,
        team_id: teamId,
        description: body.description,
        destination,
        credentials,
        routes: body.routes,
        ordered_per_user: body.ordered_per_user,
        disabled: body.disabled,
        disabled_reason: body.disabled ? 'manual' : null,
        failing_since: null,
        created_at: now,
        updated_at: now,
        version: 1,
      };
      const doc = await pipeline.create({ deps, auth, requestId, log }, teamId, stored, Object.keys(body));
      return { body: toPipeline(doc) };
    },
  }),
  pipeline.get,
  defineRoute({
    operationId: 'updatePipeline',
    method: 'patch',
    path: `${base}/{pipeline_id}`,
    summary: 'Update pipeline',
    description: 'Routes apply to events published from then on (a queued message keeps the route it was given). Re-enabling resets the failure clock.',
    tags,
    auth: 'management',
    params: PipelineParams,
    body: PipelinePatchBody,
    responses: { 200: { description: 'The pipeline', schema: Pipeline }, ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      const teamId = await scope(deps, auth, params);
      const current = await pipelineInTeam(deps, teamId, params.pipeline_id);
      const set: Partial<PipelineDoc> = {};
      if (body.description !== undefined) set.description = body.description;
      if (body.ordered_per_user !== undefined) set.ordered_per_user = body.ordered_per_user;
      if (body.disabled !== undefined) Object.assign(set, disabledFields(body.disabled));
      if (body.destination) {
        const kept = body.destination.type === current.destination.type ? current.credentials : null;
        Object.assign(set, await destinationFromRequest(deps, body.destination, kept));
      }
      if (body.routes) set.routes = body.routes;
      if (body.routes || body.destination)
        assertRoutes(set.routes ?? current.routes, set.destination ?? current.destination, body.routes ? ['body', 'routes'] : ['body', 'destination']);
      const doc = await pipeline.change({ deps, auth, requestId, log }, teamId, params.pipeline_id, 'pipeline.update', Object.keys(body), set);
      return { body: toPipeline(doc) };
    },
  }),
  pipeline.delete,
  enableRoute(false),
  enableRoute(true),
  defineRoute({
    operationId: 'testPipeline',
    method: 'post',
    path: `${base}/{pipeline_id}/test`,
    summary: 'Send a test event',
    description:
      'Publishes a `pipeline.test` event (sent by the first route) or the named catalogue type with sample data (sent by the routes; ' +
      'a type no route takes is a 422) to this pipeline only, through the normal delivery path. Answers 202 with the event id.',
    tags,
    auth: 'management',
    params: PipelineParams,
    body: PipelineTestBody,
    responses: { 202: { description: 'Accepted', schema: EventAccepted }, 409: { description: 'Pipeline disabled', schema: ErrorDetail }, ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      const teamId = await scope(deps, auth, params);
      const pipeline = await pipelineInTeam(deps, teamId, params.pipeline_id);
      if (pipeline.disabled) throw new ApiError(409, `Pipeline ${pipeline._id} is disabled; enable it before testing.`);
      const type = body.event_type ?? PIPELINE_TEST_EVENT;
      const entry = findEventType(type)!;
      if (!routeOf(pipeline, { event_type: type, only_destination_id: pipeline._id })) {
        throw ValidationError.field(['body', 'event_type'], `No route of this pipeline takes '${type}'; add a route whose event_type_prefix starts it.`);
      }
      const data = type === PIPELINE_TEST_EVENT ? { ...entry.sample, pipeline_id: pipeline._id } : entry.sample;
      const event = await audited(
        { deps, auth, requestId, log },
        pipelineTarget('pipeline.test', teamId, pipeline._id),
        () => publishEvent(deps, { teamId, eventType: type, data, onlyDestinationId: pipeline._id }),
        Object.keys(body),
      );
      return { status: 202, body: { event_id: event.id } };
    },
  }),
];
