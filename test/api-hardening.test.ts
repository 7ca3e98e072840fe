import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { listenApi } from '../api/app';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import Koa from 'koa';
import { errorRenderer } from '../api/middleware/errors';
import { requestContext } from '../api/middleware/request-context';
import { createLogger } from '../lib/platform/logger';
import { checkWebhookUrl } from '../lib/platform/url-safety';
import { Webhook } from '../schemas/webhook';
import {
  createTenant,
  expectSchema,
  httpClient,
  managementClient,
  startTestApp,
  teamClient,
  uniqueId,
  type HttpClient,
  type Tenant,
  type TestApp,
} from './support/harness';
import { createUser, registrationBody } from './support/lab';
import { startReceiver } from './support/receiver';

/**
 * Inputs from the issue list "hostile input at the edge": each used to answer 500, be stored in a shape
 * that later broke deliveries, or be documented differently from how it behaves.
 */
let app: TestApp;
let tenant: Tenant;
let api: HttpClient;
let mgmt: HttpClient;
let base: string;

beforeAll(async () => {
  app = await startTestApp();
  tenant = await createTenant(app.deps, 'Hardening');
  api = teamClient(app, tenant);
  mgmt = managementClient(app, tenant);
  base = `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`;
});
afterAll(() => app.close());

async function createHook(): Promise<string> {
  const res = await mgmt.post(base, { url: 'http://127.0.0.1:9/hook' });
  expect(res.status).toBe(200);
  return res.body.id;
}

describe('webhook custom headers', () => {
  test('a name that is not an HTTP token, a value that is not plain text, or a header the delivery owns is a 422 naming it; nothing changes', async () => {
    const id = await createHook();
    const kept = { 'X-Customer-Token': 'abc123' };
    expect((await mgmt.put(`${base}/${id}/headers`, { headers: kept })).status).toBe(200);

    const cases: [Record<string, unknown>, string][] = [
      [{ 'x y': 'v' }, 'x y'],
      [{ 'a\u0000b': 'v' }, 'a\u0000b'],
      [{ 'X-Ünicode': 'v' }, 'X-Ünicode'],
      [{ 'X-Nested': { a: 1 } }, 'X-Nested'],
      [{ 'X-Number': 5 }, 'X-Number'],
      [{ 'X-Crlf': 'a\r\nInjected: 1' }, 'X-Crlf'],
      [{ 'X-Nul': 'a\u0000b' }, 'X-Nul'],
      [{ 'X-Padded': ' v ' }, 'X-Padded'],
      [{ 'X-Latin': 'caf\u00e9' }, 'X-Latin'],
      [{ Expect: '100-continue' }, 'Expect'],
      [{ Upgrade: 'h2c' }, 'Upgrade'],
      [{ Connection: 'close' }, 'Connection'],
      [{ 'Keep-Alive': 'timeout=5' }, 'Keep-Alive'],
      [{ TE: 'trailers' }, 'TE'],
      [{ 'Transfer-Encoding': 'chunked' }, 'Transfer-Encoding'],
      [{ 'Content-Length': '1' }, 'Content-Length'],
      [{ 'Content-Encoding': 'gzip' }, 'Content-Encoding'],
      [{ Host: 'evil.example' }, 'Host'],
      [{ 'webhook-signature': 'v1,forged' }, 'webhook-signature'],
      [{ 'svix-id': 'forged' }, 'svix-id'],
      [{ 'X-Dup': '1', 'x-dup': '2' }, 'x-dup'],
    ];
    for (const [headers, name] of cases) {
      const res = await mgmt.put(`${base}/${id}/headers`, { headers });
      expect({ name, status: res.status }).toEqual({ name, status: 422 });
      expect(res.body.detail[0].loc).toEqual(['body', 'headers', name]);
      expect(typeof res.body.detail[0].msg).toBe('string');
      expect(typeof res.body.detail[0].type).toBe('string');
    }
    // Count and total size are bounded: 800 KB of headers would be refused by every receiver.
    const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`X-H${i}`, 'v']));
    const tooMany = await mgmt.put(`${base}/${id}/headers`, { headers: many });
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.detail[0].loc).toEqual(['body', 'headers']);
    const big = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`X-Big${i}`, 'x'.repeat(4000)]));
    const tooBig = await mgmt.put(`${base}/${id}/headers`, { headers: big });
    expect(tooBig.status).toBe(422);
    expect(tooBig.body.detail[0].loc).toEqual(['body', 'headers']);
    const huge = await mgmt.put(`${base}/${id}/headers`, { headers: { 'X-Huge': 'x'.repeat(800_000) } });
    expect([413, 422]).toContain(huge.status);

    expect((await mgmt.get(`${base}/${id}/headers`)).body).toEqual({ headers: kept });
  });

  test('every token is a valid name (also $x and a.b, which MongoDB could not hold as keys): stored, read back and delivered as typed', async () => {
    const rx = await startReceiver();
    try {
      const created = await mgmt.post(base, { url: rx.url });
      const id = created.body.id;
      const headers = { $x: 'dollar', 'a.b': 'dotted', 'X-Price$': '1', 'x-two': 'two words\tand a tab', "X-!#%&'*+^_`|~": '3', 'X-Empty': '' };
      const put = await mgmt.put(`${base}/${id}/headers`, { headers });
      expect(put.status).toBe(200);
      expect(put.body).toEqual({ headers });
      expect((await mgmt.get(`${base}/${id}/headers`)).body).toEqual({ headers });

      expect((await mgmt.post(`${base}/${id}/test`, {})).status).toBe(202);
      const [req] = await rx.waitFor(1);
      expect(req.headers).toMatchObject({
        $x: 'dollar',
        'a.b': 'dotted',
        'x-price$': '1',
        'x-two': 'two words\tand a tab',
        "x-!#%&'*+^_`|~": '3',
        'x-empty': '',
      });

      // Replacing really replaces.
      expect((await mgmt.put(`${base}/${id}/headers`, { headers: {} })).body).toEqual({ headers: {} });
      expect((await mgmt.get(`${base}/${id}/headers`)).body).toEqual({ headers: {} });
    } finally {
      await rx.close();
    }
  });
});

