import type { Collection, Db } from 'mongodb';
import { isWriteConflictError } from './store-errors';

/** Attempts of one write that collides with concurrent ones (a few: the colliding writes finish meanwhile). */
const CONFLICT_ATTEMPTS = 6;

/**
 * Sends a write again, after a short jittered pause, when the database aborted it for colliding with concurrent
 * writes (isWriteConflictError); a bounded number of times, then the last error is thrown. Whatever the write then
 * meets (the row a racing insert committed: a duplicate key) is the answer its repository gives.
 */
export async function retryWriteConflicts<T>(write: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (!mayRetryConflict(attempt) || !isWriteConflictError(err) || appliedPartly(err)) throw err;
      await conflictPause(attempt);
    }
  }
}

/** Whether a write that collided `attempt` times may be sent once more. */
export const mayRetryConflict = (attempt: number) => attempt < CONFLICT_ATTEMPTS;

/**
 * The pause before sending a collided write again: up to 100 ms after the first attempt, doubling, fully jittered.
 * PostgreSQL finds a deadlock only after its deadlock_timeout (1 s by default), so the victims of one pile-up wake
 * together: spread out, their next attempts find the winner committed instead of colliding again.
 */
export function conflictPause(attempt: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.random() * 50 * 2 ** attempt));
}

/** A batch (insertMany, bulkWrite) whose other operations were applied: sent again, they would apply twice. */
function appliedPartly(err: unknown): boolean {
  const result = (err as { result?: { insertedCount?: number; matchedCount?: number; deletedCount?: number; upsertedCount?: number } }).result;
  return !!result && (result.insertedCount ?? 0) + (result.matchedCount ?? 0) + (result.deletedCount ?? 0) + (result.upsertedCount ?? 0) > 0;
}

const WRITES = new Set<PropertyKey>([
  'insertOne',
  'insertMany',
  'updateOne',
  'updateMany',
  'replaceOne',
  'deleteOne',
  'deleteMany',
  'findOneAndUpdate',
  'findOneAndReplace',
  'findOneAndDelete',
  'bulkWrite',
]);

/** The object's own member, with functions bound to it (proxied driver objects keep their own `this`). */
function member(target: object, prop: PropertyKey): unknown {
  const value = Reflect.get(target, prop, target);
  return typeof value === 'function' ? value.bind(target) : value;
}

function conflictRetryingCollection<T extends object>(collection: Collection<T>): Collection<T> {
  return new Proxy(collection, {
    get(target, prop) {
      const value = member(target, prop);
      if (!WRITES.has(prop) || typeof value !== 'function') return value;
      return (...args: unknown[]) => retryWriteConflicts(() => value(...args));
    },
  });
}

/**
 * The database whose collections send every write again when PostgreSQL + DocumentDB aborts it as a deadlock or
 * serialization failure (racing inserts of one unique key deadlock in its index): repositories and the routes above
 * them never see that quirk (architecture rule 6).
 */
export function withWriteConflictRetries(db: Db): Db {
  return new Proxy(db, {
    get(target, prop) {
      if (prop !== 'collection') return member(target, prop);
      return (...args: Parameters<Db['collection']>) => conflictRetryingCollection(target.collection(...args));
    },
  });
}
