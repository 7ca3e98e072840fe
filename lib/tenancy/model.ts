import { ApiError } from '../platform/errors';

/** Orgs, teams and their keys as stored and as the rest of the code sees them (lib/tenancy/store.ts keeps them). */

export interface OrgDoc {
  _id: string;
  name: string;
  created_at: Date;
}

/**
 * An org as stored: its management keys live in its document (an org has few, at most
 * MAX_MANAGEMENT_KEYS_PER_ORG), so "the org keeps an org_admin key" is a rule over one document and every change
 * of the keys is one write conditional on `management_keys_version` (no lock). Orgs stored before keys moved
 * here lack both fields until the start-up migration gives them theirs.
 */
export interface StoredOrg extends OrgDoc {
  management_keys?: StoredManagementKey[];
  /** Bumped by every change of the keys (and by a team's unbinding): the precondition of the next. */
  management_keys_version?: number;
}

export interface BrandInformation {
  company_name: string;
  company_website?: string | null;
  support_email?: string | null;
  support_contact?: string | null;
  company_address?: string | null;
  brand_color?: string | null;
}

/** What a team's owner sets about it besides its name (the reference API's team settings). */
export interface TeamSettings {
  logo_url: string | null;
  brand_information: BrandInformation | null;
  lab_tests_patient_sms_communication_enabled: boolean;
  lab_tests_patient_email_communication_enabled: boolean;
  critical_result_notification_email: string | null;
  reject_duplicate_connection: boolean;
}

/** Features an org admin turns on per team (closed betas). */
export interface TeamFeatureFlags {
  insurance: boolean;
}

/** A change of a team: its name, settings and feature flags (each only if given). */
export type TeamChanges = Partial<TeamSettings> & { name?: string; feature_flags?: Partial<TeamFeatureFlags> };

export interface TeamDoc extends TeamSettings {
  _id: string;
  team_id: string;
  org_id: string;
  name: string;
  environment: string;
  region: string;
  feature_flags: TeamFeatureFlags;
  /** Set when a DELETE began (the deletion then runs to its end, also when repeated after a crash). */
  deletion_started_at: Date | null;
  /** The DELETE deciding about the team now, and until when (a lease: a crashed DELETE's claim lapses). */
  deletion_claim?: string | null;
  deletion_claim_until?: Date | null;
  created_at: Date;
  updated_at: Date;
  /** Bumped by every change of the team's fields: the precondition of the next (absent before the first). */
  version?: number;
}

/** Teams stored by earlier versions lack the settings, flags and deletion mark: read with the defaults. */
export type StoredTeam = Omit<TeamDoc, keyof TeamSettings | 'feature_flags' | 'deletion_started_at'> &
  Partial<TeamSettings> & { feature_flags?: Partial<TeamFeatureFlags>; deletion_started_at?: Date | null };

export const TEAM_SETTING_DEFAULTS: TeamSettings = {
  logo_url: null,
  brand_information: null,
  lab_tests_patient_sms_communication_enabled: true,
  lab_tests_patient_email_communication_enabled: true,
  critical_result_notification_email: null,
  reject_duplicate_connection: false,
};
export const FEATURE_FLAG_DEFAULTS: TeamFeatureFlags = { insurance: false };

export function withDefaults(doc: StoredTeam): TeamDoc;
export function withDefaults(doc: StoredTeam | null): TeamDoc | null;
export function withDefaults(doc: StoredTeam | null): TeamDoc | null {
  if (!doc) return null;
  return { ...TEAM_SETTING_DEFAULTS, deletion_started_at: null, ...doc, feature_flags: { ...FEATURE_FLAG_DEFAULTS, ...doc.feature_flags } };
}

export interface TeamApiKeyDoc {
  _id: string;
  team_id: string;
  org_id: string;
  label: string;
  key_hash: string;
  prefix: string;
  environment: string;
  region: string;
  created_at: Date;
}
export type ManagementRole = 'org_admin' | 'team_admin';
export interface ManagementKeyDoc {
  _id: string;
  org_id: string;
  label: string;
  role: ManagementRole;
  team_ids: string[];
  key_hash: string;
  prefix: string;
  created_at: Date;
}
/** A management key as its org's document holds it (the org is the document's). */
export type StoredManagementKey = Omit<ManagementKeyDoc, 'org_id'>;
/** Keeps an org's document small: keys are for people and services administering it, not for end users. */
export const MAX_MANAGEMENT_KEYS_PER_ORG = 100;
export type ManagementKeyChanges = Partial<Pick<ManagementKeyDoc, 'label' | 'role' | 'team_ids'>>;

/**
 * Why a change of management keys was refused. `actor_not_org_admin`: the key making the request was
 * deleted or demoted by a request that finished first.
 */
export type KeyChangeRefusal = 'not_found' | 'last_org_admin' | 'actor_not_org_admin' | 'too_many_keys' | { unknown_team_ids: string[] };
export type KeyChangeOutcome = { key: ManagementKeyDoc } | { refused: KeyChangeRefusal };

/** A team that a DELETE has begun on takes no other change (its deletion is repeated to finish it). */
export class TeamDeletingError extends ApiError {
  constructor(teamId: string) {
    super(409, `Team ${teamId} is being deleted; repeat its DELETE to finish. It takes no other changes.`);
  }
}