describe('integer parameters are bounded', () => {
  test('Infinity, 1e400 and numbers past the maximum are a 422 naming the parameter, on every kind of list', async () => {
    const orderId = '00000000-0000-4000-8000-000000000000';
    for (const [path, loc] of [
      ['/v2/user/?offset=Infinity', 'offset'],
      ['/v2/user/?offset=1e400', 'offset'],
      ['/v2/user/?offset=-Infinity', 'offset'],
      ['/v2/user/?offset=99999999999999999999', 'offset'],
      ['/v2/user/?limit=1e400', 'limit'],
      ['/v3/orders?page=Infinity', 'page'],
      ['/v3/orders?page=1e20', 'page'],
      ['/v3/lab_tests/markers?page=1e400', 'page'],
      ['/v3/lab_tests/markers?lab_id=1e400', 'lab_id'],
      ['/v3/lab_test?marker_ids=Infinity', 'marker_ids'],
      [`/v3/order/${orderId}/requisition/pdf/signed?expires=Infinity&signature=abc`, 'expires'],
      [`/v3/order/${orderId}/requisition/pdf/signed?expires=1e400&signature=abc`, 'expires'],
    ] as const) {
      const res = await api.get(path);
      expect({ path, status: res.status }).toEqual({ path, status: 422 });
      expect(res.body.detail[0].loc.slice(0, 2)).toEqual(['query', loc]);
    }
    for (const path of [`${base}?limit=Infinity`, `${base}/events?limit=1e400`]) {
      const res = await mgmt.get(path);
      expect({ path, status: res.status }).toEqual({ path, status: 422 });
    }
    expect((await api.get('/v2/user/?offset=0&limit=500')).status).toBe(200);
  });

  test('only decimal digits are an integer, and a parameter in bracket form is refused, not ignored', async () => {
    for (const [path, loc] of [
      ['/v2/user/?offset=0x10', 'offset'],
      ['/v2/user/?offset=0b1', 'offset'],
      ['/v2/user/?offset=%201', 'offset'],
      ['/v2/user/?offset=1.0', 'offset'],
      ['/v2/user/?offset=1e1', 'offset'],
      ['/v2/user/?limit[]=1&limit[]=2', 'limit'],
      ['/v2/user/?offset[]=1', 'offset'],
    ] as const) {
      const res = await api.get(path);
      expect({ path, status: res.status }).toEqual({ path, status: 422 });
      expect(res.body.detail[0].loc).toEqual(['query', loc]);
    }
    expect((await api.get('/v2/user/?offset=-0&limit=007')).status).toBe(200);
  });

  test('the OpenAPI document files every operation under one tag, so the docs page lists it once', async () => {
    const doc = (await httpClient(app.url).get('/openapi.json')).body;
    const multiTagged: string[] = [];
    for (const [path, ops] of Object.entries<Record<string, { tags?: string[] }>>(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) if ((op.tags ?? []).length !== 1) multiTagged.push(`${method} ${path}: ${JSON.stringify(op.tags ?? [])}`);
    }
    expect(multiTagged).toEqual([]);
    expect(doc.paths['/v2/link/token'].post.tags).toEqual(['Link']);
  });

  test('the OpenAPI document gives every integer parameter a maximum', async () => {
    const doc = (await httpClient(app.url).get('/openapi.json')).body;
    const unbounded: string[] = [];
    for (const [path, ops] of Object.entries<Record<string, { parameters?: { name: string; schema: Record<string, any> }[] }>>(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        for (const p of op.parameters ?? []) {
          const s = p.schema.type === 'array' ? p.schema.items : p.schema;
          if (s?.type === 'integer' && (typeof s.maximum !== 'number' || typeof s.minimum !== 'number')) unbounded.push(`${method} ${path} ${p.name}`);
        }
      }
    }
    expect(unbounded).toEqual([]);
  });
});

