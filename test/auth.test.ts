import { createTenant, httpClient, managementClient, startTestApp, teamClient, uniqueId, type Tenant, type TestApp } from './support/harness';

let app: TestApp;
let tenant: Tenant;
let other: Tenant;

beforeAll(async () => {
  app = await startTestApp({ AUTH_CACHE_TTL_MS: 0 });
  tenant = await createTenant(app.deps, 'Org A');
  other = await createTenant(app.deps, 'Org B');
});
afterAll(() => app.close());

describe('data endpoints (x-service-api-key)', () => {
  it('401 without a key, naming the header to send', async () => {
    const res = await httpClient(app.url).get('/v2/user/');
    expect(res.status).toBe(401);
    expect(res.body.detail).toMatch(/Missing API key.*x-service-api-key/);
  });

  it("accepts x-vital-api-key (the original SDKs' header) as an alias, with the same rules; two different keys are a 400", async () => {
    const alias = await httpClient(app.url, { 'x-vital-api-key': tenant.teamKey }).get('/v2/user/');
    expect(alias.status).toBe(200);
    const both = await httpClient(app.url, { 'x-vital-api-key': tenant.teamKey, 'x-service-api-key': tenant.teamKey }).get('/v2/user/');
    expect(both.status).toBe(200);
    const differing = await httpClient(app.url, { 'x-vital-api-key': other.teamKey, 'x-service-api-key': tenant.teamKey }).get('/v2/user/');
    expect(differing.status).toBe(400);
    expect(differing.body).toEqual({ detail: expect.stringMatching(/Two different API keys: x-service-api-key and x-vital-api-key/) });
    const unknown = await httpClient(app.url, { 'x-vital-api-key': 'sk_us_not-a-real-key' }).get('/v2/user/');
    expect(unknown.status).toBe(401);
    const management = await httpClient(app.url, { 'x-vital-api-key': tenant.managementKey }).get('/v2/user/');
    expect(management.status).toBe(401);
    expect(management.body.detail).toMatch(/Management keys are not accepted on data endpoints/);
    // The alias names the caller's own team: another team's user stays a 404.
    const otherUser = (await teamClient(app, other).post('/v2/user/', { client_user_id: uniqueId('alias') })).body.user_id;
    expect((await httpClient(app.url, { 'x-vital-api-key': tenant.teamKey }).get(`/v2/user/${otherUser}`)).status).toBe(404);
  });

  it('401 for an unknown key', async () => {
    const res = await httpClient(app.url, { 'x-service-api-key': 'sk_us_not-a-real-key' }).get('/v2/user/');
    expect(res.status).toBe(401);
    expect(res.body.detail).toMatch(/Invalid API key/);
  });

  it('401 for a management key, saying management keys are not accepted there', async () => {
    for (const headers of [{ 'x-service-api-key': tenant.managementKey }, { 'X-Management-Key': tenant.managementKey }] as Record<string, string>[]) {
      const res = await httpClient(app.url, headers).get('/v2/providers/');
      expect(res.status).toBe(401);
      expect(res.body.detail).toMatch(/Management keys are not accepted on data endpoints/);
    }
  });

  it('401 for a key minted for another environment or region', async () => {
    for (const key of ['pk_us_abc', 'sk_eu_abc', 'pk_eu_abc']) {
      const res = await httpClient(app.url, { 'x-service-api-key': key }).get('/v2/user/');
      expect(res.status).toBe(401);
      expect(res.body.detail).toMatch(/minted for the .* environment in region .*this deployment serves sandbox\/us/);
    }
  });

  it("isolates teams: another team's user is a 404, and never listed", async () => {
    const mine = teamClient(app, tenant);
    const theirs = teamClient(app, other);
    const user = (await mine.post('/v2/user/', { client_user_id: uniqueId() })).body;
    expect((await theirs.get(`/v2/user/${user.user_id}`)).status).toBe(404);
    expect((await theirs.get(`/v2/user/resolve/${user.client_user_id}`)).status).toBe(404);
    expect((await theirs.patch(`/v2/user/${user.user_id}`, { fallback_time_zone: 'UTC' })).status).toBe(404);
    expect((await theirs.del(`/v2/user/${user.user_id}`)).status).toBe(404);
    expect((await theirs.get('/v2/user/?limit=500')).body.users.map((u: { user_id: string }) => u.user_id)).not.toContain(user.user_id);
    // The same client_user_id is free in another team.
    expect((await theirs.post('/v2/user/', { client_user_id: user.client_user_id })).status).toBe(200);
    expect((await mine.get(`/v2/user/${user.user_id}`)).status).toBe(200);
  });

  it('stops accepting a deleted team API key', async () => {
    const mgmt = managementClient(app, tenant);
    const created = await mgmt.post(`/v1/org/${tenant.orgId}/team_api_keys/sandbox/us`, { team_id: tenant.teamId, label: 'temp' });
    expect(created.status).toBe(200);
    expect(created.body.value).toMatch(/^sk_us_/);
    const temp = httpClient(app.url, { 'x-service-api-key': created.body.value });
    expect((await temp.get('/v2/user/')).status).toBe(200);
    expect((await mgmt.del(`/v1/org/${tenant.orgId}/team_api_keys/sandbox/us?api_key_id=${created.body.id}`)).status).toBe(204);
    expect((await temp.get('/v2/user/')).status).toBe(401);
  });
});

