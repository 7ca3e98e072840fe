import { ApiError, ValidationError } from '../../lib/platform/errors';
import { publishEvent } from '../../lib/events/publisher';
import { destinationChanged } from '../../lib/events/dispatcher-commands';
import type { EndpointDoc } from '../../lib/events/destinations/webhook/endpoints-store';
import { generateSecret, isValidSecret } from '../../lib/events/destinations/webhook/signing';
import { ErrorDetail } from '../../schemas/common';
import { findEventType } from '../../schemas/event-catalogue';
import {
  EventAccepted,
  Webhook,
  ResendAccepted,
  WebhookCreateBody,
  WebhookEnvParams,
  WebhookEventParams,
  MAX_CUSTOM_HEADER_BYTES,
  MAX_CUSTOM_HEADERS,
  WebhookHeaders,
  WebhookHeadersBody,
  WebhookList,
  WebhookParams,
  WebhookPatchBody,
  WebhookSecret,
  WebhookTestBody,
} from '../../schemas/webhook';
import { defineRoute } from '../route';
import { destinationRoutes } from './destination-routes';
import { audited } from '../../lib/tenancy/audit';
import { assertUrlAllowed, endpointInTeam, toWebhook, webhookTarget } from '../../lib/events/destinations/webhook/requests';
import { WEBHOOK_ROUTES_BASE as base, WEBHOOK_TAGS as tags, webhookErrors as errors, webhookTeam as scope } from '../management-scope';
import { timeOrderedUuid } from '../../lib/platform/keys';

/** Rules on custom headers beyond their schema: names unique regardless of case, and a total size. */
function assertHeaderSet(headers: Record<string, string>): void {
  const seen = new Set<string>();
  for (const name of Object.keys(headers)) {
    if (seen.has(name.toLowerCase())) {
      throw ValidationError.field(['body', 'headers', name], `Header ${name} is given twice (names are case-insensitive).`, 'value_error.duplicate');
    }
    seen.add(name.toLowerCase());
  }
  const bytes = Object.entries(headers).reduce((n, [k, v]) => n + k.length + v.length + 4, 0);
  if (bytes > MAX_CUSTOM_HEADER_BYTES) {
    throw ValidationError.field(
      ['body', 'headers'],
      `Custom headers take ${bytes} bytes; at most ${MAX_CUSTOM_HEADER_BYTES} are allowed (receivers refuse large header sections).`,
      'value_error.too_large',
    );
  }
}

/**
 * Names of the custom headers a replacement adds, removes or changes, as `headers.<name>` (never values,
 * which often carry the receiver's credentials).
 */
function changedHeaders(before: Record<string, string>, after: Record<string, string>): string[] {
  const names = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...names].filter((n) => before[n] !== after[n]).map((n) => `headers.${n}`);
}

/** A webhook endpoint as a destination of events (the routes it shares with pipelines: destination-routes.ts). */
const webhook = destinationRoutes<EndpointDoc>({
  noun: 'Webhook',
  audit: 'webhook',
  idParam: 'webhook_id',
  base,
  tags,
  envParams: WebhookEnvParams,
  params: WebhookParams,
  eventParams: WebhookEventParams,
  schema: Webhook,
  listSchema: WebhookList,
  resendAccepted: ResendAccepted,
  page: (deps, teamId, after, limit) => deps.repos.webhooks.listEndpoints(teamId, after, limit),
  inTeam: endpointInTeam,
  insert: (deps, doc) => deps.repos.webhooks.createEndpoint(doc),
  update: (deps, teamId, id, set) => deps.repos.webhooks.updateEndpoint(teamId, id, set),
  remove: (deps, teamId, id) => deps.repos.webhooks.deleteEndpoint(teamId, id),
  toPublic: toWebhook,
  target: webhookTarget,
  text: {
    list: 'Webhooks',
    delete: 'Pending deliveries to it are cancelled.',
    deliveries: {
      summary: 'List deliveries to a webhook',
      description:
        'Pending (queued or waiting to retry) and finished deliveries, newest first; filter by status, event_type, user_id and a [since, until) window.',
    },
    attempts: { summary: 'List delivery attempts to a webhook' },
    resend: {
      summary: 'Resend an event to a webhook',
      description: 'One manual attempt (not rescheduled on failure), with the same webhook-id as the original delivery.',
    },
    recover: {
      operationId: 'recoverWebhook',
      summary: 'Recover failed deliveries',
      description: 'Resends every failed delivery to this webhook whose event was delivered in [since, until) (until defaults to now).',
    },
  },
});

/** A webhook's part of the delivery log (served with the team-wide log: webhook-delivery-log.ts). */
export const webhookDestinationLogRoutes = [webhook.attempts, webhook.deliveries, webhook.resend, webhook.recover];

