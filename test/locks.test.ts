import { DocumentLocks } from '../lib/repositories/locks';
import { startTestApp, uniqueId, type TestApp } from './support/harness';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

describe('document locks (the race guard for read-check-write changes)', () => {
  it('serialises concurrent read-increment-write cycles on the real database', async () => {
    const counters = app.deps.db.collection<{ _id: string; n: number }>('lock_test_counters');
    const id = uniqueId('counter');
    await counters.insertOne({ _id: id, n: 0 });
    const locks = new DocumentLocks(app.deps.db);
    await Promise.all(
      Array.from({ length: 20 }, () =>
        locks.withLock(`counter:${id}`, async () => {
          const doc = await counters.findOne({ _id: id });
          await counters.updateOne({ _id: id }, { $set: { n: doc!.n + 1 } });
        }, 30_000),
      ),
    );
    expect((await counters.findOne({ _id: id }))!.n).toBe(20);
  });

  it('takes over a lock left behind by a crashed holder once it expires', async () => {
    const locks = new DocumentLocks(app.deps.db);
    const key = `crashed:${uniqueId()}`;
    await locks.locks.insertOne({ _id: key, owner: 'dead-process', expires_at: new Date(Date.now() - 1000) });
    await expect(locks.withLock(key, async () => 'ran')).resolves.toBe('ran');
    expect(await locks.locks.findOne({ _id: key })).toBeNull();
  });

  it('answers 503 (retry) when a live lock is not released in time', async () => {
    const locks = new DocumentLocks(app.deps.db);
    const key = `busy:${uniqueId()}`;
    await locks.locks.insertOne({ _id: key, owner: 'someone', expires_at: new Date(Date.now() + 60_000) });
    await expect(locks.withLock(key, async () => 'never', 200)).rejects.toMatchObject({ status: 503 });
  });
});
