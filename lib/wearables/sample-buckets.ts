import type { Collection, Filter } from 'mongodb';
import { insertIgnoringDuplicates, retryTransient } from '../platform/database/bulk';
import { DAY_MS } from '../platform/time';
import type { IngestMark, SampleDoc, WearableSeries } from './data-store';

/**
 * One sample as its bucket holds it: the sample less what its bucket says (whose, what, when), and less its
 * document times (the bucket's `created_at` and `updated_at` stand for its samples').
 */
export type StoredSample = Omit<SampleDoc, '_id' | 'team_id' | 'user_id' | 'resource' | 'provider' | 'source_type' | 'timestamp' | 'created_at' | 'updated_at'>;

/** A sample as reads return it: everything but how it was written (reads leave the ingest marks in the database). */
export type SampleReading = Omit<SampleDoc, keyof IngestMark>;

/** The sample fields a bucket stores as columns, parallel to its `offsets`. */
const COLUMN_FIELDS = ['value', 'systolic', 'diastolic', 'start', 'end', 'unit', 'type', 'timezone_offset', 'platform_id', 'ingest_key', 'change'] as const;

/** One field of a bucket's samples: the value they all share, or one entry per sample (null: that sample has none). */
export type Column<T> = T | (T | null)[];

/**
 * A day of one user's samples of one resource from one provider and source type (UTC day), stored as columns
 * the way MongoDB's time-series buckets store them: `offsets` holds each sample's offset in the day (ms,
 * ascending, at most one per ms) and every other field is a column parallel to it. A field all the day's
 * samples share is stored once (`unit: 'bpm'`), and a field none has is absent, so a day of minute heart rate
 * is two arrays of 1,440 numbers plus a few scalars: decoding that is what makes a 30-day read fast. Any query
 * on a field (`{value: {$gt: 150}}`) matches the scalar and the array alike. `version` is bumped by every
 * write and is the precondition of the next (races settle in the database).
 */
export interface SampleBucketDoc extends WearableSeries {
  /** `<user>:<resource>:<provider>:<source type>:<YYYY-MM-DD>` */
  _id: string;
  /** 00:00 UTC of the bucket's day. */
  day: Date;
  offsets?: number[];
  value?: Column<number>;
  systolic?: Column<number>;
  diastolic?: Column<number>;
  start?: Column<Date>;
  end?: Column<Date>;
  unit?: Column<string>;
  type?: Column<string>;
  timezone_offset?: Column<number>;
  platform_id?: Column<string>;
  ingest_key?: Column<string>;
  change?: Column<IngestMark['change']>;
  version: number;
  created_at: Date;
  updated_at: Date;
}

const bucketDay = (timestamp: Date) => new Date(Math.floor(timestamp.getTime() / DAY_MS) * DAY_MS);
/** What a sample's replacement key and its bucket's id start with: whose series, from where. */
const seriesPrefix = (userId: string, resource: string, provider: string, sourceType: string) => `${userId}:${resource}:${provider}:${sourceType}:`;
const sampleBucketId = (userId: string, resource: string, provider: string, sourceType: string, day: Date) =>
  seriesPrefix(userId, resource, provider, sourceType) + day.toISOString().slice(0, 10);
/** The series of the last sampleKey: a batch's keys are mostly of one series, whose prefix is then made once. */
let lastSeries = { userId: '', resource: '', provider: '', sourceType: '', prefix: seriesPrefix('', '', '', '') };
/** A sample's replacement key (per user): resource, provider, source type and timestamp. */
export function sampleKey(userId: string, resource: string, provider: string, sourceType: string, timestamp: Date): string {
  const last = lastSeries;
  if (last.userId !== userId || last.resource !== resource || last.provider !== provider || last.sourceType !== sourceType) {
    lastSeries = { userId, resource, provider, sourceType, prefix: seriesPrefix(userId, resource, provider, sourceType) };
  }
  return lastSeries.prefix + timestamp.getTime();
}

