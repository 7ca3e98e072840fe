import { WorkflowNotFoundError } from '@temporalio/client';
import { dataCipher, type Config } from '../lib/platform/config';
import { connectMongo } from '../lib/platform/database/mongo';
import { armFailpoint } from '../lib/platform/failpoints';
import { createRepositories } from '../lib/repositories';
import { integrationFor } from '../lib/wearables/providers/registry';
import { accessToken, resolveApp } from '../lib/wearables/providers/runtime';
import { workflowIds } from '../workflows/ids';
import { pushHintsStateQuery } from '../workflows/wearable-connection';
import { eventually, uniqueId } from './support/harness';
import { startFakeOura, type FakeOura } from './support/fakes/oura';
import { startFakeStrava, type FakeStrava } from './support/fakes/strava';
import { startFakeWhoop, type FakeWhoop } from './support/fakes/whoop';
import { startFakeWithings, type WithingsFake } from './support/fakes/withings';
import { connectThroughOAuth, createUser, startProviderStack, type ProviderStack } from './support/provider-stack';

/**
 * Real providers safe in production (README "Connecting real providers"): rotated refresh tokens are never lost (a
 * save that fails, an answer that never comes), every app of a provider passes its push handshake, Strava's unticked
 * scopes are read, a flood of unsigned pushes is coalesced, and a stop that lands during the last sync before the
 * connection's workflow continues as new is acted on at once. On the real stack, against the providers' fakes.
 */
let whoop: FakeWhoop;
let withings: WithingsFake;
let strava: FakeStrava;
let oura: FakeOura;
let stack: ProviderStack;

beforeAll(async () => {
  // WHOOP as Ory Hydra runs it: a rotated-away refresh token presented again revokes the whole family.
  whoop = await startFakeWhoop({ rateLimit: { limit: 10_000, dailyLimit: null }, reuseRevokesFamily: true });
  withings = await startFakeWithings();
  strava = await startFakeStrava({ rateLimits: { overall: [10_000, 100_000], read: [10_000, 100_000] } });
  oura = await startFakeOura();
  stack = await startProviderStack('safety', [
    { slug: 'whoop_v2', fake: whoop, clientId: whoop.options.clientId, clientSecret: whoop.options.clientSecret },
    { slug: 'withings', fake: withings, clientId: withings.options.clientId, clientSecret: withings.options.clientSecret },
    { slug: 'strava', fake: strava, clientId: strava.options.clientId, clientSecret: strava.options.clientSecret },
    { slug: 'oura', fake: oura, clientId: oura.options.clientId, clientSecret: oura.options.clientSecret },
  ]);
  // A worker that syncs once per run: every sync is the last before its workflow continues as new.
  await stack.restartWorker({ WEARABLE_SYNCS_PER_RUN: '1' });
}, 60_000);

afterAll(async () => {
  await stack?.close();
  for (const fake of [whoop, withings, strava, oura]) await fake?.close();
});

const pushUrl = (slug: string) => `${stack.app.url}/v2/providers/${slug}/webhook`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function connected(slug: string, fake: Parameters<typeof connectThroughOAuth>[3], fakeUser: string): Promise<{ userId: string; connectionId: string }> {
  const userId = await createUser(stack);
  const done = await connectThroughOAuth(stack, userId, slug, fake, { asUser: fakeUser });
  if (done.status !== 200) throw new Error(`${slug} connect ended ${done.status}: ${done.text.slice(0, 300)}`);
  const [connection] = await stack.app.deps.repos.connections.listForUser(stack.tenant.teamId, userId);
  return { userId, connectionId: connection._id };
}

/** Every pull unit of the connection's history ended (success or failure). */
const historyFinished = (userId: string, slug: string) =>
  eventually(
    async () => {
      const pulled = Object.values(
        (await stack.client.get(`/v2/introspect/historical_pull?user_id=${userId}&provider=${slug}`)).body.data[0]?.provider?.[slug]?.pulled ?? {},
      ) as { status: string }[];
      return pulled.length > 0 && pulled.every((p) => p.status === 'success' || p.status === 'failure');
    },
    300_000,
    `${slug} history pulled`,
  );

