// The stack's processes: free ports, process groups, signals, spawning servers and probing them until they are ready.
// Part of the dev stack: scripts/stack.mjs is its entry point and says what it does.

import { spawn, execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { OUR_PROCESS, READY_TIMEOUT_MS, STOP_TIMEOUT_MS, sleep } from './common.mjs';
import { listDir } from './documentdb.mjs';
import { POSTGRES_SOCKET_MAX, POSTGRES_SOCKET_PORT } from './postgres.mjs';

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

export function assertPortFree(port, what, envVar) {
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

/**
 * The fields of /proc/<pid>/stat after the command name, or null (no such process, or no /proc): [0] state,
 * [1] parent pid, [2] process group, [19] start time (clock ticks since boot).
 */
function procStat(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** Every process, by its /proc/<pid>/stat fields (none without /proc). */
function allProcStats() {
  return listDir('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map((entry) => [Number(entry), procStat(entry)])
    .filter(([, fields]) => fields);
}

// A zombie (exited, not yet reaped by its parent) counts as gone.
export function isAlive(pid) {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return err.code === 'EPERM';
  }
  const fields = procStat(pid);
  return fields ? fields[0] !== 'Z' : true; // no /proc (macOS): trust kill(0)
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
  if (!fs.existsSync('/proc')) return false;
  return !allProcStats().some(([pid, fields]) => pid !== pgid && Number(fields[2]) === pgid && fields[0] !== 'Z');
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

/** When the process started (clock ticks since boot); null where unknown. */
export function procStartTime(pid) {
  const fields = procStat(pid);
  return fields ? Number(fields[19]) : null;
}

/** The live processes whose parent is `pid` (a postmaster's backends and workers, which leave its group). */
function childrenOf(pid) {
  return allProcStats()
    .filter(([, fields]) => Number(fields[1]) === pid)
    .map(([child]) => child);
}

/** A live process of ours: by name, and, when its start time was recorded, the same process (not a reused pid). */
export function isOurs(pid, start = null) {
  if (!(Number.isInteger(pid) && pid > 0 && isAlive(pid) && OUR_PROCESS.test(commandLine(pid)))) return false;
  return start == null || procStartTime(pid) === start;
}

export function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal); // not a group leader (should not happen: we spawn detached)
    } catch {}
  }
}

/**
 * Stops the servers of a stack.json record ({ pids, stopSignals, starts }): each gets its stop signal
 * (default SIGTERM to its process group). PostgreSQL gets SIGINT, its fast shutdown, at the postmaster alone;
 * if it has not stopped in time, SIGQUIT (immediate shutdown) and then SIGKILL for it and its children, which
 * are in process groups of their own. Anything else left after STOP_TIMEOUT_MS is SIGKILLed with its group.
 */
export async function stopPids(pids, log, { stopSignals = {}, starts = {} } = {}) {
  const targets = Object.entries(pids || {}).filter(([name, pid]) => isOurs(pid, starts[name]));
  if (!targets.length) return;
  log(`stack: stopping ${targets.map(([name, pid]) => `${name} (pid ${pid})`).join(', ')} ...`);
  const postmasters = new Set(targets.filter(([name]) => stopSignals[name] === 'SIGINT').map(([, pid]) => pid));
  const signal = (pid, sig) => {
    try {
      process.kill(pid, sig);
    } catch {}
  };
  for (const [, pid] of targets) {
    if (postmasters.has(pid)) signal(pid, 'SIGINT');
    else signalGroup(pid, 'SIGTERM');
  }
  const waitGone = async (ms) => {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline && targets.some(([, pid]) => groupAlive(pid))) await sleep(100);
  };
  await waitGone(STOP_TIMEOUT_MS);
  for (const [name, pid] of targets) {
    if (!groupAlive(pid)) continue;
    log(`stack: ${name} (pid ${pid}) did not exit within ${STOP_TIMEOUT_MS / 1000} s, killing it`);
    if (postmasters.has(pid)) {
      const children = childrenOf(pid);
      signal(pid, 'SIGQUIT');
      await sleep(3000);
      for (const child of [pid, ...children]) signal(child, 'SIGKILL');
    } else signalGroup(pid, 'SIGKILL');
  }
  await waitGone(5000);
}

