import { Binary, type Collection, type Db } from 'mongodb';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';
import { isDuplicateKeyError } from '../platform/database/store-errors';
import { ExportFileError } from './export-xml';

/**
 * Apple Health export imports (`POST /v2/user/{user_id}/import/apple_health`): the upload, stored as it arrives in
 * chunks of at most CHUNK_BYTES (so a multi-gigabyte file is never held whole and a broken upload resumes from its last
 * stored byte), and the import's state, which its workflow (workflows/apple-health-import.ts) owns once the upload is
 * whole.
 *
 * The upload advances by one conditional update per chunk (`received_bytes` must still be the chunk's offset), so two
 * requests continuing the same upload at once store it once: the second finds the offset moved and is refused. A
 * chunk is written before the offset moves past it; a chunk written by a request that died before moving the offset
 * is replaced by the next one at that offset.
 */
export const CHUNK_BYTES = 1 << 20;

export type ImportStatus = 'uploading' | 'importing' | 'completed' | 'failed';
export type ImportFormat = 'zip' | 'xml';

export interface ImportCounts {
  created: number;
  updated: number;
  unchanged: number;
}

export interface ImportProgress {
  /** Bytes of export.xml read (after unzipping). */
  xml_bytes_read: number;
  records_read: number;
  samples: ImportCounts;
  summaries: ImportCounts;
  /** Samples outside the user's ingestion bounds. */
  dropped: number;
  /** Record types not taken, by type: how many. */
  skipped: Record<string, number>;
}

export interface AppleHealthImportDoc {
  _id: string;
  team_id: string;
  user_id: string;
  format: ImportFormat;
  status: ImportStatus;
  /** The whole file's size when the client said (`upload-length`, or the first request's content-length). */
  upload_length: number | null;
  received_bytes: number;
  progress: ImportProgress;
  error: string | null;
  created_at: Date;
  updated_at: Date;
  uploaded_at: Date | null;
  completed_at: Date | null;
}

export interface ImportChunkDoc {
  /** `<import id>:<offset, zero-padded>`: one chunk per offset, replaced by a resend. */
  _id: string;
  import_id: string;
  offset: number;
  data: Binary;
  stored_at: Date;
}

export const IMPORT_INDEXES: Record<'apple_health_imports' | 'apple_health_import_chunks', IndexSpec[]> = {
  apple_health_imports: [{ key: { team_id: 1, user_id: 1, created_at: -1 } }],
  apple_health_import_chunks: [
    { key: { import_id: 1, offset: 1 } },
    // An upload nobody finished (or an import's bytes its workflow could not remove) goes after a week.
    { key: { stored_at: 1 }, expireAfter: 'importUploads' },
  ],
};
export const IMPORT_QUERY_SHAPES: Record<'apple_health_imports' | 'apple_health_import_chunks', QueryShape[]> = {
  apple_health_imports: [
    { name: 'an import by id (the upload; its workflow)', filter: ['_id'], residual: ['team_id', 'user_id', 'received_bytes', 'status'] },
    { name: "a user's imports, newest first (the list; erasure)", filter: ['team_id', 'user_id'], sort: ['created_at'] },
  ],
  apple_health_import_chunks: [
    { name: "a range of an upload's bytes, in order (the import reads)", filter: ['import_id', 'offset'], sort: ['offset'] },
    { name: "an import's bytes (removed when imported; erasure)", filter: ['import_id'] },
  ],
};

export const emptyProgress = (): ImportProgress => ({
  xml_bytes_read: 0,
  records_read: 0,
  samples: { created: 0, updated: 0, unchanged: 0 },
  summaries: { created: 0, updated: 0, unchanged: 0 },
  dropped: 0,
  skipped: {},
});

const chunkId = (importId: string, offset: number) => `${importId}:${String(offset).padStart(15, '0')}`;

export class AppleHealthImportRepository {
  readonly imports: Collection<AppleHealthImportDoc>;
  readonly chunks: Collection<ImportChunkDoc>;

