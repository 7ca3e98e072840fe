import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { collectLines } from './support/child-lines';
import { eventually } from './support/harness';

/**
 * A test or bench run that is killed (kill -9, a closed terminal) cannot stop the servers it started. The next
 * run's start-up stops them and removes their folder (scripts/stack.mjs reapAbandonedStacks), and leaves alone the
 * folders of runs still alive.
 */
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
  } catch {
    return false;
  }
};

describe('servers left by a killed run', () => {
  const parent = path.join(process.env.HB_TEST_STATE_DIR ?? path.join(__dirname, '..', '.devstack', 'test-adhoc'), `reap-${process.pid}`);

  it('are stopped, and their folder removed, by the next start; a live run is left alone', async () => {
    mkdirSync(parent, { recursive: true });
    const start = (name: string) => {
      const env: NodeJS.ProcessEnv = { ...process.env, STACK_STATE_DIR: path.join(parent, name) };
      delete env.MONGO_URL;
      const child = spawn(process.execPath, [path.join(__dirname, 'support', 'stack-driver.mjs')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      return { child, lines: collectLines(child) };
    };
    const killed = start('run-killed');
    const live = start('run-live');
    const pidsOf = async (run: ReturnType<typeof start>) =>
      eventually(
        async () => {
          const ready = run.lines.find((l) => l.startsWith('ready '));
          return ready ? (Object.values(JSON.parse(ready.slice('ready '.length)).pids) as number[]) : null;
        },
        60_000,
        'a private stack',
      );
    const killedServers = await pidsOf(killed);
    const liveServers = await pidsOf(live);
    try {
      killed.child.kill('SIGKILL'); // its servers keep running: they are in process groups of their own
      await eventually(async () => killed.child.exitCode !== null || killed.child.signalCode !== null, 10_000, 'the run to die');
      expect(killedServers.every(alive)).toBe(true);

      const reaper = `import('${path.join(__dirname, '..', 'scripts', 'stack.mjs')}').then((m) => m.reapAbandonedStacks({ parentDir: '${parent}', prefix: 'run-' }))`;
      const output = execFileSync(process.execPath, ['-e', reaper], { encoding: 'utf8' });

      expect(output).toContain(`cleaning up ${path.join(parent, 'run-killed')}, left by a run that is gone`);
      expect(killedServers.filter(alive)).toEqual([]);
      expect(existsSync(path.join(parent, 'run-killed'))).toBe(false);
      expect(liveServers.every(alive)).toBe(true);
      expect(existsSync(path.join(parent, 'run-live', 'stack.json'))).toBe(true);
    } finally {
      live.child.kill('SIGTERM');
      await eventually(async () => live.lines.includes('stopped'), 20_000, 'the live run to stop');
      for (const pid of [...killedServers, ...liveServers]) if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
    expect(liveServers.filter(alive)).toEqual([]);
  }, 120_000);
});
