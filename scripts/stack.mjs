#!/usr/bin/env node
// The embedded dev stack: a real Temporal dev server and a real MongoDB-wire database on loopback, without
// Docker. The database is `mongod` if one is on PATH; else PostgreSQL 18 with the DocumentDB extension
// behind FerretDB v2 (the MongoDB wire-protocol gateway): indexed, with atomic single-document updates.
// See the design notes (devstack.md). Node built-ins only: this runs before dependencies are installed and
// from CI on a fresh clone.
//
//   node scripts/stack.mjs ensure   locate, install or build the server binaries (prints their versions)
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
const FERRETDB_VERSION = 'v2.7.0';
const TEMPORAL_PKG = `github.com/temporalio/cli/cmd/temporal@${TEMPORAL_VERSION}`;
const FERRETDB_PKG = `github.com/FerretDB/FerretDB/v2/cmd/ferretdb@${FERRETDB_VERSION}`;
/**
 * PostgreSQL + DocumentDB come from Debian sid, the only suite with `postgresql-18-documentdb` (its binaries
 * need sid's glibc, so they live in a sid root of their own). sid moves: these are the versions that
 * installed, pinned, and named in the cache folder so a different set is never mistaken for this one.
 */
const POSTGRES_MAJOR = '18';
const DEBIAN_PINS = {
  'postgresql-18': '18.6-3',
  'postgresql-18-documentdb': '1.0-0-1',
  'postgresql-18-cron': '1.6.8-1',
  // The unversioned postgis.control that `CREATE EXTENSION documentdb CASCADE` needs.
  'postgresql-postgis-scripts': '3.7.0+dfsg-1',
};
const DOCUMENTDB_BUILD = `pg${DEBIAN_PINS['postgresql-18']}-documentdb${DEBIAN_PINS['postgresql-18-documentdb']}`;
const DEFAULT_DEBIAN_MIRROR = 'http://deb.debian.org/debian';
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;
const BUILD_TICK_MS = 20_000;
// Process names we are willing to signal: a pid from an old stack.json may have been reused.
const OUR_PROCESS = /ferretdb|temporal|mongod|postgres/;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
const isRoot = () => process.getuid?.() === 0;

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
const ferretdbCachePath = () => path.join(cacheDir(), `ferretdb-${FERRETDB_VERSION}`, 'ferretdb');
const documentdbCachePath = () => path.join(cacheDir(), `postgres-documentdb-${DOCUMENTDB_BUILD}`);

/** Registered on the dev server; on a cluster, create them with `temporal operator search-attribute create` (README). */
export const TEMPORAL_SEARCH_ATTRIBUTES = ['HealthbridgeTeamId=Keyword', 'HealthbridgeUserId=Keyword', 'LabOrderStatus=Keyword'];

/**
 * Returns { temporalBin } unless TEMPORAL_ADDRESS is set, and, unless MONGO_URL is set, { mongodBin } when
 * `mongod` is on PATH, else { ferretdbBin, documentdb } (the PostgreSQL + DocumentDB installation, see
 * ensureDocumentdb).
 */
