// Starting, supervising and stopping a stack (a state folder with its servers), and reaping stacks whose owner died.
// Part of the dev stack: scripts/stack.mjs is its entry point and says what it does.

import fs from 'node:fs';
import path from 'node:path';
import { TEMPORAL_SEARCH_ATTRIBUTES, ensureBinaries, which } from './binaries.mjs';
import { FERRETDB_VERSION, TEMPORAL_CLI, mtimeMs, readInt, rmrf, seconds, sleep } from './common.mjs';
import { describeVersions, listDir } from './documentdb.mjs';
import { stopLeftoverKafka } from './kafka.mjs';
import { stopLeftoverRabbitmq } from './rabbitmq.mjs';
import { stopLeftoverPrometheus } from './prometheus.mjs';
import { POSTGRES_SOCKET_PORT, postgresCommand, preparePostgresData } from './postgres.mjs';
import {
  assertPortFree,
  freePort,
  isAlive,
  mongoHello,
  postgresReady,
  postgresSocketDir,
  procStartTime,
  readStackFile,
  signalGroup,
  spawnServer,
  stopPids,
  temporalHealthy,
  waitReady,
  writeStackFile,
} from './processes.mjs';

// ---------------------------------------------------------------------------------------------
// Stack
// ---------------------------------------------------------------------------------------------

/**
 * FerretDB's environment: Go's collector at GOGC=400 (a collection once the heap has grown by 4x the live heap, not
 * by 1x), unless the caller sets GOGC. A gateway copies every document it converts: with the default about half of
 * FerretDB's CPU went to collecting (per delivered webhook 0.10 -> 0.05 ms; README, Benchmarks). Peak memory over a
 * whole webhook benchmark: ~120 MB.
 */
const ferretdbEnv = () => ({ ...process.env, GOGC: process.env.GOGC ?? '400' });

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
      throw new Error(`stack: ${stateDir} is in use by a running process (pid ${previous.owner}); stop it first, or use another state folder.`);
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
    servers[name] = { ...spec, state: spawnServer(spec.bin, spec.args, spec.logFile, spec.env) };
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
            launch('mongo', {
              label: 'FerretDB',
              bin: bins.ferretdbBin,
              args: ferretArgs,
              env: ferretdbEnv(),
              logFile: path.join(logsDir, 'ferretdb.log'),
              ...mongoProbe,
            });
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
      if (persist) args.push('--db-filename', temporalStateFile(stateDir, log));
      if (ui) {
        const uiPort = ports.temporalUi || (await freePort());
        await assertPortFree(uiPort, 'the Temporal UI', 'DEV_TEMPORAL_UI_PORT');
        args.push('--ui-port', String(uiPort));
        info.temporalUiUrl = `http://127.0.0.1:${uiPort}`;
      } else {
        args.push('--headless');
      }
      info.versions.temporal = which('temporal') ? 'Temporal CLI (on PATH)' : TEMPORAL_CLI.about;
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
        server.state = spawnServer(server.bin, server.args, server.logFile, server.env);
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

/** Stops every stack (and message broker, and Prometheus) recorded in `dir` or in folders below it (a few levels), whoever started it. */
export async function stopStacksWithin(dir, log = console.log, depth = 3) {
  for (const entry of listDir(dir)) {
    const sub = path.join(dir, entry);
    if (depth > 0 && fs.statSync(sub, { throwIfNoEntry: false })?.isDirectory()) await stopStacksWithin(sub, log, depth - 1);
  }
  if (fs.existsSync(path.join(dir, 'rabbitmq.json'))) await stopLeftoverRabbitmq({ stateDir: dir, log });
  if (fs.existsSync(path.join(dir, 'kafka.json'))) await stopLeftoverKafka({ stateDir: dir, log });
  if (fs.existsSync(path.join(dir, 'prometheus.json'))) await stopLeftoverPrometheus({ stateDir: dir, log });
  const info = readStackFileQuietly(dir);
  if (info) {
    await stopPids(info.pids, log, info);
    removeSocketDir(info);
    fs.rmSync(path.join(dir, 'stack.json'), { force: true });
  }
}

/**
 * The dev server's state file, named after the CLI that writes it: a newer server cannot be trusted with an older
 * one's file (Temporal CLI 1.9.1 on a 1.5.1 file times out creating Schedules), so an upgrade starts a fresh one and
 * says what it leaves behind. A `temporal` on PATH keeps `temporal.db`.
 */
function temporalStateFile(stateDir, log) {
  const name = which('temporal') ? 'temporal.db' : `temporal-${TEMPORAL_CLI.version}.db`;
  const others = fs.readdirSync(stateDir).filter((f) => /^temporal(-[\d.]+)?\.db$/.test(f) && f !== name);
  if (others.length && !fs.existsSync(path.join(stateDir, name))) {
    log(
      `stack: Temporal state of another CLI version (${others.join(', ')}) is left as it is; this server (${TEMPORAL_CLI.about}) ` +
        `starts with a fresh ${name}, so workflows of earlier runs are not resumed (delete .devstack/ for a clean slate).`,
    );
  }
  return path.join(stateDir, name);
}