describe('text and nesting no schema speaks of', () => {
  const nested = (depth: number, leaf: unknown): unknown => {
    let value = leaf;
    for (let i = 0; i < depth; i++) value = [value];
    return value;
  };
  /** A body sent as the exact bytes given (fetch would re-encode a string as UTF-8). */
  const postBytes = async (path: string, bytes: Buffer, headers: Record<string, string> = {}) => {
    const res = await fetch(app.url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: bytes });
    return { status: res.status, body: (await res.json()) as { detail: { loc: unknown[]; msg: string; type: string }[] } };
  };

  test('JSON nested 2,000 deep inside a field is a 422 naming the field, with a key and on the console sign-in without one', async () => {
    const deep = nested(2000, 'x');
    const user = await api.post('/v2/user/', { client_user_id: deep });
    expect(user.status).toBe(422);
    const tooDeep = user.body.detail.find((e: { type: string }) => e.type === 'too_deep');
    expect(tooDeep.loc.slice(0, 3)).toEqual(['body', 'client_user_id', 0]);
    expect(tooDeep.msg).toBe('Input should be nested at most 32 levels deep');

    const session = await httpClient(app.url).post('/v1/console/sessions', { link: deep });
    expect(session.status).toBe(422);
    expect(session.body.detail.map((e: { loc: unknown[] }) => e.loc.slice(0, 2))).toContainEqual(['body', 'link']);
    expect(session.body.detail.map((e: { type: string }) => e.type)).toContain('too_deep');
  });

  test('bytes that are not UTF-8 are a 422 naming the field they are in (the body when no field holds them), never stored as U+FFFD', async () => {
    const clientUserId = uniqueId();
    const inField = await postBytes(
      '/v2/user/',
      Buffer.concat([Buffer.from(`{"client_user_id":"${clientUserId}`), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]),
      {
        'x-service-api-key': tenant.teamKey,
      },
    );
    expect(inField.status).toBe(422);
    expect(inField.body.detail).toEqual([{ loc: ['body', 'client_user_id'], msg: expect.stringMatching(/UTF-8/), type: 'string_unicode' }]);
    expect(await app.inspect.collection('users').countDocuments({ team_id: tenant.teamId, client_user_id: { $regex: `^${clientUserId}` } })).toBe(0);

    const outside = await postBytes('/v2/user/', Buffer.concat([Buffer.from(`{"client_user_id":"${clientUserId}"}`), Buffer.from([0xc3])]), {
      'x-service-api-key': tenant.teamKey,
    });
    expect(outside.status).toBe(422);
    expect(outside.body.detail[0]).toMatchObject({ loc: ['body'], type: 'string_unicode' });
  });

  test('a lone surrogate in a value or a field name is a 422 naming it', async () => {
    const inValue = await api.post('/v2/user/', `{"client_user_id":"${uniqueId()}\\ud800"}`, { 'content-type': 'application/json' });
    expect(inValue.status).toBe(422);
    expect(inValue.body.detail).toEqual([{ loc: ['body', 'client_user_id'], msg: expect.stringMatching(/unpaired UTF-16 surrogate/), type: 'string_unicode' }]);

    // `details` of custom credentials takes any field names (and any nesting below them).
    const { environment, region } = { environment: app.deps.config.DEPLOYMENT_ENVIRONMENT, region: app.deps.config.DEPLOYMENT_REGION };
    const credentials = (details: string) =>
      `{"team_id":"${tenant.teamId}","provider":"oura","client_id":"cid","client_secret":"cs_${uniqueId()}","details":${details}}`;
    const path = `/v1/org/${tenant.orgId}/team_custom_credentials/${environment}/${region}`;
    const inName = await mgmt.post(path, credentials('{"region\\udc00":"eu"}'), { 'content-type': 'application/json' });
    expect(inName.status).toBe(422);
    expect(inName.body.detail).toEqual([
      { loc: ['body', 'details', 'region\udc00'], msg: expect.stringMatching(/unpaired UTF-16 surrogate/), type: 'string_unicode' },
    ]);
    const tooDeep = await mgmt.post(path, credentials(JSON.stringify({ settings: nested(40, 1) })), { 'content-type': 'application/json' });
    expect(tooDeep.status).toBe(422);
    expect(tooDeep.body.detail).toEqual([{ loc: ['body', 'details', 'settings', ...Array(30).fill(0)], msg: expect.any(String), type: 'too_deep' }]);

    const paired = await api.post('/v2/user/', `{"client_user_id":"${uniqueId()}-\\ud83d\\ude00"}`, { 'content-type': 'application/json' });
    expect(paired.status).toBe(200);
    expect(paired.body.client_user_id).toMatch(/-\u{1F600}$/u);
  });
});

