import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import type { Browser } from 'playwright-core';
import { hashKey } from '../lib/platform/keys';
import { publishEvent } from '../lib/events/publisher';
import { ConsoleLink, ConsoleSession } from '../schemas/console';
import { launchBrowser, watchedPage, type WatchedPage } from './support/browser';
import { boundQueue, startTestBrokers, type TestBrokers } from './support/brokers';
import {
  createTenant,
  eventually,
  expectSchema,
  httpClient,
  managementClient,
  startTestApp,
  type HttpClient,
  type Tenant,
  type TestApp,
} from './support/harness';
import { startReceiver, type Receiver } from './support/receiver';

/**
 * The delivery-log page (/console) in real headless Chromium against the real app, the shared worker, a real
 * webhook receiver and a real RabbitMQ pipeline: sign-in by key and by one-time link, filters, an event's attempts,
 * resend, disable/enable, and the refusals. Screenshots land in .devstack/screenshots/. Its link and session
 * endpoints are also tested at the API.
 */
const FAST = { WEBHOOK_RETRY_SCHEDULE_MS: '0,100,100,100', WEBHOOK_THROTTLE_FLOOR_MS: 300, WEBHOOK_ATTEMPT_TIMEOUT_MS: 500 };
const USER_A = '0b6f1c2e-7d3a-4c55-9a1e-3f2b8c4d5e61';
const USER_B = '5a9e8d7c-6b5a-4f3e-8d2c-1b0a9f8e7d6c';

let app: TestApp;
let tenant: Tenant;
let mgmt: HttpClient;
let rx: Receiver;
let browser: Browser;
let env: string;
let teamPath: string;
let hookId: string;
/** The receiver refuses events of this type (500, with a body the page shows) until set to null. */
let refusedType: string | null = 'labtest.order.updated';
let failedEventId: string;
let brokers: TestBrokers;
let amqpConnection: amqp.ChannelModel;
let pipelineId: string;
/** The pipeline's exchange: steps go to a bound queue; sleep to a routing key no queue is bound to (yet), so they fail. */
const exchange = `hb-console-${randomUUID()}`;
const ARCHIVE_KEY = `archive-${randomUUID()}`;
let sleepEventId: string;
const pages: WatchedPage[] = [];

beforeAll(async () => {
  [app, brokers] = await Promise.all([startTestApp(FAST), startTestBrokers('console')]);
  amqpConnection = await amqp.connect(brokers.amqpUrl);
  tenant = await createTenant(app.deps, 'Console');
  mgmt = managementClient(app, tenant);
  env = app.deps.config.DEPLOYMENT_ENVIRONMENT;
  teamPath = `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${env}`;
  rx = await startReceiver((req) =>
    refusedType && JSON.parse(req.body).event_type === refusedType ? { status: 500, body: '{"error":"orders database is read-only"}' } : { status: 200 },
  );
  const hook = await mgmt.post(`${teamPath}/webhook`, { url: `${rx.url}/hooks`, description: 'Orders backend' });
  expect(hook.status).toBe(200);
  hookId = hook.body.id;
  const amqpUrl = new URL(brokers.amqpUrl);
  await boundQueue(amqpConnection, exchange, 'wearables');
  const pipeline = await mgmt.post(`${teamPath}/pipeline`, {
    description: 'Data team (RabbitMQ)',
    destination: {
      type: 'rabbitmq',
      url: `amqp://${amqpUrl.host}`,
      username: decodeURIComponent(amqpUrl.username),
      password: decodeURIComponent(amqpUrl.password),
      exchange,
    },
    routes: [
      { event_type_prefix: 'daily.data.steps.', target: 'wearables' },
      { event_type_prefix: 'daily.data.sleep.', target: ARCHIVE_KEY },
    ],
  });
  expect(pipeline.status).toBe(200);
  pipelineId = pipeline.body.id;
  const publish = (eventType: string, userId: string) =>
    publishEvent(app.deps, { teamId: tenant.teamId, eventType, data: { n: 1 }, userId, clientUserId: 'c-1' });
  await publish('daily.data.steps.created', USER_A);
  sleepEventId = (await publish('daily.data.sleep.created', USER_B)).id;
  failedEventId = (await publish('labtest.order.updated', USER_A)).id;
  await eventually(
    async () => (await mgmt.get(`${teamPath}/webhook/${hookId}/deliveries?status=failed`)).body.data?.length === 1,
    30_000,
    'the refused event to fail',
  );
  await eventually(
    async () => (await mgmt.get(`${teamPath}/pipeline/${pipelineId}/deliveries?status=failed`)).body.data?.length === 1,
    30_000,
    'the unroutable event to fail',
  );
  browser = await launchBrowser();
}, 300_000);
afterAll(async () => {
  await Promise.all(pages.map((p) => p.close()));
  await browser?.close();
  await rx?.close();
  await amqpConnection?.close().catch(() => undefined);
  if (brokers) expect(await brokers.stop()).toBe(true);
  await app?.close();
}, 60_000);

