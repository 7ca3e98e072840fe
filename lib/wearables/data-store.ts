import type { AnyBulkWriteOperation, Collection, Db } from 'mongodb';
import { insertIgnoringDuplicates, retryTransient } from '../platform/database/bulk';
import { createIndexes, type IndexSpec, type QueryShape } from '../platform/database/indexes';
import { HAS_PLATFORM_ID, SampleBuckets, type SampleBucketDoc, type SampleQuery, type SampleReading, type SampleWrite } from './sample-buckets';

/** How a stored summary or sample came to hold its current value: the write that created or last changed it. */
export interface IngestMark {
  /** Content hash of the ingestion (batch) that last wrote this document: a retried batch recognises its own writes. */
  ingest_key: string;
  /** What that ingestion did to it. */
  change: 'created' | 'updated';
}

/** Whose data, of what, from where: what summaries, samples and sample buckets all carry. */
export interface WearableSeries {
  team_id: string;
  user_id: string;
  resource: string;
  provider: string;
  /** The device or app type that recorded it (watch, ring, phone …); part of a sample's replacement key. */
  source_type: string;
}

/** What every summary and sample document carries: its series, and how it was written. */
interface WearableDocBase extends IngestMark, WearableSeries {
  _id: string;
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
 * later value for the same key replaces it. Stored in the columns of its day bucket (sample-buckets.ts); earlier
 * versions stored one document per sample.
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
  /** The phone platform's id of the sample, where it has one (lib/wearables/model.ts SampleInput). */
  platform_id?: string | null;
  created_at: Date;
  updated_at: Date;
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

export const WEARABLE_DATA_INDEXES: Record<'summaries' | 'sample_buckets' | 'workout_streams', IndexSpec[]> = {
  summaries: [{ key: { team_id: 1, user_id: 1, resource: 1, time: 1 } }],
  sample_buckets: [
    { key: { team_id: 1, user_id: 1, resource: 1, day: 1 } },
    // Only the buckets of samples with platform ids (phones) are in it: the providers' writes do not pay for it.
    { key: { team_id: 1, user_id: 1, platform_id: 1 }, partial: HAS_PLATFORM_ID },
  ],
  workout_streams: [{ key: { team_id: 1, user_id: 1 } }],
};

export const WEARABLE_DATA_QUERY_SHAPES: Record<'summaries' | 'sample_buckets' | 'workout_streams', QueryShape[]> = {
  summaries: [
    { name: "a user's summaries of one resource in a time range", filter: ['team_id', 'user_id', 'resource', 'time'], sort: ['time'], residual: ['provider'] },
    { name: "a user's latest summary of one resource (profile)", filter: ['team_id', 'user_id', 'resource'], sort: ['time'], residual: ['provider'] },
    { name: "erase a user's summaries", filter: ['team_id', 'user_id'] },
  ],
  sample_buckets: [
    {
      name: "a user's day buckets of one resource in a day range (flat and grouped reads)",
      filter: ['team_id', 'user_id', 'resource', 'day'],
      sort: ['day'],
      residual: ['provider'],
    },
    {
      name: "a phone's deletion: the day buckets of one resource a range touches",
      filter: ['team_id', 'user_id', 'resource', 'day'],
      residual: ['provider', 'source_type'],
    },
    { name: 'buckets by id (ingestion reads the days it writes, and writes them conditional on the version read)', filter: ['_id'], residual: ['version'] },
    {
      name: "a phone's samples by platform id (one moved by the platform, or deleted by id)",
      filter: ['team_id', 'user_id', 'platform_id'],
      residual: ['resource', 'provider'],
      equals: HAS_PLATFORM_ID,
    },
    { name: "erase a user's buckets", filter: ['team_id', 'user_id'] },
  ],
  workout_streams: [{ name: "erase a user's workout streams", filter: ['team_id', 'user_id'] }],
};

/** `_id`s per `$in` read of existing documents. */
const READ_CHUNK = 1000;

/**
 * Summaries, samples and workout streams. Writes are idempotent by `_id`: new summaries are inserted
 * (unordered, duplicates reported back) and changed ones replaced whole; samples are written into their day
 * buckets (`writeSamples`); streams are replaced whole.
 */
export class WearableDataRepository {
  readonly summaries: Collection<SummaryDoc>;
  readonly buckets: Collection<SampleBucketDoc>;
  readonly streams: Collection<WorkoutStreamDoc>;
  private readonly sampleBuckets: SampleBuckets;

  constructor(db: Db) {
    this.summaries = db.collection('summaries');
    this.buckets = db.collection('sample_buckets');
    this.streams = db.collection('workout_streams');
    this.sampleBuckets = new SampleBuckets(this.buckets);
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.summaries, WEARABLE_DATA_INDEXES.summaries);
    await createIndexes(this.buckets, WEARABLE_DATA_INDEXES.sample_buckets);
    await createIndexes(this.streams, WEARABLE_DATA_INDEXES.workout_streams);
  }

  /** Inserts what is new; returns the ids that already existed. */
  insertNew(coll: Collection<SummaryDoc>, docs: SummaryDoc[]): Promise<Set<string>> {
    return retryTransient(() => insertIgnoringDuplicates(coll, docs));
  }

  /** Removes a series' samples in [from, to) (see SampleBuckets.deleteRange); what was removed. */
  deleteSamples(series: Parameters<SampleBuckets['deleteRange']>[0], from: Date, to: Date) {
    return this.sampleBuckets.deleteRange(series, from, to);
  }

  /** Removes samples by their platform ids (SampleBuckets.deleteIds). */
  deleteSampleIds(series: Parameters<SampleBuckets['deleteIds']>[0], ids: string[]) {
    return this.sampleBuckets.deleteIds(series, ids);
  }

  /** Writes samples into their day buckets (see SampleBuckets.write: one insert or conditional update per bucket). */
  writeSamples(samples: SampleDoc[], decide: (stored: SampleDoc, incoming: SampleDoc) => SampleDoc | null): Promise<SampleWrite[]> {
    return this.sampleBuckets.write(samples, decide);
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

  /** Samples in [from, to], by timestamp then key; `after` continues from a cursor position (see SampleBuckets.find). */
  findSamples(q: Parameters<SampleBuckets['find']>[0]): Promise<SampleReading[]> {
    return this.sampleBuckets.find(q);
  }

  /** The same samples a day at a time, from one cursor read in batches (see SampleBuckets.readByDay): for reads of any length. */
  readSamplesByDay(q: SampleQuery): AsyncGenerator<SampleReading[]> {
    return this.sampleBuckets.readByDay(q);
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
