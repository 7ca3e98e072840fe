import type { Collection, Db } from 'mongodb';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from './database/indexes';

/** How often a running worker records that it is alive. */
export const WORKER_HEARTBEAT_INTERVAL_MS = 5_000;
/**
 * A worker whose last heartbeat is older than this counts as gone (GET /ready). Three intervals: one late
 * write under load is not a death. Temporal's own poller list cannot tell sooner: the server updates a
 * poller's `lastAccessTime` when a long poll starts, and an idle live worker's poll lasts up to ~60 s
 * (measured on the dev server: a SIGKILLed worker stayed listed with its last access growing for minutes).
 */
export const WORKER_HEARTBEAT_STALE_MS = 15_000;

export interface WorkerHeartbeatDoc {
  /** One per worker process: `<host>:<pid>:<random>`. */
  _id: string;
  task_queue: string;
  host: string;
  pid: number;
  started_at: Date;
  /** The worker's clock (hosts are expected to run NTP; skew adds to the detection time). */
  last_seen_at: Date;
}

export const WORKER_HEARTBEAT_INDEXES: IndexSpec[] = [
  { key: { task_queue: 1, last_seen_at: 1 } },
  { key: { last_seen_at: 1 }, expireAfter: 'workerHeartbeats' },
];
export const WORKER_HEARTBEAT_QUERY_SHAPES: QueryShape[] = [
  { name: 'a fresh heartbeat on a task queue (readiness)', filter: ['task_queue', 'last_seen_at'] },
  { name: 'one worker beats or leaves', filter: ['_id'] },
];

/**
 * `worker_heartbeats`: one document per running worker process, rewritten by that process alone every
 * WORKER_HEARTBEAT_INTERVAL_MS (no concurrent writers), removed when it stops cleanly. Retention: documents
 * of workers that died are deleted by their TTL index an hour after their last beat.
 */
export class WorkerHeartbeatRepository {
  readonly heartbeats: Collection<WorkerHeartbeatDoc>;

  constructor(db: Db) {
    this.heartbeats = db.collection('worker_heartbeats');
  }

  ensureIndexes(retention?: Retention): Promise<void> {
    return createIndexes(this.heartbeats, WORKER_HEARTBEAT_INDEXES, retention);
  }

  async beat(doc: WorkerHeartbeatDoc): Promise<void> {
    const { _id, ...fields } = doc;
    await this.heartbeats.updateOne({ _id }, { $set: fields }, { upsert: true });
  }

  async remove(workerId: string): Promise<void> {
    await this.heartbeats.deleteOne({ _id: workerId });
  }

  /** True when some worker of the task queue has beaten since `since`. */
  async anyAliveSince(taskQueue: string, since: Date): Promise<boolean> {
    return (await this.heartbeats.findOne({ task_queue: taskQueue, last_seen_at: { $gte: since } }, { projection: { _id: 1 } })) !== null;
  }
}
