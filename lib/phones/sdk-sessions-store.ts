import type { Collection, Db } from 'mongodb';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';

/**
 * A phone's sign-in (lib/phones/sdk-auth.ts): the user's backend asks for a sign-in token, the phone exchanges it
 * for an access and a refresh token (RFC 8693), and refreshes rotate the refresh token. Each exchange starts a
 * session, the family of every token refreshed from it; a refresh token used twice (beyond a short grace) revokes its
 * family, and the user's deletion or the phone's disconnection revokes all of the user's sessions.
 *
 * Tokens are stored as their SHA-256 only (`_id`), in one collection with their kind: sign-in tokens are taken once by
 * deleting them (findOneAndDelete: two racing exchanges, one wins); refresh tokens are claimed once by a conditional
 * update of `used_at`; access tokens are read by hash on every SDK call. A revocation marks the session first, then
 * the tokens; a refresh marks its new tokens, then reads the session, so whichever of the two comes second sees the
 * other and no token outlives its session.
 */
export type SdkTokenKind = 'sign_in' | 'access' | 'refresh';

export interface SdkTokenDoc {
  /** SHA-256 of the token. */
  _id: string;
  kind: SdkTokenKind;
  /** The session (token family) it belongs to; null for a sign-in token, which starts one. */
  session_id: string | null;
  team_id: string;
  user_id: string;
  environment: string;
  region: string;
  expires_at: Date;
  /** A refresh token's first use (its rotation). */
  used_at: Date | null;
  revoked_at: Date | null;
  created_at: Date;
}

export interface SdkSessionDoc {
  _id: string;
  team_id: string;
  user_id: string;
  environment: string;
  region: string;
  created_at: Date;
  revoked_at: Date | null;
  /** Why: `refresh_token_reused`, `user_deletion`, `disconnected:<provider>`. */
  revoked_reason: string | null;
}

export const SDK_SESSION_INDEXES: Record<'sdk_tokens' | 'sdk_sessions', IndexSpec[]> = {
  sdk_tokens: [
    { key: { session_id: 1 } },
    { key: { team_id: 1, user_id: 1 } },
    // Gone a day after expiry: a refresh token presented late still gets `reauthentication_required` meanwhile.
    { key: { expires_at: 1 }, expireAfter: 'sdkTokensAfterExpiry' },
  ],
  sdk_sessions: [{ key: { team_id: 1, user_id: 1 } }],
};
export const SDK_SESSION_QUERY_SHAPES: Record<'sdk_tokens' | 'sdk_sessions', QueryShape[]> = {
  sdk_tokens: [
    { name: 'a token by its hash (every SDK call; the exchange; a refresh)', filter: ['_id'] },
    { name: "revocation: a session's tokens", filter: ['session_id'] },
    { name: "revocation and erasure: a user's tokens", filter: ['team_id', 'user_id'] },
  ],
  sdk_sessions: [
    { name: 'a session by id (a refresh)', filter: ['_id'] },
    { name: "revocation and erasure: a user's sessions", filter: ['team_id', 'user_id'] },
  ],
};

/** What a refresh token's claim came to. */
export type RefreshClaim =
  | { claimed: SdkTokenDoc }
  | { refused: 'unknown' | 'expired' | 'revoked' }
  /** Used before: within the grace (two uploads refreshing at once), or beyond it (a stolen copy: the family goes). */
  | { reused: SdkTokenDoc; withinGrace: boolean };

export class SdkSessionRepository {
  readonly tokens: Collection<SdkTokenDoc>;
  readonly sessions: Collection<SdkSessionDoc>;

  constructor(db: Db) {
    this.tokens = db.collection('sdk_tokens');
    this.sessions = db.collection('sdk_sessions');
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.tokens, SDK_SESSION_INDEXES.sdk_tokens, retention);
    await createIndexes(this.sessions, SDK_SESSION_INDEXES.sdk_sessions, retention);
  }

  async insertTokens(docs: SdkTokenDoc[]): Promise<void> {
    await this.tokens.insertMany(docs);
  }

  async findToken(hash: string): Promise<SdkTokenDoc | null> {
    return this.tokens.findOne({ _id: hash });
  }

  /** Takes a sign-in token once: the first of two racing exchanges gets it, the other null. */
  async takeSignInToken(hash: string): Promise<SdkTokenDoc | null> {
    return this.tokens.findOneAndDelete({ _id: hash, kind: 'sign_in' });
  }

  /** Starts a session (a new random id: the sign-in token that began it is already spent). */
  async startSession(doc: SdkSessionDoc): Promise<void> {
    await this.sessions.insertOne(doc);
  }

  async findSession(id: string): Promise<SdkSessionDoc | null> {
    return this.sessions.findOne({ _id: id });
  }

  /**
   * Claims a refresh token for its one rotation: a conditional update of `used_at` (two racing refreshes: one claims
   * it). A token used before is answered `reused`, within `graceMs` of its use or not.
   */
  async claimRefreshToken(hash: string, now: Date, graceMs: number): Promise<RefreshClaim> {
    const claimed = await this.tokens.findOneAndUpdate(
      { _id: hash, kind: 'refresh', used_at: null, revoked_at: null, expires_at: { $gt: now } },
      { $set: { used_at: now } },
      { returnDocument: 'after' },
    );
    if (claimed) return { claimed };
    const token = await this.findToken(hash);
    if (token?.kind !== 'refresh') return { refused: 'unknown' };
    if (token.revoked_at) return { refused: 'revoked' };
    if (token.used_at) return { reused: token, withinGrace: now.getTime() - token.used_at.getTime() <= graceMs };
    return { refused: 'expired' };
  }

  /** Revokes one session: marked first, then its tokens (access tokens deleted, refresh tokens marked). */
  async revokeSession(sessionId: string, reason: string, now = new Date()): Promise<void> {
    await this.sessions.updateOne({ _id: sessionId, revoked_at: null }, { $set: { revoked_at: now, revoked_reason: reason } });
    await this.tokens.deleteMany({ session_id: sessionId, kind: 'access' });
    await this.tokens.updateMany({ session_id: sessionId, kind: 'refresh', revoked_at: null }, { $set: { revoked_at: now } });
  }

  /** Revokes every session of the user (and any sign-in token not yet exchanged); how many sessions it ended. */
  async revokeUser(teamId: string, userId: string, reason: string, now = new Date()): Promise<number> {
    const { modifiedCount } = await this.sessions.updateMany(
      { team_id: teamId, user_id: userId, revoked_at: null },
      { $set: { revoked_at: now, revoked_reason: reason } },
    );
    await this.tokens.deleteMany({ team_id: teamId, user_id: userId, kind: { $in: ['access', 'sign_in'] } });
    await this.tokens.updateMany({ team_id: teamId, user_id: userId, kind: 'refresh', revoked_at: null }, { $set: { revoked_at: now } });
    return modifiedCount;
  }

  async eraseAllForUser(teamId: string, userId: string): Promise<number> {
    const tokens = await this.tokens.deleteMany({ team_id: teamId, user_id: userId });
    const sessions = await this.sessions.deleteMany({ team_id: teamId, user_id: userId });
    return tokens.deletedCount + sessions.deletedCount;
  }
}
