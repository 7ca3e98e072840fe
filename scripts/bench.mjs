// `npm run bench`: throughput and latency of the API's user endpoints, each against a baseline measured
// in the same run (a plain Koa route; the raw MongoDB driver on the same database). A report, not a
// test: it exits 0 when a target is missed and non-zero only when it could not run.
//
// Installs, builds and fetches the servers like `npm test` (a fresh clone needs no other step), starts a private stack on free ports (or uses MONGO_URL / TEMPORAL_ADDRESS),
// the real worker and API processes, seeds a tenant, runs the suites in scripts/bench/, prints a
// table and writes .devstack/bench-results.json. Everything it started is stopped, also on failure and Ctrl-C.
//
//   BENCH_CONCURRENCY=32  closed-loop workers per scenario
//   BENCH_SECONDS=5       measurement window per scenario (after BENCH_WARMUP_SECONDS=1 of warm-up)
//   BENCH_SETTLE_SECONDS=60  at most this long between suites waiting for the cpus to be at most 15% busy (printed)
//   BENCH_CPU_PROF=1      run the API with --cpu-prof and print where its CPU time went (=worker: the worker)
//   BENCH_SUITES=users,webhooks,lab,wearables,pipelines,console,timeseries-memory,lab-mllp,phones,provider-budgets,providers  which suites to run
//                         (default all); the webhook, lab, pipeline, delivery-log page and real-provider suites' own
//                         settings (BENCH_WEBHOOK_*, BENCH_LAB_*, BENCH_PIPELINE_*, BENCH_CONSOLE_*, BENCH_PROVIDERS_*)
//                         are described in scripts/bench/webhooks.mjs, lab-orders.mjs, pipelines.mjs, console.mjs and
//                         providers.mjs (providers: a 90-day Oura pull of 100 users through the OAuth flow against the
//                         raw fetch of the same pages, and 500 WHOOP users under its 100 requests a minute; ~15 min)
//
// A suite is a module in scripts/bench/ exporting `async (env, { log }) => ({ results, ratios, notes?,
// details? })` (see users.mjs, webhooks.mjs), added to `allSuites` below. A suite that needs servers of its own seen
// by the api and the worker (providers: the provider fakes) has `beforeEnvironment({ log, onCleanup })`, run after the
// build, returning environment for them; what it registers with onCleanup runs after the environment has stopped.
import { rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureDependencies, prepare, repoRoot, runOnNode24 } from './setup.mjs';
import { ensureBinaries } from './stack.mjs';

// Node 24, fetched when the machine's node is older: the rest of this file runs there.
await runOnNode24();

// The suites import the project's dependencies (kafkajs, the mongodb driver, …), so they load once those are
// installed: `npm run bench` on a fresh clone installs, builds and fetches the servers first, like `npm run dev`.
const allSuites = [
  { name: 'users', module: './bench/users.mjs', run: 'userSuite' },
  { name: 'webhooks', module: './bench/webhooks.mjs', run: 'webhookSuite', checkSettings: 'webhookSettings' },
  { name: 'lab', module: './bench/lab-orders.mjs', run: 'labOrderSuite', checkSettings: 'labOrderSettings' },
  { name: 'wearables', module: './bench/wearables.mjs', run: 'wearableSuite', checkSettings: 'wearableSettings' },
  { name: 'pipelines', module: './bench/pipelines.mjs', run: 'pipelineSuite', checkSettings: 'pipelineSettings' },
  { name: 'console', module: './bench/console.mjs', run: 'consoleSuite', checkSettings: 'consoleSettings' },
  { name: 'timeseries-memory', module: './bench/timeseries-memory.mjs', run: 'timeseriesMemorySuite' },
  { name: 'lab-mllp', module: './bench/lab-mllp.mjs', run: 'labMllpSuite', checkSettings: 'labMllpSettings', beforeEnvironment: 'labMllpEnvironment' },
  { name: 'phones', module: './bench/phones.mjs', run: 'phoneSuite', checkSettings: 'phoneSettings' },
  { name: 'provider-budgets', module: './bench/provider-budgets.mjs', run: 'budgetSuite', checkSettings: 'budgetSettings' },
  // Last: its WHOOP connections go on pulling in the worker until everything stops.
  { name: 'providers', module: './bench/providers.mjs', run: 'providerSuite', checkSettings: 'providerSettings', beforeEnvironment: 'startProviderFakes' },
];
const wanted = (process.env.BENCH_SUITES || allSuites.map((s) => s.name).join(','))
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
const unknown = wanted.filter((name) => !allSuites.some((s) => s.name === name));
if (unknown.length || !wanted.length) {
  console.error(`bench: BENCH_SUITES=${process.env.BENCH_SUITES}: unknown suite(s) ${unknown.join(', ')}; known: ${allSuites.map((s) => s.name).join(', ')}`);
  process.exit(1);
}
const wantedSuites = allSuites.filter((s) => wanted.includes(s.name));

