import SwaggerParser from '@apidevtools/swagger-parser';
import { ConfigError, loadConfig, publicBaseUrl } from '../lib/platform/config';
import { generateDataKey } from '../lib/platform/field-encryption';
import { createLogger } from '../lib/platform/logger';
import { createTenant, httpClient, startTestApp, teamClient, type HttpClient, type Tenant, type TestApp } from './support/harness';

let app: TestApp;
let tenant: Tenant;
let api: HttpClient;

beforeAll(async () => {
  app = await startTestApp({ BODY_LIMIT_BYTES: 2048 });
  tenant = await createTenant(app.deps);
  api = teamClient(app, tenant);
});
afterAll(() => app.close());

describe('request ids', () => {
  it('echoes a given x-request-id and generates one otherwise', async () => {
    const given = await api.get('/v2/user/', { 'x-request-id': 'req-abc.123' });
    expect(given.headers.get('x-request-id')).toBe('req-abc.123');
    const generated = await api.get('/v2/user/');
    expect(generated.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const unsafe = await api.get('/v2/user/', { 'x-request-id': 'has spaces and "quotes"' });
    expect(unsafe.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('error contract', () => {
  it('malformed JSON is a 422 of type json_invalid', async () => {
    const res = await api.post('/v2/user/', '{"client_user_id": ', { 'content-type': 'application/json' });
    expect(res.status).toBe(422);
    expect(res.body.detail[0]).toMatchObject({ loc: ['body', 0], type: 'json_invalid' });
  });

  it('a JSON body that is not an object is a 422', async () => {
    const res = await api.post('/v2/user/', '[1,2]', { 'content-type': 'application/json' });
    expect(res.status).toBe(422);
    expect(res.body.detail[0]).toMatchObject({ loc: ['body'], type: 'dict_type' });
  });

  it('unknown route is 404 and wrong method is 405, both with a detail', async () => {
    const unknown = await api.get('/v2/nothing-here');
    expect(unknown.status).toBe(404);
    expect(typeof unknown.body.detail).toBe('string');
    const wrong = await api.put('/v2/user/', {});
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toContain('POST');
    expect(wrong.body.detail).toMatch(/not allowed/);
    const exotic = await api.request('PROPFIND', '/v2/user/');
    expect(exotic.status).toBe(405);
    expect(exotic.headers.get('allow')).toContain('GET');
    expect(exotic.body.detail).toMatch(/not allowed/);
  });

  it('a body over the limit is a 413 and nothing is written', async () => {
    const before = await app.deps.repos.users.users.countDocuments({ team_id: tenant.teamId });
    const res = await api.post('/v2/user/', { client_user_id: 'big', padding: 'x'.repeat(4096) });
    expect(res.status).toBe(413);
    expect(res.body.detail).toMatch(/larger than the limit of 2048 bytes/);
    expect(await app.deps.repos.users.users.countDocuments({ team_id: tenant.teamId })).toBe(before);
  });

  it('an id or name with a control character is a 422 at its field, at any depth, and nothing is written', async () => {
    const before = await app.deps.repos.users.users.countDocuments({ team_id: tenant.teamId });
    for (const bad of ['a\u0000b', 'line\nbreak', 'tab\there', 'del\u007f']) {
      const res = await api.post('/v2/user/', { client_user_id: bad });
      expect(res.status).toBe(422);
      expect(res.body.detail).toEqual([{ loc: ['body', 'client_user_id'], msg: expect.stringMatching(/Control characters/), type: 'string_pattern_mismatch' }]);
    }
    expect(await app.deps.repos.users.users.countDocuments({ team_id: tenant.teamId })).toBe(before);
    // Nested name fields and ids in arrays too (the rest of the body is checked as usual).
    const order = await api.post('/v3/order', { user_id: 'x', order_set: { lab_test_ids: ['ok', 'b\u0000ad'] }, patient_details: { first_name: 'An\na' } });
    expect(order.status).toBe(422);
    const locs = order.body.detail.filter((e: { type: string }) => e.type === 'string_pattern_mismatch').map((e: { loc: unknown }) => e.loc);
    expect(locs).toEqual(
      expect.arrayContaining([
        ['body', 'order_set', 'lab_test_ids', 1],
        ['body', 'patient_details', 'first_name'],
      ]),
    );
    // Other text may hold line breaks: an id or name field only.
    expect((await api.post('/v2/user/', { client_user_id: `fine-${Date.now()}` })).status).toBe(200);
  });

  it('a 500 names the request id and leaks no internals', async () => {
    const broken = await startTestApp();
    try {
      const t = await createTenant(broken.deps);
      const c = teamClient(broken, t);
      expect((await c.get('/v2/user/')).status).toBe(200); // key now cached
      await broken.deps.db.client.close(true);
      const res = await c.get('/v2/user/', { 'x-request-id': 'boom-1' });
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ detail: 'Internal server error. Quote request id boom-1 when reporting it.' });
      expect(res.text).not.toMatch(/Mongo|at .*\.ts|stack/i);
    } finally {
      await broken.close().catch(() => undefined);
    }
  });
});

describe('health, readiness, OpenAPI and docs', () => {
  it('reports liveness and readiness of MongoDB, Temporal and the worker', async () => {
    const client = httpClient(app.url);
    expect((await client.get('/health')).body).toEqual({ status: 'ok' });
    const ready = await client.get('/ready');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'ready', checks: { mongodb: true, temporal: true, worker: true, search_attributes: true } });
  });

  it('is not ready when no worker polls its task queue', async () => {
    const lonely = await startTestApp({ TEMPORAL_TASK_QUEUE: 'queue-without-worker' });
    try {
      const ready = await httpClient(lonely.url).get('/ready');
      expect(ready.status).toBe(503);
      expect(ready.body.checks).toEqual({ mongodb: true, temporal: true, worker: false, search_attributes: true });
    } finally {
      await lonely.close();
    }
  });

  it('serves a valid OpenAPI 3.1 document of the interface version', async () => {
    const res = await httpClient(app.url).get('/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe('3.1.0');
    expect(res.body.info.version).toBe('0.4.566');
    await SwaggerParser.validate(structuredClone(res.body));
    expect(Object.keys(res.body.paths)).toEqual(
      expect.arrayContaining(['/v2/user/', '/v2/user/{user_id}', '/v2/user/undo_delete', '/v2/providers/', '/v1/org/{org_id}/team']),
    );
    expect(res.body.paths['/v2/user/'].post.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/UserCreateBody',
    });
  });

  it('renders the docs page from locally served assets', async () => {
    const client = httpClient(app.url);
    const page = await client.get('/docs');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(page.text).not.toMatch(/https?:\/\//);
    const bundle = await fetch(`${app.url}/docs/assets/swagger-ui-bundle.js`);
    expect(bundle.status).toBe(200);
    expect((await bundle.text()).length).toBeGreaterThan(100000);
    expect((await client.get('/docs/assets/..%2Fpackage.json')).status).toBe(404);
  });
});

describe('configuration', () => {
  it('stops with a message naming each bad variable', () => {
    expect(() => loadConfig({ API_PORT: 'eighty', DEPLOYMENT_REGION: 'mars' })).toThrow(ConfigError);
    try {
      loadConfig({ API_PORT: 'eighty', DEPLOYMENT_REGION: 'mars' });
    } catch (err) {
      expect((err as Error).message).toMatch(/API_PORT="eighty"/);
      expect((err as Error).message).toMatch(/DEPLOYMENT_REGION="mars"/);
    }
  });

  it('stops a production start without PUBLIC_BASE_URL, naming it and what to set; sandbox defaults to its own address', () => {
    const production = { DEPLOYMENT_ENVIRONMENT: 'production', DATA_ENCRYPTION_KEYS: generateDataKey('k1'), METRICS_TOKEN: 'metrics-token' };
    expect(() => loadConfig(production)).toThrow(ConfigError);
    expect(() => loadConfig(production)).toThrow(/PUBLIC_BASE_URL: required in production .*e\.g\. https:\/\/api\.example\.com/);
    expect(publicBaseUrl(loadConfig({ ...production, PUBLIC_BASE_URL: 'https://api.example.com/' }))).toBe('https://api.example.com');
    expect(publicBaseUrl(loadConfig({ API_HOST: '0.0.0.0', API_PORT: '9000' }))).toBe('http://127.0.0.1:9000');
  });

  it('stops a production start without METRICS_TOKEN (GET /metrics would answer anyone), naming it and how to make one; sandbox may leave it open', () => {
    const production = { DEPLOYMENT_ENVIRONMENT: 'production', DATA_ENCRYPTION_KEYS: generateDataKey('k1'), PUBLIC_BASE_URL: 'https://api.example.com' };
    expect(() => loadConfig(production)).toThrow(ConfigError);
    expect(() => loadConfig(production)).toThrow(/METRICS_TOKEN: required in production .*openssl rand -hex 32/);
    expect(loadConfig({ ...production, METRICS_TOKEN: 'a-long-random-value' }).METRICS_TOKEN).toBe('a-long-random-value');
    expect(loadConfig({ DEPLOYMENT_ENVIRONMENT: 'sandbox' }).METRICS_TOKEN).toBeUndefined();
  });

  it('reads integers in decimal only', () => {
    expect(loadConfig({ API_PORT: '9000' }).API_PORT).toBe(9000);
    expect(() => loadConfig({ API_PORT: '0x2328' })).toThrow(/API_PORT="0x2328": Input should be a valid integer/);
  });

  it('applies defaults and converts types', () => {
    const config = loadConfig({ API_PORT: '9000' });
    expect(config).toMatchObject({ API_PORT: 9000, DEPLOYMENT_ENVIRONMENT: 'sandbox', DEPLOYMENT_REGION: 'us', USER_DELETION_GRACE_SECONDS: 604800 });
  });
});

describe('logs', () => {
  it('writes one JSON line per request with status and latency, and redacts keys, patient and insurance data and credentials', async () => {
    const lines: string[] = [];
    const sink = { write: (line: string) => void lines.push(line) };
    const logger = createLogger('info', 'api-test', sink);
    const logged = await startTestApp({}, { logger });
    try {
      const t = await createTenant(logged.deps);
      await teamClient(logged, t).get('/v2/user/?limit=1', { 'x-request-id': 'log-check-1' });
      const entry = lines.map((l) => JSON.parse(l)).find((l) => l.req_id === 'log-check-1');
      expect(entry).toMatchObject({ msg: 'request', method: 'GET', path: '/v2/user/', status: 200, team_id: t.teamId });
      expect(typeof entry.latency_ms).toBe('number');

      logger.info(
        {
          headers: { 'x-service-api-key': t.teamKey, 'x-management-key': t.managementKey },
          patient_details: { first_name: 'Jane', dob: '1990-01-01' },
          user: { email: 'jane@example.com', phone_number: '+15551234567' },
          body: { member_id: 'MBR-77120', group_id: 'GRP-5531', insured: { last_name: 'Okafor' }, guarantor: { last_name: 'Okafor' } },
          credentials: { client_secret: 'cs-very-secret-9981' },
          // A provider's token response and push secrets (lib/wearables/providers/).
          tokens: { access_token: 'at-provider-4411', refresh_token: 'rt-provider-5522', code_verifier: 'pkce-verifier-6633' },
          app: { signature_secret_key: 'polar-secret-7744', webhook_secret: 'wh-8855', verify_token: 'vt-9966' },
          // Deeper than any fixed redaction path list reaches: still redacted.
          job: { request: { payload: { orders: [{ patient_details: { last_name: 'Deepnest' } }], insurance: { member_id: 'MBR-DEEP-1' } } } },
        },
        'redaction probe',
      );
      const probe = lines[lines.length - 1];
      const leaks = [
        t.teamKey,
        t.managementKey,
        'Jane',
        '1990-01-01',
        'jane@example.com',
        '+15551234567',
        'MBR-77120',
        'GRP-5531',
        'Okafor',
        'cs-very-secret-9981',
        'Deepnest',
        'MBR-DEEP-1',
        'at-provider-4411',
        'rt-provider-5522',
        'pkce-verifier-6633',
        'polar-secret-7744',
        'wh-8855',
        'vt-9966',
      ];
      for (const secret of leaks) {
        expect(probe).not.toContain(secret);
      }
      expect(probe).toContain('[redacted]');
    } finally {
      await logged.close();
    }
  });
});
