// The system under test for `npm run bench`: a private stack (or MONGO_URL / TEMPORAL_ADDRESS), the real
// worker and API processes from dist/, a seeded tenant, and a database handle for the raw-driver baselines.
// Everything started here is stopped by `env.cleanup()`, which is safe to call more than once.
import { fork } from 'node:child_process';
import { rmSync } from 'node:fs';
import readline from 'node:readline';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { devDataKeys, repoRoot, startNode, stopChild, waitForHttp } from '../setup.mjs';
import { freePort, reapAbandonedStacks, startStack, stopStack } from '../stack.mjs';

/** Imports a compiled module from dist/ (CommonJS; its named exports are available). */
export const distModule = (rel) => import(pathToFileURL(path.join(repoRoot, 'dist', rel)).href);

/** Resolves when `child` has reported { port } over IPC; rejects if it exits first or takes over `ms`. */
function portMessage(child, name, ms = 20_000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not report its port within ${ms / 1000} s`)), ms);
    child.once('message', (msg) => {
      clearTimeout(timer);
      resolve(msg.port);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited during start-up (${signal ?? `exit code ${code}`})`));
    });
  });
}

/**
 * Rejects when `child` exits; call it right after spawning (an exit before the listener would go unseen).
 * Raced against waits so a crashed server fails the run at once.
 */
function exitAsError(child, name) {
  const exited = new Promise((_, reject) => {
    child.once('exit', (code, signal) => reject(new Error(`${name} exited (${signal ?? `exit code ${code}`}); see its output above`)));
  });
  exited.catch(() => {}); // only an error while something waits on it
  return exited;
}

/**
 * The worker with its stdout piped (always drained, so it can never block): every JSON log line goes to the
 * `listeners` (parsed; e.g. the webhook suite counts the worker's lines), and lines at warn or above, the
 * sweeper's repairs and anything that is not JSON are printed as before.
 */
function startWorker(childEnv, listeners, nodeArgs = []) {
  const child = startNode('worker/main.js', childEnv, 'worker', { pipe: 'stdout', nodeArgs });
  readline.createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => {
    let entry = null;
    if (line.startsWith('{')) {
      try {
        entry = JSON.parse(line);
      } catch {
        entry = null;
      }
    }
    if (!entry) {
      process.stdout.write(`${line}\n`);
      return;
    }
    if (entry.level >= 40 || /sweeper/.test(entry.msg ?? '')) process.stdout.write(`worker: ${line}\n`);
    for (const fn of listeners) {
      try {
        fn(entry);
      } catch {
        // a listener's bug must not stop the drain
      }
    }
  });
  return child;
}

async function databaseKind(db, external) {
  try {
    const info = await db.admin().command({ buildInfo: 1 });
    const kind = info.ferretdb?.version ? `FerretDB ${info.ferretdb.version} on PostgreSQL + DocumentDB` : `MongoDB ${info.version}`;
    return external ? `${kind}, external (MONGO_URL)` : kind;
  } catch (err) {
    return `unknown (${err.message})`;
  }
}

/**
 * Starts everything. Options: runId, log, cpuProfileDir (start `cpuProfileProcess`, 'api' or 'worker', with
 * --cpu-prof into that directory),
 * workerLogLevel (LOG_LEVEL of the worker, default warn),
 * extraEnv (more environment of the api and the worker, e.g. PROVIDER_<SLUG>_BASE_URL of fakes a suite started),
 * onCleanup(cleanup) (called at once with the cleanup function, for signal handlers).
 * Returns { runId, stateDir, apiUrl, constantUrl, mongoUrl, dbName, db, repos, tenant, dbKind, children,
 * childEnv (the servers' environment), moreApiEnv(more) (that of one more api process), stackPids ({ mongo, temporal } of a private stack),
 * onWorkerLog(fn) (each parsed worker log line; returns an unsubscribe function), cleanup }.
 */
