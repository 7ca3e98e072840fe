import type { AnyBulkWriteOperation, Collection, Db, Filter, UpdateFilter } from 'mongodb';
import { Coalescer } from '../platform/coalescer';
import type { FieldCipher } from '../platform/field-encryption';
import { insertIgnoringDuplicates, retryTransient } from '../platform/database/bulk';
import { EncryptedFields, type Sealed } from '../platform/database/encrypted-fields';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';
import { keysetFilter } from '../platform/database/pages';
import { type EventDoc, type OutboxDoc, type DeliveryDoc, type AttemptDoc, deliveryId } from './model';

/**
 * The webhook event log and delivery state: the only code that touches these collections.
 *
 * - `webhook_events`: one document per event; `body` is the exact signed envelope (the one string field), stored
 *   encrypted (it carries patient data, e.g. a lab order's patient details): only the store sees it stored.
 * - `webhook_outbox`: one document per publish flush whose fan-out is not yet confirmed (the sweeper's work).
 * - `webhook_deliveries`: one document per (event, endpoint), `_id` `<eventId>:<destinationId>`, with its status,
 *   next attempt time and attempt counts as plain fields. The endpoint's dispatcher workflow owns every
 *   write to its deliveries once they exist (single owner, architecture rule 3); fan-out only inserts them.
 * - `webhook_attempts`: one document per attempt, `_id` derived from delivery and attempt number (a retried
 *   recording writes nothing twice).
 * - `webhook_dispatchers`: per endpoint, until when its dispatcher activity is delivering (a hint that lets
 *   publishers skip the wake signal; written only by that dispatcher).
 *
 * Retention: TTL indexes (events `created_at`, finished deliveries `finished_at`, attempts `timestamp`),
 * WEBHOOK_RETENTION_DAYS. Erasure: per destination through its dispatcher, then team-wide (lib/events/dispatcher-commands.ts).
 */

/** An event as stored: `body` encrypted (plaintext in events written before it was). */
export type StoredEventDoc = Sealed<EventDoc, 'body'>;

interface DispatcherStateDoc {
  _id: string;
  active_until: Date;
}

/**
 * Lists of the delivery log page on `_id` (pages.ts): events have time-ordered ids, deliveries' ids start with
 * their event's, attempts' are ordered by their event's time; so `_id` ends each list index.
 */
export const WEBHOOK_STORE_INDEXES: Record<string, IndexSpec[]> = {
  webhook_events: [
    // One event per producer key and team: a retried or racing publish inserts nothing twice.
    { key: { team_id: 1, idempotency_key: 1 }, unique: true },
    { key: { team_id: 1, _id: -1 } },
    { key: { team_id: 1, user_id: 1, _id: -1 } },
    { key: { created_at: 1 }, expireAfter: 'webhookHistory' },
  ],
  webhook_outbox: [{ key: { created_at: 1 } }],
  webhook_deliveries: [
    { key: { destination_id: 1, status: 1, next_attempt_at: 1 } },
    { key: { status: 1, next_attempt_at: 1 } },
    { key: { team_id: 1, destination_id: 1, status: 1, _id: -1 } },
    { key: { team_id: 1, destination_id: 1, _id: -1 } },
    { key: { team_id: 1, user_id: 1 } },
    { key: { finished_at: 1 }, expireAfter: 'webhookHistory' },
  ],
  webhook_attempts: [
    { key: { team_id: 1, event_id: 1, _id: -1 } },
    { key: { team_id: 1, destination_id: 1, _id: -1 } },
    { key: { team_id: 1, destination_id: 1, event_id: 1, _id: -1 } },
    { key: { team_id: 1, user_id: 1 } },
    { key: { timestamp: 1 }, expireAfter: 'webhookHistory' },
  ],
  // Idle marks (the epoch) and those of destinations long gone expire: one document per destination ever made otherwise.
  webhook_dispatchers: [{ key: { active_until: 1 }, expireAfter: 'dispatcherMarks' }],
};

