import type { ChildProcess } from 'node:child_process';
import { workflowIds } from '../workflows/ids';
import { createTenant, eventually, startTestApp, teamClient, uniqueId, type TestApp } from './support/harness';
import { privateDeployment, startWorker, stopWorker, workerEnded } from './support/worker';

/**
 * Crash test: a user's deletion workflow takes an undo and a DELETE together, and the worker applying them dies
 * after its last write reached the database but before Temporal heard of it. Another worker carries on from the
 * workflow's history. Whatever the dead worker wrote must not leave the user where the workflow cannot reach it:
 * the two requests get the answers of one order of the two, and the user can be restored afterwards.
 */
const deployment = privateDeployment('users-crash');
const workers: ChildProcess[] = [];
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp(deployment);
});
afterAll(async () => {
  for (const worker of workers) await stopWorker(worker, 'SIGKILL');
  await app.close();
});

const launch = (env: Record<string, string> = {}) => {
  const worker = startWorker(deployment, env);
  workers.push(worker);
  return worker;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a worker killed after writing an undo and a DELETE, before Temporal recorded them, leaves the user restorable', async () => {
  const client = teamClient(app, await createTenant(app.deps, 'Users crash'));
  const user = (await client.post('/v2/user/', { client_user_id: uniqueId('crash') })).body.user_id as string;

  const first = launch();
  expect((await client.del(`/v2/user/${user}`)).status).toBe(200);
  // The deletion's next step, deregistering connections, done before the kill: killed mid-step, it would hold the
  // requests below until its timeout (a minute), whichever way they were applied.
  const workflow = app.deps.temporal.client.workflow.getHandle(workflowIds.userDeletion(user));
  await eventually(async () => ((await workflow.describe()).raw.pendingActivities ?? []).length === 0, 30_000, 'connections deregistered');
  await stopWorker(first, 'SIGKILL');

  // With no worker, both requests wait at the workflow: the next worker gets them in one workflow task.
  const undo = client.post(`/v2/user/undo_delete?user_id=${user}`);
  await sleep(300);
  const del = client.del(`/v2/user/${user}`);
  await sleep(1000);

  // This worker dies right after the DELETE's write (the undo writes first), before it can report it.
  const doomed = launch({ HB_FAILPOINTS: 'user-deletion.marked' });
  expect(await workerEnded(doomed)).toBe('SIGKILL');
  const stored = await app.inspect.collection('users').findOne({ _id: user as never });
  expect(stored?.status).toBe('pending_deletion'); // the DELETE's write landed

  launch();
  const answers = { undo: (await undo).status, del: (await del).status };
  // Applied undo first (the DELETE came later): both succeed.
  expect(answers).toEqual({ undo: 200, del: 200 });
  const after = await client.get(`/v2/user/${user}`);
  expect(after.body.detail).toMatch(/scheduled this user for deletion/);

  const restored = await client.post(`/v2/user/undo_delete?user_id=${user}`);
  expect({ status: restored.status, body: restored.body }).toEqual({ status: 200, body: { success: true } });
  await eventually(async () => (await client.get(`/v2/user/${user}`)).status === 200, 10_000, 'user visible again');
}, 120_000);
