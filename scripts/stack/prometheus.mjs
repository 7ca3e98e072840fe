// A real Prometheus server for the metrics tests: Debian bookworm's package unpacked once into the user cache, run
// from there on loopback, scraping the targets it is given. Part of the dev stack: scripts/stack.mjs says what it does.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { cacheDir, which } from './binaries.mjs';
import { STOP_TIMEOUT_MS, aptDownload, rmrf, runLogged, seconds, withBuildLock } from './common.mjs';
import { freePort, isAlive, procStartTime, signalGroup, spawnServer, waitReady } from './processes.mjs';

/** Debian bookworm's Prometheus, pinned (`apt-cache policy prometheus` shows what a point release replaced it with). */
export const PROMETHEUS_DEBIAN_VERSION = '2.42.0+ds-5+deb12u1';
const prometheusCachePath = () => path.join(cacheDir(), `prometheus-${PROMETHEUS_DEBIAN_VERSION}`);
const binaryOf = (dir) => path.join(dir, 'root/usr/bin/prometheus');

/** Prometheus in the cache (once: `apt-get download`, `dpkg-deb -x`; no service installed). Returns { bin, version }. */
export async function ensurePrometheus({ log = console.log } = {}) {
  const done = () => ({
    bin: binaryOf(prometheusCachePath()),
    version: `Prometheus ${PROMETHEUS_DEBIAN_VERSION.replace(/\+.*$/, '')} (Debian ${PROMETHEUS_DEBIAN_VERSION})`,
  });
  if (fs.existsSync(binaryOf(prometheusCachePath()))) return done();
  const missing = ['apt-get', 'dpkg-deb'].filter((tool) => !which(tool));
  if (missing.length)
    throw new Error(
      `stack: Prometheus is not in the cache (${prometheusCachePath()}) and installing it needs Debian's apt-get and dpkg-deb (missing: ${missing.join(', ')}).`,
    );
  return withBuildLock('prometheus', log, async () => {
    if (fs.existsSync(binaryOf(prometheusCachePath()))) return done();
    const prefix = 'setup prometheus';
    const started = Date.now();
    const tmp = fs.mkdtempSync(path.join(cacheDir(), '.build-prometheus-'));
    try {
      log(`[${prefix}] Prometheus ${PROMETHEUS_DEBIAN_VERSION} from Debian bookworm into ${prometheusCachePath()} (once per cache)...`);
      const hint = `If apt says the pinned version was not found, set PROMETHEUS_DEBIAN_VERSION in scripts/stack/prometheus.mjs to what \`apt-cache policy prometheus\` shows.`;
      await aptDownload(tmp, [`prometheus=${PROMETHEUS_DEBIAN_VERSION}`], { prefix, hint }, log);
      const deb = fs.readdirSync(tmp).find((f) => f.endsWith('.deb'));
      await runLogged(prefix, 'dpkg-deb', ['-x', path.join(tmp, deb), path.join(tmp, 'root')], { quiet: true }, log);
      rmrf(path.join(tmp, deb));
      execFileSync(binaryOf(tmp), ['--version'], { stdio: 'ignore' }); // it runs here (a static Go binary)
      fs.chmodSync(tmp, 0o755);
      fs.renameSync(tmp, prometheusCachePath());
      log(`[${prefix}] done in ${seconds(Date.now() - started)}`);
      return done();
    } finally {
      rmrf(tmp);
    }
  });
}

/**
 * Starts Prometheus with its data in `stateDir`, on 127.0.0.1:`port` (default: a free one), scraping each of
 * `targets` (`{ job, address, bearerToken? }`, path /metrics) every `scrapeIntervalSeconds` (default 2). Resolves once it is
 * ready, to { url, pid, stop() }.
 */
export async function startPrometheus({ stateDir, port, targets, scrapeIntervalSeconds = 2, log = console.log }) {
  const { bin, version } = await ensurePrometheus({ log });
  fs.mkdirSync(path.join(stateDir, 'data'), { recursive: true });
  port = port || (await freePort());
  const config = path.join(stateDir, 'prometheus.yml');
  const jobs = targets.map(
    (t) =>
      `  - job_name: ${JSON.stringify(t.job)}\n    static_configs: [{ targets: [${JSON.stringify(t.address)}] }]${t.bearerToken ? `\n    authorization: { credentials: ${JSON.stringify(t.bearerToken)} }` : ''}`,
  );
  // A scrape may take the whole interval (a test process busy with other work answers late; a missed scrape leaves a gap).
  const every = `${scrapeIntervalSeconds}s`;
  fs.writeFileSync(
    config,
    `global: { scrape_interval: ${every}, scrape_timeout: ${every}, evaluation_interval: ${every} }\nscrape_configs:\n${jobs.join('\n')}\n`,
  );
  const logFile = path.join(stateDir, 'prometheus.log');
  log(`stack: starting ${version} on 127.0.0.1:${port} ...`);
  const server = spawnServer(
    bin,
    [`--config.file=${config}`, `--storage.tsdb.path=${path.join(stateDir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
    logFile,
  );
  const url = `http://127.0.0.1:${port}`;
  const ready = () =>
    fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.ok,
      () => false,
    );
  const ms = await waitReady({ label: 'Prometheus', server, logFile, probe: ready, interval: 100 });
  log(`stack: Prometheus ready on ${url} (${seconds(ms)})`);
  const pid = server.child.pid;
  // Recorded, so a reaper of state folders stops it if this run is killed (stopLeftoverPrometheus).
  fs.writeFileSync(path.join(stateDir, 'prometheus.json'), `${JSON.stringify({ pid, start: procStartTime(pid) })}\n`);
  return {
    url,
    pid,
    async stop() {
      if (server.exited) return;
      signalGroup(pid, 'SIGTERM');
      const deadline = Date.now() + STOP_TIMEOUT_MS;
      while (!server.exited && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      if (!server.exited) signalGroup(pid, 'SIGKILL');
      fs.rmSync(path.join(stateDir, 'prometheus.json'), { force: true });
    },
  };
}

/** Stops the Prometheus recorded in `stateDir` (prometheus.json) if it still runs (the same process: start time checked). */
export async function stopLeftoverPrometheus({ stateDir, log = console.log }) {
  const file = path.join(stateDir, 'prometheus.json');
  let info = null;
  try {
    info = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {}
  if (info?.pid && isAlive(info.pid) && procStartTime(info.pid) === info.start) {
    log(`stack: stopping the Prometheus (pid ${info.pid}) left in ${stateDir} by a run that is gone`);
    signalGroup(info.pid, 'SIGKILL');
    for (let i = 0; i < 100 && isAlive(info.pid); i++) await new Promise((r) => setTimeout(r, 50));
  }
  fs.rmSync(file, { force: true });
}
