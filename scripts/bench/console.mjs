// The delivery-log page with a long log (`npm run bench`, BENCH_SUITES=console): one team's webhook events with
// their deliveries and attempts seeded through the product's store (WebhookStore: events sealed as the publisher
// stores them, deliveries and attempts as the dispatcher leaves them), first BENCH_CONSOLE_SIZES=10000,100000
// events in all, then every API call the page makes to draw its views (api/console/api.js) timed one at a time:
//
//   the team's events (first page), by a common and a rare event type, by user, in a one-hour window, and a
//   cursor page deep in the log; an endpoint's failed deliveries; an event's deliveries and its attempts.
//
// Each call is timed against the raw `mongodb` driver doing the same database work in the same run, requests
// interleaved: the management key and team reads every request makes (and the endpoint's, for its deliveries),
// then the list query as the store sends it (lib/events/delivery-log.ts: its filter and `_id` bounds; pages.ts
// logPage: the `_id` walk within its budget, else the planner's plan). Reported per call and size: p50/p95, growth from the first size to the last,
// and API / raw. Once, at the last size: the page itself in headless Chromium, from opening a sign-in link to the
// events table drawn (a screenshot goes to .devstack/screenshots/console-bench.png).
//
//   BENCH_CONSOLE_SIZES=10000,100000   events in the log at each measurement
//   BENCH_CONSOLE_SAMPLES=200          timed requests per call and size (each side), after 20 not timed

import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { repoRoot } from '../setup.mjs';
import { ensureChromium } from '../stack/chromium.mjs';
import { distModule } from './environment.mjs';
import { BenchError, httpClient, numberEnv } from './load.mjs';
import { percentiles, round } from './webhook-measures.mjs';

const USERS = 1000;
const SPAN_MS = 7 * 86_400_000; // events spread over the week before the run
const BATCH = 1000;
const WARMUP = 20;
const PAGE = 50; // the page's page size (console.js PAGE)
const FIRST_PAGE_TARGET_MS = 100;
// Event types and their shares of the log (a wearables team's): the first and the last are filtered on.
const TYPES = [
  ['daily.data.steps.created', 0.3],
  ['daily.data.heartrate.created', 0.25],
  ['daily.data.sleep.created', 0.15],
  ['daily.data.activity.created', 0.12],
  ['daily.data.workouts.created', 0.08],
  ['provider.connection.created', 0.05],
  ['historical.data.steps.created', 0.045],
  ['provider.connection.error', 0.005],
];
const FAILED_SHARE = 0.05; // deliveries that failed (four attempts, a 500 each); the rest succeeded at once

export function consoleSettings() {
  const raw = process.env.BENCH_CONSOLE_SIZES || '10000,100000';
  const sizes = raw.split(',').map(Number);
  if (!sizes.length || sizes.some((n, i) => !Number.isInteger(n) || n < 1000 || (i && n <= sizes[i - 1]))) {
    throw new Error(`BENCH_CONSOLE_SIZES=${raw} must be increasing event counts of at least 1000`);
  }
  return { sizes, samples: numberEnv('BENCH_CONSOLE_SAMPLES', 200, { integer: true, min: 10 }) };
}

const pick = (items) => items[Math.floor(Math.random() * items.length)];
const sizeName = (n) => (n % 1000 ? String(n) : `${n / 1000}k`);

