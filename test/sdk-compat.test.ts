import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createTenant, startTestApp, teamClient, type TestApp } from './support/harness';
import { createUser } from './support/lab';

/**
 * Customers migrating from the original API keep their client code: the official Python SDK (PyPI `vital`,
 * pinned in scripts/sdk-check/requirements.txt), pointed at this service, must parse every response of the
 * lab, wearable and insurance endpoints into its own models, built both ways customers build it: as the SDK's own
 * docs say (`Vital(api_key=..., base_url=...)`: the key goes in x-vital-api-key, which we accept as an alias) and with
 * our header added (headers={"x-service-api-key": key}). The venv is created once per machine under .devstack/
 * (git-ignored).
 */
const root = path.resolve(__dirname, '..');
const venv = path.join(root, '.devstack', 'sdk-venv');
const python = path.join(venv, 'bin', 'python');
const requirements = path.join(root, 'scripts', 'sdk-check', 'requirements.txt');
let app: TestApp;

beforeAll(async () => {
  const marker = path.join(venv, '.requirements-installed');
  if (!existsSync(marker) || execFileSync('cat', [marker]).toString() !== execFileSync('cat', [requirements]).toString()) {
    console.log('sdk-compat: installing the Python SDK into .devstack/sdk-venv (once per machine)...');
    execFileSync('python3', ['-m', 'venv', venv], { stdio: 'inherit' });
    execFileSync(python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '-r', requirements], { stdio: 'inherit' });
    execFileSync('cp', [requirements, marker]);
  }
  app = await startTestApp();
}, 300000);
afterAll(() => app?.close());

/** Runs one check script of scripts/sdk-check/ with the client built `construction`'s way; returns its output. */
function runCheck(script: string, construction: string, env: Record<string, string>, timeoutMs: number): Promise<{ code: number; text: string }> {
  return new Promise((resolve) => {
    execFile(
      python,
      [path.join(root, 'scripts', 'sdk-check', script)],
      { env: { ...process.env, HB_BASE_URL: app.url, HB_SDK_CLIENT: construction, ...env }, timeout: timeoutMs },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, text: stdout + stderr }),
    );
  });
}

function expectAllParsed(output: { code: number; text: string }, lastCheck: string): void {
  if (output.code !== 0) console.log(output.text); // the SDK's own error names the field it could not parse
  const failures = output.text.split('\n').filter((l) => l.startsWith('FAIL') || /Traceback|Error:/.test(l));
  expect(failures).toEqual([]);
  expect(output.text).toContain(lastCheck);
  expect(output.code).toBe(0);
}

describe.each([
  ['plain', 'built as its docs say (key in x-vital-api-key)'],
  ['headers', 'built with our x-service-api-key header'],
])('the official Python SDK (%s: %s)', (construction) => {
  test('parses every lab endpoint response', async () => {
    const tenant = await createTenant(app.deps, 'SDK compat');
    const userId = await createUser(teamClient(app, tenant));
    const output = await runCheck('check_lab.py', construction, { HB_API_KEY: tenant.teamKey, HB_USER_ID: userId }, 120000);
    expectAllParsed(output, 'OK lab_tests.get_result_raw');
    expect(output.text).toContain('OK testkit.register');
  }, 180000);

  test('parses every wearable-data endpoint response', async () => {
    const tenant = await createTenant(app.deps, 'SDK compat wearables');
    const client = teamClient(app, tenant);
    const start = new Date(Date.now() - 30 * 86_400_000).toISOString().slice(0, 10); // a month: workouts on ~40% of days
    const user = (await client.post('/v2/user/', { client_user_id: `sdk-wearer-${Date.now()}-${construction}`, ingestion_start: start })).body;
    const env = { HB_API_KEY: tenant.teamKey, HB_USER_ID: user.user_id, HB_PROVIDER: 'apple_health_kit', HB_START_DATE: start, HB_PULL_WAIT: '120' };
    expectAllParsed(await runCheck('check_wearables.py', construction, env, 240000), 'OK user.deregister_provider');
  }, 300000);

  test('parses every insurance endpoint response', async () => {
    const tenant = await createTenant(app.deps, 'SDK compat insurance');
    await app.deps.repos.tenancy.setFeatureFlags(tenant.teamId, { insurance: true });
    const userId = await createUser(teamClient(app, tenant));
    const output = await runCheck('check_insurance.py', construction, { HB_API_KEY: tenant.teamKey, HB_USER_ID: userId }, 60000);
    expectAllParsed(output, 'OK insurance.search_payor_info (deprecated POST)');
  }, 120000);
});
