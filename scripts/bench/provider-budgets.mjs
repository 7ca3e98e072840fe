// `npm run bench` suite `provider-budgets` (BENCH_SUITES=provider-budgets): two WHOOP apps (two client ids, each its
// own loopback fake with WHOOP's rolling limit of 100 requests a minute, the daily one off) with
// BENCH_BUDGETS_USERS (300) users each, every user pulling sleep pages one after another through the product's HTTP
// client and its app's budget in the bench database (lib/wearables/providers/http.ts, budget.ts, the store's
// conditional $inc), as the page activities do; a request the budget refuses for longer than the client waits
// (RateLimitedError) is asked again at the time it names, as the workflow's timer does. For BENCH_BUDGETS_SECONDS
// (150): each app's requests a minute against its 100 (target >= 90 %), its busiest 60 s (at most 100), and the 429s
// its fake answered (target 0). What it leaves out: Temporal (the page activities' scheduling) and several processes
// drawing at once (the store settles each draw alone; test/provider-budgets.test.ts races draws).
//
//   BENCH_BUDGETS_USERS=300      users per app
//   BENCH_BUDGETS_SECONDS=150    the run
import { distModule } from './environment.mjs';
import { numberEnv } from './load.mjs';
import { busiestWindow } from './providers-whoop.mjs';

const LIMIT = 100;
const WINDOW_MS = 60_000;
const round = (x, d = 1) => Math.round(x * 10 ** d) / 10 ** d;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const settings = () => ({
  users: numberEnv('BENCH_BUDGETS_USERS', 300, { integer: true, min: 1 }),
  seconds: numberEnv('BENCH_BUDGETS_SECONDS', 150, { min: 30 }),
});
export const budgetSettings = () => void settings();

export async function budgetSuite(env, { log = console.log } = {}) {
  const s = settings();
  const [{ startFakeWhoop }, { createProviderHttp }, { takeFromBudget }, { integrationFor }, { RateLimitedError }] = await Promise.all([
    distModule('test/support/fakes/whoop.js'),
    distModule('lib/wearables/providers/http.js'),
    distModule('lib/wearables/providers/budget.js'),
    distModule('lib/wearables/providers/registry.js'),
    distModule('lib/wearables/providers/contract.js'),
  ]);
  const whoop = integrationFor('whoop_v2');
  const apps = await Promise.all(
    ['a', 'b'].map(async (name) => {
      const clientId = `bench-whoop-${name}-${env.runId}`;
      const fake = await startFakeWhoop({ clientId, rateLimit: { limit: LIMIT, windowSeconds: WINDOW_MS / 1000, dailyLimit: null } });
      const gate = {
        blockedUntil: () => env.repos.providerAuth.blockedUntil('whoop_v2', clientId),
        block: (until, reason) => env.repos.providerAuth.block('whoop_v2', clientId, until, reason),
        take: (method, now) => takeFromBudget(env.repos, { slug: 'whoop_v2', clientId, budget: whoop.budget }, method, now),
      };
      return { name, clientId, fake, gate, sent: [], waits: 0 };
    }),
  );
  const end = Date.now() + s.seconds * 1000;
  log(`bench: provider-budgets: 2 WHOOP apps x ${s.users} users pulling for ${s.seconds} s, each app against its own 100 a minute`);
  const user = async (app) => {
    const u = app.fake.addUser();
    const { access } = app.fake.issueTokens(u.id, { accessTtlSeconds: 86_400, scope: 'read:sleep' });
    const http = createProviderHttp({
      integration: whoop,
      baseUrl: app.fake.url,
      client: { clientId: app.clientId, clientSecret: 'x' },
      accessToken: async () => access.token,
      gate: app.gate,
    });
    while (Date.now() < end) {
      try {
        await http.request({ url: 'https://api.prod.whoop.com/developer/v2/activity/sleep', query: { limit: 25 } });
        app.sent.push(Date.now());
      } catch (err) {
        if (!(err instanceof RateLimitedError)) throw err;
        app.waits++;
        await sleep(Math.min(Math.max(0, err.retryAt.getTime() - Date.now()), Math.max(0, end - Date.now())));
      }
    }
  };
  await Promise.all(apps.flatMap((app) => Array.from({ length: s.users }, () => user(app))));
  // The run is BENCH_BUDGETS_SECONDS: requests that waited past its end are not counted (nor is the time they took).
  const seconds = s.seconds;
  await Promise.all(apps.map((a) => a.fake.close()));

  const ratios = [];
  const details = {};
  const notes = [];
  for (const app of apps) {
    const times = app.sent.filter((t) => t < end);
    const perMinute = (times.length / seconds) * 60;
    const busiest = busiestWindow(times, WINDOW_MS);
    const refused = app.fake.rateLimitedResponses;
    log(
      `bench: provider-budgets: app ${app.name}: ${times.length} requests in ${round(seconds)} s = ${round(perMinute)} a minute (${round((perMinute / LIMIT) * 100)} % of ${LIMIT}), busiest 60 s ${busiest}, ${refused} answered 429, ${app.waits} long waits`,
    );
    ratios.push(
      {
        name: `WHOOP app ${app.name}: requests a minute, % of its ${LIMIT} budget (${s.users} users)`,
        value: round((perMinute / LIMIT) * 100),
        target: 90,
        unit: '%',
        kind: 'target',
      },
      { name: `WHOOP app ${app.name}: 429s from its fake`, value: refused, target: 0, atMost: true, kind: 'target' },
      { name: `WHOOP app ${app.name}: busiest 60 s (requests)`, value: busiest, target: null, kind: 'info', note: `limit ${LIMIT}` },
    );
    details[app.name] = {
      users: s.users,
      seconds: round(seconds, 2),
      requests: times.length,
      perMinute: round(perMinute, 1),
      busiest60s: busiest,
      rateLimited: refused,
      longWaits: app.waits,
    };
  }
  notes.push(
    'provider-budgets: every request drew from its app budget in the bench database (one process; Temporal not involved): see the header of scripts/bench/provider-budgets.mjs',
  );
  return { results: [], ratios, notes, details };
}
