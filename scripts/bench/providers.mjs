// Real-provider scenarios of `npm run bench` (BENCH_SUITES=providers): the api and the worker pointed at the providers'
// loopback fakes (test/support/fakes/, compiled to dist/) through PROVIDER_<SLUG>_BASE_URL / _CLIENT_ID / _CLIENT_SECRET.
// The fakes run in this process and are started before the environment (`startProviderFakes`), so the servers see them.
//
//   1. oura: BENCH_PROVIDERS_OURA_USERS (100) users created through the API, each connected through the real OAuth flow
//      over HTTP (link token, GET /v2/link/provider/oauth/oura, the fake's consent approved, our callback), their
//      90-day history pulled page by page on the Oura task queue; timed from the pull's first page request at the fake
//      to the last resource's ended_at, once GET /v2/introspect/historical_pull shows every resource of every user
//      `success`. Baseline in the same run: the same pages (the pull's request log at the fake: same paths, params and
//      paging) fetched with plain `fetch` from a fresh fake with the same users, one page at a time per user as each
//      connection's workflow asks them, every user at once (up to the worker's 100 activity slots), the fake's rate
//      limit lifted. The pull cannot go faster than the app's Oura budget (lib/wearables/providers/budget.ts, drawn
//      before every request), so the ratio is mostly that budget; pages/s against the budget is reported beside it.
//   2. whoop: BENCH_PROVIDERS_WHOOP_USERS (100) users connected through the OAuth flow, BENCH_PROVIDERS_WHOOP_CONNECT_
//      CONCURRENCY (5) flows at a time (their history pulls start as they connect), against the WHOOP fake's per-app
//      limit of 100 requests a minute (rolling; its 10,000 a day is off: it would bind first, after 100 minutes), for
//      BENCH_PROVIDERS_WHOOP_SECONDS (240) from the first connection. Every request of the app draws from its budget:
//      each sign-in's code exchange and "who is this user" (booked ahead, before the waiting pages), and the pages.
//      Reported: 429s the fake answered (target 0), the app's requests a minute to WHOOP (token, profile, pages)
//      against the 100 (target >= 90 %), each minute's count and the busiest 60 s, and the sign-ins told "busy" (the
//      budget had no room within the sign-in's 15 s booking horizon), which start again after the reset they name.
//      (500 users at once, the earlier default, are 1,000 sign-in requests: over ten minutes of the app's budget.)
//
//   BENCH_PROVIDERS_SCENARIOS=oura,whoop           which scenarios run
//   BENCH_PROVIDERS_OURA_USERS=100
//   BENCH_PROVIDERS_OURA_PAGE_SIZE=10              documents per page of the Oura fake's date routes (its default)
//   BENCH_PROVIDERS_OURA_HEARTRATE_PAGE_SIZE=1000  heart-rate rows per page (as test/providers-stack.test.ts; the fake's
//                                                  50 would make a 90-day pull 350 heart-rate pages a user, 40 min for 100)
//   BENCH_PROVIDERS_OURA_TIMEOUT_SECONDS=1200      give up waiting for the Oura pull (the figures are then partial)
//   BENCH_PROVIDERS_WHOOP_USERS=100
//   BENCH_PROVIDERS_WHOOP_SECONDS=240              the WHOOP run, from the first connection
//   BENCH_PROVIDERS_CONNECT_CONCURRENCY=25         OAuth flows at once while connecting (Oura)
//   BENCH_PROVIDERS_WHOOP_CONNECT_CONCURRENCY=5    the same for WHOOP (each flow books 2 of the app's ~1.6 requests a second)
import { performance } from 'node:perf_hooks';
import { distModule } from './environment.mjs';
import { httpClient, numberEnv } from './load.mjs';
import { whoopScenario } from './providers-whoop.mjs';

const SCENARIOS = ['oura', 'whoop'];