/** A worker's repositories on a database connection of its own, as another process has them. */
async function withWorkerDeps<T>(config: Config, run: (deps: { repos: ReturnType<typeof createRepositories>; config: Config }) => Promise<T>): Promise<T> {
  const mongo = await connectMongo(config.MONGO_URL, config.MONGO_DB);
  try {
    return await run({ repos: createRepositories(mongo.db, dataCipher(config)), config });
  } finally {
    await mongo.close();
  }
}

const expireSoon = (connectionId: string) =>
  stack.app.inspect.collection('provider_tokens').updateOne({ _id: connectionId as never }, { $set: { expires_at: new Date(Date.now() + 1000) } });

describe('refresh tokens are never lost', () => {
  test('WHOOP rotates and our first save of the new tokens fails: the save is tried again, the new refresh token is kept, and the connection stays healthy', async () => {
    const whoopUser = whoop.addUser().id;
    const { userId, connectionId } = await connected('whoop_v2', whoop, whoopUser);
    const integration = integrationFor('whoop_v2')!;
    const before = { refreshes: whoop.tokenEndpointCalls('refresh_token'), reuses: whoop.refreshTokenReuses };
    await expireSoon(connectionId);
    const token = await withWorkerDeps(stack.app.deps.config, async (deps) => {
      const app = (await resolveApp(deps, stack.tenant.teamId, 'whoop_v2'))!;
      armFailpoint('provider-tokens.save-refreshed', 'error'); // the database refuses the first write after WHOOP rotated
      return accessToken(deps, integration, app, connectionId);
    });
    expect(whoop.tokenEndpointCalls('refresh_token') - before.refreshes).toBe(1);
    const stored = (await stack.app.deps.repos.providerAuth.get(connectionId))!;
    expect(stored.access_token).toBe(token);
    expect(whoop.validRefreshTokens(whoopUser)).toEqual([stored.refresh_token]);
    expect(whoop.refreshTokenReuses).toBe(before.reuses);
    // The connection works with it: a sync fetches, and no connection error is published.
    const served = whoop.apiRequests;
    expect((await stack.client.post(`/v2/user/refresh/${userId}`, {})).status).toBe(200);
    await eventually(async () => whoop.apiRequests >= served + 4, 60_000, 'the sync');
    expect(stack.events().filter((e) => e.user_id === userId && e.event_type === 'provider.connection.error')).toEqual([]);
  }, 180_000);

  test('Withings rotates and its answer is lost (our request timed out): the claim is kept, the same refresh token is sent again, and the connection ends up with a working token', async () => {
    const withingsUser = withings.addUser().id;
    const { connectionId } = await connected('withings', withings, withingsUser);
    const integration = integrationFor('withings')!;
    const config = { ...stack.app.deps.config, PROVIDER_REQUEST_TIMEOUT_MS: 1000 };
    const sent = () => withings.requestsTo('/v2/oauth2').filter((r) => new URLSearchParams(r.body).get('grant_type') === 'refresh_token');
    const before = sent().length;
    const original = (await stack.app.deps.repos.providerAuth.get(connectionId))!;
    await expireSoon(connectionId);
    // Withings handles the refresh (a new pair is issued, the old refresh token now dies within 8 hours), but its
    // answer comes after our timeout.
    // (Eight times our timeout: a loaded machine's timers fire late, and the answer must still come after ours fired.)
    withings.answerLate({ method: 'POST', path: '/v2/oauth2', delayMs: 8000 });
    const token = await withWorkerDeps(config, async (deps) => {
      const app = (await resolveApp(deps, stack.tenant.teamId, 'withings'))!;
      // A second worker wanting a token meanwhile does not send the old refresh token beside ours: it waits.
      const [first, second] = await Promise.all([
        accessToken(deps, integration, app, connectionId),
        sleep(300).then(() => accessToken(deps, integration, app, connectionId)),
      ]);
      expect(second).toBe(first);
      return first;
    });
    const refreshes = sent().slice(before);
    expect(refreshes).toHaveLength(2); // the unanswered one and its retry, nothing from the second worker
    expect(refreshes.map((r) => new URLSearchParams(r.body).get('refresh_token'))).toEqual([original.refresh_token, original.refresh_token]);
    const stored = (await stack.app.deps.repos.providerAuth.get(connectionId))!;
    expect(stored.access_token).toBe(token);
    expect(stored.version).toBe(original.version + 1);
    expect(stored.refresh_token).not.toBe(original.refresh_token);
    // The stored tokens work at Withings: Notify - List answers with status 0.
    const listed = await fetch(new URL('/notify', withings.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'action=list',
    });
    expect(((await listed.json()) as { status: number }).status).toBe(0);
  }, 180_000);
});

