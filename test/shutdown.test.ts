import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { createTenant, eventually, startTestApp, uniqueId, type TestApp } from './support/harness';
import { freePort } from './support/free-port';
import { privateDeployment } from './support/worker';

const root = path.resolve(__dirname, '..');
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

function startProcess(entry: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [path.join(root, 'dist', entry)], {
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, output: () => output };
}

const kill = (child: ChildProcess) => child.exitCode === null && child.kill('SIGKILL');

/** The Node.js major a process names in its start-up log line (`msg`), as an operator reads it. */
function nodeMajorLogged(output: string, msg: string): number {
  const line = output.split('\n').find((l) => l.includes(`"msg":"${msg}"`));
  return Number(/"node":"v(\d+)\./.exec(line ?? '')?.[1]);
}

describe('graceful shutdown', () => {
  it('the api finishes an in-flight request on SIGTERM, then exits 0', async () => {
    const tenant = await createTenant(app.deps);
    const port = await freePort();
    const api = startProcess('api/main.js', { API_PORT: String(port) });
    try {
      await eventually(async () => (await fetch(`http://127.0.0.1:${port}/health`)).ok, 30000, 'api up');
      await eventually(async () => api.output().includes('api listening'), 5000, 'api start-up line');
      expect(nodeMajorLogged(api.output(), 'api listening')).toBeGreaterThanOrEqual(24);
      const body = JSON.stringify({ client_user_id: uniqueId('inflight') });
      // Send half of the request, signal, then the rest: the request must still be answered.
      const response = new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port,
            method: 'POST',
            path: '/v2/user/',
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-service-api-key': tenant.teamKey },
          },
          (res) => {
            let text = '';
            res.on('data', (d) => (text += d));
            res.on('end', () => resolve({ status: res.statusCode!, text }));
          },
        );
        req.on('error', reject);
        req.write(body.slice(0, 10));
        setTimeout(() => {
          api.child.kill('SIGTERM');
          setTimeout(() => req.end(body.slice(10)), 300);
        }, 200);
      });
      const res = await response;
      expect(res.status).toBe(200);
      expect(JSON.parse(res.text).client_user_id).toMatch(/^inflight-/);
      expect(await api.exited).toBe(0);
      expect(api.output()).toContain('api stopped');
      await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
    } finally {
      kill(api.child);
    }
  });

  it('the worker drains and exits 0 on SIGTERM', async () => {
    const worker = startProcess('worker/main.js', { ...privateDeployment('shutdown') });
    try {
      await eventually(async () => worker.output().includes('worker running'), 60000, 'worker running');
      expect(nodeMajorLogged(worker.output(), 'worker running')).toBeGreaterThanOrEqual(24);
      worker.child.kill('SIGTERM');
      expect(await worker.exited).toBe(0);
      expect(worker.output()).toContain('worker stopped');
    } finally {
      kill(worker.child);
    }
  });

  it('a bad configuration stops the process with a message naming the variable', async () => {
    const api = startProcess('api/main.js', { DEPLOYMENT_ENVIRONMENT: 'staging' });
    expect(await api.exited).toBe(1);
    expect(api.output()).toMatch(/DEPLOYMENT_ENVIRONMENT="staging"/);
  });
});
