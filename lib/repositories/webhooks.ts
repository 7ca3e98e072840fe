import type { AnyBulkWriteOperation, Collection, Db, Filter } from 'mongodb';
import { Coalescer } from '../coalescer';
import { groupBy } from '../collections';
import { isDuplicateKeyError } from '../errors';
import type { DocumentLocks } from './locks';
import { runOnce } from './migrations';

/**
 * Webhook endpoints, the event log and delivery state. The only code that touches these collections.
 *
 * Layout (chosen so the hot path stays fast on FerretDB, which pushes down nothing but `{_id}` filters and
 * scans everything else): events, terminal delivery records and attempts are append-only; the hot, small
 * collections are `webhook_queue` (active deliveries only: a delivery leaves it when it succeeds, fails for
 * good or is cancelled) and `webhook_outbox` (events whose fan-out is not yet confirmed).
 */

export interface EndpointSecret {
  key: string;
  created_at: Date;
  /** null while current; set on rotation (the old key keeps signing until then). */
  expires_at: Date | null;
}

export type DisabledReason = 'manual' | 'gone' | 'failing';

export interface EndpointDoc {
  _id: string;
  team_id: string;
  url: string;
  description: string;
  filter_types: string[];
  disabled: boolean;
  disabled_reason: DisabledReason | null;
  rate_limit: number | null;
  headers: Record<string, string>;
  secrets: EndpointSecret[];
  /** Start of the current run of failures (null after a success). */
  failing_since: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface EventDoc {
  /** Random, or derived from the producer's idempotency key (so one key is one `_id`: the unique guard). */
  _id: string;
  team_id: string;
  event_type: string;
  user_id: string | null;
  client_user_id: string | null;
  /**
   * The envelope exactly as sent (`envelopeOf`), `data` included. Kept as one string rather than nested
   * fields: FerretDB's cost follows the number of values it converts (measured ~40% cheaper inserts), and
   * deliveries and resends send these bytes as they are. `eventData` reads `data` back for the API.
   */
  body: string;
  created_at: Date;
  /** Test events go to one endpoint only. */
  only_endpoint_id: string | null;
}

/** The envelope of the spec, exactly: the event id travels as the webhook-id header, not in the body. */
export function envelopeOf(e: Pick<EventDoc, 'event_type' | 'team_id' | 'user_id' | 'client_user_id'> & { data: Record<string, unknown> }): string {
  return JSON.stringify({ event_type: e.event_type, data: e.data, team_id: e.team_id, user_id: e.user_id, client_user_id: e.client_user_id });
}

/** The event's `data` (from its stored envelope). */
export function eventData(e: Pick<EventDoc, 'body'>): Record<string, unknown> {
  return (JSON.parse(e.body) as { data: Record<string, unknown> }).data;
}

/**
 * One unfinished publish: a batch of events whose fan-out is not yet confirmed. One document per publisher
 * flush (not per event), written before the events and removed after their deliveries are queued.
 */
export interface OutboxDoc {
  _id: string;
  event_ids: string[];
  created_at: Date;
}

/** Business timings of one delivery, snapshotted from the publisher's configuration. */
export interface DeliveryPolicy {
  schedule_ms: number[];
  timeout_ms: number;
  throttle_floor_ms: number;
  disable_after_ms: number;
}

export type Trigger = 'scheduled' | 'manual';

/** One delivery of one event to one endpoint, while it is active. */
export interface QueueItem {
  /** `<eventId>:<endpointId>` */
  id: string;
  team_id: string;
  event_id: string;
  event_type: string;
  user_id: string | null;
  /** The exact bytes sent (the envelope, serialized once). */
  body: string;
  /** Attempts made over the delivery's whole life (numbering of attempt records). */
  attempts: number;
  /** Attempts made in this pass (index into policy.schedule_ms). */
  pass_attempts: number;
  trigger: Trigger;
  policy: DeliveryPolicy;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
}

/**
 * A bundle of active deliveries to one endpoint, due together, with its own items: one per group of retries,
 * one per manual resend. Bundling keeps the hot queue a handful of documents even at thousands of events per
 * second, so claiming and completing a batch costs O(1) database operations.
 */
export interface QueueDoc extends Omit<QueueEntry, 'size' | 'items_id' | 'only'> {
  items: QueueItem[];
}

/**
 * One chunk of a publish fan-out: its items (the events' first deliveries) are stored once, and each
 * matching endpoint gets an entry naming the positions it receives. With several endpoints the bodies are
 * not copied per endpoint (FerretDB's cost follows the bytes it stores and scans).
 */
export interface FanOutBundle {
  _id: string;
  team_id: string;
  created_at: Date;
  /** Endpoint-neutral: `id` is set per endpoint when read. */
  items: QueueItem[];
  endpoints: { endpoint_id: string; positions: number[] }[];
}

/**
 * What the dispatcher scans: the bundle without its items. Stored apart from the items (which carry the
 * bodies) because FerretDB decodes every document of a collection it scans: keeping the scanned documents
 * tiny makes finding due work cost microseconds per bundle instead of decoding every queued body.
 */
export interface QueueEntry {
  _id: string;
  team_id: string;
  endpoint_id: string;
  next_attempt_at: Date;
  created_at: Date;
  size: number;
  /** The items document this entry reads (shared by the endpoints of a fan-out); its own `_id` when absent. */
  items_id?: string;
  /** Which of those items are this endpoint's: comma-separated positions; all of them when absent. */
  only?: string;
  /** How many endpoints' entries read that document (a fan-out's); 1 when absent. */
  shared_by?: number;
}

export const itemsIdOf = (entry: Pick<QueueEntry, '_id' | 'items_id'>) => entry.items_id ?? entry._id;

/**
 * The items of a bundle, stored as one JSON string: FerretDB's cost follows the number of BSON values it
 * converts, so 500 items as nested documents cost ~60 ms to write and ~140 ms to read back (measured),
 * against ~13 ms and ~25 ms as one string. Nothing queries inside the items; they are read whole, by `_id`.
 */
interface QueueItemsDoc {
  _id: string;
  /** `encodeItems(items)`: the items with their shared delivery policy hoisted out. */
  payload: string;
  created_at: Date;
}

type StoredItem = Omit<QueueItem, 'id' | 'policy' | 'created_at'> & { policy?: DeliveryPolicy; created_at: string };

/** Items without their delivery ids (derived from event and endpoint when read), a shared policy hoisted out. */
function encodeItems(items: QueueItem[]): string {
  const policy = items[0].policy;
  const shared = JSON.stringify(policy);
  const same = items.every((i) => i.policy === policy || JSON.stringify(i.policy) === shared);
  const stored = items.map(({ id: _id, policy: p, ...rest }) => (same ? rest : { ...rest, policy: p }));
  return JSON.stringify({ policy, items: stored });
}

function decodeItems(payload: string, endpointId: string): QueueItem[] {
  const { policy, items } = JSON.parse(payload) as { policy: DeliveryPolicy; items: StoredItem[] };
  return items.map((i) => ({ ...i, id: deliveryId(i.event_id, endpointId), policy: i.policy ?? policy, created_at: new Date(i.created_at) }));
}

export type DeliveryStatus = 'succeeded' | 'failed' | 'cancelled';

export interface DeliveryDoc {
  _id: string;
  team_id: string;
  event_id: string;
  endpoint_id: string;
  event_type: string;
  user_id: string | null;
  status: DeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  finished_at: Date;
}

export interface AttemptDoc {
  _id: string;
  team_id: string;
  event_id: string;
  endpoint_id: string;
  user_id: string | null;
  attempt: number;
  trigger: Trigger;
  timestamp: Date;
  duration_ms: number;
  status_code: number | null;
  error_class: string | null;
  response_body: string | null;
}

/**
 * How attempts are stored: one document per dispatcher batch (all attempts of one endpoint from one batch).
 * A document per attempt made the write step dominate delivery (FerretDB, measured: ~570 ms of ~740 ms per
 * batch of ~190); the "batched attempts". The attempts themselves are one JSON string (like queue
 * bundles: FerretDB's cost follows the number of values); `event_ids`, `user_ids` and `timestamp` stay
 * fields because queries filter on them. Reads flatten them back into AttemptDocs.
 */
interface AttemptBatchDoc {
  _id: string;
  team_id: string;
  endpoint_id: string;
  /** Newest attempt of the batch (pagination order). */
  timestamp: Date;
  event_ids: string[];
  user_ids: string[];
  /** `JSON.stringify(AttemptDoc[])` */
  payload: string;
}

const attemptsOf = (batch: AttemptBatchDoc): AttemptDoc[] =>
  (JSON.parse(batch.payload) as (Omit<AttemptDoc, 'timestamp'> & { timestamp: string })[]).map((a) => ({ ...a, timestamp: new Date(a.timestamp) }));

/**
 * The successful deliveries of one dispatcher batch, stored together: a document per success made recording
 * one of the largest costs of delivery on FerretDB. The records are one JSON string (like queue bundles);
 * the fields queries filter on stay fields. Failed and cancelled deliveries stay single documents.
 */
interface SucceededBatchDoc {
  _id: string;
  team_id: string;
  endpoint_id: string;
  /** Earliest `created_at` of its records (time-window queries). */
  created_from: Date;
  finished_at: Date;
  event_ids: string[];
  user_ids: string[];
  /** `JSON.stringify(DeliveryDoc[])` */
  payload: string;
}

const deliveriesOf = (batch: SucceededBatchDoc): DeliveryDoc[] =>
  (JSON.parse(batch.payload) as (Omit<DeliveryDoc, 'created_at' | 'finished_at'> & { created_at: string; finished_at: string })[]).map((d) => ({
    ...d,
    created_at: new Date(d.created_at),
    finished_at: new Date(d.finished_at),
  }));

/** Newest first by creation (then id), keeping only the latest-finished record of each delivery. */
function latestPerDelivery(records: DeliveryDoc[]): DeliveryDoc[] {
  const byId = new Map<string, DeliveryDoc>();
  for (const r of records) {
    const seen = byId.get(r._id);
    if (!seen || r.finished_at > seen.finished_at) byId.set(r._id, r);
  }
  return [...byId.values()].sort((a, b) => b.created_at.getTime() - a.created_at.getTime() || (a._id < b._id ? 1 : -1));
}

const SHARED_ITEMS_TTL_MS = 10_000;
const SHARED_ITEMS_MAX_BYTES = 32 * 1024 * 1024;

export const deliveryId = (eventId: string, endpointId: string) => `${eventId}:${endpointId}`;
const BATCH_SPAN_MS = 10 * 60_000;

/** `created_at` in [since, until). */
const createdWithin = (q: { since?: Date; until?: Date }) => ({ ...(q.since ? { $gte: q.since } : {}), ...(q.until ? { $lt: q.until } : {}) });

/**
 * Whether an endpoint's dispatcher is running a delivery activity right now (`active_until` in the future).
 * Publishers skip the wake signal while it is: the running activity looks at the queue again before it
 * stops (see deliverDueWebhooks), so a signal would only cost a Temporal round trip per publish flush.
 */
interface DispatcherStateDoc {
  _id: string;
  active_until: Date;
}

export interface Page<T> {
  items: T[];
  next: T | null;
}

export class WebhookRepository {
  readonly endpoints: Collection<EndpointDoc>;
  readonly events: Collection<EventDoc>;
  readonly outbox: Collection<OutboxDoc>;
  readonly queue: Collection<QueueEntry>;
  readonly queueItems: Collection<QueueItemsDoc>;
  readonly deliveries: Collection<DeliveryDoc>;
  readonly succeeded: Collection<SucceededBatchDoc>;
  readonly attempts: Collection<AttemptBatchDoc>;
  readonly dispatchers: Collection<DispatcherStateDoc>;

