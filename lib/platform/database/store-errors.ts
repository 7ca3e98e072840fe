/**
 * How the stores we run on report the errors the repositories act on. Each store's quirk is named here, in
 * the repositories layer, and nowhere else (architecture rule 6).
 */

/** A unique-index violation: code 11000 on MongoDB, and on FerretDB v2 for insert, update and upsert. */
export function isDuplicateKeyError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, message } = err as { code?: number; message?: string };
  if (code === 11000) return true;
  // FerretDB v2 + DocumentDB: a findOneAndUpdate that would duplicate a unique key answers code 1 with PostgreSQL's exclusion-constraint message (SQLSTATE 23P01).
  return code === 1 && /conflicting key value violates exclusion constraint/.test(message ?? '');
}

/**
 * An error after which a write left nothing half-done and may pass when sent again: a network blip or a
 * primary stepping down (MongoDB labels these), or the gateway finding its database unreachable.
 */
export function isTransientWriteError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { code?: number; message?: string; hasErrorLabel?: (label: string) => boolean; name?: string };
  if (e.hasErrorLabel?.('RetryableWriteError') || e.hasErrorLabel?.('TransientTransactionError')) return true;
  if (e.name === 'MongoNetworkError' || e.name === 'MongoServerSelectionError') return true;
  // FerretDB v2: PostgreSQL down or restarting is code 1 "... (*Pool).Acquire): failed to connect to ..." (no connection, nothing sent).
  return e.code === 1 && /Pool\)\.Acquire\): failed to connect to/.test(e.message ?? '');
}

/** PostgreSQL's deadlock_detected (40P01) and serialization_failure (40001), as DocumentDB encodes SQLSTATEs into error codes. */
const CONFLICT_CODES = new Set([16908292, 16777220]);

/**
 * The database aborted a write because it collided with concurrent ones; the write left nothing behind and may
 * pass when sent again. MongoDB retries these itself outside transactions; PostgreSQL + DocumentDB reports them.
 */
export function isWriteConflictError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, message } = err as { code?: number; message?: string };
  if (typeof code === 'number' && CONFLICT_CODES.has(code)) return true;
  // FerretDB v2 + DocumentDB: a PostgreSQL deadlock or serialization failure can also arrive as code 1 with PostgreSQL's text.
  return code === 1 && /deadlock detected|could not serialize access/.test(message ?? '');
}

/** A query stopped at its `maxTimeMS`: code 50 (MaxTimeMSExpired) on MongoDB and on FerretDB v2 (PostgreSQL's statement timeout). */
export function isTimeLimitError(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: number }).code === 50;
}

/** HostUnreachable, HostNotFound, NetworkTimeout, ShutdownInProgress, PrimarySteppedDown, InterruptedAtShutdown, InterruptedDueToReplStateChange, NotPrimaryOrSecondary. */
const UNAVAILABLE_CODES = new Set([6, 7, 89, 91, 189, 11600, 11602, 13436]);

/**
 * The database cannot be reached right now (no server selectable, a dropped connection, a server shutting down or
 * stepping down): nothing is wrong with the request, and it may pass when sent again.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { name?: string; code?: unknown; message?: string };
  if (/^Mongo(ServerSelection|Network|NetworkTimeout|PoolCleared|TopologyClosed)Error$/.test(e.name ?? '')) return true;
  if (e.name !== 'MongoServerError' || typeof e.code !== 'number') return false;
  if (UNAVAILABLE_CODES.has(e.code)) return true;
  // FerretDB v2 answers InternalError (1) for everything its PostgreSQL did, a lost PostgreSQL included: only the text tells.
  return (
    e.code === 1 &&
    /connect|connection|no such file|broken pipe|write failed|reset by peer|unexpected EOF|shutting down|starting up|terminat/i.test(String(e.message))
  );
}
