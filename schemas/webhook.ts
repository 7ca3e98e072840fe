import { Type, type Static } from '@sinclair/typebox';
import { Nullable, StringEnum, Timestamp, Uuid } from './common';
import { EVENT_CATALOGUE } from './event-catalogue';
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
const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  pattern: '^[hH][tT][tT][pP][sS]?://[^\\s\\\\#\\u0000-\\u001f\\u007f]+$',
  description: 'An absolute http(s) URL (https in production) without credentials, whitespace, backslashes or fragment; see the URL rules.',
  'x-messages': { pattern: 'Input should be an absolute URL with scheme http or https, without whitespace, backslashes or fragment.' },
});
const RateLimit = Nullable(Type.Integer({ minimum: 1, maximum: 100000, description: 'Messages per second to this endpoint (null: unlimited).' }));

/**
 * Custom delivery headers. Names are RFC 9110 tokens (stored as name/value pairs, so `$x` and `a.b` are
 * fine); values are printable ASCII with inner spaces or tabs (no CR, LF, NUL or other
 * control characters, no leading or trailing whitespace). Headers that frame or route the request
 * (hop-by-hop, length, encoding, host, expectations, upgrades) or that the signature owns are refused, as
 * receivers and proxies would reject or misread every delivery. At most 20, 8 KB in all (checked by the
 * handler: name + value + 4 bytes each).
 */
export const MAX_CUSTOM_HEADERS = 20;
export const MAX_CUSTOM_HEADER_BYTES = 8192;
export const RESERVED_HEADER_NAMES = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'host',
  'content-length',
  'content-type',
  'content-encoding',
  'http2-settings',
];
/** `abc` → `[aA][bB][cC]`: a case-insensitive regular expression that JSON Schema (no flags) can carry. */
const anyCase = (s: string) => s.replace(/[a-z]/g, (c) => `[${c}${c.toUpperCase()}]`);
const ReservedHeaderName = `^(?:${RESERVED_HEADER_NAMES.map(anyCase).join('|')}|${anyCase('webhook-')}.*|${anyCase('svix-')}.*)$`;
const HeaderName = Type.String({
  pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$",
  maxLength: 100,
  not: { pattern: ReservedHeaderName },
  'x-messages': {
    pattern: "Header names are HTTP tokens: letters, digits and !#$%&'*+-.^_`|~.",
    not: 'This header frames, routes or signs the request (hop-by-hop, content-*, host, expect, upgrade, webhook-*, svix-*) and cannot be set.',
  },
});
const HeaderValue = Type.String({
  maxLength: 4096,
  pattern: '^(?:[\\x21-\\x7e](?:[\\t\\x20-\\x7e]*[\\x21-\\x7e])?)?$',
  'x-messages': {
    pattern: 'Header values are printable ASCII; spaces and tabs only between other characters; no CR, LF, NUL or other control characters.',
  },
});
const Headers = Type.Record(Type.String(), HeaderValue, {
  propertyNames: HeaderName,
  maxProperties: MAX_CUSTOM_HEADERS,
  description: `At most ${MAX_CUSTOM_HEADERS} headers and ${MAX_CUSTOM_HEADER_BYTES} bytes in all (name + value + 4 each); names are unique regardless of case.`,
});

export const WebhookCreateBody = Type.Object(
  {
    url: Url,
    description: Type.String({ maxLength: 1000, default: '' }),
    filter_types: Type.Array(FilterType, { maxItems: 100, default: [], description: 'Empty: every event type.' }),
    disabled: Type.Boolean({ default: false }),
    rate_limit: Type.Optional(RateLimit),
    ordered_per_user: Type.Boolean({
      default: false,
      description:
        "Each user's events arrive in publish order: one POST at a time per user, and a failing event holds back that user's later ones " +
        "(other users go on). Costs throughput: a user's events wait for each other's round trip.",
    }),
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
    ordered_per_user: Type.Optional(Type.Boolean()),
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
    ordered_per_user: Type.Boolean(),
    failing_since: Type.Optional(Nullable(Timestamp('Start of the current run of failed deliveries (null while they succeed).'))),
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

export const WebhookHeadersBody = Type.Object(
  { headers: Headers },
  { additionalProperties: false, $id: 'WebhookHeadersBody', description: 'Replaces the custom headers added to every delivery.' },
);
export const WebhookHeaders = Type.Object(
  { headers: Type.Record(Type.String(), Type.String()) },
  { $id: 'WebhookHeaders', description: 'Added to every delivery; cannot override content-type or the signature headers.' },
);
export const WebhookSecret = Type.Object({ key: Type.String({ description: 'The current signing secret.' }) }, { $id: 'WebhookSecret' });

export const WebhookTestBody = Type.Object(
  {
    event_type: Type.Optional(
      StringEnum(
        EVENT_CATALOGUE.map((e) => e.name),
        { description: 'A catalogue event type to send with sample data; default `webhook.test`.' },
      ),
    ),
  },
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
    error: Nullable(Type.String({ description: "What went wrong when no answer says it: the connection error, the broker's refusal." })),
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
    user_id: Type.Optional(Nullable(Type.String({ description: "The event's user (null: an event of no user)." }))),
    status: StringEnum(['pending', 'succeeded', 'failed', 'cancelled']),
    attempts: Type.Integer(),
    next_attempt_at: Nullable(Timestamp()),
    last_status_code: Nullable(Type.Integer()),
    last_error: Nullable(Type.String()),
    created_at: Timestamp(),
  },
  { $id: 'WebhookDelivery' },
);
export const WebhookDeliveryList = Type.Object(
  { data: Type.Array(WebhookDelivery), next_cursor: Nullable(Type.String({ description: 'Pass as next_cursor for the next page; null on the last.' })) },
  { $id: 'WebhookDeliveryList' },
);
export const DeliveryListQuery = Type.Object(
  {
    status: Type.Optional(StringEnum(['pending', 'succeeded', 'failed', 'cancelled'])),
    event_type: Type.Optional(Type.String({ description: 'Only deliveries of this event type.' })),
    user_id: Type.Optional(Type.String({ description: "Only deliveries of this user's events." })),
    since: Type.Optional(Timestamp()),
    until: Type.Optional(Timestamp()),
    limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
    next_cursor: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);

export const RecoverBody = Type.Object({ since: Timestamp(), until: Type.Optional(Timestamp()) }, { additionalProperties: false, $id: 'WebhookRecoverBody' });
export const RecoverAccepted = Type.Object({ resent: Type.Integer({ description: 'Failed deliveries queued again.' }) }, { $id: 'WebhookRecoverAccepted' });
export const ResendAccepted = Type.Object({ event_id: Uuid(), webhook_id: Uuid() }, { $id: 'WebhookResendAccepted' });

export const EventTypeList = Type.Object(
  {
    data: Type.Array(Type.Object({ name: Type.String(), description: Type.String(), schema: Type.Unknown({ description: 'JSON Schema of `data`.' }) })),
  },
  { $id: 'EventTypeList' },
);
