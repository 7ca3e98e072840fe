import type { AnyBulkWriteOperation, Collection, Db, Filter, UpdateFilter } from 'mongodb';
import { Coalescer } from '../platform/coalescer';
import type { FieldCipher } from '../platform/field-encryption';
import { insertIgnoringDuplicates, retryTransient } from '../platform/database/bulk';
import { isDuplicateKeyError } from '../platform/database/store-errors';
import { EncryptedFields, type Sealed } from '../platform/database/encrypted-fields';
import { createIndexes, dropIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';
import { keysetFilter } from '../platform/database/pages';
import { type EventDoc, type OutboxDoc, type DeliveryDoc, type AttemptDoc, deliveryId } from './model';

/**
 * The webhook event log and delivery state: the only code that touches these collections.
 *
 * - `webhook_events`: one document per event; `body` is the exact signed envelope (the one string field), stored
 *   encrypted (it carries patient data, e.g. a lab order's patient details): only the store sees it stored.
 * - `webhook_outbox`: one document per span of one process's publishing whose fan-out is not yet confirmed (the sweeper's work).
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

/**
 * One destination's dispatcher (lib/events/dispatcher.ts). `active_until`: a hint for publishers (a running activity
 * will look at the queue again, no wake needed). `run`: the delivery run that holds the destination (the latest to
 * start; an older one still alive stops at its next batch). `sending`: per run, the batch it may be sending until
 * `until`: deliveries due at its `picked_at` (next_attempt_at <= picked_at) that a later run must not send meanwhile.
 */
interface DispatcherStateDoc {
  _id: string;
  active_until: Date;
  run?: string;
  sending?: Record<string, SendWindow>;
}

/** A batch a run may be sending: picked from the deliveries due at `picked_at`, sent by `until`. */
export interface SendWindow {
  picked_at: Date;
  until: Date;
}

/** What a run must not send while an earlier run's batch may still be in flight: deliveries due at `after`, until `until`. */
export interface SendFence {
  after: Date;
  until: Date;
}

/** The filter of the indexes (and queries) that hold pending deliveries only. */
const PENDING = { status: 'pending' };

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
  webhook_outbox: [{ key: { events_until: 1 } }],
  // Each delivery is written twice (queued, outcome): the dispatcher's indexes hold pending ones
  // only and the TTL index finished ones only, so each write skips the indexes its document is not in.
  webhook_deliveries: [
    { key: { destination_id: 1, status: 1, next_attempt_at: 1 }, partial: PENDING },
    { key: { status: 1, next_attempt_at: 1 }, partial: PENDING },
    { key: { team_id: 1, destination_id: 1, status: 1, _id: -1 } },
    { key: { team_id: 1, destination_id: 1, _id: -1 } },
    { key: { team_id: 1, user_id: 1 } },
    { key: { finished_at: 1 }, expireAfter: 'webhookHistory', partial: { finished_at: { $type: 'date' } } },
  ],
  webhook_attempts: [
    // Also an event's attempts to one endpoint (a few per event: the endpoint is a residual filter).
    { key: { team_id: 1, event_id: 1, _id: -1 } },
    { key: { team_id: 1, destination_id: 1, _id: -1 } },
    { key: { team_id: 1, user_id: 1 } },
    { key: { timestamp: 1 }, expireAfter: 'webhookHistory' },
  ],
  // An hour after a dispatcher went idle (or its run died) its document expires, with any send window a dead run left
  // in it (windows last minutes at most): one document per destination ever made otherwise.
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
    { name: 'events created in a publish span (sweeper)', filter: ['created_at'] },
  ],
  webhook_outbox: [{ name: 'stale publish spans (sweeper)', filter: ['events_until'], sort: ['events_until'] }],
  webhook_deliveries: [
    { name: 'due deliveries of an endpoint (dispatcher)', filter: ['destination_id', 'status', 'next_attempt_at'], sort: ['next_attempt_at'], equals: PENDING },
    { name: 'pending deliveries of an endpoint (drain)', filter: ['destination_id', 'status'], equals: PENDING },
    { name: 'overdue deliveries (sweeper)', filter: ['status', 'next_attempt_at'], equals: PENDING },
    {
      name: 'the soonest due of all pending deliveries, and their count (worker metrics)',
      filter: ['status', 'next_attempt_at'],
      sort: ['next_attempt_at'],
      equals: PENDING,
    },
    {
      name: 'pending deliveries in publish order (ordered destinations)',
      filter: ['team_id', 'destination_id', 'status', '_id'],
      sort: ['_id'],
      residual: ['user_id $nin'],
    },
    {
      name: 'deliveries by status (delivery log, recover)',
      filter: ['team_id', 'destination_id', 'status', '_id'],
      sort: ['_id'],
      residual: ['created_at window', 'event_type', 'user_id'],
    },
    { name: 'failed deliveries (recover count)', filter: ['team_id', 'destination_id', 'status'], residual: ['created_at window'] },
    {
      name: 'deliveries (delivery log)',
      filter: ['team_id', 'destination_id', '_id'],
      sort: ['_id'],
      residual: ['created_at window', 'event_type', 'user_id'],
    },
    { name: "an event's deliveries (delivery log: ids start with the event's)", filter: ['_id'], sort: ['_id'], residual: ['team_id'] },
    { name: 'erase a user', filter: ['team_id', 'user_id'], residual: ['destination_id'] },
  ],
  webhook_attempts: [
    { name: 'attempts of an event', filter: ['team_id', 'event_id', '_id'], sort: ['_id'] },
    { name: 'attempts to an endpoint', filter: ['team_id', 'destination_id', '_id'], sort: ['_id'] },
    { name: 'attempts of an event to an endpoint', filter: ['team_id', 'event_id', '_id'], sort: ['_id'], residual: ['destination_id'] },
    { name: 'erase a user', filter: ['team_id', 'user_id'], residual: ['destination_id'] },
  ],
  webhook_dispatchers: [{ name: 'active marks of endpoints ($in, upsert by id)', filter: ['_id'] }],
};

