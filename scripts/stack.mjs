#!/usr/bin/env node
// The embedded dev stack: a real Temporal dev server and a real MongoDB-wire database
// (mongod if installed, else FerretDB on SQLite) on loopback, without Docker.
// See docs in the design notes (devstack.md). Node built-ins only: this runs before dependencies are installed
// may have finished and from CI on a fresh clone.
//
//   node scripts/stack.mjs ensure   locate or build the server binaries
//   node scripts/stack.mjs start    start the stack in the background (state in .devstack/)
//   node scripts/stack.mjs stop     stop it
//   node scripts/stack.mjs status   show stack.json and which pids are alive (exit 1 if not running)
//
// MONGO_URL / TEMPORAL_ADDRESS point at external servers instead of starting our own.

import { spawn, execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const TEMPORAL_VERSION = 'v1.5.1';
const FERRETDB_VERSION = 'v1.24.2';
const TEMPORAL_PKG = `github.com/temporalio/cli/cmd/temporal@${TEMPORAL_VERSION}`;
const FERRETDB_MODULE = `github.com/FerretDB/FerretDB@${FERRETDB_VERSION}`;
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;
const BUILD_TICK_MS = 20_000;
// Process names we are willing to signal: a pid from an old stack.json may have been reused.
const OUR_PROCESS = /ferretdb|temporal|mongod/;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

// ---------------------------------------------------------------------------------------------
// Binaries
// ---------------------------------------------------------------------------------------------

export function cacheDir() {
  if (process.env.HEALTHBRIDGE_CACHE_DIR) return path.resolve(process.env.HEALTHBRIDGE_CACHE_DIR);
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'healthbridge');
}

function isExecutable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

function which(cmd) {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, cmd))) return path.join(dir, cmd);
  }
  return null;
}

const temporalCachePath = () => path.join(cacheDir(), `temporal-${TEMPORAL_VERSION}`, 'temporal');
// The build carries one patch (see buildFerretdb); its name in the cache says so, so an unpatched build is not reused.
const FERRETDB_BUILD = `${FERRETDB_VERSION}-id-index`;
const ferretdbCachePath = () => path.join(cacheDir(), `ferretdb-${FERRETDB_BUILD}`, 'ferretdb');

/** Registered on the dev server; on a cluster, create them with `temporal operator search-attribute create` (README). */
export const TEMPORAL_SEARCH_ATTRIBUTES = ['HealthbridgeTeamId=Keyword', 'HealthbridgeUserId=Keyword', 'LabOrderStatus=Keyword'];

export async function ensureBinaries({ mongo = true, temporal = true, log = console.log } = {}) {
  const result = {};
  if (temporal && !process.env.TEMPORAL_ADDRESS) {
    result.temporalBin = which('temporal') || (await cachedOrBuild('temporal', temporalCachePath(), buildTemporal, log));
  }
  if (mongo && !process.env.MONGO_URL) {
    // Real MongoDB is always preferred over FerretDB.
    const mongod = which('mongod');
    if (mongod) result.mongodBin = mongod;
    else result.ferretdbBin = await cachedOrBuild('ferretdb', ferretdbCachePath(), buildFerretdb, log);
  }
  return result;
}

async function cachedOrBuild(name, target, build, log) {
  if (isExecutable(target)) return target;
  const goBin = which('go');
  if (!goBin) {
    throw new Error(
      `${name} ${name === 'temporal' ? TEMPORAL_VERSION : FERRETDB_VERSION} is not in the cache (${target}) ` +
        `and the Go toolchain is needed to build it once from the Go module proxy, but \`go\` is not on PATH.\n` +
        `Fix: install Go >= 1.25 (https://go.dev/dl/) and put it on PATH, then rerun \`node scripts/stack.mjs ensure\`` +
        (name === 'temporal'
          ? `; or put a \`temporal\` CLI on PATH; or set TEMPORAL_ADDRESS to use an existing Temporal server.`
          : `; or install \`mongod\`; or set MONGO_URL to use an existing MongoDB.`),
    );
  }
  return withBuildLock(log, async () => {
    // Another invocation may have built it while we waited for the lock.
    if (isExecutable(target)) {
      log(`[build ${name}] reusing ${target} (built by another process)`);
      return target;
    }
    const started = Date.now();
    const tmp = fs.mkdtempSync(path.join(cacheDir(), `.build-${name}-`));
    try {
      const built = await build({ goBin, tmp, log });
      fs.mkdirSync(path.dirname(target), { recursive: true });
      // Same filesystem (both inside the cache), so the binary appears atomically.
      fs.renameSync(built, target);
      log(`[build ${name}] done in ${Math.round((Date.now() - started) / 1000)} s: ${target}`);
      return target;
    } finally {
      rmrf(tmp);
    }
  });
}

