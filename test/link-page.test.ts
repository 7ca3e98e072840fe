import type { Browser, Locator, Page } from 'playwright-core';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { hashKey } from '../lib/platform/keys';
import { addDays, todayUtc } from '../lib/platform/time';
import { ProviderLinkResponse, SourceLinkList } from '../schemas/link';
import { UserProvidersResponse } from '../schemas/wearables';
import { launchBrowser, watchedPage, type WatchedPage } from './support/browser';
import {
  createTenant,
  eventually,
  expectSchema,
  httpClient,
  managementClient,
  startTestApp,
  teamClient,
  uniqueId,
  type HttpClient,
  type Tenant,
  type TestApp,
  subscribeReceiver,
} from './support/harness';
import type { Receiver } from './support/receiver';

/**
 * The hosted link page (GET /link, `link_web_url`) in real headless Chromium against the real app, the shared worker
 * and a real webhook receiver: the team's brand, the catalogue's providers, a demo provider picked with the keyboard
 * (its connection in the API and provider.connection.created at the receiver), the OAuth step (the page sends the user
 * to the adapter's authorization URL), a password provider's sign-in form, and the refusals (used, expired, unknown
 * links). Screenshots land in .devstack/screenshots/link-*.png. The one-time claim is also tested at the API.
 */
let app: TestApp;
let tenant: Tenant;
let client: HttpClient;
let rx: Receiver;
let secret: string;
let browser: Browser;
const pages: WatchedPage[] = [];
const BRAND = { name: 'Acme Health', color: '#0b6e69' };

beforeAll(async () => {
  app = await startTestApp();
  tenant = await createTenant(app.deps, 'Link page');
  client = teamClient(app, tenant);
  ({ rx, secret } = await subscribeReceiver(app, tenant, ['provider.*'], '/hooks'));
  const mgmt = managementClient(app, tenant);
  // The team's brand; its logo is on another host, which the page never loads (the team's initials stand in).
  const team = await mgmt.patch(`/v1/org/${tenant.orgId}/team/${tenant.teamId}`, {
    logo_url: 'https://cdn.acme-health.example/logo.png',
    brand_information: { company_name: BRAND.name, brand_color: BRAND.color },
  });
  expect(team.status).toBe(200);
  browser = await launchBrowser();
}, 120_000);
afterAll(async () => {
  await Promise.all(pages.map((p) => p.close()));
  await browser?.close();
  await rx?.close();
  await app?.close();
});

async function createUser(): Promise<string> {
  const res = await client.post('/v2/user/', { client_user_id: uniqueId('linker'), ingestion_start: addDays(todayUtc(), -1), fallback_time_zone: 'UTC' });
  expect(res.status).toBe(200);
  return res.body.user_id;
}

async function linkToken(userId: string, extra: Record<string, unknown> = {}): Promise<{ link_token: string; link_web_url: string }> {
  const res = await client.post('/v2/link/token', { user_id: userId, ...extra });
  expect(res.status).toBe(200);
  expect(res.body.link_web_url).toBe(`${app.url}/link?token=${encodeURIComponent(res.body.link_token)}`);
  return res.body;
}

const linkClient = (token: string) => httpClient(app.url, { 'x-vital-link-token': token });

/** A watched page that also records every host it requests (the page loads nothing from other hosts). */
async function openPage(): Promise<WatchedPage & { hosts: Set<string> }> {
  const watched = await watchedPage(browser);
  pages.push(watched);
  const hosts = new Set<string>();
  watched.page.on('request', (req) => hosts.add(new URL(req.url()).host));
  return Object.assign(watched, { hosts });
}

// (The test compiles without the DOM library: browser-side code is written against `any`.)
const checkedProvider = (page: Page) => page.locator('input[name=provider]:checked').inputValue();
const focusedProvider = (page: Page) => page.locator('input:focus').inputValue();
const listedProviders = (page: Page) => page.locator('input[name=provider]').evaluateAll((inputs: any[]) => inputs.map((i) => i.value as string));
const styleOf = (locator: Locator, property: string) =>
  locator.evaluate((el: any, p: string) => (globalThis as any).getComputedStyle(el)[p] as string, property);