describe('webhook URLs', () => {
  test('IPv6 forms that embed a metadata, private or loopback IPv4 address are refused', async () => {
    for (const url of [
      'http://[64:ff9b::a9fe:a9fe]/', // NAT64 of 169.254.169.254
      'http://[64:ff9b::169.254.169.254]/',
      'http://[64:ff9b::a00:1]/', // NAT64 of 10.0.0.1
      'http://[64:ff9b:1::a9fe:a9fe]/', // local-use NAT64
      'http://[2002:a9fe:a9fe::]/', // 6to4 of 169.254.169.254
      'http://[2002:c0a8:101::1]/', // 6to4 of 192.168.1.1
      'http://[::a9fe:a9fe]/', // IPv4-compatible
      'http://[::169.254.169.254]/',
      'http://[::ffff:a9fe:a9fe]/', // IPv4-mapped, hex form
      'http://[::ffff:169.254.169.254]/',
      'http://[::ffff:0:a00:1]/', // IPv4-translated
      'http://[2001:0:4136:e378:8000:63bf:f5ff:fdfe]/', // Teredo, client 10.0.2.1
    ]) {
      const res = await mgmt.post(base, { url });
      expect({ url, status: res.status }).toEqual({ url, status: 422 });
      expect(res.body.detail[0].loc).toEqual(['body', 'url']);
      expect(res.body.detail[0].msg).toMatch(/metadata|private|link-local|not a public/);
    }
    const production = { requireHttps: false, allowLoopback: false, allowlist: [] as string[] };
    for (const host of ['[64:ff9b::7f00:1]', '[2002:7f00:1::]', '[::ffff:7f00:1]', '[::7f00:1]']) {
      expect(await checkWebhookUrl(`http://${host}/`, production)).toMatch(/loopback/);
    }
    // A public address in the same forms stays acceptable.
    expect(await checkWebhookUrl('http://[64:ff9b::808:808]/', production)).toBeNull();
    expect(await checkWebhookUrl('http://[2002:808:808::1]/', production)).toBeNull();
    expect(await checkWebhookUrl('http://[::ffff:808:808]/', production)).toBeNull();
  });

  test('the stored URL is the one that will be called: normalised, and ambiguous spellings refused', async () => {
    const created = await mgmt.post(base, { url: 'HTTP://0x7F.1:80/a/../hook?q=1' });
    expect(created.status).toBe(200);
    expectSchema(Webhook, created.body);
    expect(created.body.url).toBe('http://127.0.0.1/hook?q=1');
    expect((await mgmt.get(`${base}/${created.body.id}`)).body.url).toBe('http://127.0.0.1/hook?q=1');
    const patched = await mgmt.patch(`${base}/${created.body.id}`, { url: 'http://127.0.0.1:9/x/./y' });
    expect(patched.status).toBe(200);
    expect(patched.body.url).toBe('http://127.0.0.1:9/x/y');

    for (const [url, reason] of [
      ['http://user:pw@127.0.0.1:9/hook', /credentials|@/],
      ['http://@127.0.0.1:9/hook', /credentials|@/],
      ['http://127.0.0.1:9@169.254.169.254/', /credentials|@/],
      ['http://127.0.0.1:9/ho\tok', /tab|whitespace|control/i],
      ['http://127.0.0.1:9/hook\n', /whitespace|control/i],
      ['http://127.0.0.1:9\\@169.254.169.254/', /backslash/i],
      ['http://127.0.0.1:9/hook#frag', /fragment/i],
    ] as const) {
      const res = await mgmt.post(base, { url });
      expect({ url, status: res.status }).toEqual({ url, status: 422 });
      expect(res.body.detail[0].loc).toEqual(['body', 'url']);
      expect(res.body.detail[0].msg).toMatch(reason);
      const patch = await mgmt.patch(`${base}/${created.body.id}`, { url });
      expect({ url, status: patch.status }).toEqual({ url, status: 422 });
    }
    expect((await mgmt.get(`${base}/${created.body.id}`)).body.url).toBe('http://127.0.0.1:9/x/y');
  });
});