export async function ensureBinaries({ mongo = true, temporal = true, log = console.log } = {}) {
  const result = {};
  if (temporal && !process.env.TEMPORAL_ADDRESS) {
    result.temporalBin = which('temporal') || (await cachedOrBuild('temporal', temporalCachePath(), buildTemporal, log));
  }
  if (mongo && !process.env.MONGO_URL) {
    // Real MongoDB is always preferred.
    const mongod = which('mongod');
    if (mongod) result.mongodBin = mongod;
    else {
      result.documentdb = await ensureDocumentdb(log);
      result.ferretdbBin = await cachedOrBuild('ferretdb', ferretdbCachePath(), buildFerretdb, log);
    }
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
  await runLogged('build temporal', goBin, ['install', '-v', TEMPORAL_PKG], { cwd: tmp, env: { GOBIN: gobin } }, log);
  return path.join(gobin, 'temporal');
}

async function buildFerretdb({ goBin, tmp, log }) {
  log(`[build ferretdb] building FerretDB ${FERRETDB_VERSION} (MongoDB wire protocol on PostgreSQL + DocumentDB) from the Go module proxy (~30 s).`);
  const gobin = path.join(tmp, 'bin');
  fs.mkdirSync(gobin);
  await runLogged('build ferretdb', goBin, ['install', '-v', FERRETDB_PKG], { cwd: tmp, env: { GOBIN: gobin } }, log);
  return path.join(gobin, 'ferretdb');
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL + DocumentDB from Debian sid
// ---------------------------------------------------------------------------------------------

/** Where the sid root keeps its dynamic loader and libraries, per CPU. */
function sidArch() {
  if (process.arch === 'x64') return { triplet: 'x86_64-linux-gnu', loader: 'lib64/ld-linux-x86-64.so.2' };
  if (process.arch === 'arm64') return { triplet: 'aarch64-linux-gnu', loader: 'lib/ld-linux-aarch64.so.1' };
  throw new Error(`stack: no PostgreSQL + DocumentDB set-up for CPU ${process.arch}; set MONGO_URL to a MongoDB instead.`);
}

/** The installation's paths: its sid root, the empty cluster every data directory starts from, and versions. */
function documentdbPaths(dir) {
  const { triplet, loader } = sidArch();
  const root = path.join(dir, 'root');
  return {
    dir,
    root,
    template: path.join(dir, 'template'),
    versionsFile: path.join(dir, 'versions.json'),
    loader: path.join(root, loader),
    libraryPath: [path.join(root, 'usr', 'lib', triplet), path.join(root, 'usr', 'lib', 'postgresql', POSTGRES_MAJOR, 'lib')].join(':'),
    bin: (name) => path.join(root, 'usr', 'lib', 'postgresql', POSTGRES_MAJOR, 'bin', name),
  };
}

/**
 * Whether a private stack here runs the embedded PostgreSQL + DocumentDB store (what the tests of the store
 * itself need): no `mongod` on PATH (it would be preferred), and the store installed or installable (root).
 */
export function embeddedStoreAvailable() {
  return !which('mongod') && (isRoot() || fs.existsSync(documentdbPaths(documentdbCachePath()).versionsFile));
}

/** The pinned versions that were installed, e.g. `PostgreSQL 18.6-3, DocumentDB 1.0-0-1, ...`. */
export function describeVersions(documentdb) {
  try {
    const v = JSON.parse(fs.readFileSync(documentdb.versionsFile, 'utf8'));
    return `PostgreSQL ${v['postgresql-18']}, DocumentDB ${v['postgresql-18-documentdb']}, pg_cron ${v['postgresql-18-cron']}, glibc ${v.libc6} (Debian sid)`;
  } catch {
    return 'versions unknown';
  }
}

/**
 * PostgreSQL 18 with the DocumentDB extension, installed once per cache (~1 min, ~1.2 GB):
 *  1. `debootstrap` (bookworm's package, installed with apt-get if missing) lays a minimal Debian sid root;
 *  2. apt-get inside it installs the pinned packages (with /proc, /sys, /dev/pts mounted only meanwhile);
 *  3. absolute symlinks in the root are made relative, so the root works where it lies, without a chroot;
 *  4. an empty cluster with `CREATE EXTENSION documentdb CASCADE` done becomes the template that each
 *     data directory is copied from (sid's initdb cannot run outside the root: it calls `postgres` through
 *     the host's shell and loader).
 * Needs root (debootstrap, chroot, mounts). At run time the servers need no root and no chroot: they run
 * through the root's own dynamic loader (see postgresCommand).
 */
async function ensureDocumentdb(log) {
  const dir = documentdbCachePath();
  if (fs.existsSync(documentdbPaths(dir).versionsFile)) return documentdbPaths(dir);
  if (!isRoot()) throw new Error(needsRootMessage(dir));
  return withBuildLock(log, async () => {
    if (fs.existsSync(documentdbPaths(dir).versionsFile)) return documentdbPaths(dir);
    const started = Date.now();
    const tmp = fs.mkdtempSync(path.join(cacheDir(), '.build-documentdb-'));
    try {
      const paths = documentdbPaths(tmp);
      await installSidRoot(paths.root, log);
      const versions = JSON.parse(
        execFileSync('chroot', [paths.root, 'dpkg-query', '-W', '-f', '"${Package}": "${Version}",', ...Object.keys(DEBIAN_PINS), 'libc6'], {
          encoding: 'utf8',
        }).replace(/^/, '{').replace(/,$/, '}'),
      );
      fs.writeFileSync(path.join(tmp, 'versions.pending.json'), `${JSON.stringify(versions, null, 2)}\n`);
      await createTemplateCluster(paths, log);
      // versions.json last: its presence marks a complete installation.
      fs.renameSync(path.join(tmp, 'versions.pending.json'), paths.versionsFile);
      fs.chmodSync(tmp, 0o755); // mkdtemp's 0700 would hide it from the non-root users who run it after a sudo set-up
      fs.renameSync(tmp, dir);
      log(`[setup documentdb] done in ${Math.round((Date.now() - started) / 1000)} s: ${dir}`);
      return documentdbPaths(dir);
    } finally {
      rmrf(tmp);
    }
  });
}

function needsRootMessage(dir) {
  const quote = (p) => `'${p.replace(/'/g, `'\\''`)}'`;
  return (
    `stack: PostgreSQL + DocumentDB (the embedded MongoDB-wire database) is not installed yet (${dir}).\n` +
    `Installing it needs root once (debootstrap lays a Debian sid root, apt-get installs into it); running it does not.\n` +
    `Fix, once per machine:\n` +
    `  sudo env HEALTHBRIDGE_CACHE_DIR=${quote(cacheDir())} PATH="$PATH" ${quote(process.execPath)} ${quote(fileURLToPath(import.meta.url))} ensure\n` +
    `Or use a MongoDB you run yourself: MONGO_URL=mongodb://127.0.0.1:27017/ npm test (npm run dev likewise),\n` +
    `or put \`mongod\` on PATH.`
  );
}

async function installSidRoot(root, log) {
  const prefix = 'setup documentdb';
  if (!which('debootstrap')) {
    log(`[${prefix}] installing debootstrap from Debian (apt-get install debootstrap)...`);
    try {
      await runLogged(prefix, 'apt-get', ['install', '-y', '--no-install-recommends', 'debootstrap'], { quiet: true }, log);
    } catch {
      await runLogged(prefix, 'apt-get', ['update'], { quiet: true }, log);
      await runLogged(prefix, 'apt-get', ['install', '-y', '--no-install-recommends', 'debootstrap'], { quiet: true }, log);
    }
  }
  const mirror = debianMirror();
  log(
    `[${prefix}] installing PostgreSQL ${DEBIAN_PINS['postgresql-18']} + DocumentDB ${DEBIAN_PINS['postgresql-18-documentdb']} ` +
      `from Debian sid (${mirror}) into ${path.dirname(root)}.\n` +
      `[${prefix}] Once per cache: about a minute and ~1.2 GB; needs root (debootstrap, chroot).`,
  );
  log(`[${prefix}] debootstrap --variant=minbase sid (a minimal Debian sid root, ~30 s)...`);
  await runLogged(prefix, 'debootstrap', ['--variant=minbase', 'sid', root, mirror], { quiet: true }, log);
  // No service may start inside the root while packages install.
  fs.writeFileSync(path.join(root, 'usr', 'sbin', 'policy-rc.d'), '#!/bin/sh\nexit 101\n', { mode: 0o755 });
  // The package step runs in a mount namespace of its own: /proc, /sys and /dev/pts are mounted into the root
  // there (postgresql-common's install scripts need /proc; apt wants /dev/pts), and the kernel drops them when
  // it ends, however it ends (Ctrl-C, kill -9): nothing stays mounted on the host.
  // The archive's sid index is older than its Valid-Until date here; apt refuses it unless told not to check.
  const apt = 'apt-get -o Acquire::Check-Valid-Until=false -o Dpkg::Use-Pty=0';
  const packages = Object.entries(DEBIAN_PINS).map(([name, version]) => `${name}=${version}`);
  const script = [
    'root="$1"; shift',
    'mount -t proc proc "$root/proc"',
    'mount -t sysfs sysfs "$root/sys"',
    'mount --bind /dev/pts "$root/dev/pts"',
    `chroot "$root" ${apt} update`,
    `chroot "$root" ${apt} install -y --no-install-recommends "$@"`,
    'chroot "$root" apt-get clean',
  ].join('\n');
  const env = { DEBIAN_FRONTEND: 'noninteractive', LC_ALL: 'C', PATH: '/usr/sbin:/usr/bin:/sbin:/bin' };
  log(`[${prefix}] apt-get install ${packages.join(' ')} inside the root (private mounts; ~15–45 s)...`);
  try {
    await runLogged(
      prefix,
      which('unshare') || 'unshare',
      ['--mount', '--propagation', 'private', '--', '/bin/sh', '-ec', script, 'install', root, ...packages],
      { env, quiet: true },
      log,
    );
  } catch (err) {
    throw new Error(
      `${err.message}\n[${prefix}] If apt says a pinned version was not found, Debian sid has moved on: update DEBIAN_PINS in ` +
        `scripts/stack.mjs to the versions \`apt-cache policy\` shows inside the root, or set MONGO_URL to a MongoDB.`,
    );
  }
  const relinked = relativizeSymlinks(root);
  log(`[${prefix}] ${relinked} absolute symlinks in the root made relative`);
}

/** The Debian archive the host's own apt sources name (overridable with DEBIAN_MIRROR). */
function debianMirror() {
  if (process.env.DEBIAN_MIRROR) return process.env.DEBIAN_MIRROR;
  const texts = [];
  for (const file of ['/etc/apt/sources.list', ...listDir('/etc/apt/sources.list.d').map((f) => path.join('/etc/apt/sources.list.d', f))]) {
    try {
      texts.push(fs.readFileSync(file, 'utf8'));
    } catch {}
  }
  for (const text of texts) {
    for (const line of text.split('\n')) {
      const oneLine = /^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)/.exec(line);
      if (oneLine && /\/debian\/?$/.test(oneLine[1])) return oneLine[1];
      const deb822 = /^\s*URIs:\s*(\S+)/i.exec(line);
      if (deb822 && /\/debian\/?$/.test(deb822[1])) return deb822[1];
    }
  }
  return DEFAULT_DEBIAN_MIRROR;
}