  /** Fan-out documents read by several endpoints' dispatchers (see `itemsDoc`). */
  private readonly sharedItems = new Map<string, { at: number; bytes: number; doc: Promise<QueueItemsDoc | null> }>();
  /**
   * The dispatcher's per-batch writes, group-committed across the endpoints one worker delivers to at once
   * (with 10 endpoints, one statement where there were ten, each waiting for SQLite's single writer).
   */
  private readonly attemptWriter = new Coalescer<AttemptBatchDoc>((docs) => this.attempts.insertMany(docs, { ordered: false }).then(() => undefined));
  private readonly succeededWriter = new Coalescer<SucceededBatchDoc>((docs) => this.insertIgnoringDuplicates(this.succeeded, docs).then(() => undefined));
  /**
   * Few ids: one `{_id}` delete each (FerretDB narrows those and decodes only the match); more: one `$in`
   * statement, a single pass decoding the small queue entries.
   */
  private readonly dequeueWriter = new Coalescer<string>(async (ids) => {
    if (ids.length <= 2) await Promise.all(ids.map((id) => this.queue.deleteOne({ _id: id })));
    else await this.queue.deleteMany({ _id: { $in: ids } });
  });

  /** Endpoint documents are changed by the api (patch, rotate) and the dispatcher (health, disable): every
   *  change runs under the endpoint's document lock, since FerretDB updates are not atomic (locks.ts). */
  constructor(
    private readonly db: Db,
    private readonly locks: DocumentLocks,
  ) {
    this.endpoints = db.collection('webhook_endpoints');
    this.events = db.collection('webhook_events');
    this.outbox = db.collection('webhook_outbox');
    this.queue = db.collection('webhook_queue');
    this.queueItems = db.collection('webhook_queue_items');
    this.deliveries = db.collection('webhook_deliveries');
    this.succeeded = db.collection('webhook_deliveries_succeeded');
    this.attempts = db.collection('webhook_attempts');
    this.dispatchers = db.collection('webhook_dispatchers');
  }

