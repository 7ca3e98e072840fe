import type { Collection, Db, Filter, FindCursor } from 'mongodb';
import { insertIgnoringDuplicates, retryTransient } from '../../../platform/database/bulk';
import { EncryptedFields } from '../../../platform/database/encrypted-fields';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../../../platform/database/indexes';
import type { EncryptedValue, FieldCipher } from '../../../platform/field-encryption';
import type { SendFence } from '../../store';
import { newBatch, type BatchedEvent, type PipelineBatchDoc, type PipelineBatchLogDoc } from './batches';

/**
 * Pipelines' batches (lib/events/destinations/pipeline/batches.ts): the queue (`pipeline_batches`, bodies encrypted)
 * and the delivery record (`pipeline_batch_log`). The fan-out inserts queued batches; from then on the pipeline's
 * dispatcher owns every write to both (architecture rule 3). Retention: log documents expire with the webhook history
 * (`finished_at`). Erasure deletes a user's events from both.
 */
export const PIPELINE_BATCH_INDEXES: Record<string, IndexSpec[]> = {
  pipeline_batches: [{ key: { destination_id: 1, next_attempt_at: 1 } }, { key: { destination_id: 1, _id: 1 } }, { key: { next_attempt_at: 1 } }],
  pipeline_batch_log: [
    // An event is logged once per pipeline; also an event's batches (its deliveries).
    { key: { 'events.id': 1, destination_id: 1 }, unique: true },
    { key: { team_id: 1, destination_id: 1, _id: -1 } },
    { key: { team_id: 1, destination_id: 1, last_event_id: -1 } },
    { key: { team_id: 1, 'events.user_id': 1 } },
    { key: { finished_at: 1 }, expireAfter: 'webhookHistory' },
  ],
};

export const PIPELINE_BATCH_QUERY_SHAPES: Record<string, QueryShape[]> = {
  pipeline_batches: [
    { name: 'due batches of a pipeline (dispatcher)', filter: ['destination_id', 'next_attempt_at'], sort: ['next_attempt_at'] },
    { name: 'queued batches of a pipeline in event order (ordered pipelines, delivery log)', filter: ['destination_id', '_id'], sort: ['_id'] },
    { name: 'a pipeline queue holding an event or a user (delivery log, erasure)', filter: ['destination_id'], residual: ['events.id', 'events.user_id'] },
    { name: 'overdue batches and the soonest due (sweeper, worker metrics)', filter: ['next_attempt_at'], sort: ['next_attempt_at'] },
    { name: 'queued events, counted up to a cap (worker metrics)', filter: ['next_attempt_at'] },
  ],
  pipeline_batch_log: [
    { name: 'logged events of a pipeline (dispatcher: delivered already?)', filter: ['events.id', 'destination_id'] },
    { name: "an event's logged batches (delivery log)", filter: ['events.id'], residual: ['team_id'] },
    { name: "a pipeline's logged batches (delivery log)", filter: ['team_id', 'destination_id', '_id'], sort: ['_id'], residual: ['created_at window'] },
    {
      name: "a pipeline's logged batches reaching past an id (delivery log)",
      filter: ['team_id', 'destination_id', 'last_event_id'],
      residual: ['_id'],
    },
    { name: 'erase a user', filter: ['team_id', 'events.user_id'], residual: ['destination_id'] },
  ],
};

/** A batch as stored: each event's body encrypted (it carries patient data, as the event's own does). */
type StoredBatchDoc = Omit<PipelineBatchDoc, 'events'> & { events: (Omit<BatchedEvent, 'body'> & { body: string | EncryptedValue })[] };

/** Queued batches fetched per round trip while a batch is gathered (a flush's batch holds tens to hundreds of events). */
const READ_BATCH = 20;

/** Every queued batch (each has a due time), read through the `next_attempt_at` index. */
const EVERY_QUEUED = { next_attempt_at: { $ne: null } } as unknown as Filter<StoredBatchDoc>;

/** Queued batches read at most per delivery-log page (the queue holds what the dispatcher has not sent yet). */
const QUEUE_READ_LIMIT = 1000;

