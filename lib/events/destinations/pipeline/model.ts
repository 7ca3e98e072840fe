import type { EventDoc } from '../../model';

/**
 * Event-streaming pipelines: a team's events sent to its own broker (RabbitMQ or Kafka), routed by event type
 * prefix. A pipeline is another kind of destination of the webhook fan-out: its dispatcher is the webhook one, keyed
 * by the pipeline id where an endpoint's id would be; its deliveries are recorded per batch (batches.ts), and only
 * those the broker refused become delivery and attempt documents like a webhook's.
 */

export type ExchangeType = 'topic' | 'direct' | 'fanout' | 'headers';
export type SaslMechanism = 'plain' | 'scram-sha-256' | 'scram-sha-512';

export interface RabbitmqDestination {
  type: 'rabbitmq';
  /** `amqp://host:port/vhost` or `amqps://…`, without credentials (those are `username` and the sealed password). */
  url: string;
  username: string | null;
  /** '' is the default exchange (the routing key names the queue); any other is declared durable, of `exchange_type`. */
  exchange: string;
  exchange_type: ExchangeType;
}

export interface KafkaDestination {
  type: 'kafka';
  /** `host:port` entries. */
  bootstrap_servers: string[];
  tls: boolean;
  /** SASL user and mechanism; the password is sealed with the credentials. */
  sasl: { mechanism: SaslMechanism; username: string } | null;
}

export type PipelineDestination = RabbitmqDestination | KafkaDestination;

/** What a pipeline's broker login needs in secret: stored encrypted (the `credentials` field), never returned or logged. */
export interface PipelineCredentials {
  password: string;
}

export interface PipelineRoute {
  /** Matched against the event type's start: `labtest.` takes `labtest.order.updated`; '' takes every event. */
  event_type_prefix: string;
  /** The routing key (RabbitMQ) or topic (Kafka) the event is sent with. */
  target: string;
}

export type PipelineDisabledReason = 'manual' | 'failing';

export interface PipelineDoc {
  /** UUIDv7: the listing pages on it. */
  _id: string;
  team_id: string;
  description: string;
  destination: PipelineDestination;
  credentials: PipelineCredentials | null;
  routes: PipelineRoute[];
  /** One user's events arrive in publish order; a failing event holds back only that user's later events. */
  ordered_per_user: boolean;
  disabled: boolean;
  disabled_reason: PipelineDisabledReason | null;
  /** Start of the current run of failures (null after a success). */
  failing_since: Date | null;
  created_at: Date;
  updated_at: Date;
  /** Bumped by every change: the sender reconnects when it moves; conditional changes check it. */
  version: number;
}

/** The event type a pipeline's test-send publishes: routed to its first route whatever the prefixes. */
export const PIPELINE_TEST_EVENT = 'pipeline.test';

/**
 * The route an event takes through a pipeline: the first whose prefix starts its type (order matters; put a
 * catch-all '' last), or null when none matches: then the pipeline does not receive the event at all (no
 * delivery is queued or logged). A test event goes only to its pipeline, by the first route.
 */
export function routeOf(pipeline: Pick<PipelineDoc, '_id' | 'routes'>, event: Pick<EventDoc, 'event_type' | 'only_destination_id'>): PipelineRoute | null {
  if (event.only_destination_id) {
    if (event.only_destination_id !== pipeline._id) return null;
    if (event.event_type === PIPELINE_TEST_EVENT) return pipeline.routes[0] ?? null;
  }
  return pipeline.routes.find((r) => event.event_type.startsWith(r.event_type_prefix)) ?? null;
}
