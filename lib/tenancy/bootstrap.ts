import type { Config } from '../platform/config';
import { publicBaseUrl } from '../platform/config';
import type { Repositories } from '../repositories';

/** The file other tools read after `npm run dev` (exactly these keys). */
export interface DevCredentials {
  base_url: string;
  org_id: string;
  team_id: string;
  team_api_key: string;
  management_key: string;
  temporal_ui_url: string | null;
}

export async function createOrgWithAdminKey(repos: Repositories, name: string) {
  const org = await repos.tenancy.createOrg(name);
  const key = await repos.tenancy.createManagementKey(org._id, 'bootstrap', 'org_admin', []);
  return { org, managementKey: key.value };
}

/**
 * First start: an org, its org management key, a sandbox team (insurance beta enabled) and a team API key. Later starts reuse
 * the saved credentials while both keys still verify (a wiped database gets a fresh tenant).
 */
export async function ensureDevTenant(
  repos: Repositories,
  config: Config,
  saved: DevCredentials | null,
  temporalUiUrl: string | null,
): Promise<{ credentials: DevCredentials; created: boolean }> {
  const base_url = publicBaseUrl(config);
  if (saved) {
    const [teamKey, mgmtKey] = await Promise.all([repos.tenancy.verifyTeamApiKey(saved.team_api_key), repos.tenancy.verifyManagementKey(saved.management_key)]);
    if (teamKey && mgmtKey && teamKey.team_id === saved.team_id && mgmtKey.org_id === saved.org_id) {
      return { credentials: { ...saved, base_url, temporal_ui_url: temporalUiUrl }, created: false };
    }
  }
  const { org, managementKey } = await createOrgWithAdminKey(repos, 'Dev organisation');
  const team = await repos.tenancy.createTeam(org._id, 'Sandbox team', config.DEPLOYMENT_ENVIRONMENT, config.DEPLOYMENT_REGION);
  const teamKey = await repos.tenancy.createTeamApiKey(team, 'dev');
  // The sandbox team tries everything, the insurance closed beta included (other teams: an org admin enables it).
  await repos.tenancy.setFeatureFlags(team._id, { insurance: true });
  return {
    credentials: {
      base_url,
      org_id: org._id,
      team_id: team._id,
      team_api_key: teamKey.value,
      management_key: managementKey,
      temporal_ui_url: temporalUiUrl,
    },
    created: true,
  };
}
