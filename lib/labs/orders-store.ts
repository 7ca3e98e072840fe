import { labOrderTransitions } from '../platform/metrics';
import type { Collection, Db, Filter } from 'mongodb';
import type { FieldCipher } from '../platform/field-encryption';
import type { HighLevelStatus } from './statuses';
import type { OrderEventDoc, LabOrderDoc, LabResultsDoc } from './model';
import { isDuplicateKeyError } from '../platform/database/store-errors';
import { placerNumberOf } from './placer-number';
import { EncryptedFields, type Sealed } from '../platform/database/encrypted-fields';
import { isDenseList, keysetFilter, walksIdIndex } from '../platform/database/pages';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';
import { SecretsRepository } from '../platform/secrets-store';
import { listFilter, searchFilters, storedDay, type OrderListFilter } from './order-list-filter';
import { PatientNameIndexStore, type NameIndexFields } from './name-index-store';
import { DEFAULT_ORDER_COUNT_SETTINGS, ORDER_COUNT_INDEXES, OrderCountStore, type OrderCountSettings } from './order-counts-store';

/**
 * Lab orders and their results. The only code that touches these collections.
 *
 * Ownership: the api inserts an order once (a new `_id`; `(team_id, sample_id)` is unique, which settles
 * racing registrations of one kit); after that only the order's workflow (`lab-order:<id>`) writes it,
 * one activity at a time, so no write depends on a conditional update settling a race. The one other writer
 * is `reencrypt` (start-up encryption of plaintext orders, `npm run reencrypt`), which rewrites only the
 * encrypted fields, and a document only where the ciphertext it read is still there.
 *
 * Patient data is encrypted at rest field by field (`PATIENT_FIELDS`, `RESULT_FIELDS`; encrypted-fields.ts): sealed on write and opened on read here, so callers
 * see plaintext. No query filters on an encrypted field.
 */

/**
 * The order's patient data, encrypted at rest (each field on its own, bound to the order): the patient's
 * identity and contact details, their addresses, their consents and the free-text notes about them. The same
 * fields, with `health_insurance_id` (a reference to an insurance record), are what erasure removes.
 */
export const PATIENT_FIELDS = [
  'patient_details',
  'patient_address',
  'shipping_details',
  'consents',
  'notes',
  'clinical_notes',
  // The diagnoses and the answers about the patient the lab asked for (DG1, AoE OBX).
  'icd_codes',
  'aoe_answers',
] as const;
export type PatientField = (typeof PATIENT_FIELDS)[number];
/** An order as stored: patient fields sealed, `activate_by` a Date (a string in orders of earlier versions, until migrated). */
export type StoredLabOrder = Omit<Sealed<LabOrderDoc, PatientField>, 'activate_by'> & { activate_by: Date | string | null } & NameIndexFields;

/**
 * `activate_by` is a calendar date (`YYYY-MM-DD`) in the API and the code, and a `Date` (its UTC midnight) in the
 * database, so the activation filters compare dates. Converted here, both ways, and nowhere else.
 */
const calendarDay = (value: Date | string): string => (value instanceof Date ? value.toISOString().slice(0, 10) : value);
function withStoredDay<T extends { activate_by?: string | null }>(doc: T): Omit<T, 'activate_by'> & { activate_by?: Date | null } {
  if (doc.activate_by === undefined) return doc as Omit<T, 'activate_by'>;
  return { ...doc, activate_by: doc.activate_by === null ? null : storedDay(doc.activate_by) };
}
/** What erasure leaves of the patient data (every patient field, and the reference to an insurance record). */
const ERASED_PATIENT_DATA: Pick<LabOrderDoc, PatientField | 'health_insurance_id'> = {
  patient_details: null,
  patient_address: null,
  shipping_details: null,
  consents: [],
  notes: null,
  clinical_notes: null,
  icd_codes: [],
  aoe_answers: [],
  health_insurance_id: null,
};

