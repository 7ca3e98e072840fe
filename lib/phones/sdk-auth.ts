import { randomUUID } from 'node:crypto';
import { ApiError } from '../platform/errors';
import { hashKey, mintKey } from '../platform/keys';
import type { Repositories } from '../repositories';
import type { SdkTokenDoc, SdkTokenKind } from './sdk-sessions-store';

/**
 * Sign-in for a phone (README "Data from phones"), following Junction's SDK protocol and OAuth 2.0 Token Exchange
 * (RFC 8693): the customer's backend asks `POST /v2/user/{user_id}/sign_in_token` with its team key; the phone
 * exchanges that token once at `POST /v2/sdk/token` for a short-lived access token and a refresh token, and refreshes
 * there with `grant_type=refresh_token` (each refresh rotates the refresh token). An access token reaches only its
 * own user's SDK endpoints.
 */
export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const SIGN_IN_TOKEN_TYPE = 'urn:healthbridge:sign-in-token';
/** RFC 8693 §3: what the exchange issues. */
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

/** The providers whose data a phone reads and uploads (HealthKit, Health Connect, Samsung Health): the SDK's. */
export const PHONE_PROVIDERS: readonly string[] = ['apple_health_kit', 'health_connect', 'samsung_health'];

export const SIGN_IN_TOKEN_TTL_MS = 10 * 60_000;
export const ACCESS_TOKEN_TTL_MS = 60 * 60_000;
export const REFRESH_TOKEN_TTL_MS = 90 * 86_400_000;
/**
 * A refresh token presented again this soon after its rotation is taken as the same phone's race (two uploads meeting
 * a 401 together, or an answer lost on a flaky network) and answered with a new pair in the same session; later, as a
 * copy in someone else's hands: the whole session is revoked (OAuth 2.0 Security BCP, refresh token rotation).
 */
export const REFRESH_REUSE_GRACE_MS = 60_000;

const PREFIX: Record<SdkTokenKind, string> = { sign_in: 'hbsi_', access: 'hbat_', refresh: 'hbrt_' };

export type SdkErrorType = 'invalid_token' | 'reauthentication_required';

/** The SDK protocol's error: `{"detail": {"error_type", "message"}}` (the SDKs read `error_type`). */
export const sdkError = (status: number, errorType: SdkErrorType, message: string) => new ApiError(status, { error_type: errorType, message });

export interface SdkDeployment {
  environment: string;
  region: string;
}

export interface SdkPrincipal {
  teamId: string;
  userId: string;
  sessionId: string;
}

type Repos = Pick<Repositories, 'sdkSessions' | 'users'>;

function tokenDoc(
  kind: SdkTokenKind,
  hash: string,
  owner: Pick<SdkTokenDoc, 'team_id' | 'user_id' | 'session_id' | 'environment' | 'region'>,
  ttlMs: number,
  now: Date,
): SdkTokenDoc {
  return { _id: hash, kind, ...owner, expires_at: new Date(now.getTime() + ttlMs), used_at: null, revoked_at: null, created_at: now };
}

/** A single-use sign-in token for the user (the caller has checked that the team has this user, and that it is active). */
export async function mintSignInToken(repos: Repos, deployment: SdkDeployment, teamId: string, userId: string, now = new Date()): Promise<string> {
  const token = mintKey(PREFIX.sign_in);
  const owner = { team_id: teamId, user_id: userId, session_id: null, environment: deployment.environment, region: deployment.region };
  await repos.sdkSessions.insertTokens([tokenDoc('sign_in', token.hash, owner, SIGN_IN_TOKEN_TTL_MS, now)]);
  return token.value;
}

export interface IssuedTokens {
  access_token: string;
  refresh_token: string;
  token_type: 'Bearer';
  expires_in: number;
  issued_token_type: typeof ACCESS_TOKEN_TYPE;
  user_id: string;
}

/**
 * A new access and refresh token in the session, stored, then checked against the session and the user: a
 * revocation that came meanwhile (it marks the session, or the user's deletion marks the user, before it removes
 * tokens) takes them back, so none outlives its session.
 */
