// A real RabbitMQ broker (AMQP 0-9-1) for tests and benchmarks: Debian bookworm's packages unpacked once into the user cache, run from there on loopback.
// Part of the dev stack: scripts/stack.mjs is its entry point and says what it does.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { cacheDir, which } from './binaries.mjs';
import { STOP_TIMEOUT_MS, aptDownload, rmrf, runLogged, seconds, sleep, withBuildLock } from './common.mjs';
import { assertPortFree, freePort, isAlive, procStartTime, signalGroup, spawnServer, waitReady } from './processes.mjs';

/**
 * Debian bookworm's RabbitMQ and the Erlang/OTP it depends on, pinned (the versions in bookworm's index when this
 * was written; a point release replaces them there, and then these pins must follow: `apt-cache policy`).
 */
export const RABBITMQ_DEBIAN_VERSION = '3.10.8-1.1+deb12u1';
export const ERLANG_DEBIAN_VERSION = '1:25.2.3+dfsg-1+deb12u4';
// rabbitmq-server's Erlang dependencies, with their own (erlang-os-mon: snmp; erlang-inets: ftp, tftp).
const ERLANG_PACKAGES = [
  'base',
  'asn1',
  'crypto',
  'eldap',
  'ftp',
  'inets',
  'mnesia',
  'os-mon',
  'parsetools',
  'public-key',
  'runtime-tools',
  'snmp',
  'ssl',
  'syntax-tools',
  'tftp',
  'tools',
  'xmerl',
].map((p) => `erlang-${p}`);
const RABBITMQ_BUILD = `${RABBITMQ_DEBIAN_VERSION}-otp${ERLANG_DEBIAN_VERSION.replace(/^\d+:/, '')}`;
export const RABBITMQ_USER = 'healthbridge';
export const RABBITMQ_PASSWORD = 'healthbridge';
/** Each broker has an epmd of its own, so one node name serves them all (it also names the data folder). */
const NODE_NAME = 'rabbit@localhost';

const rabbitmqCachePath = () => path.join(cacheDir(), `rabbitmq-${RABBITMQ_BUILD}`);

/** The installation's paths; `versionsFile` exists only in a complete one. */
function rabbitmqPaths(dir) {
  const root = path.join(dir, 'root');
  const [erlBin, server] = [path.join(root, 'usr/lib/erlang/bin'), path.join(root, 'usr/lib/rabbitmq/bin/rabbitmq-server')]; // erlBin: erl, epmd
  return { dir, root, versionsFile: path.join(dir, 'versions.json'), erlBin, server };
}

/** `RabbitMQ 3.10.8 (Debian 3.10.8-1.1+deb12u1), Erlang/OTP 25, erts 13.1.5 (Debian 1:25.2.3+dfsg-1+deb12u4)` */
function describe(versions) {
  const rabbit = versions['rabbitmq-server'];
  return `RabbitMQ ${rabbit.replace(/-[^-]+$/, '')} (Debian ${rabbit}), Erlang/OTP ${versions.otp}, erts ${versions.erts} (Debian ${versions['erlang-base']})`;
}

/**
 * RabbitMQ, unpacked once per cache (~35 MB of packages, ~45 MB unpacked, ~3 s): `apt-get download` of the pinned
 * packages (checked against the signed index), `dpkg-deb -x` into a folder of the cache, and the `erl` script made to
 * find its Erlang root where it lies. Nothing is installed system-wide and no maintainer script runs (so no service
 * starts); no root is needed, then or at run time, except for `apt-get update` when apt has no package index yet.
 * Returns { dir, root, erlBin, server, versions, version }.
 */
