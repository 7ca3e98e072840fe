import type { Context } from 'koa';
import { badRequest, forbidden, unauthorized } from '../../lib/platform/errors';
import { hashKey, MANAGEMENT_KEY_PREFIX } from '../../lib/platform/keys';
import type { ManagementKeyDoc } from '../../lib/tenancy/model';
import { RefreshAheadCache } from '../../lib/platform/refresh-ahead-cache';
import { LINK_TOKEN_REFUSALS, type LinkTokenDoc } from '../../lib/wearables/link-tokens-store';
import { authenticateSdkToken, isSdkAccessToken, type SdkPrincipal } from '../../lib/phones/sdk-auth';
import type { AppDeps } from '../deps';
import type { ManagementKeyHeader, ManagementPrincipal, TeamPrincipal } from '../../lib/tenancy/principals';

export type { ManagementKeyHeader, ManagementPrincipal, TeamPrincipal };

/** The header the original API's SDKs send their api_key in: accepted as an alias of x-service-api-key. */
export const SDK_KEY_HEADER = 'x-vital-api-key';

/** The header the link page (and the original's link widget) sends its link token in. */
export const LINK_TOKEN_HEADER = 'x-vital-link-token';

export interface LinkTokenPrincipal {
  token: LinkTokenDoc;
}

/** A route of one user (`auth: 'user'`): the team's key, or the phone's SDK token of that very user (`sdk`). */
export interface UserScopedPrincipal {
  teamId: string;
  sdk: SdkPrincipal | null;
}

/** A phone's token reaches only its own user: the request's `user_id` (path, else body) must be the token's. */
export function sameUser(auth: UserScopedPrincipal, userId: string | undefined): void {
  if (auth.sdk && auth.sdk.userId !== userId) throw forbidden("This SDK token acts for another user: a phone's token reaches only its own user's endpoints.");
}

const TEAM_KEY_SHAPE = /^(sk|pk)_(us|eu)_/;
/** RFC 9745 `Deprecation` value (`@` + Unix time): X-Service-Org-Key was deprecated on 2025-01-01. */
const X_SERVICE_ORG_KEY_DEPRECATED_AT = '@1735689600';

