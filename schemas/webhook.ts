import { Type, type Static } from '@sinclair/typebox';
import { Nullable, StringEnum, Timestamp, Uuid } from './common';
import { Environment, OrgTeamParams } from './management';

/** The management path of a team's webhooks: `/v1/org/{org_id}/team/{team_id}/{environment}/webhook`. */
export const WebhookEnvParams = Type.Object({ ...OrgTeamParams.properties, environment: Environment });
export const WebhookParams = Type.Object({ ...WebhookEnvParams.properties, webhook_id: Uuid() });
export const WebhookEventParams = Type.Object({ ...WebhookParams.properties, event_id: Uuid() });
export const EventParams = Type.Object({ ...WebhookEnvParams.properties, event_id: Uuid() });

const FilterType = Type.String({
  pattern: '^[a-zA-Z0-9_]+(\\.[a-zA-Z0-9_]+)*(\\.\\*)?$',
  maxLength: 200,
  description: 'An event type (`labtest.order.created`) or a prefix written `prefix.*` (`labtest.*`).',
});
const Url = Type.String({ minLength: 1, maxLength: 2048, description: 'https in production; see the URL rules.' });
const RateLimit = Nullable(Type.Integer({ minimum: 1, maximum: 100000, description: 'Messages per second to this endpoint (null: unlimited).' }));
const Headers = Type.Record(Type.String({ pattern: '^[!#$%&\'*+.^_`|~0-9A-Za-z-]+$', maxLength: 100 }), Type.String({ maxLength: 4096 }));

export const WebhookCreateBody = Type.Object(
  {
    url: Url,
    description: Type.String({ maxLength: 1000, default: '' }),
    filter_types: Type.Array(FilterType, { maxItems: 100, default: [], description: 'Empty: every event type.' }),
    disabled: Type.Boolean({ default: false }),
    rate_limit: Type.Optional(RateLimit),
    secret: Type.Optional(Type.String({ description: '`whsec_` + base64 of 24–64 bytes; generated when omitted.' })),
  },
  { additionalProperties: false, $id: 'WebhookCreateBody' },
);
export type WebhookCreateBody = Static<typeof WebhookCreateBody>;

export const WebhookPatchBody = Type.Object(
  {
    url: Type.Optional(Url),
    description: Type.Optional(Type.String({ maxLength: 1000 })),
    filter_types: Type.Optional(Type.Array(FilterType, { maxItems: 100 })),
    disabled: Type.Optional(Type.Boolean()),
    rate_limit: Type.Optional(RateLimit),
  },
  { additionalProperties: false, $id: 'WebhookPatchBody' },
);