/** The patient's measurements and what the lab reports about their specimen, encrypted at rest. */
export const RESULT_FIELDS = ['results', 'sample_information', 'lab_pdf'] as const;
type ResultField = (typeof RESULT_FIELDS)[number];
export type StoredLabResults = Sealed<LabResultsDoc, ResultField>;
/**
 * A results document a lab's correction replaced (`lab_results_versions`): the whole earlier version, kept as it was
 * (sealed like the current one), one per replaced version, `_id` = `<order id>:<its updated_at in ms>` so a retried
 * correction keeps it once. Lives as long as the order's results; erased with them.
 */
export interface LabResultsVersionDoc extends Omit<LabResultsDoc, '_id'> {
  _id: string;
  order_id: string;
  replaced_at: Date;
}
export type StoredLabResultsVersion = Sealed<LabResultsVersionDoc, ResultField>;

/** The replayed response of a lab order request holds the whole order, patient data included: encrypted. */

/** What a registration binds to an unregistered kit's order. */
export type RegistrationFields = Pick<LabOrderDoc, 'user_id' | 'patient_details' | 'patient_address' | 'physician' | 'consents' | 'health_insurance_id'>;

/** What an order transaction shows of each of its orders. */
export type TransactionMember = Pick<
  LabOrderDoc,
  | '_id'
  | 'method'
  | 'order_transaction_id'
  | 'origin'
  | 'parent_id'
  | 'status'
  | 'low_level_status'
  | 'low_level_status_created_at'
  | 'created_at'
  | 'updated_at'
>;
const TRANSACTION_MEMBER_FIELDS = Object.fromEntries(
  ['method', 'order_transaction_id', 'origin', 'parent_id', 'status', 'low_level_status', 'low_level_status_created_at', 'created_at', 'updated_at'].map(
    (f) => [f, 1],
  ),
);

/** What a page of a list reads of each order: what the order view shows, not its consents (never shown) or name index. */
export const LIST_PROJECTION = { consents: 0, patient_name_tokens: 0, patient_name_index_key: 0 } as const;
/** An order as a list page reads it (LIST_PROJECTION). */
export type ListedOrder = Omit<LabOrderDoc, 'consents'>;

const PLACER_NUMBER_STORED = { placer_number: { $type: 'string' as const } };

/**
 * Lists page in `_id` order: new orders get time-ordered ids (UUIDv7), and on DocumentDB an index serves a sort
 * only on `_id` with `_id` bounded in the filter (architecture rule 2), so `_id` comes last in each list index.
 */
const ORDER_INDEXES: IndexSpec[] = [
  { key: { team_id: 1, sample_id: 1 }, unique: true },
  { key: { team_id: 1, _id: -1 } },
  { key: { team_id: 1, user_id: 1, _id: -1 } },
  { key: { team_id: 1, low_level_status: 1, _id: -1 } },
  { key: { team_id: 1, interpretation: 1, _id: -1 } },
  { key: { team_id: 1, order_transaction_id: 1 } },
  // Multikey: one entry per name token (blind-index.ts); serves `patient_name` and the name branch of `search_input`.
  { key: { team_id: 1, patient_name_tokens: 1, _id: -1 } },
  // Sparse in effect: only kits between a registration's bind and its acceptance carry it (the sweeper's query).
  { key: { registration_pending_since: 1 } },
  // Our placer order number (placer-number.ts), unique. Partial: orders stored before it existed have none stored
  // (they read as placerNumberOf(_id) and were never sent to a lab under it).
  { key: { placer_number: 1 }, unique: true, partial: PLACER_NUMBER_STORED },
  // A lab's result names the order by its filler number (ORC-3/OBR-3, our lab_reference) when its placer number matches nothing.
  { key: { lab_reference: 1 } },
];

/** In the filter of every write of an order's data but its erasure: an erased order takes no data again. */
const NOT_ERASED = { patient_data_erased_at: { $exists: false } } as const;

