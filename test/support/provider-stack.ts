import type { ChildProcess } from 'node:child_process';
import { providerEnvKey, type Config } from '../../lib/platform/config';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { createTenant, startTestApp, subscribeReceiver, teamClient, uniqueId, type HttpClient, type Tenant, type TestApp } from './harness';
import type { ReceivedRequest, Receiver } from './receiver';
import { privateDeployment, startWorker, stopWorker, type PrivateDeployment } from './worker';
import type { FakeProvider } from './fakes/fake-provider';

/**
 * The real stack pointed at provider fakes: the fakes run in the test's process (so the test can seed users, inject
 * faults and read what they served), and the app and a worker of the test's own (private task queues and database)
 * see them through PROVIDER_<SLUG>_BASE_URL with the fakes' client ids and secrets as the deployment's apps.
 */
export interface ProviderFakeSetup {
  slug: string;
  fake: FakeProvider;
  clientId: string;
  clientSecret: string;
}

export interface ProviderStack {
  app: TestApp;
  deployment: PrivateDeployment;
  env: Record<string, string>;
  worker: ChildProcess;
  tenant: Tenant;
  client: HttpClient;
  /** Every event of the tenant, signed, to a real receiver. */
  rx: Receiver;
  /** The receiver endpoint's signing secret. */
  secret: string;
  /** The events received so far (signatures verified), in arrival order. */
  events(): { event_type: string; data: any; user_id: string }[];
  restartWorker(extra?: Record<string, string>): Promise<void>;
  close(): Promise<void>;
}

export function providerEnv(fakes: ProviderFakeSetup[]): Record<string, string> {
  return Object.fromEntries(
    fakes.flatMap((f) => [
      [providerEnvKey(f.slug, 'BASE_URL'), f.fake.url],
      [providerEnvKey(f.slug, 'CLIENT_ID'), f.clientId],
      [providerEnvKey(f.slug, 'CLIENT_SECRET'), f.clientSecret],
    ]),
  );
}

export async function startProviderStack(name: string, fakes: ProviderFakeSetup[], overrides: Record<string, string> = {}): Promise<ProviderStack> {
  const deployment = privateDeployment(name);
  const env = { ...providerEnv(fakes), ...overrides };
  const app = await startTestApp({ ...deployment, ...(env as Partial<Config>) });
  let worker = startWorker(deployment, { ...env, PUBLIC_BASE_URL: app.url });
  const tenant = await createTenant(app.deps, `Providers ${name}`);
  const { rx, secret } = await subscribeReceiver(app, tenant, []);
  // Each event is verified as it arrives, as a receiver does: its signed timestamp is checked against the clock
  // then, not at every later read (a file running past the 5-minute tolerance failed every read after).
  type Verified = { event_type: string; data: any; user_id: string };
  const verify = (r: ReceivedRequest): Verified | Error => {
    try {
      return new StandardWebhook(secret).verify(r.body, r.headers as Record<string, string>) as Verified;
    } catch (err) {
      return err as Error;
    }
  };
  const verified = new WeakMap<ReceivedRequest, Verified | Error>();
  rx.behave((r) => {
    verified.set(r, verify(r));
    return { status: 200 };
  });
  return {
    secret,
    events: () =>
      rx.requests.map((r) => {
        const event = verified.get(r) ?? verify(r);
        if (event instanceof Error) throw event;
        return event;
      }),
    app,
    deployment,
    env,
    get worker() {
      return worker;
    },
    tenant,
    client: teamClient(app, tenant),
    rx,
    async restartWorker(extra = {}) {
      await stopWorker(worker, 'SIGTERM');
      worker = startWorker(deployment, { ...env, PUBLIC_BASE_URL: app.url, ...extra });
    },
    async close() {
      await stopWorker(worker, 'SIGTERM');
      await rx.close();
      await app.close();
    },
  };
}

/** A new user of the stack's tenant; returns its id. */
export async function createUser(stack: ProviderStack, fields: Record<string, unknown> = {}): Promise<string> {
  const res = await stack.client.post('/v2/user/', { client_user_id: uniqueId('prov'), fallback_time_zone: 'UTC', ...fields });
  if (res.status !== 200) throw new Error(`user not created: ${res.status} ${res.text}`);
  return res.body.user_id;
}

/**
 * Connects `userId` to `slug` through the real OAuth flow over HTTP, as a browser would: the link token, the
 * authorization URL our API returns (in `region`, at a provider with regions), the fake's consent page approved (as
 * `asUser` if given), our callback.
 * Returns the callback's final response (a redirect to redirect_url, or the outcome page).
 */
export async function connectThroughOAuth(
  stack: { client: HttpClient; app: { url: string } },
  userId: string,
  slug: string,
  fake: FakeProvider,
  opts: { asUser?: string; decision?: 'approve' | 'deny'; region?: string } = {},
): Promise<{ status: number; text: string; location: string | null }> {
  const { link_token } = (await stack.client.post('/v2/link/token', { user_id: userId, provider: slug })).body;
  const region = opts.region ? `?region=${encodeURIComponent(opts.region)}` : '';
  const oauth = await fetch(`${stack.app.url}/v2/link/provider/oauth/${slug}${region}`, { headers: { 'x-vital-link-token': link_token } });
  const { oauth_url } = (await oauth.json()) as { oauth_url: string };
  if (!oauth_url) throw new Error(`no oauth_url for ${slug}: ${oauth.status}`);
  if (opts.asUser) fake.nextConsentUser = opts.asUser;
  const consent = new URL(oauth_url);
  const page = await fetch(consent);
  if (page.status !== 200) throw new Error(`consent page answered ${page.status}: ${await page.text()}`);
  const answer = await fetch(new URL(fake.options.authorizePath, fake.url), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ ...Object.fromEntries(consent.searchParams), decision: opts.decision ?? 'approve' }).toString(),
    redirect: 'manual',
  });
  const callback = answer.headers.get('location');
  if (!callback) throw new Error(`consent answered ${answer.status} without a redirect`);
  const done = await fetch(callback, { redirect: 'manual' });
  return { status: done.status, text: await done.text(), location: done.headers.get('location') };
}

export { stopWorker };
