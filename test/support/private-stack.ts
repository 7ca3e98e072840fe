import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { collectLines } from './child-lines';
import { eventually } from './harness';

export interface PrivateStackInfo {
  mongoUrl: string;
  temporalAddress: string;
  pids: Record<string, number>;
}

/** A stack of a test's own, supervised as `npm run dev` supervises its servers (test/support/stack-driver.mjs). */
export interface PrivateStack {
  info: PrivateStackInfo;
  /** The driver's output: `ready …`, then every stack log line (exits, restarts), then `stopped`. */
  lines: string[];
  /** A server's pid now (after restarts), from the stack's stack.json. */
  currentPid(name: string): number;
  /** SIGTERM to the driver, which stops the stack (SIGKILL after 20 s). */
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts the stack driver on `stateDir` with `env` (STACK_RESTART_DELAY_MS, STACK_PERSIST; leave MONGO_URL or
 * TEMPORAL_ADDRESS out of it to get that server of its own) and waits until its servers answer.
 */
export async function startPrivateStack(stateDir: string, env: NodeJS.ProcessEnv, label: string): Promise<PrivateStack> {
  const driver = spawn(process.execPath, [path.join(__dirname, 'stack-driver.mjs')], {
    env: { ...env, STACK_STATE_DIR: stateDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines = collectLines(driver);
  const stop = async () => {
    if (driver.exitCode !== null) return;
    const exited = new Promise((r) => driver.once('exit', r));
    driver.kill('SIGTERM');
    await Promise.race([exited, sleep(20_000)]);
    if (driver.exitCode === null) driver.kill('SIGKILL');
  };
  try {
    const info = await eventually(
      async () => {
        if (driver.exitCode !== null) throw new Error(`the stack driver exited:\n${lines.join('\n')}`);
        const ready = lines.find((l) => l.startsWith('ready '));
        return ready ? (JSON.parse(ready.slice('ready '.length)) as PrivateStackInfo) : null;
      },
      90_000,
      label,
    );
    const currentPid = (name: string): number => JSON.parse(readFileSync(path.join(stateDir, 'stack.json'), 'utf8')).pids[name];
    return { info, lines, currentPid, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
