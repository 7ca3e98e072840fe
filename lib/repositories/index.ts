import type { Db } from 'mongodb';
import type { FieldCipher } from '../crypto/field-encryption';
import { DEFAULT_RETENTION, type Retention } from './indexes';
import { AuditLogRepository } from './audit-log';
import { ConnectionRepository } from './connections';
import { CustomCredentialsRepository } from './custom-credentials';
import { HistoricalPullRepository } from './historical-pulls';
import { InsuranceRepository } from './insurance';
import { LinkTokenRepository } from './link-tokens';
import { LabOrderRepository } from './lab-orders';
import { LabTestRepository } from './lab-tests';
import { SecretsRepository } from './secrets';
import { TenancyRepository } from './tenancy';
import { UserRepository } from './users';
import { WebhookRepository } from './webhooks';
import { WearableDataRepository } from './wearable-data';
import { WorkerHeartbeatRepository } from './workers';
import { WebhookStore } from '../webhooks/store';

export interface Repositories {
  tenancy: TenancyRepository;
  /** Teams' own OAuth applications at providers (secrets encrypted). */
  customCredentials: CustomCredentialsRepository;
  /** Management changes: who, what, when, with what outcome. */
  auditLog: AuditLogRepository;
  users: UserRepository;
  connections: ConnectionRepository;
  /** Per-resource historical pull state of each user's providers. */
  historicalPulls: HistoricalPullRepository;
  /** One-time link tokens (10 minutes). */
  linkTokens: LinkTokenRepository;
  /** Summaries, timeseries samples and workout streams. */
  wearableData: WearableDataRepository;
  /** Webhook endpoints. */
  webhooks: WebhookRepository;
  /** Webhook events, deliveries and attempts. */
  webhookStore: WebhookStore;
  labOrders: LabOrderRepository;
  labTests: LabTestRepository;
  /** Insurance records (closed beta), their personal fields encrypted. */
  insurance: InsuranceRepository;
  secrets: SecretsRepository;
  /** Liveness of worker processes (GET /ready). */
  workers: WorkerHeartbeatRepository;
}

/** `cipher` encrypts fields at rest (`dataCipher(config)`, from DATA_ENCRYPTION_KEYS). */
export function createRepositories(db: Db, cipher: FieldCipher): Repositories {
  return {
    tenancy: new TenancyRepository(db),
    customCredentials: new CustomCredentialsRepository(db, cipher),
    auditLog: new AuditLogRepository(db),
    users: new UserRepository(db),
    connections: new ConnectionRepository(db),
    historicalPulls: new HistoricalPullRepository(db),
    linkTokens: new LinkTokenRepository(db),
    wearableData: new WearableDataRepository(db),
    webhooks: new WebhookRepository(db, cipher),
    webhookStore: new WebhookStore(db, cipher),
    labOrders: new LabOrderRepository(db, cipher),
    labTests: new LabTestRepository(db),
    insurance: new InsuranceRepository(db, cipher),
    secrets: new SecretsRepository(db),
    workers: new WorkerHeartbeatRepository(db),
  };
}

/** Idempotent; run by api and worker at start-up, with the deployment's retention (`retentionFrom(config)`) for TTL indexes. */
export async function ensureIndexes(repos: Repositories, retention: Retention = DEFAULT_RETENTION): Promise<void> {
  for (const repo of Object.values(repos)) await repo.ensureIndexes(retention);
}

/**
 * Rewrites every field encrypted under a retired data key with the current one (`npm run reencrypt`): each
 * repository holding encrypted fields has a `reencrypt()`. Returns how many documents changed, by repository.
 */
export async function reencryptAll(repos: Repositories): Promise<Record<string, number>> {
  const changed: Record<string, number> = {};
  for (const [name, repo] of Object.entries(repos) as [string, { reencrypt?: () => Promise<number> }][]) {
    if (typeof repo.reencrypt === 'function') changed[name] = await repo.reencrypt();
  }
  return changed;
}

export { TenancyRepository, UserRepository, ConnectionRepository };