export class PipelineBatchStore {
  readonly queue: Collection<StoredBatchDoc>;
  readonly log: Collection<PipelineBatchLogDoc>;
  private readonly sealedBody: EncryptedFields<{ _id: string; body: string }, 'body'>;

  constructor(db: Db, cipher: FieldCipher) {
    this.queue = db.collection('pipeline_batches');
    this.log = db.collection('pipeline_batch_log');
    this.sealedBody = new EncryptedFields(cipher, 'pipeline_batches', ['body']);
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.queue, PIPELINE_BATCH_INDEXES.pipeline_batches, retention);
    await createIndexes(this.log, PIPELINE_BATCH_INDEXES.pipeline_batch_log, retention);
  }

  private seal(doc: PipelineBatchDoc): StoredBatchDoc {
    return { ...doc, events: doc.events.map((e) => ({ ...e, body: this.sealedBody.seal(e.id, { body: e.body }).body })) };
  }

  private open(doc: StoredBatchDoc): PipelineBatchDoc {
    return { ...doc, events: doc.events.map((e) => ({ ...e, body: this.sealedBody.open({ _id: e.id, body: e.body }).body })) };
  }

  // ---------------------------------------------------------------- the queue (fan-out, dispatcher)

  /**
   * Queues batches. One refused because a batch of its first event is queued already (the same fan-out again) is
   * queued again without that batch's events. Events queued twice otherwise (a fan-out repeated with other
   * neighbours) are sent once: the dispatcher leaves out what it has delivered (`recheck`).
   */
  async insertBatches(docs: PipelineBatchDoc[]): Promise<void> {
    let next = docs;
    while (next.length) {
      const refused = await retryTransient(() =>
        insertIgnoringDuplicates(
          this.queue,
          next.map((d) => this.seal(d)),
        ),
      );
      const again: PipelineBatchDoc[] = [];
      for (const doc of next.filter((d) => refused.has(d._id))) {
        // The batch holding its first event; gone meanwhile (sent), this one is queued again whole. Either way the
        // dispatcher leaves out what it delivered already (`recheck`).
        const queued = await this.queue.findOne({ _id: doc._id }, { projection: { 'events.id': 1 } });
        const there = new Set((queued?.events ?? []).map((e) => e.id));
        const rest = doc.events.filter((e) => !there.has(e.id));
        if (rest.length) again.push({ ...newBatch(doc.team_id, doc.destination_id, rest, doc.policy, doc.created_at), recheck: true });
      }
      next = again;
    }
  }

  /** A pipeline's batches due at `at`, soonest first, until they hold `limit` events (takeUpTo): not those `inFlight`, nor behind a `fence`. */
  async dueBatches(destinationId: string, at: Date, limit: number, inFlight: ReadonlySet<string>, fence: SendFence | null): Promise<PipelineBatchDoc[]> {
    const filter: Filter<StoredBatchDoc> = { destination_id: destinationId, next_attempt_at: { $lte: at, ...(fence ? { $gt: fence.after } : {}) } };
    if (inFlight.size) filter._id = { $nin: [...inFlight] };
    const read = await this.readUpTo(this.queue.find(filter).sort({ next_attempt_at: 1 }), limit);
    return takeUpTo(read, limit).map((d) => this.open(d));
  }

  /**
   * A pipeline's queued batches in event order (an ordered pipeline's), until they hold `limit` events; not those `inFlight`,
   * none from the first behind a `fence` on. `overlaps`: an event of theirs comes after the first event of the
   * batch next in line (batches of two processes' flushes interleave): sending them would overtake it.
   */
  async pendingInOrder(
    destinationId: string,
    limit: number,
    inFlight: ReadonlySet<string>,
    fence: SendFence | null,
  ): Promise<{ batches: PipelineBatchDoc[]; overlaps: boolean }> {
    const filter: Filter<StoredBatchDoc> = { destination_id: destinationId };
    if (inFlight.size) filter._id = { $nin: [...inFlight] };
    const read = await this.readUpTo(this.queue.find(filter).sort({ _id: 1 }), limit, 1);
    const fenced = fence ? read.findIndex((b) => b.next_attempt_at <= fence.after) : -1;
    const batches = takeUpTo(fenced < 0 ? read : read.slice(0, fenced), limit);
    const next = read[batches.length];
    const last = batches.reduce((max, b) => (b.events[b.events.length - 1].id > max ? b.events[b.events.length - 1].id : max), '');
    return { batches: batches.map((d) => this.open(d)), overlaps: next !== undefined && last > next.events[0].id };
  }

  /**
   * Queued batches in `cursor`'s order until they hold `limit` events, and `beyond` more: a backlog's batch reads what
   * it sends (reading `limit` documents of a backlog read many times that many events, bodies included).
   */
  private async readUpTo(cursor: FindCursor<StoredBatchDoc>, limit: number, beyond = 0): Promise<StoredBatchDoc[]> {
    const read: StoredBatchDoc[] = [];
    let events = 0;
    let after = 0;
    for await (const doc of cursor.batchSize(READ_BATCH)) {
      read.push(doc);
      if (events >= limit && ++after >= beyond) break;
      events += doc.events.length;
      if (events >= limit && beyond === 0) break;
    }
    await cursor.close();
    return read;
  }

  /** Whether a batch of the pipeline is due at `at` (past a `fence`). */
  async anyDue(destinationId: string, at: Date, fence: SendFence | null): Promise<boolean> {
    const filter = { destination_id: destinationId, next_attempt_at: { $lte: at, ...(fence ? { $gt: fence.after } : {}) } };
    return (
      (
        await this.queue
          .find(filter, { projection: { _id: 1 } })
          .limit(1)
          .toArray()
      ).length > 0
    );
  }

  /** When a pipeline's soonest queued batch is due (past a `fence`: the soonest after it), or null. */
  async nextDueAt(destinationId: string, fence: SendFence | null = null): Promise<Date | null> {
    const doc = await this.queue
      .find({ destination_id: destinationId, ...(fence ? { next_attempt_at: { $gt: fence.after } } : {}) }, { projection: { next_attempt_at: 1 } })
      .sort({ next_attempt_at: 1 })
      .limit(1)
      .next();
    return doc?.next_attempt_at ?? null;
  }

  /** The events of queued batches, counted up to `cap` (the worker's metrics: a scrape never walks a huge backlog). */
  async queuedEventCount(cap = 100_000): Promise<number> {
    let n = 0;
    for await (const b of this.queue.find(EVERY_QUEUED, { projection: { 'events.id': 1 } }).limit(cap)) if ((n += b.events.length) >= cap) break;
    return Math.min(n, cap);
  }

  /** When the soonest queued batch of any pipeline is due (the worker's metrics), or null. */
  async soonestDueAt(): Promise<Date | null> {
    const doc = await this.queue
      .find(EVERY_QUEUED, { projection: { next_attempt_at: 1 } })
      .sort({ next_attempt_at: 1 })
      .limit(1)
      .next();
    return doc?.next_attempt_at ?? null;
  }

  /** Pipelines with batches due before `before` (the sweeper wakes their dispatchers). */
  async destinationsWithOverdue(before: Date, limit: number): Promise<string[]> {
    const docs = await this.queue
      .find({ next_attempt_at: { $lt: before } }, { projection: { destination_id: 1 } })
      .limit(limit)
      .toArray();
    return [...new Set(docs.map((d) => d.destination_id))];
  }

  /** Of `eventIds`, those a logged batch of the pipeline delivered or handed on already. */
  async logged(destinationId: string, eventIds: string[]): Promise<Set<string>> {
    if (!eventIds.length) return new Set();
    const wanted = new Set(eventIds);
    const docs = await this.log
      .find({ 'events.id': { $in: eventIds }, destination_id: destinationId }, { projection: { 'events.id': 1, skipped: 1 } })
      .toArray();
    return new Set(docs.flatMap((d) => d.events.map((e) => e.id).filter((id) => wanted.has(id) && !d.skipped?.includes(id))));
  }

  /**
   * Sent (or handed-on) batches: their log documents first (none for a batch whose every event was delivered by
   * another already), then the queued ones go. A repeat writes nothing twice.
   */
  async finish(batchIds: string[], logs: (PipelineBatchLogDoc | null)[]): Promise<void> {
    const written = logs.filter((l): l is PipelineBatchLogDoc => l !== null);
    if (written.length) await retryTransient(() => insertIgnoringDuplicates(this.log, written));
    if (batchIds.length) await retryTransient(() => this.queue.deleteMany({ _id: { $in: batchIds } }));
  }

  // ---------------------------------------------------------------- the delivery log

  /** An event's logged batches, of the team's pipelines. */
  loggedOfEvent(teamId: string, eventId: string): Promise<PipelineBatchLogDoc[]> {
    return this.log.find({ 'events.id': eventId, team_id: teamId }).toArray();
  }

  /** A pipeline's queued batches, event ids and users only (the delivery log's pending ones), oldest first. */
  async queuedOf(destinationId: string): Promise<PipelineBatchDoc[]> {
    const docs = await this.queue
      .find({ destination_id: destinationId }, { projection: { 'events.body': 0 } })
      .sort({ _id: 1 })
      .limit(QUEUE_READ_LIMIT)
      .toArray();
    return docs as unknown as PipelineBatchDoc[];
  }

  /**
   * A pipeline's logged batches with an event before `before` (all when null), newest first, until `want` events
   * are collected; then every other batch reaching into that range (batches of two processes interleave).
   */
  async loggedBefore(teamId: string, destinationId: string, before: string | null, want: number): Promise<PipelineBatchLogDoc[]> {
    const filter: Filter<PipelineBatchLogDoc> = { team_id: teamId, destination_id: destinationId, ...(before ? { _id: { $lt: before } } : {}) };
    const found: PipelineBatchLogDoc[] = [];
    let events = 0;
    for await (const doc of this.log.find(filter).sort({ _id: -1 }).batchSize(50)) {
      found.push(doc);
      events += doc.events.length;
      if (events >= want) break;
    }
    if (!found.length) return found;
    const lowest = found[found.length - 1]._id;
    const reaching = await this.log
      .find({ team_id: teamId, destination_id: destinationId, last_event_id: { $gte: lowest.slice(0, lowest.indexOf(':')) }, _id: { $lt: lowest } })
      .toArray();
    return [...found, ...reaching];
  }

  // ---------------------------------------------------------------- erasure

  /**
   * A user's events out of a pipeline's queued and logged batches (without `destinationId`: out of every logged batch
   * of the team, pipelines deleted since included): a batch of only theirs goes, the others lose theirs. (A logged
   * batch is never left empty: the unique index on the events' ids would hold every empty one under one missing key.)
   */
  async eraseUser(teamId: string, userId: string, destinationId?: string): Promise<number> {
    type UserBatches = Collection<{ _id: string; team_id: string; destination_id: string; events: { user_id: string | null }[] }>;
    const filter = { team_id: teamId, 'events.user_id': userId, ...(destinationId ? { destination_id: destinationId } : {}) };
    let n = 0;
    for (const coll of (destinationId ? [this.queue, this.log] : [this.log]) as unknown as UserBatches[]) {
      n += (await coll.deleteMany({ ...filter, events: { $not: { $elemMatch: { user_id: { $ne: userId } } } } })).deletedCount;
      n += (await coll.updateMany(filter, { $pull: { events: { user_id: userId } } })).modifiedCount;
    }
    return n;
  }
}

/**
 * The first batches of `read` until they hold `limit` events (the last may take them past it, by one flush's batch at
 * most: a backlog's batches of a few hundred events each would otherwise go one at a time).
 */
function takeUpTo<B extends { events: unknown[] }>(read: B[], limit: number): B[] {
  let events = 0;
  let n = 0;
  while (n < read.length && events < limit) events += read[n++].events.length;
  return read.slice(0, n);
}