describe('methods', () => {
  const raw = (method: string, path: string) =>
    new Promise<{ status: number; allow: string | undefined; body: any }>((resolve, reject) => {
      const req = httpRequest(`${app.url}${path}`, { method, headers: { 'x-service-api-key': tenant.teamKey } }, (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, allow: res.headers.allow, body: text ? JSON.parse(text) : undefined }));
      });
      req.on('error', reject);
      req.end();
    });

  test('TRACE and other methods no route implements answer 405 with Allow (404 where no route matches the path)', async () => {
    for (const method of ['TRACE', 'PROPFIND', 'MKCOL', 'LOCK']) {
      const res = await raw(method, '/v2/user/');
      expect({ method, status: res.status }).toEqual({ method, status: 405 });
      expect(res.allow).toMatch(/GET/);
      expect(res.allow).toMatch(/POST/);
      expect(res.body.detail).toMatch(/not allowed/);
    }
    const unknown = await raw('TRACE', '/v2/nothing-here');
    expect(unknown.status).toBe(404);
  });

  test('a literal path segment names its own resource, not a path parameter of another: 405 and Allow of that resource', async () => {
    // `/webhook/events` also matches `/webhook/{webhook_id}` (PATCH, DELETE); it is the events list.
    const events = await mgmt.patch(`${base}/events`, {});
    expect(events.status).toBe(405);
    expect(events.headers.get('allow')).toBe('HEAD, GET');
    const options = await api.request('OPTIONS', '/v3/lab_tests/labs');
    expect(options.status).toBe(204);
    expect(options.headers.get('allow')).toBe('HEAD, GET');
    const labTest = await api.request('OPTIONS', '/v3/lab_tests/some-test');
    expect(labTest.headers.get('allow')).toMatch(/PATCH/);
  });
});

