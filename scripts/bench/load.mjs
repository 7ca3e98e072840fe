// The load generator of `npm run bench`: closed-loop workers in this process, a fixed warm-up and a
// fixed measurement window, and a keep-alive HTTP client for 127.0.0.1 targets.
//
//   const result = await measure({ name: 'user read', fn: async ({ worker, seq }) => { ... } });
//
// `fn` is one operation: it resolves on success and throws on failure (an unexpected status is a
// failure: use `client.expect(...)` or throw a BenchError with the response body as `detail`).
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { performance } from 'node:perf_hooks';

const REQUEST_TIMEOUT_MS = 10_000;
// After the window closes, in-flight operations get this long to finish before measure() gives up on them.
const DRAIN_TIMEOUT_MS = REQUEST_TIMEOUT_MS + 5_000;

/** A numeric BENCH_* variable, or `fallback`; a bad value throws naming the variable. */
export function numberEnv(name, fallback, { integer = false, min = 0 } = {}) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min || (integer && !Number.isInteger(value))) {
    throw new Error(`${name}=${raw} is not a valid ${integer ? 'integer' : 'number'} >= ${min}`);
  }
  return value;
}

/** Concurrency and timing for every scenario: BENCH_CONCURRENCY (32), BENCH_SECONDS (5), BENCH_WARMUP_SECONDS (1). */
export function benchDefaults() {
  return {
    concurrency: numberEnv('BENCH_CONCURRENCY', 32, { integer: true, min: 1 }),
    seconds: numberEnv('BENCH_SECONDS', 5, { min: 0.1 }),
    warmupSeconds: numberEnv('BENCH_WARMUP_SECONDS', 1, { min: 0 }),
  };
}

/** A failed operation; `detail` (e.g. the response body) is shown for the first error of a scenario. */
export class BenchError extends Error {
  constructor(message, detail) {
    super(message);
    this.detail = detail;
  }
}

const describe = (err) => {
  const message = err instanceof Error ? err.message : String(err);
  const detail = err && err.detail !== undefined ? String(err.detail) : undefined;
  return detail === undefined ? message : `${message}: ${detail.length > 2000 ? `${detail.slice(0, 2000)}...` : detail}`;
};

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

const round = (x, digits = 2) => (x === null || x === undefined ? null : Math.round(x * 10 ** digits) / 10 ** digits);

/**
 * Runs `fn` in `concurrency` closed loops: warm-up (not counted), then `seconds` of measurement.
 * An operation is counted in the window in which it completes; its latency is its own duration.
 * Returns { name, concurrency, seconds, ok, rps, p50Ms, p90Ms, p99Ms, meanMs, maxMs, errors, warmupErrors, firstError }.
 */
export async function measure({ name, concurrency, seconds, warmupSeconds, fn, log = console.log }) {
  const defaults = benchDefaults();
  concurrency ??= defaults.concurrency;
  seconds ??= defaults.seconds;
  warmupSeconds ??= defaults.warmupSeconds;
  log(`bench: ${name} ... ${seconds} s (${concurrency} concurrent, after ${warmupSeconds} s warm-up)`);
  const { latencies, errors, warmupErrors, firstError } = await closedLoops({ name, concurrency, seconds, warmupSeconds, fn, log });
  return summarize({ name, concurrency, seconds, warmupSeconds, latencies, errors, warmupErrors, firstError, log });
}

/**
 * One window of `measure`: the latencies (ms) of the operations that completed in it, the errors, and the `seq` the
 * next window of the same scenario starts at (its operations are numbered on: a `seq` may name a record to create).
 */