/** Every query this repository makes, with the index that serves it (checked by test/indexes.test.ts). */
export const ORDER_QUERY_SHAPES: QueryShape[] = [
  { name: 'order by id', filter: ['_id'] },
  { name: 'order by sample id (registration conflict)', filter: ['team_id', 'sample_id'] },
  { name: 'order by placer number (a lab result)', filter: ['placer_number'], equals: PLACER_NUMBER_STORED },
  { name: 'list: all', filter: ['team_id', '_id'], sort: ['_id'], residual: ['created_at range', 'method (order_type)', 'activate_by', 'order ids'] },
  { name: 'list: by user', filter: ['team_id', 'user_id', '_id'], sort: ['_id'], residual: ['low_level_status', 'interpretation', 'activate_by'] },
  { name: 'list: by status', filter: ['team_id', 'low_level_status', '_id'], sort: ['_id'], residual: ['interpretation', 'activate_by'] },
  { name: 'list: by interpretation', filter: ['team_id', 'interpretation', '_id'], sort: ['_id'], residual: ['activate_by'] },
  { name: 'list: count of matches', filter: ['team_id'], residual: ['the other list filters'] },
  { name: "list: count of a team's orders past its checkpoint (order-counts-store.ts)", filter: ['team_id', '_id'] },
  {
    name: 'list: by patient name ($all of its tokens)',
    filter: ['team_id', 'patient_name_tokens', '_id'],
    sort: ['_id'],
    residual: ['the other list filters'],
  },
  // search_input: one query, an $or whose every branch is served by an index of its own (checked with explain).
  { name: 'search_input branch: order id', filter: ['team_id', '_id'] },
  { name: 'search_input branch: sample id', filter: ['team_id', 'sample_id'] },
  { name: 'search_input branch: user id', filter: ['team_id', 'user_id', '_id'], sort: ['_id'] },
  { name: 'search_input branch: patient name', filter: ['team_id', 'patient_name_tokens', '_id'], sort: ['_id'] },
  { name: 'registration of an unregistered kit (conditional write)', filter: ['_id'], residual: ['team_id', 'low_level_status', 'registration_id'] },
  { name: 'kits whose bound registration was not taken yet (sweeper)', filter: ['registration_pending_since'] },
  { name: 'list / transaction: by order transaction', filter: ['team_id', 'order_transaction_id'] },
  { name: 'erasure: orders of a user', filter: ['team_id', 'user_id'] },
  { name: 'reencrypt: every order, in _id pages', filter: ['_id'], sort: ['_id'] },
  { name: "a lab's result by its filler number, when the placer number matches nothing", filter: ['lab_reference'] },
  { name: 'name index pass: every order, in _id pages (then one conditional write each)', filter: ['_id'], sort: ['_id'] },
];
const RESULTS_INDEXES: IndexSpec[] = [];
export const RESULTS_QUERY_SHAPES: QueryShape[] = [
  { name: 'results by order id (also erasure, per order)', filter: ['_id'] },
  { name: 'reencrypt: all results, in _id pages', filter: ['_id'], sort: ['_id'] },
];
const RESULTS_VERSIONS_INDEXES: IndexSpec[] = [{ key: { order_id: 1, _id: 1 } }];
export const RESULTS_VERSIONS_QUERY_SHAPES: QueryShape[] = [
  { name: "an order's earlier results, oldest first (also erasure, per order)", filter: ['order_id'], sort: ['_id'] },
  { name: 'reencrypt: all versions, in _id pages', filter: ['_id'], sort: ['_id'] },
];
export const LAB_ORDER_INDEXES = {
  lab_orders: ORDER_INDEXES,
  lab_results: RESULTS_INDEXES,
  lab_results_versions: RESULTS_VERSIONS_INDEXES,
  lab_order_counts: ORDER_COUNT_INDEXES,
};

export class LabOrderRepository {
  readonly orders: Collection<StoredLabOrder>;
  readonly results: Collection<StoredLabResults>;
  readonly resultVersions: Collection<StoredLabResultsVersion>;
  private readonly versionData: EncryptedFields<LabResultsVersionDoc, ResultField>;
  private readonly patientData: EncryptedFields<LabOrderDoc, PatientField>;
  private readonly resultData: EncryptedFields<LabResultsDoc, ResultField>;
  /** The blind index of patients' names on the orders (name-index-store.ts). */
  readonly names: PatientNameIndexStore;
  /** Each team's order count, kept up to a recent checkpoint (order-counts-store.ts). */
  readonly counts: OrderCountStore;

