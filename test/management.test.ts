import { randomUUID } from 'node:crypto';
import { audited } from '../lib/tenancy/audit';
import { FieldCipher, generateDataKey } from '../lib/platform/field-encryption';
import { createLogger } from '../lib/platform/logger';
import { CustomCredentialsRepository, type CustomCredentialsInput } from '../lib/tenancy/custom-credentials-store';
import { MAX_MANAGEMENT_KEYS_PER_ORG } from '../lib/tenancy/model';
import {
  AuditLogPage,
  CustomCredentials,
  CustomCredentialsList,
  ManagementKey,
  ManagementKeyCreated,
  ManagementKeyList,
  Org,
  Team,
  TeamApiKeyCreated,
  TeamApiKeyList,
  TeamList,
} from '../schemas/management';
import {
  createTenant,
  expectSchema,
  httpClient,
  managementClient,
  startTestApp,
  uniqueId,
  type HttpClient,
  type Tenant,
  type TestApp,
  ownDatabase,
} from './support/harness';

/** Warnings and errors the api logged (the deprecated header's warning is asserted on). */
const logLines: string[] = [];
let app: TestApp;
let tenant: Tenant;
let mgmt: HttpClient;

beforeAll(async () => {
  // Verified team keys cached (AUTH_CACHE_TTL_MS 5 s) on purpose: a key revoked through this process must stop
  // working at once despite the cache.
  const sink = {
    write(line: string) {
      logLines.push(line);
      if (JSON.parse(line).level >= 50) process.stderr.write(line); // errors stay visible in the test output
    },
  };
  app = await startTestApp({ AUTH_CACHE_TTL_MS: 5000 }, { logger: createLogger('warn', 'api-test', sink) });
  tenant = await createTenant(app.deps);
  mgmt = managementClient(app, tenant);
});
afterAll(() => app.close());

const org = (t: Tenant, path = '') => `/v1/org/${t.orgId}${path}`;
const keyClient = (value: string) => httpClient(app.url, { 'X-Management-Key': value });

async function createTeam(client: HttpClient, t: Tenant, body: Record<string, unknown> = {}) {
  const res = await client.post(org(t, '/team'), { name: uniqueId('team'), ...body });
  expect(res.status).toBe(200);
  expectSchema(Team, res.body);
  return res.body as Team;
}

async function createManagementKey(client: HttpClient, t: Tenant, body: Record<string, unknown>) {
  const res = await client.post(org(t, '/management_key'), body);
  expect(res.status).toBe(200);
  expectSchema(ManagementKeyCreated, res.body);
  return res.body as { id: string; value: string; role: string; team_role_bindings: { team_id: string }[] };
}

const teamAdminKey = (client: HttpClient, t: Tenant, teamIds: string[]) =>
  createManagementKey(client, t, { role: 'team_admin', label: 'scoped', team_role_bindings: teamIds.map((team_id) => ({ team_id })) });

async function orgAdminKeyCount(orgId: string): Promise<number> {
  const org = await app.inspect.collection<{ management_keys: { role: string }[] }>('orgs').findOne({ _id: orgId as never });
  return org?.management_keys.filter((k) => k.role === 'org_admin').length ?? 0;
}

describe('organisation', () => {
  it('is read and renamed with an org key; a team key may do neither at org level', async () => {
    const t = await createTenant(app.deps, 'Rename me');
    const admin = managementClient(app, t);
    const renamed = await admin.patch(org(t), { name: 'Renamed org' });
    expect(renamed.status).toBe(200);
    expectSchema(Org, renamed.body);
    expect(renamed.body).toMatchObject({ id: t.orgId, name: 'Renamed org' });
    expect((await admin.get(org(t))).body.name).toBe('Renamed org');

    const invalid = await admin.patch(org(t), { name: '' });
    expect(invalid.status).toBe(422);
    expect(invalid.body.detail[0].loc).toEqual(['body', 'name']);

    const scoped = keyClient((await teamAdminKey(admin, t, [t.teamId])).value);
    const refused = await scoped.patch(org(t), { name: 'Taken over' });
    expect(refused.status).toBe(403);
    expect(refused.body.detail).toMatch(/cannot act at organisation level/);
    expect((await admin.get(org(t))).body.name).toBe('Renamed org');
  });
});

