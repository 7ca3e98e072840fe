// Shared set-up steps of `npm run dev`, `npm test` and `npm run bench` (Node built-ins only: runs before npm install).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureNodeRuntime } from './stack/binaries.mjs';
import { NODE_RUNTIME } from './stack/common.mjs';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The Node.js major the servers, jest and the bench run on (package.json `engines`; Node 20 is past its end of life). */
const NODE_MAJOR = 24;

/**
 * Puts the calling script (dev, test, bench) on Node.js 24: with a machine `node` of 24 or newer it returns at once;
 * with an older one it fetches the pinned Node 24 into the cache (scripts/stack/binaries.mjs) and runs the script
 * again on it, taking over that run's exit: it never returns. Everything the script spawns with process.execPath (tsc,
 * jest, api, worker, seed, and the processes tests start) then runs on Node 24 too. Call it before anything else, so
 * the signal handlers, timers and servers are the second run's alone.
 */
export async function runOnNode24() {
  if (Number(process.versions.node.split('.')[0]) >= NODE_MAJOR) {
    console.log(`setup: Node ${process.versions.node} from ${process.execPath}`);
    return;
  }
  const node = await ensureNodeRuntime((m) => console.log(m));
  console.log(`setup: the machine's node is ${process.version}, older than ${NODE_MAJOR}: handing over to Node ${NODE_RUNTIME.version}`);
  // In a process group of its own, where signals come from us only, as the terminal's would: a Ctrl-C reaches npm and
  // us, and npm forwards it to us too. The first of each kind goes to the whole group (the script, and what it runs in
  // the foreground: npm install, tsc, jest, the dev api and worker), a repeat to the script alone, as before the handover.
  const child = spawn(node, [...process.execArgv, process.argv[1], ...process.argv.slice(2)], { stdio: 'inherit', detached: true });
  const sent = new Set();
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, () => {
      if (sent.has(signal)) child.kill(signal);
      else process.kill(-child.pid, signal);
      sent.add(signal);
    });
  }
  const [code, signal] = await once(child, 'exit');
  if (signal) {
    // Ended by a signal: end the same way, as npm reports it.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  }
  process.exit(code ?? 1);
}

/** Runs a command to its end without blocking the event loop, so other set-up (fetching the servers) goes on beside it. */
export function run(cmd, args, opts = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: repoRoot, stdio: 'inherit', ...opts });
    child.once('error', (err) => reject(new Error(`${cmd} ${args.join(' ')} could not start: ${err.message}`)));
    child.once('exit', (code, signal) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')} failed (exit ${code ?? signal})`))));
  });
}

/**
 * The set-up `npm run dev`, `npm test` and `npm run bench` share: dependencies from the lock, then the build, while
 * `alongside` (fetching or building the servers' binaries) runs beside them. Resolves to `alongside`'s result.
 */
