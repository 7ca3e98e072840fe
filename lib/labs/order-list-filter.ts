import type { Filter } from 'mongodb';
import type { CollectionMethod } from './statuses';
import type { Interpretation } from './model';
import type { StoredLabOrder } from './orders-store';

/** The filter of `GET /v3/orders` (LabOrderRepository.list), built here from the request's terms. */

/** `activate_by` as stored: the day's UTC midnight (orders-store.ts converts both ways). */
export const storedDay = (day: string): Date => new Date(`${day}T00:00:00.000Z`);

export interface OrderListFilter {
  teamId: string;
  userId?: string;
  lowLevelStatuses?: string[];
  interpretation?: Interpretation | 'unknown';
  activation?: 'current' | 'scheduled';
  /** YYYY-MM-DD of today (UTC), for the activation filter. */
  today: string;
  createdFrom?: Date;
  createdTo?: Date;
  orderIds?: string[];
  orderTransactionId?: string;
  methods?: CollectionMethod[];
  /** `patient_name`: orders whose patient's name has every one of these tokens (`searchTokens`). */
  patientNameTokens?: string[];
  /**
   * `search_input`: an order id, sample id or user id (exact), or the patient's name (`nameTokens`: every token).
   * Its pages go by skip (LabOrderRepository.list, one query per alternative: searchFilters).
   */
  search?: { text: string; nameTokens: string[] };
  direction: 1 | -1;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * `search_input`'s alternatives, each one an index serves on its own (team_id is in the enclosing filter): an id
 * branch only for a UUID, the name branch only when the text has a name token.
 */
function searchBranches(search: NonNullable<OrderListFilter['search']>): Filter<StoredLabOrder>[] {
  const text = search.text.trim();
  const ids = UUID.test(text) ? [{ _id: text.toLowerCase() }, { user_id: text.toLowerCase() }] : [];
  const names = search.nameTokens.length ? [{ patient_name_tokens: { $all: search.nameTokens } }] : [];
  return [...ids, { sample_id: text }, ...names];
}

/**
 * `search_input` as one filter per alternative (the list's other terms in each), each one an index serves on its own.
 * They are queried separately and merged (LabOrderRepository.list): DocumentDB's planner reads an `$or` of them by
 * walking every order of the team through another team index, however many orders the team has.
 */
export function searchFilters(f: OrderListFilter): Filter<StoredLabOrder>[] {
  const base = listFilter({ ...f, search: undefined });
  return searchBranches(f.search!).map((branch) =>
    Object.keys(branch).some((key) => key in base) ? { $and: [base, branch] } : ({ ...base, ...branch } as Filter<StoredLabOrder>),
  );
}

export function listFilter(f: OrderListFilter): Filter<StoredLabOrder> {
  const filter: Filter<StoredLabOrder> = { team_id: f.teamId };
  // Alternatives (activation `current`, `search_input`) are each an $or; with both, an $and of them.
  const alternatives: Filter<StoredLabOrder>[][] = [];
  if (f.userId) filter.user_id = f.userId;
  if (f.lowLevelStatuses?.length) filter.low_level_status = { $in: f.lowLevelStatuses };
  if (f.interpretation) filter.interpretation = f.interpretation === 'unknown' ? null : f.interpretation;
  // Reference: current = activate_by null or reached, scheduled = activate_by in the future.
  if (f.activation === 'scheduled') filter.activate_by = { $gt: storedDay(f.today) };
  if (f.activation === 'current') alternatives.push([{ activate_by: null }, { activate_by: { $lte: storedDay(f.today) } }]);
  if (f.search) alternatives.push(searchBranches(f.search));
  if (alternatives.length === 1) filter.$or = alternatives[0];
  if (alternatives.length > 1) filter.$and = alternatives.map(($or) => ({ $or }));
  if (f.patientNameTokens) filter.patient_name_tokens = { $all: f.patientNameTokens };
  if (f.orderIds?.length) filter._id = { $in: f.orderIds };
  if (f.orderTransactionId) filter.order_transaction_id = f.orderTransactionId;
  if (f.methods?.length) filter.method = { $in: f.methods };
  if (f.createdFrom || f.createdTo) {
    filter.created_at = { ...(f.createdFrom ? { $gte: f.createdFrom } : {}), ...(f.createdTo ? { $lte: f.createdTo } : {}) };
  }
  return filter;
}
