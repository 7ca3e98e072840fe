import { RefreshAheadCache } from '../lib/platform/refresh-ahead-cache';

/** A load the test answers by hand, counting the reads it was asked for. */
function gatedLoad() {
  const reads: { answer(value: string | null): void; fail(): void }[] = [];
  const load = () => new Promise<string | null>((resolve, reject) => reads.push({ answer: resolve, fail: () => reject(new Error('store unavailable')) }));
  return { reads, load };
}
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('RefreshAheadCache (verified keys, collection size estimates)', () => {
  let now = 1_000_000;
  beforeEach(() => {
    jest.spyOn(Date, 'now').mockImplementation(() => now);
  });
  afterEach(() => jest.restoreAllMocks());

  it('reads a missing key in the call, serves it without a read for half the TTL, then re-reads it once in the background', async () => {
    const cache = new RefreshAheadCache<string>(1000);
    const { reads, load } = gatedLoad();
    const first = cache.get('k', load);
    reads[0].answer('v1');
    expect(await first).toBe('v1');
    now += 499;
    expect(await cache.get('k', load)).toBe('v1');
    expect(reads).toHaveLength(1);
    now += 1; // half the TTL: the cached value, and one read beside it however many calls come
    expect(await cache.get('k', load)).toBe('v1');
    expect(await cache.get('k', load)).toBe('v1');
    expect(reads).toHaveLength(2);
    reads[1].answer('v2');
    await tick();
    now += 999; // the refreshed entry counts from its read's start (500 ms in)
    expect(await cache.get('k', load)).toBe('v2');
  });

  it('drops a key its background read finds gone, and never serves an entry past a TTL from its read', async () => {
    const cache = new RefreshAheadCache<string>(1000);
    const { reads, load } = gatedLoad();
    const first = cache.get('k', load);
    reads[0].answer('v1');
    await first;
    now += 600;
    expect(await cache.get('k', load)).toBe('v1'); // starts a refresh
    reads[1].answer(null); // the key was deleted
    await tick();
    const after = cache.get('k', load);
    expect(reads).toHaveLength(3); // read in the call now
    reads[2].answer(null);
    expect(await after).toBeNull();

    // A refresh that fails leaves the entry to expire at its TTL: never served past it.
    const other = cache.get('o', load);
    reads[3].answer('o1');
    await other;
    now += 600;
    expect(await cache.get('o', load)).toBe('o1');
    reads[4].fail();
    await tick();
    now += 400; // a TTL after the entry's read
    const expired = cache.get('o', load);
    expect(reads).toHaveLength(6);
    reads[5].answer('o2');
    expect(await expired).toBe('o2');
  });

  it('a key revoked while its read is in flight is not cached again by that read; TTL 0 reads every time', async () => {
    const cache = new RefreshAheadCache<string>(1000);
    const { reads, load } = gatedLoad();
    const racing = cache.get('k', load);
    cache.revoke(['k']);
    reads[0].answer('stale');
    expect(await racing).toBe('stale'); // the call that read it gets its answer
    const next = cache.get('k', load);
    expect(reads).toHaveLength(2); // but it was not cached
    reads[1].answer(null);
    expect(await next).toBeNull();

    const uncached = new RefreshAheadCache<string>(0);
    for (let i = 0; i < 3; i++) {
      const call = uncached.get('k', load);
      reads[reads.length - 1].answer('v');
      expect(await call).toBe('v');
    }
    expect(reads).toHaveLength(5);
  });
});
