import type { Logger } from '../platform/logger';
import { historicalPullId } from '../wearables/historical-pulls-store';
import type { IngestDeps } from '../wearables/ingest';
import { importInThread } from './apple-health-import-thread';
import { ExportFileError } from './export-xml';
import type { ImportProgress } from './imports-store';
import { recordStage } from './uploads';

export type AppleHealthImportDeps = IngestDeps & { logger: Logger };

/**
 * One import, end to end (the activity of workflows/apple-health-import.ts; idempotent, so a retry redoes it): the
 * stored file is read and its data stored; each resource it held gets its history's state (GET
 * /v2/introspect/historical_pull, provider apple_health_kit) and one `historical.data.<resource>.created`; then the
 * import is marked done and the file's bytes go. A file that is not a readable export fails the import with why.
 */
export async function runAppleHealthImport(deps: AppleHealthImportDeps, importId: string, heartbeat: (p: ImportProgress) => void, signal?: AbortSignal) {
  const imports = deps.repos.appleHealthImports;
  const doc = await imports.get(importId);
  if (!doc) return { status: 'erased' };
  if (doc.status !== 'importing') return { status: doc.status };
  const user = await deps.repos.users.find(doc.team_id, doc.user_id);
  if (user?.status !== 'active') {
    await imports.finish(importId, { status: 'failed', error: 'The user was deleted before the import ran; nothing was imported.' }, new Date());
    await imports.dropBytes(importId);
    return { status: 'failed' };
  }
  let result: Awaited<ReturnType<typeof importInThread>>;
  try {
    result = await importInThread(deps.config, importId, heartbeat, signal);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (!(err instanceof ExportFileError) && code !== 'Z_DATA_ERROR' && code !== 'Z_BUF_ERROR') throw err;
    deps.logger.warn({ importId, err: (err as Error).message }, 'apple health import: the file is not a readable export');
    await imports.finish(importId, { status: 'failed', error: (err as Error).message }, new Date());
    await imports.dropBytes(importId);
    return { status: 'failed' };
  }
  const now = new Date();
  const connectionId = `apple-health-import:${importId}`;
  for (const r of result.resources) {
    await deps.repos.historicalPulls.startPhoneStage(
      {
        _id: historicalPullId(doc.team_id, user._id, 'apple_health_kit', r.resource),
        team_id: doc.team_id,
        user_id: user._id,
        provider: 'apple_health_kit',
        resource: r.resource,
        connection_id: connectionId,
        range_start: new Date(r.oldest),
        range_end: new Date(r.newest),
        days_requested: r.days,
      },
      now,
    );
  }
  // Erased stays erased: asked after the writes (erasure marks the user before it removes pull states), and nothing is
  // announced about a user whose erasure began meanwhile.
  if (!(await deps.repos.users.takesData(doc.team_id, user._id))) {
    await deps.repos.historicalPulls.eraseAllForUser(doc.team_id, user._id);
  } else {
    // Each resource's history as a phone's final historical chunk ends it: `success`, and its event once.
    for (const r of result.resources) {
      await recordStage(
        deps,
        { teamId: doc.team_id, user, connectionId, resource: r.resource },
        { stage: 'historical', provider: 'apple_health_kit', start_date: r.oldest, end_date: r.newest, is_final_chunk: true },
        { sent: r.sent, days: r.days, oldest: new Date(r.oldest), newest: new Date(r.newest) },
      );
    }
  }
  await imports.finish(importId, { status: 'completed', progress: result.progress }, new Date());
  await imports.dropBytes(importId);
  deps.logger.info({ importId, records: result.progress.records_read, samples: result.progress.samples }, 'apple health import completed');
  return { status: 'completed' };
}
