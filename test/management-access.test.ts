import { randomUUID } from 'node:crypto';
import {
  createTenant,
  httpClient,
  managementClient,
  startTestApp,
  uniqueId,
  type HttpClient,
  type HttpResult,
  type Tenant,
  type TestApp,
} from './support/harness';
import { startReceiver, type Receiver } from './support/receiver';

/**
 * Every management operation, tried with every kind of caller: the org key, the same key through the
 * deprecated X-Service-Org-Key header, a team key inside and outside its team, a key bound to two teams, a
 * revoked key, and (for paths that name a deployment) another environment or region. Each operation makes
 * its own fixtures with the org key first, so a refusal is the caller's, never a missing object's.
 */
let app: TestApp;
let tenant: Tenant;
let org: HttpClient;
let rx: Receiver;
/** teamA: the scoped key's team; teamB: another team of the org; teamC: bound to no scoped key. */
let teamA: string;
let teamB: string;
let teamC: string;
let env: string;
let region: string;

const keyClient = (value: string, header = 'X-Management-Key') => httpClient(app.url, { [header]: value });

beforeAll(async () => {
  app = await startTestApp();
  tenant = await createTenant(app.deps, 'Access matrix');
  org = managementClient(app, tenant);
  rx = await startReceiver();
  env = app.deps.config.DEPLOYMENT_ENVIRONMENT;
  region = app.deps.config.DEPLOYMENT_REGION;
  teamA = tenant.teamId;
  teamB = (await org.post(`/v1/org/${tenant.orgId}/team`, { name: uniqueId('team-b') })).body.id;
  teamC = (await org.post(`/v1/org/${tenant.orgId}/team`, { name: uniqueId('team-c') })).body.id;
});
afterAll(async () => {
  await rx?.close();
  await app?.close();
});

const o = (path = '') => `/v1/org/${tenant.orgId}${path}`;
const hooks = (team: string, environment = env) => o(`/team/${team}/${environment}/webhook`);

/** Fixtures, made with the org key. */
async function webhookOn(team: string): Promise<string> {
  const res = await org.post(hooks(team), { url: `${rx.url}/matrix`, description: 'matrix' });
  expect(res.status).toBe(200);
  return res.body.id;
}
async function eventOn(team: string): Promise<{ hook: string; event: string }> {
  const hook = await webhookOn(team);
  const res = await org.post(`${hooks(team)}/${hook}/test`, {});
  expect(res.status).toBe(202);
  return { hook, event: res.body.event_id };
}
const pipes = (team: string, environment = env) => o(`/team/${team}/${environment}/pipeline`);
/** A pipeline to a broker address nobody listens on (creation checks the address, not the broker). */
const pipelineBody = { destination: { type: 'rabbitmq', url: 'amqp://127.0.0.1:1' }, routes: [{ event_type_prefix: '', target: 'matrix' }] };
async function pipelineOn(team: string): Promise<string> {
  const res = await org.post(pipes(team), pipelineBody);
  expect(res.status).toBe(200);
  return res.body.id;
}
async function teamApiKeyOn(team: string): Promise<string> {
  const res = await org.post(o(`/team_api_keys/${env}/${region}`), { team_id: team, label: 'matrix' });
  expect(res.status).toBe(200);
  return res.body.id;
}
async function credentialsOn(team: string): Promise<void> {
  const res = await org.post(o(`/team_custom_credentials/${env}/${region}`), {
    team_id: team,
    provider: 'oura',
    client_id: 'cid',
    client_secret: `cs_${randomUUID()}`,
  });
  expect(res.status).toBe(200);
}
const labAccountBody = {
  lab_slug: 'quest',
  name: 'Matrix lab',
  account_number: '1234',
  mllp: { host: '127.0.0.1', port: 9 },
  msh: { sending_application: 'HB', sending_facility: 'HB', receiving_application: 'LAB', receiving_facility: 'LAB' },
  profile: 'ORM_2.3',
  results_from: ['127.0.0.1'],
  order_codes: { 2040: { code: '10231' } },
};
const labAccounts = (at: Deployment) => o(`/lab_account/${at.environment}/${at.region}`);
const reviews = (at: Deployment) => o(`/lab_result_review/${at.environment}/${at.region}`);
/** A pending review of a lab result that matched no order (as the MLLP listener's applier files one). */
async function pendingReview(): Promise<string> {
  const id = randomUUID();
  const now = new Date();
  await app.deps.repos.labReviews.fileMany([
    {
      _id: id,
      org_id: tenant.orgId,
      environment: env,
      region,
      account_id: randomUUID(),
      lab_slug: 'quest',
      message_id: id,
      control_id: 'MATRIX',
      reason: 'no_matching_order',
      detail: 'No order of this organisation matches filler number MATRIX.',
      request_indexes: [0],
      placer_numbers: [],
      filler_numbers: ['MATRIX'],
      services: ['Matrix panel'],
      patient: null,
      status: 'pending',
      matched_order_id: null,
      matched_team_id: null,
      resolved_by: null,
      resolved_at: null,
      created_at: now,
      updated_at: now,
    },
  ]);
  return id;
}
async function labAccount(): Promise<string> {
  const res = await org.post(o(`/lab_account/${env}/${region}`), labAccountBody);
  expect(res.status).toBe(200);
  return res.body.id;
}
async function scopedKey(teams: string[]): Promise<string> {
  const res = await org.post(o('/management_key'), { role: 'team_admin', label: 'fixture', team_role_bindings: teams.map((team_id) => ({ team_id })) });
  expect(res.status).toBe(200);
  return res.body.id;
}

