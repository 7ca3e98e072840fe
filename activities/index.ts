import type { Config } from '../lib/platform/config';
import type { Logger } from '../lib/platform/logger';
import type { Repositories } from '../lib/repositories';
import type { TemporalDeps } from '../lib/platform/temporal';
import type { LabCatalogue } from '../lib/labs/catalogue';
import { createSandboxLab } from '../lib/labs/sandbox-lab';
import { withHl7Intake } from '../lib/labs/hl7-lab';
import { createLabOrderActivities } from './lab-orders';
import { createLabMessageActivities } from './lab-messages';
import { createLabConnections, type LabConnections } from '../lib/labs/lab-connections';
import { createUserDeletionActivities } from './user-deletion';
import { createWebhookDeliveryActivities } from './webhook-delivery';
import type { Senders } from '../lib/events/destinations/destination';
import { EventPublisher } from '../lib/events/publisher';
import { loadProviderCatalogue } from '../lib/wearables/provider-catalogue';
import { createAdapterRegistry } from '../lib/wearables/adapters';
import { createWearableActivities } from './wearables';
import { createMaintenanceActivities } from './maintenance';
import { createLabResultsActivities } from './lab-results';
import { createAppleHealthImportActivities } from './apple-health-import';

export interface ActivityDeps {
  repos: Repositories;
  config: Config;
  logger: Logger;
  /** A Temporal client (wakes webhook dispatchers). */
  temporal: TemporalDeps;
  labCatalogue: LabCatalogue;
  /** The worker's connections to webhook endpoints and pipeline brokers (activities/webhook-delivery.ts createSenders). */
  senders: Senders;
  /** The worker's MLLP connections to laboratories (lib/labs/lab-connections.ts); made here when not given (tests that send none). */
  labConnections?: LabConnections;
}

/** Every activity the worker registers, built from their dependencies. */
export function createActivities(base: ActivityDeps) {
  // One publisher per worker: publishes from every activity share its group commit.
  const deps = { ...base, publisher: new EventPublisher(base) };
  const providers = loadProviderCatalogue();
  return {
    ...createUserDeletionActivities(deps),
    // This deployment's laboratory is the sandbox lab, and labs that send results as HL7 v2 (lib/labs/hl7-intake.ts).
    ...createLabOrderActivities({ ...deps, lab: withHl7Intake(createSandboxLab(deps.labCatalogue), deps.repos.hl7Intake, deps.repos.labInbound) }),
    // Real laboratories (lab accounts): orders and cancels as HL7 v2 over MLLP.
    ...createLabMessageActivities({
      ...deps,
      labConnections: base.labConnections ?? createLabConnections({ log: base.logger, outbound: base.repos.labOutbound }),
    }),
    ...createWebhookDeliveryActivities(deps),
    // Provider connections: this deployment has no internet, so its pull adapters are the demo providers.
    ...createWearableActivities({ ...deps, providers, adapters: createAdapterRegistry(providers) }),
    ...createMaintenanceActivities({ ...deps, providers }),
    ...createLabResultsActivities(deps),
    ...createAppleHealthImportActivities({ ...deps, providers }),
  };
}

export type Activities = ReturnType<typeof createActivities>;
