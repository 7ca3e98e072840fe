// Lab order scenarios of `npm run bench`, each against a baseline measured in the same run:
//  - order creation (POST /v3/order: validation, workflow start, insert, response) against the raw work
//    underneath: the raw driver reading the user and inserting the same document, plus the Temporal client
//    starting a trivial workflow that a worker process runs to completion (target ratio); also reported
//    against the same with the workflow only started (a task queue no worker polls: the start-rate ceiling);
//  - GET /v3/orders at each size of BENCH_LAB_ORDERS (default 10,000 then 100,000 stored orders): the first
//    page of 50 with its count and a page mid-list reached by next_cursor, each alternately with the raw driver
//    making the same queries (one reader; no order of the page has a redraw, so no transaction query), and a
//    filtered page; the p99 growth from the smallest size to the largest.
//
//   BENCH_LAB_ORDERS=10000,100000 stored orders at which the list scenarios run
//   BENCH_LAB_LIST_CONCURRENCY=1  closed-loop readers for the filtered page (the alternating pairs have one)
//   BENCH_LAB_LIST_SECONDS=10     measurement window of each list scenario (a pair's: twice this, shared)
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { distModule } from './environment.mjs';
import { cpuMeter } from './webhook-measures.mjs';
import { httpClient, measure, measureAlternately, numberEnv, settle } from './load.mjs';

const SCRATCH_COLLECTION = 'bench_raw_lab_orders';
/**
 * Warm-up of every creation scenario (at least; BENCH_WARMUP_SECONDS when longer). The onset of a burst of orders
 * on an idle worker holds the requests then in flight for ~1.2 s, once (seen 1.5 s into a burst, with the worker
 * starting on its first order workflows; steady afterwards over 30 s); after a 1 s warm-up that one pause fell inside
 * the 5 s window in half the runs and was its p99. The baselines get the same warm-up.
 */
const CREATE_WARMUP_SECONDS = 3;
/** The api's id minting at a given time (lib/platform/keys.ts), loaded from the build with the suite. */
let timeOrderedNameBasedUuid;
/** The api's placer number of an order id (lib/labs/placer-number.ts), loaded likewise. */
let placerNumberOf;

export function labOrderSettings() {
  return {
    /** Stored orders at which the list is measured, ascending (the team grows from one to the next). */
    sizes: String(process.env.BENCH_LAB_ORDERS ?? '10000,100000')
      .split(',')
      .map((v) => Number(v.trim()))
      .map((n) => {
        if (!Number.isInteger(n) || n < 200)
          throw new Error(
            `BENCH_LAB_ORDERS: '${process.env.BENCH_LAB_ORDERS}' must be ascending whole numbers of at least 200, comma-separated (e.g. 10000,100000)`,
          );
        return n;
      })
      .sort((a, b) => a - b),
    listConcurrency: numberEnv('BENCH_LAB_LIST_CONCURRENCY', 1, { integer: true, min: 1 }),
    listSeconds: numberEnv('BENCH_LAB_LIST_SECONDS', 10, { min: 1 }),
  };
}

const orderBody = (userId, labTestId) => ({
  user_id: userId,
  order_set: { lab_test_ids: [labTestId] },
  patient_details: { first_name: 'Bench', last_name: 'Patient', dob: '1985-06-01', gender: 'female', phone_number: '+14155550100', email: 'bench@example.com' },
  patient_address: { first_line: '1 Bench St', city: 'San Francisco', state: 'CA', zip: '94105', country: 'US' },
  physician: { first_name: 'Ada', last_name: 'Lovelace', npi: '1234567893' },
  consents: [{ consentType: 'terms-of-use' }],
});

/**
 * A copy of a stored order with new ids, for seeding and for the raw insert baseline. Its id is minted at
 * `createdAt`, as the api mints an order's id when it creates it (timeOrderedUuid itself never goes back in time:
 * after the creation scenarios every backdated order would get an id of the present).
 */
function cloneOrder(template, teamId, i, createdAt = new Date()) {
  const id = timeOrderedNameBasedUuid(createdAt.getTime(), [randomUUID()]);
  return {
    ...template,
    _id: id,
    team_id: teamId,
    sample_id: `BENCH${String(i).padStart(10, '0')}-${id.slice(-12)}`, // the random end of a v7 id
    // Unique (an index), derived from the id as the api derives it (lib/labs/placer-number.ts).
    ...(template.placer_number ? { placer_number: placerNumberOf(id) } : {}),
    order_transaction_id: randomUUID(),
    details_id: randomUUID(),
    created_at: createdAt,
    updated_at: createdAt,
  };
}

