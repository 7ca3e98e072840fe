import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { httpClient, startTestApp, uniqueId, type TestApp } from './support/harness';

const root = path.resolve(__dirname, '..');
let app: TestApp;
let tmp: string;

beforeAll(async () => {
  app = await startTestApp();
  tmp = mkdtempSync(path.join(os.tmpdir(), 'hb-bootstrap-'));
});
afterAll(async () => {
  rmSync(tmp, { recursive: true, force: true });
  await app.close();
});

const runScript = (script: string, args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [path.join(root, 'dist', 'scripts', script), ...args], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
  });

describe('dev seeding (npm run dev)', () => {
  it('writes credentials.json with exactly the contract keys, and reuses them on the next start', async () => {
    const file = path.join(tmp, 'credentials.json');
    const env = { API_PORT: '8099', TEMPORAL_UI_URL: 'http://127.0.0.1:8233' };
    const first = runScript('seed-dev.js', [file], env);
    expect(first.status).toBe(0);
    expect(JSON.parse(first.stdout).created).toBe(true);
    const creds = JSON.parse(readFileSync(file, 'utf8'));
    expect(Object.keys(creds).sort()).toEqual(['base_url', 'management_key', 'org_id', 'team_api_key', 'team_id', 'temporal_ui_url']);
    expect(creds.team_api_key).toMatch(/^sk_us_/);
    expect(creds.management_key).toMatch(/^mg_/);
    expect(creds.base_url).toBe('http://127.0.0.1:8099');

    const second = runScript('seed-dev.js', [file], env);
    expect(JSON.parse(second.stdout).created).toBe(false);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual(creds);

    // The seeded keys work against the API.
    const data = await httpClient(app.url, { 'x-service-api-key': creds.team_api_key }).get('/v2/user/');
    expect(data.status).toBe(200);
    const teams = await httpClient(app.url, { 'X-Management-Key': creds.management_key }).get(`/v1/org/${creds.org_id}/team`);
    expect(teams.body.data.map((t: { id: string }) => t.id)).toEqual([creds.team_id]);

    // The sandbox team has the insurance closed beta: a new user can try it at once.
    const team = httpClient(app.url, { 'x-service-api-key': creds.team_api_key });
    const user = (await team.post('/v2/user/', { client_user_id: uniqueId('dev-insured') })).body.user_id;
    const latest = await team.get(`/v2/user/${user}/insurance/latest`);
    expect({ status: latest.status, detail: latest.body.detail }).toEqual({ status: 404, detail: expect.stringMatching(/no primary insurance record/) });
  });
});

describe('production bootstrap', () => {
  it('creates the org and its first management key once, prints the key once, and refuses a second run', async () => {
    const env = { MONGO_DB: `hb_bootstrap_${uniqueId('db').replace(/-/g, '_')}` };
    const first = runScript('bootstrap.js', ['Acme Health'], env);
    expect(first.status).toBe(0);
    const key = /Org management key \(shown once, store it now\): (mg_\S+)/.exec(first.stdout)?.[1];
    const orgId = /Organisation created: (\S+)/.exec(first.stdout)?.[1];
    expect(key).toBeDefined();
    const second = runScript('bootstrap.js', ['Acme Health'], env);
    expect(second.status).toBe(1);
    expect(second.stderr).toMatch(/already bootstrapped/);
    expect(second.stdout).not.toContain('mg_');

    const prod = await startTestApp({ MONGO_DB: env.MONGO_DB });
    try {
      const org = await httpClient(prod.url, { 'X-Management-Key': key! }).get(`/v1/org/${orgId}`);
      expect(org.status).toBe(200);
      expect(org.body.name).toBe('Acme Health');
    } finally {
      await prod.close();
    }
  });
});