async function buildTemporal({ goBin, tmp, log }) {
  log(
    `[build temporal] building Temporal CLI ${TEMPORAL_VERSION} (dev server + Web UI) from the Go module proxy.\n` +
      `[build temporal] A cold build takes several minutes and a few GB of memory; later builds reuse Go's caches.`,
  );
  const gobin = path.join(tmp, 'bin');
  fs.mkdirSync(gobin);
  await runGo('temporal', goBin, ['install', '-v', TEMPORAL_PKG], { cwd: tmp, env: { GOBIN: gobin } }, log);
  return path.join(gobin, 'temporal');
}

async function buildFerretdb({ goBin, tmp, log }) {
  log(
    `[build ferretdb] building FerretDB ${FERRETDB_VERSION} (MongoDB wire protocol on SQLite) from the Go module proxy.\n` +
      `[build ferretdb] A cold build takes several minutes; later builds reuse Go's caches.`,
  );
  const out = await runGo('ferretdb', goBin, ['mod', 'download', '-json', FERRETDB_MODULE], { cwd: tmp, quiet: true }, log);
  let info;
  try {
    info = JSON.parse(out);
  } catch {
    throw new Error(`[build ferretdb] unexpected output from go mod download:\n${out}`);
  }
  if (info.Error || !info.Dir) throw new Error(`[build ferretdb] go mod download failed: ${info.Error || 'no Dir'}`);
  // The module cache is read-only, and `go install ...@version` yields a binary that panics at start-up
  // because build/version/version.txt is generated, not in the module: build from a writable copy.
  const src = path.join(tmp, 'src');
  fs.cpSync(info.Dir, src, { recursive: true });
  chmodUserWritable(src);
  fs.mkdirSync(path.join(src, 'build', 'version'), { recursive: true });
  fs.writeFileSync(path.join(src, 'build', 'version', 'version.txt'), `${FERRETDB_VERSION}\n`);
  patchSqliteIdLookups(src);
  const bin = path.join(tmp, 'ferretdb');
  await runGo('ferretdb', goBin, ['build', '-v', '-o', bin, './cmd/ferretdb'], { cwd: src }, log);
  return bin;
}

/**
 * FerretDB v1's SQLite backend looks documents up by `_ferretdb_sjson->'$._id'` but builds its unique `_id`
 * index on `_ferretdb_sjson->"_id"`: the same value, yet SQLite's planner matches index expressions by their
 * text, so every `{_id}` find, and the write-back of every updated or deleted document, scanned the whole
 * table. Spelling the lookup as the index does (`->'_id'`, SQLite's label form of `$._id`) lets it use the
 * index, as MongoDB's `_id` lookups do. Results are unchanged; only the plan is.
 */
function patchSqliteIdLookups(src) {
  const file = path.join(src, 'internal', 'backends', 'sqlite', 'metadata', 'metadata.go');
  const before = `IDColumn = DefaultColumn + "->'$._id'"`;
  const text = fs.readFileSync(file, 'utf8');
  if (!text.includes(before)) throw new Error(`[build ferretdb] cannot apply the _id index patch: ${file} no longer contains ${before}`);
  fs.writeFileSync(file, text.replace(before, `IDColumn = DefaultColumn + "->'_id'"`));
}