  constructor(
    db: Db,
    /** Encrypts patient data at rest (DATA_ENCRYPTION_KEYS). */
    cipher: FieldCipher,
    countSettings: OrderCountSettings = DEFAULT_ORDER_COUNT_SETTINGS,
  ) {
    this.orders = db.collection('lab_orders');
    this.results = db.collection('lab_results');
    this.resultVersions = db.collection('lab_results_versions');
    this.versionData = new EncryptedFields(cipher, this.resultVersions.collectionName, RESULT_FIELDS);
    this.patientData = new EncryptedFields(cipher, this.orders.collectionName, PATIENT_FIELDS);
    this.resultData = new EncryptedFields(cipher, this.results.collectionName, RESULT_FIELDS);
    this.names = new PatientNameIndexStore(this.orders, this.patientData, new SecretsRepository(db, cipher));
    this.counts = new OrderCountStore(db, this.orders, countSettings);
  }

  async ensureIndexes(_retention?: Retention): Promise<void> {
    await createIndexes(this.orders, ORDER_INDEXES);
    await createIndexes(this.results, RESULTS_INDEXES);
    await createIndexes(this.resultVersions, RESULTS_VERSIONS_INDEXES);
    await createIndexes(this.counts.counts, ORDER_COUNT_INDEXES);
  }

  private opened(doc: StoredLabOrder): LabOrderDoc;
  private opened(doc: StoredLabOrder | null): LabOrderDoc | null;
  private opened(doc: StoredLabOrder | null): LabOrderDoc | null {
    if (!doc) return null;
    // A list page's orders come without their name index (LIST_PROJECTION): no copy to leave it out.
    const order =
      doc.patient_name_tokens === undefined && doc.patient_name_index_key === undefined
        ? doc
        : (({ patient_name_tokens: _tokens, patient_name_index_key: _key, ...rest }) => rest)(doc);
    // `open` returns a copy of its own: filled in place (a page of 50 orders copied three times cost ~5% of its CPU).
    const opened = this.patientData.open(order as Sealed<LabOrderDoc, PatientField>) as LabOrderDoc;
    opened.activate_by = doc.activate_by === null || doc.activate_by === undefined ? null : calendarDay(doc.activate_by);
    // Orders stored before lab accounts: the sandbox lab, their derived placer number, no diagnoses or answers.
    opened.lab_account_id ??= null;
    opened.placer_number ??= placerNumberOf(doc._id);
    opened.icd_codes ??= [];
    opened.aoe_answers ??= [];
    return opened;
  }

  /** Inserts a new order; `sample_taken` when the team already has an order with this sample id. */
  async insert(doc: LabOrderDoc): Promise<{ inserted: LabOrderDoc } | { sample_taken: LabOrderDoc | null } | { exists: LabOrderDoc }> {
    try {
      const nameIndex = await this.names.fieldsOf(doc.team_id, doc.patient_details);
      await this.orders.insertOne({ ...withStoredDay(this.patientData.seal(doc._id, doc)), ...nameIndex } as StoredLabOrder);
      await this.counts.noteStored(doc.team_id, doc._id);
      return { inserted: doc };
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      const same = await this.orders.findOne({ _id: doc._id });
      // A retry after a crash between the insert and its note gives the note again.
      if (same) {
        await this.counts.noteStored(same.team_id, same._id);
        return { exists: this.opened(same) };
      }
      return { sample_taken: this.opened(await this.orders.findOne({ team_id: doc.team_id, sample_id: doc.sample_id })) };
    }
  }

  /**
   * By `_id`, within the team (another team's order is not found).
   */
  async find(teamId: string, orderId: string): Promise<LabOrderDoc | null> {
    const doc = await this.orders.findOne({ _id: orderId, team_id: teamId });
    return doc ? this.opened(doc) : null;
  }

  /**
   * The order with this placer number (a lab's result names it in OBR-2), whatever its team. The filter repeats the
   * partial index's condition so every store picks that index.
   */
  async findByPlacerNumber(placerNumber: string): Promise<LabOrderDoc | null> {
    return this.opened(await this.orders.findOne({ placer_number: { $eq: placerNumber, ...PLACER_NUMBER_STORED.placer_number } }));
  }

