import type { PayorCatalogue } from '../lib/payor-catalogue';
import type { Config } from '../lib/config';
import type { Logger } from '../lib/logger';
import type { Repositories } from '../lib/repositories';
import type { TemporalDeps } from '../lib/temporal';
import type { Db } from 'mongodb';
import type { ProviderCatalogue } from '../lib/catalogue';
import type { LabCatalogue } from '../lib/lab-catalogue';
import type { EventPublisher } from '../lib/webhooks/publisher';

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
