import { Lease, type LeaseLayout } from '../lib/platform/database/leases';
import { ownDatabase, startTestApp, uniqueId, type OwnDatabase, type TestApp } from './support/harness';

/**
 * The one lease helper (idempotency keys, HL7 intake, token refresh and team deletion hold their claims with it),
 * against the database the suite runs on: a claim is one conditional write with one winner, a lapsed lease is taken
 * over once, and a holder whose lease was taken over changes nothing.
 */
interface Job {
  _id: string;
  state: 'pending' | 'done';
  holder?: string | null;
  holder_until?: Date | null;
  claimed_at?: Date;
}

const TEN = Array.from({ length: 10 }, (_, n) => n);

describe('a lease kept in the document it guards', () => {
  let app: TestApp;
  let own: OwnDatabase;

  beforeAll(async () => {
    app = await startTestApp();
    own = await ownDatabase(app, 'leases');
  });
  afterAll(async () => {
    await own.drop();
    await app.close();
  });

  /** A fresh collection with one pending job, and a lease over it with `layout`. */
  async function jobWith(layout: LeaseLayout, doc: Partial<Job> = {}) {
    const jobs = own.db.collection<Job>(uniqueId('jobs').replace(/-/g, '_'));
    const id = uniqueId('job');
    await jobs.insertOne({ _id: id, state: 'pending', ...doc });
    return { jobs, id, lease: new Lease(jobs, layout) };
  }
  const untilLayout: LeaseLayout = { token: 'holder', until: 'holder_until', ms: 60_000, released: 'unset' };
  const sinceLayout: LeaseLayout = { token: 'holder', since: 'claimed_at', ms: 60_000, released: 'null' };

  it('gives 10 concurrent claims of a free document exactly one winner, whose token the document holds', async () => {
    const { jobs, id, lease } = await jobWith(untilLayout);
    const tokens = await Promise.all(TEN.map(() => lease.claim({ _id: id })));
    const winners = tokens.filter((t) => t !== null);
    expect(winners).toHaveLength(1);
    const stored = await jobs.findOne({ _id: id });
    expect(stored?.holder).toBe(winners[0]);
    expect(stored!.holder_until!.getTime()).toBeGreaterThan(Date.now() + 50_000);
  });

  it('lets exactly one of 10 claimants take over a lease that lapsed, counted from when it was taken', async () => {
    const { jobs, id, lease } = await jobWith(sinceLayout, { holder: 'crashed', claimed_at: new Date(Date.now() - 61_000) });
    const tokens = await Promise.all(TEN.map((n) => lease.claim({ _id: id, state: 'pending' }, { token: `taker-${n}` })));
    const winners = tokens.filter((t) => t !== null);
    expect(winners).toHaveLength(1);
    expect((await jobs.findOne({ _id: id }))?.holder).toBe(winners[0]);
    // The winner's lease is live now: nobody else gets it.
    expect(await lease.claim({ _id: id }, { token: 'late' })).toBeNull();
  });

  it('keeps a live lease from other claimants, and hands it on once its holder releases it', async () => {
    const { jobs, id, lease } = await jobWith(untilLayout);
    const first = await lease.claim({ _id: id });
    expect(first).not.toBeNull();
    expect(await lease.claim({ _id: id })).toBeNull();
    expect(await lease.release({ _id: id }, first!)).toBe(true);
    // Released in the `unset` layout: the fields are gone, and the document is free again.
    const released = await jobs.findOne({ _id: id });
    expect(released).not.toHaveProperty('holder');
    expect(released).not.toHaveProperty('holder_until');
    const second = await lease.claim({ _id: id });
    expect(second).not.toBeNull();
    expect(second).not.toBe(first);
  });

  it('lets a stale holder (its lease taken over) neither release nor extend the new holder’s lease', async () => {
    const { jobs, id, lease } = await jobWith(untilLayout, { holder: 'stalled', holder_until: new Date(Date.now() - 1_000) });
    const successor = await lease.claim({ _id: id }, { token: 'successor' });
    expect(successor).toBe('successor');
    expect(await lease.release({ _id: id }, 'stalled')).toBe(false);
    expect(await lease.extend({ _id: id }, 'stalled', { until: new Date(Date.now() + 3_600_000) })).toBe(false);
    const stored = await jobs.findOne({ _id: id });
    expect(stored?.holder).toBe('successor');
    expect(stored!.holder_until!.getTime()).toBeLessThan(Date.now() + 61_000);
    // The holder itself extends it, to a time it names.
    const later = new Date(Date.now() + 3_600_000);
    expect(await lease.extend({ _id: id }, 'successor', { until: later })).toBe(true);
    expect((await jobs.findOne({ _id: id }))?.holder_until?.getTime()).toBe(later.getTime());
  });

  it('makes a guarded write with a stale token match nothing, and the holder’s own match', async () => {
    const { jobs, id, lease } = await jobWith(sinceLayout, { holder: 'stalled', claimed_at: new Date(Date.now() - 120_000) });
    expect(await lease.claim({ _id: id, state: 'pending' }, { token: 'successor' })).toBe('successor');
    const stale = await jobs.updateOne({ _id: id, ...lease.heldBy('stalled') }, { $set: { state: 'done' } });
    expect(stale.matchedCount).toBe(0);
    expect((await jobs.findOne({ _id: id }))?.state).toBe('pending');
    const mine = await jobs.updateOne({ _id: id, ...lease.heldBy('successor') }, { $set: { state: 'done' } });
    expect(mine.matchedCount).toBe(1);
    // Done: a claim conditioned on the pending state no longer matches, lease or no lease.
    expect(await lease.release({ _id: id }, 'successor')).toBe(true);
    expect(await lease.claim({ _id: id, state: 'pending' })).toBeNull();
  });

  it('makes a claim and the writes that go with it one write (a released `null` lease keeps its fields, set to null)', async () => {
    const layout: LeaseLayout = { token: 'holder', until: 'holder_until', ms: 15_000, released: 'null' };
    const { jobs, id, lease } = await jobWith(layout, { holder: null, holder_until: null });
    const token = await lease.claim({ _id: id }, { also: { $set: { state: 'done' } } });
    expect(await jobs.findOne({ _id: id })).toMatchObject({ holder: token, state: 'done' });
    expect(await lease.release({ _id: id }, token!, { also: { $set: { state: 'pending' } } })).toBe(true);
    expect(await jobs.findOne({ _id: id })).toEqual({ _id: id, state: 'pending', holder: null, holder_until: null });
  });
});
