import { Context } from '@temporalio/activity';
import { applyInboundMessages, type LabResultsDeps } from '../lib/labs/lab-results-apply';

/** The applier workflow's activity (workflows/lab-results.ts): a batch of stored result messages applied to their orders. */
export function createLabResultsActivities(deps: LabResultsDeps) {
  return {
    async applyLabMessages({ messageIds }: { messageIds: string[] }): Promise<{ states: string[] }> {
      return applyInboundMessages(deps, messageIds, () => Context.current().heartbeat());
    },
  };
}

export type LabResultsActivities = ReturnType<typeof createLabResultsActivities>;