/** A plan's nodes, outermost first: `Limit > Sort > Index Scan (team_id_1__id_-1)`. */
function planSummary(explain) {
  const nodes = [];
  const walk = (n) => {
    if (Array.isArray(n)) return n.forEach(walk);
    if (!n || typeof n !== 'object') return;
    if (typeof n['Node Type'] === 'string' && n['Node Type'] !== 'Custom Scan')
      nodes.push(n['Index Name'] ? `${n['Node Type']} (${n['Index Name']})` : n['Node Type']);
    if (typeof n.stage === 'string') nodes.push(n.indexName ? `${n.stage} (${n.indexName})` : n.stage);
    Object.values(n).forEach(walk);
  };
  walk(explain.queryPlanner ?? explain);
  return nodes.join(' > ') || 'unknown';
}

/** Waits (printing progress) until no order of the team is still waiting for its dispatch. */
async function drainOrderWorkflows(orders, teamId, log) {
  const deadline = Date.now() + 5 * 60_000;
  for (;;) {
    const pending = await orders.countDocuments({ team_id: teamId, low_level_status: 'ordered' });
    if (pending === 0) return;
    if (Date.now() > deadline) throw new Error(`${pending} orders still not dispatched after 5 min`);
    log(`bench: waiting for the worker to dispatch ${pending} new orders...`);
    await new Promise((r) => setTimeout(r, 3000));
  }
}

/** The worker of the trivial baseline workflow, in its own process (resolves once it polls). */
function startTrivialWorker(env, taskQueue) {
  const child = fork(path.join(path.dirname(fileURLToPath(import.meta.url)), 'trivial-worker.mjs'), [], {
    env: { ...process.env, TEMPORAL_ADDRESS: env.temporalAddress, TRIVIAL_TASK_QUEUE: taskQueue },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`the trivial-workflow worker exited (code ${code})`)));
  });
}