/** Each wanted suite's functions, from its module (after the dependencies are installed). */
async function loadSuites() {
  return Promise.all(
    wantedSuites.map(async (spec) => {
      const mod = await import(spec.module);
      const pick = (name) => name && mod[name];
      return { name: spec.name, run: pick(spec.run), checkSettings: pick(spec.checkSettings), beforeEnvironment: pick(spec.beforeEnvironment) };
    }),
  );
}

const runId = `${Date.now().toString(36)}-${process.pid}`;
const resultsFile = path.join(repoRoot, '.devstack', 'bench-results.json');
const profileDir = process.env.BENCH_CPU_PROF ? path.join(repoRoot, '.devstack', 'bench-profile') : null;
const profileProcess = process.env.BENCH_CPU_PROF === 'worker' ? 'worker' : 'api';
// A full run takes about an hour here (the provider suite alone ~15 min), and a cold build of the servers minutes more.
const OVERALL_TIMEOUT_MS = 120 * 60_000;
const log = (msg) => console.log(msg);

let env = null;
let stopEnvironment = null;
const suiteCleanups = [];
const cleanup = async () => {
  if (stopEnvironment) await stopEnvironment();
  for (const fn of suiteCleanups.splice(0)) {
    try {
      await fn();
    } catch (err) {
      console.error(`bench: cleanup: ${err.message}`);
    }
  }
};

async function abort(reason, code) {
  console.error(`bench: ${reason}; stopping everything...`);
  await cleanup();
  process.exit(code);
}
process.once('SIGINT', () => void abort('interrupted', 130));
process.once('SIGTERM', () => void abort('terminated', 143));
setTimeout(() => void abort(`not finished after ${OVERALL_TIMEOUT_MS / 60_000} min`, 1), OVERALL_TIMEOUT_MS).unref();

