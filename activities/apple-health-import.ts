import { Context } from '@temporalio/activity';
import { runAppleHealthImport, type AppleHealthImportDeps } from '../lib/phones/apple-health-import-run';

/** The activity of workflows/apple-health-import.ts: the whole import of one stored export (lib/phones/apple-health-import-run.ts). */
export function createAppleHealthImportActivities(deps: AppleHealthImportDeps) {
  return {
    async importAppleHealthExport({ importId }: { importId: string }): Promise<{ status: string }> {
      const context = Context.current();
      return runAppleHealthImport(deps, importId, (progress) => context.heartbeat(progress), context.cancellationSignal);
    },
  };
}

export type AppleHealthImportActivities = ReturnType<typeof createAppleHealthImportActivities>;