export async function ensureRabbitmq({ log = console.log } = {}) {
  const done = () => {
    const paths = rabbitmqPaths(rabbitmqCachePath());
    const versions = JSON.parse(fs.readFileSync(paths.versionsFile, 'utf8'));
    return { ...paths, versions, version: describe(versions) };
  };
  if (fs.existsSync(rabbitmqPaths(rabbitmqCachePath()).versionsFile)) return done();
  const missing = ['apt-get', 'dpkg-deb'].filter((tool) => !which(tool));
  if (missing.length) {
    throw new Error(
      `stack: RabbitMQ is not in the cache (${rabbitmqCachePath()}) and installing it needs Debian bookworm's apt-get and dpkg-deb (missing: ${missing.join(', ')}). Run on Debian bookworm, or use a broker of your own.`,
    );
  }
  return withBuildLock('rabbitmq', log, async () => {
    if (fs.existsSync(rabbitmqPaths(rabbitmqCachePath()).versionsFile)) return done();
    const prefix = 'setup rabbitmq';
    const started = Date.now();
    const tmp = fs.mkdtempSync(path.join(cacheDir(), '.build-rabbitmq-'));
    try {
      const paths = rabbitmqPaths(tmp);
      const debs = path.join(tmp, 'debs');
      fs.mkdirSync(debs);
      log(
        `[${prefix}] RabbitMQ ${RABBITMQ_DEBIAN_VERSION} + Erlang ${ERLANG_DEBIAN_VERSION} from Debian bookworm into ${rabbitmqCachePath()} (once per cache, a few seconds)...`,
      );
      await downloadPackages(debs, log);
      const versions = {};
      for (const deb of fs.readdirSync(debs).sort()) {
        const file = path.join(debs, deb);
        const fields = execFileSync('dpkg-deb', ['-f', file, 'Package', 'Version'], { encoding: 'utf8' }).trim().split('\n');
        const [name, version] = fields.map((line) => line.replace(/^\w+:\s*/, ''));
        versions[name] = version;
        await runLogged(prefix, 'dpkg-deb', ['-x', file, paths.root], { quiet: true }, log);
      }
      rmrf(debs);
      log(`[${prefix}] kept the ${prunePlugins(paths.root)} applications RabbitMQ's core needs of its plugins folder (no management, MQTT, STOMP...)`);
      // Debian's `erl` hard-codes ROOTDIR=/usr/lib/erlang; upstream's takes the folder it lies in (dyn_erl --realpath).
      const erl = path.join(paths.erlBin, 'erl');
      const text = fs.readFileSync(erl, 'utf8');
      const patched = text.replace(/^(\s*)ROOTDIR=\/usr\/lib\/erlang$/gm, '$1ROOTDIR="$dyn_rootdir"');
      if (patched === text) throw new Error(`[${prefix}] ${erl} does not set ROOTDIR=/usr/lib/erlang as expected: has ERLANG_DEBIAN_VERSION changed?`);
      fs.writeFileSync(erl, patched);
      // The runtime works from here, with the host's libraries (libssl3 for crypto, libtinfo6, zlib, libstdc++).
      const probe = 'ok = crypto:start(), io:format("~s ~s", [erlang:system_info(otp_release), erlang:system_info(version)]), halt().';
      let otp;
      try {
        otp = execFileSync(erl, ['-noshell', '-eval', probe], { encoding: 'utf8', env: erlangEnv(paths, { HOME: tmp, ERL_CRASH_DUMP: '/dev/null' }) }).trim();
      } catch (err) {
        throw new Error(
          `[${prefix}] the unpacked Erlang runtime does not start (${err.message.trim()}); a library of the host may be missing: \`ldd ${paths.root}/usr/lib/erlang/erts-*/bin/beam.smp\`.`,
        );
      }
      [versions.otp, versions.erts] = otp.split(' ');
      fs.writeFileSync(paths.versionsFile, `${JSON.stringify(versions, null, 2)}\n`); // last: marks a complete installation
      fs.chmodSync(tmp, 0o755); // mkdtemp's 0700 would hide it from non-root users after a root set-up
      fs.renameSync(tmp, rabbitmqCachePath());
      log(`[${prefix}] done in ${seconds(Date.now() - started)}: ${describe(versions)}`);
      return done();
    } finally {
      rmrf(tmp);
    }
  });
}

/**
 * Removes the plugins folder's applications that RabbitMQ's core (`rabbit` and what its .app files require, AMQP
 * 0-9-1 included) does not need: start-up halves (~4.7 s to ~2.3 s here), as RabbitMQ reads every one at boot.
 */
