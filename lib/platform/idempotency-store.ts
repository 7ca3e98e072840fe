import type { Collection, Db } from 'mongodb';
import type { FieldCipher } from './field-encryption';
import { EncryptedFields, type Sealed } from './database/encrypted-fields';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from './database/indexes';
import { isDuplicateKeyError } from './database/store-errors';
import { Lease } from './database/leases';

/**
 * How long a request holds its claim on a key: a duplicate within it is a 409; after it, the request is taken to have
 * died and one duplicate (one conditional write) takes over and finishes its work under the same resource id. A
 * request that failed lets go of its claim at once (`claim: null`), so its retry takes over without waiting.
 */
export const IDEMPOTENCY_LEASE_MS = 30_000;

/**
 * X-Idempotency-Key records (`idempotency_keys`), one per (team, route, key): claimed by a unique insert before the
 * request's work, then completed with the response it got (sealed: it may hold patient data). Every write after the
 * claim carries the claim's token in its filter, so a request whose claim was taken over (it stalled past the lease)
 * can neither complete nor release its successor's claim. A failed request lets go of its claim but not of the key: the
 * key keeps the resource id, and the retry takes the claim over (idempotency.ts).
 */
export interface IdempotencyKeyDoc {
  /** sha256(team id, route, key). */
  _id: string;
  team_id: string;
  route: string;
  request_sha256: string;
  /** The id the request's resource gets: a request resumed after a crash reuses it. */
  resource_id: string;
  state: 'pending' | 'done';
  /** The token of the request working under this key now; null once a failed request let go of it (a retry resumes at once). */
  claim: string | null;
  /** When that request claimed it (or took it over): its lease runs from here. */
  claimed_at: Date;
  response_status: number | null;
  response_body: unknown;
  created_at: Date;
  completed_at: Date | null;
}

const SEALED = ['response_body'] as const;
type StoredIdempotencyKey = Sealed<IdempotencyKeyDoc, (typeof SEALED)[number]>;

export const IDEMPOTENCY_INDEXES: Record<'idempotency_keys', IndexSpec[]> = { idempotency_keys: [{ key: { created_at: 1 }, expireAfter: 'idempotencyKeys' }] };
export const IDEMPOTENCY_QUERY_SHAPES: Record<'idempotency_keys', QueryShape[]> = {
  idempotency_keys: [
    { name: 'key by id (claim, read)', filter: ['_id'] },
    { name: 'take over, complete or release under a claim (conditional writes)', filter: ['_id'], residual: ['claim', 'claimed_at', 'state'] },
    { name: 'reencrypt: every key, in _id pages', filter: ['_id'], sort: ['_id'] },
  ],
};

export class IdempotencyKeyRepository {
  readonly keys: Collection<StoredIdempotencyKey>;
  private readonly responses: EncryptedFields<IdempotencyKeyDoc, (typeof SEALED)[number]>;
  private readonly lease: Lease<StoredIdempotencyKey>;

  constructor(db: Db, cipher: FieldCipher) {
    this.keys = db.collection('idempotency_keys');
    this.responses = new EncryptedFields(cipher, this.keys.collectionName, SEALED);
    this.lease = new Lease(this.keys, { token: 'claim', since: 'claimed_at', ms: IDEMPOTENCY_LEASE_MS, released: 'null' });
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.keys, IDEMPOTENCY_INDEXES.idempotency_keys, retention);
  }

  /** Re-encrypts stored responses under a retired data key (`npm run reencrypt`). */
  reencrypt(): Promise<number> {
    return this.responses.rewriteStale(this.keys);
  }

  /** Claims a key (unique insert); on a duplicate returns the existing claim. */
  async claim(doc: IdempotencyKeyDoc): Promise<{ claimed: true } | { existing: IdempotencyKeyDoc }> {
    try {
      await this.keys.insertOne(this.responses.seal(doc._id, doc));
      return { claimed: true };
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      const existing = await this.keys.findOne({ _id: doc._id });
      if (!existing) return this.claim(doc); // released meanwhile: claim again
      return { existing: this.responses.open(existing) as IdempotencyKeyDoc };
    }
  }

  /** Takes over a pending key whose claim ran out or was let go, in one conditional write: one taker wins; false while a claim is live. */
  async takeOver(id: string, claim: string): Promise<boolean> {
    return (await this.lease.claim({ _id: id, state: 'pending' }, { token: claim })) !== null;
  }

  /** Stores the response, if `claim` still holds the key. */
  async complete(id: string, claim: string, status: number, body: unknown): Promise<boolean> {
    const done: Partial<IdempotencyKeyDoc> = { state: 'done', response_status: status, response_body: body, completed_at: new Date() };
    const { matchedCount } = await this.keys.updateOne({ _id: id, ...this.lease.heldBy(claim) }, { $set: this.responses.seal(id, done) });
    return matchedCount === 1;
  }

  /** Lets go of the claim, keeping the key and its resource id for the retry to resume under, if `claim` still holds it. */
  async letGo(id: string, claim: string): Promise<boolean> {
    return this.lease.release({ _id: id, state: 'pending' }, claim);
  }

  /** Frees the key for a corrected retry, if `claim` still holds it (nothing was stored under it). */
  async release(id: string, claim: string): Promise<boolean> {
    return (await this.keys.deleteOne({ _id: id, ...this.lease.heldBy(claim) })).deletedCount === 1;
  }
}
