import { SdkSessionRepository } from './phones/sdk-sessions-store';
import { AppleHealthImportRepository } from './phones/imports-store';
import type { Db } from 'mongodb';
import type { FieldCipher } from './platform/field-encryption';
import { DEFAULT_RETENTION, type Retention } from './platform/database/indexes';
import { AuditLogRepository } from './tenancy/audit-log-store';
import { ConsoleSessionRepository } from './tenancy/console-sessions-store';
import { ConnectionRepository } from './wearables/connections-store';
import { CustomCredentialsRepository } from './tenancy/custom-credentials-store';
import { HistoricalPullRepository } from './wearables/historical-pulls-store';
import { InsuranceRepository } from './insurance/store';
import { LinkTokenRepository } from './wearables/link-tokens-store';
import { LabOrderRepository } from './labs/orders-store';
import { LabTestRepository } from './labs/tests-store';
import { LabAccountRepository } from './labs/lab-accounts-store';
import { LabInboundRepository } from './labs/lab-inbound-store';
import { LabReviewRepository } from './labs/lab-reviews-store';
import { Hl7IntakeRepository } from './labs/hl7-intake-store';
import { LabOutboundRepository } from './labs/lab-outbound-store';
import { IdempotencyKeyRepository } from './platform/idempotency-store';
import { SecretsRepository } from './platform/secrets-store';
import { TenancyRepository } from './tenancy/store';
import { UserRepository } from './users/store';
import { WebhookRepository } from './events/destinations/webhook/endpoints-store';
import { WearableDataRepository } from './wearables/data-store';
import { WorkerHeartbeatRepository } from './platform/worker-heartbeats-store';
import { WebhookStore } from './events/store';
import { PipelineRepository } from './events/destinations/pipeline/pipelines-store';
import { PipelineBatchStore } from './events/destinations/pipeline/batches-store';
import { ProviderAuthRepository } from './wearables/provider-auth-store';
import { ProviderBudgetRepository } from './wearables/provider-budgets-store';

export interface Repositories {
  tenancy: TenancyRepository;
  /** Teams' own OAuth applications at providers (secrets encrypted). */
  customCredentials: CustomCredentialsRepository;
  providerAuth: ProviderAuthRepository;
  /** Requests each provider app has sent per window of its budget, shared by every process. */
  providerBudgets: ProviderBudgetRepository;
  /** Management changes: who, what, when, with what outcome. */
  auditLog: AuditLogRepository;
  /** One-time links to the delivery-log page and the sessions they start. */
  consoleSessions: ConsoleSessionRepository;
  users: UserRepository;
  connections: ConnectionRepository;
  /** Per-resource historical pull state of each user's providers. */
  historicalPulls: HistoricalPullRepository;
  /** One-time link tokens (10 minutes). */
  linkTokens: LinkTokenRepository;
  sdkSessions: SdkSessionRepository;
  /** Apple Health export uploads and their imports. */
  appleHealthImports: AppleHealthImportRepository;
  /** Summaries, timeseries samples and workout streams. */
  wearableData: WearableDataRepository;
  /** Webhook endpoints. */
  webhooks: WebhookRepository;
  /** Webhook events, deliveries and attempts (of endpoints and pipelines). */
  webhookStore: WebhookStore;
  /** Event-streaming pipelines (broker credentials encrypted). */
  pipelines: PipelineRepository;
  /** Pipelines' deliveries, a document per batch (lib/events/destinations/pipeline/batches.ts). */
  pipelineBatches: PipelineBatchStore;
  labOrders: LabOrderRepository;
  labTests: LabTestRepository;
  /** Organisations' accounts with laboratories (MLLP endpoints; TLS keys encrypted). */
  labAccounts: LabAccountRepository;
  /** X-Idempotency-Key claims and the responses they replay. */
  idempotencyKeys: IdempotencyKeyRepository;
  /** HL7 result messages labs sent, one per control id (resends apply once). */
  hl7Intake: Hl7IntakeRepository;
  /** HL7 messages sent to laboratories, one per control id (stored before the first send). */
  labOutbound: LabOutboundRepository;
  /** Result messages labs sent to the MLLP listener, stored before they are acknowledged. */
  labInbound: LabInboundRepository;
  /** Results that matched no order, until an operator matches or rejects them. */
  labReviews: LabReviewRepository;
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
    consoleSessions: new ConsoleSessionRepository(db),
    users: new UserRepository(db),
    connections: new ConnectionRepository(db),
    providerAuth: new ProviderAuthRepository(db, cipher),
    providerBudgets: new ProviderBudgetRepository(db),
    historicalPulls: new HistoricalPullRepository(db),
    linkTokens: new LinkTokenRepository(db),
    sdkSessions: new SdkSessionRepository(db),
    appleHealthImports: new AppleHealthImportRepository(db),
    wearableData: new WearableDataRepository(db),
    webhooks: new WebhookRepository(db, cipher),
    webhookStore: new WebhookStore(db, cipher),
    pipelines: new PipelineRepository(db, cipher),
    pipelineBatches: new PipelineBatchStore(db, cipher),
    labOrders: new LabOrderRepository(db, cipher),
    labTests: new LabTestRepository(db),
    labAccounts: new LabAccountRepository(db, cipher),
    idempotencyKeys: new IdempotencyKeyRepository(db, cipher),
    hl7Intake: new Hl7IntakeRepository(db, cipher),
    labOutbound: new LabOutboundRepository(db, cipher),
    labInbound: new LabInboundRepository(db, cipher),
    labReviews: new LabReviewRepository(db, cipher),
    insurance: new InsuranceRepository(db, cipher),
    secrets: new SecretsRepository(db, cipher),
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
