import type { Config } from '../platform/config';
import type { EndpointDoc } from './destinations/webhook/endpoints-store';
import { matchesFilter } from './retry';
import { deliveryId, type DeliveryDoc, type DeliveryPolicy, type EventDoc } from './model';

/**
 * Fan-out: which endpoints receive an event, and the delivery document each gets. Delivery ids are
 * `<eventId>:<destinationId>`, so inserting the same fan-out again (a repeated idempotency key, the sweeper's
 * repair of an unfinished publish) queues nothing twice.
 */
export function deliveryPolicyFrom(config: Config): DeliveryPolicy {
  return {
    schedule_ms: config.WEBHOOK_RETRY_SCHEDULE_MS.split(',').map((s) => Number(s.trim())),
    timeout_ms: config.WEBHOOK_ATTEMPT_TIMEOUT_MS,
    throttle_floor_ms: config.WEBHOOK_THROTTLE_FLOOR_MS,
    disable_after_ms: config.WEBHOOK_DISABLE_AFTER_MS,
  };
}

export function receivesEvent(endpoint: EndpointDoc, event: Pick<EventDoc, 'event_type' | 'only_destination_id'>): boolean {
  return event.only_destination_id ? endpoint._id === event.only_destination_id : matchesFilter(endpoint.filter_types, event.event_type);
}

/** A new delivery of `event` to `destinationId` (a pipeline's: with its route's `target`), due `at`. */
export function newDelivery(
  event: EventDoc,
  destinationId: string,
  policy: DeliveryPolicy,
  at: Date,
  trigger: DeliveryDoc['trigger'] = 'scheduled',
  target?: string,
): DeliveryDoc {
  return {
    _id: deliveryId(event._id, destinationId),
    team_id: event.team_id,
    destination_id: destinationId,
    ...(target !== undefined ? { target } : {}),
    event_id: event._id,
    event_type: event.event_type,
    user_id: event.user_id,
    status: 'pending',
    trigger,
    next_attempt_at: at,
    attempts: 0,
    pass_attempts: 0,
    policy,
    last_status_code: null,
    last_error: null,
    created_at: at,
    updated_at: at,
    finished_at: null,
  };
}

/**
 * The deliveries of `events` (one team's) to the team's enabled `endpoints` whose filter matches. Pipelines get
 * a batch per flush instead (destinations/pipeline/batches.ts `batchesOf`).
 */
export function fanOut(events: EventDoc[], endpoints: EndpointDoc[], policy: DeliveryPolicy, at: Date): DeliveryDoc[] {
  return events.flatMap((e) => endpoints.filter((ep) => receivesEvent(ep, e)).map((ep) => newDelivery(e, ep._id, policy, at)));
}