  /** The team's order of a kit (its barcode). */
  async findBySample(teamId: string, sampleId: string): Promise<LabOrderDoc | null> {
    return this.opened(await this.orders.findOne({ team_id: teamId, sample_id: sampleId }));
  }

  /** Several orders by id in one read (the first steps of many orders' workflows at once); ids not stored are left out. */
  async findByIds(orderIds: string[]): Promise<LabOrderDoc[]> {
    return (await this.orders.find({ _id: { $in: orderIds } }).toArray()).map((d) => this.opened(d));
  }

  /** Orders whose lab reference (the lab's filler number) is `fillerNumber`: a few at most (labs' numbers may repeat across labs). */
  async findByFillerNumber(fillerNumber: string): Promise<LabOrderDoc[]> {
    const docs = await this.orders.find({ lab_reference: fillerNumber }).limit(10).toArray();
    return docs.map((d) => this.opened(d));
  }

  /**
   * Which of these placer numbers, order ids and filler numbers name an order at all (a batch of lab results is
   * matched with these three queries; only what they find is then read, one order at a time).
   */
  async referencesKnown(refs: { placerNumbers: string[]; ids: string[]; fillerNumbers: string[] }): Promise<typeof refs> {
    const values = async (filter: Filter<StoredLabOrder>, field: 'placer_number' | '_id' | 'lab_reference', wanted: string[]) =>
      wanted.length ? (await this.orders.find(filter, { projection: { [field]: 1 } }).toArray()).map((d) => String(d[field])) : [];
    const [placerNumbers, ids, fillerNumbers] = await Promise.all([
      values({ placer_number: { $in: refs.placerNumbers, ...PLACER_NUMBER_STORED.placer_number } }, 'placer_number', refs.placerNumbers),
      values({ _id: { $in: refs.ids } }, '_id', refs.ids),
      values({ lab_reference: { $in: refs.fillerNumbers } }, 'lab_reference', refs.fillerNumbers),
    ]);
    return { placerNumbers, ids, fillerNumbers };
  }

  /** For the order's own workflow and its activities (they carry only the id). */
  async findById(orderId: string): Promise<LabOrderDoc | null> {
    return this.opened(await this.orders.findOne({ _id: orderId }));
  }

  /**
   * One page of the team's orders in `_id` order (creation order for UUIDv7 ids), after the order `after` if
   * given, else skipping `skip` matches. `countTotal`: counts the matches for `total` (a team's unfiltered list from
   * its checkpoint, order-counts-store.ts); a cursor page passes the first page's count as `knownTotal` instead. How
   * dense the matches are picks the plan (pages.ts `isDenseList`, `walksIdIndex`).
   */
  async list(
    f: OrderListFilter,
    page: { after?: string; skip: number; size: number; countTotal: boolean; knownTotal?: number },
  ): Promise<{ orders: ListedOrder[]; more: boolean; total: number | null }> {
    if (f.search) return this.searchPage(f, page);
    const filter = listFilter(f);
    const pageOf = async (matches: number | null | undefined | Promise<number>) =>
      this.listQuery(f, page, await walksIdIndex(this.orders, await matches)).toArray();
    const team = OrderCountStore.teamAlone(filter);
    let total: number | null = null;
    let docs: StoredLabOrder[];
    if (!page.countTotal) {
      docs = await pageOf(page.knownTotal);
    } else if (team) {
      // The team's count is a checkpoint plus its recent orders. The page is read beside that count, planned by the
      // team's size as last seen here (else the checkpoint's count): order-counts-store.ts `teamCount`.
      const counting = this.counts.teamCount(team);
      [total, docs] = await Promise.all([counting.total, pageOf(counting.plannedSize)]);
    } else {
      // A full count: the page goes beside it, its plan judged by whether the matches are dense (isDenseList).
      [total, docs] = await Promise.all([
        this.orders.countDocuments(filter),
        isDenseList(this.orders, filter).then((walkId) => this.listQuery(f, page, walkId).toArray()),
      ]);
    }
    return { orders: docs.slice(0, page.size).map((d) => this.opened(d)), more: docs.length > page.size, total };
  }