function chmodUserWritable(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isSymbolicLink()) continue;
    fs.chmodSync(p, fs.statSync(p).mode | 0o200);
    if (entry.isDirectory()) chmodUserWritable(p);
  }
  fs.chmodSync(dir, fs.statSync(dir).mode | 0o200);
}

function rmrf(p) {
  try {
    chmodUserWritable(p); // module-cache copies are read-only, which blocks removal for non-root users
  } catch {}
  fs.rmSync(p, { recursive: true, force: true });
}

// Runs go, forwarding its messages prefixed. `-v` package lines are only counted (a cold Temporal
// build compiles over a thousand packages) and reported with the elapsed-time tick.
function runGo(name, goBin, args, { cwd, env = {}, quiet = false }, log) {
  const prefix = `[build ${name}]`;
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const child = spawn(goBin, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let packages = 0;
    const recent = [];
    child.stdout.on('data', (d) => (stdout += d));
    readline.createInterface({ input: child.stderr }).on('line', (line) => {
      recent.push(line);
      if (recent.length > 40) recent.shift();
      if (/^[\w.~+-]+(\/[\w.~+-]+)*$/.test(line)) packages++;
      else if (!quiet || !line.startsWith('go: downloading')) log(`${prefix} ${line}`);
    });
    const tick = setInterval(() => {
      const compiled = packages ? `, ${packages} packages compiled` : '';
      log(`${prefix} still running: ${Math.round((Date.now() - started) / 1000)} s elapsed${compiled}`);
    }, BUILD_TICK_MS);
    child.on('error', (err) => {
      clearInterval(tick);
      reject(new Error(`${prefix} could not run ${goBin}: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearInterval(tick);
      if (code === 0) resolve(stdout);
      else {
        const detail = (stdout.trim() ? `${stdout.trim()}\n` : '') + recent.join('\n');
        reject(new Error(`${prefix} \`go ${args.join(' ')}\` failed (${signal || `exit ${code}`}):\n${detail}`));
      }
    });
  });
}

// One build at a time per cache: a dev run and a test run may both find the cache empty, and two
// parallel cold builds would double the minutes and the memory. mkdir is atomic; the lock records
// its owner's pid so a lock left by a killed process is taken over.
async function withBuildLock(log, fn) {
  const cache = cacheDir();
  fs.mkdirSync(cache, { recursive: true });
  const lockDir = path.join(cache, 'build.lock');
  const pidFile = path.join(lockDir, 'pid');
  const started = Date.now();
  let nextTick = 0;
  for (;;) {
    try {
      fs.mkdirSync(lockDir);
      fs.writeFileSync(pidFile, String(process.pid));
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
    }
    const holder = readInt(pidFile);
    // No pid file yet: the holder is between mkdir and write; only a long-empty lock is stale.
    const stale = holder ? !isAlive(holder) : Date.now() - mtimeMs(lockDir) > 30_000;
    if (stale) {
      log(`[build] removing stale build lock${holder ? ` of pid ${holder}` : ''} (${lockDir})`);
      fs.rmSync(lockDir, { recursive: true, force: true });
      continue;
    }
    if (Date.now() >= nextTick) {
      log(`[build] waiting for another build (pid ${holder ?? '?'}) to finish: ${Math.round((Date.now() - started) / 1000)} s`);
      nextTick = Date.now() + BUILD_TICK_MS;
    }
    await sleep(1000);
  }
  try {
    // Leftovers of builds that were interrupted (we hold the lock, so nobody else is building).
    for (const entry of fs.readdirSync(cache)) if (entry.startsWith('.build-')) rmrf(path.join(cache, entry));
    return await fn();
  } finally {
    if (readInt(pidFile) === process.pid) fs.rmSync(lockDir, { recursive: true, force: true });
  }
}

function readInt(file) {
  try {
    const n = Number.parseInt(fs.readFileSync(file, 'utf8').trim(), 10);
    return Number.isInteger(n) && n > 0 ? n : null;
  } catch {
    return null;
  }
}

