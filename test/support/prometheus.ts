import { spawn } from 'node:child_process';
import path from 'node:path';
import { collectLines } from './child-lines';
import { eventually } from './harness';

/**
 * A real Prometheus of a test's own (prometheus-driver.mjs runs scripts/stack/prometheus.mjs in its own process,
 * as ES modules jest's sandbox cannot load), scraping `targets` every 2 s.
 */
export interface TestPrometheus {
  url: string;
  /** When it answered: the data it holds starts here. */
  startedAt: number;
  /** Stops it; true when the driver said it stopped it. */
  stop(): Promise<boolean>;
}

export async function startTestPrometheus(targets: { job: string; address: string }[]): Promise<TestPrometheus> {
  const stateDir = path.join(process.env.HB_TEST_STATE_DIR ?? path.join(__dirname, '..', '..', '.devstack', 'test-adhoc'), `prometheus-${process.pid}`);
  const driver = spawn(process.execPath, [path.join(__dirname, 'prometheus-driver.mjs')], {
    env: { ...process.env, PROMETHEUS_STATE_DIR: stateDir, PROMETHEUS_TARGETS: JSON.stringify(targets) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines = collectLines(driver);
  const url = await eventually(async () => lines.find((l) => l.startsWith('ready '))?.slice('ready '.length), 60_000, `Prometheus (${lines.join(' | ')})`);
  return {
    url,
    startedAt: Date.now(),
    async stop() {
      if (driver.exitCode === null) {
        const gone = new Promise((r) => driver.once('exit', r));
        driver.kill('SIGTERM');
        await gone;
      }
      return lines.includes('stopped');
    },
  };
}