/** Seeds `count` more events (with a delivery to `endpointId` and its attempts each), printing progress. */
async function seed(ctx, count, log) {
  const { store, teamId, endpointId, users, policy, timeOrderedNameBasedUuid, envelopeOf, attemptId, deliveryId, seeded } = ctx;
  const start = Date.now() - SPAN_MS;
  const times = Array.from({ length: count }, () => start + Math.floor(Math.random() * SPAN_MS)).sort((a, b) => a - b);
  const started = performance.now();
  let [lastMs, sequence] = [0, 0];
  for (let first = 0; first < count; first += BATCH) {
    const events = [];
    const deliveries = [];
    const attempts = [];
    for (const ms of times.slice(first, first + BATCH)) {
      const r = Math.random();
      let acc = 0;
      const type = (TYPES.find(([, share]) => r < (acc += share)) ?? TYPES[0])[0];
      const userId = pick(users);
      // An id of its own time, as the publisher mints one when it stores the event (timeOrderedUuid never goes back
      // in time, and the suites before this one minted ids of the present in this process).
      sequence = ms === lastMs ? sequence + 1 : 0;
      lastMs = ms;
      const id = timeOrderedNameBasedUuid(ms, [randomUUID()], sequence);
      const at = new Date(ms);
      const data = {
        date: at.toISOString().slice(0, 10),
        source: 'fitbit',
        value: Math.round(Math.random() * 12_000),
        unit: 'count',
        provider_id: randomUUID(),
      };
      const envelope = { event_type: type, data, team_id: teamId, user_id: userId, client_user_id: `client-${userId.slice(0, 8)}` };
      events.push({
        _id: id,
        team_id: teamId,
        idempotency_key: id,
        event_type: type,
        user_id: userId,
        client_user_id: envelope.client_user_id,
        body: envelopeOf(envelope),
        created_at: at,
        only_destination_id: null,
      });
      const failed = Math.random() < FAILED_SHARE;
      const tries = failed ? 4 : 1;
      const did = deliveryId(id, endpointId);
      const finished = new Date(ms + tries * 1500);
      deliveries.push({
        _id: did,
        team_id: teamId,
        destination_id: endpointId,
        event_id: id,
        event_type: type,
        user_id: userId,
        status: failed ? 'failed' : 'succeeded',
        trigger: 'scheduled',
        next_attempt_at: null,
        attempts: tries,
        pass_attempts: tries,
        policy,
        last_status_code: failed ? 500 : 200,
        last_error: null,
        created_at: at,
        updated_at: finished,
        finished_at: finished,
      });
      for (let n = 1; n <= tries; n++) {
        attempts.push({
          _id: attemptId(did, n),
          team_id: teamId,
          event_id: id,
          destination_id: endpointId,
          user_id: userId,
          attempt: n,
          trigger: 'scheduled',
          timestamp: new Date(ms + n * 1500),
          duration_ms: 20 + Math.floor(Math.random() * 80),
          status_code: failed ? 500 : 200,
          error_class: null,
          error: null,
          response_body: failed ? '{"error":"orders database is read-only"}' : 'ok',
        });
      }
      seeded.push({ id, type, userId, failed, ms });
    }
    const refused = await store.insertEvents(events);
    if (refused.size) throw new Error(`seeding: ${refused.size} events refused as repeats`);
    await store.insertDeliveries(deliveries);
    await store.insertAttempts(attempts);
    const done = Math.min(count, first + BATCH);
    if (done % 10_000 === 0 || done === count) {
      const s = (performance.now() - started) / 1000;
      log(
        `bench: console: seeded ${seeded.length} events (+${done} of ${count} in ${s.toFixed(0)} s, ${Math.round(done / s)} events/s with their deliveries and attempts)`,
      );
    }
  }
  seeded.sort((a, b) => (a.id < b.id ? -1 : 1));
}

/**
 * The list query as pages.ts `logPage` sends it: the `_id` walk within 30 ms, else windows of time of the list's index
 * newest first (1 h, 16 h, ~11 days, ~170 days, the rest: `pageByTimeWindows`); with `user`, as delivery-log.ts reads a
 * user's events: counted up to 5% of the log, one read of every match sorted below that.
 */
async function rawLogPage(coll, filter, after, user, { idPrefixAt, uuidV7Millis, windows }) {
  const query = (f, below, limit = PAGE) =>
    coll
      .find({ ...f, _id: { ...(f._id ?? {}), $lt: below ?? '~' } })
      .sort({ _id: -1 })
      .limit(limit + 1);
  if (user) {
    const dense = Math.max(1, Math.ceil(0.05 * (await coll.estimatedDocumentCount())));
    if ((await coll.countDocuments({ team_id: filter.team_id, user_id: user }, { limit: dense })) < dense) return query(filter, after).toArray();
  }
  try {
    return await query(filter, after).hint({ _id: 1 }).maxTimeMS(30).toArray();
  } catch (err) {
    if (err.code !== 50) throw err;
  }
  const docs = [];
  let below = after;
  for (let window = 0, span = windows.firstMs, from = (after ? uuidV7Millis(after) : Date.now()) - span; docs.length <= PAGE; window++) {
    const last = window === windows.count || from <= 0;
    const bound = last ? null : idPrefixAt(from);
    const lower = bound === null || (filter._id?.$gte ?? '') > bound ? {} : { $gte: bound };
    docs.push(...(await query({ ...filter, _id: { ...(filter._id ?? {}), ...lower } }, below, PAGE - docs.length).toArray()));
    if (last) break;
    below = bound;
    span *= windows.growth;
    from -= span;
  }
  return docs;
}

