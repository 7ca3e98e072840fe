import type { Collection, Db, Filter } from 'mongodb';
import type { IndexSpec, QueryShape } from '../platform/database/indexes';
import { isDuplicateKeyError } from '../platform/database/store-errors';
import { uuidV7Millis } from '../platform/keys';
import { RefreshAheadCache } from '../platform/refresh-ahead-cache';
import type { StoredLabOrder } from './orders-store';

/**
 * How many orders a team has (the `total` of an unfiltered `GET /v3/orders`), without counting them all on every
 * list: a count is as costly as the matches are many on every store (DocumentDB: ~90 ms for 90,000 orders, a heap
 * scan in every count form), which made the first page ×2.6 slower from 10,000 to 100,000 orders.
 *
 * One document per team in `lab_order_counts` records that the team has `count` orders whose `_id` sorts before
 * `below`, a time-ordered bound `settleMs` in the past ("settled" ids). The total is that plus a count of the ids
 * at or past `below`: the orders of the last minutes, and any since the last advance. Orders are never deleted,
 * and a new order's `_id` is minted as it is stored (UUIDv7: its time is its creation), so what sorts before
 * `below` does not change, except in two cases, both handled here:
 *  - An order stored with an older id (a redraw placed at its parent's failure, a retried request's id, a clock
 *    far ahead): `noteStored` drops the team's checkpoint after that insert (a bump of `epoch`), and a checkpoint
 *    counted before the bump cannot be written after it (every write has the `epoch` it read in its filter).
 *    Ids are judged by their age when their insert returns, at half of `settleMs`, so clocks of the api's
 *    hosts may disagree by up to that much.
 *  - A crash between such an insert and its bump: the checkpoint is recounted from scratch when older than
 *    `recountMs`, so an error lasts at most that long.
 * No transaction: each write is one conditional single-document write (architecture rule 3). Retention: as long
 * as the team; no user data (nothing to erase).
 */
export interface OrderCountDoc {
  /** The team. */
  _id: string;
  /** Bumped by every insert of an order with an old id; a checkpoint is written only under the epoch it read. */
  epoch: number;
  /** The team has `count` orders with `_id < below` (absent after a bump: the next list counts them afresh). */
  below?: string;
  count?: number;
  /** When `count` was last taken whole (not advanced from an earlier checkpoint). */
  recounted_at?: Date;
  updated_at: Date;
}

export const ORDER_COUNT_INDEXES: IndexSpec[] = [];
export const ORDER_COUNT_QUERY_SHAPES: QueryShape[] = [{ name: "a team's order count checkpoint (read, advance, drop)", filter: ['_id'] }];

export interface OrderCountSettings {
  /** How old an order id is before the checkpoint takes it in (default 10 minutes). */
  settleMs: number;
  /** A checkpoint taken whole longer ago than this is retaken (default 1 hour). */
  recountMs: number;
  /** Settled orders past the checkpoint before a list moves it on (default 200). */
  advanceAt: number;
}
export const DEFAULT_ORDER_COUNT_SETTINGS: OrderCountSettings = { settleMs: 10 * 60_000, recountMs: 60 * 60_000, advanceAt: 200 };

const unlessDuplicateKey = (err: unknown) => {
  if (!isDuplicateKeyError(err)) throw err;
};

