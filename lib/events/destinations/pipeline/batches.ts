import { newDelivery } from '../../fan-out';
import { attemptId, deliveryId, type AttemptDoc, type DeliveryDoc, type DeliveryPolicy, type EventDoc } from '../../model';
import { routeOf, type PipelineDoc } from './model';

/**
 * A pipeline's deliveries are recorded per batch. The fan-out of one publish flush queues one batch document per
 * pipeline (`pipeline_batches`: its events in id order, each with the route's target and its body, encrypted); the
 * dispatcher sends the batch from that document alone, then writes one log document for it (`pipeline_batch_log`:
 * the events' ids and users, the attempt, what the broker refused) and deletes the queued one. A broker that
 * confirmed the batch (publisher confirms, Kafka's `acks=all`) holds it as a durable, ordered log of its own, so the
 * log document is the delivery record of its events: an event costs its own insert and a share of two documents,
 * where a delivery and an attempt document each cost a write of their own.
 *
 * What the broker refused goes on per event: each such event becomes a delivery document (`webhook_deliveries`,
 * after its first attempt) and is listed in the log's `split`; retries, holding a user's later events back, resend
 * and recover are then those of any delivery. A pipeline that keeps each user's order sends no batch while it has
 * delivery documents pending: it hands its queued batches on to delivery documents too (all of `split`).
 *
 * Why two collections (measured on DocumentDB, README "Pipelines"): an update re-inserts each of a document's index
 * entries, 500 per multikey index for a batch of 500, so the queued document carries no multikey index and is deleted
 * once sent; the log document, written once, carries the multikey indexes the delivery log and erasure read.
 */
export interface BatchedEvent {
  id: string;
  event_type: string;
  user_id: string | null;
  /** The route's routing key or topic. */
  target: string;
  /** The envelope as sent (the event's `body`); stored encrypted. */
  body: string;
  created_at: Date;
}

/** A queued batch: due since `next_attempt_at`, until its dispatcher sends it (or hands it on) and deletes it. */
export interface PipelineBatchDoc {
  /** `<first event id>:<pipeline id>` (events are in id order). */
  _id: string;
  team_id: string;
  destination_id: string;
  events: BatchedEvent[];
  next_attempt_at: Date;
  policy: DeliveryPolicy;
  created_at: Date;
  /**
   * Some of its events may have been queued before (a repeated producer key's fan-out, the sweeper's): the dispatcher
   * looks up which it delivered already before sending. Absent: a first fan-out, nothing to look up.
   */
  recheck?: true;
}

/** The delivery record of a sent (or handed-on) batch. `(events.id, destination_id)` is unique. */
export interface PipelineBatchLogDoc {
  /** The queued batch's id. */
  _id: string;
  team_id: string;
  destination_id: string;
  events: { id: string; user_id: string | null; event_type: string }[];
  /** The last event's id (the delivery log finds the batches overlapping a page by it). */
  last_event_id: string;
  /** The batch's one send: when, how long, what the broker said; null when it was handed on unsent. */
  attempt: { timestamp: Date; duration_ms: number; broker: string | null } | null;
  /** Events whose delivery went on as a delivery document of their own (refused, held back, or handed on). */
  split: string[];
  /** Events left out because they had been delivered already (a repeated fan-out). */
  skipped: string[];
  created_at: Date;
  finished_at: Date;
}

export const batchIdOf = (firstEventId: string, pipelineId: string) => `${firstEventId}:${pipelineId}`;

const byId = (a: { _id: string }, b: { _id: string }) => (a._id < b._id ? -1 : a._id > b._id ? 1 : 0);

/** The batch of one team's `events` (a flush's) for each of its pipelines with a route for any of them. */
export function batchesOf(events: EventDoc[], pipelines: PipelineDoc[], policy: DeliveryPolicy, at: Date, recheck = false): PipelineBatchDoc[] {
  const sorted = [...events].sort(byId);
  return pipelines.flatMap((p) => {
    const batched = sorted.flatMap((e) => {
      const route = routeOf(p, e);
      return route ? [{ id: e._id, event_type: e.event_type, user_id: e.user_id, target: route.target, body: e.body, created_at: e.created_at }] : [];
    });
    return batched.length ? [{ ...newBatch(p.team_id, p._id, batched, policy, at), ...(recheck ? { recheck: true as const } : {}) }] : [];
  });
}

export function newBatch(teamId: string, pipelineId: string, events: BatchedEvent[], policy: DeliveryPolicy, at: Date): PipelineBatchDoc {
  return { _id: batchIdOf(events[0].id, pipelineId), team_id: teamId, destination_id: pipelineId, events, next_attempt_at: at, policy, created_at: at };
}

