import type { Collection, Db, Filter } from 'mongodb';
import { createIndexes, type IndexSpec, type QueryShape } from './indexes';

export type AuditStatus = 'pending' | 'succeeded' | 'failed';

/**
 * One management change (`audit_log`): written `pending` before the change is made and completed after, so
 * a process that dies in between leaves an entry that says "outcome unknown" rather than no entry, or one
 * claiming a change that never happened. Holds ids and field names only, never values (keys, secrets).
 * Kept for the life of the org: a deleted team's entries stay (they record who deleted it).
 */
export interface AuditEntryDoc {
  _id: string;
  org_id: string;
  team_id: string | null;
  action: string;
  target: { type: string; id: string };
  actor: { management_key_id: string; header: string };
  request_id: string;
  status: AuditStatus;
  error: { status: number; detail: string } | null;
  changes: string[];
  created_at: Date;
  completed_at: Date | null;
}

export interface Page<T> {
  items: T[];
  next: T | null;
}

/** Newest first: `(created_at, _id)` descending ends every index, so pages come off it in order. */
export const AUDIT_LOG_INDEXES: Record<'audit_log', IndexSpec[]> = {
  audit_log: [
    { key: { org_id: 1, created_at: -1, _id: -1 } },
    { key: { org_id: 1, team_id: 1, created_at: -1, _id: -1 } },
    { key: { org_id: 1, action: 1, created_at: -1, _id: -1 } },
  ],
};

/** Every query AuditLogRepository issues (test/indexes.test.ts). */
export const AUDIT_LOG_QUERY_SHAPES: Record<'audit_log', QueryShape[]> = {
  audit_log: [
    { name: 'entries by id (complete)', filter: ['_id'] },
    { name: "an org's entries, newest first (cursor page)", filter: ['org_id'], sort: ['created_at', '_id'], residual: ['(created_at, _id) before the cursor: bounds on the same index'] },
    { name: "a team's entries, newest first (cursor page)", filter: ['org_id', 'team_id'], sort: ['created_at', '_id'] },
    // Both filters: read off the team's index, the action checked on each of the team's entries.
    { name: "a team's entries of one action", filter: ['org_id', 'team_id'], sort: ['created_at', '_id'], residual: ['action'] },
    { name: "an org's entries of one action, newest first", filter: ['org_id', 'action'], sort: ['created_at', '_id'] },
  ],
};

export class AuditLogRepository {
  readonly entries: Collection<AuditEntryDoc>;

  constructor(db: Db) {
    this.entries = db.collection('audit_log');
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.entries, AUDIT_LOG_INDEXES.audit_log);
  }

  /** Records changes about to be made (status pending). */
  async begin(entries: AuditEntryDoc[]): Promise<void> {
    if (entries.length) await this.entries.insertMany(entries, { ordered: false });
  }

  /** Each entry is completed by the one request that began it: a plain update, nothing races it. */
  async complete(ids: string[], outcome: Pick<AuditEntryDoc, 'status' | 'error' | 'changes'>): Promise<void> {
    await this.entries.updateMany({ _id: { $in: ids } }, { $set: { ...outcome, completed_at: new Date() } });
  }

  /** Newest first; `next` is the first entry of the next page. */
  async list(
    orgId: string,
    filter: { teamId?: string; action?: string },
    before: { at: Date; id: string } | null,
    limit: number,
  ): Promise<Page<AuditEntryDoc>> {
    const query: Filter<AuditEntryDoc> = { org_id: orgId };
    if (filter.teamId) query.team_id = filter.teamId;
    if (filter.action) query.action = filter.action;
    if (before) query.$or = [{ created_at: { $lt: before.at } }, { created_at: before.at, _id: { $lte: before.id } }];
    const docs = await this.entries.find(query).sort({ created_at: -1, _id: -1 }).limit(limit + 1).toArray();
    return { items: docs.slice(0, limit), next: docs[limit] ?? null };
  }
}
