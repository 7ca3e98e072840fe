import { Context } from '@temporalio/activity';
import { runAppleHealthImport, type AppleHealthImportDeps } from '../lib/phones/apple-health-import-run';

/** The activity of workflows/apple-health-import.ts: the whole import of one stored export (lib/phones/apple-health-import-run.ts). */
export function createAppleHealthImportActivities(deps: AppleHealthImportDeps) {
  return {
    async importAppleHealthExport({ importId }: { importId: string }): Promise<{ status: string }> {
      return runAppleHealthImport(deps, importId, (progress) => Context.current().heartbeat(progress));
    },
  };
}

export type AppleHealthImportActivities = ReturnType<typeof createAppleHealthImportActivities>;
