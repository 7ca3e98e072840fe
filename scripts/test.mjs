// `npm test`: install, type-check and build, start a private stack on free ports (or use MONGO_URL /
// TEMPORAL_ADDRESS), start a worker, run the whole jest suite, then the fault scenarios (test/*.scenario.ts) and
// the index check of every query the run sent, stop everything, print a summary (what failed, last), exit with jest's code.
// Safe to run while `npm run dev` is running: nothing is shared but the binaries.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { devDataKeys, lint, prepare, repoRoot, runOnNode24, startNode, stopChild } from './setup.mjs';
import { embeddedStoreAvailable, ensureBinaries, reapAbandonedStacks, startStack, stopStack, stopStacksWithin } from './stack.mjs';
import { ensureChromium } from './stack/chromium.mjs';
import { ensureKafka } from './stack/kafka.mjs';
import { ensurePrometheus } from './stack/prometheus.mjs';
import { ensureRabbitmq } from './stack/rabbitmq.mjs';
import { ensureTemporalTestServer } from './stack/temporal-test-server.mjs';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';

// Node 24, fetched when the machine's node is older: the rest of this file runs there.
await runOnNode24();

const runId = `${Date.now().toString(36)}-${process.pid}`;
const stateDir = path.join(repoRoot, '.devstack', `test-${runId}`);
const log = (msg) => console.log(`test: ${msg}`);
let worker;
/** The jest run in progress: stopped with its whole process group when this run is interrupted. */
let jest;
/** Each jest run's results (its --json output), summed up as the run's last lines: CI keeps only the end of a log. */
const outcomes = [];

async function cleanup() {
  await stopChild(jest, 10000, { group: true });
  await stopChild(worker);
  // Idempotent: also stops servers of a start that was interrupted before it returned.
  await stopStack({ stateDir, log: (m) => console.log(m) }).catch((err) => console.error(`test: ${err.message}`));
  // Stacks that tests started inside the run's folder (test/database-crash.test.ts), if a test could not stop its own.
  await stopStacksWithin(stateDir, (m) => console.log(m)).catch((err) => console.error(`test: ${err.message}`));
  rmSync(stateDir, { recursive: true, force: true });
}

async function main() {
  // The servers, and what single tests start, are fetched into the cache beside npm install and tsc, in this order
  // (the package steps share apt): the message brokers test/brokers.test.ts starts, the Prometheus
  // test/metrics.test.ts scrapes with, the Chromium test/console.test.ts drives, and Temporal's time-skipping test
  // server that test/time-skipping.test.ts runs the multi-day timers on.
  const say = (m) => console.log(m);
  await prepare(log, async () => {
    await ensureBinaries({ log: say });
    await ensureRabbitmq({ log: say });
    await ensureKafka({ log: say });
    await ensurePrometheus({ log: say });
    await ensureChromium({ log: say });
    await ensureTemporalTestServer({ log: say });
  });
  await lint(log);
  await reapAbandonedStacks({ parentDir: path.dirname(stateDir), prefix: 'test-', log: (m) => console.log(m) });
  const stack = await startStack({ stateDir, ui: false, persist: false, supervise: true, log: (m) => console.log(m) });
  const env = {
    MONGO_URL: stack.mongoUrl,
    TEMPORAL_ADDRESS: stack.temporalAddress,
    MONGO_DB: `hb_test_${runId.replace(/-/g, '_')}`,
    TEMPORAL_TASK_QUEUE: `hb-test-${runId}`,
    LOG_LEVEL: process.env.LOG_LEVEL || 'warn',
    // A day of activate_by waits lasts ~8.6 s, so a test can watch an order dispatch on tomorrow's date.
    LAB_ACTIVATION_TIME_SCALE: '0.0001',
    HB_TEST_STATE_DIR: stateDir,
    // A fresh key per run (the database is fresh too), unless the shell sets one.
    DATA_ENCRYPTION_KEYS: devDataKeys(null),
    // Every process of the run records the shape of each query it sends; the check after the suite
    // (test/query-shapes.after-suite.ts) holds them against the declared indexes.
    MONGO_QUERY_SHAPE_LOG: path.join(stateDir, 'query-shapes'),
    // Workers of the run (the shared one, crash tests' own) serve their metrics on free ports, not on one fixed port.
    WORKER_METRICS_PORT: '0',
    // The tests' webhook receivers and fakes listen on 127.0.0.1 (the service refuses loopback targets unless told).
    WEBHOOK_ALLOW_LOOPBACK: 'true',
    // The shared worker's sweep looks every 5 s (a deployment's: every minute), so tests that leave a publish
    // half-done see it repaired in seconds.
    WEBHOOK_SWEEP_INTERVAL_MS: '5000',
  };
  Object.assign(process.env, env);
  worker = startNode('worker/main.js', env, 'worker');
  await waitForWorker(env);
  log(`stack ready (mongo ${stack.mongoUrl}, temporal ${stack.temporalAddress}; ${Object.values(stack.versions).join('; ')}); running jest...`);
  const args = process.argv.slice(2);
  const selection = [];
  if (!embeddedStoreAvailable()) {
    // These start private stacks of the embedded store (whatever MONGO_URL says) and kill its servers.
    log('the embedded PostgreSQL + DocumentDB store cannot start here (mongod on PATH, or not installed and not root):');
    log('  test/database-crash.test.ts and test/stack-cleanup.test.ts, which test that store itself, are left out of this run');
    selection.push('--testPathIgnorePatterns', 'test/database-crash\\.test\\.ts', 'test/stack-cleanup\\.test\\.ts');
  }
  const code = await runJest('suite', ['--ci', ...selection, ...args]);
  // The index check needs the queries of the whole suite: after a full run only (a failed run still gets it).
  if (args.length) return code;
  // Scenarios that kill servers of a stack of their own, or run the README's commands on fresh copies, and load the
  // machine for minutes: a jest run of their own, one file at a time.
  // They kill PostgreSQL under FerretDB, so they need the embedded store (left out with the tests above otherwise).
  let scenarios = 0;
  if (embeddedStoreAvailable()) {
    log('running the scenarios (test/*.scenario.ts: recovery from faults, the README commands on fresh copies)...');
    scenarios = await runJest('scenarios', ['--ci', '--runInBand', '--testMatch', '**/test/*.scenario.ts']);
  }
  log('checking every query the suite sent against the declared indexes...');
  const shapes = await runJest('index check', ['--ci', '--testMatch', '**/test/query-shapes.after-suite.ts']);
  return code || scenarios || shapes;
}

