import { proxyActivities } from '@temporalio/workflow';
import type { AppleHealthImportActivities } from '../activities/apple-health-import';

export interface AppleHealthImportInput {
  importId: string;
}

// A multi-gigabyte export takes minutes to read; the heartbeat (every 20,000 elements) notices a worker that died.
// Retried until it succeeds: an import reads the file from its start again and stores nothing twice. A file that is
// not an export fails the import (recorded by the activity), not the workflow.
const { importAppleHealthExport } = proxyActivities<AppleHealthImportActivities>({
  startToCloseTimeout: '12 hours',
  heartbeatTimeout: '2 minutes',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/**
 * The import of one uploaded Apple Health export (`apple-health-import:<importId>`), started by the request that
 * stored its last byte (api/routes/apple-health-import.ts): one recorded activity reads the stored file, stores its
 * data, publishes `historical.data.<resource>.created` for what it held and removes the file's bytes.
 */
export async function appleHealthImportWorkflow(input: AppleHealthImportInput): Promise<void> {
  await importAppleHealthExport({ importId: input.importId });
}