async function open(path = '/console'): Promise<WatchedPage> {
  const watched = await watchedPage(browser);
  pages.push(watched);
  const res = await watched.page.goto(app.url + path);
  expect(res?.status()).toBe(200);
  return watched;
}

async function signInWithKey(w: WatchedPage, key = tenant.managementKey): Promise<void> {
  await w.page.getByLabel('Management key').fill(key);
  await w.page.getByLabel('Organisation id').fill(tenant.orgId);
  await w.page.getByLabel('Team id').fill(tenant.teamId);
  await w.page.getByLabel('Environment').selectOption(env);
  await w.page.getByRole('button', { name: 'Sign in' }).click();
}

const newLink = async (): Promise<string> => {
  const res = await mgmt.post(`${teamPath}/console/links`);
  expect(res.status).toBe(201);
  expectSchema(ConsoleLink, res.body);
  return res.body.url;
};
const tokenOf = (url: string) => new URL(url).hash.replace('#link=', '');
/** The refusal the sign-in form shows, once it shows one. */
const refusal = (w: WatchedPage) => w.page.locator('#signin-error:not([hidden])').textContent({ timeout: 10_000 });
/** A browser refuses a 401 fetch with a console message of its own: the only errors a refusal may show. */
const onlyRefusals = (errors: string[]) => errors.filter((e) => !/status of 401/.test(e));

