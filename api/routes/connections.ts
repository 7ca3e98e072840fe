import { PHONE_PROVIDERS } from '../../lib/phones/sdk-auth';
import { randomBytes } from 'node:crypto';
import { badRequest, forbidden, notFound } from '../../lib/platform/errors';
import { hashKey } from '../../lib/platform/keys';
import { publicBaseUrl } from '../../lib/platform/config';
import type { HistoricalPullDoc } from '../../lib/wearables/historical-pulls-store';
import { isoWithOffset } from '../../lib/platform/time';
import { createAdapterRegistry, DEMO_PROVIDERS } from '../../lib/wearables/adapters';
import { connectWithLinkToken, demoSignIn } from '../../lib/wearables/link-flow';
import { LINK_TOKEN_REFUSALS } from '../../lib/wearables/link-tokens-store';
import { connectProvider, deregisterConnection, providerSummary, signalConnection } from '../../lib/wearables/workflow-client';
import { ErrorDetail, HTTPValidationError, SuccessResponse } from '../../schemas/common';
import { UserIdParams } from '../../schemas/user';
import {
  DemoConnectBody,
  DemoConnectResponse,
  HistoricalPullIntrospection,
  IntrospectQuery,
  LinkTokenBody,
  LinkTokenResponse,
  RefreshQuery,
  ResourcesIntrospection,
  UserProviderParams,
  UserProvidersResponse,
  UserRefreshResponse,
} from '../../schemas/wearables';
import { Type, type Static } from '@sinclair/typebox';
import type { AppDeps } from '../deps';
import { defineRoute } from '../route';
import { activeUser } from '../../lib/users/views';
import { integrationFor } from '../../lib/wearables/providers/registry';
import { resourceAvailability } from '../../lib/wearables/providers/scopes';

/** The link flow's operations: one tag, so the docs page lists each operation once. */
const linkTags = ['Link'];
const LINK_TOKEN_TTL_MS = 10 * 60_000;
const errors = {
  404: { description: 'Unknown user, or scheduled for deletion', schema: ErrorDetail },
  422: { description: 'Validation error', schema: HTTPValidationError },
};

/** Connects a sandbox demo provider; 400 when not sandbox, not a demo provider, or already connected. */
async function connectDemo(deps: AppDeps, teamId: string, userId: string, provider: string, faults?: DemoConnectBody['sandbox_faults']) {
  if (deps.config.DEPLOYMENT_ENVIRONMENT !== 'sandbox') throw badRequest('Demo providers can only be connected in sandbox deployments.');
  if (!DEMO_PROVIDERS.includes(provider)) throw badRequest(`'${provider}' is not a demo provider; demo providers: ${DEMO_PROVIDERS.join(', ')}.`);
  const result = await connectProvider(deps, { teamId, userId, provider, adapter: 'demo', faults });
  if ('conflict' in result) throw badRequest(`The user is already connected to ${provider}. Deregister it first (DELETE /v2/user/{user_id}/${provider}).`);
  return result.created;
}

const emptyRange = (d: Date | null) => (d ? isoWithOffset(d) : null);
const RELEASE = process.env.npm_package_version ?? 'healthbridge';

function pullStats(doc: HistoricalPullDoc) {
  return {
    status: doc.status,
    range_start: emptyRange(doc.range_start),
    range_end: emptyRange(doc.range_end),
    timeline: {
      scheduled_at: isoWithOffset(doc.timeline.scheduled_at ?? doc.updated_at),
      started_at: emptyRange(doc.timeline.started_at),
      ended_at: emptyRange(doc.timeline.ended_at),
    },
    days_with_data: doc.data_days.filter((d) => doc.days_requested.includes(d)).length,
    // Ours: how many days this pull asked the provider for (a re-backfill asks only for the gap).
    days_requested: doc.days_requested.length,
    attempts: doc.attempts,
    release: RELEASE,
    trace_id: doc.trace_id,
    error_details: doc.error_details?.error_type ?? null,
    error_message: doc.error_details?.error_message ?? null,
  };
}

