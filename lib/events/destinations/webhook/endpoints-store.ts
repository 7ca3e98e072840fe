import type { Collection, Db } from 'mongodb';
import { FieldCipher, type EncryptedValue } from '../../../platform/field-encryption';
import { createIndexes, type IndexSpec, type QueryShape } from '../../../platform/database/indexes';
import { pageById, type Page } from '../../../platform/database/pages';

/**
 * Webhook endpoints: the only code that touches `webhook_endpoints`. Events, deliveries and attempts live
 * in lib/events/store.ts.
 */

export interface EndpointSecret {
  /** The `whsec_` secret in plaintext: stored encrypted (`StoredSecret`), decrypted when read. */
  key: string;
  created_at: Date;
  /** null while current; set on rotation (the old key keeps signing until then). */
  expires_at: Date | null;
}

/** A secret as stored: its key encrypted at rest (lib/platform/field-encryption.ts), bound to its endpoint. */
export type StoredSecret = Omit<EndpointSecret, 'key'> & { key: EncryptedValue };
/**
 * An endpoint as stored. Earlier versions stored `key` in plaintext; a migration encrypts those. Custom headers
 * are `{name, value}` pairs: a header name is an HTTP token, which may start with `$` or hold a `.`, and
 * MongoDB field names may not (earlier versions stored an object; both are read).
 */
export type StoredEndpoint = Omit<EndpointDoc, 'secrets' | 'headers'> & { secrets: StoredSecret[]; headers: StoredHeader[] | Record<string, string> };
export interface StoredHeader {
  name: string;
  value: string;
}

const storedHeaders = (headers: Record<string, string>): StoredHeader[] => Object.entries(headers).map(([name, value]) => ({ name, value }));
const headersOf = (stored: StoredEndpoint['headers']): Record<string, string> =>
  Array.isArray(stored) ? Object.fromEntries(stored.map((h) => [h.name, h.value])) : stored;

/** The encryption context of an endpoint's secrets: a secret copied into another endpoint does not decrypt. */
const secretContext = (endpointId: string) => `webhook_endpoints:${endpointId}:secrets.key`;

/** Rotations of one endpoint's secret are counted over this window (WEBHOOK_SECRET_ROTATIONS_PER_DAY). */
export const SECRET_ROTATION_WINDOW_MS = 24 * 60 * 60 * 1000;

export type RotateSecretOutcome = { endpoint: EndpointDoc } | { rate_limited: { next_allowed_at: Date } };

export type DisabledReason = 'manual' | 'gone' | 'failing';

export interface EndpointDoc {
  _id: string;
  team_id: string;
  url: string;
  description: string;
  filter_types: string[];
  disabled: boolean;
  disabled_reason: DisabledReason | null;
  rate_limit: number | null;
  /** One user's events arrive in publish order (one POST at a time per user); absent: false. */
  ordered_per_user?: boolean;
  headers: Record<string, string>;
  secrets: EndpointSecret[];
  /** When the secret was rotated within the last SECRET_ROTATION_WINDOW_MS (the rate cap); absent before any. */
  secret_rotations?: Date[];
  /** Start of the current run of failures (null after a success). */
  failing_since: Date | null;
  created_at: Date;
  updated_at: Date;
  /** Bumped by every change: the precondition of changes computed from the document (rotation, disabling). Absent before the first. */
  version?: number;
}

/** The `webhook_endpoints` indexes: the listing pages in `_id` order (time-ordered UUIDv7 ids; pages.ts). */
export const WEBHOOK_ENDPOINT_INDEXES: Record<'webhook_endpoints', IndexSpec[]> = {
  webhook_endpoints: [{ key: { team_id: 1, _id: 1 } }],
};

/** Every query WebhookRepository issues (test/indexes.test.ts checks each is served by WEBHOOK_ENDPOINT_INDEXES). */
export const WEBHOOK_ENDPOINT_QUERY_SHAPES: Record<'webhook_endpoints', QueryShape[]> = {
  webhook_endpoints: [
    { name: 'endpoint by id (reads, every locked write)', filter: ['_id'], residual: ['team_id'] },
    { name: "a team's endpoints, oldest first (cursor page)", filter: ['team_id', '_id'], sort: ['_id'] },
    // A team has few endpoints; `disabled` is checked on each of them.
    { name: "a team's enabled endpoints (publish)", filter: ['team_id'], residual: ['disabled'] },
    { name: "a team's endpoint ids (erasure)", filter: ['team_id'] },
    // A maintenance pass over the whole (small) collection, by `_id`: no filter to index.
    { name: 'every endpoint id (reencrypt)', filter: [] },
  ],
};

export class WebhookRepository {
  readonly endpoints: Collection<StoredEndpoint>;