export async function startEnvironment({
  runId,
  log = console.log,
  cpuProfileDir = null,
  cpuProfileProcess = 'api',
  workerLogLevel = 'warn',
  extraEnv = {},
  onCleanup = () => {},
}) {
  const stateDir = path.join(repoRoot, '.devstack', `bench-${runId}`);
  const env = { runId, stateDir, children: {}, workerLogLevel, dbName: `hb_bench_${runId.replace(/-/g, '_')}` };
  const workerLogListeners = new Set();
  env.onWorkerLog = (fn) => {
    workerLogListeners.add(fn);
    return () => workerLogListeners.delete(fn);
  };
  let mongo = null;
  let cleaning = null;

  env.cleanup = () =>
    (cleaning ??= (async () => {
      const step = async (what, fn) => {
        try {
          await fn();
        } catch (err) {
          log(`bench: cleanup: ${what} failed: ${err.message}`);
        }
      };
      // Reverse start order: the API first, so nothing uses the database while it goes away.
      for (const name of ['api', 'constant', 'worker']) {
        if (env.children[name]) await step(`stopping ${name}`, () => stopChild(env.children[name]));
      }
      if (mongo) {
        // A private stack's database disappears with its state dir; an external one must not keep our data.
        if (process.env.MONGO_URL) await step('dropping the bench database', () => mongo.db.dropDatabase());
        await step('closing the database client', () => mongo.close());
      }
      // Also when start-up was interrupted: stopStack reads the pids startStack recorded (none: no-op).
      await step('stopping the stack', () => stopStack({ stateDir, log: (m) => log(m) }));
      rmSync(stateDir, { recursive: true, force: true });
    })());
  onCleanup(env.cleanup); // before anything starts: a Ctrl-C during start-up must find it

  try {
    await reapAbandonedStacks({ parentDir: path.dirname(stateDir), prefix: 'bench-', log });
    const stack = await startStack({ stateDir, ui: false, persist: false, log });
    env.mongoUrl = stack.mongoUrl;
    const apiPort = await freePort();
    const childEnv = {
      MONGO_URL: stack.mongoUrl,
      TEMPORAL_ADDRESS: stack.temporalAddress,
      WORKER_METRICS_PORT: '0', // beside a dev worker on the default port
      MONGO_DB: env.dbName,
      TEMPORAL_TASK_QUEUE: `hb-bench-${runId}`,
      LOG_LEVEL: 'warn',
      // The seeded team is sandbox/us: pin the deployment to match whatever the shell says.
      DEPLOYMENT_ENVIRONMENT: 'sandbox',
      DEPLOYMENT_REGION: 'us',
      API_HOST: '127.0.0.1',
      API_PORT: String(apiPort),
      // A suite may start more api replicas on the same port (phones: one per core), as one host runs them.
      API_REUSE_PORT: 'true',
      PUBLIC_BASE_URL: `http://127.0.0.1:${apiPort}`,
      DATA_ENCRYPTION_KEYS: devDataKeys(null),
      // The bench's webhook receivers listen on 127.0.0.1.
      WEBHOOK_ALLOW_LOOPBACK: 'true',
      ...extraEnv,
    };
    env.apiUrl = `http://127.0.0.1:${apiPort}`;
    env.childEnv = childEnv;
    // The environment of an api process a suite starts beside the bench's api (replicas, fresh processes to measure):
    // the bench's api holds the MLLP listener's port (LAB_MLLP_PORT, set by the lab-mllp suite), so theirs is any free one.
    env.moreApiEnv = (more = {}) => ({ ...childEnv, ...(childEnv.LAB_MLLP_PORT ? { LAB_MLLP_PORT: '0' } : {}), ...more });
    env.stackPids = { ...(stack.pids ?? {}) };

    const profileArgs = (name) => (cpuProfileDir && cpuProfileProcess === name ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfileDir}`] : []);
    // BENCH_WORKER_NODE_OPTIONS: node options for the worker alone (e.g. a capped heap, --max-old-space-size=192).
    const workerNodeOptions = process.env.BENCH_WORKER_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_WORKER_NODE_OPTIONS } : {};
    env.children.worker = startWorker({ ...childEnv, ...workerNodeOptions, LOG_LEVEL: workerLogLevel }, workerLogListeners, profileArgs('worker'));
    const workerExit = exitAsError(env.children.worker, 'the worker process');
    env.children.api = startNode('api/main.js', childEnv, 'api', { nodeArgs: profileArgs('api') });
    const apiExit = exitAsError(env.children.api, 'the api process');
    env.children.constant = fork(path.join(repoRoot, 'scripts', 'bench', 'constant-server.mjs'), [], {
      cwd: repoRoot,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const constantPort = await portMessage(env.children.constant, 'the constant-route server');
    env.constantUrl = `http://127.0.0.1:${constantPort}`;

    log(`bench: waiting for ${env.apiUrl}/ready (api, worker, database, Temporal)...`);
    await Promise.race([waitForHttp(`${env.apiUrl}/ready`), apiExit, workerExit]);

    // Seed through the repositories, as test/support/harness.ts createTenant does.
    const { connectMongo } = await distModule('lib/platform/database/mongo.js');
    const { createRepositories, ensureIndexes } = await distModule('lib/repositories.js');
    const { FieldCipher } = await distModule('lib/platform/field-encryption.js');
    mongo = await connectMongo(stack.mongoUrl, env.dbName);
    env.db = mongo.db;
    env.client = mongo.client;
    const repos = createRepositories(mongo.db, FieldCipher.fromSpec(childEnv.DATA_ENCRYPTION_KEYS));
    await ensureIndexes(repos);
    env.repos = repos;
    env.tenant = await createTenant(repos, 'Bench org');
    env.dbKind = await databaseKind(mongo.db, Boolean(process.env.MONGO_URL));
    env.temporalAddress = stack.temporalAddress;
    return env;
  } catch (err) {
    await env.cleanup();
    throw err;
  }
}

/**
 * An organisation with one sandbox team and its key. A suite whose events go to every team of its organisation (a
 * lab's results nobody ordered: every team gets the review) takes one of its own, away from the teams and endpoints
 * the suites before it left in the bench's.
 */
export async function createTenant(repos, name) {
  const org = await repos.tenancy.createOrg(name);
  const team = await repos.tenancy.createTeam(org._id, `${name} team`, 'sandbox', 'us');
  const key = await repos.tenancy.createTeamApiKey(team, 'bench');
  return { orgId: org._id, teamId: team._id, teamKey: key.value };
}

export function machineInfo() {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model?.trim() ?? 'unknown',
    memoryGb: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    node: process.version,
    loadAverage: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
}