async function issue(repos: Repos, session: { id: string; team_id: string; user_id: string } & SdkDeployment, now: Date): Promise<IssuedTokens> {
  const access = mintKey(PREFIX.access);
  const refresh = mintKey(PREFIX.refresh);
  const owner = { team_id: session.team_id, user_id: session.user_id, session_id: session.id, environment: session.environment, region: session.region };
  await repos.sdkSessions.insertTokens([
    tokenDoc('access', access.hash, owner, ACCESS_TOKEN_TTL_MS, now),
    tokenDoc('refresh', refresh.hash, owner, REFRESH_TOKEN_TTL_MS, now),
  ]);
  const [stored, user] = await Promise.all([repos.sdkSessions.findSession(session.id), repos.users.find(session.team_id, session.user_id)]);
  if (!stored || stored.revoked_at || user?.status !== 'active') {
    // The whole session goes (these tokens with it): a session left open for a user being deleted would outlive it.
    await repos.sdkSessions.revokeSession(session.id, stored?.revoked_reason ?? 'user_not_active', now);
    throw sdkError(
      400,
      'reauthentication_required',
      'This sign-in has ended (the user was deleted or disconnected). Ask your backend for a new sign-in token.',
    );
  }
  return {
    access_token: access.value,
    refresh_token: refresh.value,
    token_type: 'Bearer',
    expires_in: ACCESS_TOKEN_TTL_MS / 1000,
    issued_token_type: ACCESS_TOKEN_TYPE,
    user_id: session.user_id,
  };
}

const wrongDeployment = (doc: SdkDeployment, deployment: SdkDeployment) => doc.environment !== deployment.environment || doc.region !== deployment.region;

/** `grant_type=urn:ietf:params:oauth:grant-type:token-exchange`: a sign-in token, once, for a new session's tokens. */
export async function exchangeSignInToken(repos: Repos, deployment: SdkDeployment, signInToken: string, now = new Date()): Promise<IssuedTokens> {
  const taken = await repos.sdkSessions.takeSignInToken(hashKey(signInToken));
  const invalid = () =>
    sdkError(
      400,
      'invalid_token',
      'The sign-in token is unknown, expired or already used. Ask your backend for a new one (POST /v2/user/{user_id}/sign_in_token).',
    );
  if (!taken || taken.expires_at <= now) throw invalid();
  if (wrongDeployment(taken, deployment)) throw invalid();
  const session = { id: randomUUID(), team_id: taken.team_id, user_id: taken.user_id, environment: taken.environment, region: taken.region };
  await repos.sdkSessions.startSession({
    _id: session.id,
    team_id: session.team_id,
    user_id: session.user_id,
    environment: session.environment,
    region: session.region,
    created_at: now,
    revoked_at: null,
    revoked_reason: null,
  });
  return issue(repos, session, now);
}

/** `grant_type=refresh_token`: rotates the refresh token; a reuse beyond the grace revokes the whole session. */
export async function refreshSdkTokens(repos: Repos, deployment: SdkDeployment, refreshToken: string, now = new Date()): Promise<IssuedTokens> {
  const claim = await repos.sdkSessions.claimRefreshToken(hashKey(refreshToken), now, REFRESH_REUSE_GRACE_MS);
  const signInAgain = (why: string) => sdkError(400, 'reauthentication_required', `${why} Ask your backend for a new sign-in token.`);
  if ('refused' in claim) {
    if (claim.refused === 'unknown') throw sdkError(400, 'invalid_token', 'The refresh token is unknown.');
    throw signInAgain(claim.refused === 'expired' ? 'The refresh token has expired.' : 'This sign-in has ended (the user was deleted or disconnected).');
  }
  const token = 'claimed' in claim ? claim.claimed : claim.reused;
  if (wrongDeployment(token, deployment)) throw sdkError(400, 'invalid_token', 'The refresh token is unknown.');
  if ('reused' in claim && !claim.withinGrace) {
    await repos.sdkSessions.revokeSession(token.session_id!, 'refresh_token_reused', now);
    throw signInAgain('The refresh token was already used, so this sign-in was ended (a copy of it may be in other hands).');
  }
  return issue(repos, { id: token.session_id!, team_id: token.team_id, user_id: token.user_id, environment: token.environment, region: token.region }, now);
}

/** The principal of an SDK call's bearer access token, or a 401 in the SDK's error shape. */
export async function authenticateSdkToken(repos: Repos, deployment: SdkDeployment, accessToken: string, now = new Date()): Promise<SdkPrincipal> {
  const doc = await repos.sdkSessions.findToken(hashKey(accessToken));
  if (doc?.kind !== 'access' || wrongDeployment(doc, deployment)) {
    throw sdkError(401, 'invalid_token', 'The access token is unknown or has been revoked. Refresh it, or sign in again.');
  }
  if (doc.expires_at <= now) throw sdkError(401, 'invalid_token', 'The access token has expired. Refresh it (POST /v2/sdk/token, grant_type=refresh_token).');
  return { teamId: doc.team_id, userId: doc.user_id, sessionId: doc.session_id! };
}

/** True for a bearer token of ours (an SDK access token), as opposed to a team key. */
export const isSdkAccessToken = (token: string) => token.startsWith(PREFIX.access);
