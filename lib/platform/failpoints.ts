/**
 * Test-only crash points. `crashPoint(name)` marks a place between two writes (a document and a workflow start or
 * signal, or an activity's write and its result) where a crash must leave nothing that a retry or the maintenance sweep cannot repair; when the
 * comma-separated `HB_FAILPOINTS` names it, the process kills itself there with SIGKILL (no shutdown hooks, no
 * `finally`: what a power cut or an OOM kill does). Named `name:error`, it throws there instead, as a write or a call
 * that failed would: the process lives on and the request answers 500. test/dual-writes.test.ts starts an api with each
 * of its names set; test/users-crash.test.ts and test/lab-orders-crash.test.ts a worker that dies between a write and
 * reporting it to Temporal.
 * Never set in a deployment: unset, a crash point is one lookup in an empty map.
 */
const armed = new Map<string, 'crash' | 'error'>(
  (process.env.HB_FAILPOINTS ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry): [string, 'crash' | 'error'] => (entry.endsWith(':error') ? [entry.slice(0, -':error'.length), 'error'] : [entry, 'crash'])),
);

export function crashPoint(name: string): void {
  const failure = armed.get(name);
  if (failure === 'crash') process.kill(process.pid, 'SIGKILL');
  if (failure === 'error') throw new Error(`failpoint ${name}`);
}

const faults = new Map<string, number>();

/**
 * Test-only: the next `times` passes through `faultPoint(name)` in this process throw, as a write that failed (the
 * database away for a moment) would. Unarmed, a fault point is one lookup in an empty map.
 */
export function injectFault(name: string, times = 1): void {
  faults.set(name, times);
}

export function faultPoint(name: string): void {
  const left = faults.get(name);
  if (!left) return;
  if (left <= 1) faults.delete(name);
  else faults.set(name, left - 1);
  throw new Error(`Injected fault at ${name} (a test made this write fail)`);
}