/** What a write does to one sample: its new content, and how it compares with what the bucket held. */
export interface SampleWrite {
  sample: SampleDoc;
  outcome: 'created' | 'updated' | 'unchanged';
  /** The stored sample it was compared with (unchanged: the stored one, which may carry an earlier ingestion's mark). */
  stored?: SampleDoc;
}

/** Entry `i` of a column (absent: null). */
const at = <T>(column: Column<T> | undefined, i: number): T | null => (Array.isArray(column) ? column[i] : (column ?? null));

const sameValue = (a: unknown, b: unknown) => a === b || (a instanceof Date && b instanceof Date && a.getTime() === b.getTime());

/** A sample less its identity and document times, with no undefined fields (built, not copied and pruned: hot). */
function storedPart(sample: SampleDoc): StoredSample {
  const stored: StoredSample = {
    unit: sample.unit,
    type: sample.type,
    timezone_offset: sample.timezone_offset,
    ingest_key: sample.ingest_key,
    change: sample.change,
  };
  if (sample.value !== undefined) stored.value = sample.value;
  if (sample.systolic !== undefined) stored.systolic = sample.systolic;
  if (sample.diastolic !== undefined) stored.diastolic = sample.diastolic;
  if (sample.start !== undefined) stored.start = sample.start;
  if (sample.end !== undefined) stored.end = sample.end;
  if (sample.platform_id !== undefined && sample.platform_id !== null) stored.platform_id = sample.platform_id;
  return stored;
}

/** Sample `i` of a bucket's columns; a null entry is a field the sample has not (`type` and `timezone_offset` stay null). */
function sampleAt(bucket: SampleBucketDoc, i: number): StoredSample {
  const sample: StoredSample = {
    unit: at(bucket.unit, i) as string,
    type: at(bucket.type, i),
    timezone_offset: at(bucket.timezone_offset, i),
    ingest_key: at(bucket.ingest_key, i) as string,
    change: at(bucket.change, i) ?? 'created',
  };
  const platformId = at(bucket.platform_id, i);
  if (platformId !== null) sample.platform_id = platformId;
  for (const field of ['value', 'systolic', 'diastolic', 'start', 'end'] as const) {
    const v = at<number | Date>(bucket[field], i);
    if (v !== null) (sample as Record<string, unknown>)[field] = v;
  }
  return sample;
}

/** A bucket's samples by offset. */
function openBucket(bucket: SampleBucketDoc | undefined): Map<number, StoredSample> {
  const held = new Map<number, StoredSample>();
  bucket?.offsets?.forEach((offset, i) => held.set(offset, sampleAt(bucket, i)));
  return held;
}

/** The update that stores `held` as the bucket's columns (whole), clearing the columns it no longer has. */
function columnsUpdate(held: Map<number, StoredSample>) {
  const offsets = [...held.keys()].sort((a, b) => a - b);
  const rows = offsets.map((offset) => held.get(offset)!);
  const set: Record<string, unknown> = { offsets };
  const unset: Record<string, ''> = {};
  for (const field of COLUMN_FIELDS) {
    // One scan tells a shared value from a column; the column is made only when the values differ (hot: a phone's
    // chunk is a week of buckets of 1,440 samples and 11 fields).
    const first = rows[0][field] ?? null;
    let same = true;
    for (let i = 1; same && i < rows.length; i++) same = sameValue(rows[i][field] ?? null, first);
    if (same && first === null) unset[field] = '';
    else set[field] = same ? first : rows.map((row) => row[field] ?? null);
  }
  return { set, unset };
}

/**
 * A sample of a read: a view of its bucket's columns (the bucket, the sample's index and time), its fields read
 * when asked. A month of minute samples is 43,200 of these, and one small object each, instead of a copy of
 * every field plus a Date and an id, keeps a read's garbage, and so its GC pauses, small. Read it through its
 * fields: a spread or JSON.stringify sees only the view, and each `timestamp` is a new Date.
 */
