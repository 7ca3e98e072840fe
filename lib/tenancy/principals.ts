import type { ManagementRole } from './model';

/** Who a request acts as, once authenticated (api/middleware/auth.ts): a team API key or a management key. */

export interface TeamPrincipal {
  teamId: string;
  orgId: string;
  keyId: string;
}

/** `Authorization`: a delivery-log page session (`Bearer hbcs_…`), acting as the key that opened it, on one team. */
export type ManagementKeyHeader = 'X-Management-Key' | 'X-Service-Org-Key' | 'Authorization';

export interface ManagementPrincipal {
  keyId: string;
  /** The header the key came in (the audit log records it). */
  header: ManagementKeyHeader;
  orgId: string;
  role: ManagementRole;
  teamIds: string[];
  canAccessTeam(teamId: string): boolean;
  /** 403 unless this key may act on the team. */
  assertTeamAccess(teamId: string): void;
  /** 403 unless this is an org management key. */
  assertOrgAdmin(action: string): void;
}
