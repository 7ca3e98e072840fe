import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Worker } from '@temporalio/worker';
import type { Logger } from '../lib/platform/logger';
import type { Repositories } from '../lib/repositories';
import { WORKER_HEARTBEAT_INTERVAL_MS } from '../lib/platform/worker-heartbeats-store';

export interface WorkerHeartbeat {
  id: string;
  /** Stops beating and removes this worker's heartbeat (a clean stop is seen at once). */
  stop(): Promise<void>;
}

/**
 * Records every WORKER_HEARTBEAT_INTERVAL_MS that this process's Temporal worker is running, so GET /ready
 * notices a dead worker within seconds (Temporal keeps listing a killed poller for minutes). Start it after
 * `worker.run()`; it only beats while the worker's state is RUNNING.
 */
export function startWorkerHeartbeat(repos: Repositories, worker: Worker, taskQueue: string, logger: Logger): WorkerHeartbeat {
  const id = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const startedAt = new Date();
  let failing = false;
  let inFlight: Promise<void> = Promise.resolve();
  const beat = () => {
    if (worker.getState() !== 'RUNNING') return;
    inFlight = repos.workers
      .beat({ _id: id, task_queue: taskQueue, host: hostname(), pid: process.pid, started_at: startedAt, last_seen_at: new Date() })
      .then(() => {
        if (failing) logger.info({ workerId: id }, 'worker heartbeat recorded again');
        failing = false;
      })
      .catch((err: Error) => {
        if (!failing) logger.warn({ workerId: id, err: err.message }, 'worker heartbeat not recorded');
        failing = true;
      });
  };
  beat();
  const timer = setInterval(beat, WORKER_HEARTBEAT_INTERVAL_MS);
  return {
    id,
    async stop() {
      clearInterval(timer);
      await inFlight;
      await repos.workers.remove(id).catch(() => undefined);
    },
  };
}
