import { ManagementKeyCreated, ManagementKeyList, Team, TeamApiKeyCreated, TeamApiKeyList, TeamList } from '../schemas/management';
import { createTenant, expectSchema, httpClient, managementClient, startTestApp, type HttpClient, type Tenant, type TestApp } from './support/harness';

let app: TestApp;
let tenant: Tenant;
let mgmt: HttpClient;

beforeAll(async () => {
  app = await startTestApp();
  tenant = await createTenant(app.deps);
  mgmt = managementClient(app, tenant);
});
afterAll(() => app.close());

describe('management API', () => {
  it('creates, reads, renames and lists teams in this deployment', async () => {
    const created = await mgmt.post(`/v1/org/${tenant.orgId}/team`, { name: 'Research' });
    expect(created.status).toBe(200);
    expectSchema(Team, created.body);
    expect(created.body).toMatchObject({ name: 'Research', org_id: tenant.orgId, environment: 'sandbox', region: 'us' });
    const renamed = await mgmt.patch(`/v1/org/${tenant.orgId}/team/${created.body.id}`, { name: 'Research 2' });
    expect(renamed.body.name).toBe('Research 2');
    const list = await mgmt.get(`/v1/org/${tenant.orgId}/team`);
    expectSchema(TeamList, list.body);
    expect(list.body.data.map((t: { id: string }) => t.id)).toEqual(expect.arrayContaining([tenant.teamId, created.body.id]));
    const wrongRegion = await mgmt.post(`/v1/org/${tenant.orgId}/team`, { name: 'EU', region: 'eu' });
    expect(wrongRegion.status).toBe(422);
    expect(wrongRegion.body.detail[0].loc).toEqual(['body', 'region']);
    expect((await mgmt.get(`/v1/org/${tenant.orgId}/team/00000000-0000-4000-8000-000000000000`)).status).toBe(404);
  });

  it('mints team API keys shown once, stored only as hashes', async () => {
    const created = await mgmt.post(`/v1/org/${tenant.orgId}/team_api_keys/sandbox/us`, { team_id: tenant.teamId, label: 'ci' });
    expect(created.status).toBe(200);
    expectSchema(TeamApiKeyCreated, created.body);
    expect(created.body.value.startsWith(created.body.prefix)).toBe(true);
    const list = await mgmt.get(`/v1/org/${tenant.orgId}/team_api_keys/sandbox/us?team_id=${tenant.teamId}`);
    expectSchema(TeamApiKeyList, list.body);
    expect(JSON.stringify(list.body)).not.toContain(created.body.value);
    const stored = await app.deps.repos.tenancy.teamApiKeys.findOne({ _id: created.body.id });
    expect(JSON.stringify(stored)).not.toContain(created.body.value);
    expect(stored?.key_hash).toMatch(/^[0-9a-f]{64}$/);
    const otherDeployment = await mgmt.post(`/v1/org/${tenant.orgId}/team_api_keys/production/eu`, { team_id: tenant.teamId });
    expect(otherDeployment.status).toBe(400);
    expect(otherDeployment.body.detail).toMatch(/serves sandbox\/us/);
  });

  it('manages management keys and refuses to delete the last org key', async () => {
    const bad = await mgmt.post(`/v1/org/${tenant.orgId}/management_key`, { role: 'team_admin', team_role_bindings: [] });
    expect(bad.status).toBe(422);
    const unknownTeam = await mgmt.post(`/v1/org/${tenant.orgId}/management_key`, {
      role: 'team_admin',
      team_role_bindings: [{ team_id: '00000000-0000-4000-8000-000000000000' }],
    });
    expect(unknownTeam.status).toBe(422);
    const second = await mgmt.post(`/v1/org/${tenant.orgId}/management_key`, { role: 'org_admin', label: 'backup' });
    expectSchema(ManagementKeyCreated, second.body);
    const list = await mgmt.get(`/v1/org/${tenant.orgId}/management_key`);
    expectSchema(ManagementKeyList, list.body);
    expect(list.body.data).toHaveLength(2);

    const backup = httpClient(app.url, { 'X-Management-Key': second.body.value });
    const original = list.body.data.find((k: { id: string }) => k.id !== second.body.id);
    expect((await backup.del(`/v1/org/${tenant.orgId}/management_key/${original.id}`)).status).toBe(204);
    expect((await mgmt.get(`/v1/org/${tenant.orgId}/team`)).status).toBe(401);
    const last = await backup.del(`/v1/org/${tenant.orgId}/management_key/${second.body.id}`);
    expect(last.status).toBe(400);
    expect(last.body.detail).toMatch(/last org_admin key/);
  });
});
