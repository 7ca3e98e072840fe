import type { AnyBulkWriteOperation, Collection, Db, Filter } from 'mongodb';
import { insertIgnoringDuplicates, retryTransient } from './bulk';
import { createIndexes, type IndexSpec, type QueryShape } from './indexes';
import { runOnce } from './migrations';
import { isDuplicateKeyError } from './store-errors';

/** How a stored summary or sample came to hold its current value: the write that created or last changed it. */
export interface IngestMark {
  /** Content hash of the ingestion (batch) that last wrote this document: a retried batch recognises its own writes. */
  ingest_key: string;
  /** What that ingestion did to it. */
  change: 'created' | 'updated';
}

/** What every summary and sample document carries: whose data, of what, from where, and how it was written. */
interface WearableDocBase extends IngestMark {
  _id: string;
  team_id: string;
  user_id: string;
  resource: string;
  provider: string;
  /** The device or app type that recorded it (watch, ring, phone …); part of a sample's replacement key. */
  source_type: string;
  created_at: Date;
  updated_at: Date;
}

/** One summary (activity day, sleep, workout, body measurement, profile, meal); `_id` is its client-facing id. */
export interface SummaryDoc extends WearableDocBase {
  /** The provider's own key for it (e.g. the calendar date of a daily summary). */
  source_key: string;
  calendar_date: string;
  /** The instant the summary is anchored at (reads filter and sort on it). */
  time: Date;
  /** The client-facing fields, as plain subdocument fields. */
  data: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

/**
 * One timeseries sample. `_id` is its replacement key (user, resource, provider, source type, timestamp), so a
 * later value for the same key replaces it; one document per sample keeps each replacement atomic.
 */
export interface SampleDoc extends WearableDocBase {
  timestamp: Date;
  start?: Date;
  end?: Date;
  value?: number;
  systolic?: number;
  diastolic?: number;
  unit: string;
  type: string | null;
  timezone_offset: number | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * One sample as a day bucket holds it: the sample less what its bucket and slot say (whose, what, when), and
 * less its document times (the bucket's `created_at` and `updated_at` stand for its samples').
 */
export type StoredSample = Omit<SampleDoc, '_id' | 'team_id' | 'user_id' | 'resource' | 'provider' | 'source_type' | 'timestamp' | 'created_at' | 'updated_at'>;

/**
 * A day of one user's samples of one resource from one provider and source type (UTC day), as MongoDB's
 * time-series collections bucket them: `samples` maps each sample's offset in the day (ms, as a field name) to
 * the sample, so a later value for the same timestamp replaces its slot in one update. `version` is bumped by
 * every write and is the precondition of the next (races settle in the database). At most one slot per
 * millisecond of the day; a minute-resolution series fills 1,440.
 */
export interface SampleBucketDoc extends Omit<WearableDocBase, keyof IngestMark> {
  /** `<user>:<resource>:<provider>:<source type>:<YYYY-MM-DD>` */
  _id: string;
  /** 00:00 UTC of the bucket's day. */
  day: Date;
  samples: Record<string, StoredSample>;
  version: number;
}

const DAY_MS = 86_400_000;
const bucketDay = (timestamp: Date) => new Date(Math.floor(timestamp.getTime() / DAY_MS) * DAY_MS);
/** What a sample's replacement key and its bucket's id start with: whose series, from where. */
const seriesPrefix = (userId: string, resource: string, provider: string, sourceType: string) => `${userId}:${resource}:${provider}:${sourceType}:`;
const sampleBucketId = (userId: string, resource: string, provider: string, sourceType: string, day: Date) =>
  seriesPrefix(userId, resource, provider, sourceType) + day.toISOString().slice(0, 10);
/** A sample's replacement key (per user): resource, provider, source type and timestamp. */
export const sampleKey = (userId: string, resource: string, provider: string, sourceType: string, timestamp: Date) =>
  seriesPrefix(userId, resource, provider, sourceType) + timestamp.getTime();
/** A sample's slot in its bucket: its offset from the day's start, in ms. */
const slotOf = (timestamp: Date) => String(timestamp.getTime() - bucketDay(timestamp).getTime());

/** What a write does to one slot: its new content, and how it compares with what the bucket held. */
export interface SlotWrite {
  sample: SampleDoc;
  outcome: 'created' | 'updated' | 'unchanged';
  /** The stored sample it was compared with (unchanged: the stored one, which may carry an earlier ingestion's mark). */
  stored?: SampleDoc;
}

/** A workout's stream (parallel arrays, a documented bucket of one workout's points); `_id` is the workout id. */
export interface WorkoutStreamDoc {
  _id: string;
  team_id: string;
  user_id: string;
  provider: string;
  content_hash: string;
  stream: Record<string, (number | null)[]>;
  created_at: Date;
  updated_at: Date;
}

export const WEARABLE_DATA_INDEXES: Record<'summaries' | 'sample_buckets' | 'samples' | 'workout_streams', IndexSpec[]> = {
  summaries: [{ key: { team_id: 1, user_id: 1, resource: 1, time: 1 } }],
  sample_buckets: [{ key: { team_id: 1, user_id: 1, resource: 1, day: 1 } }],
  // One document per sample, as earlier versions stored them: read only by the move into buckets, then dropped.
  samples: [],
  workout_streams: [{ key: { team_id: 1, user_id: 1 } }],
};

export const WEARABLE_DATA_QUERY_SHAPES: Record<'summaries' | 'sample_buckets' | 'samples' | 'workout_streams', QueryShape[]> = {
  summaries: [
    { name: "a user's summaries of one resource in a time range", filter: ['team_id', 'user_id', 'resource', 'time'], sort: ['time'], residual: ['provider'] },
    { name: "a user's latest summary of one resource (profile)", filter: ['team_id', 'user_id', 'resource'], sort: ['time'], residual: ['provider'] },
    { name: "erase a user's summaries", filter: ['team_id', 'user_id'] },
  ],
  sample_buckets: [
    { name: "a user's day buckets of one resource in a day range (flat and grouped reads)", filter: ['team_id', 'user_id', 'resource', 'day'], sort: ['day'], residual: ['provider'] },
    { name: 'buckets by id (ingestion reads the days it writes)', filter: ['_id'] },
    { name: "erase a user's buckets", filter: ['team_id', 'user_id'] },
  ],
  samples: [
    { name: 'the move into buckets: every sample document of earlier versions, in _id pages', filter: ['_id'], sort: ['_id'] },
  ],
  workout_streams: [{ name: "erase a user's workout streams", filter: ['team_id', 'user_id'] }],
};

/**
 * A sample less its identity: what its bucket slot holds. The common values are left out (a null `type`, the
 * `change` 'created'): a month of minute samples is 43,200 slots, and their bytes are most of a read.
 */
function storedPart(sample: SampleDoc): StoredSample {
  const { _id, team_id, user_id, resource, provider, source_type, timestamp, created_at, updated_at, ...stored } = sample;
  const slot: Partial<StoredSample> = { ...stored };
  if (slot.type === null) delete slot.type;
  if (slot.change === 'created') delete slot.change;
  for (const key of Object.keys(slot) as (keyof StoredSample)[]) if (slot[key] === undefined) delete slot[key];
  return slot as StoredSample;
}

/** A slot as stored, with the values `storedPart` leaves out put back. */
function openSlot(slot: StoredSample): StoredSample {
  return { ...slot, type: slot.type ?? null, change: slot.change ?? 'created' };
}

/** Whose sample, of what, when: what its bucket and slot say. */
function identityOf(s: SampleDoc): Pick<SampleDoc, '_id' | 'team_id' | 'user_id' | 'resource' | 'provider' | 'source_type' | 'timestamp'> {
  return { _id: s._id, team_id: s.team_id, user_id: s.user_id, resource: s.resource, provider: s.provider, source_type: s.source_type, timestamp: s.timestamp };
}

/** `_id`s per `$in` read of existing documents. */
const READ_CHUNK = 1000;

/**
 * Summaries, samples and workout streams. Writes are idempotent by `_id`: new summaries are inserted
 * (unordered, duplicates reported back) and changed ones replaced whole; samples are written into their day
 * buckets (`writeSlots`); streams are replaced whole.
 */
export class WearableDataRepository {
  readonly summaries: Collection<SummaryDoc>;
  readonly buckets: Collection<SampleBucketDoc>;
  readonly streams: Collection<WorkoutStreamDoc>;
  /** Samples one document each, as earlier versions stored them (moved into buckets once, then dropped). */
  private readonly legacySamples: Collection<SampleDoc>;