export function createAuthenticator(deps: AppDeps) {
  const { config, repos } = deps;
  const env = config.DEPLOYMENT_ENVIRONMENT;
  const region = config.DEPLOYMENT_REGION;
  // Verified team keys, so the hot path (every data request) costs no key lookup: one revoked through this process is
  // dropped at once (TenancyRepository tells), one revoked through another stops working here within AUTH_CACHE_TTL_MS.
  const teamKeys = new RefreshAheadCache<TeamPrincipal>(config.AUTH_CACHE_TTL_MS);
  repos.tenancy.onTeamKeysRevoked((hashes) => teamKeys.revoke(hashes));

  const wrongDeployment = (keyEnv: string, keyRegion: string) =>
    unauthorized(
      `This API key was minted for the ${keyEnv} environment in region ${keyRegion}, but this deployment serves ` +
        `${env}/${region}. Use a key created for ${env}/${region}.`,
    );

  /** The team a stored key acts for, or null when no such key is stored (deleted). */
  async function lookUpTeamKey(key: string): Promise<TeamPrincipal | null> {
    const doc = await repos.tenancy.verifyTeamApiKey(key);
    if (!doc) return null;
    if (doc.environment !== env || doc.region !== region) throw wrongDeployment(doc.environment, doc.region);
    return { teamId: doc.team_id, orgId: doc.org_id, keyId: doc._id };
  }

  /** An SDK access token in `authorization: Bearer …`, or ''. */
  function sdkTokenOf(ctx: Context): string {
    const bearer = /^Bearer\s+(\S+)$/i.exec(ctx.get('authorization'))?.[1] ?? '';
    return isSdkAccessToken(bearer) ? bearer : '';
  }
  const SDK_TOKEN_OUT_OF_SCOPE =
    "An SDK token reaches only its own user's SDK endpoints (connect, sync state, historical stage, uploads, records, sync progress, the Apple Health import, disconnect). This endpoint takes a team API key in the x-service-api-key header, from your backend.";

  async function team(ctx: Context): Promise<TeamPrincipal> {
    const key = teamKeyOf(ctx);
    if (!key && sdkTokenOf(ctx)) throw forbidden(SDK_TOKEN_OUT_OF_SCOPE);
    if (!key) {
      if (ctx.get('x-management-key') || ctx.get('x-service-org-key')) {
        throw unauthorized('Management keys are not accepted on data endpoints. Send a team API key in the x-service-api-key header.');
      }
      throw unauthorized('Missing API key. Send your team API key in the x-service-api-key header.');
    }
    if (key.startsWith(MANAGEMENT_KEY_PREFIX)) {
      throw unauthorized('Management keys are not accepted on data endpoints. Send a team API key in the x-service-api-key header.');
    }
    const shape = TEAM_KEY_SHAPE.exec(key);
    if (shape) {
      const keyEnv = shape[1] === 'pk' ? 'production' : 'sandbox';
      if (keyEnv !== env || shape[2] !== region) throw wrongDeployment(keyEnv, shape[2]);
    }
    const principal = await teamKeys.get(hashKey(key), () => lookUpTeamKey(key));
    if (!principal) throw unauthorized('Invalid API key. Check the x-service-api-key header; keys are shown once at creation.');
    ctx.state.teamId = principal.teamId;
    return principal;
  }

  /**
   * The team key: `x-service-api-key`, or `x-vital-api-key`, the header the original API's SDKs send their api_key in
   * (so `Vital(api_key=..., base_url=...)` works unchanged). Both, with different keys, is ambiguous: 400.
   */
  function teamKeyOf(ctx: Context): string {
    const key = ctx.get('x-service-api-key');
    const alias = ctx.get(SDK_KEY_HEADER);
    if (key && alias && key !== alias) {
      throw badRequest(`Two different API keys: x-service-api-key and ${SDK_KEY_HEADER}. Send one key (in either header), or the same key in both.`);
    }
    return key || alias;
  }

  async function management(ctx: Context, orgId: string | undefined, teamId: string | undefined): Promise<ManagementPrincipal> {
    let key = ctx.get('x-management-key');
    let header: ManagementKeyHeader = 'X-Management-Key';
    if (!key) {
      key = ctx.get('x-service-org-key');
      if (key) {
        header = 'X-Service-Org-Key';
        ctx.set('Deprecation', X_SERVICE_ORG_KEY_DEPRECATED_AT);
        ctx.set('Link', '<https://datatracker.ietf.org/doc/html/rfc9745>; rel="deprecation"');
        ctx.set('Warning', '299 - "X-Service-Org-Key is deprecated; send the key in X-Management-Key"');
      }
    }
    const bearer = /^Bearer (\S+)$/i.exec(ctx.get('authorization'))?.[1];
    if (!key && bearer) return consoleSession(bearer, orgId, teamId);
    if (!key) {
      if (ctx.get('x-service-api-key') || ctx.get(SDK_KEY_HEADER)) {
        throw unauthorized('Team API keys are not accepted on the management API. Send a management key in the X-Management-Key header.');
      }
      throw unauthorized('Missing management key. Send it in the X-Management-Key header.');
    }
    if (TEAM_KEY_SHAPE.test(key)) {
      throw unauthorized('Team API keys are not accepted on the management API. Send a management key in the X-Management-Key header.');
    }
    const doc = await repos.tenancy.verifyManagementKey(key);
    if (!doc) throw unauthorized('Invalid management key. Check the X-Management-Key header; keys are shown once at creation.');
    if (orgId !== undefined && doc.org_id !== orgId) {
      throw forbidden(`This management key belongs to another organisation than ${orgId}.`);
    }
    if (header === 'X-Service-Org-Key') {
      // Names the key (never its value), so the operator can find the integration still sending the old header.
      ctx.state.log.warn({ management_key_id: doc._id, org_id: doc.org_id }, 'deprecated header X-Service-Org-Key used; send X-Management-Key');
    }
    return principalOf(doc, header, teamId);
  }

  /**
   * A delivery-log page session (lib/tenancy/console-sessions-store.ts): a team-scoped key on its one team, as
   * long as the key that opened it still exists and may still act on that team.
   */
  async function consoleSession(token: string, orgId: string | undefined, teamId: string | undefined): Promise<ManagementPrincipal> {
    const session = await repos.consoleSessions.findSession(token);
    const key = session && (await repos.tenancy.listManagementKeys(session.org_id)).find((k) => k._id === session.management_key_id);
    if (!session || !key || (key.role !== 'org_admin' && !key.team_ids.includes(session.team_id))) {
      throw unauthorized('Invalid or expired delivery-log page session. Open the page again with a new link, or sign in with a management key.');
    }
    if (orgId !== undefined && session.org_id !== orgId) throw forbidden(`This session belongs to another organisation than ${orgId}.`);
    return principalOf({ _id: key._id, org_id: session.org_id, role: 'team_admin', team_ids: [session.team_id] }, 'Authorization', teamId);
  }

  function principalOf(
    doc: Pick<ManagementKeyDoc, '_id' | 'org_id' | 'role' | 'team_ids'>,
    header: ManagementKeyHeader,
    teamId: string | undefined,
  ): ManagementPrincipal {
    const canAccessTeam = (id: string) => doc.role === 'org_admin' || doc.team_ids.includes(id);
    const principal: ManagementPrincipal = {
      keyId: doc._id,
      header,
      orgId: doc.org_id,
      role: doc.role,
      teamIds: doc.team_ids,
      canAccessTeam,
      assertTeamAccess(id) {
        if (!canAccessTeam(id)) throw forbidden(`This team management key is not bound to team ${id}.`);
      },
      assertOrgAdmin(action) {
        if (doc.role !== 'org_admin') {
          throw forbidden(`${action} needs an organisation management key (role org_admin); this key is scoped to teams and cannot act at organisation level.`);
        }
      },
    };
    if (teamId !== undefined) principal.assertTeamAccess(teamId);
    return principal;
  }

  /** The link page's token (x-vital-link-token): usable, or a 401 saying why not (the use itself is claimed later). */
  async function link(ctx: Context): Promise<LinkTokenPrincipal> {
    const token = ctx.get(LINK_TOKEN_HEADER);
    if (!token) throw unauthorized(`Missing link token. Send it in the ${LINK_TOKEN_HEADER} header (POST /v2/link/token makes one).`);
    const checked = await repos.linkTokens.check(token);
    if ('refused' in checked) throw unauthorized(LINK_TOKEN_REFUSALS[checked.refused]);
    ctx.state.teamId = checked.doc.team_id;
    return { token: checked.doc };
  }

  /**
   * A route of one user (`auth: 'user'`): a team key, or the SDK access token of a phone signed in as a user
   * (lib/phones/sdk-auth.ts). Which user the request is about (the path's or the body's `user_id`) is checked once
   * they are validated (`sameUser`).
   */
  async function user(ctx: Context): Promise<UserScopedPrincipal> {
    const token = teamKeyOf(ctx) ? '' : sdkTokenOf(ctx);
    if (!token) return { teamId: (await team(ctx)).teamId, sdk: null };
    const sdk = await authenticateSdkToken(repos, { environment: env, region }, token);
    ctx.state.teamId = sdk.teamId;
    return { teamId: sdk.teamId, sdk };
  }

  return { team, management, link, user };
}

export type Authenticator = ReturnType<typeof createAuthenticator>;
