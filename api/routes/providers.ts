import { PHONE_PROVIDERS } from '../../lib/phones/sdk-auth';
import { notFound } from '../../lib/platform/errors';
import { monogramSvg } from '../../lib/wearables/provider-catalogue';
import { Type } from '@sinclair/typebox';
import type { Context } from 'koa';
import { providerEnvKey, publicBaseUrl } from '../../lib/platform/config';
import { demoCapable, realAppsOf } from '../../lib/wearables/link-flow';
import type { ProviderCatalogue } from '../../lib/wearables/provider-catalogue';
import type { PushRequest } from '../../lib/wearables/providers/contract';
import { receivePush } from '../../lib/wearables/providers/push-intake';
import { DEMO_ONLY_REASONS, integrationFor } from '../../lib/wearables/providers/registry';
import { readTextBody } from '../middleware/body';
import { ErrorDetail, HTTPValidationError } from '../../schemas/common';
import { ProviderList, ProviderListQuery, ProviderSlugParams } from '../../schemas/provider';
import { defineRoute } from '../route';

const tags = ['Providers'];
const PushParams = Type.Object({ provider: Type.String({ pattern: '^[a-z0-9_]+$', maxLength: 64 }) });

const pushRequest = (ctx: Context, rawBody: Buffer): PushRequest => ({
  method: ctx.method,
  query: Object.fromEntries(Object.entries(ctx.query).map(([k, v]) => [k, Array.isArray(v) ? v[0] : (v ?? '')])),
  headers: Object.fromEntries(Object.entries(ctx.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')])),
  rawBody,
  remoteAddress: ctx.ip,
});

/**
 * How a provider connects for this team (ours, beside the original's fields): `real` (a real integration with an
 * OAuth app: the team's own or the deployment's), `demo_only` (sandbox demo data: the demo providers, Fitbit and
 * Garmin, and real integrations without an app), `unavailable` (production without an app), `sdk` (a phone signs in
 * and uploads: HealthKit, Health Connect, Samsung Health), `app` (the customer's app or SDK pushes the data) or
 * `credentials` (a password or email sign-in).
 */
function integrationOf(deps: { config: { DEPLOYMENT_ENVIRONMENT: string }; providers: ProviderCatalogue }, slug: string, realApps: ReadonlySet<string>) {
  const authType = deps.providers.find(slug)?.auth_type;
  const sandbox = deps.config.DEPLOYMENT_ENVIRONMENT === 'sandbox';
  const demoable = demoCapable(slug);
  const integration = realApps.has(slug)
    ? 'real'
    : PHONE_PROVIDERS.includes(slug)
      ? 'sdk'
      : demoable
        ? sandbox
          ? 'demo_only'
          : 'unavailable'
        : authType === 'sdk' || authType === 'app'
          ? 'app'
          : authType === 'oauth'
            ? 'unavailable'
            : 'credentials';
  const note = PHONE_PROVIDERS.includes(slug)
    ? `A phone signs in as its user and uploads (README "Data from phones")${sandbox ? '; in a sandbox the demo connects it too' : ''}.`
    : (DEMO_ONLY_REASONS[slug] ??
      (integrationFor(slug) && !realApps.has(slug)
        ? `Connects for real once an OAuth app is set (team custom credentials, or ${providerEnvKey(slug, 'CLIENT_ID')} and ${providerEnvKey(slug, 'CLIENT_SECRET')}).`
        : null));
  return { integration, integration_note: note };
}

export const providerRoutes = [
  defineRoute({
    operationId: 'listProviders',
    method: 'get',
    path: '/v2/providers/',
    summary: 'List providers',
    description: 'Every data source a user can connect, optionally only those of one source_type.',
    tags,
    auth: 'team',
    query: ProviderListQuery,
    responses: {
      200: { description: 'Providers', schema: ProviderList },
      422: { description: 'Unknown source_type', schema: HTTPValidationError },
    },
    async handler({ query, deps, auth }) {
      const realApps = await realAppsOf(deps, auth.teamId);
      return { body: deps.providers.list(publicBaseUrl(deps.config), query.source_type).map((p) => ({ ...p, ...integrationOf(deps, p.slug, realApps) })) };
    },
  }),
  defineRoute({
    operationId: 'providerPushHandshake',
    method: 'get',
    path: '/v2/providers/{provider}/webhook',
    summary: "A provider's push subscription handshake",
    description:
      'Where real providers verify our push endpoint (README "Connecting real providers"): Oura\'s `verification_token` + `challenge`, Strava\'s ' +
      "`hub.challenge`, Withings' HEAD check. Answers the challenge when the token is this deployment's.",
    tags,
    auth: 'none',
    params: PushParams,
    query: Type.Object({}, { additionalProperties: true }),
    responses: { 200: { description: 'The challenge echoed' }, 404: { description: 'Not a handshake this deployment recognises', schema: ErrorDetail } },
    async handler({ params, ctx, deps }) {
      const reply = await receivePush(deps, params.provider, pushRequest(ctx, Buffer.alloc(0)));
      return { status: reply.status, body: reply.body };
    },
  }),
  defineRoute({
    operationId: 'receiveProviderPush',
    method: 'post',
    path: '/v2/providers/{provider}/webhook',
    summary: "A provider's push notification",
    description:
      "A real provider's notification (Oura `x-oura-signature`, WHOOP `X-WHOOP-Signature`, Polar `Polar-Webhook-Signature`, Strava and " +
      'Withings events): verified against the app secrets of this deployment (401 and nothing stored otherwise, or when its timestamp is older ' +
      'than 5 minutes), then what it names is fetched from the provider once, however often it is delivered, and announced as `daily.data.*`.',
    tags,
    auth: 'none',
    params: PushParams,
    textBody: { contentTypes: ['application/json', 'application/x-www-form-urlencoded'], description: "The provider's notification, as it sent it." },
    responses: {
      200: { description: 'Accepted' },
      401: { description: 'Bad or missing signature, or a stale timestamp', schema: ErrorDetail },
      404: { description: 'No push intake for this provider', schema: ErrorDetail },
    },
    async handler({ params, ctx, deps }) {
      const raw = Buffer.from(await readTextBody(ctx, deps.config.BODY_LIMIT_BYTES), 'utf8');
      const reply = await receivePush(deps, params.provider, pushRequest(ctx, raw));
      return { status: reply.status, body: reply.body };
    },
  }),
  defineRoute({
    operationId: 'getProviderLogo',
    method: 'get',
    path: '/v2/providers/{slug}/logo.svg',
    summary: 'Provider logo',
    description: 'A generated monogram image; public so it can be used in <img> tags.',
    tags,
    auth: 'none',
    params: ProviderSlugParams,
    responses: {
      200: { description: 'SVG image', contentType: 'image/svg+xml' },
      404: { description: 'Unknown provider', schema: ErrorDetail },
    },
    handler({ params, deps }) {
      const entry = deps.providers.find(params.slug);
      if (!entry) throw notFound(`Unknown provider '${params.slug}'.`);
      return {
        body: monogramSvg(entry),
        contentType: 'image/svg+xml',
        headers: { 'Cache-Control': 'public, max-age=86400' },
      };
    },
  }),
];
