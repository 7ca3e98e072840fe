import type { Collection } from 'mongodb';
import { isDuplicateKeyError, isTransientWriteError, isWriteConflictError } from './store-errors';
import { conflictPause, mayRetryConflict } from './write-conflicts';

/**
 * Inserts documents with deterministic `_id`s, unordered; returns the ids that already existed. The way
 * repeatable writes (fan-out, retried recordings) stay idempotent by key (architecture rule 4).
 */
export async function insertIgnoringDuplicates<T extends { _id: string }>(coll: Collection<T>, docs: T[], attempt = 1): Promise<Set<string>> {
  const dups = new Set<string>();
  // Documents whose insert collided with concurrent writes (isWriteConflictError) while others of the batch went in.
  const collided: T[] = [];
  if (!docs.length) return dups;
  try {
    await coll.insertMany(docs as never[], { ordered: false });
  } catch (err) {
    const writeErrors = (err as { writeErrors?: unknown }).writeErrors;
    const list = (Array.isArray(writeErrors) ? writeErrors : writeErrors ? [writeErrors] : []) as {
      code?: number;
      errmsg?: string;
      index: number;
      err?: { code?: number; index?: number; errmsg?: string };
    }[];
    if (!list.length && isDuplicateKeyError(err) && docs.length === 1) {
      dups.add(docs[0]._id);
      return dups;
    }
    if (!list.length) throw err;
    for (const e of list) {
      const index = e.index ?? e.err?.index;
      const error = { code: e.code ?? e.err?.code, message: e.errmsg ?? e.err?.errmsg };
      if (index === undefined) throw err;
      if (isDuplicateKeyError(error)) dups.add(docs[index]._id);
      else if (isWriteConflictError(error) && mayRetryConflict(attempt)) collided.push(docs[index]);
      else throw err;
    }
  }
  if (collided.length) {
    await conflictPause(attempt);
    for (const id of await insertIgnoringDuplicates(coll, collided, attempt + 1)) dups.add(id);
  }
  return dups;
}

/**
 * Runs a database write again after errors that leave nothing half-done and pass (isTransientWriteError).
 * Writes retried this way must be idempotent (deterministic `_id`s, `$set` of fixed values). Gives up
 * after `deadlineMs` and throws the last error.
 */
export async function retryTransient<T>(write: () => Promise<T>, deadlineMs = 60_000): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (let delay = 50; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      return await write();
    } catch (err) {
      if (!isTransientWriteError(err) || Date.now() + delay > deadline) throw err;
      await new Promise((r) => setTimeout(r, delay + Math.random() * delay));
    }
  }
}
