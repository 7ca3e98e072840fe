/**
 * Test-only crash points. `crashPoint(name)` marks a place between two writes (a document and a workflow start or
 * signal, or an activity's write and its result) where a crash must leave nothing that a retry or the maintenance sweep cannot repair; when the
 * comma-separated `HB_FAILPOINTS` names it, the process kills itself there with SIGKILL (no shutdown hooks, no
 * `finally`: what a power cut or an OOM kill does). test/dual-writes.test.ts starts an api with each of its names set;
 * test/users-crash.test.ts and test/lab-orders-crash.test.ts a worker that dies between a write and reporting it to Temporal.
 * Never set in a deployment: unset, a crash point is one lookup in an empty set.
 */
const armed = new Set((process.env.HB_FAILPOINTS ?? '').split(',').map((name) => name.trim()).filter(Boolean));

export function crashPoint(name: string): void {
  if (armed.has(name)) process.kill(process.pid, 'SIGKILL');
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