  constructor(private readonly db: Db) {
    this.summaries = db.collection('summaries');
    this.buckets = db.collection('sample_buckets');
    this.streams = db.collection('workout_streams');
    this.legacySamples = db.collection('samples');
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.summaries, WEARABLE_DATA_INDEXES.summaries);
    await createIndexes(this.buckets, WEARABLE_DATA_INDEXES.sample_buckets);
    await createIndexes(this.streams, WEARABLE_DATA_INDEXES.workout_streams);
    await runOnce(this.db, 'samples-into-day-buckets', () => this.moveSamplesIntoBuckets());
  }

  /**
   * Moves the one-document-per-sample collection of earlier versions into day buckets, a page at a time: each
   * page's samples are merged into their buckets where the bucket has no value for that timestamp yet (a value
   * written by this version meanwhile is newer), then the page is deleted. Repeatable after a crash.
   */
  private async moveSamplesIntoBuckets(): Promise<void> {
    for (;;) {
      const page = await this.legacySamples.find({ _id: { $gt: '' } }).sort({ _id: 1 }).limit(5_000).toArray();
      if (!page.length) break;
      await this.writeSlots(page, () => null); // a slot already there was written by this version: it stays
      await this.legacySamples.deleteMany({ _id: { $in: page.map((d) => d._id) } });
    }
    await this.legacySamples.drop().catch(() => undefined);
  }