  async ensureIndexes(): Promise<void> {
    await this.endpoints.createIndex({ team_id: 1, created_at: 1 });
    // Idempotency keys map to event ids (`eventIdFor`), so `_id` is the unique guard; the separate unique
    // index of earlier versions only cost inserts.
    await this.events.dropIndex('team_id_1_idempotency_key_1').catch(() => undefined);
    await runOnce(this.db, 'webhook-storage-strings', () => this.migrateStorage());
    await this.events.createIndex({ team_id: 1, created_at: -1 });
    await this.outbox.createIndex({ created_at: 1 });
    await this.queue.createIndex({ endpoint_id: 1, next_attempt_at: 1 });
    await this.queue.createIndex({ next_attempt_at: 1 });
    await this.deliveries.createIndex({ team_id: 1, endpoint_id: 1, status: 1, created_at: 1 });
    await this.succeeded.createIndex({ team_id: 1, endpoint_id: 1, created_from: -1 });
    await this.succeeded.createIndex({ team_id: 1, event_ids: 1 });
    await this.succeeded.createIndex({ team_id: 1, user_ids: 1 });
    await this.attempts.createIndex({ team_id: 1, event_ids: 1 });
    await this.attempts.createIndex({ team_id: 1, endpoint_id: 1, timestamp: -1 });
    await this.attempts.createIndex({ team_id: 1, user_ids: 1 });
  }

  /**
   * Rewrites documents stored by earlier versions (nested fields where strings are kept now) so a database
   * from `npm run dev` keeps working. Idempotent; each query finds nothing once done.
   */
  private async migrateStorage(): Promise<void> {
    type Legacy = Record<string, unknown> & { _id: string };
    const rewrite = async (coll: Collection<never>, field: string, rewritten: (doc: Legacy) => Record<string, unknown>) => {
      const raw = this.db.collection<Legacy>(coll.collectionName);
      for (const doc of await raw.find({ [field]: { $exists: true } }).toArray()) {
        await raw.updateOne({ _id: doc._id }, { $set: rewritten(doc), $unset: { [field]: '' } });
      }
    };
    await rewrite(this.events as never, 'data', (e) => ({ body: envelopeOf(e as unknown as EventDoc & { data: Record<string, unknown> }) }));
    await rewrite(this.attempts as never, 'attempts', (a) => ({ payload: JSON.stringify(a.attempts) }));
    await rewrite(this.queueItems as never, 'items', (q) => ({ payload: encodeItems(q.items as QueueItem[]) }));
    const outbox = this.db.collection<Legacy>(this.outbox.collectionName);
    for (const o of await outbox.find({ event_ids: { $exists: false } }).toArray()) await outbox.updateOne({ _id: o._id }, { $set: { event_ids: [o._id] } });
  }