export async function labOrderSuite(env, { log = console.log, ...opts } = {}) {
  const settings = labOrderSettings();
  const api = httpClient(env.apiUrl, { headers: { 'x-service-api-key': env.tenant.teamKey } });
  const { connectTemporal } = await distModule('lib/platform/temporal.js');
  const { createIndexes } = await distModule('lib/platform/database/indexes.js');
  const { LAB_ORDER_INDEXES, LIST_PROJECTION } = await distModule('lib/labs/orders-store.js');
  ({ timeOrderedNameBasedUuid } = await distModule('lib/platform/keys.js'));
  ({ placerNumberOf } = await distModule('lib/labs/placer-number.js'));
  const temporal = await connectTemporal(env.temporalAddress, 'default', `bench-trivial-${env.runId}`);
  const scratch = env.db.collection(SCRATCH_COLLECTION);
  const orders = env.db.collection('lab_orders');
  const users = env.db.collection('users');
  try {
    const userId = (await api.expect(200, 'POST', '/v2/user/', { body: { client_user_id: `bench-patient-${env.runId}` }, json: true })).json.user_id;
    const tests = (await api.expect(200, 'GET', '/v3/lab_tests?status=active&collection_method=walk_in_test', { json: true })).json;
    const labTestId = tests[0].id;
    const body = orderBody(userId, labTestId);
    const first = (await api.expect(200, 'POST', '/v3/order', { body, json: true })).json.order;
    // As stored (patient data encrypted): the raw baseline inserts documents of the same size and shape.
    const template = await orders.findOne({ _id: first.id });
    // As the repository reads it: the list team's orders are stored through the repository, whose encryption
    // binds each order's patient data to its own id (a raw copy of `template` would not decrypt).
    const plainTemplate = await env.repos.labOrders.findById(first.id);

    await scratch.drop().catch(() => {});
    await createIndexes(scratch, LAB_ORDER_INDEXES.lab_orders);
    const results = {};
    // Where the time goes: CPU of each process during the creation scenarios.
    const pids = {
      bench: process.pid,
      api: env.children.api.pid,
      worker: env.children.worker.pid,
      ferretdb: env.stackPids?.mongo,
      postgres: env.stackPids?.postgres,
      temporal: env.stackPids?.temporal,
    };
    const createOpts = { ...opts, warmupSeconds: Math.max(opts.warmupSeconds ?? 0, CREATE_WARMUP_SECONDS) };
    const rawCreate = (name, taskQueue) =>
      measure({
        name,
        ...createOpts,
        log,
        fn: async ({ seq }) => {
          if ((await users.findOne({ _id: userId }))?.team_id !== env.tenant.teamId) throw new Error('user not found');
          const doc = cloneOrder(template, env.tenant.teamId, seq);
          await temporal.client.workflow.start('benchTrivialWorkflow', { workflowId: `bench-trivial:${doc._id}`, taskQueue, args: [] });
          await scratch.insertOne(doc);
        },
      });
    // Started only: no worker polls this queue, so this is the dev server's own start rate (the ceiling).
    results.rawStart = await rawCreate('raw user read + insert + workflow start (not run)', `${temporal.taskQueue}-unpolled`);
    // Started and run to completion by a worker process, as every order's workflow is.
    const trivialWorker = await startTrivialWorker(env, temporal.taskQueue);
    const rawCpu = cpuMeter({ ...pids, trivialWorker: trivialWorker.pid });
    try {
      results.rawCreate = await rawCreate('raw user read + insert + trivial workflow (run by a worker)', temporal.taskQueue);
      results.rawCreate.cpu = rawCpu();
    } finally {
      // Gone before the next meter starts: a child that exits between its two readings would count as negative time.
      const exited = trivialWorker.exitCode === null ? new Promise((resolve) => trivialWorker.once('exit', resolve)) : null;
      trivialWorker.kill('SIGTERM');
      await exited;
    }
    const createCpu = cpuMeter(pids);
    results.create = await measure({ name: 'order create (POST /v3/order)', ...createOpts, log, fn: () => api.expect(200, 'POST', '/v3/order', { body }) });
    results.create.cpu = createCpu();
    const cpuLine = (cpu) =>
      Object.entries(cpu)
        .filter(([k]) => k !== 'wallSeconds')
        .map(([k, v]) => `${k} ${v.pctOfOneCore}%`)
        .join(', ');
    log(`bench: CPU during the raw baseline (% of one core): ${cpuLine(results.rawCreate.cpu)}`);
    log(`bench: CPU during order creation (% of one core): ${cpuLine(results.create.cpu)}`);

    // The worker is still running the new orders' workflows: let it finish so the list is measured on its own.
    await drainOrderWorkflows(orders, env.tenant.teamId, log);

    // A team with `sizes[0]` orders, then grown to each next size: every size measures the first page (page +
    // count), a page reached by cursor (no count) and a filtered page, each against the raw driver's same queries.
    const listTeam = await env.repos.tenancy.createTeam(env.tenant.orgId, 'Bench list team', 'sandbox', 'us');
    const listKey = await env.repos.tenancy.createTeamApiKey(listTeam, 'bench');
    const lister = httpClient(env.apiUrl, { headers: { 'x-service-api-key': listKey.value }, timeoutMs: 120_000 });
    const listOpts = { ...opts, log, concurrency: settings.listConcurrency, seconds: settings.listSeconds, warmupSeconds: 0 };
    const listResults = [];
    const listRatios = [];
    // Orders one second apart, the newest now; their ids are time-ordered as the api mints them.
    const start = Date.now() - settings.sizes[settings.sizes.length - 1] * 1000;
    let stored = 0;
    for (const size of settings.sizes) {
      log(`bench: storing orders for the list scenarios: ${stored} -> ${size}...`);
      for (let i = stored; i < size; i += 500) {
        const chunk = Array.from({ length: Math.min(500, size - i) }, (_, j) =>
          cloneOrder(plainTemplate, listTeam._id, i + j, new Date(start + (i + j) * 1000)),
        );
        await Promise.all(chunk.map((doc) => env.repos.labOrders.insert(doc)));
        if ((i / 500) % 20 === 19) log(`bench:   ${i + chunk.length} / ${size}`);
      }
      stored = size;
      // The database's work after the inserts (autovacuum, checkpoints) must not fall into the next scenarios' windows.
      await settle(log);
      const middle = (
        await orders
          .find({ team_id: listTeam._id, _id: { $lt: '~' } }, { projection: { _id: 1 } })
          .sort({ _id: -1 })
          .skip(Math.floor(size / 2))
          .limit(1)
          .toArray()
      )[0]._id;
      const cursor = Buffer.from(JSON.stringify({ after: middle, total: size, page: 2 })).toString('base64url');
      // Each API page is measured alternately with the raw driver's same queries, in one window of both windows'
      // length: their latencies are taken at the same moments (see measureAlternately).
      const [rawList, list] = await measureAlternately({
        names: [`raw list: count, then first page of 50 by the _id walk (${size} orders)`, `GET /v3/orders (${size} orders)`],
        seconds: 2 * settings.listSeconds,
        log,
        fns: [
          // The same work as the repository: count, see that the matches are dense, walk the _id index.
          async () => {
            const filter = { team_id: listTeam._id };
            const total = await orders.countDocuments(filter);
            await orders.estimatedDocumentCount();
            const page = await orders
              .find({ ...filter, _id: { $lt: '~' } }, { projection: LIST_PROJECTION })
              .sort({ _id: -1 })
              .limit(51)
              .hint({ _id: 1 })
              .toArray();
            if (page.length !== 51 || total !== size) throw new Error(`raw list: ${page.length} of ${total}`);
          },
          () => lister.expect(200, 'GET', '/v3/orders?page=1&size=50'),
        ],
      });
      const [rawCursorPage, cursorPage] = await measureAlternately({
        names: [`raw list: a page of 50 mid-list by the _id walk (${size} orders)`, `GET /v3/orders?next_cursor= mid-list (${size} orders)`],
        seconds: 2 * settings.listSeconds,
        log,
        fns: [
          async () => {
            await orders.estimatedDocumentCount();
            const page = await orders
              .find({ team_id: listTeam._id, _id: { $lt: middle } }, { projection: LIST_PROJECTION })
              .sort({ _id: -1 })
              .limit(51)
              .hint({ _id: 1 })
              .toArray();
            if (page.length !== 51) throw new Error(`raw cursor page: ${page.length}`);
          },
          () => lister.expect(200, 'GET', `/v3/orders?size=50&next_cursor=${cursor}`),
        ],
      });
      const listByStatus = await measure({
        name: `GET /v3/orders?status=ordered&interpretation=unknown (${size} orders)`,
        ...listOpts,
        fn: () => lister.expect(200, 'GET', '/v3/orders?page=2&size=50&status=ordered&interpretation=unknown'),
      });
      listResults.push(rawList, list, rawCursorPage, cursorPage, listByStatus);
      // Where the time goes: the store's plan of each page query (DocumentDB: PostgreSQL plan nodes; MongoDB: stages).
      // The planner's own choice, and the `_id` walk the repository takes for a list this dense (pages.ts).
      for (const [label, filter] of [
        ['first page', { team_id: listTeam._id, _id: { $lt: '~' } }],
        ['cursor page', { team_id: listTeam._id, _id: { $lt: middle } }],
        ['status page', { team_id: listTeam._id, low_level_status: { $in: ['ordered'] }, interpretation: null, _id: { $lt: '~' } }],
      ]) {
        const own = await orders.find(filter).sort({ _id: -1 }).limit(51).explain('queryPlanner');
        const walk = await orders.find(filter).sort({ _id: -1 }).limit(51).hint({ _id: 1 }).explain('queryPlanner');
        log(`bench: plan of the ${label} at ${size} orders: planner's choice ${planSummary(own)}; the _id walk ${planSummary(walk)}`);
      }
      // One reader in a closed loop: its rate is 1 / latency, and at a few requests per window the rounded
      // req/s would hide the difference, so these ratios compare median latencies.
      const latencyRatio = (of, to, key) => (of[key] && to[key] ? Math.round((to[key] / of[key]) * 100) / 100 : null);
      listRatios.push(
        {
          name: `order list first page / raw driver page + count, p99 latency (${size} orders)`,
          value: latencyRatio(list, rawList, 'p99Ms'),
          target: 0.85,
        },
        { name: `order list first page / raw driver page + count, median latency (${size} orders)`, value: latencyRatio(list, rawList, 'p50Ms'), target: null },
        {
          name: `order list cursor page / raw driver page by _id, median latency (${size} orders)`,
          value: latencyRatio(cursorPage, rawCursorPage, 'p50Ms'),
          target: 0.5,
        },
      );
    }
    const [small, large] = [listResults.slice(0, 5), listResults.slice(-5)];
    if (settings.sizes.length > 1) {
      const growth = (a, b) => (a.p99Ms && b.p99Ms ? Math.round((b.p99Ms / a.p99Ms) * 10) / 10 : null);
      listRatios.push(
        {
          kind: 'target',
          name: `order list first page p99 growth ${settings.sizes[0]} -> ${stored} orders (raw driver: ${growth(small[0], large[0])}x)`,
          value: growth(small[1], large[1]),
          target: 2,
          atMost: true,
          unit: 'x',
        },
        {
          name: `order list cursor page p99 growth ${settings.sizes[0]} -> ${stored} orders (raw driver: ${growth(small[2], large[2])}x)`,
          value: growth(small[3], large[3]),
          target: null,
        },
      );
    }
    lister.close();
    return {
      results: [results.rawStart, results.rawCreate, results.create, ...listResults],
      ratios: [
        { name: 'order create / raw read + insert + trivial workflow', of: results.create, to: results.rawCreate, target: 0.5 },
        {
          kind: 'target',
          name: `order create p99 at ${results.create.concurrency ?? 'the bench'} concurrent`,
          value: results.create.p99Ms,
          target: 1000,
          atMost: true,
          unit: ' ms',
        },
        { name: 'order create / raw read + insert + start only', of: results.create, to: results.rawStart, target: null, note: 'against the bare start rate' },
        ...listRatios,
      ],
      notes: [
        `note: order creation runs while the worker executes each new order's workflow (announce, dispatch, events) on the same cores; ` +
          `the trivial-workflow baseline starts workflows no worker runs.`,
      ],
    };
  } finally {
    api.close();
    await scratch.drop().catch(() => {});
    await temporal.connection.close();
  }
}
