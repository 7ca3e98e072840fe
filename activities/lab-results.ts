import { Context } from '@temporalio/activity';
import { applyInboundMessage, type LabResultsDeps } from '../lib/labs/lab-results-apply';

/** The applier workflow's activity (workflows/lab-results.ts): one stored result message applied to its orders. */
export function createLabResultsActivities(deps: LabResultsDeps) {
  return {
    async applyLabMessage({ messageId }: { messageId: string }): Promise<{ state: string }> {
      return applyInboundMessage(deps, messageId, () => Context.current().heartbeat());
    },
  };
}

export type LabResultsActivities = ReturnType<typeof createLabResultsActivities>;