  // ---------------------------------------------------------------- endpoints

  async createEndpoint(doc: EndpointDoc): Promise<EndpointDoc> {
    await this.endpoints.insertOne(doc);
    return doc;
  }

  findEndpoint(teamId: string, id: string) {
    return this.endpoints.findOne({ _id: id, team_id: teamId });
  }

  /** By id alone (the dispatcher, which is keyed by endpoint id). */
  getEndpoint(id: string) {
    return this.endpoints.findOne({ _id: id });
  }

  /** Cursor pagination in creation order; `next` is the first item of the next page. */
  async listEndpoints(teamId: string, after: { created_at: Date; id: string } | null, limit: number): Promise<Page<EndpointDoc>> {
    const filter: Filter<EndpointDoc> = { team_id: teamId };
    if (after) {
      filter.$or = [{ created_at: { $gt: after.created_at } }, { created_at: after.created_at, _id: { $gte: after.id } }];
    }
    const docs = await this.endpoints.find(filter).sort({ created_at: 1, _id: 1 }).limit(limit + 1).toArray();
    return { items: docs.slice(0, limit), next: docs[limit] ?? null };
  }

  listEnabledEndpoints(teamId: string) {
    return this.endpoints.find({ team_id: teamId, disabled: false }).toArray();
  }

  private lockedEndpoint<T>(id: string, fn: () => Promise<T>): Promise<T> {
    return this.locks.withLock(`webhook-endpoint:${id}`, fn);
  }

  private async setEndpoint(teamId: string, id: string, set: Partial<EndpointDoc>): Promise<EndpointDoc | null> {
    if (!(await this.findEndpoint(teamId, id))) return null;
    return this.endpoints.findOneAndUpdate({ _id: id }, { $set: { ...set, updated_at: new Date() } }, { returnDocument: 'after' });
  }

  updateEndpoint(teamId: string, id: string, set: Partial<EndpointDoc>): Promise<EndpointDoc | null> {
    return this.lockedEndpoint(id, () => this.setEndpoint(teamId, id, set));
  }

  async deleteEndpoint(teamId: string, id: string): Promise<boolean> {
    return this.lockedEndpoint(id, async () => {
      if (!(await this.findEndpoint(teamId, id))) return false;
      const res = await this.endpoints.deleteOne({ _id: id });
      return res.deletedCount === 1;
    });
  }

  /** A new current secret; the previous ones expire at `previousExpiresAt` (at most 10 kept). */
  async rotateSecret(teamId: string, id: string, key: string, previousExpiresAt: Date): Promise<EndpointDoc | null> {
    return this.lockedEndpoint(id, async () => {
      const endpoint = await this.findEndpoint(teamId, id);
      if (!endpoint) return null;
      const now = new Date();
      const previous = endpoint.secrets
        .filter((s) => s.expires_at === null || s.expires_at > now)
        .map((s) => ({ ...s, expires_at: s.expires_at && s.expires_at < previousExpiresAt ? s.expires_at : previousExpiresAt }))
        .slice(-9);
      return this.setEndpoint(teamId, id, { secrets: [...previous, { key, created_at: now, expires_at: null }] });
    });
  }

  /** Endpoint health after a batch: a success resets the failure clock; a failure starts it if not running. */
  async recordEndpointHealth(id: string, outcome: { succeeded: boolean; at: Date }): Promise<void> {
    await this.lockedEndpoint(id, async () => {
      const endpoint = await this.getEndpoint(id);
      if (!endpoint) return;
      if (outcome.succeeded && endpoint.failing_since) {
        await this.endpoints.updateOne({ _id: id }, { $set: { failing_since: null } });
      } else if (!outcome.succeeded && !endpoint.failing_since) {
        await this.endpoints.updateOne({ _id: id }, { $set: { failing_since: outcome.at } });
      }
    });
  }

  /** Disables the endpoint if `stillApplies` holds for its current state (a racing PATCH may have fixed it). */
  async disableEndpoint(id: string, reason: DisabledReason, stillApplies: (e: EndpointDoc) => boolean = () => true): Promise<boolean> {
    return this.lockedEndpoint(id, async () => {
      const endpoint = await this.getEndpoint(id);
      if (!endpoint || endpoint.disabled || !stillApplies(endpoint)) return false;
      await this.endpoints.updateOne({ _id: id }, { $set: { disabled: true, disabled_reason: reason, updated_at: new Date() } });
      return true;
    });
  }

  // ---------------------------------------------------------------- events

  /** Inserts new events; returns the ids that already existed (idempotent repeats). */
  async insertEvents(docs: EventDoc[]): Promise<Set<string>> {
    return this.insertIgnoringDuplicates(this.events, docs);
  }

  getEvent(id: string) {
    return this.events.findOne({ _id: id });
  }

  /** By `_id` alone, the team checked here: FerretDB narrows only a plain `{_id}` filter (any other field scans). */
  async findEvent(teamId: string, id: string): Promise<EventDoc | null> {
    const event = await this.events.findOne({ _id: id });
    return event?.team_id === teamId ? event : null;
  }