describe('the page', () => {
  test('is served from this origin only, with a Content-Security-Policy, and names no outside host', async () => {
    const res = await fetch(`${app.url}/console`);
    expect(res.headers.get('content-security-policy')).toMatch(/default-src 'self'/);
    expect(res.headers.get('content-security-policy')).toMatch(/frame-ancestors 'none'/);
    const files = await Promise.all(
      ['/console', ...['console.js', 'api.js', 'views.js', 'console.css'].map((f) => `/console/assets/${f}`)].map((p) =>
        fetch(app.url + p).then((r) => r.text()),
      ),
    );
    for (const text of files) expect(text).not.toMatch(/https?:\/\/|\/\/[a-z0-9.-]+\.[a-z]{2,}\//i);
    expect((await fetch(`${app.url}/console/assets/secrets.json`)).status).toBe(404);
  });

  test('with a management key: destinations and their health, events filtered by type and user, an attempt, resend, disable and enable', async () => {
    const w = await open();
    const { page } = w;
    await signInWithKey(w);
    const destination = page.locator(`[data-dest="${hookId}"]`);
    await expect(destination.textContent()).resolves.toMatch(/Orders backend.*failing since/);
    await page.locator('#rows-body tr').first().waitFor();
    expect(await page.locator('#rows-body tr').count()).toBe(3);
    await w.screenshot('console-1-events');

    // Filters: by type (the `/` key focuses it), then by user; they stay in the address (never the key).
    await page.keyboard.press('/');
    await page.keyboard.type('daily.data.sleep.created');
    await page.keyboard.press('Enter');
    await eventually(async () => (await page.locator('#rows-body tr').count()) === 1);
    expect(await page.locator('#rows-body').textContent()).toContain('daily.data.sleep.created');
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.getByLabel('User id').fill(USER_A);
    await page.getByRole('button', { name: 'Filter' }).click();
    await eventually(async () => (await page.locator('#rows-body tr').count()) === 2);
    expect(page.url()).toContain(`user_id=${USER_A}`);
    expect(page.url()).not.toContain(tenant.managementKey);

    // The endpoint's failed deliveries: j moves to the row, Enter opens the event with its four attempts.
    await destination.click();
    await page.getByLabel('Status').selectOption('failed');
    await page.getByRole('button', { name: 'Filter' }).click();
    await eventually(async () => (await page.locator('#rows-body tr').count()) === 1);
    await page.keyboard.press('j');
    await page.keyboard.press('Enter');
    const attempts = page.locator('#detail .attempt');
    await eventually(async () => (await attempts.count()) === 4);
    const first = await attempts.first().textContent();
    expect(first).toMatch(/HTTP 500/);
    expect(first).toContain('orders database is read-only'); // the response excerpt
    expect(first).toMatch(/\d+ ms/);
    await w.screenshot('console-2-attempts');

    // Resend once the receiver is healthy: the new (manual) attempt appears without reloading.
    refusedType = null;
    await page.locator(`#detail [data-resend="${hookId}"]`).click();
    await eventually(async () => (await attempts.count()) === 5, 30_000, 'the resent attempt on the page');
    expect(await attempts.first().textContent()).toMatch(/HTTP 200.*#5.*manual resend/);
    expect(rx.requests.filter((r) => r.headers['webhook-id'] === failedEventId)).toHaveLength(5);
    // The failed list refreshes without it, and says why it is empty.
    const listStatus = () => page.locator('#list-status').textContent();
    await eventually(async () =>
      /^No failed deliveries to Orders backend for user \S+\. The open event's delivery has succeeded since, so it left this list\./.test(
        (await listStatus()) ?? '',
      ),
    );
    await w.screenshot('console-3-resent');
    await page.keyboard.press('Escape');
    expect(await page.locator('#detail').isHidden()).toBe(true);

    await page.getByRole('button', { name: 'Disable' }).click();
    await eventually(async () => /disabled \(manual\)/.test((await destination.textContent()) ?? ''));
    expect((await mgmt.get(`${teamPath}/webhook/${hookId}`)).body.disabled).toBe(true);
    await w.screenshot('console-4-disabled');
    await page.getByRole('button', { name: 'Enable' }).click();
    await eventually(async () => /healthy/.test((await destination.textContent()) ?? ''));
    expect((await mgmt.get(`${teamPath}/webhook/${hookId}`)).body.disabled).toBe(false);
    expect(w.errors).toEqual([]);
  });

  test('a RabbitMQ pipeline: its health, its failed delivery with the broker refusal, resend once a queue is bound, disable and enable', async () => {
    const w = await open();
    const { page } = w;
    await signInWithKey(w);
    const destination = page.locator(`[data-dest="${pipelineId}"]`);
    await expect(destination.textContent()).resolves.toMatch(/Data team \(RabbitMQ\).*pipeline.*failing since/);

    // Its deliveries: steps went to the bound queue, sleep to a routing key nobody reads.
    await destination.click();
    await eventually(async () => (await page.locator('#rows-body tr').count()) === 2);
    expect(await page.locator('#rows-body').textContent()).toMatch(/daily\.data\.sleep\.created.*failed.*daily\.data\.steps\.created.*succeeded/);
    await page.locator(`#rows-body tr[data-event="${sleepEventId}"]`).click();
    // The sleep event also went to the webhook, which took it: both deliveries and all five attempts, each with its
    // destination's name, the pipeline's latest first.
    const attempts = page.locator('#detail .attempt');
    await eventually(async () => (await attempts.count()) === 5);
    expect(await attempts.first().textContent()).toMatch(/unroutable.*#4.*Data team \(RabbitMQ\)/);
    expect(await page.locator('#detail table.mini').textContent()).toMatch(
      /Orders backend.*succeeded.*Data team \(RabbitMQ\).*failed|Data team \(RabbitMQ\).*failed.*Orders backend.*succeeded/,
    );
    await w.screenshot('console-7-pipeline-failed');

    // A queue for that routing key, then resend: the broker takes it, and the page says so.
    const { messages: archived } = await boundQueue(amqpConnection, exchange, ARCHIVE_KEY);
    await page.locator(`#detail [data-resend="${pipelineId}"]`).click();
    await eventually(async () => (await attempts.count()) === 6, 30_000, 'the resent attempt on the page');
    expect(await attempts.first().textContent()).toMatch(/accepted.*#5.*manual resend.*Data team \(RabbitMQ\)/);
    await eventually(async () => archived.some((m) => m.properties.messageId === sleepEventId), 10_000, 'the resent message in its queue');
    await w.screenshot('console-8-pipeline-resent');
    await page.keyboard.press('Escape');

    await page.getByRole('button', { name: 'Disable' }).click();
    await eventually(async () => /disabled \(manual\)/.test((await destination.textContent()) ?? ''));
    expect((await mgmt.get(`${teamPath}/pipeline/${pipelineId}`)).body.disabled).toBe(true);
    await page.getByRole('button', { name: 'Enable' }).click();
    await eventually(async () => /healthy/.test((await destination.textContent()) ?? ''));
    expect((await mgmt.get(`${teamPath}/pipeline/${pipelineId}`)).body).toMatchObject({ disabled: false, failing_since: null });
    expect(w.errors).toEqual([]);
  });

  test("a sign-in link without PUBLIC_BASE_URL (a sandbox's default) carries the api's own address", async () => {
    const configured = app.deps.config;
    app.deps.config = { ...configured, PUBLIC_BASE_URL: undefined, API_HOST: '127.0.0.1', API_PORT: Number(new URL(app.url).port) };
    try {
      const url = await newLink();
      expect(url).toMatch(new RegExp(`^${app.url}/console#link=hbcl_`));
      // And it signs in (which uses it up: later tests look for the team's unused link).
      const w = await open(new URL(url).pathname + new URL(url).hash);
      await w.page.locator(`[data-dest="${hookId}"]`).waitFor();
    } finally {
      app.deps.config = configured;
    }
  });

  test('with a one-time link: signed in without a key, the token leaves the address bar, and the link opens the page once', async () => {
    const url = await newLink();
    expect(url).toMatch(new RegExp(`^${app.url}/console#link=hbcl_`));
    const w = await open(new URL(url).pathname + new URL(url).hash);
    await w.page.locator(`[data-dest="${hookId}"]`).waitFor();
    expect(w.page.url()).toBe(`${app.url}/console`);
    expect(await w.page.locator('#scope').textContent()).toMatch(/link session until/);
    await w.page.locator('#rows-body tr').first().waitFor();
    expect(w.errors).toEqual([]);

    const again = await open(new URL(url).pathname + new URL(url).hash);
    await expect(refusal(again)).resolves.toMatch(/already used/);
    await again.screenshot('console-5-link-used');
    expect(onlyRefusals(again.errors)).toEqual([]);
  });

  test('refuses a wrong key and an expired link, saying why', async () => {
    const w = await open();
    await signInWithKey(w, 'mg_not_a_key');
    await expect(refusal(w)).resolves.toMatch(/Refused: invalid management key. Check that it was pasted whole/);
    expect(await w.page.locator('#console').isHidden()).toBe(true);
    await w.screenshot('console-6-wrong-key');
    expect(onlyRefusals(w.errors)).toEqual([]);

    const url = await newLink();
    // Expired: its stored expiry moved into the past (no waiting).
    await app.inspect
      .collection('console_sessions')
      .updateOne({ kind: 'link', used_at: null, team_id: tenant.teamId }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    const expired = await open(new URL(url).pathname + new URL(url).hash);
    await expect(refusal(expired)).resolves.toMatch(/expired/);
    expect(onlyRefusals(expired.errors)).toEqual([]);
  });
});

describe('sign-in links and sessions (API)', () => {
  const anonymous = () => httpClient(app.url);

  test('a link becomes one session of one team, which acts as a team-scoped key and ends with its key', async () => {
    const link = tokenOf(await newLink());
    const session = await anonymous().post('/v1/console/sessions', { link });
    expect(session.status).toBe(201);
    expectSchema(ConsoleSession, session.body);
    expect(session.body).toMatchObject({ org_id: tenant.orgId, team_id: tenant.teamId, environment: env });
    const bearer = httpClient(app.url, { Authorization: `Bearer ${session.body.token}` });
    expect((await bearer.get(`${teamPath}/webhook`)).status).toBe(200);

    const reused = await anonymous().post('/v1/console/sessions', { link });
    expect(reused).toMatchObject({ status: 401, body: { detail: expect.stringMatching(/already used/) } });
    expect((await anonymous().post('/v1/console/sessions', { link: 'hbcl_unknown' })).status).toBe(401);
    expect((await anonymous().post('/v1/console/sessions', {})).status).toBe(422);

    // Only its team, nothing at organisation level, no further links.
    const other = await app.deps.repos.tenancy.createTeam(tenant.orgId, 'Console other team', env, app.deps.config.DEPLOYMENT_REGION);
    expect((await bearer.get(`/v1/org/${tenant.orgId}/team/${other._id}/${env}/webhook`)).status).toBe(403);
    expect((await bearer.post(`/v1/org/${tenant.orgId}/team`, { name: 'By a session' })).status).toBe(403);
    expect((await bearer.post(`${teamPath}/console/links`)).status).toBe(403);
    expect((await httpClient(app.url, { Authorization: 'Bearer hbcs_forged' }).get(`${teamPath}/webhook`)).status).toBe(401);

    // Changes through a session are audited as the key that made the link; so are the link's making and use.
    expect((await bearer.patch(`${teamPath}/webhook/${hookId}`, { description: 'Orders backend' })).status).toBe(200);
    const audit = (await mgmt.get(`/v1/org/${tenant.orgId}/audit_log?team_id=${tenant.teamId}`)).body.data as {
      action: string;
      actor: { header: string };
      status: string;
    }[];
    expect(audit.find((e) => e.action === 'webhook.update')).toMatchObject({ actor: { header: 'Authorization' }, status: 'succeeded' });
    expect(audit.filter((e) => e.action === 'console.link.use').map((e) => e.status)).toEqual(expect.arrayContaining(['succeeded', 'failed']));
    expect(audit.some((e) => e.action === 'console.link.create')).toBe(true);

    // A session ends when the key that opened it is deleted.
    const scoped = await mgmt.post(`/v1/org/${tenant.orgId}/management_key`, {
      role: 'team_admin',
      label: 'console',
      team_role_bindings: [{ team_id: tenant.teamId }],
    });
    const scopedLink = await httpClient(app.url, { 'X-Management-Key': scoped.body.value }).post(`${teamPath}/console/links`);
    const scopedSession = await anonymous().post('/v1/console/sessions', { link: tokenOf(scopedLink.body.url) });
    const scopedBearer = httpClient(app.url, { Authorization: `Bearer ${scopedSession.body.token}` });
    expect((await scopedBearer.get(`${teamPath}/webhook`)).status).toBe(200);
    expect((await mgmt.del(`/v1/org/${tenant.orgId}/management_key/${scoped.body.id}`)).status).toBe(204);
    expect(await scopedBearer.get(`${teamPath}/webhook`)).toMatchObject({ status: 401, body: { detail: expect.stringMatching(/session/) } });
  });

  test('an expired session is refused', async () => {
    const session = await anonymous().post('/v1/console/sessions', { link: tokenOf(await newLink()) });
    const bearer = httpClient(app.url, { Authorization: `Bearer ${session.body.token}` });
    expect((await bearer.get(`${teamPath}/webhook`)).status).toBe(200);
    await app.inspect
      .collection('console_sessions')
      .updateOne({ _id: hashKey(session.body.token) } as never, { $set: { expires_at: new Date(Date.now() - 1000) } });
    expect((await bearer.get(`${teamPath}/webhook`)).status).toBe(401);
  });

  test('an event lists its deliveries, and deliveries filter by event type and user', async () => {
    const deliveries = await mgmt.get(`${teamPath}/webhook/events/${failedEventId}/deliveries`);
    expect(deliveries.status).toBe(200);
    expect(deliveries.body.data).toEqual([expect.objectContaining({ event_id: failedEventId, webhook_id: hookId })]);
    const byType = await mgmt.get(`${teamPath}/webhook/${hookId}/deliveries?event_type=daily.data.steps.created`);
    expect(byType.body.data.map((d: { event_type: string }) => d.event_type)).toEqual(['daily.data.steps.created']);
    const byUser = await mgmt.get(`${teamPath}/webhook/${hookId}/deliveries?user_id=${USER_B}`);
    expect(byUser.body.data.map((d: { event_type: string }) => d.event_type)).toEqual(['daily.data.sleep.created']);
  });

  test("a [since, until) window holds exactly the events created in it; an event's attempts are its own, to every destination", async () => {
    const latest = await publishEvent(app.deps, {
      teamId: tenant.teamId,
      eventType: 'daily.data.steps.created',
      data: { n: 2 },
      userId: USER_A,
      clientUserId: 'c-1',
    });
    const at = latest.createdAt.getTime();
    const window = async (since: number, until: number) =>
      (await mgmt.get(`${teamPath}/webhook/events?since=${new Date(since).toISOString()}&until=${new Date(until).toISOString()}`)).body.data.map(
        (e: { id: string }) => e.id,
      );
    await expect(window(at, at + 1)).resolves.toEqual([latest.id]);
    await expect(window(at - 60_000, at)).resolves.not.toContain(latest.id); // until is exclusive
    await expect(window(at + 1, at + 60_000)).resolves.toEqual([]);
    await expect(window(at - 3_600_000, at + 1)).resolves.toEqual(expect.arrayContaining([latest.id, sleepEventId, failedEventId]));

    const attempts = (await mgmt.get(`${teamPath}/webhook/events/${sleepEventId}/attempts`)).body.data as { event_id: string; webhook_id: string }[];
    expect(attempts.length).toBeGreaterThanOrEqual(5); // the webhook's one, the pipeline's four (and a resend)
    expect(new Set(attempts.map((a) => a.event_id))).toEqual(new Set([sleepEventId]));
    expect(new Set(attempts.map((a) => a.webhook_id))).toEqual(new Set([hookId, pipelineId]));
  });

  test("a user's events when they are few among many (read off the user's index, not the walk) are exactly theirs", async () => {
    const others = Array.from({ length: 60 }, () => randomUUID());
    await Promise.all(
      others.map((userId) => publishEvent(app.deps, { teamId: tenant.teamId, eventType: 'provider.connection.created', data: {}, userId, clientUserId: null })),
    );
    const byUser = await mgmt.get(`${teamPath}/webhook/events?user_id=${USER_B}&limit=1`);
    expect(byUser.body.data.map((e: { id: string }) => e.id)).toEqual([sleepEventId]);
    expect(byUser.body.next_cursor).toBeNull();
    // Paged by the cursor on that path too: the first of USER_A's events, then the rest.
    const first = (await mgmt.get(`${teamPath}/webhook/events?user_id=${USER_A}&limit=1`)).body;
    expect(first.data).toHaveLength(1);
    const rest = (await mgmt.get(`${teamPath}/webhook/events?user_id=${USER_A}&limit=10&next_cursor=${first.next_cursor}`)).body;
    expect([...first.data, ...rest.data].map((e: { user_id: string }) => e.user_id)).toEqual(Array(1 + rest.data.length).fill(USER_A));
    expect(rest.data.length).toBeGreaterThanOrEqual(2); // steps, the order update (and the window test's event)
  });
});