class BucketSample implements SampleReading {
  constructor(
    private readonly bucket: SampleBucketDoc,
    /** What the sample's key starts with (its bucket's series). */
    private readonly prefix: string,
    private readonly index: number,
    /** The sample's timestamp, ms since the epoch. */
    readonly timeMs: number,
  ) {}
  get _id() {
    return this.prefix + this.timeMs;
  }
  get team_id() {
    return this.bucket.team_id;
  }
  get user_id() {
    return this.bucket.user_id;
  }
  get resource() {
    return this.bucket.resource;
  }
  get provider() {
    return this.bucket.provider;
  }
  get source_type() {
    return this.bucket.source_type;
  }
  get timestamp() {
    return new Date(this.timeMs);
  }
  get start() {
    return at(this.bucket.start, this.index) ?? undefined;
  }
  get end() {
    return at(this.bucket.end, this.index) ?? undefined;
  }
  get value() {
    return at(this.bucket.value, this.index) ?? undefined;
  }
  get systolic() {
    return at(this.bucket.systolic, this.index) ?? undefined;
  }
  get diastolic() {
    return at(this.bucket.diastolic, this.index) ?? undefined;
  }
  get unit() {
    return at(this.bucket.unit, this.index) as string;
  }
  get type() {
    return at(this.bucket.type, this.index);
  }
  get timezone_offset() {
    return at(this.bucket.timezone_offset, this.index);
  }
  get platform_id() {
    return at(this.bucket.platform_id, this.index);
  }
  get created_at() {
    return this.bucket.created_at;
  }
  get updated_at() {
    return this.bucket.updated_at;
  }
}

/** The buckets that hold samples with platform ids (the partial index's filter; its queries name it). */
export const HAS_PLATFORM_ID = { platform_id: { $exists: true } };

/** A sample a deletion removed. */
export interface RemovedSample {
  timestamp: Date;
  source_type: string;
}

/** What a read asks for: a user's samples of one resource in [from, to], after a cursor position if given. */
export interface SampleQuery {
  teamId: string;
  userId: string;
  resource: string;
  from: Date;
  to: Date;
  provider?: string;
  after?: { timestamp: Date; id: string };
}

/** Day buckets per round trip of a read's cursor (a day of minute samples is ~25-80 KB of columns). */
const READ_BATCH_BUCKETS = 16;

/**
 * The samples of one day's buckets (one per source) that the query wants, by timestamp then key: offsets ascend
 * within a bucket, so only several sources need a sort.
 */
function samplesOfDay(buckets: SampleBucketDoc[], q: SampleQuery): BucketSample[] {
  const fromMs = q.from.getTime();
  const toMs = q.to.getTime();
  const afterMs = q.after?.timestamp.getTime();
  const out: BucketSample[] = [];
  for (const bucket of buckets) {
    const { offsets = [] } = bucket;
    const base = bucket.day.getTime();
    const prefix = seriesPrefix(bucket.user_id, bucket.resource, bucket.provider, bucket.source_type);
    for (let i = 0; i < offsets.length; i++) {
      const t = base + offsets[i];
      if (t < fromMs || t > toMs) continue;
      if (afterMs !== undefined && (t < afterMs || (t === afterMs && prefix + t <= q.after!.id))) continue;
      out.push(new BucketSample(bucket, prefix, i, t));
    }
  }
  if (buckets.length > 1) out.sort((a, b) => a.timeMs - b.timeMs || (a._id < b._id ? -1 : 1));
  return out;
}

/**
 * The sample buckets of `sample_buckets`: writes and reads. Every bucket write is one insert or one update conditional on the version read.
 */
export class SampleBuckets {
  constructor(readonly collection: Collection<SampleBucketDoc>) {}