  async listEvents(
    teamId: string,
    q: { eventType?: string; userId?: string; since?: Date; until?: Date },
    before: { created_at: Date; id: string } | null,
    limit: number,
  ): Promise<Page<EventDoc>> {
    const filter: Filter<EventDoc> = { team_id: teamId };
    if (q.eventType) filter.event_type = q.eventType;
    if (q.userId) filter.user_id = q.userId;
    if (q.since || q.until) filter.created_at = createdWithin(q);
    if (before) {
      filter.$or = [{ created_at: { $lt: before.created_at } }, { created_at: before.created_at, _id: { $lte: before.id } }];
    }
    const docs = await this.events.find(filter).sort({ created_at: -1, _id: -1 }).limit(limit + 1).toArray();
    return { items: docs.slice(0, limit), next: docs[limit] ?? null };
  }

  // ---------------------------------------------------------------- outbox

  async insertOutbox(doc: OutboxDoc): Promise<void> {
    await this.outbox.insertOne(doc);
  }

  /** Whether a publish other than `exceptOutboxId` still has `eventId` unfinished (the outbox stays tiny). */
  async eventInOutbox(eventId: string, exceptOutboxId?: string): Promise<boolean> {
    const filter: Filter<OutboxDoc> = { event_ids: eventId };
    if (exceptOutboxId) filter._id = { $ne: exceptOutboxId };
    return (await this.outbox.findOne(filter)) !== null;
  }

  async deleteOutbox(id: string): Promise<void> {
    await this.outbox.deleteOne({ _id: id });
  }

  staleOutbox(before: Date, limit: number) {
    return this.outbox.find({ created_at: { $lt: before } }).sort({ created_at: 1 }).limit(limit).toArray();
  }

  /** Events by id (the sweeper's repair path; order not kept). */
  getEvents(ids: string[]): Promise<EventDoc[]> {
    return ids.length ? this.events.find({ _id: { $in: ids } }).toArray() : Promise.resolve([]);
  }

  // ---------------------------------------------------------------- queue (active deliveries, bundled)

  /** Idempotent by bundle id. Items first: an entry never points at missing items (a crash leaves at most
   *  unreferenced items, which nothing reads and the sweeper deletes). */
  async enqueue(docs: QueueDoc[]): Promise<void> {
    const bundles = docs.filter((d) => d.items.length);
    await this.insertIgnoringDuplicates(this.queueItems, bundles.map((d) => ({ _id: d._id, payload: encodeItems(d.items), created_at: new Date() })));
    await this.insertIgnoringDuplicates(
      this.queue,
      bundles.map(({ items, ...entry }) => ({ ...entry, size: items.length, items_id: entry._id })),
    );
  }

  /** Queues a fan-out: each bundle's items once, then an entry per endpoint (`<bundle>><endpoint>`). Idempotent. */
  async enqueueFanOut(bundles: FanOutBundle[]): Promise<void> {
    await this.insertIgnoringDuplicates(this.queueItems, bundles.map((b) => ({ _id: b._id, payload: encodeItems(b.items), created_at: new Date() })));
    await this.insertIgnoringDuplicates(
      this.queue,
      bundles.flatMap((b) =>
        b.endpoints.map(({ endpoint_id, positions }) => ({
          _id: `${b._id}>${endpoint_id}`,
          team_id: b.team_id,
          endpoint_id,
          next_attempt_at: b.created_at,
          created_at: b.created_at,
          size: positions.length,
          items_id: b._id,
          shared_by: b.endpoints.length,
          ...(positions.length === b.items.length ? {} : { only: positions.join(',') }),
        })),
      ),
    );
  }

  /** The endpoint's bundle entries (without items), soonest first. */
  queuedForEndpoint(endpointId: string, limit: number) {
    return this.queue.find({ endpoint_id: endpointId }).sort({ next_attempt_at: 1, _id: 1 }).limit(limit).toArray();
  }

  /** Whether any of the endpoint's bundles is due (`at` or before). */
  async hasDueDeliveries(endpointId: string, at = new Date()): Promise<boolean> {
    return (await this.queue.findOne({ endpoint_id: endpointId, next_attempt_at: { $lte: at } }, { projection: { _id: 1 } })) !== null;
  }

  /** The items of one entry, with their delivery ids (an `_id` lookup, the one filter FerretDB pushes down). */
  async bundleItems(entry: QueueEntry): Promise<QueueItem[]> {
    return (await this.readItems(entry)).selected;
  }

  /** The entry's items document: every item in it, and the ones this entry delivers. */
  private async readItems(entry: QueueEntry): Promise<{ all: QueueItem[]; selected: QueueItem[] }> {
    const doc = await this.itemsDoc(entry);
    const all = doc ? decodeItems(doc.payload, entry.endpoint_id) : [];
    return { all, selected: entry.only === undefined ? all : entry.only.split(',').flatMap((i) => all[Number(i)] ?? []) };
  }

  /**
   * An entry's items document. A fan-out document read by several endpoints is read from the database once
   * per worker: the dispatchers of those endpoints ask for it at about the same time, and it never changes
   * (a rest is written to the entry's own document). Kept briefly and within a byte budget.
   */
  private itemsDoc(entry: QueueEntry): Promise<QueueItemsDoc | null> {
    const id = itemsIdOf(entry);
    if ((entry.shared_by ?? 1) < 2) return this.queueItems.findOne({ _id: id });
    const now = Date.now();
    const hit = this.sharedItems.get(id);
    if (hit && now - hit.at < SHARED_ITEMS_TTL_MS) return hit.doc;
    const doc = this.queueItems.findOne({ _id: id });
    const cached = { at: now, bytes: 0, doc };
    this.sharedItems.set(id, cached);
    doc.then(
      (d) => {
        if (!d) this.sharedItems.delete(id);
        else cached.bytes = d.payload.length;
        this.pruneSharedItems(now);
      },
      () => this.sharedItems.delete(id),
    );
    return doc;
  }