function runJest(name, args) {
  const jestBin = path.join(repoRoot, 'node_modules', 'jest', 'bin', 'jest.js');
  const outputFile = path.join(stateDir, `jest-${name.replace(/\W+/g, '-')}.json`);
  return new Promise((resolve) => {
    // A process group of its own: interrupted (Ctrl-C, SIGTERM), cleanup stops jest, its workers and every process a
    // test file started, before the stack goes (else they are left running against a stack that is gone).
    const child = spawn(process.execPath, [jestBin, ...args, '--json', `--outputFile=${outputFile}`], {
      cwd: repoRoot,
      stdio: 'inherit',
      env: process.env,
      detached: true,
    });
    jest = child;
    child.once('exit', (c, signal) => {
      const code = c ?? (signal ? 1 : 0);
      outcomes.push({ name, code, results: existsSync(outputFile) ? JSON.parse(readFileSync(outputFile, 'utf8')) : null });
      resolve(code);
    });
  });
}

/** One line per jest run (passed of total), then one per failed test or file that could not run, with its error's first lines. */
function summary() {
  const lines = [];
  // The error's first lines (message, expected, received) up to its stack, on one line.
  const firstLines = (text) => {
    const lines = String(text ?? '')
      .replace(/\u001b\[[0-9;]*m/g, '')
      .split('\n')
      .map((l) => l.trim());
    const end = lines.findIndex((l) => l.startsWith('at '));
    return lines
      .slice(0, end < 0 ? undefined : end)
      .filter(Boolean)
      .slice(0, 4)
      .join(' / ')
      .slice(0, 400);
  };
  for (const { name, code, results } of outcomes) {
    if (!results) {
      lines.push(`${name}: exited with code ${code} before writing its results`);
      continue;
    }
    lines.push(
      `${name}: ${results.numPassedTests.toLocaleString('en')} of ${results.numTotalTests.toLocaleString('en')} tests passed${results.numPendingTests ? `, ${results.numPendingTests.toLocaleString('en')} skipped` : ''}${results.numRuntimeErrorTestSuites ? `, ${results.numRuntimeErrorTestSuites} file(s) could not run` : ''}${code ? ` (exit code ${code})` : ''}`,
    );
    for (const file of results.testResults) {
      const where = path.relative(repoRoot, file.name);
      const failed = file.assertionResults.filter((a) => a.status === 'failed');
      for (const a of failed) lines.push(`  FAILED ${where} › ${a.fullName}: ${firstLines(a.failureMessages[0])}`);
      if (file.status === 'failed' && !failed.length) lines.push(`  FAILED ${where}: ${firstLines(file.message)}`);
    }
  }
  return lines;
}

/** Tests start workflows at once: wait until the worker polls its task queue (bundling takes seconds). */
async function waitForWorker(env) {
  const require = createRequire(import.meta.url);
  const { connectTemporal, temporalReadiness } = require(path.join(repoRoot, 'dist', 'lib', 'platform', 'temporal.js'));
  const temporal = await connectTemporal(env.TEMPORAL_ADDRESS, 'default', env.TEMPORAL_TASK_QUEUE);
  const deadline = Date.now() + 120000;
  try {
    while (!(await temporalReadiness(temporal)).worker) {
      if (worker.exitCode !== null) throw new Error(`the worker exited (code ${worker.exitCode}) before polling`);
      if (Date.now() > deadline) throw new Error('the worker did not poll its task queue within 120 s');
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    await temporal.connection.close();
  }
}

let exitCode = 1;
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, async () => {
    await cleanup();
    process.exit(130);
  });
}
try {
  exitCode = await main();
} catch (err) {
  console.error(`test: ${err.message}`);
  exitCode = 1;
} finally {
  await cleanup();
}
for (const line of summary()) log(line);
process.exit(exitCode);
