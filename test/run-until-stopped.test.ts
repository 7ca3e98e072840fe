import { GracefulShutdownPeriodExpiredError } from '@temporalio/worker';
import { runUntilStopped } from '../worker/run-until-stopped';

/** A worker's run(): settled by hand, as the SDK settles it when the worker stops. */
function run() {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<void>((res, rej) => ([resolve, reject] = [res, rej]));
  return { promise, resolve, reject };
}
const settledWithin = async (p: Promise<unknown>, ms: number) =>
  Promise.race([
    p.then(
      () => 'resolved',
      () => 'rejected',
    ),
    new Promise((r) => setTimeout(() => r('pending'), ms)),
  ]);

describe('the worker process waits for every worker to stop (worker/run-until-stopped.ts)', () => {
  it('a worker past its shutdown grace does not end the wait while another is still draining', async () => {
    const [main, provider] = [run(), run()];
    const stopped = runUntilStopped([main.promise, provider.promise]);
    provider.reject(new GracefulShutdownPeriodExpiredError('Timed out while waiting for worker to shutdown gracefully'));
    expect(await settledWithin(stopped, 50)).toBe('pending');
    main.resolve();
    await expect(stopped).resolves.toEqual({ graceExpired: true });
  });

  it('every worker stopping in time is a clean stop', async () => {
    const [main, provider] = [run(), run()];
    const stopped = runUntilStopped([main.promise, provider.promise]);
    provider.resolve();
    main.resolve();
    await expect(stopped).resolves.toEqual({ graceExpired: false });
  });

  it('any other failure of a worker is thrown at once, the others still running', async () => {
    const [main, provider] = [run(), run()];
    const stopped = runUntilStopped([main.promise, provider.promise]);
    provider.reject(new Error('poller failed: the namespace is gone'));
    await expect(stopped).rejects.toThrow('the namespace is gone');
    main.resolve();
  });
});