  /** The page query of `list` (one more than the page, to know if another follows); tests `explain` it. */
  listQuery(f: OrderListFilter, page: { after?: string; skip: number; size: number }, walkId = false) {
    const query = this.orders
      .find(keysetFilter(listFilter(f), f.direction, page.after), { projection: LIST_PROJECTION })
      .sort({ _id: f.direction })
      .skip(page.skip)
      .limit(page.size + 1);
    return walkId ? query.hint({ _id: 1 }) : query;
  }

  /** A `search_input` page's queries, one per alternative (searchFilters), up to the page's end; tests `explain` them. */
  searchQueries(f: OrderListFilter, page: { skip: number; size: number }) {
    return searchFilters(f).map((filter) =>
      this.orders
        .find(filter, { projection: LIST_PROJECTION })
        .sort({ _id: f.direction })
        .limit(page.skip + page.size + 1),
    );
  }

  /** A `search_input` page: the alternatives' matches merged in `_id` order, paged by skip (they are few). */
  private async searchPage(f: OrderListFilter, page: { after?: string; skip: number; size: number; countTotal: boolean }) {
    if (page.after) throw new Error('a search_input list pages by skip, not after an id');
    const merged = new Map<string, StoredLabOrder>();
    for (const docs of await Promise.all(this.searchQueries(f, page).map((q) => q.toArray()))) for (const d of docs) merged.set(d._id, d);
    const sorted = [...merged.values()].sort((a, b) => (a._id < b._id ? -f.direction : a._id > b._id ? f.direction : 0));
    const docs = sorted.slice(page.skip, page.skip + page.size + 1);
    const ids = page.countTotal ? await Promise.all(searchFilters(f).map((filter) => this.orders.find(filter, { projection: { _id: 1 } }).toArray())) : null;
    const total = ids && new Set(ids.flat().map((d) => d._id)).size;
    return { orders: docs.slice(0, page.size).map((d) => this.opened(d)), more: docs.length > page.size, total };
  }

  /** The orders of one order transaction, oldest first. */
  transactionOrders(teamId: string, transactionId: string): Promise<TransactionMember[]> {
    return this.transactionsOrders(teamId, [transactionId]);
  }

