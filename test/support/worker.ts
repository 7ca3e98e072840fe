import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';

/**
 * A task queue and a database of a test's own, for a test that runs (and kills) a worker of its own. Both
 * must be private: a worker's sweeper looks at the whole database and wakes dispatchers on its own task
 * queue, so a worker on a private queue over the shared database would take other tests' endpoints onto
 * its queue and strand them there when it is killed.
 */
export interface PrivateDeployment {
  TEMPORAL_TASK_QUEUE: string;
  MONGO_DB: string;
}

export function privateDeployment(name: string): PrivateDeployment {
  const id = randomBytes(4).toString('hex');
  return { TEMPORAL_TASK_QUEUE: `hb-${name}-${id}`, MONGO_DB: `${process.env.MONGO_DB ?? 'hb_test'}_${name.replace(/\W/g, '_')}_${id}` };
}

/** A real worker process of this build on a private deployment (for crash tests: it can be SIGKILLed). */
export function startWorker(deployment: PrivateDeployment, env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [path.join(__dirname, '..', '..', 'dist', 'worker', 'main.js')], {
    env: { ...process.env, LOG_LEVEL: 'error', ...deployment, ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

export async function stopWorker(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  const ended = workerEnded(child);
  if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  await ended;
}

/** How a worker ended: the signal that killed it (SIGKILL: a crash point, lib/platform/failpoints.ts) or its exit code. */
export function workerEnded(child: ChildProcess): Promise<NodeJS.Signals | number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.signalCode ?? child.exitCode);
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
}