describe('every app of a provider passes its push handshake', () => {
  test("Oura's and Strava's verification GETs succeed for the deployment's app and a team's own app; a wrong token is still refused", async () => {
    // A second team with its own Oura and Strava apps (custom credentials), beside the deployment's.
    const tenant = stack.tenant;
    for (const provider of ['oura', 'strava']) {
      await stack.app.deps.repos.customCredentials.put({
        org_id: tenant.orgId,
        team_id: tenant.teamId,
        provider,
        environment: stack.app.deps.config.DEPLOYMENT_ENVIRONMENT,
        region: stack.app.deps.config.DEPLOYMENT_REGION,
        client_id: uniqueId(`${provider}-own-app`),
        client_secret: uniqueId('secret'),
        details: null,
        redirect_url_override: null,
      });
    }
    const own = async (provider: string) => (await stack.app.deps.repos.customCredentials.findForTeam(tenant.teamId, provider))!.client_id;
    const tokens = {
      oura: [
        await stack.app.deps.repos.providerAuth.verifyToken('oura', oura.options.clientId),
        await stack.app.deps.repos.providerAuth.verifyToken('oura', await own('oura')),
      ],
      strava: [
        await stack.app.deps.repos.providerAuth.verifyToken('strava', strava.options.clientId),
        await stack.app.deps.repos.providerAuth.verifyToken('strava', await own('strava')),
      ],
    };
    for (const [i, token] of tokens.oura.entries()) {
      const res = await fetch(`${pushUrl('oura')}?${new URLSearchParams({ verification_token: token, challenge: `oura-challenge-${i}` })}`);
      expect([res.status, await res.json()]).toEqual([200, { challenge: `oura-challenge-${i}` }]);
    }
    for (const [i, token] of tokens.strava.entries()) {
      const res = await fetch(
        `${pushUrl('strava')}?${new URLSearchParams({ 'hub.mode': 'subscribe', 'hub.verify_token': token, 'hub.challenge': `strava-challenge-${i}` })}`,
      );
      expect([res.status, await res.json()]).toEqual([200, { 'hub.challenge': `strava-challenge-${i}` }]);
    }
    expect((await fetch(`${pushUrl('oura')}?${new URLSearchParams({ verification_token: 'not-ours', challenge: 'x' })}`)).status).toBe(401);
    expect(
      (await fetch(`${pushUrl('strava')}?${new URLSearchParams({ 'hub.mode': 'subscribe', 'hub.verify_token': 'not-ours', 'hub.challenge': 'x' })}`)).status,
    ).toBe(403);
    for (const provider of ['oura', 'strava']) await stack.app.deps.repos.customCredentials.delete(tenant.teamId, provider);
  }, 60_000);
});