  private pruneSharedItems(now: number): void {
    let bytes = 0;
    for (const c of this.sharedItems.values()) bytes += c.bytes;
    // Oldest first (a Map iterates in insertion order).
    for (const [id, c] of this.sharedItems) {
      if (now - c.at < SHARED_ITEMS_TTL_MS && bytes <= SHARED_ITEMS_MAX_BYTES) break;
      this.sharedItems.delete(id);
      bytes -= c.bytes;
    }
  }

  /**
   * Keeps the unsent rest of a bundle (rate limiting, batch limit) in the entry's own items document. A shared
   * document it read before is left to `deleteItems`, which removes it once no entry reads it.
   */
  async replaceQueuedItems(entry: QueueEntry, items: QueueItem[]): Promise<void> {
    await this.queueItems.replaceOne({ _id: entry._id }, { payload: encodeItems(items), created_at: new Date() }, { upsert: true });
    await this.queue.updateOne({ _id: entry._id }, { $set: { size: items.length, items_id: entry._id }, $unset: { only: '', shared_by: '' } });
  }

  /**
   * Entries first: once no entry reads an items document, nothing does. Items are deleted rather than kept:
   * every lookup scans the whole collection on FerretDB, so it must stay about as small as the backlog
   * (hourly append-only item collections measured slower).
   */
  async dequeue(entries: QueueEntry[]): Promise<void> {
    await this.dequeueEntries(entries.map((e) => e._id));
    await this.deleteItems(entries.map(itemsIdOf));
  }

  /** Removes bundle entries only: the bundles are done. Their items are deleted later (`deleteItems`). */
  async dequeueEntries(entryIds: string[]): Promise<void> {
    await this.dequeueWriter.add(entryIds);
  }

  /**
   * Deletes the items documents no entry reads any more (the dispatcher collects them over its activity).
   * Documents still read by an entry (another endpoint of the fan-out, a repeated fan-out) are kept.
   */
  async deleteItems(itemsIds: string[]): Promise<number> {
    if (!itemsIds.length) return 0;
    const readers = await this.queue
      .find({ $or: [{ items_id: { $in: itemsIds } }, { _id: { $in: itemsIds } }] }, { projection: { _id: 1, items_id: 1 } })
      .toArray();
    const live = new Set(readers.map(itemsIdOf));
    const dead = [...new Set(itemsIds)].filter((id) => !live.has(id));
    // One `$in` statement: each `{_id}` delete would parse every stored payload in SQLite (~0.5 ms per bundle
    // per delete), which costs more than one pass that decodes them all once.
    return dead.length ? (await this.queueItems.deleteMany({ _id: { $in: dead } })).deletedCount : 0;
  }

  /**
   * Items left without an entry by a crash before their bulk delete (the sweeper calls this). Only items
   * older than `before`: a bundle being enqueued has its items written just before its entries.
   */
  async deleteOrphanItems(before: Date): Promise<number> {
    const ids = (await this.queueItems.find({ created_at: { $lt: before } }, { projection: { _id: 1 } }).toArray()).map((d) => d._id);
    return this.deleteItems(ids);
  }

  /** Endpoints with deliveries due before `before` (the sweeper wakes their dispatchers). */
  async endpointsWithOverdue(before: Date, limit: number): Promise<string[]> {
    const docs = await this.queue.find({ next_attempt_at: { $lt: before } }, { projection: { endpoint_id: 1 } }).limit(limit).toArray();
    return [...new Set(docs.map((d) => d.endpoint_id))];
  }

  /** Active deliveries of an endpoint (for the delivery log). */
  async activeItems(teamId: string, endpointId: string): Promise<(QueueItem & { next_attempt_at: Date })[]> {
    const entries = await this.queue.find({ team_id: teamId, endpoint_id: endpointId }).toArray();
    const out: (QueueItem & { next_attempt_at: Date })[] = [];
    for (const e of entries) for (const i of await this.bundleItems(e)) out.push({ ...i, next_attempt_at: e.next_attempt_at });
    return out;
  }

  // ---------------------------------------------------------------- dispatcher activity (wake skipping)

  /** The endpoint's dispatcher is delivering until `until` (a lease: a dead worker's flag expires). */
  async markDispatcherActive(endpointId: string, until: Date): Promise<void> {
    await this.dispatchers.updateOne({ _id: endpointId }, { $set: { active_until: until } }, { upsert: true });
  }

  async markDispatcherIdle(endpointId: string): Promise<void> {
    await this.dispatchers.updateOne({ _id: endpointId }, { $set: { active_until: new Date(0) } }, { upsert: true });
  }

  /** Of `endpointIds`, those whose dispatcher is delivering now (and will look at the queue again). */
  async activeDispatchers(endpointIds: string[], now = new Date()): Promise<Set<string>> {
    if (!endpointIds.length) return new Set();
    const docs =
      endpointIds.length === 1
        ? [await this.dispatchers.findOne({ _id: endpointIds[0] })].filter((d): d is DispatcherStateDoc => d !== null)
        : await this.dispatchers.find({ _id: { $in: endpointIds } }).toArray();
    return new Set(docs.filter((d) => d.active_until > now).map((d) => d._id));
  }

  // ---------------------------------------------------------------- delivery records and attempts

