import type { Collection, Db } from 'mongodb';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';
import { isDuplicateKeyError } from '../platform/database/store-errors';

/**
 * `provider_budget_windows`: how many requests an OAuth app (provider + client id) has sent in one window of its
 * budget (lib/wearables/providers/budget.ts), one document per app, window and slot:
 * `_id: <provider>:<client id>:<window>:<slot start, ms>`. Every worker and the api draw from the same documents,
 * each draw one conditional `$inc` (`count` below the slot's cap, or an upsert of the slot's first request), so
 * any number of processes together never exceed a cap. Documents expire an hour after their slot ended (TTL on
 * `ends_at`); they hold no user data.
 */
export interface BudgetWindowDoc {
  _id: string;
  provider: string;
  client_id: string;
  /** The window's key (`minute`, `day`, `15 minutes reads`...). */
  window: string;
  count: number;
  starts_at: Date;
  ends_at: Date;
}

/** One slot of one window that a request draws from (budget.ts `budgetSlots`). */
export interface BudgetSlot {
  window: string;
  startsAt: Date;
  endsAt: Date;
  /** Requests the slot admits. */
  cap: number;
}

export const PROVIDER_BUDGET_INDEXES: Record<'provider_budget_windows', IndexSpec[]> = {
  provider_budget_windows: [{ key: { ends_at: 1 }, expireAfter: 'providerBudgetWindows' }],
};
export const PROVIDER_BUDGET_QUERY_SHAPES: Record<'provider_budget_windows', QueryShape[]> = {
  provider_budget_windows: [{ name: "a draw from an app's window slot: conditional $inc (upsert) by id, below its cap", filter: ['_id'], residual: ['count'] }],
};

export class ProviderBudgetRepository {
  readonly windows: Collection<BudgetWindowDoc>;

  constructor(db: Db) {
    this.windows = db.collection('provider_budget_windows');
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.windows, PROVIDER_BUDGET_INDEXES.provider_budget_windows, retention);
  }

  static slotId = (provider: string, clientId: string, slot: Pick<BudgetSlot, 'window' | 'startsAt'>) =>
    `${provider}:${clientId}:${slot.window}:${slot.startsAt.getTime()}`;

  /**
   * Takes `requests` from every slot, all or none: null when taken, else the first slot that had no room (the ones
   * taken before it are given back). A crash between a take and its give-back leaves a slot counting requests never
   * sent: it admits fewer, never more.
   */
  async take(provider: string, clientId: string, slots: BudgetSlot[], requests = 1): Promise<BudgetSlot | null> {
    const taken: BudgetSlot[] = [];
    for (const slot of slots) {
      if (!(await this.takeOne(provider, clientId, slot, requests))) {
        for (const back of taken)
          await this.windows.updateOne({ _id: ProviderBudgetRepository.slotId(provider, clientId, back) }, { $inc: { count: -requests } });
        return slot;
      }
      taken.push(slot);
    }
    return null;
  }

  private async takeOne(provider: string, clientId: string, slot: BudgetSlot, requests: number): Promise<boolean> {
    if (requests > slot.cap) return false;
    const _id = ProviderBudgetRepository.slotId(provider, clientId, slot);
    const filter = { _id, count: { $lte: slot.cap - requests } };
    const update = {
      $inc: { count: requests },
      $setOnInsert: { provider, client_id: clientId, window: slot.window, starts_at: slot.startsAt, ends_at: slot.endsAt },
    };
    try {
      const res = await this.windows.updateOne(filter, update, { upsert: true });
      return res.modifiedCount === 1 || res.upsertedCount === 1;
    } catch (err) {
      // The slot exists and is full (the upsert's insert met its _id), or a racing first draw created it: ask once more without upsert.
      if (!isDuplicateKeyError(err)) throw err;
      return (await this.windows.updateOne(filter, update)).modifiedCount === 1;
    }
  }

  /** Requests counted in the slot (tests, the bench). */
  async used(provider: string, clientId: string, slot: Pick<BudgetSlot, 'window' | 'startsAt'>): Promise<number> {
    return (await this.windows.findOne({ _id: ProviderBudgetRepository.slotId(provider, clientId, slot) }, { projection: { count: 1 } }))?.count ?? 0;
  }
}