function mtimeMs(p) {
  try {
    return fs.statSync(p).mtimeMs;
  } catch {
    return Date.now();
  }
}

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function assertPortFree(port, what, envVar) {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', (err) =>
      reject(
        new Error(
          `stack: cannot start ${what}: 127.0.0.1:${port} is not available (${err.code}). ` +
            `Another server (or an earlier dev stack: \`node scripts/stack.mjs stop\`) is using it` +
            (envVar ? `; for \`stack.mjs start\` pick another port with ${envVar}.` : '.'),
        ),
      ),
    );
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve()));
  });
}

// A zombie (exited, not yet reaped by its parent) counts as gone.
function isAlive(pid) {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return err.code === 'EPERM';
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return true; // no /proc (macOS): trust kill(0)
  }
}

function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0);
    return isAlive(pgid) || !isOnlyZombieLeader(pgid);
  } catch (err) {
    return err.code === 'EPERM';
  }
}

// The group of a process we spawned ourselves can consist only of its unreaped leader.
function isOnlyZombieLeader(pgid) {
  try {
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry) || Number(entry) === pgid) continue;
      try {
        const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        if (Number(fields[2]) === pgid && fields[0] !== 'Z') return false;
      } catch {}
    }
    return true;
  } catch {
    return false;
  }
}

function commandLine(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
  } catch {}
  try {
    return execFileSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
}

function isOurs(pid) {
  return Number.isInteger(pid) && pid > 0 && isAlive(pid) && OUR_PROCESS.test(commandLine(pid));
}

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal); // not a group leader (should not happen: we spawn detached)
    } catch {}
  }
}

async function stopPids(pids, log) {
  const targets = Object.entries(pids || {}).filter(([, pid]) => isOurs(pid));
  if (!targets.length) return;
  log(`stack: stopping ${targets.map(([name, pid]) => `${name} (pid ${pid})`).join(', ')} ...`);
  for (const [, pid] of targets) signalGroup(pid, 'SIGTERM');
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  while (Date.now() < deadline && targets.some(([, pid]) => groupAlive(pid))) await sleep(100);
  for (const [name, pid] of targets) {
    if (!groupAlive(pid)) continue;
    log(`stack: ${name} (pid ${pid}) did not exit within ${STOP_TIMEOUT_MS / 1000} s, killing it`);
    signalGroup(pid, 'SIGKILL');
  }
  const killDeadline = Date.now() + 5000;
  while (Date.now() < killDeadline && targets.some(([, pid]) => groupAlive(pid))) await sleep(50);
}

function readStackFile(stateDir) {
  try {
    return JSON.parse(fs.readFileSync(path.join(stateDir, 'stack.json'), 'utf8'));
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw new Error(`stack: cannot read ${path.join(stateDir, 'stack.json')}: ${err.message}`);
  }
}

function writeStackFile(stateDir, info) {
  const file = path.join(stateDir, 'stack.json');
  fs.writeFileSync(`${file}.tmp`, `${JSON.stringify(info, null, 2)}\n`);
  fs.renameSync(`${file}.tmp`, file);
}

function tail(file, lines = 20) {
  try {
    const text = fs.readFileSync(file, 'utf8').trimEnd();
    return text ? text.split('\n').slice(-lines).join('\n') : '(empty)';
  } catch {
    return '(no log)';
  }
}

// Starts a server in its own process group with output to its log file, so it outlives this
// process (the dev stack runs in the background) and stopStack can kill it as a group.
function spawnServer(name, bin, args, logFile) {
  const fd = fs.openSync(logFile, 'w');
  try {
    const child = spawn(bin, args, { detached: true, stdio: ['ignore', fd, fd] });
    child.unref();
    const state = { child, exited: null, error: null };
    child.on('exit', (code, signal) => (state.exited = signal || `exit code ${code}`));
    child.on('error', (err) => (state.error = err));
    return state;
  } finally {
    fs.closeSync(fd);
  }
}

