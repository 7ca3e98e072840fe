import type { Db } from 'mongodb';
import { isDuplicateKeyError } from './store-errors';
import type { IndexSpec, QueryShape } from './indexes';

/** `migrations` is read by `_id` (the migration's name) only. */
export const MIGRATION_INDEXES: Record<'migrations', IndexSpec[]> = { migrations: [] };
export const MIGRATION_QUERY_SHAPES: Record<'migrations', QueryShape[]> = {
  migrations: [{ name: 'has this migration run', filter: ['_id'] }],
};

/**
 * Runs a data migration once per database: a `migrations` document named `name` records that it ran, so
 * later start-ups cost one `_id` lookup instead of the migration's scans. The migration itself must be
 * idempotent (api and worker may start together and both run it).
 */
export async function runOnce(db: Db, name: string, migrate: () => Promise<void>): Promise<void> {
  const done = db.collection<{ _id: string; at: Date }>('migrations');
  if (await done.findOne({ _id: name })) return;
  await migrate();
  await done.insertOne({ _id: name, at: new Date() }).catch((err) => {
    if (!isDuplicateKeyError(err)) throw err;
  });
}
