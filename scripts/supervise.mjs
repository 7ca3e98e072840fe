// Process supervision and readable logs for `npm run dev` (Node built-ins only: runs before npm install).
import readline from 'node:readline';
import { stopChild } from './setup.mjs';

const LEVELS = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const COLORS = { TRACE: 90, DEBUG: 90, INFO: 32, WARN: 33, ERROR: 31, FATAL: 35 };
// pino's own fields, shown in the line's head or not at all.
const HEAD_FIELDS = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'name', 'service', 'v']);

const pad2 = (n) => String(n).padStart(2, '0');
export const clock = (date = new Date()) => `${pad2(date.getHours())}:${pad2(date.getMinutes())}:${pad2(date.getSeconds())}`;

function formatValue(value) {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  return JSON.stringify(value);
}

/**
 * One line of a child's output, readable: a pino JSON line becomes `HH:MM:SS LEVEL [process] msg key=value …`
 * (an error's stack follows on indented lines); anything else is kept as is behind `[process]`.
 */
export function formatLogLine(line, name, { color = false } = {}) {
  let entry;
  try {
    entry = line.startsWith('{') ? JSON.parse(line) : null;
  } catch {
    entry = null;
  }
  if (!entry || typeof entry !== 'object' || typeof entry.level !== 'number') return `[${name}] ${line}`;
  const level = LEVELS[entry.level] ?? `L${entry.level}`;
  const shownLevel = color ? `\x1b[${COLORS[level] ?? 0}m${level.padEnd(5)}\x1b[0m` : level.padEnd(5);
  const time = clock(typeof entry.time === 'number' || typeof entry.time === 'string' ? new Date(entry.time) : new Date());
  const fields = [];
  let stack = '';
  for (const [key, value] of Object.entries(entry)) {
    if (HEAD_FIELDS.has(key) || value === undefined) continue;
    if ((key === 'err' || key === 'error') && value && typeof value === 'object' && typeof value.message === 'string') {
      fields.push(`${key}=${formatValue(value.message)}`);
      if (typeof value.stack === 'string') stack = value.stack.split('\n').slice(1).map((l) => `    ${l.trim()}`).join('\n');
      continue;
    }
    fields.push(`${key}=${formatValue(value)}`);
  }
  const head = `${time} ${shownLevel} [${name}] ${entry.msg ?? ''}`.trimEnd();
  return [fields.length ? `${head} ${fields.join(' ')}` : head, stack].filter(Boolean).join('\n');
}

/** Forwards a child's stdout and stderr line by line, formatted unless `raw` (JSON as the process wrote it). */
export function forwardOutput(child, name, { raw = false, out = process.stdout, err = process.stderr } = {}) {
  for (const [stream, sink] of [
    [child.stdout, out],
    [child.stderr, err],
  ]) {
    if (!stream) continue;
    const color = Boolean(sink.isTTY) && !process.env.NO_COLOR;
    readline.createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
      sink.write(`${raw ? line : formatLogLine(line, name, { color })}\n`);
    });
  }
}

/**
 * Keeps one process running: when it exits without `stop()` having been called, it is started again after a
 * delay that doubles with each quick failure (1 s, 2 s, 4 s … at most 30 s) and falls back to the first delay
 * once a run has lasted `stableMs`. Every exit and restart is logged.
 */
export function supervise({ name, start, log, initialDelayMs = 1_000, maxDelayMs = 30_000, stableMs = 60_000 }) {
  let child = null;
  let stopped = false;
  let timer = null;
  let delayMs = initialDelayMs;
  let restarts = 0;

  const launch = () => {
    const startedAt = Date.now();
    child = start();
    child.once('error', (err) => log(`${name}: ${err.message}`));
    child.once('exit', (code, signal) => {
      if (stopped) return;
      const ranMs = Date.now() - startedAt;
      if (ranMs >= stableMs) delayMs = initialDelayMs;
      restarts += 1;
      const how = signal ? `signal ${signal}` : `code ${code}`;
      log(`${name} (pid ${child.pid}) exited unexpectedly (${how}) after ${(ranMs / 1000).toFixed(1)} s; restarting in ${(delayMs / 1000).toFixed(1)} s (restart ${restarts})`);
      timer = setTimeout(() => {
        timer = null;
        if (stopped) return;
        launch();
        log(`${name} restarted (pid ${child.pid})`);
      }, delayMs);
      delayMs = Math.min(delayMs * 2, maxDelayMs);
    });
  };
  launch();

  return {
    name,
    get pid() {
      return child?.pid;
    },
    /** Stops supervising and stops the process (SIGTERM, then SIGKILL). */
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await stopChild(child);
    },
  };
}
