import { randomUUID } from 'node:crypto';
import type { Collection, Document, Filter, UpdateFilter } from 'mongodb';

/**
 * Where a lease lives in the documents it guards: the holder's token (null or absent: nobody holds it) and when it
 * lapses, either stored (`until`) or counted from when it was taken (`since` + `ms`).
 */
export type LeaseLayout = {
  token: string;
  /** How long a claim or an extension holds. */
  ms: number;
  /** How a released lease is stored: its fields removed, or set to null (a `since` field always keeps its date). */
  released: 'unset' | 'null';
} & ({ until: string; since?: never } | { since: string; until?: never });

/** Extra updates a lease write makes in the same single write (e.g. a mark that goes with the claim). */
export type AlsoUpdate = Pick<UpdateFilter<Document>, '$set' | '$unset'>;

/**
 * A lease kept in the document it guards (architecture "Storage and concurrency", rule 3): taking it is one
 * conditional write that matches only where no live lease is (none, let go, or lapsed), so of any number of racing
 * claimers exactly one wins; every later write of the holder names its token in its own filter (`heldBy`), so a holder
 * that stalled past its lease and was taken over writes nothing. Nothing is read before a write: a read can only hint.
 */
export class Lease<T extends Document> {
  constructor(
    private readonly collection: Collection<T>,
    private readonly layout: LeaseLayout,
  ) {}

  /** Filter fragment: no live lease at `now`. */
  free(now: Date): Filter<T> {
    const { token, until, since, ms } = this.layout;
    const lapsed = until ? { [until]: { $lte: now } } : { [since!]: { $lte: new Date(now.getTime() - ms) } };
    return { $or: [{ [token]: null }, lapsed] } as Filter<T>;
  }

  /** Filter fragment for a write under the lease: it matches only while `token` holds it. */
  heldBy(token: string): Filter<T> {
    return { [this.layout.token]: token } as Filter<T>;
  }

  /** The fields that give `token` the lease from `now` (also what a document created already claimed stores). */
  grant(token: string, now: Date): Document {
    const { until, since, ms } = this.layout;
    return { [this.layout.token]: token, ...(until ? { [until]: new Date(now.getTime() + ms) } : { [since!]: now }) };
  }

  /** Takes the lease of the document `filter` names if nobody holds it at `now`: its token, or null (it is held). */
  async claim(filter: Filter<T>, opts: { token?: string; now?: Date; also?: AlsoUpdate } = {}): Promise<string | null> {
    const { token = randomUUID(), now = new Date(), also } = opts;
    const free = this.free(now);
    const guarded = '$or' in filter ? { $and: [filter, free] } : { ...filter, ...free };
    const { matchedCount } = await this.collection.updateOne(guarded as Filter<T>, merge<T>({ $set: this.grant(token, now) }, also));
    return matchedCount === 1 ? token : null;
  }

  /** Extends `token`'s lease (for `ms` from `now`, or to `until` with an `until` layout); false: it was taken over. */
  async extend(filter: Filter<T>, token: string, opts: { now?: Date; until?: Date; also?: AlsoUpdate } = {}): Promise<boolean> {
    const { now = new Date(), until, also } = opts;
    const granted = until && this.layout.until ? { [this.layout.until]: until } : this.grant(token, now);
    const { matchedCount } = await this.collection.updateOne({ ...filter, ...this.heldBy(token) }, merge<T>({ $set: granted }, also));
    return matchedCount === 1;
  }

  /** Gives `token`'s lease back (the next claim succeeds at once); false: it was taken over, nothing changed. */
  async release(filter: Filter<T>, token: string, opts: { also?: AlsoUpdate } = {}): Promise<boolean> {
    const { matchedCount } = await this.collection.updateOne({ ...filter, ...this.heldBy(token) }, merge<T>(this.released(), opts.also));
    return matchedCount === 1;
  }

  /** The update that clears the lease (also for a write that ends it under another precondition). */
  released(): AlsoUpdate {
    const { token, until, released } = this.layout;
    const fields = until ? [token, until] : [token];
    return released === 'unset' ? { $unset: Object.fromEntries(fields.map((f) => [f, ''])) } : { $set: Object.fromEntries(fields.map((f) => [f, null])) };
  }
}

/** Two updates as one (operator by operator). */
function merge<T extends Document>(a: AlsoUpdate, b: AlsoUpdate | undefined): UpdateFilter<T> {
  const out: Document = { ...a };
  for (const [op, fields] of Object.entries(b ?? {})) out[op] = { ...(out[op] ?? {}), ...fields };
  return out as UpdateFilter<T>;
}
