import type { Filter } from 'mongodb';
import { isDenseList, logPage, pageById, type Page } from '../platform/database/pages';
import { idPrefixAt, uuidV7Millis } from '../platform/keys';
import { isoWithOffset } from '../platform/time';
import { createdWithin, type StoredEventDoc, type WebhookStore } from './store';
import { eventData, type AttemptDoc, type DeliveryDoc, type DeliveryStatus, type EventDoc } from './model';
import { attemptViews, eventDeliveryViews, mergePage, pipelineDeliveryViews, type DeliveryQuery } from './destinations/pipeline/batch-log';
import type { PipelineBatchStore } from './destinations/pipeline/batches-store';

/**
 * The delivery log: what the API shows of events, deliveries and attempts, newest first, paged by `_id` after
 * the cursor's id (ids are time-ordered: see the indexes in store.ts), read from the store's collections as
 * they are (query shapes declared in store.ts). A [since, until) window filters on `created_at`. Pages walk the
 * `_id` index first, within a time budget (pages.ts `logPage`).
 */

/**
 * `_id` bounds of the ids minted in [since, until): a UUIDv7 starts with its time (model.ts), so the walk of a
 * window starts at the window, not at the newest entry (a one-hour window of a week's 100,000 events read the whole
 * newer part of the log and ran out of budget). `created_at` stays the filter: ids are minted just before it is set,
 * hence a second either side. Events stored before ids were time-ordered have no time in their id and are not
 * found by a window. An upper bound as `$lte`: the page's own bound is a `$lt`.
 */
const SLACK_MS = 1000;
export function idsWithin(q: { since?: Date; until?: Date }): { $gte?: string; $lte?: string } {
  return { ...(q.since ? { $gte: idPrefixAt(q.since.getTime() - SLACK_MS) } : {}), ...(q.until ? { $lte: idPrefixAt(q.until.getTime() + SLACK_MS) } : {}) };
}

/** Events of a team; filter by type, user and a [since, until) window. */
export async function listEvents(
  store: WebhookStore,
  teamId: string,
  q: { eventType?: string; userId?: string; since?: Date; until?: Date },
  after: string | null,
  limit: number,
): Promise<Page<EventDoc>> {
  const filter: Filter<EventDoc> = { team_id: teamId };
  if (q.eventType) filter.event_type = q.eventType;
  if (q.userId) filter.user_id = q.userId;
  if (q.since || q.until) Object.assign(filter, { created_at: createdWithin(q), _id: idsWithin(q) });
  const stored = filter as Filter<StoredEventDoc>;
  const page =
    q.userId && !(await isDenseList(store.events, { team_id: teamId, user_id: q.userId }))
      ? await pageById(store.events, stored, -1, after, limit)
      : await logPage(store.events, stored, -1, after, limit);
  return { items: page.items.map((e) => store.openEvent(e)), more: page.more };
}

/**
 * An endpoint's deliveries (pending and finished) created in [since, until), of one event type and/or user; a
 * pipeline's (`batches` given) with those its batches record (destinations/pipeline/batch-log.ts).
 */
export async function listDeliveries(
  store: WebhookStore,
  teamId: string,
  destinationId: string,
  q: DeliveryQuery,
  after: string | null,
  limit: number,
  batches?: PipelineBatchStore,
): Promise<Page<DeliveryDoc>> {
  const filter: Filter<DeliveryDoc> = { team_id: teamId, destination_id: destinationId };
  if (q.status) filter.status = q.status;
  if (q.eventType) filter.event_type = q.eventType;
  if (q.userId) filter.user_id = q.userId;
  // No `_id` bounds: a delivery's id is its event's, but the sweeper may queue it long after (a repaired publish).
  if (q.since || q.until) filter.created_at = createdWithin(q);
  const documents = await logPage(store.deliveries, filter, -1, after, limit);
  if (!batches) return documents;
  return mergePage(documents, await pipelineDeliveryViews(batches, teamId, destinationId, q, after, limit), after, limit);
}

/** A delivery list's query string as `listDeliveries` takes it. */
export const deliveryFilter = (q: { status?: DeliveryStatus; event_type?: string; user_id?: string; since?: string; until?: string }) => ({
  status: q.status,
  eventType: q.event_type,
  userId: q.user_id,
  since: q.since ? new Date(q.since) : undefined,
  until: q.until ? new Date(q.until) : undefined,
});

/**
 * An event's deliveries to each of its destinations: their ids are `<event id>:<destination id>` (model.ts
 * `deliveryId`), so a range of `_id` (`$lte`: the page's own bound is a `$lt`).
 */
export async function listEventDeliveries(
  store: WebhookStore,
  teamId: string,
  eventId: string,
  after: string | null,
  limit: number,
  batches?: { store: PipelineBatchStore; pipelineIds: string[] },
): Promise<Page<DeliveryDoc>> {
  const documents = await logPage(store.deliveries, { team_id: teamId, _id: { $gt: `${eventId}:`, $lte: `${eventId}:~` } }, -1, after, limit);
  if (!batches) return documents;
  return mergePage(documents, await eventDeliveryViews(batches.store, teamId, batches.pipelineIds, eventId), after, limit);
}

/**
 * Attempts of an event and/or to an endpoint. An event's attempts have ids on its time (model.ts `attemptId`): the
 * walk reads them alone (else the walk of a week's log ran out of budget before the planner's plan found them).
 */
export async function listAttempts(
  store: WebhookStore,
  teamId: string,
  q: { eventId?: string; destinationId?: string },
  after: string | null,
  limit: number,
  batches?: PipelineBatchStore,
): Promise<Page<AttemptDoc>> {
  const documents = await listAttemptDocuments(store, teamId, q, after, limit);
  if (!batches) return documents;
  return mergePage(documents, await attemptViews(batches, teamId, q, after, limit), after, limit);
}

function listAttemptDocuments(
  store: WebhookStore,
  teamId: string,
  q: { eventId?: string; destinationId?: string },
  after: string | null,
  limit: number,
): Promise<Page<AttemptDoc>> {
  const filter: Filter<AttemptDoc> = { team_id: teamId };
  if (q.eventId) filter.event_id = q.eventId;
  if (q.destinationId) filter.destination_id = q.destinationId;
  const eventMs = q.eventId ? uuidV7Millis(q.eventId) : null;
  if (eventMs !== null) filter._id = { $gte: idPrefixAt(eventMs), $lte: idPrefixAt(eventMs + 1) };
  return logPage(store.attempts, filter, -1, after, limit);
}

export const toEvent = (e: EventDoc) => ({
  id: e._id,
  event_type: e.event_type,
  team_id: e.team_id,
  user_id: e.user_id,
  client_user_id: e.client_user_id,
  data: eventData(e),
  created_at: isoWithOffset(e.created_at),
});
export const toDelivery = (d: DeliveryDoc) => ({
  event_id: d.event_id,
  webhook_id: d.destination_id,
  event_type: d.event_type,
  user_id: d.user_id,
  status: d.status,
  attempts: d.attempts,
  next_attempt_at: d.next_attempt_at && isoWithOffset(d.next_attempt_at),
  last_status_code: d.last_status_code,
  last_error: d.last_error,
  created_at: isoWithOffset(d.created_at),
});
export const toAttempt = (a: AttemptDoc) => ({
  id: a._id,
  event_id: a.event_id,
  webhook_id: a.destination_id,
  attempt: a.attempt,
  trigger: a.trigger,
  timestamp: isoWithOffset(a.timestamp),
  duration_ms: a.duration_ms,
  status_code: a.status_code,
  error_class: a.error_class,
  error: a.error ?? null,
  response_body: a.response_body,
});