function prunePlugins(root) {
  const lib = path.join(root, 'usr/lib/rabbitmq/lib');
  const plugins = path.join(
    lib,
    fs.readdirSync(lib).find((d) => d.startsWith('rabbitmq_server-')),
    'plugins',
  );
  const byApp = new Map(
    fs
      .readdirSync(plugins, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => [d.name.replace(/-[\d.]+$/, ''), d.name]),
  );
  const keep = new Set();
  const visit = (app) => {
    if (keep.has(app) || !byApp.has(app)) return; // OTP's own applications are not in this folder
    keep.add(app);
    const text = fs.readFileSync(path.join(plugins, byApp.get(app), 'ebin', `${app}.app`), 'utf8');
    for (const dep of /\{applications,\s*\[([^\]]*)\]/.exec(text)?.[1].split(',') ?? []) visit(dep.trim());
  };
  visit('rabbit');
  if (!keep.has('rabbit_common')) throw new Error(`stack: unexpected RabbitMQ layout in ${plugins}: has RABBITMQ_DEBIAN_VERSION changed?`);
  for (const [app, dir] of byApp) if (!keep.has(app)) fs.rmSync(path.join(plugins, dir), { recursive: true });
  return keep.size;
}

function downloadPackages(dir, log) {
  const packages = [`rabbitmq-server=${RABBITMQ_DEBIAN_VERSION}`, ...ERLANG_PACKAGES.map((p) => `${p}=${ERLANG_DEBIAN_VERSION}`)];
  const hint = `If apt says a pinned version was not found, a Debian point release has replaced it: set RABBITMQ_DEBIAN_VERSION and ERLANG_DEBIAN_VERSION in scripts/stack/rabbitmq.mjs to what \`apt-cache policy rabbitmq-server erlang-base\` shows.`;
  return aptDownload(dir, packages, { prefix: 'setup rabbitmq', hint }, log);
}

/** The environment of our Erlang programs: the caller's, without any RabbitMQ or Erlang setting, and our `erl` first on PATH. */
function erlangEnv(paths, extra) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^(RABBITMQ_|ERL_|NOTIFY_SOCKET$)/.test(key)));
  return { ...env, PATH: `${paths.erlBin}${path.delimiter}${env.PATH || '/usr/bin:/bin'}`, ...extra };
}

/**
 * Starts a private broker whose files all live in `stateDir` (config, data, logs; reused by a later start: the
 * data survives a stop or a kill -9), listening for AMQP on 127.0.0.1:`port` (default: a free one), with user
 * `user` (administrator of vhost `/`, created when the data folder is new). Its Erlang distribution port and its
 * own epmd are on loopback, on free ports. Resolves once an AMQP session opens with those credentials, to
 * { url, port, pid, epmdPid, version, logFile, start(), stop({ kill }) }: `stop()` stops the node (SIGTERM,
 * RabbitMQ's clean shutdown; SIGKILL after STOP_TIMEOUT_MS) and its epmd; `stop({ kill: true })` kills the node at
 * once (a crash: epmd stays); `start()` starts it again on the same port and data. A run killed before stopping
 * its broker leaves it running: the next start in the same `stateDir` stops it first.
 */
