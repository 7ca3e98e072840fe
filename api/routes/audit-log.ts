import { AuditLogPage, AuditLogQuery, OrgParams } from '../../schemas/management';
import { defineRoute } from '../route';
import { toAuditEntry } from '../../lib/tenancy/audit';
import { afterCursor, cursorPageBody } from '../cursors';
import { managementErrors as errors } from '../management-scope';

export const auditLogRoutes = [
  defineRoute({
    operationId: 'listAuditLog',
    method: 'get',
    path: '/v1/org/{org_id}/audit_log',
    summary: 'List audit log',
    description:
      'Every change made through the management API (organisation, teams, feature flags, management keys, team API keys, custom ' +
      'credentials), newest first: who (management key id), what (action, target, team), when, the request id and the outcome. ' +
      'Needs an org management key. Filter by `team_id` and `action`; page with `next_cursor`.',
    tags: ['Management: organisation'],
    auth: 'management',
    params: OrgParams,
    query: AuditLogQuery,
    responses: { 200: { description: 'Audit entries', schema: AuditLogPage }, ...errors },
    async handler({ auth, query, deps }) {
      auth.assertOrgAdmin('Reading the audit log');
      const page = await deps.repos.auditLog.list(auth.orgId, { teamId: query.team_id, action: query.action }, afterCursor(query.next_cursor), query.limit);
      return { body: cursorPageBody(page, toAuditEntry) };
    },
  }),
];