async function main() {
  await ensureDependencies(log);
  const { benchDefaults } = await import('./bench/load.mjs');
  const { computeRatios, formatReport, formatSummary, previousResults, summarizeCpuProfile, targetSummary, writeResults } = await import('./bench/report.mjs');
  const { machineInfo, startEnvironment } = await import('./bench/environment.mjs');
  const suites = await loadSuites();
  const config = benchDefaults(); // rejects bad BENCH_* values before any server starts
  for (const suite of suites) suite.checkSettings?.();
  await prepare(log, () => ensureBinaries({ log }));
  if (profileDir) rmSync(profileDir, { recursive: true, force: true });
  const machine = machineInfo();
  const startedAt = new Date().toISOString();
  const extraEnv = {};
  for (const suite of suites) Object.assign(extraEnv, await suite.beforeEnvironment?.({ log, onCleanup: (fn) => suiteCleanups.push(fn) }));
  env = await startEnvironment({
    runId,
    log,
    cpuProfileDir: profileDir,
    cpuProfileProcess: profileProcess,
    extraEnv,
    onCleanup: (fn) => (stopEnvironment = fn),
  });
  log(`bench: api ${env.apiUrl}, constant route ${env.constantUrl}, database ${env.dbKind}`);

  // The machine's own speed, so figures from different machines can be compared: plain HTTP POSTs of a small JSON
  // body to a constant Koa route, from this process (the same load generator every suite uses).
  const { httpClient, measure, settle } = await import('./bench/load.mjs');
  // Start-up (install, compile, the servers, the seed) and whatever ran just before must not count in the reference
  // or the first suite (a run that began on a busy machine measured the reference at 9,817 POSTs/s against ~22,600).
  await settle(log);
  const reference = httpClient(env.constantUrl);
  const machinePosts = await measure({
    name: 'machine reference: plain POST to a constant Koa route',
    ...config,
    seconds: 2,
    warmupSeconds: 0.5,
    log,
    fn: () => reference.expect(200, 'POST', '/constant', { body: { event_type: 'bench.reference', data: { n: 1 } } }),
  });
  reference.close();
  machine.plainPostsPerSecond = machinePosts.rps;
  log(`bench: this machine's plain POST rate: ${Math.round(machinePosts.rps)}/s (p99 ${machinePosts.p99Ms} ms), ${config.concurrency} concurrent`);

  const results = [machinePosts];
  const ratioSpecs = [];
  const suiteNotes = [];
  const details = {};
  const failedSuites = [];
  for (const [i, suite] of suites.entries()) {
    // The previous suite's work (the worker draining, the database checkpointing) must not count in this one's.
    if (i > 0) await settle(log);
    let out;
    try {
      out = await suite.run(env, { log });
    } catch (err) {
      // One suite's failure does not throw away the others' figures: it is reported, and the run exits non-zero.
      console.error(`bench: the ${suite.name} suite failed: ${err.message}`);
      failedSuites.push({ suite: suite.name, error: err.message });
      out = { results: [], ratios: [] };
    }
    results.push(...out.results);
    ratioSpecs.push(...out.ratios);
    suiteNotes.push(...(out.notes ?? []));
    if (out.details) details[suite.name] = out.details;
    for (const [name, child] of Object.entries(env.children)) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`the ${name} process exited during the ${suite.name} suite (${child.signalCode ?? `exit code ${child.exitCode}`})`);
      }
    }
  }
  machine.loadAverageAfter = os.loadavg().map((x) => Math.round(x * 100) / 100);
  const dbKind = env.dbKind;
  await cleanup(); // the API writes its CPU profile when it exits

  const ratios = computeRatios(ratioSpecs);
  const notes = [
    ...suiteNotes,
    `note: load generator, api, worker, database and Temporal all share these ${machine.cpus} cpus, and any other ` +
      `work on the machine (e.g. a concurrent test run) lowers the figures; compare the ratios, not absolute req/s.`,
  ];
  if (Math.max(machine.loadAverage[0], machine.loadAverageAfter[0]) > machine.cpus * 0.75) {
    notes.push(`note: the machine was busy with other work (1-min load average ${machine.loadAverage[0]} before the run).`);
  }
  console.log(formatReport({ results, ratios, machine, dbKind, config, notes }));

  let profile = null;
  if (profileDir) {
    profile = summarizeCpuProfile(profileDir);
    if (!profile) console.log(`\nbench: no CPU profile in ${profileDir} (the ${profileProcess} did not exit cleanly)`);
    else {
      console.log(
        `\n${profileProcess} CPU profile: busy ${profile.busyMs} ms of ${profile.totalMs} ms sampled (whole run, incl. start-up and the ` +
          `baseline scenarios, when it is idle); ${path.relative(repoRoot, profile.file)}`,
      );
      for (const t of profile.otherThreads) console.log(`  another thread of it: busy ${t.busyMs} ms; ${path.relative(repoRoot, t.file)}`);
      console.log('  self time by package (% of busy):');
      for (const p of profile.packages) console.log(`    ${String(p.pctOfBusy).padStart(5)}%  ${p.name}`);
      console.log('  self time by function (% of busy):');
      for (const f of profile.functions) console.log(`    ${String(f.pctOfBusy).padStart(5)}%  ${f.name}`);
    }
  }

  // Compared with the run before (its file, about to be replaced): do two runs in a row agree?
  const summary = { ...targetSummary(ratios, previousResults(resultsFile)), ...(failedSuites.length ? { failedSuites } : {}) };
  writeResults(resultsFile, {
    runId,
    startedAt,
    finishedAt: new Date().toISOString(),
    suites: suites.map((s) => s.name),
    config,
    machine: { ...machine, database: dbKind },
    scenarios: results,
    ratios,
    summary,
    ...(Object.keys(details).length ? { details } : {}),
    ...(profile ? { cpuProfile: { process: profileProcess, ...profile } } : {}),
  });
  console.log(formatSummary(summary));
  console.log(`\nbench: results written to ${path.relative(repoRoot, resultsFile)}`);
  if (failedSuites.length) {
    console.error(`bench: ${failedSuites.length} suite(s) failed, their figures are missing: ${failedSuites.map((f) => `${f.suite} (${f.error})`).join('; ')}`);
    return 1;
  }

  const empty = results.filter((r) => r.ok === 0);
  if (empty.length) {
    console.error(`bench: no successful request in: ${empty.map((r) => r.name).join(', ')}; the figures are meaningless`);
    return 1;
  }
  return 0;
}

let exitCode = 1;
try {
  exitCode = await main();
} catch (err) {
  console.error(`bench: ${err.message}`);
  exitCode = 1;
} finally {
  await cleanup();
}
process.exit(exitCode);
