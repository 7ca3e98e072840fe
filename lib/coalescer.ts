/**
 * Group commit for writes many callers make at once (e.g. the dispatcher activities of several endpoints in
 * one worker): callers add items and wait; items added while a flush runs go into the next flush, so they
 * share one database statement instead of each taking the database's write lock (FerretDB's SQLite has one
 * writer at a time). A failed flush fails every caller in it.
 */
export class Coalescer<T> {
  private pending: { items: T[]; resolve(): void; reject(err: unknown): void }[] = [];
  private flushing = false;

  constructor(private readonly flush: (items: T[]) => Promise<void>) {}

  add(items: T[]): Promise<void> {
    if (!items.length) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.pending.push({ items, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    if (this.flushing || !this.pending.length) return;
    this.flushing = true;
    setImmediate(() => {
      const callers = this.pending.splice(0);
      this.flush(callers.flatMap((c) => c.items))
        .then(
          () => callers.forEach((c) => c.resolve()),
          (err) => callers.forEach((c) => c.reject(err)),
        )
        .finally(() => {
          this.flushing = false;
          this.next();
        });
    });
  }
}