// Readiness: the server answers a MongoDB wire `hello` (OP_MSG). This also proves that whatever is
// on the port really speaks the protocol.
function mongoHello(port) {
  return new Promise((resolve) => {
    const doc = bsonDoc([
      [0x10, 'hello', int32(1)],
      [0x02, '$db', bsonString('admin')],
    ]);
    const requestId = 1 + Math.floor(Math.random() * 1e6);
    const header = Buffer.alloc(16);
    const body = Buffer.concat([Buffer.alloc(4), Buffer.from([0]), doc]); // flagBits, section kind 0
    header.writeInt32LE(16 + body.length, 0);
    header.writeInt32LE(requestId, 4);
    header.writeInt32LE(0, 8);
    header.writeInt32LE(2013, 12); // OP_MSG
    const socket = net.connect({ host: '127.0.0.1', port });
    let buf = Buffer.alloc(0);
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write(Buffer.concat([header, body])));
    socket.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= 16 && buf.length >= buf.readInt32LE(0)) {
        done(buf.readInt32LE(8) === requestId && buf.readInt32LE(12) === 2013);
      }
    });
    socket.on('end', () => done(false));
  });
}

function int32(n) {
  const b = Buffer.alloc(4);
  b.writeInt32LE(n);
  return b;
}

function bsonString(s) {
  const str = Buffer.from(`${s}\0`, 'utf8');
  return Buffer.concat([int32(str.length), str]);
}

function bsonDoc(elements) {
  const body = Buffer.concat(elements.map(([type, key, value]) => Buffer.concat([Buffer.from([type]), Buffer.from(`${key}\0`), value])));
  return Buffer.concat([int32(body.length + 5), body, Buffer.from([0])]);
}

function temporalHealthy(temporalBin, port) {
  return new Promise((resolve) => {
    execFile(
      temporalBin,
      ['operator', 'cluster', 'health', '--address', `127.0.0.1:${port}`],
      { timeout: 5000, encoding: 'utf8' },
      (err, stdout) => resolve(!err && stdout.includes('SERVING')),
    );
  });
}

async function waitReady({ label, server, logFile, probe, interval }) {
  const started = Date.now();
  for (;;) {
    if (server.error) throw new Error(`stack: could not start ${label}: ${server.error.message}`);
    if (server.exited) {
      throw new Error(`stack: ${label} exited during start-up (${server.exited}). Log ${logFile}, last lines:\n${tail(logFile)}`);
    }
    if (await probe()) return Date.now() - started;
    if (Date.now() - started > READY_TIMEOUT_MS) {
      throw new Error(`stack: ${label} not ready after ${READY_TIMEOUT_MS / 1000} s. Log ${logFile}, last lines:\n${tail(logFile)}`);
    }
    await sleep(interval);
  }
}

// ---------------------------------------------------------------------------------------------
// Stack
// ---------------------------------------------------------------------------------------------