  /** The orders of several order transactions (a page of orders shows each one's transaction), oldest first. */
  async transactionsOrders(teamId: string, transactionIds: string[]): Promise<TransactionMember[]> {
    const members = await this.orders
      .find<TransactionMember>({ team_id: teamId, order_transaction_id: { $in: transactionIds } }, { projection: TRANSACTION_MEMBER_FIELDS })
      .toArray();
    // A transaction holds an order and at most one redraw: sorted here, not by the store.
    return members.sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || (a._id < b._id ? -1 : 1));
  }

  // --- Writes by the order's workflow (one activity at a time per order) ---

  /**
   * One update of an order, its patient fields sealed. The order's workflow is its owner; the re-encryption pass
   * writes only where the ciphertext it read is still there (EncryptedFields.rewriteStale), so neither loses the
   * other's change and a pass never undoes an erasure.
   */
  private async updateOrder(
    orderId: string,
    update: { $set: Partial<LabOrderDoc>; $push?: { events: OrderEventDoc } },
    precondition: Filter<StoredLabOrder> = NOT_ERASED,
  ): Promise<boolean> {
    // Erasure removes the name, and its blind index with it (no other write here changes patient_details).
    const nameIndex = update.$set.patient_details === null ? { patient_name_tokens: [] } : {};
    const { matchedCount } = await this.orders.updateOne({ _id: orderId, ...precondition } as Filter<StoredLabOrder>, {
      ...update,
      $set: { ...withStoredDay(this.patientData.seal(orderId, update.$set)), ...nameIndex },
    });
    return matchedCount === 1;
  }

  /**
   * Binds a registration (`POST /v3/order/testkit/register`) to an unregistered kit's order: its patient, sealed, with
   * the name's blind index. One conditional write: only while the order awaits registration and no other
   * registration has claimed it (`registration_id`: the same id is a retry of this one). The api writes this while
   * the order's workflow runs: the workflow writes only status, events and the lab's fields, and accepts the
   * registration (an Update) after this write, so the two never write the same field. False: not bound.
   */
  async bindRegistration(order: LabOrderDoc, registrationId: string, patient: RegistrationFields): Promise<boolean> {
    const set = { ...this.patientData.seal(order._id, patient), ...(await this.names.fieldsOf(order.team_id, patient.patient_details)) };
    const { matchedCount } = await this.orders.updateOne(
      { _id: order._id, team_id: order.team_id, low_level_status: 'awaiting_registration', registration_id: { $in: [null, registrationId] }, ...NOT_ERASED },
      { $set: { ...set, registration_id: registrationId, registration_pending_since: new Date(), updated_at: new Date() } },
    );
    return matchedCount === 1;
  }

  /** Kits whose registration was bound before `cutoff` and not yet taken by their workflow (the sweeper finishes them). */
  registrationsPendingBefore(cutoff: Date, limit: number): Promise<LabOrderDoc[]> {
    return this.orders
      .find({ registration_pending_since: { $lt: cutoff } })
      .limit(limit)
      .toArray()
      .then((docs) => docs.map((d) => this.opened(d)));
  }

  /** The order's workflow took (or refused) the bound registration: nothing is left for the sweeper. */
  async registrationSettled(orderId: string, registrationId: string): Promise<void> {
    await this.orders.updateOne({ _id: orderId, registration_id: registrationId }, { $unset: { registration_pending_since: '' } });
  }

  /** Undoes `bindRegistration` when the order's workflow refused the registration (e.g. cancelled meanwhile). */
  async releaseRegistration(order: LabOrderDoc, registrationId: string): Promise<void> {
    const unbound: RegistrationFields = {
      user_id: order.user_id,
      patient_details: null,
      patient_address: null,
      physician: null,
      consents: [],
      health_insurance_id: null,
    };
    await this.orders.updateOne(
      { _id: order._id, registration_id: registrationId },
      { $set: { ...unbound, patient_name_tokens: [], registration_id: null }, $unset: { registration_pending_since: '' } },
    );
  }

  /**
   * Appends an event and moves the status (one update: event, status and the changes that come with it), only if the
   * event is not there yet (a retried activity overlapping a slow first attempt appends once) and the order's
   * patient data is not erased. Null: the order is erased (nothing written, nothing more to say about it).
   */
  async appendEvent(
    current: LabOrderDoc,
    event: OrderEventDoc,
    high: HighLevelStatus,
    low: string,
    changes: Partial<LabOrderDoc> = {},
  ): Promise<LabOrderDoc | null> {
    const set = { ...changes, status: high, low_level_status: low, low_level_status_created_at: event.created_at, updated_at: event.created_at };
    const written = await this.updateOrder(current._id, { $push: { events: event }, $set: set }, { ...NOT_ERASED, 'events.id': { $ne: event.id } });
    if (!written) {
      const now = await this.findById(current._id);
      return now && !now.patient_data_erased_at ? now : null;
    }
    if (current.status !== high) labOrderTransitions.inc({ status: high });
    // The order's workflow is the only writer of anything but ciphertext: it knows the result without reading it back.
    return { ...current, ...set, events: [...current.events, event] };
  }

  /** For the order's single writer (its workflow, or the api once the workflow has ended). */
  async setFields(orderId: string, changes: Partial<LabOrderDoc>): Promise<void> {
    await this.updateOrder(orderId, { $set: { ...changes, updated_at: new Date() } });
  }

  /**
   * Stores an order's results unless its patient data is erased; false when erased (nothing kept). Results live in
   * their own document, so no write can carry the order's state in its filter: the results are written, then the
   * order is read, and removed again if it is erased. Erasure marks the order before it deletes the results, so
   * whichever comes second sees the other: results written after erasure are deleted by this check, those
   * written before it by the erasure.
   */
  async saveResults(doc: LabResultsDoc): Promise<boolean> {
    if (doc.status === 'corrected') await this.keepEarlierVersion(doc);
    await this.results.replaceOne({ _id: doc._id }, this.resultData.seal(doc._id, doc), { upsert: true });
    const order = await this.orders.findOne({ _id: doc._id }, { projection: { patient_data_erased_at: 1 } });
    if (!order?.patient_data_erased_at) return true;
    await this.results.deleteOne({ _id: doc._id });
    await this.resultVersions.deleteMany({ order_id: doc._id });
    return false;
  }

  /**
   * A correction replaces the results: the version it replaces is kept first (`lab_results_versions`), so a crash
   * between the two leaves the earlier version kept twice at most once (its `_id` is fixed by its updated_at). A
   * retry of the same correction finds its own results in place (same report) and keeps nothing.
   */
  private async keepEarlierVersion(doc: LabResultsDoc): Promise<void> {
    const stored = await this.results.findOne({ _id: doc._id });
    if (!stored) return;
    const earlier = this.resultData.open(stored) as LabResultsDoc;
    if (earlier.status === 'corrected' && earlier.report_id && earlier.report_id === doc.report_id) return;
    const { _id: orderId, ...rest } = earlier;
    const id = `${orderId}:${earlier.updated_at.getTime()}`;
    try {
      await this.resultVersions.insertOne(this.versionData.seal(id, { ...rest, _id: id, order_id: orderId, replaced_at: new Date() }));
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
    }
  }

  /** The results an order had before its corrections, oldest first. */
  async earlierResults(teamId: string, orderId: string): Promise<LabResultsVersionDoc[]> {
    const docs = await this.resultVersions.find({ order_id: orderId }).sort({ _id: 1 }).toArray();
    return docs.filter((d) => d.team_id === teamId).map((d) => this.versionData.open(d) as LabResultsVersionDoc);
  }

  async findResults(teamId: string, orderId: string): Promise<LabResultsDoc | null> {
    const doc = await this.results.findOne({ _id: orderId });
    return doc && doc.team_id === teamId ? (this.resultData.open(doc) as LabResultsDoc) : null;
  }

  // --- Erasure (user deletion) ---

  /** The user's orders (ids and statuses), for erasure. */
  ordersOfUser(teamId: string, userId: string): Promise<Pick<LabOrderDoc, '_id' | 'low_level_status'>[]> {
    return this.orders.find({ team_id: teamId, user_id: userId }, { projection: { _id: 1, low_level_status: 1 } }).toArray();
  }

  /**
   * Removes the patient's identity from one order and deletes its results.
   * Kept: what the order record needs as the audit trail of a clinical service (ids, test ordered, sample id,
   * physician, status history, dates); see README "Lab testing → Erasure". Only for an order whose workflow
   * has ended, or by that workflow itself (single owner).
   */
  async erasePatientData(orderId: string): Promise<void> {
    const now = new Date();
    await this.updateOrder(orderId, { $set: { ...ERASED_PATIENT_DATA, patient_data_erased_at: now, updated_at: now } }, {});
    await this.results.deleteOne({ _id: orderId });
    await this.resultVersions.deleteMany({ order_id: orderId });
  }

  /**
   * Encrypts patient data stored in plaintext (earlier versions) and re-encrypts what is under a data key that
   * is no longer current (after DATA_ENCRYPTION_KEYS gained a new first key), so retired keys can be dropped.
   * Each document is rewritten only where its ciphertext is still the one read (rewriteStale). Idempotent;
   * returns how many documents changed. Run by `npm run reencrypt` and a start-up migration.
   */
  async reencrypt(): Promise<number> {
    return (
      // It reads and writes only the sealed fields: the stored type of `activate_by` does not concern it.
      (await this.patientData.rewriteStale(this.orders as unknown as Collection<Sealed<LabOrderDoc, PatientField>>)) +
      (await this.names.rebuild()) +
      (await this.resultData.rewriteStale(this.results)) +
      (await this.versionData.rewriteStale(this.resultVersions))
    );
  }
}