function resourceStats(doc: HistoricalPullDoc) {
  return {
    last_attempt: doc.last_attempt ? { timestamp: isoWithOffset(doc.last_attempt.timestamp), status: doc.last_attempt.status } : null,
    oldest_data: emptyRange(doc.oldest_data),
    newest_data: emptyRange(doc.newest_data),
    sent_count: doc.sent_count,
  };
}

/** One page of a team's pull states, grouped user → provider → resource. */
async function introspect<T>(deps: AppDeps, teamId: string, query: Static<typeof IntrospectQuery>, view: (docs: HistoricalPullDoc[], provider: string) => T) {
  const after = query.next_cursor ?? query.cursor;
  const page = await deps.repos.historicalPulls.page({
    teamId,
    userId: query.user_id,
    provider: query.provider || undefined,
    afterUserId: after,
    userLimit: query.user_limit,
  });
  const byUser = new Map<string, Map<string, HistoricalPullDoc[]>>();
  for (const doc of page.docs) {
    const providers = byUser.get(doc.user_id) ?? new Map<string, HistoricalPullDoc[]>();
    providers.set(doc.provider, [...(providers.get(doc.provider) ?? []), doc]);
    byUser.set(doc.user_id, providers);
  }
  const data = [...byUser].map(([userId, providers]) => ({
    user_id: userId,
    provider: Object.fromEntries([...providers].map(([slug, docs]) => [slug, view(docs, slug)])),
  }));
  return { data, next: page.nextUserId, next_cursor: page.nextUserId };
}