export async function startRabbitmq({ stateDir, port, user = RABBITMQ_USER, password = RABBITMQ_PASSWORD, log = console.log } = {}) {
  if (!stateDir) throw new Error('startRabbitmq: stateDir is required');
  stateDir = path.resolve(stateDir);
  const install = await ensureRabbitmq({ log });
  for (const dir of ['logs', 'home', 'mnesia', 'conf.d']) fs.mkdirSync(path.join(stateDir, dir), { recursive: true, mode: 0o700 });
  const owner = readJson(path.join(stateDir, 'rabbitmq.json'))?.owner;
  if (owner && owner !== process.pid && isAlive(owner)) {
    throw new Error(`stack: the RabbitMQ in ${stateDir} belongs to a running process (pid ${owner}); stop it first, or use another state folder.`);
  }
  await stopLeftoverRabbitmq({ stateDir, log });
  port = port || (await freePort());
  const logFile = path.join(stateDir, 'logs', 'rabbitmq.log');
  const epmdLog = path.join(stateDir, 'logs', 'epmd.log');
  const url = `amqp://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}`;
  const handle = { url, port, pid: null, epmdPid: null, version: install.version, logFile, stateDir, start: () => start(), stop: (o) => stop(o) };
  let [broker, epmd, epmdPort] = [null, null, null]; // the spawned processes' states

  async function start() {
    if (running(broker)) throw new Error(`stack: RabbitMQ (pid ${broker.child.pid}) is already running on 127.0.0.1:${port}`);
    await assertPortFree(port, 'RabbitMQ');
    for (let attempt = 1; ; attempt++) {
      try {
        return await launch();
      } catch (err) {
        // Its distribution port was free when picked and taken before the VM bound it (a server starting beside it
        // picked the same): another port, up to three times.
        if (attempt >= 3 || !/dist_port_already_used/.test(err.message)) throw err;
        log(`stack: RabbitMQ's distribution port was taken meanwhile; starting again on another (attempt ${attempt + 1})`);
      }
    }
  }

  async function launch() {
    const started = Date.now();
    if (!running(epmd)) {
      epmdPort = await freePort();
      epmd = spawnServer(path.join(install.erlBin, 'epmd'), ['-port', String(epmdPort), '-address', '127.0.0.1'], epmdLog, erlangEnv(install, {}));
      handle.epmdPid = epmd.child.pid;
      await waitReady({ label: 'epmd (RabbitMQ)', server: epmd, logFile: epmdLog, probe: () => tcpAnswers(epmdPort), interval: 50 });
    }
    const distPort = await freePort();
    writeConfig(stateDir, { port, user, password });
    log(`stack: starting ${install.version} on 127.0.0.1:${port} (data ${stateDir}) ...`);
    const env = erlangEnv(install, {
      HOME: path.join(stateDir, 'home'), // its Erlang cookie
      RABBITMQ_NODENAME: NODE_NAME,
      RABBITMQ_CONF_ENV_FILE: path.join(stateDir, 'rabbitmq-env.conf'), // not /etc/rabbitmq's
      RABBITMQ_CONFIG_FILE: path.join(stateDir, 'rabbitmq.conf'),
      RABBITMQ_CONFIG_FILES: path.join(stateDir, 'conf.d'),
      RABBITMQ_ADVANCED_CONFIG_FILE: path.join(stateDir, 'advanced.config'),
      RABBITMQ_ENABLED_PLUGINS_FILE: path.join(stateDir, 'enabled_plugins'),
      RABBITMQ_MNESIA_BASE: path.join(stateDir, 'mnesia'),
      RABBITMQ_LOG_BASE: path.join(stateDir, 'logs'),
      RABBITMQ_DIST_PORT: String(distPort),
      RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: '-kernel inet_dist_use_interface {127,0,0,1} +B i',
      ERL_EPMD_PORT: String(epmdPort),
      // Nothing may start an `epmd -daemon` (RabbitMQ tries when its epmd is gone): it would outlive the broker.
      ERL_FLAGS: '-start_epmd false',
      ERL_CRASH_DUMP: path.join(stateDir, 'logs', 'erl_crash.dump'),
      // The script then execs the VM instead of staying as a shell that forwards signals: one process, whose pid we
      // hold and whose SIGTERM is RabbitMQ's own clean shutdown.
      RUNNING_UNDER_SYSTEMD: 'true',
    });
    fs.appendFileSync(logFile, `\n=== ${new Date().toISOString()} start on 127.0.0.1:${port} (dist ${distPort}, epmd ${epmdPort}) ===\n`);
    const logStart = fs.statSync(logFile).size;
    broker = spawnServer(install.server, [], logFile, env);
    handle.pid = broker.child.pid;
    record(stateDir, handle);
    try {
      await waitReady({ label: 'RabbitMQ', server: broker, logFile, probe: () => amqpReady(port, user, password), interval: 200 });
    } catch (err) {
      await stop().catch(() => {});
      // The tail is mostly Erlang's crash report; RabbitMQ's own reason is in its first error lines.
      const lines = fs
        .readFileSync(logFile, 'utf8')
        .slice(logStart)
        .split('\n')
        .filter((l) => / \[error\] /.test(l));
      const errors = lines.map((l) => l.replace(/^.*? \[error\] <[\d.]+> ?/, '')).filter((l) => l.trim() && !/^=+$/.test(l));
      const reportAt = errors.findIndex((l) => /^\s*(supervisor|crasher):/.test(l));
      if (errors.length) err.message += `\nRabbitMQ's errors:\n${errors.slice(0, reportAt > 0 ? Math.min(reportAt, 10) : 10).join('\n')}`;
      throw err;
    }
    const ms = Date.now() - started;
    log(`stack: RabbitMQ ready on 127.0.0.1:${port} (${seconds(ms)})`);
    return ms;
  }

  async function stop({ kill = false } = {}) {
    const started = Date.now();
    if (running(broker)) {
      if (!kill) log(`stack: stopping RabbitMQ (pid ${broker.child.pid}) ...`);
      signalGroup(broker.child.pid, kill ? 'SIGKILL' : 'SIGTERM');
      if (!(await exited(broker, kill ? 5000 : STOP_TIMEOUT_MS))) {
        log(`stack: RabbitMQ (pid ${broker.child.pid}) did not exit within ${STOP_TIMEOUT_MS / 1000} s, killing it (log ${logFile})`);
        signalGroup(broker.child.pid, 'SIGKILL');
        await exited(broker, 5000);
      }
    }
    if (!kill && running(epmd)) {
      signalGroup(epmd.child.pid, 'SIGTERM');
      if (!(await exited(epmd, 2000))) signalGroup(epmd.child.pid, 'SIGKILL');
      await exited(epmd, 2000);
    }
    if (!kill) fs.rmSync(path.join(stateDir, 'rabbitmq.json'), { force: true });
    return Date.now() - started;
  }

  await start();
  return handle;
}

