/**
 * A small in-process cache of values read from the store, each valid for `ttlMs` from the start of the read that
 * produced it, and refreshed ahead: a hit past half its TTL returns the cached value and starts one read of it in
 * the background, so steady callers never wait on a read; only a key unused for a whole TTL is read in the call.
 * A value the store no longer has (`load` answers null) is dropped, so no entry outlives its store value by more
 * than the TTL. Used for verified API keys (api/middleware/auth.ts), collection size estimates (pages.ts) and the
 * team sizes an order list plans its page by (lib/labs/order-counts-store.ts).
 */
export class RefreshAheadCache<T> {
  private entries = new Map<string, { value: T; readAt: number; refreshing: boolean }>();
  /** Keys dropped by `revoke`, kept one TTL: a read that started before the revocation must not cache them again. */
  private revoked = new Map<string, number>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  /** The value of `key`: cached, else `load`ed (null: none, not cached). `ttlMs` 0 loads on every call. */
  async get(key: string, load: () => Promise<T | null>): Promise<T | null> {
    const hit = this.entries.get(key);
    const age = hit ? Date.now() - hit.readAt : Number.POSITIVE_INFINITY;
    if (hit && age < this.ttlMs) {
      if (age >= this.ttlMs / 2 && !hit.refreshing) this.refresh(key, hit, load);
      return hit.value;
    }
    if (hit) this.entries.delete(key);
    const readAt = Date.now();
    const value = await load();
    if (value !== null) this.set(key, value, readAt);
    return value;
  }

  /** Drops these keys at once (e.g. a key revoked through this process). */
  revoke(keys: string[]): void {
    if (this.revoked.size >= this.maxEntries) this.revoked.clear();
    for (const key of keys) {
      this.entries.delete(key);
      if (this.ttlMs > 0) this.revoked.set(key, Date.now() + this.ttlMs);
    }
  }

  private refresh(key: string, hit: { refreshing: boolean }, load: () => Promise<T | null>): void {
    hit.refreshing = true;
    const readAt = Date.now();
    load().then(
      (value) => {
        if (value !== null) this.set(key, value, readAt);
        else if (this.entries.get(key) === hit) this.entries.delete(key);
      },
      () => {
        hit.refreshing = false; // left to expire; the next hit past half its TTL reads again
      },
    );
  }

  /** Caches a value read by a read that started at `readAt` (a later read's entry stays). */
  private set(key: string, value: T, readAt: number): void {
    if (this.ttlMs <= 0 || (this.revoked.get(key) ?? 0) > Date.now()) return;
    if ((this.entries.get(key)?.readAt ?? Number.NEGATIVE_INFINITY) > readAt) return;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(key, { value, readAt, refreshing: false });
  }
}
