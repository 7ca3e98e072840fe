import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createTenant, managementClient, startTestApp, teamClient, type Tenant, type TestApp } from './support/harness';
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

/**
 * A lab account of the tenant's organisation with the lab of the first active walk-in test (the one check_lab.py
 * orders), holding an order code for each of that lab's markers. The SDK has no lab-account calls: made here through
 * the management API.
 */
async function labAccountForWalkInLab(tenant: Tenant): Promise<string> {
  const catalogue = app.deps.labCatalogue;
  const walkIn = catalogue.labTests.find((t) => t.method === 'walk_in_test' && t.status === 'active')!;
  const lab = catalogue.labById(walkIn.lab_id)!;
  const codes = Object.fromEntries(catalogue.markers.filter((m) => m.lab_id === lab.id).map((m) => [String(m.id), { code: m.provider_id }]));
  const { DEPLOYMENT_ENVIRONMENT: env, DEPLOYMENT_REGION: region } = app.deps.config;
  const res = await managementClient(app, tenant).post(`/v1/org/${tenant.orgId}/lab_account/${env}/${region}`, {
    lab_slug: lab.slug,
    name: `${lab.name} (SDK check)`,
    account_number: '12345678',
    // Nothing listens there: no order of the SDK check goes through this account (only a lab test is made with it).
    mllp: { host: '127.0.0.1', port: 9 },
    msh: { sending_application: 'HEALTHBRIDGE', sending_facility: 'HB', receiving_application: 'LAB', receiving_facility: 'LAB' },
    profile: 'LOI_2.5.1',
    results_from: ['127.0.0.1'],
    order_codes: codes,
  });
  if (res.status !== 200) throw new Error(`lab account creation failed: ${res.status} ${res.text}`);
  return res.body.id;
}

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
    const labAccountId = await labAccountForWalkInLab(tenant);
    const env = { HB_API_KEY: tenant.teamKey, HB_USER_ID: userId, HB_LAB_ACCOUNT_ID: labAccountId };
    const output = await runCheck('check_lab.py', construction, env, 120000);
    expectAllParsed(output, 'OK lab_tests.get_result_raw');
    expect(output.text).toContain('OK testkit.register');
    // The labs listing (with our connection fields), a test through a lab account, an order with ICD codes and AoE answers.
    expect(output.text).toContain('OK lab_tests.get_labs');
    expect(output.text).toContain('OK lab_tests.create (lab_account_id)');
    expect(output.text).toContain('OK lab_tests.create_order (icd_codes, aoe_answers)');
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
