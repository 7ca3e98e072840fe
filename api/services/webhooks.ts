import { randomUUID } from 'node:crypto';
import { ApiError, badRequest, notFound, ValidationError } from '../../lib/errors';
import { deliveryPolicyFrom, wakeDispatcher } from '../../lib/events';
import type { DeliveryDoc, EndpointDoc, QueueItem } from '../../lib/repositories/webhooks';
import { deliveryId } from '../../lib/repositories/webhooks';
import { isoWithOffset } from '../../lib/time';
import { checkWebhookUrl, urlPolicyFromConfig } from '../../lib/url-safety';
import type { Webhook } from '../../schemas/webhook';
import type { AppDeps } from '../deps';

export function toWebhook(d: EndpointDoc): Webhook {
  return {
    id: d._id,
    url: d.url,
    description: d.description,
    filter_types: d.filter_types,
    disabled: d.disabled,
    disabled_reason: d.disabled_reason,
    rate_limit: d.rate_limit,
    created_at: isoWithOffset(d.created_at),
    updated_at: isoWithOffset(d.updated_at),
  };
}

/** 422 with the reason when the URL may not receive webhooks here (scheme, SSRF rules). */
export async function assertUrlAllowed(deps: AppDeps, url: string): Promise<void> {
  const reason = await checkWebhookUrl(url, urlPolicyFromConfig(deps.config));
  if (reason) throw ValidationError.field(['body', 'url'], `Webhook URL refused: ${reason}`, 'value_error.url_refused');
}

export function assertThisEnvironment(deps: AppDeps, environment: string): void {
  const env = deps.config.DEPLOYMENT_ENVIRONMENT;
  if (environment !== env) throw badRequest(`This deployment serves the ${env} environment; manage ${environment} webhooks on that deployment.`);
}

export async function endpointInTeam(deps: AppDeps, teamId: string, id: string): Promise<EndpointDoc> {
  const endpoint = await deps.repos.webhooks.findEndpoint(teamId, id);
  if (!endpoint) throw notFound(`Webhook ${id} not found.`);
  return endpoint;
}

/** A page of a cursor-paginated list: `{data, next_cursor}`, the cursor naming the first item of the next page. */
export function pageBody<T extends { _id: string }, R>(page: { items: T[]; next: T | null }, render: (item: T) => R, at: (item: T) => Date) {
  return { data: page.items.map(render), next_cursor: page.next ? encodeCursor(at(page.next), page.next._id) : null };
}

/** Opaque cursors: base64url of `<iso time>|<id>`. */
export const encodeCursor = (at: Date, id: string) => Buffer.from(`${at.toISOString()}|${id}`).toString('base64url');
export function decodeCursor(cursor: string | undefined): { at: Date; id: string } | null {
  if (!cursor) return null;
  const [iso, id] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  const at = new Date(iso);
  if (!id || Number.isNaN(at.getTime())) throw ValidationError.field(['query', 'next_cursor'], 'Invalid cursor.', 'value_error.cursor');
  return { at, id };
}

/**
 * Queues events again to one endpoint as manual deliveries (one attempt each, not rescheduled on failure,
 * the same webhook-id as before) and wakes its dispatcher. `previous` is the delivery's latest record when
 * the caller has it (recover), looked up otherwise.
 */
async function queueManual(deps: AppDeps, endpoint: EndpointDoc, deliveries: { eventId: string; previous?: DeliveryDoc | null }[]): Promise<number> {
  const w = deps.repos.webhooks;
  if (endpoint.disabled) throw new ApiError(409, `Webhook ${endpoint._id} is disabled; enable it (PATCH disabled=false) before resending.`);
  const policy = { ...deliveryPolicyFrom(deps.config), schedule_ms: [0] };
  const items: QueueItem[] = [];
  for (const { eventId, previous: known } of deliveries) {
    const event = await w.findEvent(endpoint.team_id, eventId);
    if (!event) continue;
    const previous = known === undefined ? await w.findDelivery(endpoint.team_id, eventId, endpoint._id) : known;
    items.push({
      id: deliveryId(eventId, endpoint._id),
      team_id: endpoint.team_id,
      event_id: eventId,
      event_type: event.event_type,
      user_id: event.user_id,
      body: event.body,
      attempts: previous?.attempts ?? 0,
      pass_attempts: 0,
      trigger: 'manual',
      policy,
      last_status_code: previous?.last_status_code ?? null,
      last_error: previous?.last_error ?? null,
      created_at: previous?.created_at ?? event.created_at,
    });
  }
  if (!items.length) return 0;
  const now = new Date();
  for (let i = 0; i < items.length; i += 500) {
    await w.enqueue([
      { _id: `manual:${randomUUID()}`, team_id: endpoint.team_id, endpoint_id: endpoint._id, next_attempt_at: now, created_at: now, items: items.slice(i, i + 500) },
    ]);
  }
  await wakeDispatcher(deps, endpoint._id);
  return items.length;
}

export async function resendEvent(deps: AppDeps, endpoint: EndpointDoc, eventId: string): Promise<void> {
  const event = await deps.repos.webhooks.findEvent(endpoint.team_id, eventId);
  if (!event) throw notFound(`Event ${eventId} not found.`);
  await queueManual(deps, endpoint, [{ eventId }]);
}

/** Resends every failed delivery of the endpoint created in [since, until), a page at a time. */
export async function recoverFailed(deps: AppDeps, endpoint: EndpointDoc, since: Date, until?: Date, pageSize = 500): Promise<number> {
  let resent = 0;
  let after: DeliveryDoc | null = null;
  do {
    const page = await deps.repos.webhooks.failedDeliveries(endpoint.team_id, endpoint._id, { since, until }, after, pageSize);
    resent += await queueManual(deps, endpoint, page.map((d) => ({ eventId: d.event_id, previous: d })));
    after = page.length === pageSize ? page[page.length - 1] : null;
  } while (after);
  return resent;
}
