import type { PayorCatalogue } from '../lib/insurance/payor-catalogue';
import type { Config } from '../lib/platform/config';
import type { Logger } from '../lib/platform/logger';
import type { Repositories } from '../lib/repositories';
import type { TemporalDeps } from '../lib/platform/temporal';
import type { Db } from 'mongodb';
import type { ProviderCatalogue } from '../lib/wearables/provider-catalogue';
import type { LabCatalogue } from '../lib/labs/catalogue';
import type { EventPublisher } from '../lib/events/publisher';

/** Everything createApp needs; built by api/main.ts (or a test) and closed by it. */
export interface AppDeps {
  config: Config;
  logger: Logger;
  db: Db;
  repos: Repositories;
  temporal: TemporalDeps;
  providers: ProviderCatalogue;
  labCatalogue: LabCatalogue;
  payors: PayorCatalogue;
  /** This process's event publisher (group commit; settled on shutdown). */
  publisher: EventPublisher;
}