export const connectionRoutes = [
  defineRoute({
    operationId: 'createLinkToken',
    method: 'post',
    path: '/v2/link/token',
    summary: 'Create a link token',
    description:
      'A one-time token (valid 10 minutes) for connecting one user to a provider: `link_web_url` is the hosted link page (GET /link), which uses it through the link-token API (x-vital-link-token); POST /v2/link/start uses it too.',
    tags: linkTags,
    auth: 'team',
    body: LinkTokenBody,
    responses: { 200: { description: 'Token', schema: LinkTokenResponse }, 400: { description: 'Unknown provider', schema: ErrorDetail }, ...errors },
    async handler({ body, auth, deps }) {
      await activeUser(deps, auth.teamId, body.user_id);
      for (const slug of [body.provider, ...(body.filter_on_providers ?? [])]) {
        if (slug && !deps.providers.find(slug)) throw badRequest(`Unknown provider '${slug}' (GET /v2/providers lists them).`);
      }
      const token = `lt_${randomBytes(24).toString('base64url')}`;
      const now = new Date();
      await deps.repos.linkTokens.create({
        _id: hashKey(token),
        team_id: auth.teamId,
        user_id: body.user_id,
        provider: body.provider ?? null,
        redirect_url: body.redirect_url ?? null,
        filter_on_providers: body.filter_on_providers ?? null,
        expires_at: new Date(now.getTime() + LINK_TOKEN_TTL_MS),
        created_at: now,
      });
      return { body: { link_token: token, link_web_url: `${publicBaseUrl(deps.config)}/link?token=${encodeURIComponent(token)}` } };
    },
  }),
  defineRoute({
    operationId: 'isLinkTokenValid',
    method: 'post',
    path: '/v2/link/token/isValid',
    summary: 'Check a link token',
    tags: linkTags,
    auth: 'team',
    body: Type.Object({ token: Type.String({ minLength: 1, maxLength: 256 }) }, { additionalProperties: false }),
    responses: {
      200: { description: 'Whether the token can still be used', schema: Type.Object({ valid: Type.Boolean() }, { additionalProperties: true }) },
      422: errors[422],
    },
    async handler({ body, auth, deps }) {
      const checked = await deps.repos.linkTokens.check(body.token);
      const doc = checked.doc;
      const valid = !('refused' in checked) && checked.doc.team_id === auth.teamId;
      return { body: { valid, ...(doc && doc.team_id === auth.teamId ? { user_id: doc.user_id, expires_at: isoWithOffset(doc.expires_at) } : {}) } };
    },
  }),
  defineRoute({
    operationId: 'startLinkConnect',
    method: 'post',
    path: '/v2/link/start',
    summary: 'Connect with a link token',
    description:
      'Uses a link token (once) to connect its user to `provider`, as the hosted link page does (GET /link). This deployment has no internet access, so only the sandbox demo providers connect here; others answer `state: error` with `provider_api_error`.',
    tags: linkTags,
    auth: 'team',
    body: Type.Object(
      { link_token: Type.String({ minLength: 1, maxLength: 256 }), provider: Type.String({ pattern: '^[a-z0-9_]+$', maxLength: 64 }) },
      { additionalProperties: false },
    ),
    responses: {
      200: {
        description: 'Link outcome (ProviderLinkResponse)',
        schema: Type.Object({ state: Type.String(), provider: Type.String() }, { additionalProperties: true }),
      },
      401: { description: 'Invalid, expired or used link token', schema: ErrorDetail },
      422: errors[422],
    },
    async handler({ body, auth, deps }) {
      const checked = await deps.repos.linkTokens.check(body.link_token);
      const error = (error_type: string, error: string) => ({ body: { state: 'error', error_type, error, provider: body.provider, connected: false } });
      if (!checked.doc || checked.doc.team_id !== auth.teamId) return error('invalid_token', 'Unknown link token.');
      if ('refused' in checked) return error(checked.refused, LINK_TOKEN_REFUSALS[checked.refused]);
      return { body: await connectWithLinkToken(deps, checked.doc, body.provider, () => demoSignIn(deps, body.provider)) };
    },
  }),
  defineRoute({
    operationId: 'connectDemoProvider',
    method: 'post',
    path: '/v2/link/connect/demo',
    summary: 'Connect a demo provider (sandbox)',
    description: `Connects a demo provider (${DEMO_PROVIDERS.join(', ')}) whose synthetic data is the same for the same user every time: 30 days of history are pulled, then new data syncs periodically. \`sandbox_faults\` (ours) makes chosen resources fail, to see retrying and failed pulls.`,
    tags: linkTags,
    auth: 'team',
    body: DemoConnectBody,
    responses: {
      200: { description: 'Connected', schema: DemoConnectResponse },
      400: { description: 'Not sandbox, or already connected', schema: ErrorDetail },
      ...errors,
    },
    async handler({ body, auth, deps }) {
      await activeUser(deps, auth.teamId, body.user_id);
      await connectDemo(deps, auth.teamId, body.user_id, body.provider, body.sandbox_faults);
      return { body: { success: true, detail: `Connected ${body.provider}; its history is being pulled (GET /v2/introspect/historical_pull).` } };
    },
  }),
  defineRoute({
    operationId: 'getUserProviders',
    method: 'get',
    path: '/v2/user/providers/{user_id}',
    summary: "A user's connected providers",
    tags: ['User'],
    auth: 'team',
    params: UserIdParams,
    responses: { 200: { description: 'Connections with status', schema: UserProvidersResponse }, ...errors },
    async handler({ params, auth, deps }) {
      await activeUser(deps, auth.teamId, params.user_id);
      const adapters = createAdapterRegistry(deps.providers);
      const live = await deps.repos.connections.listLiveForUser(auth.teamId, params.user_id);
      const errors = await deps.repos.connections.errorsOf(live.map((c) => c._id));
      const providers = live.map((c) => ({
        ...providerSummary(deps, c.provider),
        created_on: isoWithOffset(c.created_on),
        status: errors.has(c._id) ? 'error' : c.status,
        external_user_id: c.external_user_id ?? null,
        error_details: errors.has(c._id) ? { ...errors.get(c._id)!, errored_at: isoWithOffset(errors.get(c._id)!.errored_at) } : null,
        resource_availability: resourceAvailability(integrationFor(c.provider), adapters.forConnection(c)?.resources ?? [], c.granted_scopes),
      }));
      return { body: { providers } };
    },
  }),
  defineRoute({
    operationId: 'deregisterProvider',
    method: 'delete',
    path: '/v2/user/{user_id}/{provider}',
    summary: 'Deregister a provider',
    description:
      "Ends the user's connection to the provider: no more data is pulled; data already stored stays. For a phone's provider (apple_health_kit, health_connect, samsung_health) it also ends the user's phone sign-ins, and the phone may call it with its own SDK token.",
    tags: ['User'],
    auth: 'user',
    params: UserProviderParams,
    responses: { 200: { description: 'Deregistered', schema: SuccessResponse }, ...errors },
    async handler({ params, auth, deps }) {
      const phone = PHONE_PROVIDERS.includes(params.provider);
      if (auth.sdk && !phone) throw forbidden(`An SDK token disconnects only a phone's provider (${PHONE_PROVIDERS.join(', ')}), not ${params.provider}.`);
      await activeUser(deps, auth.teamId, params.user_id);
      // The phone's sign-ins end first: a phone that was told it is disconnected must not upload again.
      if (phone) await deps.repos.sdkSessions.revokeUser(auth.teamId, params.user_id, `disconnected:${params.provider}`);
      const connection = await deps.repos.connections.findLive(auth.teamId, params.user_id, params.provider);
      if (!connection) throw notFound(`The user has no ${params.provider} connection.`);
      await deregisterConnection(deps, connection);
      return { body: { success: true } };
    },
  }),
  defineRoute({
    operationId: 'refreshUser',
    method: 'post',
    path: '/v2/user/refresh/{user_id}',
    summary: "Sync a user's connections now",
    description: "Asks each of the user's pulled connections to fetch new data now; data events follow as it arrives.",
    tags: ['User'],
    auth: 'team',
    params: UserIdParams,
    query: RefreshQuery,
    responses: { 200: { description: 'Sync requested', schema: UserRefreshResponse }, ...errors },
    async handler({ params, auth, deps }) {
      await activeUser(deps, auth.teamId, params.user_id);
      const adapters = createAdapterRegistry(deps.providers);
      const inProgress: string[] = [];
      const failed: string[] = [];
      for (const c of await deps.repos.connections.listLiveForUser(auth.teamId, params.user_id)) {
        if (adapters.forConnection(c)?.mode !== 'pull') continue;
        ((await signalConnection(deps, c._id, 'refresh')) ? inProgress : failed).push(c.provider);
      }
      return { body: { success: true, user_id: params.user_id, refreshed_sources: [], in_progress_sources: inProgress, failed_sources: failed } };
    },
  }),
  defineRoute({
    operationId: 'introspectHistoricalPulls',
    method: 'get',
    path: '/v2/introspect/historical_pull',
    summary: 'Historical pull status',
    description:
      'Per user, provider and resource: scheduled, in_progress, success, retrying or failure, with the pulled range and error details. Paged by users.',
    tags: ['Introspection'],
    auth: 'team',
    query: IntrospectQuery,
    responses: { 200: { description: 'Pulls', schema: HistoricalPullIntrospection }, 422: errors[422] },
    async handler({ query, auth, deps }) {
      const adapters = createAdapterRegistry(deps.providers);
      return {
        body: await introspect(deps, auth.teamId, query, (docs, slug) => {
          const pulled = Object.fromEntries(docs.map((d) => [d.resource, pullStats(d)]));
          const supported = adapters.forConnection({ provider: slug, adapter: 'demo' })?.resources ?? [];
          return { pulled, not_pulled: supported.filter((r) => !(r in pulled)) };
        }),
      };
    },
  }),
  defineRoute({
    operationId: 'introspectResources',
    method: 'get',
    path: '/v2/introspect/resources',
    summary: 'Ingestion statistics per resource',
    tags: ['Introspection'],
    auth: 'team',
    query: IntrospectQuery,
    responses: { 200: { description: 'Statistics', schema: ResourcesIntrospection }, 422: errors[422] },
    async handler({ query, auth, deps }) {
      return { body: await introspect(deps, auth.teamId, query, (docs) => Object.fromEntries(docs.map((d) => [d.resource, resourceStats(d)]))) };
    },
  }),
];
