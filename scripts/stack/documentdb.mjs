// PostgreSQL 18 with the DocumentDB extension, installed once from Debian sid into the user cache (no root needed when it is there).
// Part of the dev stack: scripts/stack.mjs is its entry point and says what it does.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheDir, documentdbCachePath, which } from './binaries.mjs';
import { DEBIAN_PINS, DEFAULT_DEBIAN_MIRROR, POSTGRES_MAJOR, isRoot, rmrf, runLogged, withBuildLock } from './common.mjs';
import { createTemplateCluster } from './postgres.mjs';

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
export async function ensureDocumentdb(log) {
  const dir = documentdbCachePath();
  if (fs.existsSync(documentdbPaths(dir).versionsFile)) return documentdbPaths(dir);
  if (!isRoot()) throw new Error(needsRootMessage(dir));
  return withBuildLock('documentdb', log, async () => {
    if (fs.existsSync(documentdbPaths(dir).versionsFile)) return documentdbPaths(dir);
    const started = Date.now();
    const tmp = fs.mkdtempSync(path.join(cacheDir(), '.build-documentdb-'));
    try {
      const paths = documentdbPaths(tmp);
      await installSidRoot(paths.root, log);
      const versions = JSON.parse(
        execFileSync('chroot', [paths.root, 'dpkg-query', '-W', '-f', '"${Package}": "${Version}",', ...Object.keys(DEBIAN_PINS), 'libc6'], {
          encoding: 'utf8',
        })
          .replace(/^/, '{')
          .replace(/,$/, '}'),
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
    `  sudo env HEALTHBRIDGE_CACHE_DIR=${quote(cacheDir())} PATH="$PATH" ${quote(process.execPath)} ${quote(fileURLToPath(new URL('../stack.mjs', import.meta.url)))} ensure\n` +
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
        `scripts/stack/common.mjs to the versions \`apt-cache policy\` shows inside the root, or set MONGO_URL to a MongoDB.`,
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

export function listDir(dir) {
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
