import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './support/free-port';

/**
 * The README's commands as a newcomer runs them: each in a fresh copy of the repository (its tracked files as the
 * work tree has them, which is what a clone of this commit holds: no node_modules, no dist, no .devstack), from a
 * shell that has only the machine's own environment (none of this run's MONGO_URL, keys or PATH additions). A
 * command that needs a step the README does not name fails here. The machine's caches (server binaries, npm's
 * download cache) are shared, as on any machine that ran them before; the cold start itself is measured by hand
 * (README "Quick start").
 *
 * Its own jest run (scripts/test.mjs runs `test/*.scenario.ts` after the suite, one file at a time): each command
 * installs and compiles a copy. Alone: `npm test -- --testMatch '**\/test/readme-commands.scenario.ts'`.
 */
const repoRoot = path.resolve(__dirname, '..');
const MINUTE = 60_000;
const copies: string[] = [];

afterAll(() => {
  for (const dir of copies) fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh copy of the repository's tracked files. */
function freshCopy(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hb-newcomer-'));
  copies.push(dir);
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: repoRoot, encoding: 'utf8' }).split('\0').filter(Boolean);
  for (const file of files) {
    const from = path.join(repoRoot, file);
    if (!fs.existsSync(from)) continue; // deleted in the work tree, not yet committed
    const to = path.join(dir, file);
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.copyFileSync(from, to);
    fs.chmodSync(to, fs.statSync(from).mode);
  }
  expect(fs.existsSync(path.join(dir, 'node_modules'))).toBe(false);
  return dir;
}

/** What a newcomer's shell has: the machine's variables, none of this test run's. */
function newcomerEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  const machine = [
    'HOME',
    'USER',
    'LANG',
    'TMPDIR',
    'HEALTHBRIDGE_CACHE_DIR',
    'XDG_CACHE_HOME',
    'JAVA_HOME',
    'GOPATH',
    'GOMODCACHE',
    'GOCACHE',
    'GOPROXY',
    'GOFLAGS',
  ];
  for (const key of machine) if (process.env[key] !== undefined) env[key] = process.env[key];
  // npm puts this repository's node_modules/.bin on PATH for `npm test`; a newcomer's shell has no such entry.
  env.PATH = (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter((dir) => !dir.includes('node_modules'))
    .join(path.delimiter);
  return { ...env, ...extra };
}

interface Command {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | string>;
}