const settings = () => {
  const scenarios = (process.env.BENCH_PROVIDERS_SCENARIOS || SCENARIOS.join(','))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (!scenarios.length || scenarios.some((s) => !SCENARIOS.includes(s))) {
    throw new Error(`BENCH_PROVIDERS_SCENARIOS=${process.env.BENCH_PROVIDERS_SCENARIOS} must be a comma-separated list of ${SCENARIOS.join(', ')}`);
  }
  return {
    scenarios,
    ouraUsers: numberEnv('BENCH_PROVIDERS_OURA_USERS', 100, { integer: true, min: 1 }),
    ouraPageSize: numberEnv('BENCH_PROVIDERS_OURA_PAGE_SIZE', 10, { integer: true, min: 1 }),
    ouraHeartRatePageSize: numberEnv('BENCH_PROVIDERS_OURA_HEARTRATE_PAGE_SIZE', 1000, { integer: true, min: 1 }),
    ouraTimeoutSeconds: numberEnv('BENCH_PROVIDERS_OURA_TIMEOUT_SECONDS', 1200, { min: 10 }),
    whoopUsers: numberEnv('BENCH_PROVIDERS_WHOOP_USERS', 100, { integer: true, min: 1 }),
    whoopSeconds: numberEnv('BENCH_PROVIDERS_WHOOP_SECONDS', 240, { min: 60 }),
    connectConcurrency: numberEnv('BENCH_PROVIDERS_CONNECT_CONCURRENCY', 25, { integer: true, min: 1 }),
    whoopConnectConcurrency: numberEnv('BENCH_PROVIDERS_WHOOP_CONNECT_CONCURRENCY', 5, { integer: true, min: 1 }),
  };
};
export const providerSettings = () => void settings();

const OURA = 'oura';
export const WHOOP = 'whoop_v2';
const OURA_DATE_ROUTES = ['sleep', 'daily_sleep', 'daily_activity', 'workout', 'daily_spo2'];
/** The worker's activity slots per task queue (Temporal's default maxConcurrentActivityTaskExecutions; worker/worker.ts sets none). */
const WORKER_ACTIVITY_SLOTS = 100;
/** WHOOP's per-app budget the fake enforces (developer.whoop.com/docs/developing/rate-limiting). */
export const WHOOP_LIMIT = 100;
export const WHOOP_WINDOW_MS = 60_000;
export const WHOOP_PROFILE_PATH = '/developer/v2/user/profile/basic';
const POLL_MS = 2000;

export const round = (x, digits = 1) => (x === null || x === undefined || !Number.isFinite(x) ? null : Math.round(x * 10 ** digits) / 10 ** digits);
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `fn` over `items` with at most `concurrency` at once; rejects with the first error. */
async function pool(items, concurrency, fn) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

function percentile(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1];
}

// ---- The fakes, started before the environment ----------------------------------------------------------------------

let fakes = null;
/** The fakes `startProviderFakes` started (the WHOOP scenario, providers-whoop.mjs, reads them). */
export const providerFakes = () => fakes;

/**
 * Starts the Oura and WHOOP fakes in this process and returns the servers' PROVIDER_<SLUG>_* environment. Call it
 * after the build (the fakes are compiled to dist/test/support/fakes/) and before startEnvironment; `onCleanup` gets
 * the function that closes them (after the servers stopped: the worker may still be pulling).
 */
export async function startProviderFakes({ log = console.log, onCleanup = () => {} } = {}) {
  const s = settings();
  const [{ startFakeOura }, { startFakeWhoop }, { providerEnvKey }, { realIntegrations }, { budgetRate }] = await Promise.all([
    distModule('test/support/fakes/oura.js'),
    distModule('test/support/fakes/whoop.js'),
    distModule('lib/platform/config.js'),
    distModule('lib/wearables/providers/registry.js'),
    distModule('lib/wearables/providers/budget.js'),
  ]);
  const oura = await startFakeOura();
  for (const kind of OURA_DATE_ROUTES) oura.setPageSize(kind, s.ouraPageSize);
  oura.setPageSize('heartrate', s.ouraHeartRatePageSize);
  const whoop = await startFakeWhoop({ rateLimit: { limit: WHOOP_LIMIT, windowSeconds: WHOOP_WINDOW_MS / 1000, dailyLimit: null } });
  // Requests a second each app's budget lets through (lib/wearables/providers/budget.ts).
  fakes = { oura, whoop, budget: Object.fromEntries(realIntegrations().map((i) => [i.slug, budgetRate(i.budget)])) };
  onCleanup(async () => {
    await Promise.all([oura.close(), whoop.close()]);
    fakes = null;
  });
  log(`bench: providers: Oura fake ${oura.url}, WHOOP fake ${whoop.url} (${WHOOP_LIMIT} requests per ${WHOOP_WINDOW_MS / 1000} s, no daily limit)`);
  const env = {};
  for (const [slug, fake] of [
    [OURA, oura],
    [WHOOP, whoop],
  ]) {
    env[providerEnvKey(slug, 'BASE_URL')] = fake.url;
    env[providerEnvKey(slug, 'CLIENT_ID')] = fake.options.clientId;
    env[providerEnvKey(slug, 'CLIENT_SECRET')] = fake.options.clientSecret;
  }
  return env;
}

