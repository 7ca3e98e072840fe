import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Collection, Db } from 'mongodb';
import { ApiError } from '../errors';
import { isDuplicateKeyError } from './store-errors';
import { createIndexes, type IndexSpec, type QueryShape } from './indexes';

interface LockDoc {
  _id: string;
  owner: string;
  expires_at: Date;
}

/** `document_locks` needs only its `_id` (the lock key). */
export const LOCK_INDEXES: Record<'document_locks', IndexSpec[]> = { document_locks: [] };
/** Every query DocumentLocks issues (test/indexes.test.ts). */
export const LOCK_QUERY_SHAPES: Record<'document_locks', QueryShape[]> = {
  document_locks: [
    { name: 'lock by key (holder check, take-over, fencing)', filter: ['_id'] },
    { name: 'release or take over (only the named owner)', filter: ['_id'], residual: ['owner'] },
  ],
};

/** What a lock holder checks before each write it makes under the lock. */
export interface LockLease {
  /**
   * Throws LeaseLostError unless this holder still holds the lock with time to spare: its lease has not
   * run out (another process may take an expired lock over) and the lock document still names it.
   */
  assertHeld(): Promise<void>;
}

export class LeaseLostError extends ApiError {
  constructor(key: string) {
    super(503, 'A change to this resource took too long and was abandoned; retry the request.', { 'Retry-After': '1' });
    this.name = `LeaseLostError(${key})`;
  }
}

/** A holder stops writing this long before its lease ends (allows for the write itself and clock skew). */
const LEASE_SAFETY_MS = 3_000;

/**
 * Short mutexes, left only in TenancyRepository (a team and what hangs off it; an org's management keys), where
 * the invariant spans documents. Single-document races are settled by a precondition in the write itself
 * (architecture rule 3); this was the tool when the dev store (FerretDB v1) applied updates as unlocked
 * read-modify-write. Inserting a document with a unique `_id` is the lock. A lock left by a crashed process expires after `ttlMs`
 * and is taken over; fencing keeps a slow holder from writing after that: it calls `lease.assertHeld()`
 * before each write and gives up once its lease is within LEASE_SAFETY_MS of its end.
 */
export class DocumentLocks {
  readonly locks: Collection<LockDoc>;

  constructor(db: Db, private readonly ttlMs = 15_000) {
    this.locks = db.collection('document_locks');
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.locks, LOCK_INDEXES.document_locks);
  }

  async withLock<T>(key: string, fn: (lease: LockLease) => Promise<T>, waitMs = 5_000): Promise<T> {
    const owner = randomUUID();
    let expiresAt = 0;
    const deadline = Date.now() + waitMs;
    let delay = 2;
    for (;;) {
      try {
        expiresAt = Date.now() + this.ttlMs;
        await this.locks.insertOne({ _id: key, owner, expires_at: new Date(expiresAt) });
        break;
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
        const held = await this.locks.findOne({ _id: key });
        if (held && held.expires_at.getTime() < Date.now()) {
          await this.locks.deleteOne({ _id: key, owner: held.owner });
          continue;
        }
        if (Date.now() > deadline) {
          throw new ApiError(503, 'Another change to this resource is in progress; retry the request.', { 'Retry-After': '1' });
        }
        await sleep(delay + Math.random() * delay);
        delay = Math.min(delay * 2, 50);
      }
    }
    const lease: LockLease = {
      assertHeld: async () => {
        if (Date.now() > expiresAt - LEASE_SAFETY_MS) throw new LeaseLostError(key);
        const held = await this.locks.findOne({ _id: key });
        if (held?.owner !== owner || Date.now() > expiresAt - LEASE_SAFETY_MS) throw new LeaseLostError(key);
      },
    };
    try {
      return await fn(lease);
    } finally {
      await this.locks.deleteOne({ _id: key, owner }).catch(() => undefined);
    }
  }
}
