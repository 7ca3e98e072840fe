import { retryWriteConflicts } from './write-conflicts';
import type { Collection, Document, IndexDirection } from 'mongodb';

/**
 * Declared indexes and the query shapes they serve (architecture: "every query shape has an index").
 * A missing index does not show with development's small data; production would scan. Each repository
 * declares both lists next to its queries, and test/indexes.test.ts checks that every shape is covered by one
 * of the indexes.
 */
export interface IndexSpec {
  key: Record<string, IndexDirection>;
  unique?: boolean;
  /** A TTL index (one field, a Date): the store deletes a document this retention after the field's time. */
  expireAfter?: keyof Retention;
  /**
   * A partial index (`partialFilterExpression`): only documents matching it are in the index, so writes of the
   * others skip it (on DocumentDB every update re-inserts a document's entries in each index it is in). It serves a
   * query only when the query fixes the same values (QueryShape `equals`).
   */
  partial?: Record<string, unknown>;
}

/**
 * How long documents live where the rule is "N after field X": TTL indexes, so the store itself deletes them
 * (MongoDB's TTL monitor and DocumentDB's pg_cron job both run every minute). Seconds.
 */
export interface Retention {
  /** Stored X-Idempotency-Key responses, after `created_at` (IDEMPOTENCY_KEY_RETENTION_SECONDS). */
  idempotencyKeys: number;
  /** Webhook events (`created_at`), finished deliveries (`finished_at`) and attempts (`timestamp`) (WEBHOOK_RETENTION_DAYS). */
  webhookHistory: number;
  /** Link tokens (wearables' and the delivery-log page's) and their use records, after `expires_at`: an hour, for the "already used" answer. */
  linkTokensAfterExpiry: number;
  /** A phone's sign-in, access and refresh tokens (lib/phones/sdk-sessions-store.ts), after `expires_at`: a day. */
  sdkTokensAfterExpiry: number;
  /** Heartbeats of workers that died without removing theirs, after `last_seen_at`. */
  workerHeartbeats: number;
  /** Audit log entries, after `created_at` (AUDIT_LOG_RETENTION_DAYS). */
  auditLog: number;
  /** Tombstones of erased users (ids, status, when), after `erased_at` (USER_TOMBSTONE_RETENTION_DAYS). */
  userTombstones: number;
  /** Connections that ended (disconnected), after `deregistered_at` (CONNECTION_HISTORY_RETENTION_DAYS). */
  endedConnections: number;
  /** A destination dispatcher's document, after `active_until` (idle: when it went idle): an hour. */
  dispatcherMarks: number;
  /** A provider app's budget window slot, after `ends_at`: an hour. */
  providerBudgetWindows: number;
  /** A lab's result message (lib/labs/lab-inbound-store.ts), after `settled_at` (applied, refused, or its review closed): 30 days. */
  labInboundMessages: number;
  /** The stored bytes of an Apple Health export upload (lib/phones/imports-store.ts), after `stored_at`: a week to resume or import it. */
  importUploads: number;
}

/** The configuration that sets retention (lib/platform/config.ts). */
export interface RetentionConfig {
  IDEMPOTENCY_KEY_RETENTION_SECONDS: number;
  WEBHOOK_RETENTION_DAYS: number;
  AUDIT_LOG_RETENTION_DAYS: number;
  USER_TOMBSTONE_RETENTION_DAYS: number;
  CONNECTION_HISTORY_RETENTION_DAYS: number;
}

const days = (n: number) => Math.round(n * 86_400);

export function retentionFrom(config: RetentionConfig): Retention {
  return {
    idempotencyKeys: config.IDEMPOTENCY_KEY_RETENTION_SECONDS,
    webhookHistory: days(config.WEBHOOK_RETENTION_DAYS),
    linkTokensAfterExpiry: 3_600,
    sdkTokensAfterExpiry: 86_400,
    workerHeartbeats: 3_600,
    auditLog: days(config.AUDIT_LOG_RETENTION_DAYS),
    userTombstones: days(config.USER_TOMBSTONE_RETENTION_DAYS),
    endedConnections: days(config.CONNECTION_HISTORY_RETENTION_DAYS),
    dispatcherMarks: 3_600,
    providerBudgetWindows: 3_600,
    labInboundMessages: days(30),
    importUploads: days(7),
  };
}

/** The configuration's defaults (lib/platform/config.ts): for tools and tests that index a database of their own. */
export const DEFAULT_RETENTION: Retention = retentionFrom({
  IDEMPOTENCY_KEY_RETENTION_SECONDS: 86_400,
  WEBHOOK_RETENTION_DAYS: 30,
  AUDIT_LOG_RETENTION_DAYS: 365,
  USER_TOMBSTONE_RETENTION_DAYS: 365,
  CONNECTION_HISTORY_RETENTION_DAYS: 365,
});

