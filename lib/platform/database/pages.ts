import type { Collection, Document, Filter } from 'mongodb';
import { idPrefixAt, uuidV7Millis } from '../keys';
import { RefreshAheadCache } from '../refresh-ahead-cache';
import { isTimeLimitError } from './store-errors';
import { pageStrategy } from './store-strategy';

/**
 * Keyset pages on `_id`. Lists in recency order page on time-ordered `_id`s (UUIDv7): on DocumentDB an index
 * serves a sort only when it is on `_id` and the filter bounds `_id` (architecture rule 2), so every list
 * index ends in `_id` and every page query carries an `_id` bound.
 */

/** A page and whether another follows (the query reads one more than the page). */
export interface Page<T> {
  items: T[];
  more: boolean;
}

/** Past every UUID in `_id` order, and before every one: a first page's bound. (DocumentDB drops a bound of ''.) */
const ID_AFTER_ALL = '~';
const ID_BEFORE_ALL = '-';

/**
 * A list's filter bounded on `_id`, strictly past `after` in the list's direction, or past a sentinel on the
 * first page. DocumentDB reads an `_id`-sorted page from an index only when the filter bounds `_id`
 * (architecture rule 2); MongoDB is indifferent. Keeps an `_id` condition the filter already has (`$in`).
 */
export function keysetFilter<F extends Document>(filter: F, direction: 1 | -1, after?: string): F {
  if (after === undefined && !pageStrategy().boundsIdOnFirstPage) return filter;
  const bound = direction === -1 ? { $lt: after ?? ID_AFTER_ALL } : { $gt: after ?? ID_BEFORE_ALL };
  const existing = (filter as Document)._id as Document | undefined;
  return { ...filter, _id: existing ? { ...existing, ...bound } : bound };
}

/** One page of `filter`'s matches in `_id` order (`direction`), strictly after the id `after` when given. */
export async function pageById<T extends { _id: string }>(
  coll: Collection<T>,
  filter: Filter<T>,
  direction: 1 | -1,
  after: string | null,
  limit: number,
): Promise<Page<T>> {
  const docs = (await pageQuery(coll, filter, direction, after, limit).toArray()) as T[];
  return { items: docs.slice(0, limit), more: docs.length > limit };
}

/** The query of `pageById` (one more than the page, to know if another follows); tests `explain` it. */
export function pageQuery<T extends { _id: string }>(coll: Collection<T>, filter: Filter<T>, direction: 1 | -1, after: string | null, limit: number) {
  return coll
    .find(keysetFilter(filter as Document, direction, after ?? undefined) as Filter<T>)
    .sort({ _id: direction })
    .limit(limit + 1);
}

/** A list whose matches are at least this share of its collection walks the `_id` index (see `walksIdIndex`). */
export const DENSE_SHARE = 0.05;

/**
 * Whether a page of `matches` documents in `_id` order should be read by walking the `_id` index in order,
 * filtering as it goes (`hint({_id: 1})`). DocumentDB 1.0 never returns a secondary index's entries in order: a
 * sorted page through `{team_id, ..., _id}` sorts every match (90–170 ms for 90,000 of 100,000 orders), while
 * the `_id` walk reads about page ÷ share entries (2–3 ms). So the walk is taken when the matches are at least
 * DENSE_SHARE of the collection (at most 20 entries read per row returned, on MongoDB too); for a small team in a
 * large collection the planner's own choice stands. `matches` unknown: the planner decides.
 */
export async function walksIdIndex(coll: Collection<any>, matches: number | null | undefined): Promise<boolean> {
  if (matches === null || matches === undefined || !pageStrategy().walksDenseLists) return false;
  return matches >= DENSE_SHARE * (await estimatedSize(coll));
}

/**
 * How long a collection's size, as `walksIdIndex` and `isDenseList` judge density by, is reused. It is an estimate
 * (the store's metadata, `estimatedDocumentCount`) and only picks a plan; reading it costs a round trip (~0.7 ms
 * on DocumentDB, more than a find by `_id`) before every page, which the cache takes off the page's path.
 */
const SIZE_ESTIMATE_TTL_MS = 5_000;
const sizeEstimates = new RefreshAheadCache<number>(SIZE_ESTIMATE_TTL_MS, 1_000);
const estimatedSize = async (coll: Collection<any>): Promise<number> => (await sizeEstimates.get(coll.namespace, () => coll.estimatedDocumentCount())) ?? 0;