describe('the OpenAPI document matches behaviour', () => {
  test('parameters with a default are optional', async () => {
    const doc = (await httpClient(app.url).get('/openapi.json')).body;
    const params = (path: string, method = 'get') => doc.paths[path][method].parameters as { name: string; required: boolean; schema: { default?: unknown } }[];
    const required = (path: string, name: string) => params(path).find((p) => p.name === name)!.required;
    expect(required('/v2/user/', 'limit')).toBe(false);
    expect(required('/v2/user/', 'offset')).toBe(false);
    expect(required('/v3/orders', 'page')).toBe(false);
    for (const [path, ops] of Object.entries<Record<string, { parameters: { required: boolean; in: string; schema: { default?: unknown }; name: string }[] }>>(
      doc.paths,
    )) {
      for (const [method, op] of Object.entries(ops)) {
        for (const p of op.parameters) {
          if (p.in === 'query' && p.schema.default !== undefined)
            expect({ at: `${method} ${path} ${p.name}`, required: p.required }).toEqual({ at: `${method} ${path} ${p.name}`, required: false });
        }
      }
    }
    // Unknown body fields are ignored, and the document does not claim otherwise.
    expect(JSON.stringify(doc)).not.toContain('"additionalProperties":false');
    const renamed = await mgmt.patch(`/v1/org/${tenant.orgId}/team/${tenant.teamId}`, { name: 'Hardening team', unknown_field: 1 });
    expect(renamed.status).toBe(200);
    expect(renamed.body.name).toBe('Hardening team');
    const defaulted = await api.get('/v2/user/');
    expect(defaulted.status).toBe(200);
    expect(defaulted.body).toMatchObject({ offset: 0, limit: 100 });
  });

  test('the management key body schema accepts exactly what the handler accepts', async () => {
    const doc = (await httpClient(app.url).get('/openapi.json')).body;
    const validator = addFormats(new Ajv({ strict: false }));
    for (const [name, schema] of Object.entries(doc.components.schemas)) validator.addSchema(schema as object, `#/components/schemas/${name}`);
    const ref = doc.paths['/v1/org/{org_id}/management_key'].post.requestBody.content['application/json'].schema;
    const validate = validator.compile({ ...ref, $ref: ref.$ref });
    const bindings = [{ team_id: tenant.teamId }];
    for (const body of [
      { role: 'org_admin' },
      { role: 'org_admin', label: 'ops', team_role_bindings: [] },
      { role: 'org_admin', team_role_bindings: bindings },
      { role: 'team_admin' },
      { role: 'team_admin', team_role_bindings: [] },
      { role: 'team_admin', team_role_bindings: bindings },
      { role: 'team_admin', label: '', team_role_bindings: bindings },
    ]) {
      const res = await mgmt.post(`/v1/org/${tenant.orgId}/management_key`, body);
      const documented = validate(structuredClone(body));
      expect({ body, status: res.status, documented }).toEqual({ body, status: documented ? 200 : 422, documented });
    }
  });
});

describe('found by Schemathesis', () => {
  test('registering a kit with an empty lab_test_id is a 422, not a 500', async () => {
    const userId = await createUser(api);
    const res = await api.post('/v3/order/testkit/register', { ...registrationBody(userId), lab_test_id: '' });
    expect(res.status).toBe(422);
    expect(res.body.detail[0].loc).toEqual(['body', 'lab_test_id']);
  });
});