/**
 * The log document of `batch`, sent as `attempt` (null: handed on unsent), with `split` events; `skipped` ones
 * (delivered by another batch already) are not its events, only named. Null when nothing of it is left to log.
 */
export function logOf(
  batch: PipelineBatchDoc,
  attempt: PipelineBatchLogDoc['attempt'],
  split: string[],
  skipped: ReadonlySet<string>,
  at: Date,
): PipelineBatchLogDoc | null {
  const events = batch.events.filter((e) => !skipped.has(e.id));
  if (!events.length) return null;
  return {
    _id: batch._id,
    team_id: batch.team_id,
    destination_id: batch.destination_id,
    events: events.map((e) => ({ id: e.id, user_id: e.user_id, event_type: e.event_type })),
    last_event_id: events[events.length - 1].id,
    attempt,
    split,
    skipped: batch.events.filter((e) => skipped.has(e.id)).map((e) => e.id),
    created_at: batch.created_at,
    finished_at: at,
  };
}

/** A batched event's delivery as a delivery document holds it before its first attempt. */
export function deliveryOfBatched(batch: Pick<PipelineBatchDoc, 'team_id' | 'destination_id' | 'policy' | 'created_at'>, e: BatchedEvent): DeliveryDoc {
  const event = { _id: e.id, team_id: batch.team_id, event_type: e.event_type, user_id: e.user_id } as EventDoc;
  return newDelivery(event, batch.destination_id, batch.policy, batch.created_at, 'scheduled', e.target);
}

/** A batched event as the sending code takes an event. */
export function eventOfBatched(batch: Pick<PipelineBatchDoc, 'team_id'>, e: BatchedEvent): EventDoc {
  return {
    _id: e.id,
    team_id: batch.team_id,
    idempotency_key: e.id,
    event_type: e.event_type,
    user_id: e.user_id,
    client_user_id: null,
    body: e.body,
    created_at: e.created_at,
    only_destination_id: null,
  };
}

/** The events of `batches` in id order, each with the delivery it stands for and its batch. */
export function batchedDeliveries(batches: PipelineBatchDoc[]): { delivery: DeliveryDoc; event: BatchedEvent; batch: PipelineBatchDoc }[] {
  return batches
    .flatMap((batch) => batch.events.map((event) => ({ delivery: deliveryOfBatched(batch, event), event, batch })))
    .sort((a, b) => byId(a.delivery, b.delivery));
}

/**
 * The delivery log's views of a logged batch's events (those not split off: theirs are delivery documents): each a
 * delivery as its document would read, succeeded (or pending, for a queued batch), and its one attempt.
 */
/** The policy a batch view shows (the log keeps none: nothing is retried from a view). */
const VIEW_POLICY: DeliveryPolicy = { schedule_ms: [], timeout_ms: 0, throttle_floor_ms: 0, disable_after_ms: 0 };

export function deliveriesOfLogged(log: PipelineBatchLogDoc, policy: DeliveryPolicy = VIEW_POLICY): DeliveryDoc[] {
  const handedOn = new Set(log.split);
  return log.events
    .filter((e) => !handedOn.has(e.id))
    .map((e) => ({
      _id: deliveryId(e.id, log.destination_id),
      team_id: log.team_id,
      destination_id: log.destination_id,
      event_id: e.id,
      event_type: e.event_type,
      user_id: e.user_id,
      status: 'succeeded' as const,
      trigger: 'scheduled' as const,
      next_attempt_at: null,
      attempts: 1,
      pass_attempts: 1,
      policy,
      last_status_code: null,
      last_error: null,
      created_at: log.created_at,
      updated_at: log.finished_at,
      finished_at: log.finished_at,
    }));
}

export function attemptsOfLogged(log: PipelineBatchLogDoc): AttemptDoc[] {
  const { attempt } = log;
  if (!attempt) return [];
  return deliveriesOfLogged(log).map((d) => ({
    _id: attemptId(d._id, 1),
    team_id: d.team_id,
    event_id: d.event_id,
    destination_id: d.destination_id,
    user_id: d.user_id,
    attempt: 1,
    trigger: 'scheduled',
    timestamp: attempt.timestamp,
    duration_ms: attempt.duration_ms,
    status_code: null,
    error_class: null,
    error: null,
    response_body: attempt.broker,
  }));
}

/** A queued batch's events as pending deliveries (the delivery log's view). */
export function deliveriesOfQueued(batch: PipelineBatchDoc): DeliveryDoc[] {
  return batch.events.map((e) => deliveryOfBatched(batch, e));
}