async function closedLoops({ name, concurrency, seconds, warmupSeconds, fn, log, firstSeq = 0 }) {
  const latencies = [];
  let errors = 0;
  let warmupErrors = 0;
  let firstError = null;
  let seq = firstSeq;
  const windowStart = performance.now() + warmupSeconds * 1000;
  const windowEnd = windowStart + seconds * 1000;

  const loop = async (worker) => {
    while (performance.now() < windowEnd) {
      const started = performance.now();
      let failure = null;
      try {
        await fn({ worker, seq: seq++ });
      } catch (err) {
        failure = err ?? new Error('operation failed');
      }
      const ended = performance.now();
      if (failure && firstError === null) firstError = describe(failure);
      if (ended < windowStart) {
        if (failure) warmupErrors++;
      } else if (ended <= windowEnd) {
        if (failure) errors++;
        else latencies.push(ended - started);
      }
    }
  };

  let drainTimer;
  const drained = await Promise.race([
    Promise.all(Array.from({ length: concurrency }, (_, i) => loop(i))).then(() => true),
    new Promise((resolve) => {
      drainTimer = setTimeout(() => resolve(false), windowEnd - performance.now() + DRAIN_TIMEOUT_MS);
    }),
  ]);
  clearTimeout(drainTimer);
  if (!drained) log(`bench: ${name}: some operations were still running ${DRAIN_TIMEOUT_MS / 1000} s after the window; abandoned`);
  return { latencies, errors, warmupErrors, firstError, nextSeq: seq };
}

/**
 * The ratio of two scenarios measured in turns: the median over their rounds of `of[k] / to[k]` (the rates, or the
 * times, of round k; the mean of the middle two for an even count), to 3 places; null when a round of `to` has none.
 */
export function medianRatio(of, to) {
  if (!to.length || to.some((v) => !(v > 0))) return null;
  const sorted = of.map((v, k) => v / to[k]).sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return round(sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2, 3);
}

/** The middle one of runs by `rateOf` (the slower of the middle two): the run a ratio's figures are shown from. */
export const medianRun = (runs, rateOf = (r) => r.rps) => [...runs].sort((a, b) => rateOf(a) - rateOf(b))[Math.floor((runs.length - 1) / 2)];

/** Rounds of measureInRounds: BENCH_ROUNDS (5). */
const benchRounds = () => numberEnv('BENCH_ROUNDS', 5, { integer: true, min: 1 });

/** A ramp before each later round of measureInRounds (the loops restart; nothing to warm up): not counted. */
const ROUND_RAMP_SECONDS = 0.25;

/**
 * Scenarios measured in turns: `rounds` rounds, each running every scenario's closed loops for seconds / rounds, the
 * order rotating from round to round (A B, B A, A B, ... for two), so that a ratio of two of them compares windows
 * seconds apart rather than one scenario's window against another's a minute later (two runs of scenarios measured
 * one after the other disagreed by up to 60 % on their ratio: each window caught a different state of a 2-core
 * machine that also runs the database). Each scenario is warmed up once, before its first round; its later rounds
 * start with `rampSeconds` not counted, while the loops fill (operations of a second or more need a longer one, and
 * rounds of several of their latencies: a round counts the operations that complete in it).
 *
 * Returns { results: one `measure` result per scenario over all its rounds (and `roundRates`, its rate in each round), ratio(a, b): the median over the rounds
 * of a's rate / b's rate in that round (a and b: indexes of `scenarios`), rounded to 3 places, null if a round has
 * no success of b }.
 */
