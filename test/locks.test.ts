import { DocumentLocks, LeaseLostError } from '../lib/repositories/locks';
import { startTestApp, uniqueId, type TestApp } from './support/harness';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

describe('document locks (the race guard for read-check-write changes)', () => {
  it('serialises concurrent read-increment-write cycles on the real database', async () => {
    const counters = app.inspect.collection<{ _id: string; n: number }>('lock_test_counters');
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

  it('fencing: a holder whose lease ran out cannot write once another process has taken the lock over', async () => {
    const slow = new DocumentLocks(app.deps.db, 4_000); // a 4 s lease: the holder must stop writing after ~1 s
    const other = new DocumentLocks(app.deps.db, 4_000);
    const key = `fenced:${uniqueId()}`;
    const writes: string[] = [];
    const slowHolder = slow.withLock(key, async (lease) => {
      await lease.assertHeld(); // in time: allowed
      writes.push('slow-early');
      await new Promise((r) => setTimeout(r, 4_500)); // stalls past its lease (a GC pause, a slow network)
      await lease.assertHeld(); // must refuse: the lock may belong to someone else now
      writes.push('slow-late');
    });
    await new Promise((r) => setTimeout(r, 4_200)); // the lease has expired: the other process takes over
    await other.withLock(key, async (lease) => {
      await lease.assertHeld();
      writes.push('other');
    }, 1_000);
    await expect(slowHolder).rejects.toBeInstanceOf(LeaseLostError);
    expect(writes).toEqual(['slow-early', 'other']);
  });

  it('answers 503 (retry) when a live lock is not released in time', async () => {
    const locks = new DocumentLocks(app.deps.db);
    const key = `busy:${uniqueId()}`;
    await locks.locks.insertOne({ _id: key, owner: 'someone', expires_at: new Date(Date.now() + 60_000) });
    await expect(locks.withLock(key, async () => 'never', 200)).rejects.toMatchObject({ status: 503 });
  });
});
