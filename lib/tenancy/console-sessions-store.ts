import type { Collection, Db } from 'mongodb';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';
import { hashKey, mintKey } from '../platform/keys';

/**
 * Sign-ins to the delivery-log page (api/routes/console.ts) that need no management key in the browser:
 *
 * - a **link**, created through the management API by a key that may act on the team, opens the page once
 *   within CONSOLE_LINK_TTL_MS; its token travels in the URL's fragment (never sent to a server, never logged);
 * - the page exchanges it for a **session** token (CONSOLE_SESSION_TTL_MS), which the management API accepts
 *   as `Authorization: Bearer` for that one team, as a team-scoped key of the key that made the link.
 *
 * Both are one document of `console_sessions`, `_id` the SHA-256 of the token (the token itself is never
 * stored). A link is used by one conditional update (`used_at: null` → now): of two racing uses one wins.
 * Retention: a TTL index on `expires_at` (an hour after it, so a late use is told "used" or "expired").
 */
export const CONSOLE_LINK_TTL_MS = 15 * 60_000;
export const CONSOLE_SESSION_TTL_MS = 60 * 60_000;
export const CONSOLE_LINK_PREFIX = 'hbcl_';
export const CONSOLE_SESSION_PREFIX = 'hbcs_';

export interface ConsoleSessionDoc {
  /** SHA-256 of the token. */
  _id: string;
  kind: 'link' | 'session';
  /** A public id (audit log target): the link's, which its session keeps. */
  link_id: string;
  org_id: string;
  team_id: string;
  environment: string;
  /** The management key that created the link: the session acts as that key, on this team only. */
  management_key_id: string;
  /** A link's one use (null until then); sessions are not used up. */
  used_at: Date | null;
  expires_at: Date;
  created_at: Date;
}

export type ConsoleLinkRefusal = 'unknown' | 'expired' | 'used';

export const CONSOLE_SESSION_INDEXES: Record<'console_sessions', IndexSpec[]> = {
  console_sessions: [{ key: { expires_at: 1 }, expireAfter: 'linkTokensAfterExpiry' }],
};
export const CONSOLE_SESSION_QUERY_SHAPES: Record<'console_sessions', QueryShape[]> = {
  console_sessions: [{ name: 'a link or session by its token hash (use a link, check a session)', filter: ['_id'] }],
};

export class ConsoleSessionRepository {
  readonly sessions: Collection<ConsoleSessionDoc>;

  constructor(db: Db) {
    this.sessions = db.collection('console_sessions');
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.sessions, CONSOLE_SESSION_INDEXES.console_sessions, retention);
  }

  /** A new one-time link to the team's delivery log; its token is returned once. */
  async createLink(scope: { linkId: string; orgId: string; teamId: string; environment: string; managementKeyId: string }, now = new Date()) {
    const minted = mintKey(CONSOLE_LINK_PREFIX);
    const doc: ConsoleSessionDoc = {
      _id: minted.hash,
      kind: 'link',
      link_id: scope.linkId,
      org_id: scope.orgId,
      team_id: scope.teamId,
      environment: scope.environment,
      management_key_id: scope.managementKeyId,
      used_at: null,
      expires_at: new Date(now.getTime() + CONSOLE_LINK_TTL_MS),
      created_at: now,
    };
    await this.sessions.insertOne(doc);
    return { token: minted.value, link: doc };
  }

  /** The link of this token, used or not, expired or not (null: no such link). */
  findLink(token: string): Promise<ConsoleSessionDoc | null> {
    if (!token.startsWith(CONSOLE_LINK_PREFIX)) return Promise.resolve(null);
    return this.sessions.findOne({ _id: hashKey(token), kind: 'link' });
  }

  /**
   * Uses a link (once) and starts its session: the link's `used_at` is set by one conditional update, so of
   * two racing uses exactly one gets a session. A crash between the two writes leaves a used link and no
   * session: the operator asks for a new link.
   */
  async useLink(token: string, now = new Date()): Promise<{ token: string; session: ConsoleSessionDoc } | { refused: ConsoleLinkRefusal }> {
    const link = await this.sessions.findOneAndUpdate(
      { _id: hashKey(token), kind: 'link', used_at: null, expires_at: { $gt: now } },
      { $set: { used_at: now } },
    );
    if (!link) {
      const seen = await this.findLink(token);
      return { refused: !seen ? 'unknown' : seen.used_at ? 'used' : 'expired' };
    }
    const minted = mintKey(CONSOLE_SESSION_PREFIX);
    const session: ConsoleSessionDoc = {
      ...link,
      _id: minted.hash,
      kind: 'session',
      used_at: null,
      expires_at: new Date(now.getTime() + CONSOLE_SESSION_TTL_MS),
      created_at: now,
    };
    await this.sessions.insertOne(session);
    return { token: minted.value, session };
  }

  /** The live session of this token, or null (unknown, expired, or not a session token). */
  async findSession(token: string, now = new Date()): Promise<ConsoleSessionDoc | null> {
    if (!token.startsWith(CONSOLE_SESSION_PREFIX)) return null;
    const doc = await this.sessions.findOne({ _id: hashKey(token) });
    return doc && doc.kind === 'session' && doc.expires_at > now ? doc : null;
  }
}
