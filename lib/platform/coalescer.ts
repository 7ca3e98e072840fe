/**
 * Group commit for writes many callers make at once (concurrent publishes; the dispatcher activities of
 * several endpoints in one worker): callers add items and wait; items added while `concurrency` flushes run go
 * into the next one (at most `maxItems`, keeping each caller's items together), so they share one round of
 * database statements instead of a round trip each.
 * `flush` may return one result per item, in order; a failed flush fails every caller in it.
 */
export class Coalescer<T, R = void> {
  private pending: { items: T[]; resolve(results: R[]): void; reject(err: unknown): void }[] = [];
  private flushing = 0;
  private idle: (() => void)[] = [];

  constructor(
    private readonly flush: (items: T[]) => Promise<R[] | void>,
    private readonly maxItems = Infinity,
    /** Flushes in flight at once: more than one keeps the database busy while a flush waits on its round trips. */
    private readonly concurrency = 1,
  ) {}

  add(items: T[]): Promise<R[]> {
    if (!items.length) return Promise.resolve([]);
    return new Promise((resolve, reject) => {
      this.pending.push({ items, resolve, reject });
      this.next();
    });
  }

  /** Resolves once nothing is pending or being flushed (before a shutdown). */
  settled(): Promise<void> {
    if (!this.flushing && !this.pending.length) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  private next(): void {
    if (this.flushing >= this.concurrency) return;
    if (!this.pending.length) {
      if (!this.flushing) this.idle.splice(0).forEach((resolve) => resolve());
      return;
    }
    this.flushing++;
    setImmediate(() => {
      let count = 0;
      let take = 0;
      while (take < this.pending.length && (take === 0 || count + this.pending[take].items.length <= this.maxItems)) {
        count += this.pending[take++].items.length;
      }
      const callers = this.pending.splice(0, take);
      if (!callers.length) {
        // Another flush started meanwhile took everything pending.
        this.flushing--;
        this.next();
        return;
      }
      this.flush(callers.flatMap((c) => c.items))
        .then(
          (results) => {
            let at = 0;
            for (const c of callers) {
              c.resolve(results ? results.slice(at, at + c.items.length) : []);
              at += c.items.length;
            }
          },
          (err) => callers.forEach((c) => c.reject(err)),
        )
        .finally(() => {
          this.flushing--;
          this.next();
        });
    });
  }
}
