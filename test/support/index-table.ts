import { AUDIT_LOG_INDEXES, AUDIT_LOG_QUERY_SHAPES } from '../../lib/tenancy/audit-log-store';
import { CONSOLE_SESSION_INDEXES, CONSOLE_SESSION_QUERY_SHAPES } from '../../lib/tenancy/console-sessions-store';
import { CUSTOM_CREDENTIALS_INDEXES, CUSTOM_CREDENTIALS_QUERY_SHAPES } from '../../lib/tenancy/custom-credentials-store';
import { CONNECTION_INDEXES, CONNECTION_QUERY_SHAPES } from '../../lib/wearables/connections-store';
import { HISTORICAL_PULL_INDEXES, HISTORICAL_PULL_QUERY_SHAPES } from '../../lib/wearables/historical-pulls-store';
import { WEARABLE_DATA_INDEXES, WEARABLE_DATA_QUERY_SHAPES } from '../../lib/wearables/data-store';
import { LINK_TOKEN_INDEXES, LINK_TOKEN_QUERY_SHAPES } from '../../lib/wearables/link-tokens-store';
import { SDK_SESSION_INDEXES, SDK_SESSION_QUERY_SHAPES } from '../../lib/phones/sdk-sessions-store';
import { IMPORT_INDEXES, IMPORT_QUERY_SHAPES } from '../../lib/phones/imports-store';
import { PROVIDER_AUTH_INDEXES, PROVIDER_AUTH_QUERY_SHAPES } from '../../lib/wearables/provider-auth-store';
import { PROVIDER_BUDGET_INDEXES, PROVIDER_BUDGET_QUERY_SHAPES } from '../../lib/wearables/provider-budgets-store';
import { INSURANCE_INDEXES, INSURANCE_QUERY_SHAPES } from '../../lib/insurance/store';
import type { IndexSpec, QueryShape } from '../../lib/platform/database/indexes';
import { MIGRATION_INDEXES, MIGRATION_QUERY_SHAPES } from '../../lib/platform/database/migrations';
import { TENANCY_INDEXES, TENANCY_QUERY_SHAPES } from '../../lib/tenancy/store';
import { USER_INDEXES, USER_QUERY_SHAPES } from '../../lib/users/store';
import { WEBHOOK_ENDPOINT_INDEXES, WEBHOOK_ENDPOINT_QUERY_SHAPES } from '../../lib/events/destinations/webhook/endpoints-store';
import { LAB_ORDER_INDEXES, ORDER_QUERY_SHAPES, RESULTS_QUERY_SHAPES, RESULTS_VERSIONS_QUERY_SHAPES } from '../../lib/labs/orders-store';
import { LAB_INBOUND_INDEXES, LAB_INBOUND_QUERY_SHAPES } from '../../lib/labs/lab-inbound-store';
import { LAB_REVIEW_INDEXES, LAB_REVIEW_QUERY_SHAPES } from '../../lib/labs/lab-reviews-store';
import { ORDER_COUNT_QUERY_SHAPES } from '../../lib/labs/order-counts-store';
import { IDEMPOTENCY_INDEXES, IDEMPOTENCY_QUERY_SHAPES } from '../../lib/platform/idempotency-store';
import { LAB_TEST_INDEXES, LAB_TEST_QUERY_SHAPES } from '../../lib/labs/tests-store';
import { HL7_INTAKE_INDEXES, HL7_INTAKE_QUERY_SHAPES } from '../../lib/labs/hl7-intake-store';
import { LAB_ACCOUNT_INDEXES, LAB_ACCOUNT_QUERY_SHAPES } from '../../lib/labs/lab-accounts-store';
import { LAB_OUTBOUND_INDEXES, LAB_OUTBOUND_QUERY_SHAPES } from '../../lib/labs/lab-outbound-store';
import { SECRET_INDEXES, SECRET_QUERY_SHAPES } from '../../lib/platform/secrets-store';
import { PIPELINE_INDEXES, PIPELINE_QUERY_SHAPES } from '../../lib/events/destinations/pipeline/pipelines-store';
import { PIPELINE_BATCH_INDEXES, PIPELINE_BATCH_QUERY_SHAPES } from '../../lib/events/destinations/pipeline/batches-store';
import { WEBHOOK_STORE_INDEXES, WEBHOOK_STORE_QUERY_SHAPES } from '../../lib/events/store';
import { WORKER_HEARTBEAT_INDEXES, WORKER_HEARTBEAT_QUERY_SHAPES } from '../../lib/platform/worker-heartbeats-store';

/** Every collection's declared indexes and query shapes, as the repositories declare them (architecture rule 2). */
export type IndexTable = Record<string, { shapes: QueryShape[]; indexes: IndexSpec[] }>;

