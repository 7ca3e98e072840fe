import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createTenant, startTestApp, teamClient, type TestApp } from './support/harness';
import { createUser } from './support/lab';

/**
 * Customers migrating from the original API keep their client code: the official Python SDK (PyPI `vital`,
 * pinned in scripts/sdk-check/requirements.txt), pointed at this service, must parse every response of the
 * lab endpoints into its own models. The venv is created once per machine under .devstack/ (git-ignored).
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

test('the official Python SDK parses every lab endpoint response', async () => {
  const tenant = await createTenant(app.deps, 'SDK compat');
  const userId = await createUser(teamClient(app, tenant));
  const output = await new Promise<{ code: number; text: string }>((resolve) => {
    execFile(
      python,
      [path.join(root, 'scripts', 'sdk-check', 'check_lab.py')],
      { env: { ...process.env, HB_BASE_URL: app.url, HB_API_KEY: tenant.teamKey, HB_USER_ID: userId }, timeout: 120000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, text: stdout + stderr }),
    );
  });
  if (output.code !== 0) console.log(output.text); // the SDK's own error names the field it could not parse
  const failures = output.text.split('\n').filter((l) => l.startsWith('FAIL') || /Traceback|Error:/.test(l));
  expect(failures).toEqual([]);
  expect(output.text).toContain('OK testkit.register');
  expect(output.text).toContain('OK lab_tests.get_result_raw');
  expect(output.code).toBe(0);
}, 180000);

test('the official Python SDK parses every wearable-data endpoint response', async () => {
  const tenant = await createTenant(app.deps, 'SDK compat wearables');
  const client = teamClient(app, tenant);
  const start = new Date(Date.now() - 30 * 86_400_000).toISOString().slice(0, 10); // a month: workouts on ~40% of days
  const user = (await client.post('/v2/user/', { client_user_id: `sdk-wearer-${Date.now()}`, ingestion_start: start })).body;
  const output = await new Promise<{ code: number; text: string }>((resolve) => {
    execFile(
      python,
      [path.join(root, 'scripts', 'sdk-check', 'check_wearables.py')],
      {
        env: { ...process.env, HB_BASE_URL: app.url, HB_API_KEY: tenant.teamKey, HB_USER_ID: user.user_id, HB_PROVIDER: 'apple_health_kit', HB_START_DATE: start, HB_PULL_WAIT: '120' },
        timeout: 240000,
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, text: stdout + stderr }),
    );
  });
  if (output.code !== 0) console.log(output.text);
  const failures = output.text.split('\n').filter((l) => l.startsWith('FAIL') || /Traceback|Error:/.test(l));
  expect(failures).toEqual([]);
  expect(output.text).toContain('OK user.deregister_provider');
  expect(output.code).toBe(0);
}, 300000);

test('the official Python SDK parses every insurance endpoint response', async () => {
  const tenant = await createTenant(app.deps, 'SDK compat insurance');
  await app.deps.repos.tenancy.setFeatureFlags(tenant.teamId, { insurance: true });
  const userId = await createUser(teamClient(app, tenant));
  const output = await new Promise<{ code: number; text: string }>((resolve) => {
    execFile(
      python,
      [path.join(root, 'scripts', 'sdk-check', 'check_insurance.py')],
      { env: { ...process.env, HB_BASE_URL: app.url, HB_API_KEY: tenant.teamKey, HB_USER_ID: userId }, timeout: 60000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, text: stdout + stderr }),
    );
  });
  if (output.code !== 0) console.log(output.text);
  const failures = output.text.split('\n').filter((l) => l.startsWith('FAIL') || /Traceback|Error:/.test(l));
  expect(failures).toEqual([]);
  expect(output.text).toContain('OK insurance.search_payor_info (deprecated POST)');
  expect(output.code).toBe(0);
}, 120000);
