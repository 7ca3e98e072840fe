// The providers suite's WHOOP scenario (scripts/bench/providers.mjs): users connecting through the OAuth flow and
// pulling their history under WHOOP's 100-requests-a-minute limit for our app, every request drawn from the app's
// budget; reported: the fake's 429 answers and the budget used, minute by minute.
import { httpClient } from './load.mjs';
import {
  WHOOP,
  WHOOP_LIMIT,
  WHOOP_PROFILE_PATH,
  WHOOP_WINDOW_MS,
  connectAll,
  countStatuses,
  createUsers,
  providerFakes,
  pullStates,
  round,
  sleep,
} from './providers.mjs';

const WHOOP_TOKEN_PATH = '/oauth/oauth2/token';

/** The most of `times` (sorted) inside any `spanMs`, among the spans ending at or after `from`. */
export function busiestWindow(times, spanMs, from = -Infinity) {
  let lo = 0;
  let max = 0;
  for (let hi = 0; hi < times.length; hi++) {
    while (times[lo] <= times[hi] - spanMs) lo++;
    if (times[hi] >= from) max = Math.max(max, hi - lo + 1);
  }
  return max;
}

export async function whoopScenario(env, s, log) {
  const fakes = providerFakes();
  const { whoop } = fakes;
  const budget = fakes.budget[WHOOP];
  const client = httpClient(env.apiUrl, { headers: { 'x-service-api-key': env.tenant.teamKey }, timeoutMs: 60_000 });
  try {
    log(`bench: providers: whoop: creating ${s.whoopUsers} users...`);
    const users = await createUsers(env, client, 'bench-whoop', s.whoopUsers, 8, log);
    const logFrom = whoop.requests.length;
    const limited0 = whoop.rateLimitedResponses;
    const t0 = Date.now();
    const end = t0 + s.whoopSeconds * 1000;
    log(
      `bench: providers: whoop: connecting ${s.whoopUsers} users (${s.whoopConnectConcurrency} OAuth flows at a time), then running to ${s.whoopSeconds} s from the first connection`,
    );
    // Everything the app sends WHOOP draws from its budget: the sign-ins' code exchanges and profile reads, the pages.
    const appRequests = () => whoop.requests.slice(logFrom).filter((r) => r.path.startsWith('/developer/') || r.path === WHOOP_TOKEN_PATH);
    const pageRequests = () => appRequests().filter((r) => r.path.startsWith('/developer/') && r.path !== WHOOP_PROFILE_PATH);
    const progress = setInterval(() => {
      const reqs = pageRequests();
      const minute = reqs.filter((r) => r.at > Date.now() - WHOOP_WINDOW_MS).length;
      log(
        `bench: providers: whoop: ${round((Date.now() - t0) / 1000, 0)} s: ${reqs.length} page requests, ${minute} in the last 60 s, ${whoop.rateLimitedResponses - limited0} answered 429`,
      );
    }, 30_000);
    let connect;
    try {
      connect = await connectAll(env, users, WHOOP, whoop, s.whoopConnectConcurrency, log);
      await sleep(Math.max(0, end - Date.now()));
    } finally {
      clearInterval(progress);
    }
    const reqs = appRequests().filter((r) => r.at < end);
    const limited = reqs.filter((r) => r.status === 429).length;
    const byStatus = {};
    for (const r of reqs) byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
    const minutes = [];
    for (let m = 0; m * WHOOP_WINDOW_MS < s.whoopSeconds * 1000; m++) {
      const from = t0 + m * WHOOP_WINDOW_MS;
      const to = Math.min(end, from + WHOOP_WINDOW_MS);
      minutes.push({
        minute: m + 1,
        seconds: (to - from) / 1000,
        requests: reqs.filter((r) => r.at >= from && r.at < to).length,
        rateLimited: reqs.filter((r) => r.at >= from && r.at < to && r.status === 429).length,
      });
    }
    const full = minutes.filter((m) => m.seconds === WHOOP_WINDOW_MS / 1000);
    const perMinute = (reqs.length / s.whoopSeconds) * 60;
    // After the connections: every pull is under way, nothing but page requests reaches WHOOP.
    const afterConnect = reqs.filter((r) => r.at >= t0 + connect.seconds * 1000);
    const steadySeconds = (end - (t0 + connect.seconds * 1000)) / 1000;
    const steadyPerMinute = steadySeconds > 0 ? (afterConnect.length / steadySeconds) * 60 : null;
    const admittedTimes = reqs.filter((r) => r.status !== 429).map((r) => r.at);
    const busiest = busiestWindow(admittedTimes, WHOOP_WINDOW_MS);
    const busiestAfterFirstMinute = s.whoopSeconds > 60 ? busiestWindow(admittedTimes, WHOOP_WINDOW_MS, t0 + WHOOP_WINDOW_MS) : null;
    const states = await pullStates(client, WHOOP);
    const statuses = countStatuses(states, users);
    const profileCalls = whoop.requests.slice(logFrom).filter((r) => r.path === WHOOP_PROFILE_PATH).length;
    const tokenCalls = whoop.requests.slice(logFrom).filter((r) => r.path === WHOOP_TOKEN_PATH).length;
    log(
      `bench: providers: whoop: ${reqs.length} requests of the app (${tokenCalls} code exchanges, ${profileCalls} profile reads, the rest pages) in ${s.whoopSeconds} s (${round(perMinute)} a minute, ${round((perMinute / WHOOP_LIMIT) * 100)} % of ${WHOOP_LIMIT}), ${limited} answered 429; per minute ${minutes.map((m) => m.requests).join(', ')}; busiest 60 s ${busiest}`,
    );
    if (whoop.rateLimitedResponses - limited0 !== limited)
      log(`bench: providers: whoop: the fake counted ${whoop.rateLimitedResponses - limited0} 429s in all (incl. after the window)`);

    const result = {
      name: `WHOOP sign-ins and pulls, ${s.whoopUsers} users, ${s.whoopSeconds} s (the app's requests/s to the fake)`,
      seconds: s.whoopSeconds,
      ok: reqs.length - limited,
      rps: round(reqs.length / s.whoopSeconds, 2),
      p50Ms: null,
      p99Ms: null,
      errors: limited,
    };
    return {
      results: [result],
      ratios: [
        { name: `WHOOP 429s from the fake (${s.whoopUsers} users, ${s.whoopSeconds} s)`, value: limited, target: 0, atMost: true, kind: 'target' },
        {
          name: `WHOOP app's requests a minute, % of the ${WHOOP_LIMIT} limit`,
          value: round((perMinute / WHOOP_LIMIT) * 100),
          target: 90,
          unit: '%',
          kind: 'target',
        },
        {
          name: 'WHOOP busiest 60 s of the run (requests)',
          value: busiest,
          target: null,
          kind: 'info',
          note: `limit ${WHOOP_LIMIT}${s.whoopSeconds > 60 ? `; ending after the first minute ${busiestAfterFirstMinute}` : ''}; the app's budget lets ${round(budget * 60, 1)} a minute through`,
        },
      ],
      notes: [
        `whoop: ${s.whoopUsers} users connected through the OAuth flow in ${round(connect.seconds)} s (${s.whoopConnectConcurrency} flows at a time); the app's requests to WHOOP by minute from the first connection: ${minutes.map((m) => `${m.requests}${m.seconds < 60 ? ` (${m.seconds} s)` : ''}${m.rateLimited ? ` [${m.rateLimited}x429]` : ''}`).join(', ')}; ` +
          `${round(perMinute)} a minute over the run, ${steadyPerMinute === null ? '-' : round(steadyPerMinute)} a minute after the last connection; statuses ${JSON.stringify(byStatus)}`,
        `whoop: the fake's 10,000 requests a day are off (dailyLimit: null): at ${round(budget * 60)} a minute they would bind after ~${round(10_000 / (budget * 60), 0)} minutes (a 90-day history is ~20 requests a user: ${s.whoopUsers} users ~${s.whoopUsers * 20}); the app's budget counts the day too`,
        `whoop: ${tokenCalls} code exchanges and ${profileCalls} profile reads of the sign-ins drew from the app's budget with the pages (booked ahead of them); ${connect.busy} sign-ins were told the budget was busy and started again after its reset; pulls after the run: ${JSON.stringify(statuses)}`,
      ],
      details: {
        users: s.whoopUsers,
        seconds: s.whoopSeconds,
        connectSeconds: round(connect.seconds, 2),
        requests: reqs.length,
        rateLimited: limited,
        requestsPerMinute: round(perMinute, 1),
        requestsPerMinuteAfterConnect: round(steadyPerMinute, 1),
        budgetUsePct: round((perMinute / WHOOP_LIMIT) * 100, 1),
        taskQueueRatePerMinute: round(budget * 60, 2),
        perMinute: minutes,
        fullMinutes: full.map((m) => m.requests),
        busiest60s: busiest,
        busiest60sAfterFirstMinute: busiestAfterFirstMinute,
        requestsByStatus: byStatus,
        callbackProfileRequests: profileCalls,
        codeExchanges: tokenCalls,
        signInsBusy: connect.busy,
        pulls: statuses,
      },
    };
  } finally {
    client.close();
  }
}
