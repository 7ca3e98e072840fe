import type { TSchema } from '@sinclair/typebox';
import { badRequest, notFound } from '../../lib/platform/errors';
import { audited, type AuditTarget } from '../../lib/tenancy/audit';
import { destinationChanged, destinationDeleted } from '../../lib/events/dispatcher-commands';
import { deliveryFilter, listAttempts, listDeliveries, toAttempt, toDelivery } from '../../lib/events/delivery-log';
import { recoverFailed, resendEvent } from '../../lib/events/destinations/webhook/requests';
import { ErrorDetail } from '../../schemas/common';
import { AttemptListQuery, CursorQuery, DeliveryListQuery, RecoverAccepted, RecoverBody, WebhookAttemptList, WebhookDeliveryList } from '../../schemas/webhook';
import type { Page } from '../../lib/platform/database/pages';
import type { Logger } from '../../lib/platform/logger';
import type { ManagementPrincipal } from '../../lib/tenancy/principals';
import { afterCursor, cursorPageBody } from '../cursors';
import type { AppDeps } from '../deps';
import { teamNotFound, webhookErrors as errors, webhookTeam as scope } from '../management-scope';
import { defineRoute } from '../route';

/**
 * The routes both kinds of event destination have, a webhook endpoint and a pipeline, built once: get and delete,
 * and their part of the delivery log (deliveries, attempts, resend an event, recover a time range). What differs
 * between the kinds (names, paths, schemas, texts, lookups) is the kind's description; what only one kind has
 * (a webhook's URL, secret and headers, a pipeline's routes and broker) stays in its own route file.
 */
interface DestinationKind<Doc extends { _id: string; team_id: string; disabled: boolean }> {
  /** `Webhook` or `Pipeline`: operation ids, summaries and errors. */
  noun: 'Webhook' | 'Pipeline';
  /** The audit log's name for it: actions `<audit>.delete`, `<audit>.event.resend`, `<audit>.recover`. */
  audit: 'webhook' | 'pipeline';
  idParam: 'webhook_id' | 'pipeline_id';
  base: string;
  tags: string[];
  envParams: TSchema;
  params: TSchema;
  eventParams: TSchema;
  schema: TSchema;
  listSchema: TSchema;
  resendAccepted: TSchema;
  page(deps: AppDeps, teamId: string, after: string | null, limit: number): Promise<Page<Doc>>;
  inTeam(deps: AppDeps, teamId: string, id: string): Promise<Doc>;
  insert(deps: AppDeps, doc: Doc): Promise<Doc>;
  update(deps: AppDeps, teamId: string, id: string, set: Partial<Doc>): Promise<Doc | null>;
  remove(deps: AppDeps, teamId: string, id: string): Promise<boolean>;
  toPublic(doc: Doc): unknown;
  target(action: AuditTarget['action'], teamId: string, id: string): AuditTarget;
  text: {
    list: string;
    delete: string;
    deliveries: { summary: string; description: string };
    attempts: { summary: string; description?: string };
    resend: { summary: string; description: string };
    recover: { operationId: string; summary: string; description: string };
  };
}

/** Who asks, as the audit log records it. */
interface Asker {
  deps: AppDeps;
  auth: ManagementPrincipal;
  requestId: string;
  log: Logger;
}

