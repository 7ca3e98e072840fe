import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { MongoClient } from 'mongodb';
import { createTenant, eventually, httpClient, startTestApp, teamClient, type TestApp } from './support/harness';
import { startPrivateStack, type PrivateStack, type PrivateStackInfo } from './support/private-stack';

/**
 * The embedded store under kill -9, one server at a time, while writers insert: the stack's supervisor (the one
 * `npm run dev` runs) starts the server again on its port and data, PostgreSQL recovers from its WAL, FerretDB
 * reconnects, and every write the database acknowledged is still stored. `/ready` says the database is down
 * while it is. The stack is a private one (test/support/stack-driver.mjs), so the suite's database is untouched.
 */
const RESTART_DELAY_MS = 2_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the embedded database under kill -9', () => {
  const stateDir = path.join(process.env.HB_TEST_STATE_DIR ?? path.join(__dirname, '..', '.devstack', 'test-adhoc'), `db-crash-${process.pid}`);
  let lines: string[] = [];
  let stack: PrivateStack;
  let info: PrivateStackInfo;
  let client: MongoClient;
  let app: TestApp;

  const currentPid = (name: string): number => stack.currentPid(name);

  beforeAll(async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, STACK_RESTART_DELAY_MS: String(RESTART_DELAY_MS) };
    delete env.MONGO_URL; // its own database servers; Temporal stays the suite's (TEMPORAL_ADDRESS)
    stack = await startPrivateStack(stateDir, env, 'the private database stack');
    ({ info, lines } = stack);
    expect(info.pids).toEqual({ postgres: expect.any(Number), mongo: expect.any(Number) });
    client = await MongoClient.connect(info.mongoUrl, { serverSelectionTimeoutMS: 1_000 });
    app = await startTestApp({ MONGO_URL: info.mongoUrl, MONGO_DB: 'crash_ready' });
  }, 120_000);

  afterAll(async () => {
    await app?.close();
    await client?.close();
    await stack?.stop();
    expect(lines).toContain('stopped');
  }, 30_000);

  /** Four writers insert numbered documents through the kill and the restart; returns what was acknowledged. */
  async function writeThroughKill(server: 'postgres' | 'mongo', label: string) {
    const collection = client.db('crash').collection<{ _id: string; writer: number }>(`writes_${server}`);
    const acknowledged = new Set<string>();
    let failures = 0;
    let stop = false;
    let sequence = 0;
    const writer = async (w: number) => {
      while (!stop) {
        const _id = `${w}-${sequence++}`;
        try {
          await collection.insertOne({ _id, writer: w });
          acknowledged.add(_id);
        } catch {
          failures++;
          await sleep(50);
        }
      }
    };
    const writers = [0, 1, 2, 3].map(writer);
    try {
      await eventually(async () => acknowledged.size >= 200, 30_000, 'writes before the kill');
      const killed = currentPid(server);
      process.kill(killed, 'SIGKILL');
      await eventually(
        async () => lines.some((l) => l.includes(`${label} (pid ${killed}) exited unexpectedly (signal SIGKILL)`)),
        10_000,
        'the exit to be seen',
      );
      await eventually(
        async () => currentPid(server) !== killed && lines.some((l) => l.includes(`${label} restarted (pid ${currentPid(server)})`)),
        30_000,
        'the restart',
      );
      const afterRestart = acknowledged.size;
      await eventually(async () => acknowledged.size >= afterRestart + 200, 60_000, 'writes after the restart');
    } finally {
      stop = true;
      await Promise.all(writers);
    }
    const stored = new Set((await collection.find({}, { projection: { _id: 1 } }).toArray()).map((d) => d._id));
    return { acknowledged, failures, stored };
  }

  it('restarts PostgreSQL killed during writes; every acknowledged write survives; /ready and requests show the outage at once', async () => {
    const ready = httpClient(app.url);
    expect((await ready.get('/ready')).body.checks.mongodb).toBe(true);
    const api = teamClient(app, await createTenant(app.deps, 'Outage'));
    const seen: boolean[] = [];
    const answers: { status: number; retryAfter: string | null; ms: number }[] = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const started = Date.now();
        const r = await ready.get('/ready');
        seen.push(r.body.checks.mongodb);
        answers.push({ status: r.status, retryAfter: null, ms: Date.now() - started });
        const t = Date.now();
        const res = await api.get(`/v2/user/${randomUUID()}`); // a read: 404 while the database answers
        answers.push({ status: res.status, retryAfter: res.headers.get('retry-after'), ms: Date.now() - t });
        await sleep(100);
      }
    })();
    const { acknowledged, failures, stored } = await writeThroughKill('postgres', 'PostgreSQL');
    await eventually(async () => (await ready.get('/ready')).body.checks.mongodb === true, 30_000, 'ready again');
    watching = false;
    await watcher;
    seen.push((await ready.get('/ready')).body.checks.mongodb);

    expect(failures).toBeGreaterThan(0); // the outage was felt by the writers
    expect([...acknowledged].filter((id) => !stored.has(id))).toEqual([]);
    expect(seen).toContain(false); // the database reported down while PostgreSQL was
    expect(seen.lastIndexOf(true)).toBeGreaterThan(seen.indexOf(false)); // ...and up again after the restart
    // While it was down: requests were refused with 503 and Retry-After, never 500, and nothing waited long.
    expect(answers.filter((a) => a.status === 503 && a.retryAfter === '5').length).toBeGreaterThan(0);
    expect(answers.filter((a) => a.status === 500)).toEqual([]);
    expect(Math.max(...answers.map((a) => a.ms))).toBeLessThan(3_500);
  }, 120_000);

  it('restarts FerretDB killed during writes; every acknowledged write survives', async () => {
    const goCollector = (pid: number) =>
      readFileSync(`/proc/${pid}/environ`, 'utf8')
        .split('\0')
        .find((v) => v.startsWith('GOGC='));
    const expected = `GOGC=${process.env.GOGC ?? '400'}`; // scripts/stack/lifecycle.mjs ferretdbEnv
    expect(goCollector(currentPid('mongo'))).toBe(expected);
    const { acknowledged, failures, stored } = await writeThroughKill('mongo', 'FerretDB');
    expect(goCollector(currentPid('mongo'))).toBe(expected); // the restarted FerretDB runs with it too
    expect(failures).toBeGreaterThan(0);
    expect([...acknowledged].filter((id) => !stored.has(id))).toEqual([]);
    expect(acknowledged.size).toBeGreaterThanOrEqual(400);
  }, 120_000);
});