export async function measureInRounds({ scenarios, rounds, concurrency, seconds, warmupSeconds, rampSeconds = ROUND_RAMP_SECONDS, log = console.log }) {
  const defaults = benchDefaults();
  rounds ??= benchRounds();
  concurrency ??= defaults.concurrency;
  seconds ??= defaults.seconds;
  warmupSeconds ??= defaults.warmupSeconds;
  const roundSeconds = seconds / rounds;
  log(`bench: ${scenarios.map((s) => s.name).join(' | ')} ... ${rounds} rounds of ${roundSeconds} s each, in turns (${concurrency} concurrent)`);
  const windows = scenarios.map(() => ({ latencies: [], errors: 0, warmupErrors: 0, firstError: null }));
  const rates = scenarios.map(() => []);
  const seqs = scenarios.map(() => 0);
  for (let roundNo = 0; roundNo < rounds; roundNo++) {
    const order = scenarios.map((_, i) => (roundNo % 2 ? scenarios.length - 1 - i : i));
    for (const i of order) {
      const { name, fn, concurrency: own } = scenarios[i];
      const got = await closedLoops({
        name,
        concurrency: own ?? concurrency,
        seconds: roundSeconds,
        warmupSeconds: roundNo ? rampSeconds : warmupSeconds,
        fn,
        log,
        firstSeq: seqs[i],
      });
      seqs[i] = got.nextSeq;
      const w = windows[i];
      for (const ms of got.latencies) w.latencies.push(ms);
      w.errors += got.errors;
      w.warmupErrors += got.warmupErrors;
      w.firstError ??= got.firstError;
      rates[i].push(got.latencies.length / roundSeconds);
    }
  }
  const results = scenarios.map(({ name, concurrency: own }, i) => ({
    ...summarize({ name, concurrency: own ?? concurrency, seconds, warmupSeconds, ...windows[i], log }),
    roundRates: rates[i].map((r) => round(r, 1)),
  }));
  return { results, ratio: (a, b) => medianRatio(rates[a], rates[b]) };
}

/** A scenario's result from its latencies (ms), logged: the shape `measure` returns. */
function summarize({ name, concurrency, seconds, warmupSeconds, latencies, errors, warmupErrors, firstError, log }) {
  const sorted = Float64Array.from(latencies).sort();
  const sum = latencies.reduce((a, b) => a + b, 0);
  const result = {
    name,
    concurrency,
    seconds,
    warmupSeconds,
    ok: latencies.length,
    rps: round(latencies.length / seconds, 1),
    p50Ms: round(percentile(sorted, 50)),
    p90Ms: round(percentile(sorted, 90)),
    p99Ms: round(percentile(sorted, 99)),
    meanMs: round(latencies.length ? sum / latencies.length : null),
    maxMs: round(sorted.length ? sorted[sorted.length - 1] : null),
    errors,
    warmupErrors,
    firstError,
  };
  log(
    `bench: ${name}: ${result.rps} req/s, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, ${errors} errors` +
      (warmupErrors ? ` (+${warmupErrors} during warm-up)` : ''),
  );
  if (firstError) log(`bench: ${name}: first error: ${firstError}`);
  return result;
}

/**
 * Two operations measured together, one reader alternating them (A, B, A, B, ...) for `seconds`: each one's latency
 * is taken on the same machine moment as the other's, so a ratio of the two is not one window's weather against
 * another's (a latency ratio of scenarios measured one after the other moved by more than the change it measured).
 * Returns one `measure` result per operation (their `seconds`: the shared window).
 */
export async function measureAlternately({ names, fns, seconds, log = console.log }) {
  seconds ??= benchDefaults().seconds;
  log(`bench: ${names.join(' | ')} ... ${seconds} s, alternately (1 reader)`);
  const latencies = fns.map(() => []);
  const errors = fns.map(() => 0);
  const firstErrors = fns.map(() => null);
  const windowEnd = performance.now() + seconds * 1000;
  for (let seq = 0; performance.now() < windowEnd; seq++) {
    for (let i = 0; i < fns.length; i++) {
      const started = performance.now();
      try {
        await fns[i]({ worker: 0, seq });
        latencies[i].push(performance.now() - started);
      } catch (err) {
        errors[i]++;
        firstErrors[i] ??= describe(err ?? new Error('operation failed'));
      }
    }
  }
  return names.map((name, i) =>
    summarize({
      name,
      concurrency: 1,
      seconds,
      warmupSeconds: 0,
      latencies: latencies[i],
      errors: errors[i],
      warmupErrors: 0,
      firstError: firstErrors[i],
      log,
    }),
  );
}