// `persist` only concerns Temporal (false: in-memory). The database always lives in
// `${stateDir}/ferretdb` (or `mongod`): use a fresh stateDir for an empty database.
export async function startStack({ stateDir, ports = {}, ui = true, persist = true, log = console.log } = {}) {
  if (!stateDir) throw new Error('startStack: stateDir is required');
  stateDir = path.resolve(stateDir);
  const logsDir = path.join(stateDir, 'logs');
  fs.mkdirSync(logsDir, { recursive: true });

  // A run that was killed leaves its servers behind; they hold the ports and the files.
  const previous = readStackFile(stateDir);
  if (previous) {
    // ...unless the process that started them is still running (e.g. a second `npm run dev`).
    if (previous.owner && previous.owner !== process.pid && isAlive(previous.owner)) {
      throw new Error(
        `stack: ${stateDir} is in use by a running process (pid ${previous.owner}); stop it first, or use another state folder.`,
      );
    }
    await stopPids(previous.pids, log);
    fs.rmSync(path.join(stateDir, 'stack.json'), { force: true });
  }

  const externalMongo = process.env.MONGO_URL || null;
  const externalTemporal = process.env.TEMPORAL_ADDRESS || null;
  const bins = await ensureBinaries({ log });

  const info = {
    mongoUrl: externalMongo,
    temporalAddress: externalTemporal,
    temporalUiUrl: externalTemporal ? process.env.TEMPORAL_UI_URL || null : null,
    pids: {},
    owner: process.pid,
    startedAt: new Date().toISOString(),
  };
  const pending = [];
  const servers = [];

  try {
    if (!externalMongo) {
      const port = ports.mongo || (await freePort());
      await assertPortFree(port, 'the database', 'DEV_MONGO_PORT');
      let label, bin, args;
      if (bins.mongodBin) {
        const dbPath = path.join(stateDir, 'mongod');
        fs.mkdirSync(dbPath, { recursive: true });
        [label, bin, args] = ['MongoDB', bins.mongodBin, ['--dbpath', dbPath, '--port', String(port), '--bind_ip', '127.0.0.1']];
      } else {
        const dataDir = path.join(stateDir, 'ferretdb');
        fs.mkdirSync(dataDir, { recursive: true });
        label = 'FerretDB';
        bin = bins.ferretdbBin;
        args = [
          '--handler=sqlite',
          `--sqlite-url=file:${dataDir}/`, // must end with '/': it is a directory of SQLite files
          `--listen-addr=127.0.0.1:${port}`,
          `--state-dir=${dataDir}`,
          '--debug-addr=-', // the default fixed 127.0.0.1:8088 would clash between parallel stacks
          '--telemetry=disable',
          '--log-level=error',
        ];
      }
      const logFile = path.join(logsDir, `${bins.mongodBin ? 'mongod' : 'ferretdb'}.log`);
      log(`stack: starting ${label} on 127.0.0.1:${port} ...`);
      const server = spawnServer(label, bin, args, logFile);
      servers.push(server);
      info.pids.mongo = server.child.pid;
      info.mongoUrl = `mongodb://127.0.0.1:${port}/`;
      pending.push(
        waitReady({ label, server, logFile, probe: () => mongoHello(port), interval: 200 }).then((ms) =>
          log(`stack: ${label} ready (${seconds(ms)})`),
        ),
      );
    }

    if (!externalTemporal) {
      const port = ports.temporal || (await freePort());
      await assertPortFree(port, 'Temporal', 'DEV_TEMPORAL_PORT');
      const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--namespace', 'default', '--log-level', 'warn'];
      // Custom search attributes of lab order workflows (workflows/lab-order.ts, SEARCH_ATTRIBUTES).
      for (const attribute of TEMPORAL_SEARCH_ATTRIBUTES) args.push('--search-attribute', attribute);
      if (persist) args.push('--db-filename', path.join(stateDir, 'temporal.db'));
      if (ui) {
        const uiPort = ports.temporalUi || (await freePort());
        await assertPortFree(uiPort, 'the Temporal UI', 'DEV_TEMPORAL_UI_PORT');
        args.push('--ui-port', String(uiPort));
        info.temporalUiUrl = `http://127.0.0.1:${uiPort}`;
      } else {
        args.push('--headless');
      }
      const logFile = path.join(logsDir, 'temporal.log');
      log(`stack: starting Temporal dev server on 127.0.0.1:${port}${ui ? ` (UI ${info.temporalUiUrl})` : ''} ...`);
      const server = spawnServer('Temporal', bins.temporalBin, args, logFile);
      servers.push(server);
      info.pids.temporal = server.child.pid;
      info.temporalAddress = `127.0.0.1:${port}`;
      pending.push(
        waitReady({
          label: 'Temporal',
          server,
          logFile,
          probe: () => temporalHealthy(bins.temporalBin, port),
          interval: 300,
        }).then((ms) => log(`stack: Temporal ready (${seconds(ms)})`)),
      );
    }

    // Recorded before waiting, so a run killed during start-up is still cleaned up by the next one.
    writeStackFile(stateDir, info);
    const results = await Promise.allSettled(pending);
    const failure = results.find((r) => r.status === 'rejected');
    if (failure) throw failure.reason;
  } catch (err) {
    await stopPids(info.pids, () => {});
    for (const { child } of servers) if (child.pid && isAlive(child.pid)) signalGroup(child.pid, 'SIGKILL');
    fs.rmSync(path.join(stateDir, 'stack.json'), { force: true });
    throw err;
  }

  writeStackFile(stateDir, info);
  return info;
}

