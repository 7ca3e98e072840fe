import type { Collection, Db } from 'mongodb';
import { hashKey } from '../platform/keys';
import { isDuplicateKeyError } from '../platform/database/store-errors';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';

/** Why a link token cannot be used, in the original's ProviderLinkResponse error vocabulary. */
export type LinkTokenRefusal = 'invalid_token' | 'token_expired' | 'token_consumed';
export const LINK_TOKEN_REFUSALS: Record<LinkTokenRefusal, string> = {
  invalid_token: 'This link is not valid. Ask the app that sent you here for a new link.',
  token_expired: 'This link has expired (links work for 10 minutes). Ask the app that sent you here for a new link.',
  token_consumed: 'This link was already used (a link connects one provider once). Ask the app that sent you here for a new link.',
};

/** A one-time link token (only its SHA-256 is stored), or the record that it was used (`_id` `<hash>:used`). */
export interface LinkTokenDoc {
  _id: string;
  team_id: string;
  user_id: string;
  provider: string | null;
  redirect_url: string | null;
  /** Only these providers are offered (absent on tokens stored before the link page). */
  filter_on_providers?: string[] | null;
  expires_at: Date;
  created_at: Date;
}

export const LINK_TOKEN_INDEXES: Record<'link_tokens', IndexSpec[]> = {
  link_tokens: [{ key: { team_id: 1, user_id: 1 } }, { key: { expires_at: 1 }, expireAfter: 'linkTokensAfterExpiry' }],
};
export const LINK_TOKEN_QUERY_SHAPES: Record<'link_tokens', QueryShape[]> = {
  link_tokens: [{ name: "erase a user's link tokens", filter: ['team_id', 'user_id'] }],
};

export class LinkTokenRepository {
  readonly tokens: Collection<LinkTokenDoc>;

  constructor(db: Db) {
    this.tokens = db.collection('link_tokens');
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.tokens, LINK_TOKEN_INDEXES.link_tokens, retention);
  }

  async create(doc: LinkTokenDoc): Promise<void> {
    await this.tokens.insertOne(doc);
  }

  find(hash: string) {
    return this.tokens.findOne({ _id: hash });
  }

  /** A token's state: usable (its document), or why not. The use itself is `consume`'s unique claim. */
  check(token: string, now = new Date()) {
    return this.checkHash(hashKey(token), now);
  }

  /** As `check`, by the token's hash (the OAuth step's `state`). */
  async checkHash(hash: string, now = new Date()): Promise<{ doc: LinkTokenDoc } | { refused: LinkTokenRefusal; doc: LinkTokenDoc | null }> {
    const doc = await this.find(hash);
    if (!doc) return { refused: 'invalid_token', doc: null };
    if (doc.expires_at <= now) return { refused: 'token_expired', doc };
    if (await this.isConsumed(doc._id)) return { refused: 'token_consumed', doc };
    return { doc };
  }

  /** True for the first use of the token only: the use record is a unique insert (two racing uses: one wins). */
  async consume(token: LinkTokenDoc): Promise<boolean> {
    try {
      await this.tokens.insertOne({ ...token, _id: `${token._id}:used`, created_at: new Date() });
      return true;
    } catch (err) {
      if (isDuplicateKeyError(err)) return false;
      throw err;
    }
  }

  async isConsumed(hash: string): Promise<boolean> {
    return (await this.tokens.findOne({ _id: `${hash}:used` })) !== null;
  }

  async eraseAllForUser(teamId: string, userId: string): Promise<number> {
    return (await this.tokens.deleteMany({ team_id: teamId, user_id: userId })).deletedCount;
  }
}