/**
 * The page's calls: `{ name, args() (fresh random arguments per request), api(args) -> path, raw(args) -> [collection,
 * filter, options] }`.
 */
function pageCalls(ctx) {
  const { db, teamId, orgId, endpointId, seeded, encodeCursor, users, idsWithin, idPrefixAt, uuidV7Millis } = ctx;
  const base = `/v1/org/${orgId}/team/${teamId}/sandbox/webhook`;
  const [events, deliveries, attempts] = ['webhook_events', 'webhook_deliveries', 'webhook_attempts'].map((c) => db.collection(c));
  const [[common, commonShare], [rare, rareShare]] = [TYPES[0], TYPES.at(-1)];
  const qs = (q = {}) => `?${new URLSearchParams({ limit: String(PAGE), ...q })}`;
  const team = { team_id: teamId };
  const none = () => null;
  return [
    { name: 'events: first page', args: none, api: () => `${base}/events${qs()}`, raw: () => [events, team] },
    {
      name: `events: type ${common} (${commonShare * 100}%)`,
      args: none,
      api: () => `${base}/events${qs({ event_type: common })}`,
      raw: () => [events, { ...team, event_type: common }],
    },
    {
      name: `events: type ${rare} (${rareShare * 100}%)`,
      args: none,
      api: () => `${base}/events${qs({ event_type: rare })}`,
      raw: () => [events, { ...team, event_type: rare }],
    },
    {
      name: `events: one user (of ${USERS})`,
      args: () => pick(users),
      api: (u) => `${base}/events${qs({ user_id: u })}`,
      raw: (u) => [events, { ...team, user_id: u }, { user: u }],
    },
    {
      name: 'events: a one-hour window',
      args: () => {
        const since = Date.now() - SPAN_MS + Math.floor(Math.random() * (SPAN_MS - 3_600_000));
        return { since: new Date(since), until: new Date(since + 3_600_000) };
      },
      api: (w) => `${base}/events${qs({ since: w.since.toISOString(), until: w.until.toISOString() })}`,
      raw: (w) => [events, { ...team, created_at: { $gte: w.since, $lt: w.until }, _id: idsWithin(w) }],
    },
    {
      name: 'events: a page deep in the log (cursor)',
      args: () => seeded[Math.floor(seeded.length * (0.25 + Math.random() * 0.5))].id, // the middle half
      api: (after) => `${base}/events${qs({ next_cursor: encodeCursor({ after }) })}`,
      raw: (after) => [events, team, { after }],
    },
    {
      name: `an endpoint's failed deliveries (${FAILED_SHARE * 100}%)`,
      args: none,
      api: () => `${base}/${endpointId}/deliveries${qs({ status: 'failed' })}`,
      raw: () => [deliveries, { ...team, destination_id: endpointId, status: 'failed' }, { endpoint: true }],
    },
    {
      name: "an event's deliveries",
      args: () => pick(seeded).id,
      api: (e) => `${base}/events/${e}/deliveries?limit=250`,
      raw: (e) => [deliveries, { ...team, _id: { $gt: `${e}:`, $lte: `${e}:~` } }],
    },
    {
      name: "an event's attempts (of a failed delivery: 4)",
      args: () => pick(ctx.failedEvents),
      api: (e) => `${base}/events/${e}/attempts?limit=250`,
      raw: (e) => [attempts, { ...team, event_id: e, _id: { $gte: idPrefixAt(uuidV7Millis(e)), $lte: idPrefixAt(uuidV7Millis(e) + 1) } }],
    },
  ];
}