/**
 * A keep-alive HTTP/1.1 client for one base URL on 127.0.0.1 (the bench never sends load elsewhere).
 * Use one client per scenario and close() it afterwards, so no idle socket outlives the server's keep-alive.
 */
export function httpClient(baseUrl, { headers: defaultHeaders = {}, timeoutMs = REQUEST_TIMEOUT_MS } = {}) {
  const url = new URL(baseUrl);
  if (url.protocol !== 'http:' || url.hostname !== '127.0.0.1') {
    throw new Error(`bench: refusing to send load to ${baseUrl}: only http://127.0.0.1 targets are allowed`);
  }
  const agent = new http.Agent({ keepAlive: true, maxFreeSockets: 1024, scheduling: 'lifo' });
  const port = Number(url.port);

  // A kept-alive socket the server closed just as it was reused fails with ECONNRESET before any answer: sent
  // again on a fresh socket, as Node's docs for `request.reusedSocket` advise (nothing reached the server).
  async function request(method, path, options = {}) {
    try {
      return await requestOnce(method, path, options);
    } catch (err) {
      if (err.code !== 'ECONNRESET' || !err.reusedSocket) throw err;
      return requestOnce(method, path, options);
    }
  }

  function requestOnce(method, path, { headers = {}, body } = {}) {
    return new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
      const allHeaders = { ...defaultHeaders, ...headers };
      if (payload) {
        allHeaders['content-type'] ??= 'application/json';
        allHeaders['content-length'] = payload.length;
      }
      const req = http.request({ agent, host: '127.0.0.1', port, method, path, headers: allHeaders });
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${path}: no answer within ${timeoutMs} ms`)));
      req.once('error', (err) => {
        err.reusedSocket = req.reusedSocket;
        reject(err);
      });
      req.once('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (text += chunk));
        res.once('end', () => resolve({ status: res.statusCode, headers: res.headers, text }));
        res.once('error', reject);
      });
      req.end(payload);
    });
  }

  /**
   * The request; throws a BenchError with the body unless the status is `status`. With `json: true` the body
   * is parsed into `res.json` (off by default: the load generator should spend its CPU on sending load).
   */
  async function expect(status, method, path, options = {}) {
    const res = await request(method, path, options);
    if (res.status !== status) throw new BenchError(`${method} ${path}: expected ${status}, got ${res.status}`, res.text);
    if (options.json) {
      try {
        res.json = JSON.parse(res.text);
      } catch {
        throw new BenchError(`${method} ${path}: invalid JSON body`, res.text);
      }
    }
    return res;
  }

  return { baseUrl, request, expect, close: () => agent.destroy() };
}

/** The machine's CPU time so far, busy and total (all cpus, clock ticks), from /proc/stat; null where there is none. */
function cpuTicks() {
  try {
    const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
    const ticks = fields.map(Number);
    const idle = ticks[3] + (ticks[4] ?? 0); // idle + iowait
    const total = ticks.reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

/**
 * Waits for the machine to settle (between suites, and between a suite's runs): until a 2-second window finds the cpus at most 15% busy (the
 * previous suite's worker draining, the database checkpointing), at most BENCH_SETTLE_SECONDS (60); prints how long.
 */
export async function settle(log = console.log) {
  const limit = numberEnv('BENCH_SETTLE_SECONDS', 60, { min: 0 });
  const started = performance.now();
  let busy = null;
  while ((performance.now() - started) / 1000 < limit) {
    const a = cpuTicks();
    await new Promise((r) => setTimeout(r, 2000));
    const b = cpuTicks();
    if (!a || !b) break;
    busy = (b.busy - a.busy) / Math.max(1, b.total - a.total);
    if (busy <= 0.15) break;
  }
  const seconds = Math.round((performance.now() - started) / 100) / 10;
  log(`bench: settled for ${seconds} s${busy === null ? '' : ` (cpus ${Math.round(busy * 100)}% busy at the end)`}`);
}
