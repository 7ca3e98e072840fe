import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { collectLines } from './support/child-lines';
import { eventually } from './support/harness';

/**
 * `npm run dev` keeps the worker and the api running through scripts/supervise.mjs. This drives the same
 * module over a real child process (test/support/supervise-driver.mjs): SIGKILL it, see it logged and
 * restarted with a growing delay; stop the driver, and nothing is left running.
 */
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('the dev supervisor', () => {
  let driver: ChildProcess;
  let lines: string[] = [];
  const childPids = () =>
    lines
      .map((l) => /demo running child_pid=(\d+)/.exec(l)?.[1])
      .filter(Boolean)
      .map(Number);

  beforeAll(() => {
    driver = spawn(process.execPath, [path.join(__dirname, 'support', 'supervise-driver.mjs')], { stdio: ['ignore', 'pipe', 'pipe'] });
    lines = collectLines(driver);
  });
  afterAll(() => {
    if (driver.exitCode === null) driver.kill('SIGKILL');
    for (const pid of childPids()) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });

  it('shows every event on one readable line: pino JSON formatted, errors with where they were thrown, long values cut, colours stripped', async () => {
    await eventually(async () => childPids().length === 1, 10_000, 'the child to log');
    const [pid] = childPids();
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^\\d\\d:\\d\\d:\\d\\d INFO  \\[demo\\] demo running child_pid=${pid} port=1234$`)));
    await eventually(async () => lines.some((l) => l.includes('a coloured plain line')), 10_000, 'the last line');
    const error = lines.findIndex((l) => l.includes('demo failed once'));
    expect(lines[error]).toMatch(/^\d\d:\d\d:\d\d ERROR \[demo\] demo failed once err=boom \(at .+:\d+:\d+\)$/);
    expect(lines[error + 1]).not.toMatch(/^\s+at /); // no stack lines: one event, one line
    const long = lines.find((l) => l.includes('a long line'))!;
    expect(long).toMatch(/^\d\d:\d\d:\d\d WARN {2}\[demo\] a long line ids=x+…\(\+69700\)$/);
    expect(long.length).toBeLessThan(400);
    expect(lines).toContain('[demo] a plain line');
    expect(lines).toContain('[demo] WARN a coloured plain line');
    expect(lines.join('\n')).not.toMatch(/"level":|\u001b\[/);
  });

  it('restarts a killed process with a growing delay, and logs it', async () => {
    const [first] = childPids();
    process.kill(first, 'SIGKILL');
    await eventually(async () => childPids().length === 2, 10_000, 'the first restart');
    const second = childPids()[1];
    expect(second).not.toBe(first);
    expect(lines).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `^dev: \\d\\d:\\d\\d:\\d\\d demo \\(pid ${first}\\) exited unexpectedly \\(signal SIGKILL\\) after [\\d.]+ s; restarting in 0\\.2 s \\(restart 1\\)$`,
        ),
      ),
    );
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^dev: \\d\\d:\\d\\d:\\d\\d demo restarted \\(pid ${second}\\)$`)));

    process.kill(second, 'SIGKILL');
    await eventually(async () => childPids().length === 3, 10_000, 'the second restart');
    expect(lines).toContainEqual(expect.stringMatching(/demo \(pid \d+\) exited unexpectedly \(signal SIGKILL\) .*restarting in 0\.4 s \(restart 2\)$/));
  });

  it('stops the process and itself on SIGINT (Ctrl-C), without restarting it', async () => {
    const last = childPids()[2];
    expect(alive(last)).toBe(true);
    const exited = new Promise<number | null>((resolve) => driver.once('exit', (code) => resolve(code)));
    driver.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(alive(last)).toBe(false);
    expect(lines.filter((l) => l.includes('restarted'))).toHaveLength(2);
    expect(lines).toContainEqual(expect.stringMatching(/^dev: \d\d:\d\d:\d\d stopped$/));
  });
});