describe('teams', () => {
  it('creates, reads, renames and lists teams in this deployment, with the default settings', async () => {
    const created = await mgmt.post(org(tenant, '/team'), { name: 'Research' });
    expect(created.status).toBe(200);
    expectSchema(Team, created.body);
    expect(created.body).toMatchObject({
      name: 'Research',
      org_id: tenant.orgId,
      environment: 'sandbox',
      region: 'us',
      logo_url: null,
      brand_information: null,
      lab_tests_patient_sms_communication_enabled: true,
      lab_tests_patient_email_communication_enabled: true,
      critical_result_notification_email: null,
      reject_duplicate_connection: false,
      feature_flags: { insurance: false },
      status: 'active',
    });
    const renamed = await mgmt.patch(org(tenant, `/team/${created.body.id}`), { name: 'Research 2' });
    expect(renamed.body.name).toBe('Research 2');
    const list = await mgmt.get(org(tenant, '/team'));
    expectSchema(TeamList, list.body);
    expect(list.body.data.map((t: { id: string }) => t.id)).toEqual(expect.arrayContaining([tenant.teamId, created.body.id]));
    const wrongRegion = await mgmt.post(org(tenant, '/team'), { name: 'EU', region: 'eu' });
    expect(wrongRegion.status).toBe(422);
    expect(wrongRegion.body.detail[0].loc).toEqual(['body', 'region']);
    expect((await mgmt.get(org(tenant, '/team/00000000-0000-4000-8000-000000000000'))).status).toBe(404);
  });

  it('racing PATCHes of a team settle in the database: a rule across fields holds, nothing is lost', async () => {
    const brand = { company_name: 'Race Health', support_email: 'help@race.example', brand_color: '#445566' };
    for (let round = 0; round < 5; round++) {
      const team = (await mgmt.post(org(tenant, '/team'), { name: `Race ${round}`, logo_url: 'https://race.example/logo.png' })).body;
      // Each is valid alone; together they would leave brand information without its logo.
      const [addBrand, dropLogo] = await Promise.all([
        mgmt.patch(org(tenant, `/team/${team.id}`), { brand_information: brand }),
        mgmt.patch(org(tenant, `/team/${team.id}`), { logo_url: null }),
      ]);
      expect([addBrand.status, dropLogo.status].sort()).toEqual([200, 422]);
      const stored = (await mgmt.get(org(tenant, `/team/${team.id}`))).body;
      expect(stored.brand_information === null || stored.logo_url !== null).toBe(true);
      // Changes of different fields at once: both land.
      const [renamed, sms] = await Promise.all([
        mgmt.patch(org(tenant, `/team/${team.id}`), { name: `Renamed ${round}` }),
        mgmt.patch(org(tenant, `/team/${team.id}`), { lab_tests_patient_sms_communication_enabled: false }),
      ]);
      expect([renamed.status, sms.status]).toEqual([200, 200]);
      expect((await mgmt.get(org(tenant, `/team/${team.id}`))).body).toMatchObject({
        name: `Renamed ${round}`,
        lab_tests_patient_sms_communication_enabled: false,
      });
    }
  });

  it('takes brand information (with a logo) and settings at creation and by PATCH', async () => {
    const brand = { company_name: 'Acme Health', support_email: 'help@acme.example', brand_color: '#112233' };
    const noLogo = await mgmt.post(org(tenant, '/team'), { name: 'Branded', brand_information: brand });
    expect(noLogo.status).toBe(422);
    expect(noLogo.body.detail).toEqual([expect.objectContaining({ loc: ['body', 'logo_url'] })]);
    const badColour = await mgmt.post(org(tenant, '/team'), {
      name: 'Branded',
      brand_information: { ...brand, brand_color: 'red' },
      logo_url: 'https://acme.example/logo.png',
    });
    expect(badColour.status).toBe(422);
    expect(badColour.body.detail[0].loc).toEqual(['body', 'brand_information', 'brand_color']);

    const team = await createTeam(mgmt, tenant, {
      brand_information: brand,
      logo_url: 'https://acme.example/logo.png',
      lab_tests_patient_sms_communication_enabled: false,
      critical_result_notification_email: 'oncall@acme.example',
      reject_duplicate_connection: true,
    });
    expect(team).toMatchObject({
      brand_information: brand,
      logo_url: 'https://acme.example/logo.png',
      lab_tests_patient_sms_communication_enabled: false,
      lab_tests_patient_email_communication_enabled: true,
      critical_result_notification_email: 'oncall@acme.example',
      reject_duplicate_connection: true,
    });

    // Only the fields given change; the logo cannot go while a company name needs it.
    const patched = await mgmt.patch(org(tenant, `/team/${team.id}`), { lab_tests_patient_email_communication_enabled: false });
    expect(patched.status).toBe(200);
    expectSchema(Team, patched.body);
    expect(patched.body).toMatchObject({
      name: team.name,
      brand_information: brand,
      lab_tests_patient_sms_communication_enabled: false,
      lab_tests_patient_email_communication_enabled: false,
    });
    const logoGone = await mgmt.patch(org(tenant, `/team/${team.id}`), { logo_url: null });
    expect(logoGone.status).toBe(422);
    expect(logoGone.body.detail[0].loc).toEqual(['body', 'logo_url']);
    const unbranded = await mgmt.patch(org(tenant, `/team/${team.id}`), { brand_information: null, logo_url: null });
    expect(unbranded.body).toMatchObject({ brand_information: null, logo_url: null });
    expect((await mgmt.get(org(tenant, `/team/${team.id}`))).body).toMatchObject({ brand_information: null, reject_duplicate_connection: true });
  });

  it('feature flags: off by default, set by org keys only, read by the repository the data routes use', async () => {
    const team = await createTeam(mgmt, tenant);
    expect(team.feature_flags).toEqual({ insurance: false });
    expect((await app.deps.repos.tenancy.findTeamById(team.id))?.feature_flags).toEqual({ insurance: false });

    const on = await mgmt.patch(org(tenant, `/team/${team.id}/feature_flags`), { insurance: true });
    expect(on.status).toBe(200);
    expectSchema(Team, on.body);
    expect(on.body.feature_flags).toEqual({ insurance: true });
    expect((await app.deps.repos.tenancy.findTeamById(team.id))?.feature_flags?.insurance).toBe(true);

    const scoped = keyClient((await teamAdminKey(mgmt, tenant, [team.id])).value);
    const refused = await scoped.patch(org(tenant, `/team/${team.id}/feature_flags`), { insurance: false });
    expect(refused.status).toBe(403);
    expect(refused.body.detail).toMatch(/Setting feature flags needs an organisation management key/);
    // A team key renames its team; the flags stay as the org set them.
    expect((await scoped.patch(org(tenant, `/team/${team.id}`), { name: 'Renamed by its admin' })).body.feature_flags).toEqual({ insurance: true });

    // Also in the team PATCH (where the insurance 403 points), org keys only; recorded as a flag change of its own.
    expect((await scoped.patch(org(tenant, `/team/${team.id}`), { feature_flags: { insurance: false } })).status).toBe(403);
    const both = await mgmt.patch(
      org(tenant, `/team/${team.id}`),
      { name: 'Flagged', feature_flags: { insurance: false } },
      { 'x-request-id': `flags-${team.id}` },
    );
    expect(both.body).toMatchObject({ name: 'Flagged', feature_flags: { insurance: false } });
    const entries = (await mgmt.get(org(tenant, `/audit_log?team_id=${team.id}`))).body.data.filter(
      (e: { request_id: string }) => e.request_id === `flags-${team.id}`,
    );
    expect(entries.map((e: { action: string }) => e.action).sort()).toEqual(['team.feature_flags.update', 'team.update']);
    expect(entries[0].changes.sort()).toEqual(['feature_flags.insurance', 'name']);
    await mgmt.patch(org(tenant, `/team/${team.id}`), { feature_flags: { insurance: true } });
    expect((await app.deps.repos.tenancy.findTeamById(team.id))?.feature_flags).toEqual({ insurance: true });

    // The dev seed script's way in.
    await app.deps.repos.tenancy.setFeatureFlags(team.id, { insurance: false });
    expect((await mgmt.get(org(tenant, `/team/${team.id}`))).body.feature_flags).toEqual({ insurance: false });
    await expect(app.deps.repos.tenancy.setFeatureFlags(randomUUID(), { insurance: true })).rejects.toThrow(/no team/);
  });

  it('deletes a team only without users and webhook endpoints; its keys stop at once; a repeated DELETE finishes an interrupted one', async () => {
    const t = await createTenant(app.deps, 'Deleting');
    const admin = managementClient(app, t);
    const team = await createTeam(admin, t);
    const other = await createTeam(admin, t);
    const key = (await admin.post(org(t, '/team_api_keys/sandbox/us'), { team_id: team.id })).body;
    const data = httpClient(app.url, { 'x-service-api-key': key.value });
    const user = (await data.post('/v2/user/', { client_user_id: uniqueId() })).body;
    const hook = (await admin.post(org(t, `/team/${team.id}/sandbox/webhook`), { url: 'http://127.0.0.1:9/hook' })).body;
    await admin.post(org(t, '/team_custom_credentials/sandbox/us'), {
      team_id: team.id,
      provider: 'oura',
      client_id: 'cid',
      client_secret: 'a-long-client-secret',
    });
    const scoped = await teamAdminKey(admin, t, [team.id, other.id]);

    const refused = await admin.del(org(t, `/team/${team.id}`));
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toMatch(/still has 1 user and 1 webhook endpoint/);
    expect((await keyClient(scoped.value).del(org(t, `/team/${team.id}`))).status).toBe(403);

    // A user pending deletion does not block (it is erased on schedule).
    expect((await data.del(`/v2/user/${user.user_id}`)).status).toBe(200);
    expect((await admin.del(org(t, `/team/${team.id}/sandbox/webhook/${hook.id}`))).status).toBe(204);

    // A DELETE that stopped after marking the team (a crash): the team says so and takes no changes.
    const begun = await app.deps.repos.tenancy.beginTeamDeletion(t.orgId, team.id, async () => []);
    expect(begun).toHaveProperty('team');
    // While the crashed DELETE's claim holds, another DELETE waits briefly and answers 503 with when to retry.
    const early = await admin.del(org(t, `/team/${team.id}`));
    expect(early.status).toBe(503);
    expect(Number(early.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(early.body.detail).toMatch(/Another DELETE of team .* under way/);
    // The claim lapses (15 s after the crash; moved to the past here rather than waited for).
    await app.inspect.collection('teams').updateOne({ _id: team.id as never }, { $set: { deletion_claim_until: new Date(0) } });
    expect((await admin.get(org(t, `/team/${team.id}`))).body.status).toBe('deleting');
    const blockedPatch = await admin.patch(org(t, `/team/${team.id}`), { name: 'Too late' });
    expect(blockedPatch.status).toBe(409);
    expect(blockedPatch.body.detail).toMatch(/being deleted; repeat its DELETE/);
    expect((await admin.post(org(t, '/team_api_keys/sandbox/us'), { team_id: team.id })).status).toBe(409);
    expect((await admin.post(org(t, `/team/${team.id}/sandbox/webhook`), { url: 'http://127.0.0.1:9/late' })).status).toBe(409);
    // Its key still authenticates until the DELETE revokes it, but a user created now is taken back.
    const lateClientUserId = uniqueId('late');
    const late = await data.post('/v2/user/', { client_user_id: lateClientUserId });
    expect(late.status).toBe(409);
    expect(late.body.detail).toMatch(/being deleted; the user was not created/);
    expect(await app.inspect.collection('users').countDocuments({ team_id: team.id, client_user_id: lateClientUserId })).toBe(0);
    // Nor is a deleted user restored into it: the undo is refused and the user stays pending (erased on schedule).
    const undo = await data.post(`/v2/user/undo_delete?user_id=${user.user_id}`);
    expect(undo.status).toBe(409);
    expect(undo.body.detail).toMatch(/not restored: your team is being deleted/);
    expect(await app.inspect.collection('users').findOne({ _id: user.user_id })).toMatchObject({ status: 'pending_deletion' });

    expect((await admin.del(org(t, `/team/${team.id}`))).status).toBe(204);
    const revoked = await data.get('/v2/user/');
    expect(revoked.status).toBe(401);
    expect((await admin.get(org(t, `/team/${team.id}`))).status).toBe(404);
    expect((await admin.del(org(t, `/team/${team.id}`))).status).toBe(404);
    expect(await app.inspect.collection('team_api_keys').countDocuments({ team_id: team.id })).toBe(0);
    expect(await app.inspect.collection('team_custom_credentials').countDocuments({ team_id: team.id })).toBe(0);
    const keys = (await admin.get(org(t, '/management_key'))).body.data as { id: string; team_role_bindings: { team_id: string }[] }[];
    expect(keys.find((k) => k.id === scoped.id)?.team_role_bindings).toEqual([{ team_id: other.id }]);
  });
});

describe('team deletion racing user creation', () => {
  it('never leaves a user behind in a deleted team, whichever finishes first', async () => {
    const t = await createTenant(app.deps, 'Deletion race');
    const admin = managementClient(app, t);
    const outcomes: string[] = [];
    for (const delayMs of [0, 1, 3, 6, 10, 20, 50, 150]) {
      const team = await createTeam(admin, t);
      const key = (await admin.post(org(t, '/team_api_keys/sandbox/us'), { team_id: team.id })).body;
      const data = httpClient(app.url, { 'x-service-api-key': key.value });
      const creations = Array.from({ length: 6 }, async (_, i) => {
        await new Promise((r) => setTimeout(r, delayMs + i));
        return data.post('/v2/user/', { client_user_id: uniqueId('racer') });
      });
      const [deletion, ...created] = await Promise.all([admin.del(org(t, `/team/${team.id}`)), ...creations]);
      expect([204, 409]).toContain(deletion.status);
      for (const res of created) expect([200, 401, 409]).toContain(res.status);
      const stored = await app.inspect.collection('users').countDocuments({ team_id: team.id });
      if (deletion.status === 204) {
        expect({ delayMs, stored }).toEqual({ delayMs, stored: 0 });
        expect(created.filter((r) => r.status === 200)).toEqual([]);
      } else {
        // Refused: the team lives on with exactly the users whose creation succeeded.
        expect((await admin.get(org(t, `/team/${team.id}`))).body.status).not.toBe('deleting');
        expect({ delayMs, stored }).toEqual({ delayMs, stored: created.filter((r) => r.status === 200).length });
      }
      outcomes.push(`${deletion.status}:${created.map((r) => r.status).join(',')}`);
    }
    // Both ends of the race were seen: a DELETE that won before any user and one refused because of them.
    expect(outcomes.some((o) => o.startsWith('204'))).toBe(true);
    expect(outcomes.some((o) => o.startsWith('409'))).toBe(true);
  });
});

describe('team deletion racing what hangs off the team', () => {
  it('leaves no key, credential, endpoint or management-key binding behind in a deleted team', async () => {
    const t = await createTenant(app.deps, 'Deletion race 2');
    const admin = managementClient(app, t);
    const outcomes: string[] = [];
    for (const delayMs of [0, 1, 2, 4, 8, 15, 40]) {
      const team = await createTeam(admin, t);
      const after = (ms: number, send: () => Promise<{ status: number }>) => new Promise((r) => setTimeout(r, ms)).then(send);
      const [deletion, ...created] = await Promise.all([
        admin.del(org(t, `/team/${team.id}`)),
        after(delayMs, () => admin.post(org(t, '/team_api_keys/sandbox/us'), { team_id: team.id })),
        after(delayMs, () =>
          admin.post(org(t, '/team_custom_credentials/sandbox/us'), {
            team_id: team.id,
            provider: 'oura',
            client_id: 'cid',
            client_secret: 'a-long-client-secret',
          }),
        ),
        after(delayMs, () => admin.post(org(t, '/management_key'), { role: 'team_admin', label: 'racer', team_role_bindings: [{ team_id: team.id }] })),
        after(delayMs + 1, () => admin.post(org(t, `/team/${team.id}/sandbox/webhook`), { url: 'http://127.0.0.1:9/racer' })),
        // A second DELETE of the same team: waits for the first's claim, then finds the team gone (404) or refused.
        after(delayMs, () => admin.del(org(t, `/team/${team.id}`))),
      ]);
      expect([204, 404, 409]).toContain(deletion.status);
      for (const res of created) expect([200, 204, 404, 409, 422]).toContain(res.status);
      const teamGone = (await admin.get(org(t, `/team/${team.id}`))).status === 404;
      const left = {
        delayMs,
        keys: await app.inspect.collection('team_api_keys').countDocuments({ team_id: team.id }),
        credentials: await app.inspect.collection('team_custom_credentials').countDocuments({ team_id: team.id }),
        endpoints: await app.inspect.collection('webhook_endpoints').countDocuments({ team_id: team.id }),
        bindings: ((await admin.get(org(t, '/management_key'))).body.data as { team_role_bindings: { team_id: string }[] }[]).filter((k) =>
          k.team_role_bindings.some((b) => b.team_id === team.id),
        ).length,
      };
      if (teamGone) {
        expect(left).toEqual({ delayMs, keys: 0, credentials: 0, endpoints: 0, bindings: 0 });
      } else {
        // Refused (an endpoint was created first): the team lives on, not marked, with what was created.
        expect((await admin.get(org(t, `/team/${team.id}`))).body.status).not.toBe('deleting');
        expect(left.endpoints).toBe(1);
        await admin.del(org(t, `/team/${team.id}/sandbox/webhook/${(await admin.get(org(t, `/team/${team.id}/sandbox/webhook`))).body.data[0].id}`));
      }
      outcomes.push(`${teamGone ? 'deleted' : 'kept'}:${created.map((r) => r.status).join(',')}`);
    }
    expect(outcomes.some((o) => o.startsWith('deleted'))).toBe(true);
  });
});

describe('team API keys', () => {
  it('are shown once and stored only as hashes', async () => {
    const created = await mgmt.post(org(tenant, '/team_api_keys/sandbox/us'), { team_id: tenant.teamId, label: 'ci' });
    expect(created.status).toBe(200);
    expectSchema(TeamApiKeyCreated, created.body);
    expect(created.body.value.startsWith(created.body.prefix)).toBe(true);
    const list = await mgmt.get(org(tenant, `/team_api_keys/sandbox/us?team_id=${tenant.teamId}`));
    expectSchema(TeamApiKeyList, list.body);
    expect(JSON.stringify(list.body)).not.toContain(created.body.value);
    const stored = await app.inspect.collection('team_api_keys').findOne({ _id: created.body.id as never });
    expect(JSON.stringify(stored)).not.toContain(created.body.value);
    expect(stored?.key_hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('are managed for this deployment only; keys of another environment are refused on data endpoints', async () => {
    const otherDeployment = await mgmt.post(org(tenant, '/team_api_keys/production/eu'), { team_id: tenant.teamId });
    expect(otherDeployment.status).toBe(400);
    expect(otherDeployment.body.detail).toMatch(/serves sandbox\/us/);
    expect((await mgmt.get(org(tenant, '/team_api_keys/production/us'))).status).toBe(400);
    const badPath = await mgmt.get(org(tenant, '/team_api_keys/staging/us'));
    expect(badPath.status).toBe(422);
    expect(badPath.body.detail[0].loc).toEqual(['path', 'environment']);

    // A key minted for a production team (another deployment's) is refused here, naming where it belongs.
    const productionTeam = await app.deps.repos.tenancy.createTeam(tenant.orgId, 'Production team', 'production', 'us');
    const productionKey = await app.deps.repos.tenancy.createTeamApiKey(productionTeam, 'prod');
    expect(productionKey.value).toMatch(/^pk_us_/);
    const res = await httpClient(app.url, { 'x-service-api-key': productionKey.value }).get('/v2/user/');
    expect(res.status).toBe(401);
    expect(res.body.detail).toMatch(/minted for the production environment in region us/);
  });

  it('a deleted key is refused by the very next request, although verified keys are cached', async () => {
    const created = (await mgmt.post(org(tenant, '/team_api_keys/sandbox/us'), { team_id: tenant.teamId, label: 'temp' })).body;
    const temp = httpClient(app.url, { 'x-service-api-key': created.value });
    expect((await temp.get('/v2/user/')).status).toBe(200);
    expect((await temp.get('/v2/user/')).status).toBe(200); // now served from the cache
    expect((await mgmt.del(org(tenant, `/team_api_keys/sandbox/us?api_key_id=${created.id}`))).status).toBe(204);
    const after = await temp.get('/v2/user/');
    expect(after.status).toBe(401);
    expect(after.body.detail).toMatch(/Invalid API key/);
    expect((await mgmt.del(org(tenant, `/team_api_keys/sandbox/us?api_key_id=${created.id}`))).status).toBe(404);
  });

  it('a key revoked through one api process is refused by another within AUTH_CACHE_TTL_MS (1 s by default)', async () => {
    const apiOne = await startTestApp();
    const apiTwo = await startTestApp();
    try {
      expect(apiTwo.deps.config.AUTH_CACHE_TTL_MS).toBe(1000);
      const created = (await managementClient(apiOne, tenant).post(org(tenant, '/team_api_keys/sandbox/us'), { team_id: tenant.teamId, label: 'replica-ttl' }))
        .body;
      const onTwo = httpClient(apiTwo.url, { 'x-service-api-key': created.value });
      expect((await onTwo.get('/v2/user/')).status).toBe(200); // verified, cached on the second process
      const cachedAt = Date.now();
      expect((await managementClient(apiOne, tenant).del(org(tenant, `/team_api_keys/sandbox/us?api_key_id=${created.id}`))).status).toBe(204);
      expect((await httpClient(apiOne.url, { 'x-service-api-key': created.value }).get('/v2/user/')).status).toBe(401); // the revoking process: at once
      // The other replica's entry ends a second after it was made: from then on the key is read again, and refused.
      await new Promise((r) => setTimeout(r, Math.max(0, cachedAt + 1000 - Date.now()) + 50));
      expect((await onTwo.get('/v2/user/')).status).toBe(401);
    } finally {
      await apiOne.close();
      await apiTwo.close();
    }
  });

  it('a key in steady use is re-read ahead of its expiry, and still refused by another process within a second of its revocation', async () => {
    const apiOne = await startTestApp();
    const apiTwo = await startTestApp();
    try {
      const created = (
        await managementClient(apiOne, tenant).post(org(tenant, '/team_api_keys/sandbox/us'), { team_id: tenant.teamId, label: 'refresh-ahead' })
      ).body;
      const onTwo = httpClient(apiTwo.url, { 'x-service-api-key': created.value });
      const statusesFor = async (ms: number) => {
        const seen: { at: number; status: number }[] = [];
        for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) {
          seen.push({ at: Date.now(), status: (await onTwo.get('/v2/user/')).status });
        }
        return seen;
      };
      // Over three TTLs of steady use the entry is renewed in the background: every request is let in.
      expect(new Set((await statusesFor(3000)).map((s) => s.status))).toEqual(new Set([200]));
      const revokedAt = Date.now();
      expect((await managementClient(apiOne, tenant).del(org(tenant, `/team_api_keys/sandbox/us?api_key_id=${created.id}`))).status).toBe(204);
      // Still in steady use on the other process: refused within the TTL of the deletion (plus the 50 ms between two
      // requests and one request's time), and from then on.
      const after = await statusesFor(1500);
      const firstRefused = after.findIndex((s) => s.status === 401);
      expect(firstRefused).toBeGreaterThanOrEqual(0);
      expect(after[firstRefused].at - revokedAt).toBeLessThanOrEqual(1100);
      expect(new Set(after.slice(firstRefused).map((s) => s.status))).toEqual(new Set([401]));
    } finally {
      await apiOne.close();
      await apiTwo.close();
    }
  });

  it('with AUTH_CACHE_TTL_MS=0 a key revoked through one api process is refused at once by another (every request reads the key)', async () => {
    const apiOne = await startTestApp({ AUTH_CACHE_TTL_MS: 0 });
    const apiTwo = await startTestApp({ AUTH_CACHE_TTL_MS: 0 });
    try {
      expect(apiTwo.deps.config.AUTH_CACHE_TTL_MS).toBe(0);
      const created = (
        await managementClient(apiOne, tenant).post(org(tenant, '/team_api_keys/sandbox/us'), { team_id: tenant.teamId, label: 'two-processes' })
      ).body;
      const onTwo = httpClient(apiTwo.url, { 'x-service-api-key': created.value });
      expect((await onTwo.get('/v2/user/')).status).toBe(200);
      expect((await onTwo.get('/v2/user/')).status).toBe(200);
      expect((await managementClient(apiOne, tenant).del(org(tenant, `/team_api_keys/sandbox/us?api_key_id=${created.id}`))).status).toBe(204);
      expect((await onTwo.get('/v2/user/')).status).toBe(401);
    } finally {
      await apiOne.close();
      await apiTwo.close();
    }
  });

  it('concurrent creations all succeed with distinct values', async () => {
    const results = await Promise.all(
      Array.from({ length: 4 }, (_, i) => mgmt.post(org(tenant, '/team_api_keys/sandbox/us'), { team_id: tenant.teamId, label: `parallel-${i}` })),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(new Set(results.map((r) => r.body.value)).size).toBe(4);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(4);
    for (const r of results) expect((await httpClient(app.url, { 'x-service-api-key': r.body.value }).get('/v2/user/')).status).toBe(200);
  });
});

describe('management keys', () => {
  it('are listed and created by org keys; invalid bindings are a 422 naming the field', async () => {
    const t = await createTenant(app.deps, 'Keys');
    const admin = managementClient(app, t);
    const bad = await admin.post(org(t, '/management_key'), { role: 'team_admin', team_role_bindings: [] });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(['body', 'team_role_bindings']);
    const unknownTeam = await admin.post(org(t, '/management_key'), { role: 'team_admin', team_role_bindings: [{ team_id: randomUUID() }] });
    expect(unknownTeam.status).toBe(422);
    expect(unknownTeam.body.detail[0]).toMatchObject({ loc: ['body', 'team_role_bindings'], msg: expect.stringMatching(/Unknown team/) });
    const second = await createManagementKey(admin, t, { role: 'org_admin', label: 'backup' });
    const list = await admin.get(org(t, '/management_key'));
    expectSchema(ManagementKeyList, list.body);
    expect(list.body.data).toHaveLength(2);
    expect(JSON.stringify(list.body)).not.toContain(second.value);

    const backup = keyClient(second.value);
    const original = list.body.data.find((k: { id: string }) => k.id !== second.id);
    expect((await backup.del(org(t, `/management_key/${original.id}`))).status).toBe(204);
    expect((await admin.get(org(t, '/team'))).status).toBe(401);
    const last = await backup.del(org(t, `/management_key/${second.id}`));
    expect(last.status).toBe(409);
    expect(last.body.detail).toMatch(/last org_admin key/);
    const demoteLast = await backup.patch(org(t, `/management_key/${second.id}`), { role: 'team_admin', team_role_bindings: [{ team_id: t.teamId }] });
    expect(demoteLast.status).toBe(409);
    expect(await orgAdminKeyCount(t.orgId)).toBe(1);
  });

  it('are updated (label, role, bindings); a key bound to two teams acts on both and nowhere else', async () => {
    const t = await createTenant(app.deps, 'Multi-team');
    const admin = managementClient(app, t);
    const [a, b] = [await createTeam(admin, t), await createTeam(admin, t)];
    const key = await teamAdminKey(admin, t, [a.id]);
    const scoped = keyClient(key.value);
    expect((await scoped.get(org(t, `/team/${b.id}`))).status).toBe(403);

    const rebound = await admin.patch(org(t, `/management_key/${key.id}`), { label: 'two teams', team_role_bindings: [{ team_id: a.id }, { team_id: b.id }] });
    expect(rebound.status).toBe(200);
    expectSchema(ManagementKey, rebound.body);
    expect(rebound.body).toMatchObject({ label: 'two teams', role: 'team_admin', team_role_bindings: [{ team_id: a.id }, { team_id: b.id }] });
    for (const team of [a, b]) expect((await scoped.get(org(t, `/team/${team.id}`))).status).toBe(200);
    const outside = await scoped.get(org(t, `/team/${t.teamId}`));
    expect(outside.status).toBe(403);
    expect(outside.body.detail).toMatch(/not bound to team/);
    expect((await scoped.get(org(t, '/team'))).body.data.map((x: Team) => x.id).sort()).toEqual([a.id, b.id].sort());
    const keyForB = await scoped.post(org(t, '/team_api_keys/sandbox/us'), { team_id: b.id });
    expect(keyForB.status).toBe(200);
    expect((await scoped.post(org(t, '/team_api_keys/sandbox/us'), { team_id: t.teamId })).status).toBe(403);
    expect((await scoped.get(org(t, `/team_api_keys/sandbox/us?team_id=${t.teamId}`))).status).toBe(403);

    // Created with two bindings straight away (the API is the only way to such a key).
    const direct = await teamAdminKey(admin, t, [a.id, b.id]);
    expect(direct.team_role_bindings).toHaveLength(2);

    // The role rules hold for the key as it is after the change.
    const orgWithBindings = await admin.patch(org(t, `/management_key/${key.id}`), { role: 'org_admin', team_role_bindings: [{ team_id: a.id }] });
    expect(orgWithBindings.status).toBe(422);
    expect(orgWithBindings.body.detail[0].loc).toEqual(['body', 'team_role_bindings']);
    const teamWithout = await admin.patch(org(t, `/management_key/${key.id}`), { team_role_bindings: [] });
    expect(teamWithout.status).toBe(422);
    const unknown = await admin.patch(org(t, `/management_key/${key.id}`), { team_role_bindings: [{ team_id: randomUUID() }] });
    expect(unknown.status).toBe(422);
    expect((await admin.patch(org(t, `/management_key/${randomUUID()}`), { label: 'x' })).status).toBe(404);
    const promoted = await admin.patch(org(t, `/management_key/${key.id}`), { role: 'org_admin' });
    expect(promoted.body).toMatchObject({ role: 'org_admin', team_role_bindings: [] });
    expect((await scoped.get(org(t, `/team/${t.teamId}`))).status).toBe(200);
  });

  it('a team-scoped key never acts at organisation level (403 naming the need for an org key)', async () => {
    const t = await createTenant(app.deps, 'Scoped');
    const admin = managementClient(app, t);
    const key = await teamAdminKey(admin, t, [t.teamId]);
    const scoped = keyClient(key.value);
    const attempts = [
      scoped.patch(org(t), { name: 'x' }),
      scoped.post(org(t, '/team'), { name: 'x' }),
      scoped.del(org(t, `/team/${t.teamId}`)),
      scoped.patch(org(t, `/team/${t.teamId}/feature_flags`), { insurance: true }),
      scoped.get(org(t, '/management_key')),
      scoped.post(org(t, '/management_key'), { role: 'org_admin' }),
      scoped.patch(org(t, `/management_key/${key.id}`), { role: 'org_admin' }),
      scoped.del(org(t, `/management_key/${key.id}`)),
      scoped.get(org(t, '/audit_log')),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.status).toBe(403);
      expect(res.body.detail).toMatch(/needs an organisation management key \(role org_admin\)/);
    }
    // Inside its team it works.
    expect((await scoped.get(org(t, `/team/${t.teamId}`))).status).toBe(200);
    expect((await scoped.patch(org(t, `/team/${t.teamId}`), { name: 'Renamed by scoped key' })).status).toBe(200);
  });

  it('concurrent creations all succeed with distinct values', async () => {
    const results = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        mgmt.post(org(tenant, '/management_key'), { role: 'team_admin', label: `p${i}`, team_role_bindings: [{ team_id: tenant.teamId }] }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(new Set(results.map((r) => r.body.value)).size).toBe(4);
    for (const r of results) expect((await keyClient(r.body.value).get(org(tenant, `/team/${tenant.teamId}`))).status).toBe(200);
  });

  it('the last org_admin key survives racing deletes, and a delete racing a demotion', async () => {
    for (let round = 0; round < 3; round++) {
      // Two org_admin keys (and a team key, which does not count); each request alone would be allowed.
      const t = await createTenant(app.deps, `Race ${round}`);
      const first = managementClient(app, t);
      const firstId = (await first.get(org(t, '/management_key'))).body.data[0].id;
      const second = await createManagementKey(first, t, { role: 'org_admin', label: 'second' });
      await teamAdminKey(first, t, [t.teamId]);

      const deletes = await Promise.all([first.del(org(t, `/management_key/${second.id}`)), keyClient(second.value).del(org(t, `/management_key/${firstId}`))]);
      expect(deletes.filter((r) => r.status === 204)).toHaveLength(1);
      // The loser is refused: as the last org_admin key (409), because its own key went first while it was being
      // authorised (403), or before it was authenticated at all (401: the key no longer exists).
      for (const r of deletes.filter((r) => r.status !== 204)) expect([401, 403, 409]).toContain(r.status);
      expect(await orgAdminKeyCount(t.orgId)).toBe(1);

      const u = await createTenant(app.deps, `Race demote ${round}`);
      const one = managementClient(app, u);
      const oneId = (await one.get(org(u, '/management_key'))).body.data[0].id;
      const two = await createManagementKey(one, u, { role: 'org_admin', label: 'two' });
      const raced = await Promise.all([
        one.patch(org(u, `/management_key/${two.id}`), { role: 'team_admin', team_role_bindings: [{ team_id: u.teamId }] }),
        keyClient(two.value).del(org(u, `/management_key/${oneId}`)),
      ]);
      expect(raced.filter((r) => r.status === 200 || r.status === 204)).toHaveLength(1);
      expect(await orgAdminKeyCount(u.orgId)).toBe(1);
    }
  });
});

describe('management keys in their org document', () => {
  it('an org holds at most MAX_MANAGEMENT_KEYS_PER_ORG keys (409 naming the limit)', async () => {
    const t = await createTenant(app.deps, 'Many keys');
    const admin = managementClient(app, t);
    const have = (await admin.get(org(t, '/management_key'))).body.data.length;
    for (let i = have; i < MAX_MANAGEMENT_KEYS_PER_ORG; i++) await app.deps.repos.tenancy.createManagementKey(t.orgId, `k${i}`, 'team_admin', [t.teamId]);
    const refused = await admin.post(org(t, '/management_key'), { role: 'org_admin', label: 'one too many' });
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toMatch(new RegExp(`${MAX_MANAGEMENT_KEYS_PER_ORG} management keys`));
    expect((await admin.get(org(t, '/management_key'))).body.data).toHaveLength(MAX_MANAGEMENT_KEYS_PER_ORG);
  });
});

describe('team custom credentials', () => {
  const base = (env = 'sandbox', region = 'us') => org(tenant, `/team_custom_credentials/${env}/${region}`);
  const secret = `cs_${randomUUID()}`;

  it('are stored encrypted, shown masked, replaced and deleted', async () => {
    expect((await mgmt.post(base('production', 'eu'), { team_id: tenant.teamId, provider: 'oura', client_id: 'c', client_secret: secret })).status).toBe(400);
    const unknown = await mgmt.post(base(), { team_id: tenant.teamId, provider: 'nope', client_id: 'c', client_secret: secret });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail[0].loc).toEqual(['body', 'provider']);
    const notOauth = await mgmt.post(base(), { team_id: tenant.teamId, provider: 'whoop', client_id: 'c', client_secret: secret });
    expect(notOauth.status).toBe(422);
    const missing = await mgmt.post(base(), { team_id: tenant.teamId, provider: 'oura', client_id: 'c' });
    expect(missing.body.detail[0].loc).toEqual(['body', 'client_secret']);

    const set = await mgmt.post(base(), {
      team_id: tenant.teamId,
      provider: 'oura',
      client_id: 'client-1',
      client_secret: secret,
      details: { webhook_signing_secret: 'details-secret-value' },
      redirect_url_override: 'https://app.example/oauth/callback',
    });
    expect(set.status).toBe(200);
    expectSchema(CustomCredentials, set.body);
    expect(set.body).toMatchObject({ provider: 'oura', client_id: 'client-1', client_secret_hint: `…${secret.slice(-4)}`, has_details: true });
    expect(set.text).not.toContain(secret);

    const raw = await app.inspect.collection('team_custom_credentials').findOne({ _id: `${tenant.teamId}:oura` as never });
    expect(raw).not.toBeNull();
    expect(JSON.stringify(raw)).not.toContain(secret);
    expect(JSON.stringify(raw)).not.toContain('details-secret-value');
    const stored = (await app.deps.repos.customCredentials.list(tenant.orgId, [tenant.teamId]))[0];
    expect(app.deps.repos.customCredentials.revealSecret(stored)).toBe(secret);
    expect(app.deps.repos.customCredentials.revealDetails(stored)).toEqual({ webhook_signing_secret: 'details-secret-value' });

    const list = await mgmt.get(`${base()}?team_id=${tenant.teamId}`);
    expectSchema(CustomCredentialsList, list.body);
    expect(list.body.data).toHaveLength(1);
    expect(list.text).not.toContain(secret);

    const replaced = await mgmt.post(base(), { team_id: tenant.teamId, provider: 'oura', client_id: 'client-2', client_secret: 'short' });
    expect(replaced.body).toMatchObject({ client_id: 'client-2', client_secret_hint: '…', has_details: false, created_at: set.body.created_at });

    expect((await mgmt.del(`${base()}?team_id=${tenant.teamId}&provider=oura`)).status).toBe(204);
    expect((await mgmt.del(`${base()}?team_id=${tenant.teamId}&provider=oura`)).status).toBe(404);
    expect((await mgmt.get(`${base()}?team_id=${tenant.teamId}`)).body.data).toEqual([]);
  });

  it('a team key manages its own teams only', async () => {
    const other = await createTeam(mgmt, tenant);
    const scoped = keyClient((await teamAdminKey(mgmt, tenant, [other.id])).value);
    expect((await scoped.post(base(), { team_id: other.id, provider: 'fitbit', client_id: 'c', client_secret: secret })).status).toBe(200);
    expect((await scoped.post(base(), { team_id: tenant.teamId, provider: 'fitbit', client_id: 'c', client_secret: secret })).status).toBe(403);
    expect((await scoped.get(`${base()}?team_id=${tenant.teamId}`)).status).toBe(403);
    expect((await scoped.get(base())).body.data.map((c: { team_id: string }) => c.team_id)).toEqual([other.id]);
    expect((await scoped.del(`${base()}?team_id=${tenant.teamId}&provider=fitbit`)).status).toBe(403);
  });

  it('`npm run reencrypt` moves them to the current data key (own database)', async () => {
    const own = await ownDatabase(app, 'creds');
    try {
      const oldKey = generateDataKey('old');
      const newKey = generateDataKey('new');
      const repo = (keys: string) => new CustomCredentialsRepository(own.db, FieldCipher.fromSpec(keys));
      const input: CustomCredentialsInput = {
        org_id: randomUUID(),
        team_id: randomUUID(),
        provider: 'oura',
        environment: 'sandbox',
        region: 'us',
        client_id: 'c',
        client_secret: secret,
        details: { extra: 'x' },
        redirect_url_override: null,
      };
      await repo(oldKey).put(input);
      const rotated = repo(`${newKey},${oldKey}`);
      expect(await rotated.reencrypt()).toBe(1);
      expect(await rotated.reencrypt()).toBe(0);
      const [doc] = await repo(newKey).list(input.org_id);
      expect((doc.client_secret as { key_id: string }).key_id).toBe('new');
      expect(repo(newKey).revealSecret(doc)).toBe(secret);
      expect(repo(newKey).revealDetails(doc)).toEqual({ extra: 'x' });
    } finally {
      await own.drop();
    }
  });
});

describe('the deprecated X-Service-Org-Key header', () => {
  it('still works, with Deprecation headers and a warning in the log that names the key, not its value', async () => {
    const res = await httpClient(app.url, { 'X-Service-Org-Key': tenant.managementKey, 'x-request-id': 'deprecated-header-1' }).get(org(tenant, '/team'));
    expect(res.status).toBe(200);
    expect(res.headers.get('deprecation')).toMatch(/^@\d+$/);
    expect(res.headers.get('warning')).toMatch(/^299 .*X-Management-Key/);
    expect(res.headers.get('link')).toMatch(/rel="deprecation"/);
    const warning = logLines.map((l) => JSON.parse(l)).find((l) => l.req_id === 'deprecated-header-1');
    expect(warning).toMatchObject({ level: 40, msg: expect.stringMatching(/deprecated header X-Service-Org-Key/), org_id: tenant.orgId });
    expect(warning.management_key_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(logLines.join('\n')).not.toContain(tenant.managementKey);

    const modern = await mgmt.get(org(tenant, '/team'), { 'x-request-id': 'modern-header-1' });
    expect(modern.headers.get('deprecation')).toBeNull();
    expect(logLines.some((l) => l.includes('modern-header-1'))).toBe(false);
  });
});

describe('audit log', () => {
  type Entry = {
    id: string;
    action: string;
    team_id: string | null;
    status: string;
    request_id: string;
    target: { id: string };
    actor: { management_key_id: string; header: string };
    error: { status: number } | null;
    changes: string[];
  };

  async function readAll(client: HttpClient, t: Tenant, query = '', limit = 100): Promise<Entry[]> {
    const all: Entry[] = [];
    let cursor: string | null = null;
    do {
      const res: { status: number; body: { data: Entry[]; next_cursor: string | null } } = await client.get(
        org(t, `/audit_log?limit=${limit}${query}${cursor ? `&next_cursor=${cursor}` : ''}`),
      );
      expect(res.status).toBe(200);
      expectSchema(AuditLogPage, res.body);
      all.push(...res.body.data);
      cursor = res.body.next_cursor;
    } while (cursor);
    return all;
  }

  it('records every management change: who, what, which team, the request id and the outcome; filtered and paged', async () => {
    const t = await createTenant(app.deps, 'Audited');
    const admin = managementClient(app, t);
    const adminKeyId = (await admin.get(org(t, '/management_key'))).body.data[0].id;
    const rid = (name: string) => ({ 'x-request-id': `${name}-${t.orgId}` });

    await admin.patch(org(t), { name: 'Audited org' }, rid('org'));
    const team = (await admin.post(org(t, '/team'), { name: 'Audited team' }, rid('team-create'))).body;
    await admin.patch(org(t, `/team/${team.id}`), { name: 'Audited team 2', reject_duplicate_connection: true }, rid('team-patch'));
    await admin.patch(org(t, `/team/${team.id}/feature_flags`), { insurance: true }, rid('flags'));
    const key = (await admin.post(org(t, '/management_key'), { role: 'team_admin', team_role_bindings: [{ team_id: team.id }] }, rid('key-create'))).body;
    await admin.patch(org(t, `/management_key/${key.id}`), { label: 'renamed' }, rid('key-patch'));
    const apiKey = (await admin.post(org(t, '/team_api_keys/sandbox/us'), { team_id: team.id }, rid('api-key-create'))).body;
    await admin.del(org(t, `/team_api_keys/sandbox/us?api_key_id=${apiKey.id}`), rid('api-key-delete'));
    await admin.post(
      org(t, '/team_custom_credentials/sandbox/us'),
      { team_id: team.id, provider: 'oura', client_id: 'c', client_secret: 'secret-value-1234' },
      rid('creds-set'),
    );
    await admin.del(org(t, `/team_custom_credentials/sandbox/us?team_id=${team.id}&provider=oura`), rid('creds-delete'));
    await admin.del(org(t, `/management_key/${key.id}`), rid('key-delete'));
    const refused = await admin.del(org(t, `/management_key/${adminKeyId}`), rid('last-admin'));
    expect(refused.status).toBe(409);
    await admin.del(org(t, `/team/${team.id}`), rid('team-delete'));
    // Through the deprecated header: the entry says which header the key came in.
    await httpClient(app.url, { 'X-Service-Org-Key': t.managementKey }).patch(org(t), { name: 'Audited org 2' }, rid('org-deprecated'));
    // Reads and refused authorisations leave no entry.
    await admin.get(org(t, '/team'));

    const entries = await readAll(admin, t);
    const byRequest = Object.fromEntries(entries.map((e) => [e.request_id.replace(`-${t.orgId}`, ''), e]));
    expect(Object.keys(byRequest).sort()).toEqual(
      [
        'org',
        'team-create',
        'team-patch',
        'flags',
        'key-create',
        'key-patch',
        'api-key-create',
        'api-key-delete',
        'creds-set',
        'creds-delete',
        'key-delete',
        'last-admin',
        'team-delete',
        'org-deprecated',
      ].sort(),
    );
    expect(entries).toHaveLength(14);
    expect(Object.fromEntries(Object.entries(byRequest).map(([name, e]) => [name, e.action]))).toEqual({
      org: 'org.update',
      'team-create': 'team.create',
      'team-patch': 'team.update',
      flags: 'team.feature_flags.update',
      'key-create': 'management_key.create',
      'key-patch': 'management_key.update',
      'api-key-create': 'team_api_key.create',
      'api-key-delete': 'team_api_key.delete',
      'creds-set': 'team_custom_credentials.set',
      'creds-delete': 'team_custom_credentials.delete',
      'key-delete': 'management_key.delete',
      'last-admin': 'management_key.delete',
      'team-delete': 'team.delete',
      'org-deprecated': 'org.update',
    });
    for (const e of entries) expect(e.actor.management_key_id).toBe(adminKeyId);
    expect(byRequest['org-deprecated'].actor.header).toBe('X-Service-Org-Key');
    expect(byRequest.org.actor.header).toBe('X-Management-Key');
    expect(entries.filter((e) => e.status !== 'succeeded').map((e) => [e.request_id, e.status, e.error?.status])).toEqual([
      [`last-admin-${t.orgId}`, 'failed', 409],
    ]);
    expect(byRequest['team-create']).toMatchObject({ team_id: team.id, target: { type: 'team', id: team.id } });
    expect(byRequest['team-patch'].changes.sort()).toEqual(['name', 'reject_duplicate_connection']);
    expect(byRequest['api-key-delete'].target.id).toBe(apiKey.id);
    expect(byRequest['creds-set'].changes).toEqual(['client_id', 'client_secret']);
    expect(JSON.stringify(entries)).not.toContain('secret-value-1234');
    expect(JSON.stringify(entries)).not.toContain(key.value);

    // Newest first; filters by team and by action, alone and together.
    expect(entries[0].request_id).toBe(`org-deprecated-${t.orgId}`);
    const teamEntries = await readAll(admin, t, `&team_id=${team.id}`);
    expect(teamEntries.map((e) => e.request_id.replace(`-${t.orgId}`, '')).sort()).toEqual(
      ['team-create', 'team-patch', 'flags', 'api-key-create', 'api-key-delete', 'creds-set', 'creds-delete', 'team-delete'].sort(),
    );
    expect((await readAll(admin, t, '&action=management_key.delete')).map((e) => e.request_id.replace(`-${t.orgId}`, ''))).toEqual([
      'last-admin',
      'key-delete',
    ]);
    expect((await readAll(admin, t, `&team_id=${team.id}&action=team.update`)).map((e) => e.id)).toEqual([byRequest['team-patch'].id]);

    // Paged three at a time: the same entries in the same order, none twice.
    const paged = await readAll(admin, t, '', 3);
    expect(paged.map((e) => e.id)).toEqual(entries.map((e) => e.id));
    const badCursor = await admin.get(org(t, '/audit_log?next_cursor=nonsense'));
    expect(badCursor.status).toBe(422);
    expect(badCursor.body.detail[0].loc).toEqual(['query', 'next_cursor']);

    // Other orgs' entries never show.
    expect(await readAll(mgmt, tenant, `&team_id=${team.id}`)).toEqual([]);
  });

  it('is written before the change (pending) and completed after it', async () => {
    const t = await createTenant(app.deps, 'Pending');
    const keyId = (await managementClient(app, t).get(org(t, '/management_key'))).body.data[0].id;
    const auth = { keyId, orgId: t.orgId, header: 'X-Management-Key' } as Parameters<typeof audited>[0]['auth'];
    const context = { deps: app.deps, auth, requestId: `pending-${t.orgId}`, log: app.deps.logger };
    const statusNow = async () => (await app.inspect.collection('audit_log').findOne({ request_id: context.requestId }))?.status;
    let seenDuringChange: unknown;
    await audited(context, { action: 'org.update', type: 'org', id: t.orgId, teamId: null }, async () => {
      seenDuringChange = await statusNow();
    });
    expect(seenDuringChange).toBe('pending');
    expect(await statusNow()).toBe('succeeded');
  });
});