describe("Strava's granted scopes", () => {
  test('an athlete who unticks private activities connects, and resource_availability says what was declined; one who grants no activity scope is refused with required_scopes_not_granted and told which box to tick', async () => {
    const partial = strava.addUser({ dataStartMs: Date.now() }).id;
    strava.nextConsentScope = 'read,activity:read';
    const { userId } = await connected('strava', strava, partial);
    const [provider] = (await stack.client.get(`/v2/user/providers/${userId}`)).body.providers;
    expect(provider.resource_availability.workouts).toEqual({
      status: 'available',
      scope_requirements: { user_granted: { required: ['activity:read'], optional: [] }, user_denied: { required: [], optional: ['activity:read_all'] } },
    });
    const stored = await stack.app.inspect.collection('connections').findOne({ user_id: userId });
    expect(stored?.granted_scopes).toEqual(['read', 'activity:read']);
    const created = await eventually(
      async () => stack.events().find((e) => e.user_id === userId && e.event_type === 'provider.connection.created'),
      60_000,
      'connection event',
    );
    expect(created.data.resource_availability.workouts.scope_requirements.user_denied.optional).toEqual(['activity:read_all']);

    const none = strava.addUser({ dataStartMs: Date.now() }).id;
    const refusedUser = await createUser(stack);
    const exchanges = strava.requestsTo('/oauth/token').length;
    strava.nextConsentScope = 'read';
    const done = await connectThroughOAuth(stack, refusedUser, 'strava', strava, { asUser: none });
    expect(done.status).toBe(403);
    expect(done.text).toContain('View data about your activities');
    expect(strava.requestsTo('/oauth/token')).toHaveLength(exchanges); // refused before the code was exchanged: no token issued
    expect((await stack.client.get(`/v2/user/providers/${refusedUser}`)).body.providers).toEqual([]);
  }, 120_000);
});

describe('unsigned pushes are coalesced', () => {
  test('a flood of 200 Withings notifications for one user (distinct, forged windows) costs one fetch per resource at a time, not 200', async () => {
    const withingsUser = withings.addUser().id;
    const { connectionId } = await connected('withings', withings, withingsUser);
    const now = Math.floor(Date.now() / 1000);
    const posts = Array.from({ length: 200 }, (_, i) =>
      withings.sendPush(pushUrl('withings'), { userid: withingsUser, appli: 44, startdate: now - 86_400 - i * 60, enddate: now - i * 60 }),
    );
    expect((await Promise.all(posts)).every((r) => r.status === 200)).toBe(true);
    const state = async () => {
      try {
        return await stack.app.deps.temporal.client.workflow.getHandle(workflowIds.providerHints(connectionId)).query(pushHintsStateQuery);
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return null;
        throw err;
      }
    };
    const settled = await eventually(
      async () => {
        const s = await state();
        return s && s.pending === 0 && s.handled >= 1 ? s : null;
      },
      120_000,
      'hints handled',
    );
    await sleep(1000);
    // Windows of one resource merge while they wait: a handful of fetches, far fewer than the 200 notifications.
    expect(settled.handled).toBeLessThan(10);
    expect((await state())!.handled).toBe(settled.handled);
  }, 420_000);
});

describe('a stop during the last sync before continue-as-new', () => {
  test('revokes the access within moments, not after the next sync interval', async () => {
    const whoopUser = whoop.addUser().id;
    const { userId, connectionId } = await connected('whoop_v2', whoop, whoopUser);
    await historyFinished(userId, 'whoop_v2');
    const handle = stack.app.deps.temporal.client.workflow.getHandle(workflowIds.wearableConnection(connectionId));
    const run = (await handle.describe()).runId;
    // The sync's last resource (body) answers slowly; the customer deregisters the provider while it runs, so the stop
    // lands after the last check between resources, just before the run would continue as new.
    const bodyPath = '/developer/v2/user/measurement/body';
    whoop.answerLate({ method: 'GET', path: bodyPath, delayMs: 4000 });
    const asked = whoop.requestsTo(bodyPath).length;
    expect((await stack.client.post(`/v2/user/refresh/${userId}`, {})).status).toBe(200);
    await eventually(async () => whoop.requestsTo(bodyPath).length > asked, 60_000, 'the sync reached its last resource');
    expect((await stack.client.del(`/v2/user/${userId}/whoop_v2`)).status).toBe(200);
    await eventually(async () => whoop.revokedThroughApi.includes(whoopUser), 30_000, 'the revocation at WHOOP');
    // It ended in the run that got the stop, not carried on into a new one.
    expect(await stack.app.deps.temporal.client.workflow.getHandle(workflowIds.wearableConnection(connectionId), run, { followRuns: false }).result()).toEqual({
      stopped: true,
    });
    expect((await handle.describe()).runId).toBe(run);
  }, 180_000);
});