/** Where a deployment appears in the path: `env` (webhooks) or `env/region` (team API keys, credentials). */
type Deployment = { environment: string; region: string };
interface Operation {
  name: string;
  /** org: org keys only; team: keys bound to the team; any: every key of the org (reads that name no team). */
  scope: 'org' | 'team' | 'any';
  deployment?: 'env' | 'env/region';
  ok: number;
  /** The org key's success destroys the team: it gets a fresh team of its own, not teamA. */
  disposableTeam?: boolean;
  run(c: HttpClient, team: string, at: Deployment): Promise<HttpResult>;
}

const operations: Operation[] = [
  // Organisation
  { name: 'GET org', scope: 'any', ok: 200, run: (c) => c.get(o()) },
  { name: 'PATCH org', scope: 'org', ok: 200, run: (c) => c.patch(o(), { name: 'Access matrix' }) },
  { name: 'GET teams', scope: 'any', ok: 200, run: (c) => c.get(o('/team')) },
  { name: 'POST team', scope: 'org', ok: 200, run: (c) => c.post(o('/team'), { name: uniqueId('created') }) },
  { name: 'DELETE team', scope: 'org', ok: 204, disposableTeam: true, run: (c, team) => c.del(o(`/team/${team}`)) },
  { name: 'PATCH team feature_flags', scope: 'org', ok: 200, run: (c, team) => c.patch(o(`/team/${team}/feature_flags`), { insurance: false }) },
  { name: 'GET management keys', scope: 'org', ok: 200, run: (c) => c.get(o('/management_key')) },
  {
    name: 'POST management key',
    scope: 'org',
    ok: 200,
    run: (c, team) => c.post(o('/management_key'), { role: 'team_admin', label: 'm', team_role_bindings: [{ team_id: team }] }),
  },
  {
    name: 'PATCH management key',
    scope: 'org',
    ok: 200,
    run: async (c, team) => c.patch(o(`/management_key/${await scopedKey([team])}`), { label: 'renamed' }),
  },
  { name: 'DELETE management key', scope: 'org', ok: 204, run: async (c, team) => c.del(o(`/management_key/${await scopedKey([team])}`)) },
  { name: 'GET audit log', scope: 'org', ok: 200, run: (c) => c.get(o('/audit_log')) },
  // Lab accounts: the organisation's (every key reads them; org keys change them).
  // The review inbox holds results of any team's patients: org keys only.
  { name: 'GET lab result reviews', scope: 'org', deployment: 'env/region', ok: 200, run: (c, _team, at) => c.get(reviews(at)) },
  {
    name: 'GET lab result review',
    scope: 'org',
    deployment: 'env/region',
    ok: 200,
    run: async (c, _team, at) => c.get(`${reviews(at)}/${await pendingReview()}`),
  },
  {
    name: 'POST lab result review reject',
    scope: 'org',
    deployment: 'env/region',
    ok: 200,
    run: async (c, _team, at) => c.post(`${reviews(at)}/${await pendingReview()}/reject`),
  },
  { name: 'GET lab accounts', scope: 'any', deployment: 'env/region', ok: 200, run: (c, _team, at) => c.get(labAccounts(at)) },
  { name: 'POST lab account', scope: 'org', deployment: 'env/region', ok: 200, run: (c, _team, at) => c.post(labAccounts(at), labAccountBody) },
  { name: 'GET lab account', scope: 'any', deployment: 'env/region', ok: 200, run: async (c, _team, at) => c.get(`${labAccounts(at)}/${await labAccount()}`) },
  {
    name: 'PATCH lab account',
    scope: 'org',
    deployment: 'env/region',
    ok: 200,
    run: async (c, _team, at) => c.patch(`${labAccounts(at)}/${await labAccount()}`, { name: 'Renamed lab' }),
  },
  {
    name: 'DELETE lab account',
    scope: 'org',
    deployment: 'env/region',
    ok: 204,
    run: async (c, _team, at) => c.del(`${labAccounts(at)}/${await labAccount()}`),
  },
  // One team
  { name: 'GET team', scope: 'team', ok: 200, run: (c, team) => c.get(o(`/team/${team}`)) },
  {
    name: 'PATCH team (name, brand information)',
    scope: 'team',
    ok: 200,
    run: (c, team) =>
      c.patch(o(`/team/${team}`), {
        name: uniqueId('renamed'),
        logo_url: 'https://example.com/logo.png',
        brand_information: { company_name: 'Matrix Health', brand_color: '#112233' },
      }),
  },
  {
    name: 'GET team API keys',
    scope: 'team',
    deployment: 'env/region',
    ok: 200,
    run: (c, team, at) => c.get(o(`/team_api_keys/${at.environment}/${at.region}?team_id=${team}`)),
  },
  {
    name: 'POST team API key',
    scope: 'team',
    deployment: 'env/region',
    ok: 200,
    run: (c, team, at) => c.post(o(`/team_api_keys/${at.environment}/${at.region}`), { team_id: team, label: 'k' }),
  },
  {
    name: 'DELETE team API key',
    scope: 'team',
    deployment: 'env/region',
    ok: 204,
    run: async (c, team, at) => c.del(o(`/team_api_keys/${at.environment}/${at.region}?api_key_id=${await teamApiKeyOn(team)}`)),
  },
  {
    name: 'GET custom credentials',
    scope: 'team',
    deployment: 'env/region',
    ok: 200,
    run: (c, team, at) => c.get(o(`/team_custom_credentials/${at.environment}/${at.region}?team_id=${team}`)),
  },
  {
    name: 'POST custom credentials',
    scope: 'team',
    deployment: 'env/region',
    ok: 200,
    run: (c, team, at) =>
      c.post(o(`/team_custom_credentials/${at.environment}/${at.region}`), {
        team_id: team,
        provider: 'oura',
        client_id: 'cid',
        client_secret: 'cs_matrix_secret',
      }),
  },
  {
    name: 'DELETE custom credentials',
    scope: 'team',
    deployment: 'env/region',
    ok: 204,
    run: async (c, team, at) => {
      await credentialsOn(team);
      return c.del(o(`/team_custom_credentials/${at.environment}/${at.region}?team_id=${team}&provider=oura`));
    },
  },
  { name: 'GET webhooks', scope: 'team', deployment: 'env', ok: 200, run: (c, team, at) => c.get(hooks(team, at.environment)) },
  { name: 'POST webhook', scope: 'team', deployment: 'env', ok: 200, run: (c, team, at) => c.post(hooks(team, at.environment), { url: `${rx.url}/created` }) },
  {
    name: 'GET webhook',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.get(`${hooks(team, at.environment)}/${await webhookOn(team)}`),
  },
  {
    name: 'PATCH webhook',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.patch(`${hooks(team, at.environment)}/${await webhookOn(team)}`, { description: 'x' }),
  },
  {
    name: 'DELETE webhook',
    scope: 'team',
    deployment: 'env',
    ok: 204,
    run: async (c, team, at) => c.del(`${hooks(team, at.environment)}/${await webhookOn(team)}`),
  },
  {
    name: 'GET webhook headers',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.get(`${hooks(team, at.environment)}/${await webhookOn(team)}/headers`),
  },
  {
    name: 'PUT webhook headers',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.put(`${hooks(team, at.environment)}/${await webhookOn(team)}/headers`, { headers: { 'X-Matrix': 'v' } }),
  },
  {
    name: 'GET webhook secret',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.get(`${hooks(team, at.environment)}/${await webhookOn(team)}/secret`),
  },
  {
    name: 'POST webhook secret rotate',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.post(`${hooks(team, at.environment)}/${await webhookOn(team)}/secret/rotate`),
  },
  {
    name: 'POST webhook test',
    scope: 'team',
    deployment: 'env',
    ok: 202,
    run: async (c, team, at) => c.post(`${hooks(team, at.environment)}/${await webhookOn(team)}/test`, {}),
  },
  {
    name: 'GET webhook attempts',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.get(`${hooks(team, at.environment)}/${await webhookOn(team)}/attempts`),
  },
  {
    name: 'GET webhook deliveries',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.get(`${hooks(team, at.environment)}/${await webhookOn(team)}/deliveries`),
  },
  {
    name: 'POST webhook event resend',
    scope: 'team',
    deployment: 'env',
    ok: 202,
    run: async (c, team, at) => {
      const { hook, event } = await eventOn(team);
      return c.post(`${hooks(team, at.environment)}/${hook}/events/${event}/resend`);
    },
  },
  {
    name: 'POST webhook recover',
    scope: 'team',
    deployment: 'env',
    ok: 202,
    run: async (c, team, at) =>
      c.post(`${hooks(team, at.environment)}/${await webhookOn(team)}/recover`, { since: new Date(Date.now() - 60_000).toISOString() }),
  },
  { name: 'GET pipelines', scope: 'team', deployment: 'env', ok: 200, run: (c, team, at) => c.get(pipes(team, at.environment)) },
  { name: 'POST pipeline', scope: 'team', deployment: 'env', ok: 200, run: (c, team, at) => c.post(pipes(team, at.environment), pipelineBody) },
  {
    name: 'GET pipeline',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.get(`${pipes(team, at.environment)}/${await pipelineOn(team)}`),
  },
  {
    name: 'PATCH pipeline',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.patch(`${pipes(team, at.environment)}/${await pipelineOn(team)}`, { description: 'x' }),
  },
  {
    name: 'DELETE pipeline',
    scope: 'team',
    deployment: 'env',
    ok: 204,
    run: async (c, team, at) => c.del(`${pipes(team, at.environment)}/${await pipelineOn(team)}`),
  },
  {
    name: 'POST pipeline disable',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.post(`${pipes(team, at.environment)}/${await pipelineOn(team)}/disable`),
  },
  {
    name: 'POST pipeline enable',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.post(`${pipes(team, at.environment)}/${await pipelineOn(team)}/enable`),
  },
  {
    name: 'POST pipeline test',
    scope: 'team',
    deployment: 'env',
    ok: 202,
    run: async (c, team, at) => c.post(`${pipes(team, at.environment)}/${await pipelineOn(team)}/test`, {}),
  },
  {
    name: 'GET pipeline attempts',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.get(`${pipes(team, at.environment)}/${await pipelineOn(team)}/attempts`),
  },
  {
    name: 'GET pipeline deliveries',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.get(`${pipes(team, at.environment)}/${await pipelineOn(team)}/deliveries`),
  },
  {
    name: 'POST pipeline event resend',
    scope: 'team',
    deployment: 'env',
    ok: 202,
    run: async (c, team, at) => {
      const pipeline = await pipelineOn(team);
      const event = (await org.post(`${pipes(team)}/${pipeline}/test`, {})).body.event_id;
      return c.post(`${pipes(team, at.environment)}/${pipeline}/events/${event}/resend`);
    },
  },
  {
    name: 'POST pipeline recover',
    scope: 'team',
    deployment: 'env',
    ok: 202,
    run: async (c, team, at) =>
      c.post(`${pipes(team, at.environment)}/${await pipelineOn(team)}/recover`, { since: new Date(Date.now() - 60_000).toISOString() }),
  },
  { name: 'GET webhook event types', scope: 'team', deployment: 'env', ok: 200, run: (c, team, at) => c.get(`${hooks(team, at.environment)}/event_types`) },
  { name: 'GET webhook events', scope: 'team', deployment: 'env', ok: 200, run: (c, team, at) => c.get(`${hooks(team, at.environment)}/events`) },
  {
    name: 'GET webhook event attempts',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.get(`${hooks(team, at.environment)}/events/${(await eventOn(team)).event}/attempts`),
  },
  {
    name: 'GET webhook event deliveries',
    scope: 'team',
    deployment: 'env',
    ok: 200,
    run: async (c, team, at) => c.get(`${hooks(team, at.environment)}/events/${(await eventOn(team)).event}/deliveries`),
  },
  // The delivery-log page's sign-in link (test/console.test.ts has the rest of its story).
  { name: 'POST console link', scope: 'team', deployment: 'env', ok: 201, run: (c, team, at) => c.post(o(`/team/${team}/${at.environment}/console/links`)) },
];

