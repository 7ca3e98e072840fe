import type { Db } from 'mongodb';
import { ConnectionRepository } from './connections';
import { LabOrderRepository } from './lab-orders';
import { LabTestRepository } from './lab-tests';
import { DocumentLocks } from './locks';
import { SecretsRepository } from './secrets';
import { TenancyRepository } from './tenancy';
import { UserRepository } from './users';
import { WebhookRepository } from './webhooks';

export interface Repositories {
  locks: DocumentLocks;
  tenancy: TenancyRepository;
  users: UserRepository;
  connections: ConnectionRepository;
  webhooks: WebhookRepository;
  labOrders: LabOrderRepository;
  labTests: LabTestRepository;
  secrets: SecretsRepository;
}

export function createRepositories(db: Db): Repositories {
  const locks = new DocumentLocks(db);
  return {
    locks,
    tenancy: new TenancyRepository(db),
    users: new UserRepository(db, locks),
    connections: new ConnectionRepository(db),
    webhooks: new WebhookRepository(db, locks),
    labOrders: new LabOrderRepository(db),
    labTests: new LabTestRepository(db, locks),
    secrets: new SecretsRepository(db),
  };
}

/** Idempotent; run by api and worker at start-up. */
export async function ensureIndexes(repos: Repositories): Promise<void> {
  for (const repo of Object.values(repos)) await repo.ensureIndexes();
}

export { TenancyRepository, UserRepository, ConnectionRepository, DocumentLocks };
