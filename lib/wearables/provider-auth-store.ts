import { randomBytes } from 'node:crypto';
import type { Collection, Db } from 'mongodb';
import type { FieldCipher } from '../platform/field-encryption';
import { crashPoint } from '../platform/failpoints';
import { EncryptedFields, type Sealed } from '../platform/database/encrypted-fields';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';
import { Lease } from '../platform/database/leases';
import type { TokenSet } from './providers/contract';

/**
 * What the real provider integrations keep (README "Connecting real providers"):
 * - `provider_tokens`: one document per connection (`_id` = connection id), its tokens sealed. Only one refresh of a
 *   connection runs at a time anywhere: a refresh first claims a lease in one conditional write (rotating refresh
 *   tokens, e.g. WHOOP's, are invalidated the moment a new one is issued: two refreshes at once would revoke the
 *   user). New tokens are written over the version they were refreshed from, whatever became of the lease, and a
 *   refresh that went unanswered keeps its lease until it is tried again with the same token (runtime.ts accessToken).
 * - `oauth_states`: the link page's OAuth `state`, single use (taken with one findOneAndDelete), 15 minutes, with its
 *   PKCE verifier sealed.
 * - `provider_apps`: per OAuth app (provider + client id): its rate-limit block shared by every worker, and what its
 *   push subscriptions need (the secret Polar returns once, our verify token, subscription ids), secrets sealed.
 * Erasure: a user's tokens go with their connections (eraseAllForUser); states expire by TTL.
 */
export interface ProviderTokenDoc {
  _id: string;
  team_id: string;
  user_id: string;
  provider: string;
  access_token: string;
  refresh_token: string | null;
  expires_at: Date | null;
  scope: string | null;
  extras: Record<string, unknown>;
  /** Bumped by every refresh; a refresh writes only over the version it started from. */
  version: number;
  refresh_lease?: string;
  refresh_lease_until?: Date;
  /** Set while the last refresh request went unanswered (its outcome at the provider unknown); cleared by a save. */
  refresh_unanswered_at?: Date;
  updated_at: Date;
}

export interface OAuthStateDoc {
  _id: string;
  link_token_id: string;
  team_id: string;
  user_id: string;
  provider: string;
  client_id: string;
  redirect_uri: string;
  code_verifier: string | null;
  /** At a provider with regions (Dexcom): the region the user signs in at. */
  region?: string | null;
  expires_at: Date;
  created_at: Date;
}

export interface ProviderAppDoc {
  _id: string;
  provider: string;
  client_id: string;
  blocked_until?: Date;
  block_reason?: string;
  /** A secret the provider issued for its pushes (Polar's `signature_secret_key`, returned once). */
  webhook_secret?: string | null;
  /** The token we gave the provider to echo in its handshake (Oura `verification_token`, Strava `verify_token`). */
  verify_token?: string | null;
  webhook_id?: string | null;
  subscriptions?: { id: string; key: string; expires_at: Date | null }[];
  updated_at: Date;
}

const TOKEN_FIELDS = ['access_token', 'refresh_token', 'extras'] as const;
const STATE_FIELDS = ['code_verifier'] as const;
const APP_FIELDS = ['webhook_secret', 'verify_token'] as const;
export const OAUTH_STATE_TTL_MS = 15 * 60_000;
/** How long a refresh may hold its lease before another worker may take over (a refresh is one token request). */
const REFRESH_LEASE_MS = 60_000;

export const PROVIDER_AUTH_INDEXES: Record<'provider_tokens' | 'oauth_states' | 'provider_apps', IndexSpec[]> = {
  provider_tokens: [{ key: { team_id: 1, user_id: 1 } }],
  oauth_states: [{ key: { expires_at: 1 }, expireAfter: 'linkTokensAfterExpiry' }],
  provider_apps: [],
};
export const PROVIDER_AUTH_QUERY_SHAPES: Record<'provider_tokens' | 'oauth_states' | 'provider_apps', QueryShape[]> = {
  provider_tokens: [{ name: "erase a user's provider tokens", filter: ['team_id', 'user_id'] }],
  oauth_states: [{ name: 'a state taken once by its value (the OAuth callback)', filter: ['_id'] }],
  provider_apps: [{ name: "an app's rate-limit block and push secrets, by provider and client id", filter: ['_id'] }],
};

