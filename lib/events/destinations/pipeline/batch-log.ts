import type { Page } from '../../../platform/database/pages';
import { idPrefixAt, uuidV7Millis } from '../../../platform/keys';
import type { AttemptDoc, DeliveryDoc, DeliveryStatus } from '../../model';
import { attemptsOfLogged, deliveriesOfLogged, deliveriesOfQueued, type PipelineBatchLogDoc } from './batches';
import type { PipelineBatchStore } from './batches-store';

/**
 * The delivery log's answers for pipelines, whose deliveries are recorded per batch (batches.ts): a page of delivery
 * (or attempt) documents merged with the views of the pipeline's queued and logged batches, newest first by `_id`
 * (a delivery's id is its event's, so the order is the events'). A delivery document of an event wins over its
 * batch's view (the event was split off: refused, or resent).
 */

export interface DeliveryQuery {
  status?: DeliveryStatus;
  eventType?: string;
  userId?: string;
  since?: Date;
  until?: Date;
}

const matches = (d: DeliveryDoc, q: DeliveryQuery) =>
  (!q.status || d.status === q.status) &&
  (!q.eventType || d.event_type === q.eventType) &&
  (!q.userId || d.user_id === q.userId) &&
  (!q.since || d.created_at >= q.since) &&
  (!q.until || d.created_at < q.until);

/** `documents` (a page) merged with `views`: newest first, strictly before `after`, `limit` of them. */
export function mergePage<T extends { _id: string }>(documents: Page<T>, views: T[], after: string | null, limit: number): Page<T> {
  const byId = new Map<string, T>();
  for (const v of views) if (after === null || v._id < after) byId.set(v._id, v);
  for (const d of documents.items) byId.set(d._id, d);
  const all = [...byId.values()].sort((a, b) => (a._id < b._id ? 1 : a._id > b._id ? -1 : 0));
  // Beyond the documents' page, views alone may be missing documents of those events: stop where the page stops.
  const last = documents.more && documents.items.length ? documents.items[documents.items.length - 1]._id : null;
  const within = last === null ? all : all.filter((x) => x._id >= last);
  return { items: within.slice(0, limit), more: documents.more || within.length > limit || all.length > within.length };
}

/** A pipeline's batch views matching `q`, before `after`: enough for a page of `limit` (logged ones) and every queued one. */
export async function pipelineDeliveryViews(
  batches: PipelineBatchStore,
  teamId: string,
  pipelineId: string,
  q: DeliveryQuery,
  after: string | null,
  limit: number,
): Promise<DeliveryDoc[]> {
  const views: DeliveryDoc[] = [];
  if (!q.status || q.status === 'pending') views.push(...(await batches.queuedOf(pipelineId)).flatMap(deliveriesOfQueued));
  if (!q.status || q.status === 'succeeded') {
    // A filter makes matches sparser: read further back for a page of them.
    const want = (limit + 1) * (q.eventType || q.userId || q.since || q.until ? 20 : 1);
    for (const log of await batches.loggedBefore(teamId, pipelineId, after, want)) views.push(...deliveriesOfLogged(log));
  }
  return views.filter((d) => matches(d, q));
}

/** An event's batch views across the team's pipelines (queued and logged). */
export async function eventDeliveryViews(batches: PipelineBatchStore, teamId: string, pipelineIds: string[], eventId: string): Promise<DeliveryDoc[]> {
  const queued = (await Promise.all(pipelineIds.map((p) => batches.queuedOf(p)))).flat();
  const logged = await batches.loggedOfEvent(teamId, eventId);
  return [...queued.flatMap(deliveriesOfQueued), ...logged.flatMap((l) => deliveriesOfLogged(l))].filter((d) => d.event_id === eventId);
}

/**
 * The attempts of logged batches: of one event, or of a pipeline's events before the attempt id `after` (an
 * attempt's id carries its event's time, so batches whose first event is no later than that time).
 */
export async function attemptViews(
  batches: PipelineBatchStore,
  teamId: string,
  q: { eventId?: string; destinationId?: string },
  after: string | null,
  limit: number,
): Promise<AttemptDoc[]> {
  let logs: PipelineBatchLogDoc[];
  if (q.eventId) logs = await batches.loggedOfEvent(teamId, q.eventId);
  else if (q.destinationId) {
    const ms = after ? uuidV7Millis(after) : null;
    logs = await batches.loggedBefore(teamId, q.destinationId, ms === null ? null : idPrefixAt(ms + 1), limit + 1);
  } else return [];
  return logs.flatMap(attemptsOfLogged).filter((a) => (!q.eventId || a.event_id === q.eventId) && (!q.destinationId || a.destination_id === q.destinationId));
}
