import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

/** A real worker process of this build on its own task queue (for crash tests: it can be SIGKILLed). */
export function startWorker(taskQueue: string, env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [path.join(__dirname, '..', '..', 'dist', 'worker', 'main.js')], {
    env: { ...process.env, TEMPORAL_TASK_QUEUE: taskQueue, LOG_LEVEL: 'error', ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

export function stopWorker(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill(signal);
  });
}