export async function prepare(log, alongside = async () => undefined) {
  const started = Date.now();
  const side = alongside();
  side.catch(() => {}); // awaited below; a failure must not surface as unhandled while npm runs
  await ensureDependencies(log);
  await build(log);
  const result = await side;
  log(`setup: ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return result;
}

/**
 * Installs from package-lock.json on a fresh clone, or when the lock changed since the last install.
 * `npm install`, not `npm ci`: npm 11.19 writes locks without other platforms' optional packages
 * (@swc/core-darwin-*, …) and then its own `npm ci` rejects them as out of sync; `npm install` installs
 * the locked versions and leaves the lock as it is.
 */
export async function ensureDependencies(log = console.log) {
  const marker = path.join(repoRoot, 'node_modules', '.package-lock.json');
  const lock = path.join(repoRoot, 'package-lock.json');
  if (existsSync(marker) && statSync(marker).mtimeMs >= statSync(lock).mtimeMs) return;
  log('setup: installing dependencies from package-lock.json (npm install)...');
  const started = Date.now();
  // The npm that started us (`npm test` names its CLI in npm_execpath) runs on our node, so on Node 24 after the
  // handover (whose `engines` it then meets); started without npm, the one on PATH.
  const npmCli = process.env.npm_execpath?.endsWith('npm-cli.js') ? process.env.npm_execpath : null;
  await (npmCli ? run(process.execPath, [npmCli, 'install', '--no-audit', '--no-fund']) : run('npm', ['install', '--no-audit', '--no-fund']));
  log(`setup: dependencies installed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** Type-checks and compiles to dist/ (a type error fails the command). */
export async function build(log = console.log) {
  log('setup: compiling TypeScript (tsc)...');
  const started = Date.now();
  await run(process.execPath, [path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json']);
  log(`setup: compiled in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/**
 * The house style, checked (biome.json: Biome's formatter, 160 columns, and its linter): `npm test` runs it after the
 * build and stops on a finding. `npx biome check --write .` fixes what it can.
 */
export async function lint(log = console.log) {
  log('setup: checking format and lint (biome ci)...');
  const started = Date.now();
  try {
    await run(process.execPath, [path.join(repoRoot, 'node_modules', '@biomejs', 'biome', 'bin', 'biome'), 'ci', '--error-on-warnings', '.']);
  } catch {
    throw new Error(
      'The formatter or the linter found problems (listed above). Fix them with `npx biome check --write .` (and by hand for what it cannot fix), then run npm test again.',
    );
  }
  log(`setup: style checked in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/**
 * Node flags each entry runs with, wherever it runs (dev, tests, bench; docker-compose.yml and `npm run start:worker`
 * spell the same; node refuses them in NODE_OPTIONS). The worker collects garbage on its own thread: it shares its cores with the database and Temporal
 * (here, and on one docker-compose host), where V8's parallel collector threads waited for CPU that the other
 * servers held; measured: the worker's CPU per delivered webhook -17..20% (README, Benchmarks).
 */
export const NODE_FLAGS_OF = { 'worker/main.js': ['--single-threaded-gc'] };

/**
 * Starts a node entry from dist/ with the given environment and its NODE_FLAGS_OF (plus `nodeArgs`); output is
 * inherited, or piped with `pipe` (true: stdout and stderr; 'stdout': stdout only).
 */
export function startNode(entry, env, name, { pipe = false, nodeArgs = [] } = {}) {
  const child = spawn(process.execPath, [...(NODE_FLAGS_OF[entry] ?? []), ...nodeArgs, path.join(repoRoot, 'dist', entry)], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ['ignore', pipe ? 'pipe' : 'inherit', pipe === true ? 'pipe' : 'inherit'],
  });
  child.name = name;
  return child;
}

/**
 * SIGTERM, then SIGKILL after `ms`. Resolves when the process has exited. `group`: the child leads a process group of
 * its own (spawned `detached`): each signal goes to the whole group, and once the child has exited what is left of
 * the group is killed, so nothing it started (a test's own api or worker processes) outlives it.
 */
export function stopChild(child, ms = 15000, { group = false } = {}) {
  const signal = (name) => {
    try {
      if (group) process.kill(-child.pid, name);
      else child.kill(name);
    } catch {
      // gone already (ESRCH)
    }
  };
  if (!child || child.exitCode !== null || child.signalCode !== null) {
    if (child && group) signal('SIGKILL');
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const timer = setTimeout(() => signal('SIGKILL'), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      if (group) signal('SIGKILL');
      resolve();
    });
    signal('SIGTERM');
  });
}

export async function waitForHttp(url, { timeoutMs = 120000, ok = (res) => res.status === 200 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      if (ok(res)) return;
      last = `${res.status} ${await res.text()}`;
    } catch (err) {
      last = err.message;
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error(`${url} did not become ready in ${timeoutMs / 1000} s (last answer: ${last})`);
}

/**
 * DATA_ENCRYPTION_KEYS for a local run: the shell's value if set; else the one kept in `file` (created on first
 * use, mode 0600), so data encrypted by earlier `npm run dev` runs stays readable; with no file, a fresh key.
 */
export function devDataKeys(file) {
  if (process.env.DATA_ENCRYPTION_KEYS) return process.env.DATA_ENCRYPTION_KEYS;
  if (file && existsSync(file)) return readFileSync(file, 'utf8').trim();
  const keys = `dev1:${randomBytes(32).toString('base64')}`;
  if (file) {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${keys}\n`, { mode: 0o600 });
  }
  return keys;
}