export class ProviderAuthRepository {
  readonly tokens: Collection<Sealed<ProviderTokenDoc, (typeof TOKEN_FIELDS)[number]>>;
  readonly states: Collection<Sealed<OAuthStateDoc, (typeof STATE_FIELDS)[number]>>;
  readonly apps: Collection<Sealed<ProviderAppDoc, (typeof APP_FIELDS)[number]>>;
  private readonly tokenSeal: EncryptedFields<ProviderTokenDoc, (typeof TOKEN_FIELDS)[number]>;
  private readonly stateSeal: EncryptedFields<OAuthStateDoc, (typeof STATE_FIELDS)[number]>;
  private readonly appSeal: EncryptedFields<ProviderAppDoc, (typeof APP_FIELDS)[number]>;
  private readonly refreshLease: Lease<Sealed<ProviderTokenDoc, (typeof TOKEN_FIELDS)[number]>>;

  constructor(db: Db, cipher: FieldCipher) {
    this.tokens = db.collection('provider_tokens');
    this.refreshLease = new Lease(this.tokens, { token: 'refresh_lease', until: 'refresh_lease_until', ms: REFRESH_LEASE_MS, released: 'unset' });
    this.states = db.collection('oauth_states');
    this.apps = db.collection('provider_apps');
    this.tokenSeal = new EncryptedFields(cipher, 'provider_tokens', TOKEN_FIELDS);
    this.stateSeal = new EncryptedFields(cipher, 'oauth_states', STATE_FIELDS);
    this.appSeal = new EncryptedFields(cipher, 'provider_apps', APP_FIELDS);
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.tokens, PROVIDER_AUTH_INDEXES.provider_tokens, retention);
    await createIndexes(this.states, PROVIDER_AUTH_INDEXES.oauth_states, retention);
  }

  // ---- OAuth states ---------------------------------------------------------------------------------------

  async createState(doc: Omit<OAuthStateDoc, '_id' | 'expires_at' | 'created_at'>, now = new Date()): Promise<OAuthStateDoc> {
    const full: OAuthStateDoc = {
      ...doc,
      _id: randomBytes(24).toString('base64url'),
      created_at: now,
      expires_at: new Date(now.getTime() + OAUTH_STATE_TTL_MS),
    };
    await this.states.insertOne(this.stateSeal.seal(full._id, full));
    return full;
  }

  /** Takes a state once: the first callback with it gets it, any later one (a reused code or state) gets null. */
  async takeState(state: string, now = new Date()): Promise<OAuthStateDoc | 'expired' | null> {
    const doc = await this.states.findOneAndDelete({ _id: state });
    if (!doc) return null;
    const open = this.stateSeal.open(doc) as OAuthStateDoc;
    return open.expires_at <= now ? 'expired' : open;
  }

  // ---- Tokens ---------------------------------------------------------------------------------------------

  /** The connection's first tokens (a unique insert: the connection was just created). */
  async saveInitial(ref: { connectionId: string; teamId: string; userId: string; provider: string }, tokens: TokenSet): Promise<void> {
    const doc: ProviderTokenDoc = {
      _id: ref.connectionId,
      team_id: ref.teamId,
      user_id: ref.userId,
      provider: ref.provider,
      ...tokens,
      version: 1,
      updated_at: new Date(),
    };
    await this.tokens.replaceOne({ _id: ref.connectionId }, this.tokenSeal.seal(doc._id, doc), { upsert: true });
  }

  async get(connectionId: string): Promise<ProviderTokenDoc | null> {
    const doc = await this.tokens.findOne({ _id: connectionId });
    return doc ? (this.tokenSeal.open(doc) as ProviderTokenDoc) : null;
  }

  /**
   * Claims the right to refresh the tokens of `version`: one conditional write, so of two workers refreshing at
   * once exactly one gets the lease; the other waits for the new version. A lease that lapsed (its holder died, or
   * gave up after its request went unanswered) may be taken over: the taker sends the same refresh token, the stored
   * one. Returns the lease, or null.
   */
  claimRefresh(connectionId: string, version: number, now = new Date()): Promise<string | null> {
    return this.refreshLease.claim({ _id: connectionId, version }, { now });
  }

  /**
   * Keeps a claim whose refresh went unanswered (the provider may have rotated the token and the answer been lost):
   * nobody else sends the refresh token until `until`; then whoever takes the lease over sends the same one again.
   */
  async holdRefresh(connectionId: string, lease: string, until: Date): Promise<void> {
    await this.refreshLease.extend({ _id: connectionId }, lease, { until, also: { $set: { refresh_unanswered_at: new Date() } } });
  }

  /**
   * Stores refreshed tokens over the version they were refreshed from. The version alone is the precondition, not
   * the lease: a rotating provider (WHOOP, Strava, Oura, Withings) has already spent the old refresh token, so new
   * tokens are kept even when the lease lapsed while their answer was on its way. False: another refresh stored a
   * newer version first (a taker-over of a lapsed lease whose answer came back before ours).
   */
  async saveRefreshed(connectionId: string, version: number, tokens: TokenSet): Promise<boolean> {
    crashPoint('provider-tokens.save-refreshed');
    const sealed = this.tokenSeal.seal(connectionId, { access_token: tokens.access_token, refresh_token: tokens.refresh_token, extras: tokens.extras });
    const res = await this.tokens.updateOne(
      { _id: connectionId, version },
      {
        $set: { ...sealed, expires_at: tokens.expires_at, scope: tokens.scope, version: version + 1, updated_at: new Date() },
        $unset: { ...this.refreshLease.released().$unset, refresh_unanswered_at: '' },
      },
    );
    return res.modifiedCount === 1;
  }

  /** Gives a lease back after a refresh the provider refused (its answer is known: nothing was rotated). */
  async releaseRefresh(connectionId: string, lease: string): Promise<void> {
    await this.refreshLease.release({ _id: connectionId }, lease);
  }

  async delete(connectionId: string): Promise<void> {
    await this.tokens.deleteOne({ _id: connectionId });
  }

  async eraseAllForUser(teamId: string, userId: string): Promise<number> {
    return (await this.tokens.deleteMany({ team_id: teamId, user_id: userId })).deletedCount;
  }

  // ---- Apps -----------------------------------------------------------------------------------------------

  static appId = (provider: string, clientId: string) => `${provider}:${clientId}`;

  async getApp(provider: string, clientId: string): Promise<ProviderAppDoc | null> {
    const doc = await this.apps.findOne({ _id: ProviderAuthRepository.appId(provider, clientId) });
    return doc ? (this.appSeal.open(doc) as ProviderAppDoc) : null;
  }

  async blockedUntil(provider: string, clientId: string): Promise<Date | null> {
    const doc = await this.apps.findOne({ _id: ProviderAuthRepository.appId(provider, clientId) }, { projection: { blocked_until: 1 } });
    return doc?.blocked_until ?? null;
  }

  /** No request for this app before `until` (only ever moved later: `$max`). */
  async block(provider: string, clientId: string, until: Date, reason: string): Promise<void> {
    await this.apps.updateOne(
      { _id: ProviderAuthRepository.appId(provider, clientId) },
      { $max: { blocked_until: until }, $set: { block_reason: reason, updated_at: new Date() }, $setOnInsert: { provider, client_id: clientId } },
      { upsert: true },
    );
  }

  /** Sets fields of the app's push configuration (secrets sealed). */
  async updateApp(provider: string, clientId: string, fields: Partial<Omit<ProviderAppDoc, '_id' | 'provider' | 'client_id' | 'updated_at'>>): Promise<void> {
    const _id = ProviderAuthRepository.appId(provider, clientId);
    await this.apps.updateOne(
      { _id },
      { $set: { ...this.appSeal.seal(_id, fields), updated_at: new Date() }, $setOnInsert: { provider, client_id: clientId } },
      { upsert: true },
    );
  }

  /** The app's verify token, made once (a unique value per app; a racing second writer keeps the first). */
  async verifyToken(provider: string, clientId: string): Promise<string> {
    const existing = await this.getApp(provider, clientId);
    if (existing?.verify_token) return existing.verify_token;
    const _id = ProviderAuthRepository.appId(provider, clientId);
    const token = randomBytes(18).toString('base64url');
    await this.apps
      .updateOne(
        { _id, verify_token: { $exists: false } },
        { $set: { ...this.appSeal.seal(_id, { verify_token: token }), updated_at: new Date() }, $setOnInsert: { provider, client_id: clientId } },
        { upsert: true },
      )
      .catch(() => undefined);
    return (await this.getApp(provider, clientId))?.verify_token ?? token;
  }

  async reencrypt(): Promise<number> {
    return (await this.tokenSeal.rewriteStale(this.tokens)) + (await this.stateSeal.rewriteStale(this.states)) + (await this.appSeal.rewriteStale(this.apps));
  }
}