  /** Endpoint documents are changed by the api (patch, rotate) and the dispatcher (health, disable). Each change
   *  is one atomic update: a blind one carries its own condition (the team, `failing_since`), and one computed
   *  from the document (rotation, disabling, re-encryption) is written only if its `version` is still the one read,
   *  else computed again (changeFromCurrent). */
  constructor(
    private readonly db: Db,
    /** Encrypts endpoint secrets at rest (DATA_ENCRYPTION_KEYS). */
    private readonly cipher: FieldCipher,
  ) {
    this.endpoints = db.collection('webhook_endpoints');
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.endpoints, WEBHOOK_ENDPOINT_INDEXES.webhook_endpoints);
  }

  // ---------------------------------------------------------------- endpoints

  async createEndpoint(doc: EndpointDoc): Promise<EndpointDoc> {
    await this.endpoints.insertOne({ ...doc, secrets: this.encryptSecrets(doc._id, doc.secrets), headers: storedHeaders(doc.headers) });
    return doc;
  }

  private encryptSecrets(endpointId: string, secrets: EndpointSecret[]): StoredSecret[] {
    return secrets.map((s) => ({ ...s, key: this.cipher.encrypt(s.key, secretContext(endpointId)) }));
  }

  /** The endpoint with its secrets decrypted (the shape the rest of the code uses). */
  private decrypted(doc: StoredEndpoint): EndpointDoc;
  private decrypted(doc: StoredEndpoint | null): EndpointDoc | null;
  private decrypted(doc: StoredEndpoint | null): EndpointDoc | null {
    if (!doc) return null;
    const secrets = doc.secrets.map((s) => {
      if (!FieldCipher.isEncrypted(s.key))
        throw new Error(`Webhook endpoint ${doc._id}: a secret is not stored encrypted (the 'webhook-secrets-encrypted' migration did not run?)`);
      return { ...s, key: this.cipher.decryptString(s.key, secretContext(doc._id)) };
    });
    return { ...doc, secrets, headers: headersOf(doc.headers ?? {}) };
  }

  async findEndpoint(teamId: string, id: string): Promise<EndpointDoc | null> {
    return this.decrypted(await this.endpoints.findOne({ _id: id, team_id: teamId }));
  }

  /** By id alone (the dispatcher, which is keyed by endpoint id). */
  async getEndpoint(id: string): Promise<EndpointDoc | null> {
    return this.decrypted(await this.endpoints.findOne({ _id: id }));
  }

  /** Oldest first (`_id` order: creation order for UUIDv7 ids), after the endpoint `after` (a cursor) when given. */
  async listEndpoints(teamId: string, after: string | null, limit: number): Promise<Page<EndpointDoc>> {
    const page = await pageById(this.endpoints, { team_id: teamId }, 1, after, limit);
    return { items: page.items.map((d) => this.decrypted(d)), more: page.more };
  }

  async listEnabledEndpoints(teamId: string): Promise<EndpointDoc[]> {
    return (await this.endpoints.find({ team_id: teamId, disabled: false }).toArray()).map((d) => this.decrypted(d));
  }

  /** Every endpoint of a team, enabled or not (erasure visits each one's dispatcher). */
  async endpointIdsOfTeam(teamId: string): Promise<string[]> {
    return (await this.endpoints.find({ team_id: teamId }, { projection: { _id: 1 } }).toArray()).map((d) => d._id);
  }

  /** The stored form of a change: secrets encrypted, headers as pairs. */
  private stored(id: string, set: Partial<EndpointDoc>): Partial<StoredEndpoint> {
    const stored: Partial<StoredEndpoint> = {
      ...set,
      secrets: set.secrets && this.encryptSecrets(id, set.secrets),
      headers: set.headers && storedHeaders(set.headers),
    };
    if (!set.secrets) delete stored.secrets;
    if (!set.headers) delete stored.headers;
    return stored;
  }

  /**
   * A change computed from the endpoint as it is now: read it, let `change` decide (a result, and the fields to
   * set or none), write only if nobody changed it meanwhile (its `version` in the filter), else start over.
   */
  private async changeFromCurrent<T>(
    filter: { _id: string; team_id?: string },
    change: (current: EndpointDoc) => { result: T; set?: Partial<EndpointDoc> },
    absent: T,
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const doc = await this.endpoints.findOne(filter);
      if (!doc) return absent;
      const { result, set } = change(this.decrypted(doc));
      if (!set) return result;
      const version = doc.version;
      const written = await this.endpoints.updateOne(
        { ...filter, version: version === undefined ? { $exists: false } : version },
        { $set: { ...this.stored(filter._id, set), updated_at: new Date(), version: (version ?? 0) + 1 } },
      );
      if (written.matchedCount === 1) return result;
      if (attempt >= 50) throw new Error(`webhook endpoint ${filter._id}: 50 changes in a row lost to concurrent ones; giving up`);
    }
  }

  /** A PATCH: the fields given, whatever the rest of the document holds. */
  async updateEndpoint(teamId: string, id: string, set: Partial<EndpointDoc>): Promise<EndpointDoc | null> {
    return this.decrypted(
      await this.endpoints.findOneAndUpdate(
        { _id: id, team_id: teamId },
        { $set: { ...this.stored(id, set), updated_at: new Date() }, $inc: { version: 1 } },
        { returnDocument: 'after' },
      ),
    );
  }

  async deleteEndpoint(teamId: string, id: string): Promise<boolean> {
    // Without decrypting: an endpoint whose data key was lost can still be deleted.
    return (await this.endpoints.deleteOne({ _id: id, team_id: teamId })).deletedCount === 1;
  }

  /**
   * A new current secret; the previous ones keep signing until `overlapMs` from now (or their earlier expiry).
   * Every secret still inside its overlap is kept (only expired ones are dropped); instead the rate is capped:
   * past `maxPerWindow` rotations within SECRET_ROTATION_WINDOW_MS nothing changes and the outcome says when
   * the next rotation is allowed. Computed from the current secrets and written under their version, so
   * concurrent rotations all keep their secrets.
   */
  async rotateSecret(
    teamId: string,
    id: string,
    key: string,
    opts: { overlapMs: number; maxPerWindow: number; now?: Date },
  ): Promise<RotateSecretOutcome | null> {
    return this.changeFromCurrent<RotateSecretOutcome | null>(
      { _id: id, team_id: teamId },
      (endpoint) => {
        const now = opts.now ?? new Date();
        const recent = (endpoint.secret_rotations ?? [])
          .filter((at) => at.getTime() > now.getTime() - SECRET_ROTATION_WINDOW_MS)
          .sort((a, b) => a.getTime() - b.getTime());
        if (recent.length >= opts.maxPerWindow) {
          // Allowed again once fewer than `maxPerWindow` rotations lie within the window.
          const oldestCounted = recent[recent.length - opts.maxPerWindow];
          return { result: { rate_limited: { next_allowed_at: new Date(oldestCounted.getTime() + SECRET_ROTATION_WINDOW_MS) } } };
        }
        const previousExpiresAt = new Date(now.getTime() + opts.overlapMs);
        const previous = endpoint.secrets
          .filter((s) => s.expires_at === null || s.expires_at > now)
          .map((s) => ({ ...s, expires_at: s.expires_at && s.expires_at < previousExpiresAt ? s.expires_at : previousExpiresAt }));
        const set = { secrets: [...previous, { key, created_at: now, expires_at: null }], secret_rotations: [...recent, now] };
        return { result: { endpoint: { ...endpoint, ...set } }, set };
      },
      null,
    );
  }

  /**
   * Encrypts endpoint secrets stored in plaintext (earlier versions) and re-encrypts those under a data key
   * that is no longer current (after DATA_ENCRYPTION_KEYS gained a new first key), so retired keys can be
   * dropped. Idempotent; each endpoint is rewritten under the version it was read at (a rotation in between makes
   * it read again). Returns how many endpoints changed.
   * Scans the whole (small) collection: a maintenance pass, run by `npm run reencrypt` and a start-up migration.
   */
  async reencrypt(): Promise<number> {
    type Legacy = Omit<StoredEndpoint, 'secrets'> & { secrets: (Omit<StoredSecret, 'key'> & { key: string | EncryptedValue })[] };
    const raw = this.db.collection<Legacy>(this.endpoints.collectionName);
    const stale = (doc: Legacy | null) => doc?.secrets.some((s) => typeof s.key === 'string' || this.cipher.isStale(s.key)) ?? false;
    let changed = 0;
    for (const { _id } of await raw.find({}, { projection: { _id: 1 } }).toArray()) {
      for (;;) {
        const doc = await raw.findOne({ _id });
        if (!doc || !stale(doc)) break;
        const context = secretContext(_id);
        const secrets = doc.secrets.map((s) => ({ ...s, key: typeof s.key === 'string' ? s.key : this.cipher.decryptString(s.key, context) }));
        const written = await raw.updateOne(
          { _id, version: doc.version === undefined ? { $exists: false } : doc.version },
          { $set: { secrets: this.encryptSecrets(_id, secrets), version: (doc.version ?? 0) + 1 } },
        );
        if (written.matchedCount === 1) {
          changed++;
          break;
        }
      }
    }
    return changed;
  }

  /** Endpoint health after a batch: a success resets the failure clock; a failure starts it if not running. */
  async recordEndpointHealth(id: string, outcome: { succeeded: boolean; at: Date }): Promise<void> {
    // Each is one write whose filter is its own condition: only the first success (or failure) of a run changes it.
    if (outcome.succeeded) await this.endpoints.updateOne({ _id: id, failing_since: { $ne: null } }, { $set: { failing_since: null }, $inc: { version: 1 } });
    else await this.endpoints.updateOne({ _id: id, failing_since: null }, { $set: { failing_since: outcome.at }, $inc: { version: 1 } });
  }

  /** Disables the endpoint if `stillApplies` holds for its current state (a racing PATCH may have fixed it). */
  async disableEndpoint(id: string, reason: DisabledReason, stillApplies: (e: EndpointDoc) => boolean = () => true): Promise<boolean> {
    return this.changeFromCurrent(
      { _id: id },
      (endpoint) => (endpoint.disabled || !stillApplies(endpoint) ? { result: false } : { result: true, set: { disabled: true, disabled_reason: reason } }),
      false,
    );
  }
}