// ---- Users and the OAuth flow ---------------------------------------------------------------------------------------

export async function createUsers(env, client, prefix, count, concurrency, log) {
  const ids = new Array(count);
  let done = 0;
  await pool([...Array(count).keys()], concurrency, async (i) => {
    const res = await client.expect(200, 'POST', '/v2/user/', {
      body: { client_user_id: `${prefix}-${env.runId}-${i}`, fallback_time_zone: 'UTC' },
      json: true,
    });
    ids[i] = res.json.user_id;
    if (++done % 100 === 0) log(`bench: providers: ${done}/${count} ${prefix} users created`);
  });
  return ids;
}

/**
 * Connects `userId` to `slug` as a browser would (test/support/provider-stack.ts connectThroughOAuth): the link token,
 * the authorization URL our API returns, the fake's consent page approved (a new fake user each time), our callback.
 * Returns the fake's id of the user who consented.
 */
async function connectThroughOAuth(env, userId, slug, fake) {
  const signal = () => AbortSignal.timeout(60_000);
  const token = await fetch(`${env.apiUrl}/v2/link/token`, {
    method: 'POST',
    headers: { 'x-service-api-key': env.tenant.teamKey, 'content-type': 'application/json' },
    body: JSON.stringify({ user_id: userId, provider: slug }),
    signal: signal(),
  });
  if (token.status !== 200) throw new Error(`POST /v2/link/token answered ${token.status}: ${await token.text()}`);
  const { link_token } = await token.json();
  const oauth = await fetch(`${env.apiUrl}/v2/link/provider/oauth/${slug}`, { headers: { 'x-vital-link-token': link_token }, signal: signal() });
  const { oauth_url } = await oauth.json();
  if (!oauth_url) throw new Error(`no oauth_url for ${slug}: ${oauth.status}`);
  const consent = new URL(oauth_url);
  const page = await fetch(consent, { signal: signal() });
  const pageText = await page.text();
  if (page.status !== 200) throw new Error(`the ${slug} consent page answered ${page.status}: ${pageText.slice(0, 300)}`);
  const answer = await fetch(new URL(fake.options.authorizePath, fake.url), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ ...Object.fromEntries(consent.searchParams), decision: 'approve' }).toString(),
    redirect: 'manual',
    signal: signal(),
  });
  await answer.text();
  const callback = answer.headers.get('location');
  if (!callback) throw new Error(`the ${slug} consent answered ${answer.status} without a redirect`);
  const fakeUserId = fake.codes.get(new URL(callback).searchParams.get('code'))?.userId;
  const done = await fetch(callback, { redirect: 'manual', signal: signal() });
  const text = await done.text();
  // The app's budget had no room for the sign-in's requests within its booking horizon: the page names the reset and
  // says to start again from the link then (link-oauth.ts), which a user does.
  const busy = /rate limit for this app resets at ([0-9TZ:.-]+)/.exec(text);
  if (busy) throw new SignInBusy(new Date(busy[1]));
  if (done.status !== 200 || !text.includes(' connected') || text.includes('not connected')) {
    throw new Error(
      `our ${slug} callback answered ${done.status}: ${text
        .replace(/<[^>]+>/g, ' ')
        .replace(/\s+/g, ' ')
        .slice(0, 300)}`,
    );
  }
  return fakeUserId;
}

class SignInBusy extends Error {
  constructor(resetsAt) {
    super(`the app's budget is busy until ${resetsAt.toISOString()}`);
    this.resetsAt = resetsAt;
  }
}
const SIGN_IN_ATTEMPTS = 10;

