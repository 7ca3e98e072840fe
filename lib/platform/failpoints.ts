/**
 * Test-only crash points. `crashPoint(name)` marks a place between two writes (a document and a workflow start or
 * signal, or an activity's write and its result) where a crash must leave nothing that a retry or the maintenance sweep cannot repair; when the
 * comma-separated `HB_FAILPOINTS` names it, the process kills itself there with SIGKILL (no shutdown hooks, no
 * `finally`: what a power cut or an OOM kill does). Named `name:error`, it throws there instead, as a write or a call
 * that failed would: the process lives on and the request answers 500. test/dual-writes.test.ts starts an api with each
 * of its names set; test/users-crash.test.ts and test/lab-orders-crash.test.ts a worker that dies between a write and
 * reporting it to Temporal.
 * A test can also arm a point in its own process (armFailpoint), e.g. to fail one write of code it calls directly.
 * Never set in a deployment: unset, a crash point is one lookup in an empty map.
 */
type Failure = { kind: 'crash' | 'error'; times: number };

const armed = new Map<string, Failure>(
  (process.env.HB_FAILPOINTS ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry): [string, Failure] =>
      entry.endsWith(':error') ? [entry.slice(0, -':error'.length), { kind: 'error', times: Infinity }] : [entry, { kind: 'crash', times: Infinity }],
    ),
);

export function crashPoint(name: string): void {
  const failure = armed.get(name);
  if (!failure) return;
  if (failure.kind === 'crash') process.kill(process.pid, 'SIGKILL');
  if (--failure.times <= 0) armed.delete(name);
  throw new Error(`failpoint ${name} (a test made this step fail)`);
}

/** Test-only, in the test's own process: the next `times` passes through `crashPoint(name)` throw (`error`). */
export function armFailpoint(name: string, kind: 'error', times = 1): void {
  armed.set(name, { kind, times });
}
