// Every workflow the worker hosts. Workflow code imports only @temporalio/workflow, types and pure helpers.
export { userDeletionWorkflow } from './user-deletion';
export { destinationDispatchWorkflow } from './destination-dispatch';
export { strandedWorkSweepWorkflow } from './stranded-work-sweep';
export { labOrderWorkflow, labOrderCorrectionWorkflow } from './lab-order';
export { labResultsWorkflow } from './lab-results';
export { wearableConnectionWorkflow, providerPushWorkflow, providerHintsWorkflow } from './wearable-connection';
export { providerSubscriptionsWorkflow } from './provider-subscriptions';
export { appleHealthImportWorkflow } from './apple-health-import';