  /**
   * Writes samples into their day buckets: per bucket, one insert (a new bucket) or one update conditional on
   * the version read that rewrites its columns (a later value for a timestamp replaces the old one), re-read
   * and re-decided when another writer got there first. `decide(stored, incoming)` returns the sample to store,
   * or null to keep the stored one. Returns, per sample, what the write did to it.
   */
  async write(samples: SampleDoc[], decide: (stored: SampleDoc, incoming: SampleDoc) => SampleDoc | null): Promise<SampleWrite[]> {
    await this.removeMoved(samples);
    const byBucket = new Map<string, Map<number, SampleDoc>>();
    // A batch is mostly one series over a few days: its bucket ids are made once per series and day, not per sample.
    let series: SampleDoc | null = null;
    let idsOfDays = new Map<number, Map<number, SampleDoc>>();
    for (const sample of samples) {
      if (
        !series ||
        sample.user_id !== series.user_id ||
        sample.resource !== series.resource ||
        sample.provider !== series.provider ||
        sample.source_type !== series.source_type
      ) {
        series = sample;
        idsOfDays = new Map();
      }
      const time = sample.timestamp.getTime();
      const dayMs = Math.floor(time / DAY_MS) * DAY_MS;
      let bucket = idsOfDays.get(dayMs);
      if (!bucket) {
        const id = sampleBucketId(sample.user_id, sample.resource, sample.provider, sample.source_type, new Date(dayMs));
        bucket = byBucket.get(id) ?? new Map();
        byBucket.set(id, bucket);
        idsOfDays.set(dayMs, bucket);
      }
      bucket.set(time - dayMs, sample); // the same timestamp twice: the last one
    }
    const written = new Map<string, SampleWrite[]>();
    let pending = [...byBucket.keys()];
    for (let round = 0; pending.length; round++) {
      if (round === 20) throw new Error(`sample buckets kept changing under this write: ${pending.slice(0, 3).join(', ')}`);
      // Whole buckets: the columns are rewritten whole (a day of minute samples is ~25-80 KB in columns).
      const stored = new Map((await this.collection.find({ _id: { $in: pending } }).toArray()).map((b) => [b._id, b]));
      const lost: string[] = [];
      // New buckets go in one unordered insert (an import's batch may start hundreds of sparse days), the changed ones
      // each in an update conditional on its version, all at once.
      const fresh: { doc: SampleBucketDoc; writes: SampleWrite[] }[] = [];
      const updates: Promise<unknown>[] = [];
      for (const id of pending) {
        const bucket = stored.get(id);
        const { writes, held, changed } = this.merge(bucket, byBucket.get(id)!, decide);
        if (!bucket) fresh.push({ doc: this.newBucket(id, byBucket.get(id)!, held), writes });
        else if (!changed) written.set(id, writes);
        else updates.push(this.update(bucket, held).then((landed) => (landed ? written.set(id, writes) : lost.push(id))));
      }
      const inserts = fresh.length
        ? retryTransient(() =>
            insertIgnoringDuplicates(
              this.collection,
              fresh.map((f) => f.doc),
            ),
          ).then((existed) => {
            for (const { doc, writes } of fresh) {
              if (existed.has(doc._id)) lost.push(doc._id);
              else written.set(doc._id, writes);
            }
          })
        : null;
      await Promise.all([inserts, ...updates]);
      pending = lost; // another writer got there first: decide again on what the bucket holds now
    }
    // In bucket order, each bucket's samples in the order given (not the order the writes finished): callers
    // derive idempotency keys from positions, so a retried batch must see the same order.
    return [...byBucket.keys()].flatMap((id) => written.get(id)!);
  }

  /**
   * Removes a series' samples whose timestamp is in [from, to) (a phone's deletion): per day bucket it touches, one
   * update conditional on the version read (or one delete of a bucket left empty), re-read when another writer got
   * there first. `sourceType` null: every source type of the provider. Returns what was removed.
   */
  async deleteRange(
    series: Pick<WearableSeries, 'team_id' | 'user_id' | 'resource' | 'provider'> & { source_type: string | null },
    from: Date,
    to: Date,
  ): Promise<RemovedSample[]> {
    if (to <= from) return [];
    const filter = {
      team_id: series.team_id,
      user_id: series.user_id,
      resource: series.resource,
      day: { $gte: bucketDay(from), $lte: bucketDay(new Date(to.getTime() - 1)) },
      provider: series.provider,
      ...(series.source_type ? { source_type: series.source_type } : {}),
    };
    return this.removeWhere(filter, (bucket, offset) => bucket.day.getTime() + offset >= from.getTime() && bucket.day.getTime() + offset < to.getTime());
  }

