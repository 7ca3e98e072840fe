import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type * as ImportThread from '../lib/phones/apple-health-import-thread';
import { CHUNK_BYTES } from '../lib/phones/imports-store';
import { generateExport, zipOf } from './support/apple-health-export';
import { createTenant, startTestApp, teamClient, uniqueId, type TestApp } from './support/harness';

/**
 * The Apple Health import's thread (lib/phones/apple-health-import-thread.ts) as the worker runs it (the compiled
 * module: the thread is started from its own file), on the real database: cancelled, it stops storing at once; out
 * of memory, it fails naming the setting that caps it. Its normal path is test/apple-health-import.test.ts's, through
 * the workflow.
 */
const { importInThread } = require(path.join(__dirname, '..', 'dist', 'lib', 'phones', 'apple-health-import-thread.js')) as typeof ImportThread;

let app: TestApp;
let teamId: string;
let newUser: () => Promise<string>;

beforeAll(async () => {
  app = await startTestApp();
  const tenant = await createTenant(app.deps, 'Apple Health import thread');
  teamId = tenant.teamId;
  const api = teamClient(app, tenant);
  newUser = async () => (await api.post('/v2/user/', { client_user_id: uniqueId('thread') })).body.user_id;
});
afterAll(() => app.close());

/** An uploaded import, stored as the upload stores it, its workflow not started (the test runs the thread itself). */
async function storedImport(userId: string, file: Buffer): Promise<string> {
  const imports = app.deps.repos.appleHealthImports;
  const doc = await imports.create({ _id: uniqueId('import'), team_id: teamId, user_id: userId, format: 'zip', upload_length: file.length }, new Date());
  for (let at = 0; at < file.length; at += CHUNK_BYTES) {
    const end = Math.min(file.length, at + CHUNK_BYTES);
    expect(await imports.append(doc._id, at, file.subarray(at, end), end === file.length, new Date())).not.toBeNull();
  }
  return doc._id;
}

const storedHeartRate = (userId: string) =>
  app.deps.repos.wearableData.findSamples({
    teamId,
    userId,
    resource: 'heartrate',
    from: new Date('2000-01-01'),
    to: new Date('2100-01-01'),
    provider: 'apple_health_kit',
  });

describe('the Apple Health import thread', () => {
  test('cancelled, the thread ends at once and stores nothing more', async () => {
    const userId = await newUser();
    const { xml, expected } = generateExport({ days: 1000, lastDay: '2026-06-30', seed: 7 });
    const importId = await storedImport(userId, zipOf([{ name: 'apple_health_export/export.xml', data: Buffer.from(xml) }]));
    const expectedHeart = [...expected.points.keys()].filter((k) => k.startsWith('heartrate|')).length;

    const cancel = new AbortController();
    let reports = 0;
    const run = importInThread(
      app.deps.config,
      importId,
      () => {
        // The first progress report comes after 20,000 elements: the import is under way, with most of the file to go.
        if (++reports === 1) cancel.abort(new Error('cancelled by the test'));
      },
      cancel.signal,
    );
    await expect(run).rejects.toThrow('cancelled by the test');
    expect(reports).toBeGreaterThanOrEqual(1);

    // The thread is terminated when the promise settles; a statement it had sent may still land just after (the
    // database finishes it): a second on, what it stored stays as it is.
    await sleep(1000);
    const atCancel = (await storedHeartRate(userId)).length;
    await sleep(1500);
    const later = (await storedHeartRate(userId)).length;
    expect(later).toBe(atCancel);
    expect(later).toBeLessThan(expectedHeart);
    // The import's own document is the workflow's to end (a retry starts again): the thread left it importing.
    expect((await app.deps.repos.appleHealthImports.get(importId))?.status).toBe('importing');
  });

  test('a thread out of memory fails naming APPLE_HEALTH_IMPORT_HEAP_MB', async () => {
    const userId = await newUser();
    const { xml } = generateExport({ days: 30, lastDay: '2026-06-30', seed: 8 });
    const importId = await storedImport(userId, zipOf([{ name: 'apple_health_export/export.xml', data: Buffer.from(xml) }]));
    // Below the setting's minimum (32): a heap the thread cannot load its modules in. (Not below 4 MB: V8 then fails
    // while it makes the thread, and that ends the whole process; the setting's minimum keeps well above it.)
    const config = { ...app.deps.config, APPLE_HEALTH_IMPORT_HEAP_MB: 8 };
    await expect(importInThread(config, importId, () => {})).rejects.toThrow(
      /The Apple Health import thread failed: .*out of memory.*\(its heap is capped at APPLE_HEALTH_IMPORT_HEAP_MB=8: raise it\)/,
    );
    expect(await storedHeartRate(userId)).toHaveLength(0);
  });
});