/** Stops the broker, waits `downMs`, starts it again on the same port and data; `kill`: kill -9 instead of a clean stop. */
export async function restartRabbitmq(handle, { downMs = 0, kill = false } = {}) {
  await handle.stop({ kill });
  if (downMs) await sleep(downMs);
  return handle.start();
}

/** rabbitmq.conf: the default user is created with the data folder (an existing one keeps its users); logs go to stdout, the log file. */
function writeConfig(stateDir, { port, user, password }) {
  const conf = [`listeners.tcp.1 = 127.0.0.1:${port}`, `default_user = ${user}`, `default_pass = ${password}`, 'default_vhost = /'];
  conf.push('log.file = false', 'log.console = true', 'log.console.level = info', 'log.console.use_colors = off');
  fs.writeFileSync(path.join(stateDir, 'rabbitmq.conf'), `# Written by scripts/stack/rabbitmq.mjs at each start.\n${conf.join('\n')}\n`);
  fs.writeFileSync(path.join(stateDir, 'enabled_plugins'), '[].\n'); // no management plugin: AMQP only
  fs.writeFileSync(path.join(stateDir, 'rabbitmq-env.conf'), '');
}

// Its exit event may come later than its end (a zombie until then): isAlive says at once.
const running = (state) => Boolean(state && !state.exited && isAlive(state.child.pid));

async function exited(state, ms) {
  const deadline = Date.now() + ms;
  while (running(state) && Date.now() < deadline) await sleep(50);
  return !running(state);
}

/** rabbitmq.json: the pids of a state folder's broker and epmd, so that a later start can stop them if their run died. */
function record(stateDir, handle) {
  const pids = { broker: handle.pid, epmd: handle.epmdPid };
  const starts = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, procStartTime(pid)]));
  fs.writeFileSync(path.join(stateDir, 'rabbitmq.json'), `${JSON.stringify({ owner: process.pid, port: handle.port, pids, starts }, null, 2)}\n`);
}

/**
 * Stops the broker and epmd recorded in `stateDir` (rabbitmq.json) whoever started them: what a killed run left
 * behind (a reaper of state folders calls this before removing one). Only live processes that run from this
 * installation and started when recorded are signalled: a pid may have been reused.
 */