/** Connects every user, `concurrency` flows at a time; a sign-in told "busy" starts again from the link after the reset it names. */
export async function connectAll(env, users, slug, fake, concurrency, log) {
  const fakeIds = new Array(users.length);
  let done = 0;
  let busy = 0;
  const started = performance.now();
  await pool(users, concurrency, async (userId, i) => {
    for (let attempt = 1; ; attempt++) {
      try {
        fakeIds[i] = await connectThroughOAuth(env, userId, slug, fake);
        break;
      } catch (err) {
        if (!(err instanceof SignInBusy) || attempt === SIGN_IN_ATTEMPTS) throw err;
        busy++;
        await sleep(Math.max(0, err.resetsAt.getTime() - Date.now()));
      }
    }
    if (++done % 50 === 0 || done === users.length)
      log(`bench: providers: ${done}/${users.length} users connected to ${slug} (${round((performance.now() - started) / 1000)} s)`);
  });
  if (busy) log(`bench: providers: ${busy} ${slug} sign-ins were told the app's budget was busy and started again after its reset`);
  return { fakeIds, seconds: (performance.now() - started) / 1000, busy };
}

/** Every user's pull state per resource, from GET /v2/introspect/historical_pull (all pages of users). */
export async function pullStates(client, slug) {
  const byUser = new Map();
  let cursor = null;
  do {
    const res = await client.expect(
      200,
      'GET',
      `/v2/introspect/historical_pull?provider=${slug}&user_limit=1000${cursor ? `&next_cursor=${encodeURIComponent(cursor)}` : ''}`,
      { json: true },
    );
    for (const u of res.json.data) byUser.set(u.user_id, u.provider?.[slug]?.pulled ?? {});
    cursor = res.json.next_cursor ?? null;
  } while (cursor);
  return byUser;
}

export function countStatuses(states, users) {
  const counts = {};
  for (const userId of users) for (const stats of Object.values(states.get(userId) ?? {})) counts[stats.status] = (counts[stats.status] ?? 0) + 1;
  return counts;
}

// ---- 1. Oura: a 90-day history for many users, against the raw fetch of the same pages ----------------------------

/** The pull's page requests at the Oura fake: each user's /v2/usercollection requests but the callback's personal_info. */
function ouraPageRequests(fake, fakeUserIds, fromIndex) {
  const ours = new Set(fakeUserIds);
  const sawCallback = new Set();
  const pages = [];
  for (let i = fromIndex; i < fake.requests.length; i++) {
    const r = fake.requests[i];
    if (!r.userId || !ours.has(r.userId) || !r.path.startsWith('/v2/usercollection/')) continue;
    // The callback asks personal_info once (afterConnect) before the connection exists; the pull's profile page later.
    if (r.path === '/v2/usercollection/personal_info' && !sawCallback.has(r.userId)) {
      sawCallback.add(r.userId);
      continue;
    }
    pages.push(r);
  }
  return pages;
}

