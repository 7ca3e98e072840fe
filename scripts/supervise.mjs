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

/** Longest value, and longest line, the readable format shows (the process's own JSON keeps everything: DEV_LOG_FORMAT=json). */
const MAX_VALUE_CHARS = 300;
const MAX_LINE_CHARS = 1_000;
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g;
const cut = (text, max) => (text.length > max ? `${text.slice(0, max)}…(+${text.length - max})` : text);

/**
 * One line of a child's output, readable and on one line: a pino JSON line becomes
 * `HH:MM:SS LEVEL [process] msg key=value …` (an error as its message and where it was thrown); anything else is kept
 * behind `[process]`, colour codes stripped. Values and the line are cut to a readable length.
 */
export function formatLogLine(line, name, { color = false } = {}) {
  let entry;
  try {
    entry = line.startsWith('{') ? JSON.parse(line) : null;
  } catch {
    entry = null;
  }
  if (!entry || typeof entry !== 'object' || typeof entry.level !== 'number') return cut(`[${name}] ${line.replace(ANSI, '')}`, MAX_LINE_CHARS);
  const level = LEVELS[entry.level] ?? `L${entry.level}`;
  const shownLevel = color ? `\x1b[${COLORS[level] ?? 0}m${level.padEnd(5)}\x1b[0m` : level.padEnd(5);
  const time = clock(typeof entry.time === 'number' || typeof entry.time === 'string' ? new Date(entry.time) : new Date());
  const fields = [];
  for (const [key, value] of Object.entries(entry)) {
    if (HEAD_FIELDS.has(key) || value === undefined) continue;
    if ((key === 'err' || key === 'error') && value && typeof value === 'object' && typeof value.message === 'string') {
      const where =
        typeof value.stack === 'string'
          ? value.stack
              .split('\n')
              .find((l) => /^\s*at /.test(l))
              ?.trim()
          : undefined;
      fields.push(`${key}=${formatValue(cut(value.message.split('\n')[0], MAX_VALUE_CHARS))}${where ? ` (${cut(where, MAX_VALUE_CHARS)})` : ''}`);
      continue;
    }
    fields.push(`${key}=${cut(formatValue(value), MAX_VALUE_CHARS)}`);
  }
  const head = `${time} ${shownLevel} [${name}] ${
    String(entry.msg ?? '')
      .replace(ANSI, '')
      .split('\n')[0]
  }`.trimEnd();
  return cut(fields.length ? `${head} ${fields.join(' ')}` : head, MAX_LINE_CHARS);
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
      log(
        `${name} (pid ${child.pid}) exited unexpectedly (${how}) after ${(ranMs / 1000).toFixed(1)} s; restarting in ${(delayMs / 1000).toFixed(1)} s (restart ${restarts})`,
      );
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