// Leaves alone a stack another live process started, unless `force` (the CLI's `stop`).
export async function stopStack({ stateDir, log = console.log, force = false } = {}) {
  if (!stateDir) throw new Error('stopStack: stateDir is required');
  stateDir = path.resolve(stateDir);
  const info = readStackFile(stateDir);
  if (!info) return;
  if (!force && info.owner && info.owner !== process.pid && isAlive(info.owner)) {
    log(`stack: left running (started by live process ${info.owner})`);
    return;
  }
  await stopPids(info.pids, log);
  fs.rmSync(path.join(stateDir, 'stack.json'), { force: true });
}

// ---------------------------------------------------------------------------------------------
// CLI
// ---------------------------------------------------------------------------------------------

const DEV_STATE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '.devstack');

function envPort(name, fallback) {
  const raw = process.env[name];
  if (!raw) return fallback;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`${name}=${raw} is not a valid port`);
  return port;
}

async function main(cmd) {
  switch (cmd) {
    case 'ensure': {
      const bins = await ensureBinaries();
      for (const [key, value] of Object.entries(bins)) console.log(`${key}: ${value}`);
      if (process.env.MONGO_URL) console.log(`database: external (MONGO_URL)`);
      if (process.env.TEMPORAL_ADDRESS) console.log(`temporal: external (TEMPORAL_ADDRESS)`);
      return 0;
    }
    case 'start': {
      const ports = {
        mongo: envPort('DEV_MONGO_PORT', 27017),
        temporal: envPort('DEV_TEMPORAL_PORT', 7233),
        temporalUi: envPort('DEV_TEMPORAL_UI_PORT', 8233),
      };
      // The servers are in their own process groups, so Ctrl-C would not reach them: clean up here.
      const abort = async () => {
        await stopStack({ stateDir: DEV_STATE_DIR, log: () => {} }).catch(() => {});
        process.exit(130);
      };
      process.once('SIGINT', abort);
      process.once('SIGTERM', abort);
      const info = await startStack({ stateDir: DEV_STATE_DIR, ports });
      console.log(`\nDev stack running (state and logs in ${DEV_STATE_DIR}):`);
      console.log(`  MONGO_URL=${info.mongoUrl}`);
      console.log(`  TEMPORAL_ADDRESS=${info.temporalAddress}`);
      if (info.temporalUiUrl) console.log(`  Temporal UI: ${info.temporalUiUrl}`);
      console.log(`Stop it with: node scripts/stack.mjs stop`);
      return 0;
    }
    case 'stop': {
      const running = readStackFile(DEV_STATE_DIR);
      await stopStack({ stateDir: DEV_STATE_DIR, force: true });
      console.log(running ? 'stack: stopped' : 'stack: not running');
      return 0;
    }
    case 'status': {
      const info = readStackFile(DEV_STATE_DIR);
      if (!info) {
        console.log(`stack: not running (no ${path.join(DEV_STATE_DIR, 'stack.json')})`);
        return 1;
      }
      console.log(JSON.stringify(info, null, 2));
      let allAlive = true;
      for (const [name, pid] of Object.entries(info.pids || {})) {
        const alive = isOurs(pid);
        allAlive &&= alive;
        console.log(`${name}: pid ${pid} ${alive ? 'alive' : 'NOT running'}`);
      }
      return allAlive ? 0 : 1;
    }
    default:
      console.error('usage: node scripts/stack.mjs <ensure|start|stop|status>');
      return 2;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv[2]).then(
    (code) => process.exit(code),
    (err) => {
      console.error(err instanceof Error ? err.message : err);
      process.exit(1);
    },
  );
}