  /** Inserts what is new; returns the ids that already existed. */
  insertNew(coll: Collection<SummaryDoc>, docs: SummaryDoc[]): Promise<Set<string>> {
    return retryTransient(() => insertIgnoringDuplicates(coll, docs));
  }

  /**
   * Writes samples into their day buckets: per bucket, one insert (a new bucket) or one update conditional on the
   * version read (a later value for a timestamp replaces its slot), re-read and re-decided when another writer
   * got there first. `decide(stored, incoming)` returns the sample to store, or null to keep the stored one.
   * Returns, per sample, what the write did to its slot.
   */
  async writeSlots(samples: SampleDoc[], decide: (stored: SampleDoc, incoming: SampleDoc) => SampleDoc | null): Promise<SlotWrite[]> {
    const byBucket = new Map<string, Map<string, SampleDoc>>();
    for (const sample of samples) {
      const id = sampleBucketId(sample.user_id, sample.resource, sample.provider, sample.source_type, bucketDay(sample.timestamp));
      if (!byBucket.has(id)) byBucket.set(id, new Map());
      byBucket.get(id)!.set(slotOf(sample.timestamp), sample); // the same timestamp twice: the last one
    }
    const written = new Map<string, SlotWrite[]>();
    let pending = [...byBucket.keys()];
    for (let round = 0; pending.length; round++) {
      if (round === 20) throw new Error(`sample buckets kept changing under this write: ${pending.slice(0, 3).join(', ')}`);
      // Only the slots this write touches (a day bucket of minute samples is ~200 KB), and the version.
      const slots = new Set(pending.flatMap((id) => [...byBucket.get(id)!.keys()]));
      const projection = { version: 1, created_at: 1, updated_at: 1, ...Object.fromEntries([...slots].map((slot) => [`samples.${slot}`, 1])) };
      const stored = new Map((await this.buckets.find({ _id: { $in: pending } }, { projection }).toArray()).map((b) => [b._id, b as SampleBucketDoc]));
      const lost: string[] = [];
      await Promise.all(
        pending.map(async (id) => {
          const incoming = byBucket.get(id)!;
          const bucket = stored.get(id);
          const writes: SlotWrite[] = [];
          const set: Record<string, StoredSample> = {};
          for (const [slot, sample] of incoming) {
            const previous = bucket?.samples?.[slot];
            if (!previous) {
              writes.push({ sample, outcome: 'created' });
              set[slot] = storedPart(sample);
              continue;
            }
            const current: SampleDoc = { ...openSlot(previous), ...identityOf(sample), created_at: bucket!.created_at, updated_at: bucket!.updated_at };
            const next = decide(current, sample);
            if (!next) {
              writes.push({ sample: current, outcome: 'unchanged', stored: current });
              continue;
            }
            writes.push({ sample: next, outcome: 'updated', stored: current });
            set[slot] = storedPart(next);
          }
          if (!bucket) {
            const first = incoming.values().next().value!;
            const now = new Date();
            try {
              await retryTransient(() =>
                this.buckets.insertOne({
                  _id: id,
                  team_id: first.team_id,
                  user_id: first.user_id,
                  resource: first.resource,
                  provider: first.provider,
                  source_type: first.source_type,
                  day: bucketDay(first.timestamp),
                  samples: set,
                  version: 1,
                  created_at: now,
                  updated_at: now,
                }),
              );
            } catch (err) {
              if (!isDuplicateKeyError(err)) throw err;
              return void lost.push(id); // another writer created it first: decide again on what it holds
            }
          } else if (Object.keys(set).length) {
            const fields = Object.fromEntries(Object.entries(set).map(([slot, sample]) => [`samples.${slot}`, sample]));
            const { matchedCount } = await retryTransient(() =>
              this.buckets.updateOne({ _id: id, version: bucket.version }, { $set: { ...fields, updated_at: new Date() }, $inc: { version: 1 } }),
            );
            if (!matchedCount) return void lost.push(id);
          }
          written.set(id, writes);
        }),
      );
      pending = lost;
    }
    // In bucket order, each bucket's slots in the order given (not the order the writes finished): callers derive
    // idempotency keys from positions, so a retried batch must see the same order.
    return [...byBucket.keys()].flatMap((id) => written.get(id)!);
  }