export function readStackFile(stateDir) {
  try {
    return JSON.parse(fs.readFileSync(path.join(stateDir, 'stack.json'), 'utf8'));
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw new Error(`stack: cannot read ${path.join(stateDir, 'stack.json')}: ${err.message}`);
  }
}

export function writeStackFile(stateDir, info) {
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

// Starts a server in its own process group with output appended to its log file, so it outlives this
// process (the dev stack runs in the background) and stopStack can kill it as a group.
export function spawnServer(bin, args, logFile, env = process.env) {
  const fd = fs.openSync(logFile, 'a');
  try {
    const child = spawn(bin, args, { detached: true, stdio: ['ignore', fd, fd], env });
    child.unref();
    const state = { child, exited: null, error: null };
    child.on('exit', (code, signal) => (state.exited = signal || `exit code ${code}`));
    child.on('error', (err) => (state.error = err));
    return state;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Readiness by one request on a socket: `request` is sent once connected, and `answer` is given what has come back
 * so far after each chunk: true or false once it can tell, undefined to wait for more. An error, the end of the
 * connection or 2 s of silence is "not ready".
 */
export function probeSocket(connectOptions, request, answer) {
  return new Promise((resolve) => {
    const socket = net.connect(connectOptions);
    let buf = Buffer.alloc(0);
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('end', () => done(false));
    socket.on('connect', () => socket.write(request));
    socket.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      let verdict;
      try {
        verdict = answer(buf);
      } catch {
        verdict = false;
      }
      if (verdict !== undefined) done(verdict);
    });
  });
}

// Readiness: the server answers a MongoDB wire `hello` (OP_MSG). This also proves that whatever is
// on the port really speaks the protocol.
export function mongoHello(port) {
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
  return probeSocket({ host: '127.0.0.1', port }, Buffer.concat([header, body]), (buf) =>
    buf.length >= 16 && buf.length >= buf.readInt32LE(0) ? buf.readInt32LE(8) === requestId && buf.readInt32LE(12) === 2013 : undefined,
  );
}

/** The socket folder of a stack: in its state folder, or under the temp folder when that path is too long to bind. */
export function postgresSocketDir(stateDir) {
  const inState = path.join(stateDir, 'postgres-socket');
  const dir = `${inState}/.s.PGSQL.${POSTGRES_SOCKET_PORT}`.length <= POSTGRES_SOCKET_MAX ? inState : fs.mkdtempSync(path.join(os.tmpdir(), 'hb-pg-'));
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  return dir;
}

// Readiness: PostgreSQL accepts a session (a StartupMessage answered with AuthenticationOk, trust auth); while
// it starts or recovers it answers with an error instead.
export function postgresReady(socketDir) {
  const params = Buffer.from('user\0postgres\0database\0postgres\0\0', 'utf8');
  const startup = Buffer.alloc(8);
  startup.writeInt32BE(8 + params.length, 0);
  startup.writeInt32BE(196608, 4); // protocol 3.0
  const socket = { path: path.join(socketDir, `.s.PGSQL.${POSTGRES_SOCKET_PORT}`) };
  return probeSocket(socket, Buffer.concat([startup, params]), (d) => d[0] === 0x52 && d.length >= 9 && d.readInt32BE(5) === 0); // 'R', AuthenticationOk
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

export function temporalHealthy(temporalBin, port) {
  return new Promise((resolve) => {
    execFile(temporalBin, ['operator', 'cluster', 'health', '--address', `127.0.0.1:${port}`], { timeout: 5000, encoding: 'utf8' }, (err, stdout) =>
      resolve(!err && stdout.includes('SERVING')),
    );
  });
}

export async function waitReady({ label, server, logFile, probe, interval }) {
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