  /** Removes a user's samples of one resource from one provider by their platform ids (a phone's deletion by id). */
  async deleteIds(series: Pick<WearableSeries, 'team_id' | 'user_id' | 'resource' | 'provider'>, ids: string[]): Promise<RemovedSample[]> {
    if (!ids.length) return [];
    const wanted = new Set(ids);
    return this.removeWhere(
      {
        team_id: series.team_id,
        user_id: series.user_id,
        platform_id: { ...HAS_PLATFORM_ID.platform_id, $in: ids },
        resource: series.resource,
        provider: series.provider,
      },
      (_bucket, _offset, sample) => sample.platform_id != null && wanted.has(sample.platform_id),
    );
  }

  /**
   * Removes the samples `gone` picks from the buckets `filter` finds: per bucket, one update conditional on the version
   * read (or one delete of a bucket left empty), re-read when another writer got there first.
   */
  private async removeWhere(
    filter: Filter<SampleBucketDoc>,
    gone: (bucket: SampleBucketDoc, offset: number, sample: StoredSample) => boolean,
  ): Promise<RemovedSample[]> {
    const removed: RemovedSample[] = [];
    let pending = (await this.collection.find(filter, { projection: { _id: 1 } }).toArray()).map((b) => b._id);
    for (let round = 0; pending.length; round++) {
      if (round === 20) throw new Error(`sample buckets kept changing under this deletion: ${pending.slice(0, 3).join(', ')}`);
      const buckets = await this.collection.find({ _id: { $in: pending } }).toArray();
      const lost: string[] = [];
      await Promise.all(
        buckets.map(async (bucket) => {
          const held = openBucket(bucket);
          const day = bucket.day.getTime();
          const offsets = [...held].filter(([offset, sample]) => gone(bucket, offset, sample)).map(([offset]) => offset);
          if (!offsets.length) return;
          for (const offset of offsets) held.delete(offset);
          const landed = held.size
            ? await this.update(bucket, held)
            : (await retryTransient(() => this.collection.deleteOne({ _id: bucket._id, version: bucket.version }))).deletedCount === 1;
          if (!landed) return void lost.push(bucket._id);
          for (const offset of offsets) removed.push({ timestamp: new Date(day + offset), source_type: bucket.source_type });
        }),
      );
      pending = lost;
    }
    return removed.sort((a, b) => a.timestamp.getTime() - b.timestamp.getTime());
  }

  /**
   * Samples with platform ids that the platform moved (the same id, another time): their old places are removed before
   * the write, so a sample keyed by its platform id is held once.
   */
  private async removeMoved(samples: SampleDoc[]): Promise<void> {
    const target = new Map<string, string>();
    for (const sample of samples) {
      if (!sample.platform_id) continue;
      const day = bucketDay(sample.timestamp);
      target.set(
        sample.platform_id,
        `${sampleBucketId(sample.user_id, sample.resource, sample.provider, sample.source_type, day)}@${sample.timestamp.getTime() - day.getTime()}`,
      );
    }
    if (!target.size) return;
    const { team_id, user_id } = samples[0];
    await this.removeWhere(
      { team_id, user_id, platform_id: { ...HAS_PLATFORM_ID.platform_id, $in: [...target.keys()] } },
      (bucket, offset, sample) => sample.platform_id != null && target.has(sample.platform_id) && target.get(sample.platform_id) !== `${bucket._id}@${offset}`,
    );
  }

