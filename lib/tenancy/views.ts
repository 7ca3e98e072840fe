import { isoWithOffset } from '../platform/time';
import type { ManagementKeyDoc, TeamApiKeyDoc, TeamDoc } from './model';

/** Teams and keys as the management API shows them. */

export const toTeam = (t: TeamDoc) => ({
  id: t._id,
  org_id: t.org_id,
  name: t.name,
  environment: t.environment,
  region: t.region,
  logo_url: t.logo_url,
  brand_information: t.brand_information,
  lab_tests_patient_sms_communication_enabled: t.lab_tests_patient_sms_communication_enabled,
  lab_tests_patient_email_communication_enabled: t.lab_tests_patient_email_communication_enabled,
  critical_result_notification_email: t.critical_result_notification_email,
  reject_duplicate_connection: t.reject_duplicate_connection,
  feature_flags: t.feature_flags,
  status: t.deletion_started_at ? ('deleting' as const) : ('active' as const),
  created_at: isoWithOffset(t.created_at),
  updated_at: isoWithOffset(t.updated_at),
});
export const toTeamApiKey = (k: TeamApiKeyDoc) => ({
  id: k._id,
  label: k.label,
  team_id: k.team_id,
  prefix: k.prefix,
  created_at: isoWithOffset(k.created_at),
});
export const toManagementKey = (k: ManagementKeyDoc) => ({
  id: k._id,
  label: k.label,
  role: k.role,
  team_role_bindings: k.team_ids.map((team_id) => ({ team_id })),
  prefix: k.prefix,
  created_at: isoWithOffset(k.created_at),
});
