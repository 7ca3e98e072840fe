import type { Db } from 'mongodb';

/**
 * How list pages are read depends on the store the process is connected to, and only here:
 * - `documentdb` (PostgreSQL + DocumentDB behind FerretDB, the embedded store): an index serves an `_id`-sorted page
 *   only when the filter bounds `_id` (so every page carries a bound, a sentinel on the first), and it never returns a
 *   secondary index's entries in order (so a dense list walks the `_id` index, and a log tries that walk time-boxed);
 * - `mongodb` (MongoDB 7): the list's compound index serves each page in order as it is; no bound, hint or probe.
 * Chosen from `buildInfo` when the process connects (FerretDB names itself there); until then the DocumentDB
 * strategy, which is correct on both.
 */
export type StoreKind = 'documentdb' | 'mongodb';

export interface PageStrategy {
  store: StoreKind;
  /** Every `_id`-ordered page query bounds `_id`, the first page with a sentinel. */
  boundsIdOnFirstPage: boolean;
  /** A list dense in its collection is read by walking the `_id` index in order (`hint({_id: 1})`). */
  walksDenseLists: boolean;
  /** A log page first tries the `_id` walk for a few milliseconds (`maxTimeMS`), then the list's index. */
  probesLogWalk: boolean;
}

const STRATEGIES: Record<StoreKind, PageStrategy> = {
  documentdb: { store: 'documentdb', boundsIdOnFirstPage: true, walksDenseLists: true, probesLogWalk: true },
  mongodb: { store: 'mongodb', boundsIdOnFirstPage: false, walksDenseLists: false, probesLogWalk: false },
};

let current: PageStrategy = STRATEGIES.documentdb;

/** The strategy of the store this process is connected to. */
export const pageStrategy = (): PageStrategy => current;

/** Which store `db` is: FerretDB answers `buildInfo` with a `ferretdb` section; MongoDB does not. */
export async function detectStore(db: Db): Promise<StoreKind> {
  const info = await db.admin().command({ buildInfo: 1 });
  return 'ferretdb' in info ? 'documentdb' : 'mongodb';
}

/** Sets the page strategy for the store the process connected to (connectMongo). */
export function useStore(store: StoreKind): void {
  current = STRATEGIES[store];
}