export const webhookRoutes = [
  webhook.list,
  defineRoute({
    operationId: 'createWebhook',
    method: 'post',
    path: base,
    summary: 'Create webhook',
    description:
      'URL rules: https only in production; hosts resolving to private, link-local or cloud-metadata addresses are refused (at ' +
      'creation and again at every delivery); loopback is refused in production and allowed in sandbox by default; ' +
      'WEBHOOK_URL_ALLOWLIST admits specific host:port receivers. A refused URL is a 422 naming the reason.',
    tags,
    auth: 'management',
    params: WebhookEnvParams,
    body: WebhookCreateBody,
    responses: { 200: { description: 'The webhook', schema: Webhook }, ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      const teamId = await scope(deps, auth, params);
      const url = await assertUrlAllowed(deps, body.url);
      if (body.secret !== undefined && !isValidSecret(body.secret)) {
        throw ValidationError.field(['body', 'secret'], 'A secret is `whsec_` followed by base64 of 24 to 64 random bytes.');
      }
      const now = new Date();
      const id = timeOrderedUuid();
      const endpoint: EndpointDoc = {
        _id: id,
        team_id: teamId,
        url,
        description: body.description,
        filter_types: body.filter_types,
        disabled: body.disabled,
        disabled_reason: body.disabled ? 'manual' : null,
        rate_limit: body.rate_limit ?? null,
        ordered_per_user: body.ordered_per_user,
        headers: {},
        secrets: [{ key: body.secret ?? generateSecret(), created_at: now, expires_at: null }],
        failing_since: null,
        created_at: now,
        updated_at: now,
      };
      const doc = await webhook.create({ deps, auth, requestId, log }, teamId, endpoint, Object.keys(body));
      return { body: toWebhook(doc) };
    },
  }),
  webhook.get,
  defineRoute({
    operationId: 'updateWebhook',
    method: 'patch',
    path: `${base}/{webhook_id}`,
    summary: 'Update webhook',
    description:
      'Re-enabling (disabled=false) resets the failure clock. Every delivery sent after this answers uses the change (it waits for a delivery run in flight to finish).',
    tags,
    auth: 'management',
    params: WebhookParams,
    body: WebhookPatchBody,
    responses: { 200: { description: 'The webhook', schema: Webhook }, ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      const teamId = await scope(deps, auth, params);
      await endpointInTeam(deps, teamId, params.webhook_id);
      const set: Record<string, unknown> = { ...body };
      if (body.url !== undefined) set.url = await assertUrlAllowed(deps, body.url);
      if (body.disabled === true) set.disabled_reason = 'manual';
      if (body.disabled === false) Object.assign(set, { disabled_reason: null, failing_since: null });
      const doc = await webhook.change({ deps, auth, requestId, log }, teamId, params.webhook_id, 'webhook.update', Object.keys(body), set);
      return { body: toWebhook(doc) };
    },
  }),
  webhook.delete,
  defineRoute({
    operationId: 'getWebhookHeaders',
    method: 'get',
    path: `${base}/{webhook_id}/headers`,
    summary: 'Get custom headers',
    tags,
    auth: 'management',
    params: WebhookParams,
    responses: { 200: { description: 'Headers', schema: WebhookHeaders }, ...errors },
    async handler({ auth, params, deps }) {
      const teamId = await scope(deps, auth, params);
      return { body: { headers: (await endpointInTeam(deps, teamId, params.webhook_id)).headers } };
    },
  }),
  defineRoute({
    operationId: 'setWebhookHeaders',
    method: 'put',
    path: `${base}/{webhook_id}/headers`,
    summary: 'Replace custom headers',
    description:
      'Sent with every delivery. Names are HTTP tokens (not starting with $, without a dot), unique regardless of case; values are ' +
      'printable ASCII without control characters. Hop-by-hop and framing headers (connection, keep-alive, te, trailer, ' +
      'transfer-encoding, upgrade, expect, host, content-type, content-length, content-encoding, proxy-*) and the webhook-*/svix-* ' +
      `signature headers cannot be set. At most ${MAX_CUSTOM_HEADERS} headers, ${MAX_CUSTOM_HEADER_BYTES} bytes in all.`,
    tags,
    auth: 'management',
    params: WebhookParams,
    body: WebhookHeadersBody,
    responses: { 200: { description: 'Headers', schema: WebhookHeaders }, ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      const teamId = await scope(deps, auth, params);
      const endpoint = await endpointInTeam(deps, teamId, params.webhook_id);
      assertHeaderSet(body.headers);
      const doc = await webhook.change(
        { deps, auth, requestId, log },
        teamId,
        params.webhook_id,
        'webhook.headers.update',
        changedHeaders(endpoint.headers, body.headers),
        { headers: body.headers },
      );
      return { body: { headers: doc!.headers } };
    },
  }),
  defineRoute({
    operationId: 'getWebhookSecret',
    method: 'get',
    path: `${base}/{webhook_id}/secret`,
    summary: 'Get signing secret',
    tags,
    auth: 'management',
    params: WebhookParams,
    responses: { 200: { description: 'The current secret', schema: WebhookSecret }, ...errors },
    async handler({ auth, params, deps }) {
      const teamId = await scope(deps, auth, params);
      const endpoint = await endpointInTeam(deps, teamId, params.webhook_id);
      return { body: { key: endpoint.secrets[endpoint.secrets.length - 1].key } };
    },
  }),
  defineRoute({
    operationId: 'rotateWebhookSecret',
    method: 'post',
    path: `${base}/{webhook_id}/secret/rotate`,
    summary: 'Rotate signing secret',
    description:
      'A new secret signs every delivery sent after this answers (it waits for a delivery run in flight to finish); every earlier secret keeps signing too (one more signature each) until 24 hours after the ' +
      'rotation that replaced it (WEBHOOK_SECRET_OVERLAP_MS). Rotations per endpoint are capped in any 24 hours ' +
      '(WEBHOOK_SECRET_ROTATIONS_PER_DAY, default 5): one more is a 429 whose Retry-After (seconds) says when the next is allowed.',
    tags,
    auth: 'management',
    params: WebhookParams,
    responses: {
      200: { description: 'The new secret', schema: WebhookSecret },
      ...errors,
      429: { description: 'Too many rotations in 24 hours; Retry-After says when the next is allowed', schema: ErrorDetail },
    },
    async handler({ auth, params, deps, requestId, log }) {
      const teamId = await scope(deps, auth, params);
      await endpointInTeam(deps, teamId, params.webhook_id);
      const key = generateSecret();
      const max = deps.config.WEBHOOK_SECRET_ROTATIONS_PER_DAY;
      // The entry names the field (`secret`), never the key.
      await audited(
        { deps, auth, requestId, log },
        webhookTarget('webhook.secret.rotate', teamId, params.webhook_id),
        async () => {
          const outcome = await deps.repos.webhooks.rotateSecret(teamId, params.webhook_id, key, {
            overlapMs: deps.config.WEBHOOK_SECRET_OVERLAP_MS,
            maxPerWindow: max,
          });
          if (!outcome) throw new ApiError(404, `Webhook ${params.webhook_id} not found.`);
          if ('rate_limited' in outcome) {
            const at = outcome.rate_limited.next_allowed_at;
            throw new ApiError(
              429,
              `This webhook's secret was rotated ${max} times in the last 24 hours, the most allowed; the next rotation is allowed at ` +
                `${at.toISOString()}. The current secret and those still in their overlap keep signing.`,
              { 'Retry-After': String(Math.max(1, Math.ceil((at.getTime() - Date.now()) / 1000))) },
            );
          }
          await destinationChanged(deps.temporal, params.webhook_id);
        },
        ['secret'],
      );
      return { body: { key } };
    },
  }),
  defineRoute({
    operationId: 'testWebhook',
    method: 'post',
    path: `${base}/{webhook_id}/test`,
    summary: 'Send a test event',
    description:
      'Publishes a `webhook.test` event (or the named catalogue type with sample data) to this webhook only, through the ' +
      'normal signing, retry and logging path. Answers 202 with the event id.',
    tags,
    auth: 'management',
    params: WebhookParams,
    body: WebhookTestBody,
    responses: { 202: { description: 'Accepted', schema: EventAccepted }, 409: { description: 'Webhook disabled', schema: ErrorDetail }, ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      const teamId = await scope(deps, auth, params);
      const endpoint = await endpointInTeam(deps, teamId, params.webhook_id);
      if (endpoint.disabled) throw new ApiError(409, `Webhook ${endpoint._id} is disabled; enable it before testing.`);
      const type = body.event_type ?? 'webhook.test';
      const entry = findEventType(type);
      if (!entry) throw ValidationError.field(['body', 'event_type'], `Unknown event type '${type}'. See GET ${base}/event_types.`);
      const data = type === 'webhook.test' ? { ...entry.sample, webhook_id: endpoint._id } : entry.sample;
      const event = await audited(
        { deps, auth, requestId, log },
        webhookTarget('webhook.test', teamId, endpoint._id),
        () => publishEvent(deps, { teamId, eventType: type, data, onlyDestinationId: endpoint._id }),
        Object.keys(body),
      );
      return { status: 202, body: { event_id: event.id } };
    },
  }),
];