export const ID_INDEX: IndexSpec = { key: { _id: 1 }, unique: true };

/** A repository's per-collection records; a collection with shapes but no index list (or the reverse) is a mistake. */
function fromRecords(indexes: Record<string, IndexSpec[]>, shapes: Record<string, QueryShape[]>): IndexTable {
  const names = Object.keys(shapes);
  if (names.sort().join() !== Object.keys(indexes).sort().join()) throw new Error(`index and query-shape records disagree: ${names} / ${Object.keys(indexes)}`);
  return Object.fromEntries(names.map((name) => [name, { shapes: shapes[name], indexes: indexes[name] }]));
}

export const INDEX_TABLE: IndexTable = {
  lab_orders: { shapes: ORDER_QUERY_SHAPES, indexes: LAB_ORDER_INDEXES.lab_orders },
  lab_results: { shapes: RESULTS_QUERY_SHAPES, indexes: LAB_ORDER_INDEXES.lab_results },
  lab_results_versions: { shapes: RESULTS_VERSIONS_QUERY_SHAPES, indexes: LAB_ORDER_INDEXES.lab_results_versions },
  lab_order_counts: { shapes: ORDER_COUNT_QUERY_SHAPES, indexes: LAB_ORDER_INDEXES.lab_order_counts },
  idempotency_keys: { shapes: IDEMPOTENCY_QUERY_SHAPES.idempotency_keys, indexes: IDEMPOTENCY_INDEXES.idempotency_keys },
  lab_tests: { shapes: LAB_TEST_QUERY_SHAPES, indexes: LAB_TEST_INDEXES.lab_tests },
  deployment_secrets: { shapes: SECRET_QUERY_SHAPES, indexes: SECRET_INDEXES },
  worker_heartbeats: { shapes: WORKER_HEARTBEAT_QUERY_SHAPES, indexes: WORKER_HEARTBEAT_INDEXES },
  ...fromRecords(WEBHOOK_STORE_INDEXES, WEBHOOK_STORE_QUERY_SHAPES),
  ...fromRecords(USER_INDEXES, USER_QUERY_SHAPES),
  ...fromRecords(TENANCY_INDEXES, TENANCY_QUERY_SHAPES),
  ...fromRecords(CUSTOM_CREDENTIALS_INDEXES, CUSTOM_CREDENTIALS_QUERY_SHAPES),
  ...fromRecords(AUDIT_LOG_INDEXES, AUDIT_LOG_QUERY_SHAPES),
  ...fromRecords(CONSOLE_SESSION_INDEXES, CONSOLE_SESSION_QUERY_SHAPES),
  ...fromRecords(CONNECTION_INDEXES, CONNECTION_QUERY_SHAPES),
  ...fromRecords(HISTORICAL_PULL_INDEXES, HISTORICAL_PULL_QUERY_SHAPES),
  ...fromRecords(LINK_TOKEN_INDEXES, LINK_TOKEN_QUERY_SHAPES),
  ...fromRecords(SDK_SESSION_INDEXES, SDK_SESSION_QUERY_SHAPES),
  ...fromRecords(IMPORT_INDEXES, IMPORT_QUERY_SHAPES),
  ...fromRecords(PROVIDER_AUTH_INDEXES, PROVIDER_AUTH_QUERY_SHAPES),
  ...fromRecords(PROVIDER_BUDGET_INDEXES, PROVIDER_BUDGET_QUERY_SHAPES),
  ...fromRecords(INSURANCE_INDEXES, INSURANCE_QUERY_SHAPES),
  ...fromRecords(WEARABLE_DATA_INDEXES, WEARABLE_DATA_QUERY_SHAPES),
  ...fromRecords(WEBHOOK_ENDPOINT_INDEXES, WEBHOOK_ENDPOINT_QUERY_SHAPES),
  ...fromRecords(PIPELINE_INDEXES, PIPELINE_QUERY_SHAPES),
  ...fromRecords(PIPELINE_BATCH_INDEXES, PIPELINE_BATCH_QUERY_SHAPES),
  ...fromRecords(MIGRATION_INDEXES, MIGRATION_QUERY_SHAPES),
  ...fromRecords(HL7_INTAKE_INDEXES, HL7_INTAKE_QUERY_SHAPES),
  ...fromRecords(LAB_ACCOUNT_INDEXES, LAB_ACCOUNT_QUERY_SHAPES),
  ...fromRecords(LAB_OUTBOUND_INDEXES, LAB_OUTBOUND_QUERY_SHAPES),
  ...fromRecords(LAB_INBOUND_INDEXES, LAB_INBOUND_QUERY_SHAPES),
  ...fromRecords(LAB_REVIEW_INDEXES, LAB_REVIEW_QUERY_SHAPES),
};
