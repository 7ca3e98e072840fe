import { Type, type Static } from '@sinclair/typebox';
import { Nullable, StringEnum, Timestamp, Uuid } from './common';
import { EVENT_CATALOGUE } from './event-catalogue';
import { WebhookEnvParams } from './webhook';

/** Event-streaming pipelines: `/v1/org/{org_id}/team/{team_id}/{environment}/pipeline` (api/routes/pipelines.ts). */
export const PipelineEnvParams = WebhookEnvParams;
export const PipelineParams = Type.Object({ ...WebhookEnvParams.properties, pipeline_id: Uuid() });
export const PipelineEventParams = Type.Object({ ...PipelineParams.properties, event_id: Uuid() });

export const MAX_PIPELINE_ROUTES = 50;
const DESTINATION_TYPES = ['rabbitmq', 'kafka'] as const;
const EXCHANGE_TYPES = ['topic', 'direct', 'fanout', 'headers'] as const;
const SASL_MECHANISMS = ['plain', 'scram-sha-256', 'scram-sha-512'] as const;
const printable = (maxLength: number, description: string) =>
  Type.String({ minLength: 1, maxLength, pattern: '^[^\\u0000-\\u001f\\u007f]+$', description, 'x-messages': { pattern: 'No control characters.' } });
const Password = Type.String({ minLength: 1, maxLength: 1024, description: 'Stored encrypted; never returned or logged.' });

export const PipelineRoute = Type.Object(
  {
    event_type_prefix: Type.String({
      maxLength: 200,
      pattern: '^[a-zA-Z0-9_.]*$',
      description: "The start of the event types this route takes (`labtest.`, `daily.data.`); '' takes every event (a catch-all, put it last).",
    }),
    target: printable(249, 'RabbitMQ: the routing key. Kafka: the topic (letters, digits, `.`, `_`, `-`; at most 249).'),
  },
  { additionalProperties: false },
);

/**
 * The destination as a request gives it: the fields of its `type` (the others are refused with a 422 naming
 * them). RabbitMQ's password may come in the URL or as `password`; Kafka's with its SASL user.
 */
export const DestinationInput = Type.Object(
  {
    type: StringEnum([...DESTINATION_TYPES]),
    url: Type.Optional(printable(2048, 'RabbitMQ: `amqp://` or `amqps://` (TLS; required in production) `[user[:password]@]host[:port][/vhost]`.')),
    username: Type.Optional(printable(255, 'RabbitMQ: the user, when not in the URL.')),
    password: Type.Optional(Password),
    exchange: Type.Optional(
      Type.String({
        maxLength: 255,
        pattern: '^[a-zA-Z0-9_.:-]*$',
        description:
          "RabbitMQ: the exchange, declared durable (default `healthbridge.events`); '' publishes to the default exchange (the routing key names the queue).",
      }),
    ),
    exchange_type: Type.Optional(StringEnum([...EXCHANGE_TYPES], { description: 'RabbitMQ: the exchange type (default topic).' })),
    bootstrap_servers: Type.Optional(
      Type.Array(Type.String({ pattern: '^[a-zA-Z0-9.:\\[\\]-]+:[0-9]{1,5}$', maxLength: 300, 'x-messages': { pattern: 'Write each server as host:port.' } }), {
        minItems: 1,
        maxItems: 20,
        description: 'Kafka: host:port of one or more brokers.',
      }),
    ),
    tls: Type.Optional(Type.Boolean({ description: 'Kafka: connect with TLS (required in production).' })),
    sasl: Type.Optional(
      Nullable(
        Type.Object(
          { mechanism: StringEnum([...SASL_MECHANISMS]), username: printable(255, 'The SASL user.'), password: Type.Optional(Password) },
          { additionalProperties: false, description: 'Kafka: SASL login (Event Hubs: plain with `$ConnectionString`).' },
        ),
      ),
    ),
  },
  { additionalProperties: false },
);
export type DestinationInput = Static<typeof DestinationInput>;

const Routes = Type.Array(PipelineRoute, {
  minItems: 1,
  maxItems: MAX_PIPELINE_ROUTES,
  description: 'In order: an event takes the first route whose prefix starts its type; an event no route takes is not sent to this pipeline.',
});

export const PipelineCreateBody = Type.Object(
  {
    description: Type.String({ maxLength: 1000, default: '' }),
    destination: DestinationInput,
    routes: Routes,
    ordered_per_user: Type.Boolean({
      default: false,
      description: "Each user's events arrive in publish order; a failing event holds back only that user's later events.",
    }),
    disabled: Type.Boolean({ default: false }),
  },
  { additionalProperties: false, $id: 'PipelineCreateBody' },
);
export type PipelineCreateBody = Static<typeof PipelineCreateBody>;

export const PipelinePatchBody = Type.Object(
  {
    description: Type.Optional(Type.String({ maxLength: 1000 })),
    destination: Type.Optional(DestinationInput),
    routes: Type.Optional(Routes),
    ordered_per_user: Type.Optional(Type.Boolean()),
    disabled: Type.Optional(Type.Boolean()),
  },
  {
    additionalProperties: false,
    $id: 'PipelinePatchBody',
    description: 'A destination replaces the whole destination; its password may be left out to keep the stored one (same type).',
  },
);
export type PipelinePatchBody = Static<typeof PipelinePatchBody>;

export const PipelineDestinationView = Type.Object(
  {
    type: StringEnum([...DESTINATION_TYPES]),
    url: Type.Optional(Type.String({ description: 'RabbitMQ, without credentials.' })),
    username: Type.Optional(Nullable(Type.String())),
    exchange: Type.Optional(Type.String()),
    exchange_type: Type.Optional(StringEnum([...EXCHANGE_TYPES])),
    bootstrap_servers: Type.Optional(Type.Array(Type.String())),
    tls: Type.Optional(Type.Boolean()),
    sasl: Type.Optional(Nullable(Type.Object({ mechanism: StringEnum([...SASL_MECHANISMS]), username: Type.String() }))),
    has_password: Type.Boolean({ description: 'Whether a password is stored (it is never returned).' }),
  },
  { description: 'Where the events go; credentials are never returned.' },
);

export const Pipeline = Type.Object(
  {
    id: Uuid(),
    description: Type.String(),
    destination: PipelineDestinationView,
    routes: Type.Array(PipelineRoute),
    ordered_per_user: Type.Boolean(),
    disabled: Type.Boolean(),
    disabled_reason: Nullable(StringEnum(['manual', 'failing'], { description: 'Why it is disabled: by you, or failing too long.' })),
    failing_since: Nullable(Timestamp('Start of the current run of failed deliveries.')),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { $id: 'Pipeline' },
);
export type Pipeline = Static<typeof Pipeline>;
export const PipelineList = Type.Object({ data: Type.Array(Pipeline), next_cursor: Nullable(Type.String()) }, { $id: 'PipelineList' });

export const PipelineTestBody = Type.Object(
  {
    event_type: Type.Optional(
      StringEnum(
        EVENT_CATALOGUE.map((e) => e.name),
        { description: "A catalogue event type to send with sample data, by the pipeline's routes; default `pipeline.test` (sent by the first route)." },
      ),
    ),
  },
  { additionalProperties: false, $id: 'PipelineTestBody' },
);
export const PipelineResendAccepted = Type.Object({ event_id: Uuid(), pipeline_id: Uuid() }, { $id: 'PipelineResendAccepted' });