async function ouraScenario(env, s, log) {
  const { oura } = fakes;
  const budget = fakes.budget[OURA];
  const client = httpClient(env.apiUrl, { headers: { 'x-service-api-key': env.tenant.teamKey }, timeoutMs: 60_000 });
  try {
    log(`bench: providers: oura: creating ${s.ouraUsers} users...`);
    const users = await createUsers(env, client, 'bench-oura', s.ouraUsers, 8, log);
    const logFrom = oura.requests.length;
    log(
      `bench: providers: oura: connecting ${s.ouraUsers} users through the OAuth flow (${s.connectConcurrency} at a time); each connection starts its 90-day pull`,
    );
    const connect = await connectAll(env, users, OURA, oura, s.connectConcurrency, log);

    const expected = s.ouraUsers * 6;
    const deadline = performance.now() + s.ouraTimeoutSeconds * 1000;
    let states = new Map();
    let statuses = {};
    let lastLog = 0;
    for (;;) {
      states = await pullStates(client, OURA);
      statuses = countStatuses(states, users);
      const terminal = (statuses.success ?? 0) + (statuses.failure ?? 0);
      const now = performance.now();
      if (now - lastLog >= 15_000 || terminal >= expected) {
        lastLog = now;
        const pages = ouraPageRequests(oura, connect.fakeIds, logFrom);
        const first = pages[0]?.at;
        const rate = first ? pages.length / Math.max(1, (Date.now() - first) / 1000) : 0;
        log(
          `bench: providers: oura pull: ${statuses.success ?? 0}/${expected} resources success${statuses.failure ? `, ${statuses.failure} failed` : ''}, ${pages.length} pages fetched, ${round(rate)} pages/s (budget ${round(budget)})`,
        );
      }
      if (terminal >= expected || now > deadline) break;
      await sleep(POLL_MS);
    }
    const complete = (statuses.success ?? 0) === expected;
    if (!complete) log(`bench: providers: oura pull: INCOMPLETE after ${s.ouraTimeoutSeconds} s: ${JSON.stringify(statuses)}`);

    const pageRequests = ouraPageRequests(oura, connect.fakeIds, logFrom);
    const okRequests = pageRequests.filter((r) => r.status === 200);
    const byStatus = {};
    for (const r of pageRequests) byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
    const chains = new Map(connect.fakeIds.map((id) => [id, []]));
    const seen = new Set();
    for (const r of okRequests) {
      const key = `${r.userId} ${r.path}?${new URLSearchParams(r.query)}`;
      if (seen.has(key)) continue;
      seen.add(key);
      chains.get(r.userId).push(r);
    }
    const pages = seen.size;
    const startedAt = pageRequests[0]?.at ?? Date.now();
    const endedAts = [...states.values()].flatMap((p) => Object.values(p).map((st) => Date.parse(st.timeline?.ended_at ?? ''))).filter(Number.isFinite);
    const endedAt = complete && endedAts.length ? Math.max(...endedAts) : Date.now();
    const pullSeconds = Math.max(0.001, (endedAt - startedAt) / 1000);
    const rateLimited = oura.requests.slice(logFrom).filter((r) => r.status === 429).length;
    const pull = {
      name: `Oura 90-day pull, ${s.ouraUsers} users via OAuth, api + worker (pages/s)${complete ? '' : ' INCOMPLETE'}`,
      seconds: round(pullSeconds, 2),
      ok: pages,
      rps: round(pages / pullSeconds, 2),
      p50Ms: null,
      p99Ms: null,
      errors: (statuses.failure ?? 0) + rateLimited,
    };
    log(
      `bench: providers: oura pull: ${pages} pages for ${s.ouraUsers} users in ${pull.seconds} s (first page request to the last resource's ended_at): ${pull.rps} pages/s`,
    );

    // Baseline: the same pages from a fresh fake (cold, as the pull found its fake) holding the same users, plain fetch.
    const { startFakeOura } = await distModule('test/support/fakes/oura.js');
    const replayFake = await startFakeOura();
    try {
      for (const kind of OURA_DATE_ROUTES) replayFake.setPageSize(kind, s.ouraPageSize);
      replayFake.setPageSize('heartrate', s.ouraHeartRatePageSize);
      replayFake.rateLimit.limit = Number.MAX_SAFE_INTEGER; // the raw fetch is not paced by the budget
      const tokens = new Map();
      for (const id of connect.fakeIds) {
        const user = oura.users.get(id);
        replayFake.addUser({ id: user.id, seed: user.seed, zoneOffsetSeconds: user.zoneOffsetSeconds });
        const scope = [...oura.accessTokens.values()].find((t) => t.userId === id)?.scope ?? '';
        tokens.set(id, replayFake.issueTokens(id, { accessTtlSeconds: 86_400, refresh: false, scope }).access.token);
      }
      const concurrency = Math.min(connect.fakeIds.length, WORKER_ACTIVITY_SLOTS);
      log(
        `bench: providers: oura baseline: the same ${pages} pages with plain fetch, ${concurrency} users' pages at once (each user's one at a time, in the pull's order)...`,
      );
      const latencies = [];
      let errors = 0;
      let firstError = null;
      const started = performance.now();
      await pool(connect.fakeIds, concurrency, async (id) => {
        for (const r of chains.get(id)) {
          const t0 = performance.now();
          try {
            const res = await fetch(`${replayFake.url}${r.path}?${new URLSearchParams(r.query)}`, {
              headers: { accept: 'application/json', authorization: `Bearer ${tokens.get(id)}` },
            });
            const body = await res.json();
            if (res.status !== 200) throw new Error(`${r.path} answered ${res.status}: ${JSON.stringify(body).slice(0, 200)}`);
            latencies.push(performance.now() - t0);
          } catch (err) {
            errors++;
            firstError ??= err.message;
          }
        }
      });
      const rawSeconds = (performance.now() - started) / 1000;
      latencies.sort((a, b) => a - b);
      const raw = {
        name: `raw fetch of the same ${pages} pages, ${concurrency} users at once (pages/s)`,
        seconds: round(rawSeconds, 2),
        ok: latencies.length,
        rps: round(latencies.length / rawSeconds, 2),
        p50Ms: round(percentile(latencies, 50), 2),
        p99Ms: round(percentile(latencies, 99), 2),
        errors,
        firstError,
      };
      log(
        `bench: providers: oura baseline: ${raw.ok} pages in ${raw.seconds} s: ${raw.rps} pages/s, p50 ${raw.p50Ms} ms, p99 ${raw.p99Ms} ms, ${errors} errors${firstError ? ` (first: ${firstError})` : ''}`,
      );

      const floorSeconds = pages / budget;
      const repeats = okRequests.length - pages;
      return {
        results: [pull, raw],
        ratios: [
          {
            name: 'Oura 90-day pull / raw fetch of the same pages',
            of: pull,
            to: raw,
            target: null,
            note: `the pull is paced at Oura's budget, ${round(budget, 2)} requests/s`,
          },
          {
            name: 'Oura pull pages/s, % of the app budget',
            value: round((pull.rps / budget) * 100),
            target: null,
            unit: '%',
            kind: 'info',
            note: `${round(budget, 2)} requests/s: 5,000 per 5 min less 5 %`,
          },
        ],
        notes: [
          `oura: ${s.ouraUsers} users connected through the OAuth flow in ${round(connect.seconds)} s; their 90-day pulls (${pages} pages, ${round(pages / s.ouraUsers)} a user at ${s.ouraPageSize} documents / ${s.ouraHeartRatePageSize} heart-rate rows a page) took ${pull.seconds} s from the first page request to the last resource done: ${pull.rps} pages/s, ${round(s.ouraUsers / pullSeconds, 3)} users/s` +
            `${complete ? '' : ` (INCOMPLETE: ${JSON.stringify(statuses)})`}; the raw fetch of the same pages took ${raw.seconds} s (${raw.rps} pages/s); Oura's budget alone allows no less than ${round(floorSeconds)} s (${round(budget, 2)} pages/s)`,
          `oura: page requests by status ${JSON.stringify(byStatus)}; ${rateLimited} answered 429 by the fake (5,000 per 5 min); ${repeats} page(s) asked more than once; resources ${JSON.stringify(statuses)}`,
        ],
        details: {
          users: s.ouraUsers,
          connectSeconds: round(connect.seconds, 2),
          pages,
          pagesPerUser: round(pages / s.ouraUsers, 1),
          pageSize: s.ouraPageSize,
          heartRatePageSize: s.ouraHeartRatePageSize,
          pullSeconds: pull.seconds,
          pagesPerSecond: pull.rps,
          usersPerSecond: round(s.ouraUsers / pullSeconds, 4),
          rawSeconds: raw.seconds,
          rawPagesPerSecond: raw.rps,
          rawConcurrency: concurrency,
          budgetPerSecond: round(budget, 3),
          budgetFloorSeconds: round(floorSeconds, 1),
          requestsByStatus: byStatus,
          rateLimited,
          repeatedPages: repeats,
          resources: statuses,
          complete,
        },
      };
    } finally {
      await replayFake.close();
    }
  } finally {
    client.close();
  }
}

// ---- 2. WHOOP: 500 users under 100 requests a minute ---------------------------------------------------------------

/** The most requests in any `spanMs` ending at a request of `times` (sorted), counting the requests before `from` too. */
export async function providerSuite(env, { log = console.log } = {}) {
  const s = settings();
  if (!fakes) throw new Error('the providers suite needs its fakes started before the environment (startProviderFakes)');
  const out = { results: [], ratios: [], notes: [], details: {} };
  for (const [name, scenario] of [
    ['oura', ouraScenario],
    ['whoop', whoopScenario],
  ]) {
    if (!s.scenarios.includes(name)) continue;
    const got = await scenario(env, s, log);
    out.results.push(...got.results);
    out.ratios.push(...got.ratios);
    out.notes.push(...got.notes);
    out.details[name] = got.details;
  }
  return out;
}