/** The smallest string past every UUIDv7 minted before `ms` and before every one minted at or after it. */
function idTimeBound(ms: number): string {
  const hex = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-`;
}

/** How long a team's size, as a list plans its page by (`teamCount`), is reused in a process. */
const PLANNED_SIZE_TTL_MS = 5_000;

export class OrderCountStore {
  readonly counts: Collection<OrderCountDoc>;
  private readonly plannedSizes = new RefreshAheadCache<number>(PLANNED_SIZE_TTL_MS);

  constructor(
    db: Db,
    private readonly orders: Collection<StoredLabOrder>,
    private readonly settings: OrderCountSettings = DEFAULT_ORDER_COUNT_SETTINGS,
  ) {
    this.counts = db.collection('lab_order_counts');
  }

  /** The team whose orders `filter` matches, all of them and nothing else (`teamTotal` counts those); else null. */
  static teamAlone(filter: Filter<StoredLabOrder>): string | null {
    const keys = Object.keys(filter);
    return keys.length === 1 && typeof filter.team_id === 'string' ? filter.team_id : null;
  }

  /**
   * The team's exact `total` (teamTotal), and the size its page is planned by (dense or not: pages.ts `walksIdIndex`),
   * which needs no precision: the team's size as this process last read it, up to `PLANNED_SIZE_TTL_MS` old, so a
   * steady client's page is read at once, beside the count; else the checkpoint's count as soon as it is read (or,
   * with none to use, the total). Refreshed ahead from this very list's own reads: no read of its own.
   */
  teamCount(teamId: string): { total: Promise<number>; plannedSize: Promise<number> } {
    let onCheckpoint!: (settled: number | null) => void;
    const checkpoint = new Promise<number | null>((resolve) => (onCheckpoint = resolve));
    const total = this.teamTotal(teamId, onCheckpoint);
    total.catch(() => onCheckpoint(null)); // a failed read: the size waits on the total, and fails with it
    const plannedSize = this.plannedSizes.get(teamId, () => checkpoint.then((settled) => settled ?? total)).then((size) => size ?? 0);
    return { total, plannedSize };
  }

  /**
   * How many orders the team has: its checkpoint plus a count of the orders past it. `onCheckpoint` hears the
   * checkpoint's count as soon as it is read (null when there is none to use), before the rest is counted: enough to
   * plan a page by (a list reads its page meanwhile).
   */
  async teamTotal(teamId: string, onCheckpoint?: (settled: number | null) => void): Promise<number> {
    const now = Date.now();
    const horizon = idTimeBound(now - this.settings.settleMs);
    const doc = await this.counts.findOne({ _id: teamId });
    const countIds = (range: Record<string, string>) => this.orders.countDocuments({ team_id: teamId, _id: range });
    const fresh = (d: OrderCountDoc | null): d is OrderCountDoc & Required<Pick<OrderCountDoc, 'below' | 'count'>> =>
      d?.below !== undefined && d.count !== undefined && d.recounted_at !== undefined && now - d.recounted_at.getTime() <= this.settings.recountMs;
    onCheckpoint?.(fresh(doc) ? doc.count : null);
    if (!fresh(doc)) {
      // No checkpoint (or an old one): count every order, settled and recent apart, and keep the settled count.
      const [settled, recent] = await Promise.all([countIds({ $lt: horizon }), countIds({ $gte: horizon })]);
      const next = { below: horizon, count: settled, recounted_at: new Date(now), updated_at: new Date(now) };
      // Under the epoch read: a checkpoint dropped meanwhile (an old id stored) is not put back; a clash of two first
      // counts leaves the other's, as good as this one.
      if (doc) await this.counts.updateOne({ _id: teamId, epoch: doc.epoch }, { $set: next });
      else await this.counts.insertOne({ _id: teamId, epoch: 0, ...next }).catch(unlessDuplicateKey);
      return settled + recent;
    }
    if (doc.below >= horizon) return doc.count + (await countIds({ $gte: doc.below })); // a clock behind the last writer's
    const [newlySettled, recent] = await Promise.all([countIds({ $gte: doc.below, $lt: horizon }), countIds({ $gte: horizon })]);
    if (newlySettled >= this.settings.advanceAt) {
      await this.counts.updateOne(
        { _id: teamId, epoch: doc.epoch, below: doc.below },
        { $set: { below: horizon, count: doc.count + newlySettled, updated_at: new Date(now) } },
      );
    }
    return doc.count + newlySettled + recent;
  }

  /**
   * After an order is stored (or found stored by a retry): an id old enough that a checkpoint may already have been
   * counted past it drops the team's checkpoint. Upserted: a checkpoint counted before this insert and written
   * after it would otherwise go unseen. Concurrent first upserts can clash on the key; the loser's update applies.
   */
  async noteStored(teamId: string, orderId: string): Promise<void> {
    const minted = uuidV7Millis(orderId);
    if (minted !== null && Date.now() - minted < this.settings.settleMs / 2) return;
    const drop = () =>
      this.counts.updateOne(
        { _id: teamId },
        { $inc: { epoch: 1 }, $unset: { below: '', count: '', recounted_at: '' }, $set: { updated_at: new Date() } },
        { upsert: true },
      );
    await drop().catch((err) => (isDuplicateKeyError(err) ? drop() : Promise.reject(err)));
  }
}