  /** What the bucket holds once the incoming samples are decided on, and what that did to each. */
  private merge(bucket: SampleBucketDoc | undefined, incoming: Map<number, SampleDoc>, decide: (stored: SampleDoc, incoming: SampleDoc) => SampleDoc | null) {
    const held = openBucket(bucket);
    const writes: SampleWrite[] = [];
    let changed = false;
    for (const [offset, sample] of incoming) {
      const previous = held.get(offset);
      if (!previous) {
        writes.push({ sample, outcome: 'created' });
        held.set(offset, storedPart(sample));
        changed = true;
        continue;
      }
      const { _id, team_id, user_id, resource, provider, source_type, timestamp } = sample;
      const current: SampleDoc = {
        ...previous,
        _id,
        team_id,
        user_id,
        resource,
        provider,
        source_type,
        timestamp,
        created_at: bucket!.created_at,
        updated_at: bucket!.updated_at,
      };
      const next = decide(current, sample);
      if (!next) {
        writes.push({ sample: current, outcome: 'unchanged', stored: current });
        continue;
      }
      writes.push({ sample: next, outcome: 'updated', stored: current });
      held.set(offset, storedPart(next));
      changed = true;
    }
    return { writes, held, changed };
  }

  /** A new bucket holding `held` (inserted by `write`, which finds whether another writer created it first). */
  private newBucket(id: string, incoming: Map<number, SampleDoc>, held: Map<number, StoredSample>): SampleBucketDoc {
    const first: SampleDoc = incoming.values().next().value!;
    const now = new Date();
    const { set } = columnsUpdate(held);
    return {
      _id: id,
      team_id: first.team_id,
      user_id: first.user_id,
      resource: first.resource,
      provider: first.provider,
      source_type: first.source_type,
      day: bucketDay(first.timestamp),
      ...set,
      version: 1,
      created_at: now,
      updated_at: now,
    } as SampleBucketDoc;
  }

  /**
   * Rewrites the bucket's columns to hold `held`, conditional on the version read; false when it changed since.
   * `updatedAt` stands for its samples' (a rewrite of the layout alone keeps it).
   */
  private async update(bucket: SampleBucketDoc, held: Map<number, StoredSample>, updatedAt = new Date()): Promise<boolean> {
    const { set, unset } = columnsUpdate(held);
    const { matchedCount } = await retryTransient(() =>
      this.collection.updateOne({ _id: bucket._id, version: bucket.version }, { $set: { ...set, updated_at: updatedAt }, $unset: unset, $inc: { version: 1 } }),
    );
    return matchedCount === 1;
  }

  /**
   * Samples in [from, to], by timestamp then key; `after` continues from a cursor position; `limit` stops the
   * read (and closes its cursor) once that many are found.
   */
  async find(q: SampleQuery & { limit?: number }): Promise<SampleReading[]> {
    const out: SampleReading[] = [];
    for await (const day of this.readByDay(q)) {
      for (const sample of day) out.push(sample);
      if (q.limit && out.length >= q.limit) break;
    }
    return q.limit ? out.slice(0, q.limit) : out;
  }

  /**
   * The samples of `find`, a day at a time. The day buckets the range touches (one document per day and source,
   * without their ingest marks) come from one cursor, READ_BATCH_BUCKETS per round trip, so however long the
   * range, a read holds one batch of buckets and one day's samples. Ending the iteration early (a consumer
   * that returns, or throws) closes the cursor on the server.
   */
  async *readByDay(q: SampleQuery): AsyncGenerator<SampleReading[]> {
    const from = q.after && q.after.timestamp > q.from ? q.after.timestamp : q.from;
    const filter: Filter<SampleBucketDoc> = {
      team_id: q.teamId,
      user_id: q.userId,
      resource: q.resource,
      day: { $gte: bucketDay(from), $lte: bucketDay(q.to) },
    };
    if (q.provider) filter.provider = q.provider;
    const cursor = this.collection.find(filter, { projection: { ingest_key: 0, change: 0 }, batchSize: READ_BATCH_BUCKETS }).sort({ day: 1 });
    try {
      // Buckets come in day order; a day's buckets (one per source) are read together and merged by time.
      let day: SampleBucketDoc[] = [];
      for await (const bucket of cursor) {
        if (day.length && bucket.day.getTime() !== day[0].day.getTime()) {
          const samples = samplesOfDay(day, q);
          if (samples.length) yield samples;
          day = [];
        }
        day.push(bucket);
      }
      const samples = samplesOfDay(day, q);
      if (samples.length) yield samples;
    } finally {
      await cursor.close();
    }
  }
}
