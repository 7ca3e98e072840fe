import { ApiError } from '../platform/errors';
import type { Logger } from '../platform/logger';
import type { AuditEntryDoc } from './audit-log-store';
import { isoWithOffset } from '../platform/time';
import type { AuditAction } from '../../schemas/management';
import type { Repositories } from '../repositories';
import type { ManagementPrincipal } from './principals';
import { timeOrderedUuid } from '../platform/keys';

/** What one change acts on (a request that changes several things, e.g. deletes several keys, names each). */
export interface AuditTarget {
  action: AuditAction;
  type:
    | 'org'
    | 'team'
    | 'management_key'
    | 'team_api_key'
    | 'team_custom_credentials'
    | 'lab_account'
    | 'lab_result_review'
    | 'webhook'
    | 'webhook_event'
    | 'pipeline'
    | 'pipeline_event'
    | 'console_link';
  id: string;
  teamId: string | null;
}

export interface AuditContext {
  deps: { repos: Repositories };
  /** Who acts: a management key (or a console session, as its key), by id and the header it came in. */
  auth: Pick<ManagementPrincipal, 'orgId' | 'keyId' | 'header'>;
  requestId: string;
  log: Logger;
}

/** The outcome of a refused change as the audit log keeps it (the client got the same). */
function errorOf(err: unknown): { status: number; detail: string } {
  if (!(err instanceof ApiError)) return { status: 500, detail: 'Internal error.' };
  const detail = typeof err.detail === 'string' ? err.detail : (err.detail as { msg?: string }[] | undefined)?.map?.((d) => d.msg).join('; ');
  return { status: err.status, detail: detail ?? err.message };
}

/**
 * Runs a management change between its audit entries: `pending` before (if that cannot be written the change
 * is not made), then `succeeded` with the names of the fields set, or `failed` with the status and detail
 * the client got. A process that dies in between leaves the entry pending: outcome unknown, said as such.
 * Checks that need no change (authorisation, schema) come before, and leave no entry.
 */
export async function audited<T>(
  { deps, auth, requestId, log }: AuditContext,
  targets: AuditTarget | AuditTarget[],
  change: () => Promise<T>,
  changes: string[] = [],
): Promise<T> {
  const entries: AuditEntryDoc[] = (Array.isArray(targets) ? targets : [targets]).map((t) => ({
    _id: timeOrderedUuid(),
    org_id: auth.orgId,
    team_id: t.teamId,
    action: t.action,
    target: { type: t.type, id: t.id },
    actor: { management_key_id: auth.keyId, header: auth.header },
    request_id: requestId,
    status: 'pending',
    error: null,
    changes: [],
    created_at: new Date(),
    completed_at: null,
  }));
  const ids = entries.map((e) => e._id);
  await deps.repos.auditLog.begin(entries);
  const complete = (outcome: Pick<AuditEntryDoc, 'status' | 'error' | 'changes'>) =>
    // The change itself is done (or refused): a failure to record its outcome leaves the entry pending, and
    // must not turn the response into an error the client would retry.
    deps.repos.auditLog.complete(ids, outcome).catch((err) => log.error({ err, audit_entry_ids: ids }, 'audit entry left pending'));
  let result: T;
  try {
    result = await change();
  } catch (err) {
    await complete({ status: 'failed', error: errorOf(err), changes });
    throw err;
  }
  await complete({ status: 'succeeded', error: null, changes });
  return result;
}

export const toAuditEntry = (e: AuditEntryDoc) => ({
  id: e._id,
  org_id: e.org_id,
  team_id: e.team_id,
  action: e.action,
  target: e.target,
  actor: e.actor,
  request_id: e.request_id,
  status: e.status,
  error: e.error,
  changes: e.changes,
  created_at: isoWithOffset(e.created_at),
  completed_at: e.completed_at && isoWithOffset(e.completed_at),
});