function listDir(dir) {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

/**
 * A symlink to `/etc/alternatives/x` means the host's file once the root is used without a chroot: point each
 * absolute link at the same path inside the root instead (chains stay inside it).
 */
function relativizeSymlinks(root) {
  let count = 0;
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, entry.name);
      if (entry.isSymbolicLink()) {
        const target = fs.readlinkSync(p);
        if (!target.startsWith('/')) continue;
        fs.unlinkSync(p);
        fs.symlinkSync(path.relative(dir, path.join(root, target)) || '.', p);
        count++;
      } else if (entry.isDirectory()) walk(p);
    }
  };
  walk(root);
  return count;
}

/** postgresql.conf lines of every cluster (the port and address are set per start, see postgresCommand). */
const POSTGRES_CONF = [
  '# Healthbridge embedded store (scripts/stack.mjs)',
  "shared_preload_libraries = 'pg_cron,pg_documentdb_core,pg_documentdb'",
  "cron.database_name = 'postgres'",
  "timezone = 'UTC'",
  "log_timezone = 'UTC'",
].join('\n');

async function createTemplateCluster(paths, log) {
  const prefix = 'setup documentdb';
  log(`[${prefix}] creating the template cluster (initdb, CREATE EXTENSION documentdb CASCADE)...`);
  // initdb runs inside the root (as its postgres user: PostgreSQL refuses root), then the cluster moves out.
  const inRoot = '/var/lib/healthbridge-template';
  const idOf = (flag) => Number(execFileSync('chroot', [paths.root, 'id', flag, 'postgres'], { encoding: 'utf8' }).trim());
  fs.mkdirSync(path.join(paths.root, inRoot), { mode: 0o700 });
  fs.chownSync(path.join(paths.root, inRoot), idOf('-u'), idOf('-g'));
  await runLogged(
    prefix,
    'chroot',
    ['--userspec=postgres:postgres', paths.root, `/usr/lib/postgresql/${POSTGRES_MAJOR}/bin/initdb`, '-D', inRoot, '-A', 'trust', '-U', 'postgres', '--locale=C', '--encoding=UTF8'],
    { env: { LC_ALL: 'C' }, quiet: true },
    log,
  );
  fs.renameSync(path.join(paths.root, inRoot), paths.template);
  walkTree(paths.template, (p) => fs.lchownSync(p, process.getuid(), process.getgid()));
  fs.appendFileSync(path.join(paths.template, 'postgresql.conf'), `\n${POSTGRES_CONF}\n`);

  // Start it the way every run does, create the extension, stop it cleanly.
  const socketDir = path.join(path.dirname(paths.template), 'socket');
  fs.mkdirSync(socketDir, { mode: 0o700 });
  const logFile = path.join(path.dirname(paths.template), 'template.log');
  const [bin, args] = postgresCommand(paths, paths.template, socketDir);
  const server = spawnServer(bin, args, logFile);
  try {
    await waitReady({ label: 'PostgreSQL (template)', server, logFile, probe: () => postgresReady(socketDir), interval: 100 });
    await runLogged(
      prefix,
      paths.loader,
      ['--library-path', paths.libraryPath, paths.bin('psql'), '-h', socketDir, '-p', String(POSTGRES_SOCKET_PORT), '-U', 'postgres', '-v', 'ON_ERROR_STOP=1', '-c', 'CREATE EXTENSION documentdb CASCADE'],
      { quiet: true },
      log,
    );
  } finally {
    // Fast shutdown, as for every stack: a clean checkpoint, nothing for a copy to recover.
    await stopPids({ postgres: server.child.pid }, () => {}, { stopSignals: { postgres: 'SIGINT' } });
    fs.rmSync(socketDir, { recursive: true, force: true });
  }
  for (const leftover of ['postmaster.pid', 'postmaster.opts']) fs.rmSync(path.join(paths.template, leftover), { force: true });
  // Readable by anyone, so a non-root user can copy it (an empty cluster; each copy is its owner's alone).
  walkTree(paths.template, (p, kind) => kind !== 'link' && fs.chmodSync(p, fs.statSync(p).mode | (kind === 'dir' ? 0o555 : 0o444)));
}

