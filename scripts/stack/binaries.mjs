// The server binaries: Temporal's dev server and FerretDB, built once with Go into the user cache (or found on PATH).
// Part of the dev stack: scripts/stack.mjs is its entry point and says what it does.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DOCUMENTDB_BUILD, FERRETDB_PKG, FERRETDB_VERSION, TEMPORAL_PKG, TEMPORAL_VERSION, rmrf, runLogged, withBuildLock } from './common.mjs';
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

const temporalCachePath = () => path.join(cacheDir(), `temporal-${TEMPORAL_VERSION}`, 'temporal');
const ferretdbCachePath = () => path.join(cacheDir(), `ferretdb-${FERRETDB_VERSION}`, 'ferretdb');
export const documentdbCachePath = () => path.join(cacheDir(), `postgres-documentdb-${DOCUMENTDB_BUILD}`);

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
