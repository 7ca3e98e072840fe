import { forbidden, unauthorized } from '../../lib/platform/errors';
import { publicBaseUrl } from '../../lib/platform/config';
import { timeOrderedUuid } from '../../lib/platform/keys';
import { isoWithOffset } from '../../lib/platform/time';
import { audited } from '../../lib/tenancy/audit';
import type { ConsoleLinkRefusal } from '../../lib/tenancy/console-sessions-store';
import { ErrorDetail } from '../../schemas/common';
import { ConsoleLink, ConsoleSession, ConsoleSessionBody } from '../../schemas/console';
import { WebhookEnvParams } from '../../schemas/webhook';
import { webhookErrors, webhookTeam } from '../management-scope';
import { defineRoute } from '../route';
import { staticFolder, STATIC_PAGE_HEADERS } from '../static-pages';

/**
 * The delivery-log page (README "Delivery-log page"): static files from api/console/ that call the public
 * management API only, and its two ways to sign in without a key in any URL: a key pasted into the page, or a
 * one-time link made through the management API and exchanged by the page for a session (an hour, one team).
 */

const consoleFolder = staticFolder('console', 'The delivery-log page', '/console', ['console.css', 'console.js', 'api.js', 'views.js']);
const REFUSALS: Record<ConsoleLinkRefusal, string> = {
  unknown: 'This sign-in link is not valid. Ask for a new link, or sign in with a management key.',
  expired: 'This sign-in link has expired (links work for 15 minutes). Ask for a new link.',
  used: 'This sign-in link was already used (a link opens the page once). Ask for a new link.',
};
const tags = ['Management: delivery-log page'];

export const consoleRoutes = [
  defineRoute({
    operationId: 'consolePage',
    method: 'get',
    path: '/console',
    summary: 'Delivery-log page',
    tags,
    auth: 'none',
    internal: true,
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: () => ({ body: consoleFolder.read('index.html'), contentType: 'text/html; charset=utf-8', headers: STATIC_PAGE_HEADERS }),
  }),
  consoleFolder.assetRoute({ operationId: 'consoleAsset', summary: 'Delivery-log page assets', tags }),
  defineRoute({
    operationId: 'createConsoleLink',
    method: 'post',
    path: '/v1/org/{org_id}/team/{team_id}/{environment}/console/links',
    summary: 'Create a sign-in link to the delivery-log page',
    description:
      'A link that opens the delivery-log page of this team once, within 15 minutes, without a key in the browser: the page ' +
      'exchanges it for a session of an hour that acts on this team only, as a team-scoped key of the key that made the link ' +
      '(it ends early when that key is deleted or loses the team). A session cannot make links.',
    tags,
    auth: 'management',
    params: WebhookEnvParams,
    responses: { 201: { description: 'The link', schema: ConsoleLink }, ...webhookErrors },
    async handler({ auth, params, deps, requestId, log }) {
      const teamId = await webhookTeam(deps, auth, params);
      if (auth.header === 'Authorization') throw forbidden('A delivery-log page session cannot make sign-in links; use a management key.');
      const linkId = timeOrderedUuid();
      const { token, link } = await audited({ deps, auth, requestId, log }, { action: 'console.link.create', type: 'console_link', id: linkId, teamId }, () =>
        deps.repos.consoleSessions.createLink({ linkId, orgId: auth.orgId, teamId, environment: params.environment, managementKeyId: auth.keyId }),
      );
      return { status: 201, body: { url: `${publicBaseUrl(deps.config)}/console#link=${token}`, expires_at: isoWithOffset(link.expires_at) } };
    },
  }),
  defineRoute({
    operationId: 'createConsoleSession',
    method: 'post',
    path: '/v1/console/sessions',
    summary: 'Exchange a sign-in link for a delivery-log page session',
    description: 'Uses the link (once) and answers a session token for `Authorization: Bearer`. An unknown, expired or used link is a 401 saying which.',
    tags,
    auth: 'none',
    body: ConsoleSessionBody,
    responses: {
      201: { description: 'The session', schema: ConsoleSession },
      401: { description: 'The link is unknown, expired or used', schema: ErrorDetail },
      422: webhookErrors[422],
    },
    async handler({ body, deps, requestId, log }) {
      const link = await deps.repos.consoleSessions.findLink(body.link);
      if (!link) throw unauthorized(REFUSALS.unknown);
      // Recorded as the key that made the link (its session will act as that key).
      const actor = { orgId: link.org_id, keyId: link.management_key_id, header: 'Authorization' as const };
      const target = { action: 'console.link.use' as const, type: 'console_link' as const, id: link.link_id, teamId: link.team_id };
      const used = await audited({ deps, auth: actor, requestId, log }, target, async () => {
        const outcome = await deps.repos.consoleSessions.useLink(body.link);
        if ('refused' in outcome) throw unauthorized(REFUSALS[outcome.refused]);
        return outcome;
      });
      const { session } = used;
      return {
        status: 201,
        body: {
          token: used.token,
          expires_at: isoWithOffset(session.expires_at),
          org_id: session.org_id,
          team_id: session.team_id,
          environment: session.environment,
        },
      };
    },
  }),
];
