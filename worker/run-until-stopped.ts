import { GracefulShutdownPeriodExpiredError } from '@temporalio/worker';

/**
 * Waits for every worker of the process (the main task queue's and each provider's) to stop. On SIGTERM a worker
 * whose activities outlive the shutdown grace rejects with GracefulShutdownPeriodExpiredError while the others may
 * still be draining: the process closes their shared connection only once all have stopped (closing it under a
 * running worker throws "Worker still in use", and the process exited 1 on a plain SIGTERM). Any other failure of a
 * worker is thrown at once, the others still running: the process stops, and Temporal retries their tasks elsewhere.
 */
export function runUntilStopped(runs: Promise<unknown>[]): Promise<{ graceExpired: boolean }> {
  return new Promise((resolve, reject) => {
    let running = runs.length;
    let graceExpired = false;
    const stopped = () => {
      if (--running === 0) resolve({ graceExpired });
    };
    if (!running) resolve({ graceExpired });
    for (const run of runs) {
      run.then(stopped, (err: unknown) => {
        if (!(err instanceof GracefulShutdownPeriodExpiredError)) return reject(err);
        graceExpired = true;
        stopped();
      });
    }
  });
}