  /**
   * Terminal records; a later pass of the same delivery (resend, recover) replaces its record. `manual`: the
   * deliveries among `docs` that were sent in such a pass.
   */
  async recordDeliveries(docs: DeliveryDoc[], manual: ReadonlySet<string> = new Set()): Promise<void> {
    const ok = docs.filter((d) => d.status === 'succeeded');
    const other = docs.filter((d) => d.status !== 'succeeded');
    const dups = await this.insertIgnoringDuplicates(this.deliveries, other);
    for (const doc of other.filter((d) => dups.has(d._id))) await this.deliveries.replaceOne({ _id: doc._id }, doc);
    const batches: SucceededBatchDoc[] = groupBy(ok, (d) => `${d.team_id}|${d.endpoint_id}`).map((records) => ({
      // Deterministic: recording the same batch again (a retried activity) stores it once.
      _id: `${records[0]._id}@${records[0].finished_at.getTime()}`,
      team_id: records[0].team_id,
      endpoint_id: records[0].endpoint_id,
      created_from: new Date(Math.min(...records.map((r) => r.created_at.getTime()))),
      finished_at: records[0].finished_at,
      event_ids: [...new Set(records.map((r) => r.event_id))],
      user_ids: [...new Set(records.map((r) => r.user_id).filter((u): u is string => u !== null))],
      payload: JSON.stringify(records),
    }));
    await this.succeededWriter.add(batches);
    // A successful manual pass (resend, recover) ends that delivery's failed record; only such a pass can
    // follow one, so scheduled successes skip this (on FerretDB it decodes every failed record).
    const superseding = ok.filter((d) => manual.has(d._id)).map((d) => d._id);
    if (superseding.length) await this.deliveries.deleteMany({ _id: { $in: superseding } });
  }

  /** The delivery's latest record (a failure after an earlier success is a single record, and newer). */
  async findDelivery(teamId: string, eventId: string, endpointId: string): Promise<DeliveryDoc | null> {
    const id = deliveryId(eventId, endpointId);
    const found = await this.deliveries.findOne({ _id: id }); // `_id` alone: see findEvent
    const single = found?.team_id === teamId ? found : null;
    const batches = await this.succeeded.find({ team_id: teamId, event_ids: eventId, endpoint_id: endpointId }).toArray();
    return latestPerDelivery([...(single ? [single] : []), ...batches.flatMap(deliveriesOf).filter((r) => r._id === id)])[0] ?? null;
  }

  /** Failed deliveries of an endpoint created in [since, until), oldest first, `limit` after `after`. */
  failedDeliveries(teamId: string, endpointId: string, q: { since?: Date; until?: Date }, after: DeliveryDoc | null, limit: number) {
    const filter: Filter<DeliveryDoc> = { team_id: teamId, endpoint_id: endpointId, status: 'failed' };
    if (q.since || q.until) filter.created_at = createdWithin(q);
    if (after) filter.$or = [{ created_at: { $gt: after.created_at } }, { created_at: after.created_at, _id: { $gt: after._id } }];
    return this.deliveries.find(filter).sort({ created_at: 1, _id: 1 }).limit(limit).toArray();
  }

  /** Finished deliveries of an endpoint created in [since, until), newest first, at most `limit`. */
  async listDeliveries(teamId: string, endpointId: string, q: { status?: DeliveryStatus; since?: Date; until?: Date }, limit: number): Promise<DeliveryDoc[]> {
    const inWindow = (d: DeliveryDoc) => (!q.since || d.created_at >= q.since) && (!q.until || d.created_at < q.until);
    const records: DeliveryDoc[] = [];
    const filter: Filter<DeliveryDoc> = { team_id: teamId, endpoint_id: endpointId };
    if (q.status) filter.status = q.status;
    if (q.since || q.until) filter.created_at = createdWithin(q);
    records.push(...(await this.deliveries.find(filter).sort({ created_at: -1, _id: -1 }).limit(limit).toArray()));
    if (!q.status || q.status === 'succeeded') {
      // A batch holds deliveries created from `created_from` on (up to its finish): read batches newest
      // first until `limit` records in the window are found.
      const batchFilter: Filter<SucceededBatchDoc> = { team_id: teamId, endpoint_id: endpointId };
      if (q.until) batchFilter.created_from = { $lt: q.until };
      if (q.since) batchFilter.finished_at = { $gte: q.since };
      let found = 0;
      for (let skip = 0; ; skip += limit + 1) {
        const batches = await this.succeeded.find(batchFilter).sort({ created_from: -1, _id: -1 }).skip(skip).limit(limit + 1).toArray();
        const inBatches = batches.flatMap(deliveriesOf).filter(inWindow);
        records.push(...inBatches);
        found += inBatches.length;
        if (batches.length < limit + 1 || found >= limit) break;
      }
    }
    const latest = latestPerDelivery(records);
    return (q.status ? latest.filter((d) => d.status === q.status) : latest).slice(0, limit);
  }

  /** Stores one batch's attempts as one document per (team, endpoint). */
  async insertAttempts(docs: AttemptDoc[]): Promise<void> {
    const batches: AttemptBatchDoc[] = groupBy(docs, (d) => `${d.team_id}|${d.endpoint_id}`).map((attempts) => ({
      _id: attempts[0]._id,
      team_id: attempts[0].team_id,
      endpoint_id: attempts[0].endpoint_id,
      timestamp: new Date(Math.max(...attempts.map((a) => a.timestamp.getTime()))),
      event_ids: [...new Set(attempts.map((a) => a.event_id))],
      user_ids: [...new Set(attempts.map((a) => a.user_id).filter((u): u is string => u !== null))],
      payload: JSON.stringify(attempts),
    }));
    await this.attemptWriter.add(batches);
  }