/** Calls `visit(path, kind)` for `dir` ('dir') and everything below it ('dir', 'file' or 'link'), children first. */
function walkTree(dir, visit) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) walkTree(p, visit);
    else visit(p, entry.isSymbolicLink() ? 'link' : 'file');
  }
  visit(dir, 'dir');
}

/**
 * PostgreSQL listens on a Unix socket only, in a folder of the stack's own (mode 0700), never on TCP: the cluster
 * trusts its connections, so only the user who started it (and root) may reach it. The socket's name still
 * carries a port number; one is enough, since each stack has its own folder.
 */
const POSTGRES_SOCKET_PORT = 5432;
const POSTGRES_SOCKET_MAX = 100; // a Unix socket path longer than ~107 bytes cannot be bound

/**
 * The command that runs sid's `postgres` on this host: through the root's own dynamic loader and libraries
 * (the host's glibc is older), so no chroot and no mount is needed. PostgreSQL refuses to run as root; as root,
 * the server runs in a user namespace where it is `nobody` while its files stay the invoking user's (no second
 * account, no chown, and every path the caller can reach stays reachable).
 */
function postgresCommand(documentdb, dataDir, socketDir) {
  const args = [
    '--library-path',
    documentdb.libraryPath,
    documentdb.bin('postgres'),
    '-D',
    dataDir,
    '-c',
    `port=${POSTGRES_SOCKET_PORT}`,
    '-c',
    'listen_addresses=',
    '-c',
    `unix_socket_directories=${socketDir}`,
    '-c',
    'unix_socket_permissions=0700',
    // DocumentDB runs some commands over a connection of its own to `localhost`: point it at the socket.
    '-c',
    `documentdb.localhost_connection_string=host=${socketDir} port=${POSTGRES_SOCKET_PORT}`,
    // pg_cron runs DocumentDB's jobs (TTL expiry, background index builds, cursor clean-up) in background
    // workers: the jobs' stored host and port are the template cluster's, which no stack listens on.
    '-c',
    'cron.use_background_workers=on',
    '-c',
    'cron.log_run=off', // two jobs every 2 s would fill the log
    '-c',
    'max_worker_processes=32',
  ];
  if (!isRoot()) return [documentdb.loader, args];
  return [which('unshare') || 'unshare', ['--user', '--map-user=65534', '--map-group=65534', '--', documentdb.loader, ...args]];
}

/** A data directory of the stack's own: a copy of the template cluster (instant, versus initdb + extension). */
function preparePostgresData(documentdb, dataDir) {
  if (fs.existsSync(path.join(dataDir, 'PG_VERSION'))) return false;
  fs.rmSync(dataDir, { recursive: true, force: true });
  fs.cpSync(documentdb.template, dataDir, { recursive: true });
  // PostgreSQL requires its data directory to be the owner's alone (0700); files 0600.
  walkTree(dataDir, (p, kind) => kind !== 'link' && fs.chmodSync(p, kind === 'dir' ? 0o700 : 0o600));
  return true;
}

