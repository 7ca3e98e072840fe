// What the pipeline suite (pipelines.mjs) runs its scenarios with: the consumer process that is the clock for
// "received", and the CPU meter of the processes taking part.
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { repoRoot, stopChild } from '../setup.mjs';
import { cpuMeter, round } from './webhook-measures.mjs';

/** The consumer process; resolves once its queues and topics are consumed. `ask(cmd, run)` as the webhook receiver's. */
export async function startConsumer(config) {
  const child = fork(path.join(repoRoot, 'scripts', 'bench', 'pipeline-consumer.mjs'), [JSON.stringify(config)], {
    cwd: repoRoot,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pending = new Map();
  let nextId = 0;
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the pipeline consumer was not ready within 60 s')), 60_000);
      child.once('exit', (code, signal) => reject(new Error(`the pipeline consumer exited (${signal ?? `exit code ${code}`})`)));
      child.on('message', (msg) => {
        if (msg?.ready) resolve(clearTimeout(timer));
        else if (msg?.error && msg.id === undefined) reject(new Error(`pipeline consumer: ${msg.error}`));
        else if (msg?.id !== undefined) {
          pending.get(msg.id)?.(msg);
          pending.delete(msg.id);
        }
      });
    });
  } catch (err) {
    await stopChild(child, 8000);
    throw err;
  }
  const ask = (cmd, run) =>
    new Promise((resolve, reject) => {
      if (child.exitCode !== null || child.signalCode !== null) return reject(new Error('the pipeline consumer has exited'));
      const id = nextId++;
      const timer = setTimeout(() => (pending.delete(id), reject(new Error(`the pipeline consumer did not answer '${cmd}' within 10 s`))), 10_000);
      pending.set(id, (msg) => (clearTimeout(timer), msg.error ? reject(new Error(msg.error)) : resolve(msg)));
      child.send({ id, cmd, run });
    });
  return { pid: child.pid, ask, stop: () => stopChild(child, 8000) };
}

/**
 * `meter()` starts a measurement and returns the function that ends it: CPU per process of `pids` (pid by name), the
 * bench process's own (cpuMeter counts a process's children with it, and the servers are this one's), and the whole
 * machine's from /proc/stat ('all': exact, where a process's figure misses children that exited, e.g. PostgreSQL
 * backends), each in seconds and % of one core.
 */
export function processMeter(pids) {
  const machineTicks = () => {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
    return { idle: f[3] + f[4], total: f.reduce((a, b) => a + b, 0) };
  };
  return () => {
    const others = cpuMeter(pids);
    const [own, t, ticks] = [process.cpuUsage(), performance.now(), machineTicks()];
    return () => {
      const out = others();
      const wall = (performance.now() - t) / 1000;
      const used = Object.values(process.cpuUsage(own)).reduce((a, b) => a + b, 0) / 1e6;
      const now = machineTicks();
      const busy = (now.total - ticks.total - (now.idle - ticks.idle)) / 100; // USER_HZ
      const of = (seconds) => ({ cpuSeconds: round(seconds, 2), pctOfOneCore: round((seconds / wall) * 100, 0) });
      return { ...out, bench: of(used), all: of(busy) };
    };
  };
}