export interface QueryShape {
  name: string;
  /** Fields the index must lead with (equality, `$in`, or a range on the last one), in any order. */
  filter: string[];
  /** Sort fields, which must follow the filter fields in the index, in this order. */
  sort?: string[];
  /** Further filters applied to the documents the index selects (documented, not index-backed). */
  residual?: string[];
  /** Values the query always fixes (e.g. `{ status: 'pending' }`): what lets a partial index serve it. */
  equals?: Record<string, unknown>;
}

/**
 * True when some index starts with exactly the shape's filter fields, followed by its sort fields. A shape
 * with no filter is a declared whole-collection pass (e.g. re-encrypting every endpoint): covered when its
 * sort, if any, is an index's leading fields.
 */
export function coveredBy(shape: QueryShape, indexes: IndexSpec[]): boolean {
  const sort = shape.sort ?? [];
  if (!shape.filter.length) return indexes.some((index) => sort.every((f, i) => Object.keys(index.key)[i] === f));
  return indexes.some((index) => {
    const lead = Object.keys(index.key).slice(0, shape.filter.length);
    const leadsWithFilter = lead.length === shape.filter.length && shape.filter.every((f) => lead.includes(f));
    const holdsMatches = Object.entries(index.partial ?? {}).every(([f, v]) => JSON.stringify(shape.equals?.[f]) === JSON.stringify(v));
    return leadsWithFilter && holdsMatches && indexServes(index, shape.filter, sort);
  });
}

/**
 * Creates the declared indexes (idempotent). A TTL index takes its retention from `retention`; when the index
 * exists with another retention, or without one, `collMod` changes it in place (MongoDB and DocumentDB both can).
 * An index that exists with another partial filter (or none) is dropped and built again with the declared one.
 */
export async function createIndexes(
  collection: Collection<any> | Collection<Document>,
  indexes: IndexSpec[],
  retention: Retention = DEFAULT_RETENTION,
): Promise<void> {
  for (const index of indexes) {
    const expireAfterSeconds = index.expireAfter ? retention[index.expireAfter] : undefined;
    // The api and the worker create the same indexes at start: on PostgreSQL + DocumentDB two creations on one fresh
    // collection can deadlock, and the loser is sent again (it then finds the index there: a no-op).
    const create = () =>
      retryWriteConflicts(() =>
        collection.createIndex(index.key, {
          ...(index.unique ? { unique: true } : {}),
          ...(expireAfterSeconds !== undefined ? { expireAfterSeconds } : {}),
          ...(index.partial ? { partialFilterExpression: index.partial } : {}),
        }),
      );
    try {
      await create();
    } catch (err) {
      const code = (err as { code?: number }).code;
      if (code !== 85 && code !== 86) throw err; // IndexOptionsConflict, IndexKeySpecsConflict
      const existing = (await collection.indexes()).find((ix) => JSON.stringify(ix.key) === JSON.stringify(index.key));
      if (existing && JSON.stringify(existing.partialFilterExpression ?? null) !== JSON.stringify(index.partial ?? null)) {
        await collection.dropIndex(existing.name as string);
        await create();
      } else if (expireAfterSeconds !== undefined) {
        await collection.db.command({ collMod: collection.collectionName, index: { keyPattern: index.key, expireAfterSeconds } });
      } else throw err;
    }
  }
}

/**
 * True when `index` can serve a query observed on the wire (filter fields in any order, sort fields in
 * order): it leads with one or more of the filter fields (equality, `$in` or range), and the sort fields not
 * fixed by that prefix come right after it. Unlike a declared shape, an observed filter may name further
 * fields that the index does not hold (applied to the documents it selects).
 */
export function indexServes(index: IndexSpec, filter: string[], sort: string[]): boolean {
  // A partial index needs the query to name its filter's fields (their values are checked on the declared shapes).
  if (Object.keys(index.partial ?? {}).some((f) => !filter.includes(f))) return false;
  const fields = Object.keys(index.key);
  let prefix = 0;
  while (prefix < fields.length && filter.includes(fields[prefix])) prefix++;
  if (prefix === 0) return false;
  const lead = fields.slice(0, prefix);
  const rest = sort.filter((f) => !lead.includes(f));
  return rest.every((f, i) => fields[prefix + i] === f);
}

/** Drops indexes an earlier version declared (by key; those not there are skipped), so writes stop paying for them. */
export async function dropIndexes(collection: Collection<any> | Collection<Document>, keys: Record<string, IndexDirection>[]): Promise<void> {
  const existing = await collection
    .listIndexes()
    .toArray()
    .catch((err: { code?: number }) => {
      if (err.code === 26) return []; // NamespaceNotFound: a fresh database
      throw err;
    });
  for (const key of keys) {
    const found = existing.find((index) => JSON.stringify(index.key) === JSON.stringify(key));
    if (found) await collection.dropIndex(found.name as string);
  }
}