/** One change to a group of deliveries that share it (a batch's successes, one retry group...). */
export interface DeliveryChange {
  ids: string[];
  /** Fixed values only (no $inc): applying a change twice is the same as once. */
  set: Partial<DeliveryDoc>;
  /**
   * A sending run's outcome: applied only to deliveries still pending with the attempt count that run read, so a
   * run that was superseded while sending writes nothing over an outcome recorded after it.
   */
  attempts?: number;
}

/** dueInUserOrder's page, pages per batch, and how many held-back users the query leaves out (more are skipped as read). */
const [ORDERED_SCAN_PAGE, ORDERED_SCAN_PAGES, MAX_EXCLUDED_USERS] = [1000, 5, 1000];
/** `created_at` in [since, until). */
export const createdWithin = (q: { since?: Date; until?: Date }) => ({ ...(q.since ? { $gte: q.since } : {}), ...(q.until ? { $lt: q.until } : {}) });

/** The dispatcher's due query (WebhookStore.dueDeliveries), sorted by `next_attempt_at`. */
export function dueFilter(destinationId: string, at: Date, inFlight: ReadonlyMap<string, boolean>, fence: SendFence | null): Filter<DeliveryDoc> {
  const filter: Filter<DeliveryDoc> = {
    destination_id: destinationId,
    status: 'pending',
    next_attempt_at: { $lte: at, ...(fence ? { $gt: fence.after } : {}) },
  };
  if (inFlight.size) filter._id = { $nin: [...inFlight.keys()] };
  return filter;
}

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
    // Served by { team_id, event_id, _id } since attempts' writes stopped paying for it.
    await dropIndexes(this.attempts, [{ team_id: 1, destination_id: 1, event_id: 1, _id: -1 }]);
    await createIndexes(this.dispatchers, WEBHOOK_STORE_INDEXES.webhook_dispatchers, retention);
  }

  // ---------------------------------------------------------------- events and outbox (publisher)

  /** Inserts new events; returns the ids of those whose key the team had already published (idempotent repeats). */
  insertEvents(docs: EventDoc[]): Promise<Set<string>> {
    return insertIgnoringDuplicates(
      this.events,
      docs.map((doc) => this.sealedBody.seal(doc._id, doc)),
    );
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
    const unique = [...new Set(ids)];
    // One reply (batchSize): the default first batch of 101 would add a getMore round trip per dispatcher batch.
    return (await this.events.find({ _id: { $in: unique } }, { batchSize: unique.length }).toArray()).map((doc) => this.openEvent(doc));
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

  /** Publish spans that ended before `before` and are still there: their publisher died or failed. */
  staleOutbox(before: Date, limit: number) {
    return this.outbox
      .find({ events_until: { $lt: before } })
      .sort({ events_until: 1 })
      .limit(limit)
      .toArray();
  }

  /** Events created in [from, until) (an unfinished publish span's, with any other process's of that time). */
  async eventsCreatedWithin(from: Date, until: Date): Promise<EventDoc[]> {
    return (await this.events.find({ created_at: { $gte: from, $lt: until } }).toArray()).map((doc) => this.openEvent(doc));
  }

  // ---------------------------------------------------------------- deliveries

  /** Fan-out: queues deliveries by their deterministic ids; a delivery that exists already is left as it is. */
  async insertDeliveries(docs: DeliveryDoc[]): Promise<void> {
    await retryTransient(() => insertIgnoringDuplicates(this.deliveries, docs));
  }

  /**
   * The endpoint's pending deliveries due at `at`, soonest first: not those `inFlight` (the previous batch, its
   * recording not yet landed), nor, while a `fence` stands, those an earlier run may be sending.
   */
  dueDeliveries(
    destinationId: string,
    at: Date,
    limit: number,
    inFlight: ReadonlyMap<string, boolean> = new Map(),
    fence: SendFence | null = null,
  ): Promise<DeliveryDoc[]> {
    return this.deliveries
      .find(dueFilter(destinationId, at, inFlight, fence), { batchSize: limit })
      .sort({ next_attempt_at: 1 })
      .limit(limit)
      .toArray();
  }

  /**
   * Due deliveries of a destination that keeps each user's order: per user, the pending deliveries from the oldest
   * (`_id` order: the events' time order) while they are due; a user whose oldest pending one is not due (retry
   * wait, in the previous batch and not delivered, or behind a `fence`) is held back whole, and left out of the next
   * `_id` page. Events without a user are not ordered; in-flight ones the destination took (`inFlight` true: their
   * recording has not landed) are passed over. At most ORDERED_SCAN_PAGES pages.
   */
  async dueInUserOrder(
    teamId: string,
    destinationId: string,
    at: Date,
    limit: number,
    inFlight: ReadonlyMap<string, boolean> = new Map(),
    fence: SendFence | null = null,
  ): Promise<DeliveryDoc[]> {
    const heldBack = new Set<string>();
    const picked: DeliveryDoc[] = [];
    const pageSize = Math.min(ORDERED_SCAN_PAGE, limit); // usually one page does: most users are not held back
    let after: string | undefined;
    for (let page = 0; page < ORDERED_SCAN_PAGES; page++) {
      const filter: Filter<DeliveryDoc> = { team_id: teamId, destination_id: destinationId, status: 'pending' };
      if (heldBack.size) filter.user_id = { $nin: [...heldBack].slice(0, MAX_EXCLUDED_USERS) };
      const docs = await this.deliveries
        .find(keysetFilter(filter, 1, after), { batchSize: pageSize })
        .sort({ _id: 1 })
        .limit(pageSize)
        .toArray();
      for (const d of docs) {
        if (inFlight.get(d._id) || (d.user_id !== null && heldBack.has(d.user_id))) continue;
        const due = d.next_attempt_at !== null && d.next_attempt_at <= at && !inFlight.has(d._id) && !(fence && d.next_attempt_at <= fence.after);
        if (due) {
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
   * When the soonest pending delivery of an endpoint (or of all: the worker's metrics) is due (null: nothing
   * pending); past a `fence`, the soonest after it.
   */
  async nextDueAt(destinationId?: string, fence: SendFence | null = null): Promise<Date | null> {
    const filter = {
      ...(destinationId ? { destination_id: destinationId } : {}),
      status: 'pending' as const,
      next_attempt_at: fence ? { $gt: fence.after } : { $ne: null },
    };
    const doc = await this.deliveries
      .find(filter, { projection: { next_attempt_at: 1 } })
      .sort({ next_attempt_at: 1 })
      .limit(1)
      .next();
    return doc?.next_attempt_at ?? null;
  }
  /** Pending deliveries of every destination, counted up to `cap` (the worker's metrics: a scrape never walks a huge backlog). */
  pendingDeliveryCount = (cap = 100_000) => this.deliveries.countDocuments({ status: 'pending' }, { limit: cap });

  async pendingIds(destinationId: string, limit: number): Promise<string[]> {
    const docs = await this.deliveries
      .find({ destination_id: destinationId, status: 'pending' }, { projection: { _id: 1 } })
      .limit(limit)
      .toArray();
    return docs.map((d) => d._id);
  }

  /** Writes of the owning dispatcher (grouped across endpoints per worker). */
  async changeDeliveries(changes: DeliveryChange[]): Promise<void> {
    await this.changeWriter.add(changes.filter((c) => c.ids.length));
  }

  private async applyChanges(changes: DeliveryChange[]): Promise<void> {
    const ops: AnyBulkWriteOperation<DeliveryDoc>[] = changes.map((c) => {
      const update: UpdateFilter<DeliveryDoc> = { $set: c.set };
      const unchanged = c.attempts !== undefined ? { status: 'pending' as const, attempts: c.attempts } : {};
      return c.ids.length === 1
        ? { updateOne: { filter: { _id: c.ids[0], ...unchanged }, update } }
        : { updateMany: { filter: { _id: { $in: c.ids }, ...unchanged }, update } };
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

  /** Of these delivery ids, those that exist. */
  async existingDeliveries(ids: string[]): Promise<Set<string>> {
    if (!ids.length) return new Set();
    const docs = await this.deliveries.find({ _id: { $in: ids } }, { projection: { _id: 1 }, batchSize: ids.length }).toArray();
    return new Set(docs.map((d) => d._id));
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

  // ---------------------------------------------------------------- dispatcher runs (wake skipping, send windows)

  /** The endpoint's dispatcher is delivering until `until` (a lease: a dead worker's mark lapses). */
  async markDispatcherActive(destinationId: string, until: Date): Promise<void> {
    await this.dispatchers.updateOne({ _id: destinationId }, { $set: { active_until: until } }, { upsert: true });
  }

  /**
   * A delivery run starts: it holds the endpoint from now on (an older run still alive fails its next
   * `openSendWindow` and stops) and is marked delivering until `activeUntil`. Returns the send windows of other
   * runs still open at `now` (a run Temporal gave up on may still be sending those batches).
   */
  async startRun(destinationId: string, run: string, activeUntil: Date, now = new Date()): Promise<SendWindow[]> {
    const doc = await this.dispatchers.findOneAndUpdate(
      { _id: destinationId },
      { $set: { run, active_until: activeUntil } },
      { upsert: true, returnDocument: 'after' },
    );
    const windows = Object.entries(doc?.sending ?? {}).filter(([other]) => other !== run);
    const lapsed = windows.filter(([, w]) => w.until <= now).map(([other]) => other);
    // Windows of runs that died are dropped once they lapse (a run that ends removes its own).
    if (lapsed.length)
      await this.dispatchers.updateOne({ _id: destinationId }, { $unset: Object.fromEntries(lapsed.map((other) => [`sending.${other}`, ''])) });
    return windows.filter(([, w]) => w.until > now).map(([, w]) => w);
  }

  /**
   * Before sending a batch: records that `run` may be sending deliveries due at `window.picked_at` until
   * `window.until`, if it still holds the endpoint (false: a later run took over; send nothing).
   */
  async openSendWindow(destinationId: string, run: string, window: SendWindow): Promise<boolean> {
    const { matchedCount } = await this.dispatchers.updateOne({ _id: destinationId, run }, { $set: { [`sending.${run}`]: window } });
    return matchedCount === 1;
  }

  /**
   * A run that marked itself idle has found more to send: it is delivering again, if it still holds the endpoint
   * (false: a later run took over). The document may have expired meanwhile (idle): then it is written again.
   */
  async resumeRun(destinationId: string, run: string, activeUntil: Date): Promise<boolean> {
    try {
      await this.dispatchers.updateOne(
        { _id: destinationId, $or: [{ run }, { run: { $exists: false } }] },
        { $set: { run, active_until: activeUntil } },
        { upsert: true },
      );
      return true;
    } catch (err) {
      if (isDuplicateKeyError(err)) return false; // the document holds another run
      throw err;
    }
  }

  /** A run that ends has nothing in flight: its window goes (and its activity mark, when it ends idle). */
  async endRun(destinationId: string, run: string, { idle }: { idle: boolean }): Promise<void> {
    await this.dispatchers.updateOne({ _id: destinationId }, { $unset: { [`sending.${run}`]: '' }, ...(idle ? { $set: { active_until: new Date() } } : {}) });
  }

  /**
   * Not delivering from now on. The mark expires an hour later (TTL) with any send window a dead run left in it:
   * windows last far less (the attempt timeout times a batch's share of concurrent requests, plus 30 s).
   */
  async markDispatcherIdle(destinationId: string): Promise<void> {
    await this.markDispatcherActive(destinationId, new Date());
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