export const Webhook = Type.Object(
  {
    id: Uuid(),
    url: Type.String(),
    description: Type.String(),
    filter_types: Type.Array(Type.String()),
    disabled: Type.Boolean(),
    disabled_reason: Nullable(StringEnum(['manual', 'gone', 'failing'], { description: 'Why it is disabled: by you, 410 Gone, or failing too long.' })),
    rate_limit: Nullable(Type.Integer()),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { $id: 'Webhook' },
);
export type Webhook = Static<typeof Webhook>;

export const WebhookList = Type.Object({ data: Type.Array(Webhook), next_cursor: Nullable(Type.String()) }, { $id: 'WebhookList' });
export const CursorQuery = Type.Object(
  { next_cursor: Type.Optional(Type.String()), limit: Type.Integer({ minimum: 1, maximum: 250, default: 50 }) },
  { additionalProperties: true },
);

export const WebhookHeaders = Type.Object(
  { headers: Headers },
  { $id: 'WebhookHeaders', description: 'Added to every delivery; cannot override content-type or the signature headers.' },
);
export const WebhookSecret = Type.Object({ key: Type.String({ description: 'The current signing secret.' }) }, { $id: 'WebhookSecret' });

export const WebhookTestBody = Type.Object(
  { event_type: Type.Optional(Type.String({ description: 'A catalogue event type to send with sample data; default `webhook.test`.' })) },
  { additionalProperties: false, $id: 'WebhookTestBody' },
);
export const EventAccepted = Type.Object({ event_id: Uuid() }, { $id: 'EventAccepted' });

export const WebhookEvent = Type.Object(
  {
    id: Uuid('Sent as webhook-id.'),
    event_type: Type.String(),
    team_id: Type.String(),
    user_id: Nullable(Type.String()),
    client_user_id: Nullable(Type.String()),
    data: Type.Record(Type.String(), Type.Unknown()),
    created_at: Timestamp(),
  },
  { $id: 'WebhookEvent' },
);
export const WebhookEventList = Type.Object({ data: Type.Array(WebhookEvent), next_cursor: Nullable(Type.String()) }, { $id: 'WebhookEventList' });
export const EventListQuery = Type.Object(
  {
    event_type: Type.Optional(Type.String()),
    user_id: Type.Optional(Type.String()),
    since: Type.Optional(Timestamp()),
    until: Type.Optional(Timestamp()),
    next_cursor: Type.Optional(Type.String()),
    limit: Type.Integer({ minimum: 1, maximum: 250, default: 50 }),
  },
  { additionalProperties: true },
);

export const WebhookAttempt = Type.Object(
  {
    id: Uuid(),
    event_id: Uuid(),
    webhook_id: Uuid('The endpoint.'),
    attempt: Type.Integer({ minimum: 1 }),
    trigger: StringEnum(['scheduled', 'manual']),
    timestamp: Timestamp(),
    duration_ms: Type.Integer(),
    status_code: Nullable(Type.Integer()),
    error_class: Nullable(Type.String({ description: 'timeout, connection_error, refused_address, dns_error, http_<status>…' })),
    response_body: Nullable(Type.String({ description: 'First 4 KB of the answer.' })),
  },
  { $id: 'WebhookAttempt' },
);
export const WebhookAttemptList = Type.Object({ data: Type.Array(WebhookAttempt), next_cursor: Nullable(Type.String()) }, { $id: 'WebhookAttemptList' });
export const AttemptListQuery = Type.Object(
  { event_id: Type.Optional(Uuid()), next_cursor: Type.Optional(Type.String()), limit: Type.Integer({ minimum: 1, maximum: 250, default: 50 }) },
  { additionalProperties: true },
);

export const WebhookDelivery = Type.Object(
  {
    event_id: Uuid(),
    webhook_id: Uuid(),
    event_type: Type.String(),
    status: StringEnum(['pending', 'succeeded', 'failed', 'cancelled']),
    attempts: Type.Integer(),
    next_attempt_at: Nullable(Timestamp()),
    last_status_code: Nullable(Type.Integer()),
    last_error: Nullable(Type.String()),
    created_at: Timestamp(),
  },
  { $id: 'WebhookDelivery' },
);
export const WebhookDeliveryList = Type.Object({ data: Type.Array(WebhookDelivery) }, { $id: 'WebhookDeliveryList' });
export const DeliveryListQuery = Type.Object(
  {
    status: Type.Optional(StringEnum(['pending', 'succeeded', 'failed', 'cancelled'])),
    since: Type.Optional(Timestamp()),
    until: Type.Optional(Timestamp()),
    limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
  },
  { additionalProperties: true },
);

export const RecoverBody = Type.Object(
  { since: Timestamp(), until: Type.Optional(Timestamp()) },
  { additionalProperties: false, $id: 'WebhookRecoverBody' },
);
export const RecoverAccepted = Type.Object({ resent: Type.Integer({ description: 'Failed deliveries queued again.' }) }, { $id: 'WebhookRecoverAccepted' });
export const ResendAccepted = Type.Object({ event_id: Uuid(), webhook_id: Uuid() }, { $id: 'WebhookResendAccepted' });

export const EventTypeList = Type.Object(
  {
    data: Type.Array(
      Type.Object({ name: Type.String(), description: Type.String(), schema: Type.Unknown({ description: 'JSON Schema of `data`.' }) }),
    ),
  },
  { $id: 'EventTypeList' },
);