describe('management endpoints (X-Management-Key)', () => {
  it('401 without a key, and for a team API key', async () => {
    const none = await httpClient(app.url).get(`/v1/org/${tenant.orgId}/team`);
    expect(none.status).toBe(401);
    expect(none.body.detail).toMatch(/X-Management-Key/);
    for (const headers of [{ 'X-Management-Key': tenant.teamKey }, { 'x-service-api-key': tenant.teamKey }, { 'x-vital-api-key': tenant.teamKey }] as Record<
      string,
      string
    >[]) {
      const res = await httpClient(app.url, headers).get(`/v1/org/${tenant.orgId}/team`);
      expect(res.status).toBe(401);
      expect(res.body.detail).toMatch(/Team API keys are not accepted on the management API/);
    }
    const bogus = await httpClient(app.url, { 'X-Management-Key': 'mg_nope' }).get(`/v1/org/${tenant.orgId}/team`);
    expect(bogus.status).toBe(401);
    expect(bogus.body.detail).toMatch(/Invalid management key/);
  });

  it('accepts the deprecated X-Service-Org-Key with a Deprecation header', async () => {
    const res = await httpClient(app.url, { 'X-Service-Org-Key': tenant.managementKey }).get(`/v1/org/${tenant.orgId}/team`);
    expect(res.status).toBe(200);
    expect(res.headers.get('deprecation')).toMatch(/^@\d+$/);
    const modern = await managementClient(app, tenant).get(`/v1/org/${tenant.orgId}/team`);
    expect(modern.headers.get('deprecation')).toBeNull();
  });

  it("403 for another organisation's key", async () => {
    const res = await managementClient(app, other).get(`/v1/org/${tenant.orgId}/team`);
    expect(res.status).toBe(403);
    expect(res.body.detail).toMatch(/another organisation/);
  });

  it('403 when a team-scoped key acts outside its teams or at org level', async () => {
    const admin = managementClient(app, tenant);
    const second = (await admin.post(`/v1/org/${tenant.orgId}/team`, { name: 'Second team' })).body;
    const scoped = await admin.post(`/v1/org/${tenant.orgId}/management_key`, {
      label: 'scoped',
      role: 'team_admin',
      team_role_bindings: [{ team_id: tenant.teamId }],
    });
    expect(scoped.status).toBe(200);
    expect(scoped.body.value).toMatch(/^mg_/);
    const key = httpClient(app.url, { 'X-Management-Key': scoped.body.value });

    expect((await key.get(`/v1/org/${tenant.orgId}/team/${tenant.teamId}`)).status).toBe(200);
    const outside = await key.get(`/v1/org/${tenant.orgId}/team/${second.id}`);
    expect(outside.status).toBe(403);
    expect(outside.body.detail).toMatch(/not bound to team/);
    const keyOutside = await key.post(`/v1/org/${tenant.orgId}/team_api_keys/sandbox/us`, { team_id: second.id });
    expect(keyOutside.status).toBe(403);
    const listed = await key.get(`/v1/org/${tenant.orgId}/team`);
    expect(listed.body.data.map((t: { id: string }) => t.id)).toEqual([tenant.teamId]);
    const orgLevel = await key.post(`/v1/org/${tenant.orgId}/team`, { name: 'Nope' });
    expect(orgLevel.status).toBe(403);
    expect(orgLevel.body.detail).toMatch(/organisation management key/);
    expect((await key.get(`/v1/org/${tenant.orgId}/management_key`)).status).toBe(403);
  });
});