/** Times each call through the API and through the raw driver, alternately, `samples` times each. */
async function measureCalls(ctx, calls, samples, log) {
  const { db, teamId, endpointId, keyHash, client } = ctx;
  const [orgs, teams, endpoints] = ['orgs', 'teams', 'webhook_endpoints'].map((c) => db.collection(c));
  /** The reads every management request makes before its list: its key (by hash), the team, for a list of its deliveries the endpoint. */
  const scope = async (endpoint) => {
    const [org, team] = await Promise.all([
      orgs.findOne({ 'management_keys.key_hash': keyHash }, { projection: { management_keys: 1 } }),
      teams.findOne({ _id: teamId }),
    ]);
    if (!org || !team) throw new Error('raw: key or team not found');
    if (endpoint && !(await endpoints.findOne({ _id: endpointId, team_id: teamId }))) throw new Error('raw: endpoint not found');
  };
  const out = [];
  for (const call of calls) {
    const times = { api: [], raw: [] };
    let rows = 0;
    for (let i = 0; i < WARMUP + samples; i++) {
      const args = call.args();
      let t = performance.now();
      const res = await client.expect(200, 'GET', call.api(args), { json: true });
      if (i >= WARMUP) times.api.push(performance.now() - t);
      rows += res.json.data.length;
      const [coll, filter, opts = {}] = call.raw(args);
      t = performance.now();
      await scope(opts.endpoint);
      await rawLogPage(coll, filter, opts.after ?? null, opts.user, ctx);
      if (i >= WARMUP) times.raw.push(performance.now() - t);
    }
    if (!rows) throw new BenchError(`console: ${call.name}: every page was empty; the seed does not exercise it`);
    const api = percentiles(times.api);
    const raw = percentiles(times.raw);
    out.push({ name: call.name, api, raw, rowsPerPage: round(rows / (WARMUP + samples), 1) });
    log(`bench: console: ${call.name}: api p50 ${api.p50Ms} p95 ${api.p95Ms} ms, raw p50 ${raw.p50Ms} p95 ${raw.p95Ms} ms`);
  }
  return out;
}

/** Opens the page by a sign-in link in headless Chromium: ms until the events table has its first page drawn. */
async function timePage(ctx, log) {
  await ensureChromium({ log });
  const { launchBrowser, watchedPage } = await distModule('test/support/browser.js');
  const link = await ctx.client.expect(201, 'POST', `/v1/org/${ctx.orgId}/team/${ctx.teamId}/sandbox/console/links`, { json: true });
  const browser = await launchBrowser();
  try {
    const w = await watchedPage(browser);
    const started = performance.now();
    await w.page.goto(link.json.url);
    await w.page.locator(`#rows-body tr:nth-child(${PAGE})`).waitFor({ timeout: 30_000 });
    const ms = performance.now() - started;
    const shown = await w.page.locator('#list-status').textContent();
    const file = path.join(repoRoot, '.devstack', 'screenshots', 'console-bench.png'); // the helper's folder is relative to dist/ here
    mkdirSync(path.dirname(file), { recursive: true });
    await w.page.screenshot({ path: file, fullPage: true });
    if (w.errors.length) throw new BenchError('console: the page logged errors', w.errors.join('\n'));
    log(`bench: console: page opened by a link, ${PAGE} events drawn in ${Math.round(ms)} ms ("${shown}"); ${path.relative(repoRoot, file)}`);
    return round(ms, 0);
  } finally {
    await browser.close();
  }
}