const here = (): Deployment => ({ environment: env, region });
const summary = (res: HttpResult) => ({ status: res.status, detail: typeof res.body?.detail === 'string' ? res.body.detail : res.body?.detail?.[0]?.msg });

describe.each(operations)('$name', (op) => {
  it('works with the org key, through either header (the old one answers with a Deprecation header)', async () => {
    const target = async () => (op.disposableTeam ? (await org.post(o('/team'), { name: uniqueId('disposable') })).body.id : teamA);
    const res = await op.run(org, await target(), here());
    expect({ op: op.name, ...summary(res) }).toMatchObject({ op: op.name, status: op.ok });
    const old = await op.run(keyClient(tenant.managementKey, 'X-Service-Org-Key'), await target(), here());
    expect({ op: op.name, status: old.status }).toEqual({ op: op.name, status: op.ok });
    expect(old.headers.get('deprecation')).toMatch(/^@\d+$/);
    expect(res.headers.get('deprecation')).toBeNull();
  });

  it('with a team key: inside its team as allowed, outside it 403; a key bound to two teams acts on both', async () => {
    // The keys made here are deleted after: the matrix would otherwise outgrow the org's MAX_MANAGEMENT_KEYS_PER_ORG.
    const made: string[] = [];
    const teamKey = async (label: string, teams: string[]) => {
      const created = (await org.post(o('/management_key'), { role: 'team_admin', label, team_role_bindings: teams.map((team_id) => ({ team_id })) })).body;
      made.push(created.id);
      return keyClient(created.value);
    };
    try {
      await withTeamKeys(teamKey);
    } finally {
      for (const id of made) await org.del(o(`/management_key/${id}`));
    }
  });

  async function withTeamKeys(teamKey: (label: string, teams: string[]) => Promise<HttpClient>) {
    const scoped = await teamKey('a', [teamA]);
    const inside = await op.run(scoped, teamA, here());
    if (op.scope === 'org') {
      expect({ op: op.name, ...summary(inside) }).toEqual({ op: op.name, status: 403, detail: expect.stringMatching(/needs an organisation management key/) });
    } else {
      expect({ op: op.name, ...summary(inside) }).toMatchObject({ op: op.name, status: op.ok });
    }
    expect((await org.get(o(`/team/${teamA}`))).status).toBe(200);
    if (op.scope === 'team') {
      const outside = await op.run(scoped, teamB, here());
      expect({ op: op.name, ...summary(outside) }).toEqual({ op: op.name, status: 403, detail: `This team management key is not bound to team ${teamB}.` });

      const twoTeams = await teamKey('ab', [teamA, teamB]);
      expect({ op: op.name, status: (await op.run(twoTeams, teamB, here())).status }).toEqual({ op: op.name, status: op.ok });
      expect({ op: op.name, status: (await op.run(twoTeams, teamC, here())).status }).toEqual({ op: op.name, status: 403 });
    }
  }

  it('refuses a revoked key with 401', async () => {
    const created = (await org.post(o('/management_key'), { role: 'org_admin', label: 'revoked' })).body;
    expect((await org.del(o(`/management_key/${created.id}`))).status).toBe(204);
    const res = await op.run(keyClient(created.value), teamA, here());
    expect({ op: op.name, ...summary(res) }).toEqual({ op: op.name, status: 401, detail: expect.stringMatching(/Invalid management key/) });
  });

  if (op.deployment) {
    it('refuses another environment or region of this deployment with 400 naming the one served', async () => {
      const otherEnv = env === 'sandbox' ? 'production' : 'sandbox';
      const otherRegion = region === 'us' ? 'eu' : 'us';
      const elsewhere: Deployment[] =
        op.deployment === 'env'
          ? [{ environment: otherEnv, region }]
          : [
              { environment: otherEnv, region },
              { environment: env, region: otherRegion },
              { environment: otherEnv, region: otherRegion },
            ];
      for (const at of elsewhere) {
        const res = await op.run(org, teamA, at);
        expect({ op: op.name, at, ...summary(res) }).toEqual({
          op: op.name,
          at,
          status: 400,
          detail: expect.stringMatching(new RegExp(`serves (the )?${env}`)),
        });
      }
    });
  }
});