/** `npm <args>` in `dir`, in a process group of its own (so an interrupt reaches all of it, as Ctrl-C does). */
function npm(dir: string, args: string[], env: NodeJS.ProcessEnv): Command {
  const child = spawn('npm', args, { cwd: dir, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')));
  return { child, output: () => output, exited };
}

const lastLines = (text: string, n = 60) => text.split('\n').slice(-n).join('\n');

async function finished(command: Command, what: string, timeoutMs: number): Promise<number | string> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
  const outcome = await Promise.race([command.exited, timeout]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    process.kill(-command.child.pid!, 'SIGINT');
    await command.exited;
    throw new Error(`${what} did not finish in ${timeoutMs / MINUTE} min; its last lines:\n${lastLines(command.output())}`);
  }
  return outcome;
}

test(
  '`DEV_FAKE_LAB=1 npm run dev` on a fresh copy reaches the banner; the URLs it returns carry its address; an order reaches the fake lab and its results come back; Ctrl-C stops everything',
  async () => {
    const dir = freshCopy();
    const [api, mongo, temporal, ui, mllp] = [await freePort(), await freePort(), await freePort(), await freePort(), await freePort()];
    const ports = { API_PORT: String(api), DEV_MONGO_PORT: String(mongo), DEV_TEMPORAL_PORT: String(temporal), DEV_TEMPORAL_UI_PORT: String(ui) };
    const lab = { DEV_FAKE_LAB: '1', LAB_MLLP_PORT: String(mllp), DEV_FAKE_LAB_CONTROL_PORT: '0', DEV_FAKE_LAB_RESULTS_SECONDS: '0' };
    const dev = npm(dir, ['run', 'dev'], newcomerEnv({ ...ports, ...lab }));
    try {
      const deadline = Date.now() + 8 * MINUTE;
      while (!dev.output().includes('Healthbridge is running.')) {
        if (dev.child.exitCode !== null || Date.now() > deadline) throw new Error(`no banner; the last lines:\n${lastLines(dev.output())}`);
        await new Promise((r) => setTimeout(r, 500));
      }
      const base = `http://127.0.0.1:${api}`;
      expect(dev.output()).toContain(`API:          ${base}`);
      const creds = JSON.parse(fs.readFileSync(path.join(dir, '.devstack', 'credentials.json'), 'utf8'));
      expect(creds.base_url).toBe(base);
      const providers = await fetch(`${base}/v2/providers/`, { headers: { 'x-service-api-key': creds.team_api_key } });
      expect(providers.status).toBe(200);
      const link = await fetch(`${base}/v1/org/${creds.org_id}/team/${creds.team_id}/sandbox/console/links`, {
        method: 'POST',
        headers: { 'X-Management-Key': creds.management_key },
      });
      expect(link.status).toBe(201);
      const { url } = (await link.json()) as { url: string };
      expect(url.startsWith(`${base}/console#link=`)).toBe(true);
      expect((await fetch(url.replace(/#.*/, ''))).status).toBe(200);
      // The fake lab starts last, half a minute on: its control port is any free one then (one chosen now could be
      // taken by an outgoing connection meanwhile), read from the banner.
      const control = /The lab holds: curl (http:\/\/127\.0\.0\.1:\d+)\/orders/.exec(dev.output())?.[1];
      expect(control).toBeDefined();
      await orderThroughTheFakeLab(dev.output(), base, creds.team_api_key, control!);
    } finally {
      if (dev.child.exitCode === null) process.kill(-dev.child.pid!, 'SIGINT');
    }
    // npm ends itself with the signal it was sent once its script has exited (as after Ctrl-C in a terminal).
    expect([0, 'SIGINT']).toContain(await finished(dev, '`npm run dev` after Ctrl-C', 1 * MINUTE));
    expect(dev.output()).toContain('dev: stopped.');
    // Nothing it started is left: the servers' pids it recorded are gone.
    const stackFile = path.join(dir, '.devstack', 'stack.json');
    const stack = fs.existsSync(stackFile) ? JSON.parse(fs.readFileSync(stackFile, 'utf8')) : {};
    const alive = Object.values<number>(stack.pids ?? {}).filter((pid) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    });
    expect(alive).toEqual([]);
  },
  12 * MINUTE,
);

/** What the banner of DEV_FAKE_LAB=1 tells a newcomer to do: order its lab test, see the lab hold it, send results. */
async function orderThroughTheFakeLab(banner: string, base: string, teamKey: string, control: string): Promise<void> {
  const labTestId = /lab test ([0-9a-f-]{36})/.exec(banner)?.[1];
  expect(labTestId).toBeDefined();
  const order = /Order it: +curl (.*) -d '(.*)'$/m.exec(banner);
  expect(order).not.toBeNull();
  const created = await fetch(`${base}/v3/order`, {
    method: 'POST',
    headers: { 'x-service-api-key': teamKey, 'content-type': 'application/json' },
    body: order![2],
  });
  expect(created.status).toBe(200);
  const orderId = ((await created.json()) as { order: { id: string } }).order.id;
  const held = async () => ((await (await fetch(`${control}/orders`)).json()) as { placer_number: string; message: string[] }[])[0];
  const deadline = Date.now() + 2 * MINUTE;
  let atLab = await held();
  while (!atLab && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 500));
    atLab = await held();
  }
  expect(atLab?.message[0]).toMatch(/^MSH\|\^~\\&\|.*\|OML\^O21/);
  expect(atLab.message.some((line) => line.startsWith('PID|') && line.includes('Müller'))).toBe(true);
  const sent = await fetch(`${control}/orders/${atLab.placer_number}/results?status=F`, { method: 'POST' });
  expect(await sent.json()).toMatchObject({ ack: 'AA' });
  let status = '';
  while (status !== 'completed' && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 500));
    const read = await fetch(`${base}/v3/order/${orderId}`, { headers: { 'x-service-api-key': teamKey } });
    status = ((await read.json()) as { status: string }).status;
  }
  expect(status).toBe('completed');
}

test(
  '`BENCH_SUITES=webhooks npm run bench` on a fresh copy sets itself up and reports its ratios',
  async () => {
    const dir = freshCopy();
    // Short windows: the command's set-up is under test here, not the figures.
    const small = {
      BENCH_SUITES: 'webhooks',
      BENCH_WEBHOOK_ENDPOINTS: '1',
      BENCH_WEBHOOK_EVENTS: '200',
      BENCH_WEBHOOK_PACED_SECONDS: '2',
      BENCH_WEBHOOK_RATE: '50',
    };
    const bench = npm(dir, ['run', 'bench'], newcomerEnv(small));
    const code = await finished(bench, '`npm run bench`', 15 * MINUTE);
    if (code !== 0) throw new Error(`\`npm run bench\` exited ${code}; the last lines:\n${lastLines(bench.output())}`);
    expect(bench.output()).toMatch(/setup: installing dependencies/);
    expect(bench.output()).toMatch(/webhook delivery \/ plain POST, 1 endpoint/);
    expect(fs.existsSync(path.join(dir, '.devstack', 'bench-results.json'))).toBe(true);
  },
  16 * MINUTE,
);

test(
  '`npm test` on a fresh copy sets itself up and runs jest (one file of the suite)',
  async () => {
    const dir = freshCopy();
    const run = npm(dir, ['test', '--', 'test/deployment.test.ts'], newcomerEnv({}));
    const code = await finished(run, '`npm test`', 15 * MINUTE);
    if (code !== 0) throw new Error(`\`npm test\` exited ${code}; the last lines:\n${lastLines(run.output())}`);
    expect(run.output()).toMatch(/Tests:\s+\d+ passed, \d+ total/);
  },
  16 * MINUTE,
);