/** Every query this store issues, by collection (test/indexes.test.ts checks each is index-served). */
export const WEBHOOK_STORE_QUERY_SHAPES: Record<string, QueryShape[]> = {
  webhook_events: [
    { name: 'list events (delivery log)', filter: ['team_id', '_id'], sort: ['_id'], residual: ['event_type', 'created_at window'] },
    { name: "list a user's events (delivery log)", filter: ['team_id', 'user_id', '_id'], sort: ['_id'], residual: ['event_type', 'created_at window'] },
    { name: 'events by producer key (a repeated publish)', filter: ['team_id', 'idempotency_key'] },
    { name: 'erase a user', filter: ['team_id', 'user_id'] },
    { name: 'reencrypt: every event, in _id pages', filter: ['_id'], sort: ['_id'] },
  ],
  webhook_outbox: [{ name: 'stale publishes (sweeper)', filter: ['created_at'], sort: ['created_at'] }],
  webhook_deliveries: [
    { name: 'due deliveries of an endpoint (dispatcher)', filter: ['destination_id', 'status', 'next_attempt_at'], sort: ['next_attempt_at'] },
    { name: 'pending deliveries of an endpoint (drain)', filter: ['destination_id', 'status'] },
    { name: 'overdue deliveries (sweeper)', filter: ['status', 'next_attempt_at'] },
    { name: 'the soonest due of all pending deliveries, and their count (worker metrics)', filter: ['status', 'next_attempt_at'], sort: ['next_attempt_at'] },
    { name: 'pending deliveries in publish order (ordered destinations)', filter: ['team_id', 'destination_id', 'status', '_id'], sort: ['_id'], residual: ['user_id $nin'] },
    { name: 'deliveries by status (delivery log, recover)', filter: ['team_id', 'destination_id', 'status', '_id'], sort: ['_id'], residual: ['created_at window', 'event_type', 'user_id'] },
    { name: 'failed deliveries (recover count)', filter: ['team_id', 'destination_id', 'status'], residual: ['created_at window'] },
    { name: 'deliveries (delivery log)', filter: ['team_id', 'destination_id', '_id'], sort: ['_id'], residual: ['created_at window', 'event_type', 'user_id'] },
    { name: "an event's deliveries (delivery log: ids start with the event's)", filter: ['_id'], sort: ['_id'], residual: ['team_id'] },
    { name: 'erase a user', filter: ['team_id', 'user_id'], residual: ['destination_id'] },
  ],
  webhook_attempts: [
    { name: 'attempts of an event', filter: ['team_id', 'event_id', '_id'], sort: ['_id'] },
    { name: 'attempts to an endpoint', filter: ['team_id', 'destination_id', '_id'], sort: ['_id'] },
    { name: 'attempts of an event to an endpoint', filter: ['team_id', 'destination_id', 'event_id', '_id'], sort: ['_id'] },
    { name: 'erase a user', filter: ['team_id', 'user_id'], residual: ['destination_id'] },
  ],
  webhook_dispatchers: [{ name: 'active marks of endpoints ($in, upsert by id)', filter: ['_id'] }],
};

/** One change to a group of deliveries that share it (a batch's successes, one retry group...). */
export interface DeliveryChange {
  ids: string[];
  /** Fixed values only (no $inc): applying a change twice is the same as once. */
  set: Partial<DeliveryDoc>;
  /** A sending run's outcome: applied only to the deliveries this claim still holds. Every change ends any claim. */
  claim?: string;
}

/** dueInUserOrder's page, pages per batch, and how many held-back users the query leaves out (more are skipped as read). */
const [ORDERED_SCAN_PAGE, ORDERED_SCAN_PAGES, MAX_EXCLUDED_USERS] = [1000, 5, 1000];
/** `created_at` in [since, until). */
export const createdWithin = (q: { since?: Date; until?: Date }) => ({ ...(q.since ? { $gte: q.since } : {}), ...(q.until ? { $lt: q.until } : {}) });

/** An endpoint's failed deliveries created in [since, until) (recover). */
function failedWithin(teamId: string, destinationId: string, q: { since?: Date; until?: Date }): Filter<DeliveryDoc> {
  const filter: Filter<DeliveryDoc> = { team_id: teamId, destination_id: destinationId, status: 'failed' };
  if (q.since || q.until) filter.created_at = createdWithin(q);
  return filter;
}

