import { Coalescer } from '../lib/platform/coalescer';

/** A flush the test releases by hand, recording what each flush was given. */
function gatedFlush() {
  const flushes: { items: number[]; release(): void }[] = [];
  const flush = (items: number[]) => new Promise<number[]>((resolve) => flushes.push({ items, release: () => resolve(items.map((i) => i * 10)) }));
  return { flushes, flush };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));
async function flushesStarted(flushes: unknown[], n: number) {
  for (let i = 0; i < 100 && flushes.length < n; i++) await tick();
  await tick(); // and no more than n start
}

describe('Coalescer (group commit of concurrent writes)', () => {
  it('gathers what arrives during a flush into the next one, and answers each caller with its own results', async () => {
    const { flushes, flush } = gatedFlush();
    const coalescer = new Coalescer<number, number>(flush);
    const first = coalescer.add([1]);
    await tick();
    const later = [coalescer.add([2, 3]), coalescer.add([4])];
    await tick();
    expect(flushes.map((f) => f.items)).toEqual([[1]]); // one flush at a time by default
    flushes[0].release();
    expect(await first).toEqual([10]);
    await flushesStarted(flushes, 2);
    expect(flushes.map((f) => f.items)).toEqual([[1], [2, 3, 4]]);
    flushes[1].release();
    expect(await Promise.all(later)).toEqual([[20, 30], [40]]);
  });

  it('runs up to `concurrency` flushes at once, never more, and settles only when all are done', async () => {
    const { flushes, flush } = gatedFlush();
    const coalescer = new Coalescer<number, number>(flush, 2, 2);
    const calls = [coalescer.add([1, 2]), coalescer.add([3, 4]), coalescer.add([5])];
    await flushesStarted(flushes, 2);
    // maxItems 2 keeps each caller's items together; a third flush waits for one of the two in flight.
    expect(flushes.map((f) => f.items)).toEqual([
      [1, 2],
      [3, 4],
    ]);
    let settled = false;
    const settling = coalescer.settled().then(() => (settled = true));
    flushes[1].release();
    await flushesStarted(flushes, 3);
    expect(flushes.map((f) => f.items)).toEqual([[1, 2], [3, 4], [5]]);
    flushes[2].release();
    await tick();
    expect(settled).toBe(false); // the first flush is still in flight
    flushes[0].release();
    await settling;
    expect(await Promise.all(calls)).toEqual([[10, 20], [30, 40], [50]]);
  });

  it('a failed flush fails its callers only', async () => {
    let calls = 0;
    const coalescer = new Coalescer<number, number>(
      async (items) => {
        calls++;
        if (items.includes(1)) throw new Error('store down');
        return items;
      },
      1,
      2,
    );
    const results = await Promise.allSettled([coalescer.add([1]), coalescer.add([2])]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    expect(calls).toBe(2);
  });
});
