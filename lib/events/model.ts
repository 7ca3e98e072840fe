import { nameBasedUuid, timeOrderedNameBasedUuid, uuidV7Millis } from '../platform/keys';

/** Webhook events, deliveries and attempts as the code sees them, and their ids (store.ts keeps them). */

/** Business timings of one delivery, snapshotted from the publisher's configuration. */
export interface DeliveryPolicy {
  schedule_ms: number[];
  timeout_ms: number;
  throttle_floor_ms: number;
  disable_after_ms: number;
}

export type Trigger = 'scheduled' | 'manual';
export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'cancelled';

export interface EventDoc {
  /** Time-ordered (UUIDv7), so the delivery log pages on it; sent as webhook-id. Earlier versions: name-based or random. */
  _id: string;
  team_id: string;
  /** The producer's key (one domain change, one event: unique per team), or the event's own id when it gave none. */
  idempotency_key: string;
  event_type: string;
  user_id: string | null;
  client_user_id: string | null;
  /** The envelope exactly as signed and sent (`envelopeOf`), `data` included. */
  body: string;
  created_at: Date;
  /** Test events go to one endpoint only. */
  only_destination_id: string | null;
}

/**
 * One process's publishing over a span of time (lib/events/publisher.ts): while it exists, the fan-out of events
 * created in [events_from, events_until) by that process may be unfinished. Removed once it is finished.
 */
export interface OutboxDoc {
  _id: string;
  events_from: Date;
  events_until: Date;
  created_at: Date;
}

export interface DeliveryDoc {
  /** `<eventId>:<destinationId>` */
  _id: string;
  team_id: string;
  /** The destination: a webhook endpoint's id, or a pipeline's (lib/events/destinations/pipeline). */
  destination_id: string;
  /** A pipeline delivery's routing key or topic, chosen by its routes at publish; absent for webhooks. */
  target?: string;
  event_id: string;
  event_type: string;
  user_id: string | null;
  status: DeliveryStatus;
  trigger: Trigger;
  /** When the dispatcher sends it next; null once finished. */
  next_attempt_at: Date | null;
  /** Attempts over the delivery's whole life (numbering of attempt records). */
  attempts: number;
  /** Attempts of the current pass (index into policy.schedule_ms); a resend starts a new pass. */
  pass_attempts: number;
  policy: DeliveryPolicy;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

export interface AttemptDoc {
  /** `attemptId(deliveryId, attempt)`: deterministic, ordered by the event's time then the attempt number. */
  _id: string;
  team_id: string;
  event_id: string;
  destination_id: string;
  user_id: string | null;
  attempt: number;
  trigger: Trigger;
  timestamp: Date;
  duration_ms: number;
  status_code: number | null;
  error_class: string | null;
  /** What went wrong when no answer says it (a connection, a broker's refusal); absent on attempts of earlier versions. */
  error?: string | null;
  /** The receiver's answer, truncated to 4 KB. */
  response_body: string | null;
}

export const deliveryId = (eventId: string, destinationId: string) => `${eventId}:${destinationId}`;
/**
 * Deterministic per (delivery, attempt number), so recording the same attempt again writes nothing. A UUIDv7 on
 * the event's time with the attempt number as its counter: the delivery log pages attempts on `_id`, newest
 * event first and, within an event, latest attempt first. Events of earlier versions (not v7) keep name-based ids.
 */
export function attemptId(deliveryIdValue: string, attempt: number): string {
  const eventTime = uuidV7Millis(deliveryIdValue.split(':')[0]);
  return eventTime === null
    ? nameBasedUuid('webhook-attempt', deliveryIdValue, String(attempt))
    : timeOrderedNameBasedUuid(eventTime, ['webhook-attempt', deliveryIdValue, String(attempt)], Math.min(attempt, 0xfff));
}

/** The envelope of the spec, exactly: the event id travels as the webhook-id header, not in the body. */
export function envelopeOf(e: Pick<EventDoc, 'event_type' | 'team_id' | 'user_id' | 'client_user_id'> & { data: Record<string, unknown> }): string {
  return JSON.stringify({ event_type: e.event_type, data: e.data, team_id: e.team_id, user_id: e.user_id, client_user_id: e.client_user_id });
}

/** The event's `data` (from its stored envelope). */
export function eventData(e: Pick<EventDoc, 'body'>): Record<string, unknown> {
  return (JSON.parse(e.body) as { data: Record<string, unknown> }).data;
}
