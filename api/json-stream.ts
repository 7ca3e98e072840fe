import { Readable } from 'node:stream';

/**
 * A JSON array written while it is read, for replies too large to build in memory (a year of minute samples is
 * ~40 MB of JSON). `batches` (a database cursor's, a day of samples at a time) are rendered one batch per chunk,
 * and the next batch is read only when the socket has taken the last one (backpressure), so a reply holds about
 * one batch whatever its length. The bytes are those of `JSON.stringify` of the whole array.
 *
 * The first batch is read before this returns: a failure there is still an ordinary error reply. A failure after
 * the first byte destroys the stream, and Koa's pipeline the socket with it: the client sees a cut-off reply
 * (no final chunk), never a shorter array that parses. A client that goes away, or a failure, ends `batches`
 * early (`return`), which closes its cursor.
 */
export async function jsonArrayStream<T>(batches: AsyncIterable<T[]>, render: (item: T) => unknown): Promise<Readable> {
  const source = batches[Symbol.asyncIterator]();
  let pending: IteratorResult<T[]> | undefined = await source.next();
  let opened = false;

  async function nextChunk(): Promise<string | null> {
    for (;;) {
      const step = pending ?? (await source.next());
      pending = undefined;
      if (step.done) return null;
      if (!step.value.length) continue;
      const chunk = (opened ? ',' : '[') + step.value.map((item) => JSON.stringify(render(item))).join(',');
      opened = true;
      return chunk;
    }
  }

  return new Readable({
    read() {
      // Called again only after a push: one batch in flight at a time.
      nextChunk().then(
        (chunk) => {
          if (chunk !== null) return void this.push(chunk);
          this.push(opened ? ']' : '[]');
          this.push(null);
        },
        (err: Error) => this.destroy(err),
      );
    },
    destroy(err, callback) {
      // Also when never read (a HEAD request) or ended: `return` runs the source's cleanup (its cursor's close).
      Promise.resolve(source.return?.()).then(
        () => callback(err),
        (closeErr: Error) => callback(err ?? closeErr),
      );
    },
  });
}