  constructor(db: Db) {
    this.imports = db.collection('apple_health_imports');
    this.chunks = db.collection('apple_health_import_chunks');
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.imports, IMPORT_INDEXES.apple_health_imports, retention);
    await createIndexes(this.chunks, IMPORT_INDEXES.apple_health_import_chunks, retention);
  }

  async create(doc: Pick<AppleHealthImportDoc, '_id' | 'team_id' | 'user_id' | 'format' | 'upload_length'>, now: Date): Promise<AppleHealthImportDoc> {
    const full: AppleHealthImportDoc = {
      ...doc,
      status: 'uploading',
      received_bytes: 0,
      progress: emptyProgress(),
      error: null,
      created_at: now,
      updated_at: now,
      uploaded_at: null,
      completed_at: null,
    };
    await this.imports.insertOne(full);
    return full;
  }

  find(teamId: string, userId: string, importId: string): Promise<AppleHealthImportDoc | null> {
    return this.imports.findOne({ _id: importId, team_id: teamId, user_id: userId });
  }

  get(importId: string): Promise<AppleHealthImportDoc | null> {
    return this.imports.findOne({ _id: importId });
  }

  listForUser(teamId: string, userId: string, limit: number): Promise<AppleHealthImportDoc[]> {
    return this.imports.find({ team_id: teamId, user_id: userId }).sort({ created_at: -1 }).limit(limit).toArray();
  }

  /**
   * Stores bytes at `offset` and moves the upload past them, if it is still at `offset` and uploading. Null: another
   * request moved it first (nothing of this one counts). `complete` (the last bytes) ends the upload in the same write.
   */
  async append(importId: string, offset: number, bytes: Buffer, complete: boolean, now: Date): Promise<AppleHealthImportDoc | null> {
    if (bytes.length) {
      const chunk = { import_id: importId, offset, data: new Binary(bytes), stored_at: now };
      try {
        await this.chunks.replaceOne({ _id: chunkId(importId, offset) }, chunk, { upsert: true });
      } catch (err) {
        // Two upserts of one new _id at once: one inserts, the other's insert collides; replacing now finds it.
        if (!isDuplicateKeyError(err)) throw err;
        await this.chunks.replaceOne({ _id: chunkId(importId, offset) }, chunk);
      }
    }
    const end = offset + bytes.length;
    return this.imports.findOneAndUpdate(
      { _id: importId, status: 'uploading', received_bytes: offset },
      {
        $set: {
          received_bytes: end,
          updated_at: now,
          ...(complete ? { status: 'importing' as const, upload_length: end, uploaded_at: now } : {}),
        },
      },
      { returnDocument: 'after' },
    );
  }

  /** Bytes [start, end) of the upload, chunk by chunk (a few in memory at a time). */
  async *stream(importId: string, start: number, end: number): AsyncGenerator<Buffer> {
    const cursor = this.chunks
      .find({ import_id: importId, offset: { $gt: start - CHUNK_BYTES, $lt: end } })
      .sort({ offset: 1 })
      .batchSize(4);
    let at = start;
    for await (const chunk of cursor) {
      const data = Buffer.from(chunk.data.buffer);
      const chunkEnd = chunk.offset + data.length;
      if (chunkEnd <= at) continue;
      if (chunk.offset > at) throw new ExportFileError(`The upload is missing bytes ${at}–${chunk.offset} (stored chunks do not meet): upload it again.`);
      yield data.subarray(at - chunk.offset, Math.min(data.length, end - chunk.offset));
      at = Math.min(chunkEnd, end);
      if (at >= end) break;
    }
    if (at < end)
      throw new ExportFileError(
        `The upload's stored bytes end at ${at}, before ${end}: its chunks are gone (a week after upload) or never arrived; upload it again.`,
      );
  }

  async read(importId: string, start: number, end: number): Promise<Buffer> {
    const parts: Buffer[] = [];
    for await (const part of this.stream(importId, start, end)) parts.push(part);
    return Buffer.concat(parts);
  }

  /** The import's progress, as its workflow's activity reaches it (the activity is the only writer while importing). */
  async recordProgress(importId: string, progress: ImportProgress, now: Date): Promise<void> {
    await this.imports.updateOne({ _id: importId }, { $set: { progress, updated_at: now } });
  }

  async finish(importId: string, outcome: { status: 'completed' | 'failed'; progress?: ImportProgress; error?: string }, now: Date): Promise<void> {
    await this.imports.updateOne(
      { _id: importId },
      {
        $set: {
          status: outcome.status,
          error: outcome.error ?? null,
          completed_at: now,
          updated_at: now,
          ...(outcome.progress ? { progress: outcome.progress } : {}),
        },
      },
    );
  }

  /** The upload's bytes, once imported: a multi-gigabyte file is not kept. */
  async dropBytes(importId: string): Promise<number> {
    return (await this.chunks.deleteMany({ import_id: importId })).deletedCount;
  }

  async eraseAllForUser(teamId: string, userId: string): Promise<number> {
    const ids = (await this.imports.find({ team_id: teamId, user_id: userId }, { projection: { _id: 1 } }).toArray()).map((d) => d._id);
    let removed = 0;
    for (const id of ids) removed += await this.dropBytes(id);
    return removed + (await this.imports.deleteMany({ team_id: teamId, user_id: userId })).deletedCount;
  }
}
