import type { Collection, Db, Filter } from 'mongodb';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';
import { logPage, type Page } from '../platform/database/pages';

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
  /** A management key, or a team API key (a lab's refused HL7 message) with management_key_id null. */
  actor: { management_key_id: string | null; header: string; team_api_key_id?: string };
  request_id: string;
  status: AuditStatus;
  error: { status: number; detail: string } | null;
  changes: string[];
  created_at: Date;
  completed_at: Date | null;
}

/** Newest first: entries have time-ordered ids (UUIDv7) and pages come off these indexes in `_id` order (pages.ts). */
export const AUDIT_LOG_INDEXES: Record<'audit_log', IndexSpec[]> = {
  audit_log: [
    { key: { org_id: 1, _id: -1 } },
    { key: { org_id: 1, team_id: 1, _id: -1 } },
    { key: { org_id: 1, action: 1, _id: -1 } },
    { key: { created_at: 1 }, expireAfter: 'auditLog' },
  ],
};
/** Every query AuditLogRepository issues (test/indexes.test.ts). */
export const AUDIT_LOG_QUERY_SHAPES: Record<'audit_log', QueryShape[]> = {
  audit_log: [
    { name: 'entries by id (complete)', filter: ['_id'] },
    { name: "an org's entries, newest first (cursor page)", filter: ['org_id', '_id'], sort: ['_id'] },
    { name: "a team's entries, newest first (cursor page)", filter: ['org_id', 'team_id', '_id'], sort: ['_id'] },
    // Both filters: read off the team's index, the action checked on each of the team's entries.
    { name: "a team's entries of one action", filter: ['org_id', 'team_id', '_id'], sort: ['_id'], residual: ['action'] },
    { name: "an org's entries of one action, newest first", filter: ['org_id', 'action', '_id'], sort: ['_id'] },
  ],
};

export class AuditLogRepository {
  readonly entries: Collection<AuditEntryDoc>;

  constructor(db: Db) {
    this.entries = db.collection('audit_log');
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.entries, AUDIT_LOG_INDEXES.audit_log, retention);
  }

  /** Records changes about to be made (status pending). */
  async begin(entries: AuditEntryDoc[]): Promise<void> {
    if (entries.length) await this.entries.insertMany(entries, { ordered: false });
  }

  /** Each entry is completed by the one request that began it: a plain update, nothing races it. */
  async complete(ids: string[], outcome: Pick<AuditEntryDoc, 'status' | 'error' | 'changes'>): Promise<void> {
    await this.entries.updateMany({ _id: { $in: ids } }, { $set: { ...outcome, completed_at: new Date() } });
  }

  /** Newest first, after the entry `after` (a cursor) when given; the `_id` walk first (pages.ts `logPage`). */
  list(orgId: string, filter: { teamId?: string; action?: string }, after: string | null, limit: number): Promise<Page<AuditEntryDoc>> {
    const query: Filter<AuditEntryDoc> = { org_id: orgId };
    if (filter.teamId) query.team_id = filter.teamId;
    if (filter.action) query.action = filter.action;
    return logPage(this.entries, query, -1, after, limit);
  }
}