export function destinationRoutes<Doc extends { _id: string; team_id: string; disabled: boolean }>(kind: DestinationKind<Doc>) {
  const { noun, base, tags, idParam } = kind;
  /** The path's parameters: the destination kind's schemas (`params`, `eventParams`) validated them. */
  type Path = { team_id: string; environment: string; event_id: string } & Record<string, string>;
  const idOf = (params: unknown) => (params as Path)[idParam];
  const disabledError = { 409: { description: `${noun} disabled`, schema: ErrorDetail } };
  const asDestination = (doc: Doc) => ({ ...doc, noun });
  return {
    /** Stores a new destination of the team (audited); a team whose DELETE has begun takes none (addToLiveTeam: 404). */
    async create(asker: Asker, teamId: string, doc: Doc, fields: string[]): Promise<Doc> {
      const { deps, auth } = asker;
      return audited(
        asker,
        kind.target(`${kind.audit}.create`, teamId, doc._id),
        async () => {
          const created = await deps.repos.tenancy.addToLiveTeam(
            auth.orgId,
            teamId,
            () => kind.insert(deps, doc),
            () => kind.remove(deps, teamId, doc._id),
          );
          if (!created) throw teamNotFound(teamId);
          return created;
        },
        fields,
      );
    },
    /**
     * Changes a destination (audited) and tells its dispatcher: answered once no delivery run that read it before the
     * change is sending (lib/events/dispatcher-commands.ts, destinationChanged).
     */
    async change(asker: Asker, teamId: string, id: string, action: AuditTarget['action'], fields: string[], set: Partial<Doc>): Promise<Doc> {
      return audited(
        asker,
        kind.target(action, teamId, id),
        async () => {
          const updated = await kind.update(asker.deps, teamId, id, set);
          if (!updated) throw notFound(`${noun} ${id} not found.`);
          await destinationChanged(asker.deps.temporal, id);
          return updated;
        },
        fields,
      );
    },
    list: defineRoute({
      operationId: `list${noun}s`,
      method: 'get',
      path: base,
      summary: `List ${kind.audit}s`,
      tags,
      auth: 'management',
      params: kind.envParams,
      query: CursorQuery,
      responses: { 200: { description: kind.text.list, schema: kind.listSchema }, ...errors },
      async handler({ auth, params, query, deps }) {
        const teamId = await scope(deps, auth, params as Path);
        const page = await kind.page(deps, teamId, afterCursor(query.next_cursor), query.limit);
        return { body: cursorPageBody(page, kind.toPublic) };
      },
    }),
    get: defineRoute({
      operationId: `get${noun}`,
      method: 'get',
      path: `${base}/{${idParam}}`,
      summary: `Get ${kind.audit}`,
      tags,
      auth: 'management',
      params: kind.params,
      responses: { 200: { description: `The ${kind.audit}`, schema: kind.schema }, ...errors },
      async handler({ auth, params, deps }) {
        const teamId = await scope(deps, auth, params as Path);
        return { body: kind.toPublic(await kind.inTeam(deps, teamId, idOf(params))) };
      },
    }),
    delete: defineRoute({
      operationId: `delete${noun}`,
      method: 'delete',
      path: `${base}/{${idParam}}`,
      summary: `Delete ${kind.audit}`,
      description: kind.text.delete,
      tags,
      auth: 'management',
      params: kind.params,
      responses: { 204: { description: 'Deleted' }, ...errors },
      async handler({ auth, params, deps, requestId, log }) {
        const teamId = await scope(deps, auth, params as Path);
        const id = idOf(params);
        await audited({ deps, auth, requestId, log }, kind.target(`${kind.audit}.delete`, teamId, id), async () => {
          if (!(await kind.remove(deps, teamId, id))) throw notFound(`${noun} ${id} not found.`);
          await destinationDeleted(deps.temporal, id);
        });
        return { status: 204 };
      },
    }),
    deliveries: defineRoute({
      operationId: `list${noun}Deliveries`,
      method: 'get',
      path: `${base}/{${idParam}}/deliveries`,
      summary: kind.text.deliveries.summary,
      description: kind.text.deliveries.description,
      tags,
      auth: 'management',
      params: kind.params,
      query: DeliveryListQuery,
      responses: { 200: { description: 'Deliveries', schema: WebhookDeliveryList }, ...errors },
      async handler({ auth, params, query, deps }) {
        const teamId = await scope(deps, auth, params as Path);
        const id = idOf(params);
        await kind.inTeam(deps, teamId, id);
        const batches = noun === 'Pipeline' ? deps.repos.pipelineBatches : undefined;
        const page = await listDeliveries(deps.repos.webhookStore, teamId, id, deliveryFilter(query), afterCursor(query.next_cursor), query.limit, batches);
        return { body: cursorPageBody(page, toDelivery) };
      },
    }),
    attempts: defineRoute({
      operationId: `list${noun}Attempts`,
      method: 'get',
      path: `${base}/{${idParam}}/attempts`,
      summary: kind.text.attempts.summary,
      ...(kind.text.attempts.description ? { description: kind.text.attempts.description } : {}),
      tags,
      auth: 'management',
      params: kind.params,
      query: AttemptListQuery,
      responses: { 200: { description: 'Attempts, newest first', schema: WebhookAttemptList }, ...errors },
      async handler({ auth, params, query, deps }) {
        const teamId = await scope(deps, auth, params as Path);
        const id = idOf(params);
        await kind.inTeam(deps, teamId, id);
        const page = await listAttempts(
          deps.repos.webhookStore,
          teamId,
          { destinationId: id, eventId: query.event_id },
          afterCursor(query.next_cursor),
          query.limit,
          noun === 'Pipeline' ? deps.repos.pipelineBatches : undefined,
        );
        return { body: cursorPageBody(page, toAttempt) };
      },
    }),
    resend: defineRoute({
      operationId: `resend${noun}Event`,
      method: 'post',
      path: `${base}/{${idParam}}/events/{event_id}/resend`,
      summary: kind.text.resend.summary,
      description: kind.text.resend.description,
      tags,
      auth: 'management',
      params: kind.eventParams,
      responses: { 202: { description: 'Queued', schema: kind.resendAccepted }, ...disabledError, ...errors },
      async handler({ auth, params, deps, requestId, log }) {
        const teamId = await scope(deps, auth, params as Path);
        const doc = await kind.inTeam(deps, teamId, idOf(params));
        // The target is the event as sent to this destination: `<destination id>:<event id>`.
        await audited(
          { deps, auth, requestId, log },
          { action: `${kind.audit}.event.resend`, type: `${kind.audit}_event`, id: `${doc._id}:${(params as Path).event_id}`, teamId },
          () => resendEvent(deps, asDestination(doc), (params as Path).event_id),
        );
        return { status: 202, body: { event_id: (params as Path).event_id, [idParam]: doc._id } };
      },
    }),
    recover: defineRoute({
      operationId: kind.text.recover.operationId,
      method: 'post',
      path: `${base}/{${idParam}}/recover`,
      summary: kind.text.recover.summary,
      description: kind.text.recover.description,
      tags,
      auth: 'management',
      params: kind.params,
      body: RecoverBody,
      responses: { 202: { description: 'Queued', schema: RecoverAccepted }, ...disabledError, ...errors },
      async handler({ auth, params, body, deps, requestId, log }) {
        const teamId = await scope(deps, auth, params as Path);
        const doc = await kind.inTeam(deps, teamId, idOf(params));
        const since = new Date(body.since);
        const until = body.until ? new Date(body.until) : undefined;
        if (until && until <= since) throw badRequest('until must be after since.');
        const resent = await audited(
          { deps, auth, requestId, log },
          kind.target(`${kind.audit}.recover`, teamId, doc._id),
          () => recoverFailed(deps, asDestination(doc), since, until),
          Object.keys(body),
        );
        return { status: 202, body: { resent } };
      },
    }),
  };
}