/** Mount points at or below `dir` (deepest first), from /proc/self/mountinfo. */
function mountsUnder(dir) {
  let text = '';
  try {
    text = fs.readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return [];
  }
  let prefix = path.resolve(dir);
  try {
    prefix = fs.realpathSync(prefix); // mountinfo lists real paths
  } catch {}
  return text
    .split('\n')
    .map((line) => line.split(' ')[4]?.replace(/\\([0-7]{3})/g, (_, octal) => String.fromCharCode(parseInt(octal, 8))))
    .filter((p) => p && (p === prefix || p.startsWith(`${prefix}/`)))
    .sort((a, b) => b.length - a.length);
}

/**
 * Removes a tree, never through a mount: whatever is mounted inside it (the set-up mounts in a namespace of its
 * own, so only a foreign mount can be) is unmounted first, and the removal refused if that fails.
 */
function rmrf(p) {
  for (const mountPoint of mountsUnder(p)) {
    try {
      execFileSync('umount', ['--lazy', mountPoint]);
    } catch {}
  }
  const left = mountsUnder(p);
  if (left.length) throw new Error(`stack: will not remove ${p}: ${left.join(', ')} still mounted there; unmount by hand.`);
  try {
    // Module-cache copies are read-only, which blocks removal for non-root users.
    walkTree(p, (q, kind) => kind !== 'link' && fs.chmodSync(q, fs.statSync(q).mode | 0o200));
  } catch {}
  fs.rmSync(p, { recursive: true, force: true });
}

/**
 * Runs a set-up command, forwarding its messages prefixed. Go's `-v` package lines are only counted (a cold
 * Temporal build compiles over a thousand packages); with `quiet`, only the last lines are kept and shown if
 * it fails. Either way a tick reports the elapsed time.
 */