export class WebhookStore {
  readonly events: Collection<StoredEventDoc>;
  private readonly sealedBody: EncryptedFields<EventDoc, 'body'>;
  readonly outbox: Collection<OutboxDoc>;
  readonly deliveries: Collection<DeliveryDoc>;
  readonly attempts: Collection<AttemptDoc>;
  readonly dispatchers: Collection<DispatcherStateDoc>;
  /**
   * Group commit of the dispatchers' writes across the endpoints one worker delivers to: with many
   * endpoints, each batch's writes would otherwise queue separately for the database.
   */
  private readonly attemptWriter = new Coalescer<AttemptDoc>(async (docs) => void (await retryTransient(() => insertIgnoringDuplicates(this.attempts, docs))));
  private readonly changeWriter = new Coalescer<DeliveryChange>((changes) => this.applyChanges(changes));

  constructor(
    db: Db,
    /** Encrypts event bodies at rest (DATA_ENCRYPTION_KEYS). */
    cipher: FieldCipher,
  ) {
    this.events = db.collection('webhook_events');
    this.sealedBody = new EncryptedFields<EventDoc, 'body'>(cipher, 'webhook_events', ['body']);
    this.outbox = db.collection('webhook_outbox');
    this.deliveries = db.collection('webhook_deliveries');
    this.attempts = db.collection('webhook_attempts');
    this.dispatchers = db.collection('webhook_dispatchers');
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.events, WEBHOOK_STORE_INDEXES.webhook_events, retention);
    await createIndexes(this.outbox, WEBHOOK_STORE_INDEXES.webhook_outbox);
    await createIndexes(this.deliveries, WEBHOOK_STORE_INDEXES.webhook_deliveries, retention);
    await createIndexes(this.attempts, WEBHOOK_STORE_INDEXES.webhook_attempts, retention);
    await createIndexes(this.dispatchers, WEBHOOK_STORE_INDEXES.webhook_dispatchers, retention);
  }

  // ---------------------------------------------------------------- events and outbox (publisher)

  /** Inserts new events; returns the ids of those whose key the team had already published (idempotent repeats). */
  insertEvents(docs: EventDoc[]): Promise<Set<string>> {
    return insertIgnoringDuplicates(this.events, docs.map((doc) => this.sealedBody.seal(doc._id, doc)));
  }

  /** The stored events of one team with these producer keys. */
  async findEventsByKeys(teamId: string, keys: string[]): Promise<EventDoc[]> {
    if (!keys.length) return [];
    return (await this.events.find({ team_id: teamId, idempotency_key: { $in: keys } }).toArray()).map((doc) => this.openEvent(doc));
  }

  /** A stored event with its body decrypted (the shape the rest of the code uses). */
  openEvent(doc: StoredEventDoc): EventDoc {
    return this.sealedBody.open(doc) as EventDoc;
  }

  /** An event by id (of `teamId`, when given). */
  async getEvent(id: string, teamId?: string): Promise<EventDoc | null> {
    const doc = await this.events.findOne({ _id: id, ...(teamId ? { team_id: teamId } : {}) });
    return doc && this.openEvent(doc);
  }

  /** Events by id (order not kept); ids of erased events are simply absent. */
  async getEvents(ids: string[]): Promise<EventDoc[]> {
    if (!ids.length) return [];
    return (await this.events.find({ _id: { $in: [...new Set(ids)] } }).toArray()).map((doc) => this.openEvent(doc));
  }

  /**
   * Encrypts bodies stored in plaintext (events of earlier versions) and re-encrypts those under a retired data
   * key (`npm run reencrypt`). Events are never updated, so the pass races only deletion, which it leaves be.
   */
  reencrypt(): Promise<number> {
    return this.sealedBody.rewriteStale(this.events);
  }

  async insertOutbox(doc: OutboxDoc): Promise<void> {
    await retryTransient(() => insertIgnoringDuplicates(this.outbox, [doc]));
  }

  async deleteOutbox(id: string): Promise<void> {
    await this.outbox.deleteOne({ _id: id });
  }

  staleOutbox(before: Date, limit: number) {
    return this.outbox.find({ created_at: { $lt: before } }).sort({ created_at: 1 }).limit(limit).toArray();
  }

  // ---------------------------------------------------------------- deliveries

  /** Fan-out: queues deliveries by their deterministic ids; a delivery that exists already is left as it is. */
  async insertDeliveries(docs: DeliveryDoc[]): Promise<void> {
    await retryTransient(() => insertIgnoringDuplicates(this.deliveries, docs));
  }

  /** The endpoint's pending deliveries due at `at`, soonest first. */
  dueDeliveries(destinationId: string, at: Date, limit: number): Promise<DeliveryDoc[]> {
    return this.deliveries
      .find({ destination_id: destinationId, status: 'pending', next_attempt_at: { $lte: at } })
      .sort({ next_attempt_at: 1 })
      .limit(limit)
      .toArray();
  }

  /**
   * Due deliveries of a destination that keeps each user's order: per user, the pending deliveries from the oldest
   * (`_id` order: the events' time order) while they are due; a user whose oldest pending one is not due (retry
   * wait, or claimed by a run sending it) is held back whole, and left out of the next `_id` page. Events without a
   * user are not ordered; `delivered` ones (recording in flight) are passed over. At most ORDERED_SCAN_PAGES pages.
   */
  async dueInUserOrder(teamId: string, destinationId: string, at: Date, limit: number, delivered: ReadonlySet<string> = new Set()): Promise<DeliveryDoc[]> {
    const heldBack = new Set<string>();
    const picked: DeliveryDoc[] = [];
    const pageSize = Math.min(ORDERED_SCAN_PAGE, limit); // usually one page does: most users are not held back
    let after: string | undefined;
    for (let page = 0; page < ORDERED_SCAN_PAGES; page++) {
      const filter: Filter<DeliveryDoc> = { team_id: teamId, destination_id: destinationId, status: 'pending' };
      if (heldBack.size) filter.user_id = { $nin: [...heldBack].slice(0, MAX_EXCLUDED_USERS) };
      const docs = await this.deliveries.find(keysetFilter(filter, 1, after)).sort({ _id: 1 }).limit(pageSize).toArray();
      for (const d of docs) {
        if (delivered.has(d._id) || (d.user_id !== null && heldBack.has(d.user_id))) continue;
        if (d.next_attempt_at !== null && d.next_attempt_at <= at) {
          picked.push(d);
          if (picked.length >= limit) return picked;
        } else if (d.user_id !== null) heldBack.add(d.user_id);
      }
      if (docs.length < pageSize) break;
      after = docs[docs.length - 1]._id;
    }
    return picked;
  }

  /**
   * Claims the given deliveries for one dispatcher run until `until`, in one conditional write: only those still
   * pending and due at `now` (so not claimed by another run) are taken. Returns the ids this claim holds.
   */
  async claimDeliveries(ids: string[], claim: string, now: Date, until: Date): Promise<Set<string>> {
    if (!ids.length) return new Set();
    const { modifiedCount } = await this.deliveries.updateMany(
      { _id: { $in: ids }, status: 'pending', next_attempt_at: { $lte: now } },
      { $set: { claim, next_attempt_at: until } },
    );
    if (modifiedCount === ids.length) return new Set(ids);
    const held = await this.deliveries.find({ _id: { $in: ids }, claim }, { projection: { _id: 1 } }).toArray();
    return new Set(held.map((d) => d._id));
  }

  /** When the soonest pending delivery of an endpoint (or of all: the worker's metrics) is due (null: nothing pending). */
  async nextDueAt(destinationId?: string): Promise<Date | null> {
    const filter = { ...(destinationId ? { destination_id: destinationId } : {}), status: 'pending' as const, next_attempt_at: { $ne: null } };
    const doc = await this.deliveries.find(filter, { projection: { next_attempt_at: 1 } }).sort({ next_attempt_at: 1 }).limit(1).next();
    return doc?.next_attempt_at ?? null;
  }
  /** Pending deliveries of every destination, counted up to `cap` (the worker's metrics: a scrape never walks a huge backlog). */
  pendingDeliveryCount = (cap = 100_000) => this.deliveries.countDocuments({ status: 'pending' }, { limit: cap });

  async pendingIds(destinationId: string, limit: number): Promise<string[]> {
    const docs = await this.deliveries.find({ destination_id: destinationId, status: 'pending' }, { projection: { _id: 1 } }).limit(limit).toArray();
    return docs.map((d) => d._id);
  }

  /** Writes of the owning dispatcher (grouped across endpoints per worker). */
  async changeDeliveries(changes: DeliveryChange[]): Promise<void> {
    await this.changeWriter.add(changes.filter((c) => c.ids.length));
  }

  private async applyChanges(changes: DeliveryChange[]): Promise<void> {
    const ops: AnyBulkWriteOperation<DeliveryDoc>[] = changes.map((c) => {
      const update: UpdateFilter<DeliveryDoc> = { $set: { ...c.set, claim: null } };
      const held = c.claim ? { claim: c.claim } : {};
      return c.ids.length === 1
        ? { updateOne: { filter: { _id: c.ids[0], ...held }, update } }
        : { updateMany: { filter: { _id: { $in: c.ids }, ...held }, update } };
    });
    if (ops.length) await retryTransient(() => this.deliveries.bulkWrite(ops, { ordered: false }));
  }

  /** Deliveries whose event is gone (erased): removed by their dispatcher rather than sent. */
  async deleteDeliveries(ids: string[]): Promise<void> {
    if (ids.length) await this.deliveries.deleteMany({ _id: { $in: ids } });
  }

  /** Endpoints with pending deliveries due before `before` (the sweeper wakes their dispatchers). */
  async endpointsWithOverdue(before: Date, limit: number): Promise<string[]> {
    const docs = await this.deliveries
      .find({ status: 'pending', next_attempt_at: { $lt: before } }, { projection: { destination_id: 1 } })
      .limit(limit)
      .toArray();
    return [...new Set(docs.map((d) => d.destination_id))];
  }

  findDelivery(teamId: string, eventId: string, destinationId: string): Promise<DeliveryDoc | null> {
    return this.deliveries.findOne({ _id: deliveryId(eventId, destinationId), team_id: teamId });
  }

  countFailed(teamId: string, destinationId: string, q: { since?: Date; until?: Date }): Promise<number> {
    return this.deliveries.countDocuments(failedWithin(teamId, destinationId, q));
  }

  /** Failed deliveries of an endpoint created in [since, until), oldest first (recover). */
  async failedDeliveryIds(teamId: string, destinationId: string, q: { since?: Date; until?: Date }, limit: number): Promise<string[]> {
    const docs = await this.deliveries
      .find(keysetFilter(failedWithin(teamId, destinationId, q), 1), { projection: { _id: 1 } })
      .sort({ _id: 1 })
      .limit(limit)
      .toArray();
    return docs.map((d) => d._id);
  }

  // ---------------------------------------------------------------- attempts

  async insertAttempts(docs: AttemptDoc[]): Promise<void> {
    await this.attemptWriter.add(docs);
  }

  // ---------------------------------------------------------------- dispatcher activity (wake skipping)

  /** The endpoint's dispatcher is delivering until `until` (a lease: a dead worker's mark lapses). */
  async markDispatcherActive(destinationId: string, until: Date): Promise<void> {
    await this.dispatchers.updateOne({ _id: destinationId }, { $set: { active_until: until } }, { upsert: true });
  }

  async markDispatcherIdle(destinationId: string): Promise<void> {
    await this.markDispatcherActive(destinationId, new Date(0));
  }

  /** Of `destinationIds`, those whose dispatcher is delivering now (and will look at its queue again). */
  async activeDispatchers(destinationIds: string[], now = new Date()): Promise<Set<string>> {
    if (!destinationIds.length) return new Set();
    const docs = await this.dispatchers.find({ _id: { $in: destinationIds } }).toArray();
    return new Set(docs.filter((d) => d.active_until > now).map((d) => d._id));
  }

  // ---------------------------------------------------------------- erasure and retention

  /** A user's deliveries and attempts to one endpoint (run by that endpoint's dispatcher, between batches). */
  async eraseUserAtEndpoint(teamId: string, userId: string, destinationId: string): Promise<number> {
    const d = await this.deliveries.deleteMany({ team_id: teamId, user_id: userId, destination_id: destinationId });
    const a = await this.attempts.deleteMany({ team_id: teamId, user_id: userId, destination_id: destinationId });
    return d.deletedCount + a.deletedCount;
  }

  async eraseUserEvents(teamId: string, userId: string): Promise<number> {
    return (await this.events.deleteMany({ team_id: teamId, user_id: userId })).deletedCount;
  }

  /** A user's events, deliveries and attempts, team-wide. Idempotent. */
  async eraseUser(teamId: string, userId: string): Promise<number> {
    let n = await this.eraseUserEvents(teamId, userId);
    n += (await this.deliveries.deleteMany({ team_id: teamId, user_id: userId })).deletedCount;
    n += (await this.attempts.deleteMany({ team_id: teamId, user_id: userId })).deletedCount;
    return n;
  }
}