/** The suite: seed to each size, measure every call; the page in Chromium once at the last size. */
export async function consoleSuite(env, { log = console.log } = {}) {
  const { sizes, samples } = consoleSettings();
  const [
    { loadConfig },
    { envelopeOf, attemptId, deliveryId },
    { deliveryPolicyFrom },
    { timeOrderedNameBasedUuid, hashKey, uuidV7Millis, idPrefixAt },
    { encodeCursor },
    { idsWithin },
    { LOG_TIME_WINDOWS },
  ] = await Promise.all([
    distModule('lib/platform/config.js'),
    distModule('lib/events/model.js'),
    distModule('lib/events/fan-out.js'),
    distModule('lib/platform/keys.js'),
    distModule('api/cursors.js'),
    distModule('lib/events/delivery-log.js'),
    distModule('lib/platform/database/pages.js'),
  ]);
  const { repos } = env;
  const team = await repos.tenancy.createTeam(env.tenant.orgId, 'Bench delivery log', 'sandbox', 'us');
  const key = await repos.tenancy.createManagementKey(env.tenant.orgId, 'bench-console', 'org_admin', []);
  const client = httpClient(env.apiUrl, { headers: { 'x-management-key': key.value } });
  try {
    const hooks = `/v1/org/${env.tenant.orgId}/team/${team._id}/sandbox/webhook`;
    const hook = await client.expect(200, 'POST', hooks, { body: { url: `${env.constantUrl}/constant`, description: 'Orders backend' }, json: true });
    const ctx = {
      db: env.db,
      client,
      store: repos.webhookStore,
      orgId: env.tenant.orgId,
      teamId: team._id,
      endpointId: hook.json.id,
      keyHash: hashKey(key.value),
      users: Array.from({ length: USERS }, () => randomUUID()),
      policy: deliveryPolicyFrom(loadConfig({ ...process.env, ...env.childEnv })),
      timeOrderedNameBasedUuid,
      envelopeOf,
      attemptId,
      deliveryId,
      encodeCursor,
      idsWithin,
      idPrefixAt,
      uuidV7Millis,
      windows: LOG_TIME_WINDOWS,
      seeded: [],
      failedEvents: [],
    };
    const calls = pageCalls(ctx);
    const bySize = [];
    for (const size of sizes) {
      log(`bench: console: seeding the log of team ${ctx.teamId} to ${size} events...`);
      await seed(ctx, size - ctx.seeded.length, log);
      ctx.failedEvents = ctx.seeded.filter((s) => s.failed).map((s) => s.id);
      log(`bench: console: ${calls.length} calls of the page at ${sizeName(size)} events, ${samples} requests each (and as many raw)`);
      bySize.push({ size, calls: await measureCalls(ctx, calls, samples, log) });
    }
    const pageMs = await timePage(ctx, log);
    return report(bySize, pageMs);
  } finally {
    client.close();
  }
}

/** Ratios (growth, API / raw, the first-page target) and a table of every figure as a note. */
function report(bySize, pageMs) {
  const first = bySize[0];
  const last = bySize.at(-1);
  const [a, b] = [sizeName(first.size), sizeName(last.size)];
  const ratios = [
    {
      name: `console: events first page p95 at ${b}`,
      value: last.calls[0].api.p95Ms,
      target: FIRST_PAGE_TARGET_MS,
      atMost: true,
      unit: ' ms',
    },
    { name: `console: the page in Chromium at ${b} (link to table drawn)`, value: pageMs, target: null, unit: ' ms', kind: 'info', note: 'once, cold' },
  ];
  for (const [i, call] of last.calls.entries()) {
    // Growth by the median call: the p95 of a few hundred 3-8 ms calls, taken minutes apart at each size, moved by up
    // to 150% between full runs; the p95s themselves are in the table below.
    const growth = round(call.api.p50Ms / first.calls[i].api.p50Ms, 2);
    const overRaw = round(call.api.p95Ms / call.raw.p95Ms, 2);
    ratios.push({
      name: `console: ${call.name}: p50 ${b} / ${a}`,
      value: growth,
      target: null,
      kind: 'info',
      note: `raw ${round(call.raw.p50Ms / first.calls[i].raw.p50Ms, 2)}; p95 ${round(call.api.p95Ms / first.calls[i].api.p95Ms, 2)}`,
    });
    ratios.push({
      name: `console: ${call.name}: api / raw p95 at ${b}`,
      value: overRaw,
      target: null,
      kind: 'info',
      note: 'API overhead over the same queries',
    });
  }
  const cells = (c) => [c.api.p50Ms, c.api.p95Ms, c.raw.p50Ms, c.raw.p95Ms].map((x) => String(x).padStart(7)).join(' ');
  const width = Math.max(...last.calls.map((c) => c.name.length));
  const header = `${'delivery-log call (ms)'.padEnd(width)}  ${bySize.map((s) => `${sizeName(s.size).padStart(7)} api p50     p95 raw p50     p95`).join('  |')}`;
  const rows = last.calls.map((c, i) => `${c.name.padEnd(width)}  ${bySize.map((s) => `        ${cells(s.calls[i])}`).join('  |')}`);
  const details = bySize.map((s) => ({ events: s.size, calls: s.calls }));
  return { results: [], ratios, notes: [[header, ...rows].join('\n')], details: { bySize: details, pageMs } };
}