describe('500s', () => {
  test('the log line names the error class, code and request id, never request values', async () => {
    // A real database error that embeds request values: MongoDB and FerretDB both quote the document's `_id`
    // when `$inc` meets a field that is not a number.
    const collection = app.inspect.collection(`hardening_${uniqueId('inc').replace(/-/g, '_')}`);
    const secretName = 'Zanzibar Quuxley';
    const secretDob = '1901-02-03';
    const secret = `${secretName} ${secretDob}`;
    await collection.insertOne({ _id: secret as never, count: 'not a number' });
    const mongoError = await collection.updateOne({ _id: secret as never }, { $inc: { count: 1 } }).catch((err: unknown) => err);
    expect(mongoError).toBeInstanceOf(Error);
    expect(String((mongoError as Error).message)).toContain(secretName);
    await collection.drop();

    const lines: string[] = [];
    const logger = createLogger('info', 'api-test', { write: (line: string) => void lines.push(line) });
    const koa = new Koa();
    koa.use(requestContext(logger));
    koa.use(errorRenderer());
    koa.use(() => {
      throw mongoError;
    });
    const server = koa.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const { port } = server.address() as { port: number };
      const res = await fetch(`http://127.0.0.1:${port}/v2/user/?name=${encodeURIComponent(secretName)}`, { headers: { 'x-request-id': 'leak-check-1' } });
      expect(res.status).toBe(500);
      expect(await res.json()).toEqual({ detail: 'Internal server error. Quote request id leak-check-1 when reporting it.' });
    } finally {
      server.close();
    }
    const entries = lines.map((l) => JSON.parse(l));
    const errorLine = entries.find((e) => e.level >= 50);
    expect(errorLine).toMatchObject({ req_id: 'leak-check-1', err: { type: 'MongoServerError', code: (mongoError as { code: number }).code } });
    expect(typeof errorLine.err.stack).toBe('string');
    for (const line of lines) {
      expect(line).not.toContain('Zanzibar');
      expect(line).not.toContain(secretDob);
    }
  });
});

describe('keep-alive at the edge', () => {
  test(`a client that reuses a connection idle past Node's 5 s default gets an answer on it, not a reset`, async () => {
    const { Agent } = await import('node:http');
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = () =>
      new Promise<{ status: number; socket: unknown }>((resolve, reject) => {
        const req = httpRequest(`${app.url}/v2/providers/`, { agent, headers: { 'x-vital-api-key': tenant.teamKey } }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, socket: req.socket }));
        });
        req.on('error', reject);
        req.end();
      });
    try {
      const first = await get();
      expect(first.status).toBe(200);
      // The wait is the behaviour under test: the connection sits idle longer than the old 5 s keep-alive.
      await new Promise((r) => setTimeout(r, 6_000));
      const second = await get();
      expect(second.status).toBe(200);
      expect(second.socket).toBe(first.socket); // the same connection, still open
    } finally {
      agent.destroy();
    }
  }, 20_000);

  test('API_REUSE_PORT lets a second replica listen on the same port (SO_REUSEPORT); without it the port is taken', async () => {
    const port = (app.server.address() as AddressInfo).port;
    expect(app.deps.config.API_REUSE_PORT).toBe(false);
    await expect(listenApi(app.deps, port, '127.0.0.1')).rejects.toMatchObject({ code: 'EADDRINUSE' });
    // Two replicas that both ask for it share a port; each answers.
    const shared = { ...app.deps, config: { ...app.deps.config, API_REUSE_PORT: true } };
    const first = await listenApi(shared, 0, '127.0.0.1');
    const second = await listenApi(shared, (first.address() as AddressInfo).port, '127.0.0.1');
    try {
      expect((second.address() as AddressInfo).port).toBe((first.address() as AddressInfo).port);
      const res = await fetch(`http://127.0.0.1:${(second.address() as AddressInfo).port}/health`);
      expect(res.status).toBe(200);
    } finally {
      for (const server of [first, second]) {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    }
  });

  test('the server keeps idle connections API_KEEP_ALIVE_TIMEOUT_MS (65 s by default) and allows headers a second more', () => {
    expect(app.deps.config.API_KEEP_ALIVE_TIMEOUT_MS).toBe(65_000);
    expect(app.server.keepAliveTimeout).toBe(65_000);
    expect(app.server.headersTimeout).toBe(66_000);
  });
});