/** The user's provider.connection.created events (verified signatures). */
function connectionEvents(userId: string) {
  const verifier = new StandardWebhook(secret);
  return rx.requests
    .filter((r) => r.path === '/hooks')
    .map((r) => verifier.verify(r.body, r.headers as Record<string, string>) as any)
    .filter((e) => e.user_id === userId && e.event_type === 'provider.connection.created');
}

/** WCAG contrast ratio of two `rgb(r, g, b)` colours. */
function contrast(a: string, b: string): number {
  const lum = (rgb: string) => {
    const [r, g, bl] = rgb
      .match(/\d+/g)!
      .slice(0, 3)
      .map((c) => Number(c) / 255)
      .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
    return 0.2126 * r + 0.7152 * g + 0.0722 * bl;
  };
  const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

describe('the hosted link page', () => {
  test('a demo provider picked with the keyboard connects: the page says so, the API lists it, provider.connection.created arrives, and the link is then used', async () => {
    const userId = await createUser();
    const { link_token, link_web_url } = await linkToken(userId);
    const { page, errors, hosts, screenshot } = await openPage();

    const response = await page.goto(link_web_url);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['content-security-policy']).toContain("default-src 'self'");
    await page.getByRole('heading', { name: 'Connect your health data' }).waitFor();
    expect(await page.getAttribute('html', 'lang')).toBe('en');
    // The team's brand: its name, its initials (the logo is on another host), its colour on the button with readable text.
    await expect(page.locator('#brand-name').textContent()).resolves.toBe(BRAND.name);
    await expect(page.locator('#brand-mark').textContent()).resolves.toBe('AH');
    const button = { bg: await styleOf(page.locator('#choose-continue'), 'backgroundColor'), fg: await styleOf(page.locator('#choose-continue'), 'color') };
    expect(button.bg).toBe('rgb(11, 110, 105)');
    expect(contrast(button.bg, button.fg)).toBeGreaterThanOrEqual(4.5);
    // Every provider the catalogue lets a browser connect; the sandbox's demo providers marked.
    const listed = await listedProviders(page);
    expect(listed.slice(0, 3)).toEqual(['oura', 'fitbit', 'garmin']);
    expect(listed).toEqual(expect.arrayContaining(['whoop_v2', 'dexcom_v3', 'freestyle_libre', 'apple_health_kit', 'strava']));
    // Not their legacy password twins, which a newcomer would pick by their names.
    expect(listed).not.toContain('whoop');
    expect(listed).not.toContain('dexcom');
    expect(listed).not.toContain('health_connect'); // an SDK source: connected by the app, not a browser
    await expect(page.locator('label[for=p-fitbit] .badge').textContent()).resolves.toBe('Demo');
    // Every visible input has a label.
    expect(await page.locator('input:visible').evaluateAll((inputs: any[]) => inputs.filter((i) => !i.labels?.length).length)).toBe(0);
    await screenshot('link-choose');

    // Keyboard only: focus starts on the first provider, an arrow moves to Fitbit, Enter connects it.
    expect(await focusedProvider(page)).toBe('oura');
    await page.keyboard.press('ArrowDown');
    expect(await focusedProvider(page)).toBe('fitbit');
    expect(await checkedProvider(page)).toBe('fitbit');
    const ring = await styleOf(page.locator('label[for=p-fitbit]'), 'outlineStyle');
    expect(ring).toBe('solid'); // focus visible
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Fitbit is connected' }).waitFor();
    await expect(page.locator('#done-text').textContent()).resolves.toContain(`${BRAND.name} can now receive your Fitbit data`);
    await screenshot('link-success');

    const providers = await client.get(`/v2/user/providers/${userId}`);
    expectSchema(UserProvidersResponse, providers.body);
    expect(providers.body.providers.map((p: { slug: string }) => p.slug)).toEqual(['fitbit']);
    const [created] = await eventually(async () => (connectionEvents(userId).length ? connectionEvents(userId) : null), 60_000, 'provider.connection.created');
    expect(created.data.provider.slug).toBe('fitbit');

    // The link is used: the page and the link-token API refuse it, saying so.
    const again = await page.goto(link_web_url);
    expect(again?.status()).toBe(410);
    await expect(page.locator('h1').textContent()).resolves.toBe('Link already used');
    await expect(page.locator('.message').textContent()).resolves.toContain('already used');
    await screenshot('link-used');
    const state = await linkClient(link_token).get('/v2/link/state');
    expect(state.status).toBe(401);
    expect(state.body.detail).toContain('already used');
    const reuse = await linkClient(link_token).post('/v2/link/provider/demo/oura');
    expect(reuse.status).toBe(401);

    expect([...hosts]).toEqual([new URL(app.url).host]);
    // The refusal page's own 410 is the only console line a browser logs about it.
    expect(errors.filter((e) => !/status of 410/.test(e))).toEqual([]);
  }, 120_000);

  test('an expired, unknown or missing token is a 4xx page saying which, and the API refuses the expired token', async () => {
    const userId = await createUser();
    const { link_token, link_web_url } = await linkToken(userId);
    // Expired: its expiry moved into the past in the store (no waiting).
    await app.deps.repos.linkTokens.tokens.updateOne({ _id: hashKey(link_token) }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    const { page, screenshot } = await openPage();
    const expired = await page.goto(link_web_url);
    expect(expired?.status()).toBe(410);
    await expect(page.locator('h1').textContent()).resolves.toBe('Link expired');
    await expect(page.locator('.message').textContent()).resolves.toContain('expired (links work for 10 minutes)');
    await screenshot('link-expired');
    const state = await linkClient(link_token).get('/v2/link/state');
    expect(state.status).toBe(401);
    expect(state.body.detail).toContain('expired');
    expect((await client.post('/v2/link/token/isValid', { token: link_token })).body.valid).toBe(false);

    const unknown = await page.goto(`${app.url}/link?token=lt_nobody`);
    expect(unknown?.status()).toBe(404);
    await expect(page.locator('h1').textContent()).resolves.toBe('Link not valid');
    const missing = await page.goto(`${app.url}/link`);
    expect(missing?.status()).toBe(400);
    await expect(page.locator('h1').textContent()).resolves.toBe('Link incomplete');
    expect((await linkClient('').get('/v2/link/providers')).status).toBe(401);
  }, 60_000);

  test("an OAuth provider without a real integration here: the page explains the step and sends the user to the provider's authorization URL; its failed callback leaves the link usable", async () => {
    const userId = await createUser();
    const { link_token, link_web_url } = await linkToken(userId, { filter_on_providers: ['wahoo', 'whoop', 'oura', 'peloton'] });
    const { page, errors, screenshot } = await openPage();
    await page.goto(link_web_url);
    await page.getByRole('heading', { name: 'Connect your health data' }).waitFor();
    // filter_on_providers, in catalogue order, without the legacy `whoop`; no search box for three. (Oura has no OAuth
    // app in this deployment: demo.)
    expect(await listedProviders(page)).toEqual(['oura', 'peloton', 'wahoo']);
    expect(await page.locator('#search').isHidden()).toBe(true);

    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    expect(await checkedProvider(page)).toBe('wahoo');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Connect Wahoo' }).waitFor();
    const proceed = page.getByRole('link', { name: 'Continue to Wahoo' });
    await proceed.waitFor();
    await expect(page.locator('#oauth-sandbox').textContent()).resolves.toContain("Wahoo's sign-in cannot be reached");
    expect(await page.locator('#oauth-continue:focus').count()).toBe(1);
    await screenshot('link-oauth');

    // Wahoo's sign-in page cannot be reached from here: a stand-in answers at its address so the browser lands.
    await page.route('https://api.wahooligan.com/**', (route) =>
      route.fulfill({ status: 200, contentType: 'text/html', body: '<!doctype html><html lang="en"><title>Wahoo sign-in</title></html>' }),
    );
    await page.keyboard.press('Enter');
    await page.waitForURL(/^https:\/\/api\.wahooligan\.com\/oauth\/authorize\?/);
    const authorize = new URL(page.url());
    const callback = `${app.url}/v2/link/oauth/callback/wahoo`;
    expect(Object.fromEntries(authorize.searchParams)).toEqual({
      response_type: 'code',
      client_id: 'healthbridge-sandbox',
      redirect_uri: callback,
      state: hashKey(link_token),
      scope: 'user_read workouts_read',
    });

    // The provider sends the user back with a code: this deployment cannot exchange it (no internet), and says so.
    const back = await page.goto(`${callback}?state=${authorize.searchParams.get('state')}&code=authcode-1`);
    expect(back?.status()).toBe(502);
    await expect(page.locator('h1').textContent()).resolves.toBe('Wahoo not connected');
    await expect(page.locator('.message').textContent()).resolves.toContain('cannot be reached from this deployment');
    await screenshot('link-oauth-callback');
    expect((await linkClient(link_token).get('/v2/link/state')).status).toBe(200);
    expect(errors.filter((e) => !/status of 502/.test(e))).toEqual([]);
  }, 60_000);

  test("a password provider's labelled sign-in form: other credentials are refused with a clear message, the sandbox's demo credentials connect, and redirect_url is followed", async () => {
    const userId = await createUser();
    const { link_web_url } = await linkToken(userId, { provider: 'peloton', redirect_url: `${rx.url}/done?app=1` });
    const { page, errors, screenshot } = await openPage();
    await page.goto(link_web_url);
    await page.getByRole('heading', { name: 'Connect your health data' }).waitFor();
    expect(await listedProviders(page)).toEqual(['peloton']);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Sign in to Peloton' }).waitFor();
    await expect(page.locator('#cred-hint').textContent()).resolves.toContain('username or email “demo” and password “demo”');

    await page.getByLabel('Username or email', { exact: true }).fill('someone@example.com');
    await page.getByLabel('Password', { exact: true }).fill('hunter2');
    await page.keyboard.press('Enter');
    const refusal = page.getByRole('alert').filter({ hasText: 'did not accept these credentials' });
    await refusal.waitFor();
    await screenshot('link-password-refused');
    expect((await client.get(`/v2/user/providers/${userId}`)).body.providers).toEqual([]);

    await page.getByLabel('Username or email', { exact: true }).fill('demo');
    await page.getByLabel('Password', { exact: true }).fill('demo');
    await page.getByRole('button', { name: 'Connect' }).click();
    await page.waitForURL(`${rx.url}/done?app=1&state=success&provider=peloton`);
    expect((await client.get(`/v2/user/providers/${userId}`)).body.providers.map((p: { slug: string }) => p.slug)).toEqual(['peloton']);
    await eventually(async () => connectionEvents(userId).length === 1, 60_000, 'provider.connection.created for peloton');
    expect(errors).toEqual([]);
  }, 90_000);
});

describe('the link-token API', () => {
  test('concurrent uses of one token: exactly one connects, the others are told the token was used', async () => {
    const userId = await createUser();
    const { link_token } = await linkToken(userId);
    const link = linkClient(link_token);
    const offered = await link.get('/v2/link/providers');
    expectSchema(SourceLinkList, offered.body);
    // Different providers, so nothing but the token's one use can refuse them.
    const uses = await Promise.all(['oura', 'fitbit', 'freestyle_libre', 'apple_health_kit'].map((p) => link.post(`/v2/link/provider/demo/${p}`)));
    const winners = uses.filter((u) => u.body.state === 'success');
    expect(winners).toHaveLength(1);
    // A loser that raced the claim is told token_consumed; one that came after it is refused at the door (401).
    for (const use of uses.filter((u) => u !== winners[0])) {
      if (use.status === 200) {
        expectSchema(ProviderLinkResponse, use.body);
        expect(use.body).toMatchObject({ state: 'error', error_type: 'token_consumed', connected: false });
      } else {
        expect(use.status).toBe(401);
        expect(use.body.detail).toContain('already used');
      }
    }
    const providers = (await client.get(`/v2/user/providers/${userId}`)).body.providers.map((p: { slug: string }) => p.slug);
    expect(providers).toEqual([winners[0].body.provider]);
  });

  test('a token offers only its providers, and is not used by a refused sign-in', async () => {
    const userId = await createUser();
    const { link_token } = await linkToken(userId, { provider: 'oura' });
    const link = linkClient(link_token);
    expect((await link.get('/v2/link/providers')).body.map((p: { slug: string }) => p.slug)).toEqual(['oura']);
    expect((await link.post('/v2/link/provider/demo/fitbit')).body).toMatchObject({ state: 'error', error_type: 'invalid_token' });
    const { link_token: other } = await linkToken(userId, { provider: 'peloton' });
    const wrong = await linkClient(other).post('/v2/link/provider/password/peloton', { username: 'demo', password: 'nope' });
    expect(wrong.body).toMatchObject({ state: 'error', error_type: 'provider_credential_error', connected: false });
    expect((await linkClient(other).get('/v2/link/state')).status).toBe(200);
    expect((await link.post('/v2/link/provider/demo/oura')).body).toMatchObject({ state: 'success', connected: true });
  });

  test('in production too, a link offers the real WHOOP and Dexcom integrations and never their legacy password twins', async () => {
    const prod = await startTestApp({
      DEPLOYMENT_ENVIRONMENT: 'production',
      METRICS_TOKEN: 'link-page-metrics',
      ...({
        PROVIDER_WHOOP_V2_CLIENT_ID: 'whoop-app',
        PROVIDER_WHOOP_V2_CLIENT_SECRET: 'whoop-secret',
        PROVIDER_DEXCOM_V3_CLIENT_ID: 'dexcom-app',
        PROVIDER_DEXCOM_V3_CLIENT_SECRET: 'dexcom-secret',
      } as object),
    });
    try {
      const prodClient = teamClient(prod, await createTenant(prod.deps, 'Link page production'));
      const userId = (await prodClient.post('/v2/user/', { client_user_id: uniqueId('prod-linker') })).body.user_id;
      const token = async (extra: Record<string, unknown>) =>
        (await prodClient.post('/v2/link/token', { user_id: userId, ...extra })).body.link_token as string;
      const offered = (await httpClient(prod.url, { 'x-vital-link-token': await token({}) }).get('/v2/link/providers')).body as {
        slug: string;
        link_method: string;
      }[];
      const methods = Object.fromEntries(offered.map((p) => [p.slug, p.link_method]));
      expect(methods).toMatchObject({ whoop_v2: 'oauth', dexcom_v3: 'oauth', peloton: 'password' });
      expect(Object.keys(methods)).not.toContain('whoop');
      expect(Object.keys(methods)).not.toContain('dexcom');

      // A link made for the legacy WHOOP (an app that has not moved on yet) offers nothing to connect, and says so.
      const legacy = httpClient(prod.url, { 'x-vital-link-token': await token({ provider: 'whoop' }) });
      expect((await legacy.get('/v2/link/providers')).body).toEqual([]);
      const signIn = await legacy.post('/v2/link/provider/password/whoop', { username: 'someone', password: 'secret' });
      expect(signIn.body).toMatchObject({ state: 'error', error_type: 'invalid_token', error: 'This link does not offer whoop.', connected: false });

      // Dexcom keeps each account on its region's server: the page asks where (the team's region proposed: the US
      // here), and the sign-in address follows the answer.
      const { page, errors, screenshot } = await openPage();
      await page.goto(`${prod.url}/link?token=${encodeURIComponent(await token({ provider: 'dexcom_v3' }))}`);
      await page.getByRole('heading', { name: 'Connect your health data' }).waitFor();
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { name: 'Connect Dexcom V3' }).waitFor();
      const region = page.getByLabel('Where is your Dexcom V3 account?');
      const proceed = page.getByRole('link', { name: 'Continue to Dexcom V3' });
      await proceed.waitFor();
      expect(await region.inputValue()).toBe('us');
      expect(new URL((await proceed.getAttribute('href'))!).origin).toBe('https://api.dexcom.com');
      await region.selectOption({ label: 'Japan' });
      await eventually(
        async () => (await proceed.getAttribute('href'))?.startsWith('https://api.dexcom.jp/v2/oauth2/login?') || null,
        10_000,
        'the Japanese sign-in address',
      );
      await screenshot('link-oauth-region');
      expect(errors).toEqual([]);
    } finally {
      await prod.close();
    }
  }, 60_000);

  test('the OpenAPI document gives the link-token operations the x-vital-link-token scheme', async () => {
    const doc = (await httpClient(app.url).get('/openapi.json')).body;
    expect(doc.components.securitySchemes.linkToken).toEqual(expect.objectContaining({ type: 'apiKey', in: 'header', name: 'x-vital-link-token' }));
    for (const [path, method] of [
      ['/v2/link/providers', 'get'],
      ['/v2/link/state', 'get'],
      ['/v2/link/provider/password/{provider}', 'post'],
      ['/v2/link/provider/demo/{provider}', 'post'],
    ]) {
      expect(doc.paths[path][method].security).toEqual([{ linkToken: [] }]);
    }
  });
});