function runLogged(name, bin, args, { cwd, env = {}, quiet = false }, log) {
  const prefix = `[${name}]`;
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const child = spawn(bin, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let packages = 0;
    const recent = [];
    const keep = (line) => {
      recent.push(line);
      if (recent.length > 40) recent.shift();
    };
    child.stdout.on('data', (d) => {
      stdout += d;
      if (stdout.length > 1_000_000) stdout = stdout.slice(-100_000);
    });
    readline.createInterface({ input: child.stdout }).on('line', keep);
    readline.createInterface({ input: child.stderr }).on('line', (line) => {
      keep(line);
      if (/^[\w.~+-]+(\/[\w.~+-]+)*$/.test(line)) packages++;
      else if (!quiet && !line.startsWith('go: downloading')) log(`${prefix} ${line}`);
    });
    const tick = setInterval(() => {
      const compiled = packages ? `, ${packages} packages compiled` : '';
      log(`${prefix} still running: ${Math.round((Date.now() - started) / 1000)} s elapsed${compiled}`);
    }, BUILD_TICK_MS);
    child.on('error', (err) => {
      clearInterval(tick);
      reject(new Error(`${prefix} could not run ${bin}: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearInterval(tick);
      if (code === 0) resolve(stdout);
      else reject(new Error(`${prefix} \`${path.basename(bin)} ${args.join(' ')}\` failed (${signal || `exit ${code}`}):\n${recent.join('\n')}`));
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
function isAlive(pid) {
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
function procStartTime(pid) {
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
function isOurs(pid, start = null) {
  if (!(Number.isInteger(pid) && pid > 0 && isAlive(pid) && OUR_PROCESS.test(commandLine(pid)))) return false;
  return start == null || procStartTime(pid) === start;
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

/**
 * Stops the servers of a stack.json record ({ pids, stopSignals, starts }): each gets its stop signal
 * (default SIGTERM to its process group). PostgreSQL gets SIGINT, its fast shutdown, at the postmaster alone;
 * if it has not stopped in time, SIGQUIT (immediate shutdown) and then SIGKILL for it and its children, which
 * are in process groups of their own. Anything else left after STOP_TIMEOUT_MS is SIGKILLed with its group.
 */
async function stopPids(pids, log, { stopSignals = {}, starts = {} } = {}) {
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

// Starts a server in its own process group with output appended to its log file, so it outlives this
// process (the dev stack runs in the background) and stopStack can kill it as a group.
function spawnServer(bin, args, logFile) {
  const fd = fs.openSync(logFile, 'a');
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

/** The socket folder of a stack: in its state folder, or under the temp folder when that path is too long to bind. */
function postgresSocketDir(stateDir) {
  const inState = path.join(stateDir, 'postgres-socket');
  const dir = `${inState}/.s.PGSQL.${POSTGRES_SOCKET_PORT}`.length <= POSTGRES_SOCKET_MAX ? inState : fs.mkdtempSync(path.join(os.tmpdir(), 'hb-pg-'));
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  return dir;
}

// Readiness: PostgreSQL accepts a session (a StartupMessage answered with AuthenticationOk, trust auth); while
// it starts or recovers it answers with an error instead.
function postgresReady(socketDir) {
  return new Promise((resolve) => {
    const params = Buffer.from('user\0postgres\0database\0postgres\0\0', 'utf8');
    const startup = Buffer.alloc(8);
    startup.writeInt32BE(8 + params.length, 0);
    startup.writeInt32BE(196608, 4); // protocol 3.0
    const socket = net.connect({ path: path.join(socketDir, `.s.PGSQL.${POSTGRES_SOCKET_PORT}`) });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write(Buffer.concat([startup, params])));
    socket.once('data', (d) => done(d[0] === 0x52 && d.length >= 9 && d.readInt32BE(5) === 0)); // 'R', AuthenticationOk
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

/** Supervision of the stacks this process started, by state dir (see superviseServers). */
const supervisors = new Map();
/** Starts under way in this process, by state dir (stopStack aborts them). */
const startsInFlight = new Map();

/**
 * Starts the servers that MONGO_URL / TEMPORAL_ADDRESS do not replace, on loopback, and waits until they
 * answer. `persist` only concerns Temporal (false: in-memory). The database always lives in
 * `${stateDir}/postgres` (or `mongod`): use a fresh stateDir for an empty database. With `supervise` (true, or
 * the options of superviseServers), a server that exits unexpectedly is started again on the same port and
 * data (logged; the delay doubles after quick failures), as `npm run dev` does for the api and the worker.
 * Returns { mongoUrl, temporalAddress, temporalUiUrl, pids, stopSignals, versions, ... } (also in stack.json).
 */
export async function startStack({ stateDir, ports = {}, ui = true, persist = true, supervise = false, log = console.log } = {}) {
  if (!stateDir) throw new Error('startStack: stateDir is required');
  stateDir = path.resolve(stateDir);
  const logsDir = path.join(stateDir, 'logs');
  fs.mkdirSync(logsDir, { recursive: true });
  // Claimed at once, so reapAbandonedStacks leaves a folder alone while its stack is still starting.
  fs.writeFileSync(path.join(stateDir, 'owner.pid'), String(process.pid));

  // A run that was killed leaves its servers behind; they hold the ports and the files.
  const previous = readStackFile(stateDir);
  if (previous) {
    // ...unless the process that started them is still running (e.g. a second `npm run dev`).
    if (previous.owner && previous.owner !== process.pid && isAlive(previous.owner)) {
      throw new Error(
        `stack: ${stateDir} is in use by a running process (pid ${previous.owner}); stop it first, or use another state folder.`,
      );
    }
    await stopPids(previous.pids, log, previous);
    removeSocketDir(previous);
    fs.rmSync(path.join(stateDir, 'stack.json'), { force: true });
  }
  const starting = { aborted: false };
  startsInFlight.set(stateDir, starting);

  const externalMongo = process.env.MONGO_URL || null;
  const externalTemporal = process.env.TEMPORAL_ADDRESS || null;
  const bins = await ensureBinaries({ log });

  const info = {
    mongoUrl: externalMongo,
    temporalAddress: externalTemporal,
    temporalUiUrl: externalTemporal ? process.env.TEMPORAL_UI_URL || null : null,
    pids: {},
    /** Each server's start time (/proc/<pid>/stat), so a pid reused by another process is never signalled. */
    starts: {},
    stopSignals: {},
    versions: {},
    owner: process.pid,
    startedAt: new Date().toISOString(),
  };
  /** name -> { label, bin, args, logFile, probe, interval, state } */
  const servers = {};
  // Each launch is recorded at once, so a stop (or the next start, after a kill) finds every server.
  const launch = (name, spec) => {
    if (starting.aborted) throw new Error(`stack: start of ${stateDir} stopped before ${spec.label} was launched`);
    servers[name] = { ...spec, state: spawnServer(spec.bin, spec.args, spec.logFile) };
    info.pids[name] = servers[name].state.child.pid;
    info.starts[name] = procStartTime(info.pids[name]);
    if (spec.stopSignal) info.stopSignals[name] = spec.stopSignal;
    writeStackFile(stateDir, info);
    return servers[name];
  };
  const ready = async (name) => {
    const server = servers[name];
    const ms = await waitReady({ label: server.label, server: server.state, logFile: server.logFile, probe: server.probe, interval: server.interval });
    log(`stack: ${server.label} ready (${seconds(ms)})`);
  };
  const pending = [];

  try {
    if (!externalMongo) {
      const port = ports.mongo || (await freePort());
      await assertPortFree(port, 'the database', 'DEV_MONGO_PORT');
      info.mongoUrl = `mongodb://127.0.0.1:${port}/`;
      const mongoProbe = { probe: () => mongoHello(port), interval: 100 };
      if (bins.mongodBin) {
        const dbPath = path.join(stateDir, 'mongod');
        fs.mkdirSync(dbPath, { recursive: true });
        log(`stack: starting MongoDB on 127.0.0.1:${port} ...`);
        const args = ['--dbpath', dbPath, '--port', String(port), '--bind_ip', '127.0.0.1'];
        launch('mongo', { label: 'MongoDB', bin: bins.mongodBin, args, logFile: path.join(logsDir, 'mongod.log'), ...mongoProbe });
        info.versions.database = 'MongoDB (mongod on PATH)';
        pending.push(ready('mongo'));
      } else {
        const dataDir = path.join(stateDir, 'postgres');
        if (preparePostgresData(bins.documentdb, dataDir)) log(`stack: new PostgreSQL data directory ${dataDir} (from the template cluster)`);
        const socketDir = postgresSocketDir(stateDir);
        info.postgresSocketDir = socketDir;
        info.versions.database = `FerretDB ${FERRETDB_VERSION} on ${describeVersions(bins.documentdb)}`;
        log(`stack: starting PostgreSQL + DocumentDB on the Unix socket in ${socketDir} (${describeVersions(bins.documentdb)}) ...`);
        const [pgBin, pgArgs] = postgresCommand(bins.documentdb, dataDir, socketDir);
        launch('postgres', {
          label: 'PostgreSQL',
          bin: pgBin,
          args: pgArgs,
          logFile: path.join(logsDir, 'postgres.log'),
          probe: () => postgresReady(socketDir),
          interval: 100,
          stopSignal: 'SIGINT',
        });
        const ferretState = path.join(stateDir, 'ferretdb');
        fs.mkdirSync(ferretState, { recursive: true });
        const ferretArgs = [
          `--postgresql-url=postgres://postgres@/postgres?host=${encodeURIComponent(socketDir)}&port=${POSTGRES_SOCKET_PORT}`,
          `--listen-addr=127.0.0.1:${port}`,
          '--no-auth', // loopback only, as mongod's default
          `--state-dir=${ferretState}`,
          '--debug-addr=-', // the default fixed 127.0.0.1:8088 would clash between parallel stacks
          '--telemetry=disable',
          '--log-level=warn',
        ];
        // FerretDB checks the DocumentDB extension when it starts: after PostgreSQL answers.
        pending.push(
          ready('postgres').then(() => {
            log(`stack: starting FerretDB ${FERRETDB_VERSION} (MongoDB wire protocol) on 127.0.0.1:${port} ...`);
            launch('mongo', { label: 'FerretDB', bin: bins.ferretdbBin, args: ferretArgs, logFile: path.join(logsDir, 'ferretdb.log'), ...mongoProbe });
            return ready('mongo');
          }),
        );
      }
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
      info.versions.temporal = `Temporal CLI ${which('temporal') ? '(on PATH)' : TEMPORAL_VERSION}`;
      log(`stack: starting Temporal dev server on 127.0.0.1:${port}${ui ? ` (UI ${info.temporalUiUrl})` : ''} ...`);
      launch('temporal', {
        label: 'Temporal',
        bin: bins.temporalBin,
        args,
        logFile: path.join(logsDir, 'temporal.log'),
        probe: () => temporalHealthy(bins.temporalBin, port),
        interval: 300,
      });
      info.temporalAddress = `127.0.0.1:${port}`;
      pending.push(ready('temporal'));
    }

    // Recorded before waiting, so a run killed during start-up is still cleaned up by the next one.
    writeStackFile(stateDir, info);
    const results = await Promise.allSettled(pending);
    const failure = results.find((r) => r.status === 'rejected');
    if (failure) throw failure.reason;
  } catch (err) {
    await stopPids(info.pids, () => {}, info);
    for (const { state } of Object.values(servers)) if (state.child.pid && isAlive(state.child.pid)) signalGroup(state.child.pid, 'SIGKILL');
    removeSocketDir(info);
    fs.rmSync(path.join(stateDir, 'stack.json'), { force: true });
    throw err;
  } finally {
    startsInFlight.delete(stateDir);
  }

  writeStackFile(stateDir, info);
  if (supervise) superviseServers({ stateDir, info, servers, log, ...(typeof supervise === 'object' ? supervise : {}) });
  return info;
}

/**
 * Restarts any server of a stack that exits without stopStack having been called: same command, port and
 * data (PostgreSQL recovers from its WAL; FerretDB reconnects). The delay doubles after each quick failure
 * (0.5 s … 10 s; PostgreSQL refuses to start while the children of a killed postmaster are still exiting) and
 * resets once a run lasts a minute. stack.json follows the new pids.
 */
function superviseServers({ stateDir, info, servers, log, initialDelayMs = 500, maxDelayMs = 10_000, stableMs = 60_000 }) {
  const supervisor = { stopped: false, timers: new Set() };
  supervisors.set(stateDir, supervisor);
  const watch = (name) => {
    const server = servers[name];
    const startedAt = Date.now();
    server.state.child.ref(); // a supervising process stays alive to supervise
    server.state.child.once('exit', (code, signal) => {
      if (supervisor.stopped) return;
      const ranMs = Date.now() - startedAt;
      if (ranMs >= stableMs) server.delayMs = initialDelayMs;
      server.delayMs = server.delayMs ?? initialDelayMs;
      server.restarts = (server.restarts ?? 0) + 1;
      log(
        `stack: ${server.label} (pid ${server.state.child.pid}) exited unexpectedly (${signal ? `signal ${signal}` : `code ${code}`}) ` +
          `after ${seconds(ranMs)}; restarting in ${seconds(server.delayMs)} (restart ${server.restarts}; log ${server.logFile})`,
      );
      const timer = setTimeout(() => {
        supervisor.timers.delete(timer);
        if (supervisor.stopped) return;
        // Stopped from elsewhere (stack.json gone or taken over): not ours to restart any more.
        if (readStackFileQuietly(stateDir)?.owner !== process.pid) {
          log(`stack: ${server.label} not restarted: the stack in ${stateDir} is no longer this process's`);
          return;
        }
        server.state = spawnServer(server.bin, server.args, server.logFile);
        info.pids[name] = server.state.child.pid;
        info.starts[name] = procStartTime(info.pids[name]);
        writeStackFile(stateDir, info);
        log(`stack: ${server.label} restarted (pid ${server.state.child.pid})`);
        watch(name);
      }, server.delayMs);
      supervisor.timers.add(timer);
      server.delayMs = Math.min(server.delayMs * 2, maxDelayMs);
    });
  };
  for (const name of Object.keys(servers)) watch(name);
}

/**
 * Stops a stack. One another live process started (and supervises) is left alone, unless `force` (the CLI's
 * `stop`): then that process is asked to stop (SIGTERM: `npm run dev` and `npm test` stop everything they
 * started), since its supervisor would restart servers stopped behind its back; whatever is still recorded
 * after it exits (or after 30 s) is stopped here.
 */
export async function stopStack({ stateDir, log = console.log, force = false } = {}) {
  if (!stateDir) throw new Error('stopStack: stateDir is required');
  stateDir = path.resolve(stateDir);
  const inFlight = startsInFlight.get(stateDir);
  if (inFlight) inFlight.aborted = true; // a start still under way launches nothing more
  const supervisor = supervisors.get(stateDir);
  if (supervisor) {
    supervisor.stopped = true;
    for (const timer of supervisor.timers) clearTimeout(timer);
    supervisors.delete(stateDir);
  }
  let info = readStackFile(stateDir);
  if (!info) return;
  if (info.owner && info.owner !== process.pid && isAlive(info.owner)) {
    if (!force) {
      log(`stack: left running (started by live process ${info.owner})`);
      return;
    }
    log(`stack: asking its owner (pid ${info.owner}) to stop it ...`);
    try {
      process.kill(info.owner, 'SIGTERM');
    } catch {}
    const deadline = Date.now() + 30_000;
    while (isAlive(info.owner) && Date.now() < deadline) await sleep(100);
    info = readStackFile(stateDir);
    if (!info) return;
  }
  await stopPids(info.pids, log, info);
  removeSocketDir(info);
  fs.rmSync(path.join(stateDir, 'stack.json'), { force: true });
}

function readStackFileQuietly(stateDir) {
  try {
    return readStackFile(stateDir);
  } catch {
    return null;
  }
}

/** A socket folder made under the temp folder (a long state path) goes with its stack. */
function removeSocketDir(info) {
  const dir = info?.postgresSocketDir;
  if (dir && path.basename(dir).startsWith('hb-pg-')) fs.rmSync(dir, { recursive: true, force: true });
}

/**
 * Private stacks (`npm test`, `npm run bench`) live in state folders of their own under `parentDir`; a run that
 * was killed (SIGKILL, a closed terminal) left its servers running and its data behind. Stops and removes those
 * of owners that are gone, with any stack started inside them (a test's own database stack).
 */
export async function reapAbandonedStacks({ parentDir, prefix, log = console.log }) {
  for (const entry of listDir(parentDir)) {
    if (!entry.startsWith(prefix)) continue;
    const stateDir = path.join(parentDir, entry);
    const owner = readStackFileQuietly(stateDir)?.owner ?? readInt(path.join(stateDir, 'owner.pid'));
    if (owner ? isAlive(owner) : Date.now() - mtimeMs(stateDir) < 3_600_000) continue;
    log(`stack: cleaning up ${stateDir}, left by a run that is gone${owner ? ` (pid ${owner})` : ''}`);
    await stopStacksWithin(stateDir, log);
    rmrf(stateDir);
  }
}

/** Stops every stack recorded in `dir` or in folders below it (a few levels), whoever started it. */
export async function stopStacksWithin(dir, log = console.log, depth = 3) {
  for (const entry of listDir(dir)) {
    const sub = path.join(dir, entry);
    if (depth > 0 && fs.statSync(sub, { throwIfNoEntry: false })?.isDirectory()) await stopStacksWithin(sub, log, depth - 1);
  }
  const info = readStackFileQuietly(dir);
  if (info) {
    await stopPids(info.pids, log, info);
    removeSocketDir(info);
    fs.rmSync(path.join(dir, 'stack.json'), { force: true });
  }
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

/** The dev stack's fixed ports (`npm run dev`, `stack.mjs start`), each movable with its variable. */
export function devPorts() {
  return {
    mongo: envPort('DEV_MONGO_PORT', 27017),
    temporal: envPort('DEV_TEMPORAL_PORT', 7233),
    temporalUi: envPort('DEV_TEMPORAL_UI_PORT', 8233),
  };
}

async function main(cmd) {
  switch (cmd) {
    case 'ensure': {
      const bins = await ensureBinaries();
      for (const [key, value] of Object.entries(bins)) {
        if (key === 'documentdb') console.log(`postgres + documentdb: ${value.dir}\n  ${describeVersions(value)}`);
        else console.log(`${key}: ${value}`);
      }
      if (process.env.MONGO_URL) console.log(`database: external (MONGO_URL)`);
      if (process.env.TEMPORAL_ADDRESS) console.log(`temporal: external (TEMPORAL_ADDRESS)`);
      return 0;
    }
    case 'start': {
      // The servers are in their own process groups, so Ctrl-C would not reach them: clean up here.
      const abort = async () => {
        await stopStack({ stateDir: DEV_STATE_DIR, log: () => {} }).catch(() => {});
        process.exit(130);
      };
      process.once('SIGINT', abort);
      process.once('SIGTERM', abort);
      const info = await startStack({ stateDir: DEV_STATE_DIR, ports: devPorts() });
      console.log(`\nDev stack running (state and logs in ${DEV_STATE_DIR}):`);
      console.log(`  MONGO_URL=${info.mongoUrl}`);
      console.log(`  TEMPORAL_ADDRESS=${info.temporalAddress}`);
      if (info.temporalUiUrl) console.log(`  Temporal UI: ${info.temporalUiUrl}`);
      for (const version of Object.values(info.versions)) console.log(`  ${version}`);
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
        const alive = isOurs(pid, info.starts?.[name]);
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