export async function stopLeftoverRabbitmq({ stateDir, log = console.log }) {
  const file = path.join(stateDir, 'rabbitmq.json');
  const info = readJson(file);
  const root = rabbitmqPaths(rabbitmqCachePath()).root;
  for (const [name, pid] of Object.entries(info?.pids || {})) {
    let cmdline = '';
    try {
      cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {}
    if (!(pid && isAlive(pid) && procStartTime(pid) === info.starts?.[name] && cmdline.includes(root))) continue;
    log(`stack: stopping the ${name === 'broker' ? 'RabbitMQ node' : 'epmd'} (pid ${pid}) left in ${stateDir} by a run that is gone`);
    signalGroup(pid, 'SIGTERM');
    const deadline = Date.now() + STOP_TIMEOUT_MS;
    while (isAlive(pid) && Date.now() < deadline) await sleep(100);
    if (isAlive(pid)) signalGroup(pid, 'SIGKILL');
    for (let i = 0; i < 100 && isAlive(pid); i++) await sleep(50);
  }
  fs.rmSync(file, { force: true });
}

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

const tcpAnswers = (port) =>
  new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port, timeout: 1000 });
    const done = (ok) => (socket.destroy(), resolve(ok));
    socket
      .on('connect', () => done(true))
      .on('error', () => done(false))
      .on('timeout', () => done(false));
  });

/**
 * Readiness: an AMQP 0-9-1 session opens on vhost `/` with PLAIN credentials (Start, Start-Ok, Tune, Tune-Ok, Open,
 * Open-Ok, then Close). RabbitMQ opens its listener at the end of its boot, so this is the broker ready for
 * clients. A refused login (403, e.g. a data folder made with another password) fails at once.
 */
export function amqpReady(port, user = RABBITMQ_USER, password = RABBITMQ_PASSWORD) {
  const shortstr = (s) => Buffer.concat([Buffer.from([Buffer.byteLength(s)]), Buffer.from(s)]);
  const u16 = (n) => Buffer.from([n >> 8, n & 0xff]);
  const u32 = (n) => Buffer.from([n >>> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]);
  const method = (classId, methodId, ...args) => {
    const payload = Buffer.concat([u16(classId), u16(methodId), ...args]);
    return Buffer.concat([Buffer.from([1, 0, 0]), u32(payload.length), payload, Buffer.from([0xce])]);
  };
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let buf = Buffer.alloc(0);
    const done = (result) => {
      socket.destroy();
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
    socket.setTimeout(3000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('close', () => done(false));
    socket.on('connect', () => socket.write(Buffer.from('AMQP\x00\x00\x09\x01', 'latin1')));
    socket.on('data', (data) => {
      buf = Buffer.concat([buf, data]);
      if (buf.length >= 4 && buf.toString('latin1', 0, 4) === 'AMQP') return done(false); // another protocol version
      while (buf.length >= 8 && buf.length >= 8 + buf.readUInt32BE(3)) {
        const size = buf.readUInt32BE(3);
        const [type, payload] = [buf[0], buf.subarray(7, 7 + size)];
        buf = buf.subarray(8 + size);
        if (type !== 1) continue;
        const id = `${payload.readUInt16BE(0)}.${payload.readUInt16BE(2)}`;
        if (id === '10.10') {
          const response = Buffer.from(`\0${user}\0${password}`);
          // client-properties { capabilities: { authentication_failure_close: true } }: a refused login is told, not just closed.
          const capability = Buffer.concat([shortstr('authentication_failure_close'), Buffer.from('t\x01', 'latin1')]);
          const properties = Buffer.concat([shortstr('capabilities'), Buffer.from('F'), u32(capability.length), capability]);
          socket.write(method(10, 11, u32(properties.length), properties, shortstr('PLAIN'), u32(response.length), response, shortstr('en_US')));
        } else if (id === '10.30') {
          socket.write(method(10, 31, payload.subarray(4, 10), u16(0))); // channel-max and frame-max as offered, no heartbeat
          socket.write(method(10, 40, shortstr('/'), shortstr(''), Buffer.from([0])));
        } else if (id === '10.41') {
          socket.write(method(10, 50, u16(200), shortstr(''), u16(0), u16(0)));
        } else if (id === '10.51') {
          done(true);
        } else if (id === '10.50') {
          const code = payload.readUInt16BE(4);
          const text = payload.toString('utf8', 7, 7 + payload[6]).replace(/\.+$/, '');
          if (code === 403)
            done(
              new Error(
                `stack: RabbitMQ on 127.0.0.1:${port} refused user ${user}: ${text}. Its data folder was made with other credentials: remove it, or pass those.`,
              ),
            );
          else done(false);
        }
      }
    });
  });
}