/**
 * Whether `filter`'s matches are dense enough for the `_id` walk (`walksIdIndex`), counted off their index only up to
 * that share: it costs about the same at any size. A list that also counts all its matches (for `total`) asks this
 * beside that count rather than after it, so its page does not wait for the full count.
 */
export async function isDenseList(coll: Collection<any>, filter: Filter<any>): Promise<boolean> {
  if (!pageStrategy().walksDenseLists) return false;
  const dense = Math.max(1, Math.ceil(DENSE_SHARE * (await estimatedSize(coll)))); // a limit of 0 counts all
  return (await coll.countDocuments(filter, { limit: dense })) >= dense;
}

/** How long a log's page may walk the `_id` index before it is read window by window instead (see `logPage`). */
const WALK_BUDGET_MS = 30;
/**
 * The windows of time a log page reads off the list's index, newest first (`pageByTimeWindows`): 1 h, then each 16
 * times the one before (16 h, ~11 days, ~170 days), then the rest of the log in one read. (The bench's raw baseline
 * reads the same windows.)
 */
export const LOG_TIME_WINDOWS = { firstMs: 3_600_000, growth: 16, count: 4 } as const;

/**
 * A page of a log (events, deliveries, attempts, the audit log): lists that do not count their matches, so
 * `walksIdIndex` cannot judge their density. The `_id` walk is tried first, stopped at `budgetMs` (maxTimeMS):
 * a dense log (a busy team's, where the planner's plan sorts every match in memory on DocumentDB: ~300–500 ms a
 * page at 200,000) is read in a few milliseconds. A sparse one (a quiet team under other teams' newer entries) runs
 * out of budget and is read off the list's index window of time by window (`pageByTimeWindows`).
 */
export async function logPage<T extends { _id: string }>(
  coll: Collection<T>,
  filter: Filter<T>,
  direction: 1 | -1,
  after: string | null,
  limit: number,
  budgetMs = WALK_BUDGET_MS,
): Promise<Page<T>> {
  if (!pageStrategy().probesLogWalk) return pageById(coll, filter, direction, after, limit);
  try {
    const docs = (await pageQuery(coll, filter, direction, after, limit).hint({ _id: 1 }).maxTimeMS(budgetMs).toArray()) as T[];
    return { items: docs.slice(0, limit), more: docs.length > limit };
  } catch (err) {
    if (!isTimeLimitError(err)) throw err;
    return direction === -1 ? pageByTimeWindows(coll, filter, after, limit) : pageById(coll, filter, direction, after, limit);
  }
}

/**
 * A newest-first page of a log read off the list's index in windows of `_id` going back in time from the cursor (or
 * now): a log's ids are UUIDv7, which start with their time. DocumentDB sorts every match a query's index finds, so
 * one read of a quiet team's 100,000 entries sorts them all for 50 (~330 ms); a window holds only the matches of its
 * time (the first page of a team that wrote in the last hour: one window). The windows grow (1 h, 16 h, ~11 days,
 * ~170 days) and the last read takes all that is older, so every id is in exactly one window, newest window first:
 * the page is the one `pageById` reads, ids of other forms included (they fall in whichever window their text does).
 */
export async function pageByTimeWindows<T extends { _id: string }>(
  coll: Collection<T>,
  filter: Filter<T>,
  after: string | null,
  limit: number,
): Promise<Page<T>> {
  const startMs = after === null ? Date.now() : uuidV7Millis(after);
  if (startMs === null) return pageById(coll, filter, -1, after, limit);
  const items: T[] = [];
  let below = after;
  let spanMs: number = LOG_TIME_WINDOWS.firstMs;
  let fromMs = startMs - spanMs;
  for (let window = 0; items.length <= limit; window++) {
    const last = window === LOG_TIME_WINDOWS.count || fromMs <= 0;
    const from = last ? null : idPrefixAt(fromMs);
    const docs = (await pageQuery(coll, from === null ? filter : idsFrom(filter, from), -1, below, limit - items.length).toArray()) as T[];
    items.push(...docs);
    if (last) break;
    below = from;
    spanMs *= LOG_TIME_WINDOWS.growth;
    fromMs -= spanMs;
  }
  return { items: items.slice(0, limit), more: items.length > limit };
}

/** `filter` with its `_id` condition also at or past `from` (a lower bound it already has stays: both apply). */
function idsFrom<T>(filter: Filter<T>, from: string): Filter<T> {
  const existing = (filter as Document)._id as Document | undefined;
  const bounded = existing?.$gte !== undefined && existing.$gte > from ? existing : { ...existing, $gte: from };
  return { ...filter, _id: bounded } as Filter<T>;
}