  /** The stored documents with these ids. */
  async getByIds<T extends SummaryDoc>(coll: Collection<T>, ids: string[]): Promise<T[]> {
    const out: T[] = [];
    for (let i = 0; i < ids.length; i += READ_CHUNK) {
      out.push(...((await coll.find({ _id: { $in: ids.slice(i, i + READ_CHUNK) } } as never).toArray()) as T[]));
    }
    return out;
  }

  /** Replaces each document whole (atomic per document; concurrent writers: the last replacement wins). */
  async replaceAll<T extends SummaryDoc>(coll: Collection<T>, docs: T[]): Promise<void> {
    if (!docs.length) return;
    const ops = docs.map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } }) as unknown as AnyBulkWriteOperation<T>);
    await retryTransient(() => coll.bulkWrite(ops, { ordered: false }));
  }

  findSummaries(teamId: string, userId: string, resource: string, from: Date, to: Date, provider?: string) {
    return this.summaries
      .find({ team_id: teamId, user_id: userId, resource, time: { $gte: from, $lte: to }, ...(provider ? { provider } : {}) })
      .sort({ time: 1 })
      .toArray();
  }

  latestSummary(teamId: string, userId: string, resource: string, provider?: string) {
    return this.summaries.findOne({ team_id: teamId, user_id: userId, resource, ...(provider ? { provider } : {}) }, { sort: { time: -1 } });
  }

  /**
   * Samples in [from, to], by timestamp then key; `after` continues from a cursor position. Reads the day buckets
   * the range touches (one document per day and source) and flattens them.
   */
  async findSamples(q: { teamId: string; userId: string; resource: string; from: Date; to: Date; provider?: string; after?: { timestamp: Date; id: string }; limit?: number }) {
    const from = q.after && q.after.timestamp > q.from ? q.after.timestamp : q.from;
    const filter: Filter<SampleBucketDoc> = { team_id: q.teamId, user_id: q.userId, resource: q.resource, day: { $gte: bucketDay(from), $lte: bucketDay(q.to) } };
    if (q.provider) filter.provider = q.provider;
    const buckets = await this.buckets.find(filter).sort({ day: 1 }).toArray();
    // A hot path (a month of minute samples is 43,200): plain loops, no per-sample copies of the slot. A bucket's
    // slots come out in time order (integer-like keys iterate ascending), its buckets are in day order, so one
    // source's samples need no sort; several sources are merged by time.
    const fromMs = q.from.getTime();
    const toMs = q.to.getTime();
    const afterMs = q.after?.timestamp.getTime();
    const out: SampleDoc[] = [];
    const sources = new Set<string>();
    for (const bucket of buckets) {
      sources.add(`${bucket.provider}:${bucket.source_type}`);
      const base = bucket.day.getTime();
      const prefix = seriesPrefix(bucket.user_id, bucket.resource, bucket.provider, bucket.source_type);
      for (const slot in bucket.samples) {
        const t = base + Number(slot);
        if (t < fromMs || t > toMs) continue;
        const id = prefix + t;
        if (afterMs !== undefined && (t < afterMs || (t === afterMs && id <= q.after!.id))) continue;
        const stored = bucket.samples[slot];
        out.push({
          _id: id,
          team_id: bucket.team_id,
          user_id: bucket.user_id,
          resource: bucket.resource,
          provider: bucket.provider,
          source_type: bucket.source_type,
          timestamp: new Date(t),
          start: stored.start,
          end: stored.end,
          value: stored.value,
          systolic: stored.systolic,
          diastolic: stored.diastolic,
          unit: stored.unit,
          type: stored.type ?? null,
          timezone_offset: stored.timezone_offset,
          ingest_key: stored.ingest_key,
          change: stored.change ?? 'created',
          created_at: bucket.created_at,
          updated_at: bucket.updated_at,
        });
      }
    }
    if (sources.size > 1) out.sort((a, b) => a.timestamp.getTime() - b.timestamp.getTime() || (a._id < b._id ? -1 : 1));
    return q.limit ? out.slice(0, q.limit) : out;
  }

  /** By `_id`, within the team. */
  findStream(teamId: string, workoutId: string): Promise<WorkoutStreamDoc | null> {
    return this.streams.findOne({ _id: workoutId, team_id: teamId });
  }

  async findStreamHashes(ids: string[]): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    for (const id of ids) {
      const doc = await this.streams.findOne({ _id: id }, { projection: { content_hash: 1 } });
      if (doc) found.set(id, doc.content_hash);
    }
    return found;
  }

  async saveStream(doc: WorkoutStreamDoc): Promise<void> {
    await retryTransient(() => this.streams.replaceOne({ _id: doc._id }, doc, { upsert: true }));
  }

  async eraseAllForUser(teamId: string, userId: string): Promise<number> {
    let count = 0;
    for (const coll of [this.summaries, this.buckets, this.streams] as unknown as Collection<{ team_id: string; user_id: string }>[]) {
      count += (await coll.deleteMany({ team_id: teamId, user_id: userId })).deletedCount;
    }
    return count;
  }
}