  /**
   * Attempts of an event or of an endpoint, newest first, `limit` per page after the cursor. A batch
   * document holds at least one attempt, so `limit + 1` documents always fill a page.
   */
  async listAttempts(
    teamId: string,
    q: { eventId?: string; endpointId?: string },
    before: { timestamp: Date; id: string } | null,
    limit: number,
  ): Promise<Page<AttemptDoc>> {
    const filter: Filter<AttemptBatchDoc> = { team_id: teamId };
    if (q.eventId) filter.event_ids = q.eventId;
    if (q.endpointId) filter.endpoint_id = q.endpointId;
    const newestFirst = (a: AttemptDoc, b: AttemptDoc) => b.timestamp.getTime() - a.timestamp.getTime() || (a._id < b._id ? 1 : -1);
    const isBefore = (a: AttemptDoc) =>
      !before || a.timestamp < before.timestamp || (a.timestamp.getTime() === before.timestamp.getTime() && a._id <= before.id);
    const matches = (a: AttemptDoc) => (!q.eventId || a.event_id === q.eventId) && (!q.endpointId || a.endpoint_id === q.endpointId) && isBefore(a);
    // Batches of one endpoint follow each other, so documents in `timestamp` order hold attempts in (nearly)
    // that order: read documents in chunks until the page and its successor are found.
    // A batch lasts at most a few attempt timeouts, so documents much newer than the cursor hold nothing older.
    if (before) filter.timestamp = { $lte: new Date(before.timestamp.getTime() + BATCH_SPAN_MS) };
    const attempts: AttemptDoc[] = [];
    const chunk = limit + 1;
    for (let skip = 0; ; skip += chunk) {
      const docs = await this.attempts.find(filter).sort({ timestamp: -1, _id: -1 }).skip(skip).limit(chunk).toArray();
      attempts.push(...docs.flatMap(attemptsOf).filter(matches));
      if (docs.length < chunk || attempts.length > limit) break;
    }
    attempts.sort(newestFirst);
    return { items: attempts.slice(0, limit), next: attempts[limit] ?? null };
  }

  // ---------------------------------------------------------------- user erasure

  /** Erases a deleted user's events, queued deliveries, delivery records and attempts. Idempotent. */
  async eraseForUser(teamId: string, userId: string): Promise<number> {
    let n = 0;
    for (const coll of [this.deliveries, this.events] as unknown as Collection<{ team_id: string; user_id: string | null }>[]) {
      n += (await coll.deleteMany({ team_id: teamId, user_id: userId })).deletedCount;
    }
    n += await this.eraseFromBatches(this.succeeded, deliveriesOf, teamId, userId);
    n += await this.eraseFromBatches(this.attempts, attemptsOf, teamId, userId);
    const read: string[] = [];
    for (const entry of await this.queue.find({ team_id: teamId }).toArray()) {
      // Also entries that do not deliver the user's events but read a shared document holding them.
      const { all, selected: items } = await this.readItems(entry);
      if (!all.some((i) => i.user_id === userId)) continue;
      const keep = items.filter((i) => i.user_id !== userId);
      n += items.length - keep.length;
      read.push(itemsIdOf(entry));
      if (keep.length) await this.replaceQueuedItems(entry, keep);
      else await this.dequeue([entry]);
    }
    await this.deleteItems(read); // shared documents that held the user's deliveries, now read by no entry
    return n;
  }

  /** Removes the user's records from batch documents (attempts, successful deliveries); returns how many. */
  private async eraseFromBatches<B extends AttemptBatchDoc | SucceededBatchDoc>(
    coll: Collection<B>,
    recordsOf: (batch: B) => { user_id: string | null; event_id: string }[],
    teamId: string,
    userId: string,
  ): Promise<number> {
    let n = 0;
    for (const batch of (await coll.find({ team_id: teamId, user_ids: userId } as Filter<B>).toArray()) as B[]) {
      const all = recordsOf(batch);
      const keep = all.filter((r) => r.user_id !== userId);
      n += all.length - keep.length;
      const byId = { _id: batch._id } as Filter<B>;
      if (!keep.length) await coll.deleteOne(byId);
      else {
        const rest = { payload: JSON.stringify(keep), event_ids: [...new Set(keep.map((r) => r.event_id))], user_ids: batch.user_ids.filter((u) => u !== userId) };
        await coll.updateOne(byId, { $set: rest as Partial<B> });
      }
    }
    return n;
  }

  private async insertIgnoringDuplicates<T extends { _id: string }>(coll: Collection<T>, docs: T[]): Promise<Set<string>> {
    const dups = new Set<string>();
    if (!docs.length) return dups;
    try {
      await coll.insertMany(docs as never[], { ordered: false });
    } catch (err) {
      const writeErrors = (err as { writeErrors?: unknown }).writeErrors;
      const list = (Array.isArray(writeErrors) ? writeErrors : writeErrors ? [writeErrors] : []) as { code?: number; index: number; err?: { code?: number; index?: number } }[];
      if (!list.length && isDuplicateKeyError(err) && docs.length === 1) {
        dups.add(docs[0]._id);
        return dups;
      }
      if (!list.length) throw err;
      for (const e of list) {
        const code = e.code ?? e.err?.code;
        const index = e.index ?? e.err?.index;
        if (code !== 11000 || index === undefined) throw err;
        dups.add(docs[index]._id);
      }
    }
    return dups;
  }
}
