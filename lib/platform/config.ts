import { Type, type Static, type TOptional, type TString } from '@sinclair/typebox';
import { StringEnum } from '../../schemas/common';
import { FieldCipher, parseDataKeys } from './field-encryption';
import { coerceFlat, toFieldErrors, validatorFor } from '../../schemas/validator';

/**
 * Every environment variable the service reads. The README's configuration table and the docker-compose
 * check (test/deployment.test.ts) are driven by this schema: a key missing here is not configuration.
 */
/**
 * The real provider integrations (lib/wearables/providers/<slug>/) and the environment variables of each: the
 * deployment's OAuth app (`PROVIDER_<SLUG>_CLIENT_ID` / `_CLIENT_SECRET`) and `PROVIDER_<SLUG>_BASE_URL`, which
 * replaces the scheme, host and port of every URL of that provider (a proxy, or the local fakes).
 */
export const REAL_PROVIDER_SLUGS = ['oura', 'whoop_v2', 'polar', 'strava', 'dexcom_v3', 'withings'] as const;
export type RealProviderSlug = (typeof REAL_PROVIDER_SLUGS)[number];
export const providerEnvKey = (slug: string, what: 'CLIENT_ID' | 'CLIENT_SECRET' | 'BASE_URL') => `PROVIDER_${slug.toUpperCase()}_${what}` as const;
/** One of a provider's PROVIDER_<SLUG>_* settings, or undefined when unset. */
export const providerSetting = (config: Config, slug: string, what: 'CLIENT_ID' | 'CLIENT_SECRET' | 'BASE_URL'): string | undefined =>
  (config as unknown as Record<string, string | undefined>)[providerEnvKey(slug, what)] || undefined;

const providerAppSchema = Object.fromEntries(
  REAL_PROVIDER_SLUGS.flatMap((slug) => [
    [
      providerEnvKey(slug, 'CLIENT_ID'),
      Type.Optional(Type.String({ minLength: 1, description: `The deployment's ${slug} OAuth client id (teams' own credentials take precedence).` })),
    ],
    [providerEnvKey(slug, 'CLIENT_SECRET'), Type.Optional(Type.String({ minLength: 1, description: `The deployment's ${slug} OAuth client secret.` }))],
    [
      providerEnvKey(slug, 'BASE_URL'),
      Type.Optional(
        Type.String({
          format: 'uri',
          description: `Replaces scheme, host and port of every ${slug} URL (authorize, token, API, revoke); paths are kept. For a proxy, or the local fakes.`,
        }),
      ),
    ],
  ]),
) as Record<`PROVIDER_${string}`, TOptional<TString>>;

export const ConfigSchema = Type.Object({
  DEPLOYMENT_ENVIRONMENT: StringEnum(['sandbox', 'production'], {
    default: 'sandbox',
    description: 'Which environment this deployment serves; team API keys are minted for it (sk_ in sandbox, pk_ in production).',
  }),
  DEPLOYMENT_REGION: StringEnum(['us', 'eu'], {
    default: 'us',
    description: 'Region of this deployment; part of every team API key prefix.',
  }),
  API_HOST: Type.String({ default: '127.0.0.1', description: 'Interface the API listens on (0.0.0.0 in containers).' }),
  API_PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 8080, description: 'Port the API listens on.' }),
  API_REUSE_PORT: Type.Boolean({
    default: false,
    description:
      'Listen with SO_REUSEPORT (Linux): several api replicas on one host share API_PORT and the kernel spreads connections across them (one replica per core).',
  }),
  API_KEEP_ALIVE_TIMEOUT_MS: Type.Integer({
    minimum: 1000,
    default: 65_000,
    description:
      'How long the API keeps an idle client connection open; above the idle timeout of any proxy in front of it (60 s on common load balancers), so the proxy, not the API, closes first.',
  }),
  PUBLIC_BASE_URL: Type.Optional(
    Type.String({
      format: 'uri',
      description:
        'Externally visible base URL: every URL the service returns starts with it (link pages, sign-in links, requisition forms, provider logos and callbacks). Required in production; in sandbox the default is http://API_HOST:API_PORT.',
    }),
  ),
  MONGO_URL: Type.String({
    default: 'mongodb://127.0.0.1:27017/',
    description: 'MongoDB connection string (MongoDB 7, or FerretDB v2 on PostgreSQL + DocumentDB).',
  }),
  MONGO_DB: Type.String({ minLength: 1, default: 'healthbridge', description: 'Database name.' }),
  MONGO_QUERY_SHAPE_LOG: Type.Optional(
    Type.String({
      minLength: 1,
      description:
        'Diagnostic: a directory where the process records the shape of every query it sends (collection, filter and sort fields, no values). The test suite sets it to check every query against the declared indexes; unset in production.',
    }),
  ),
  TEMPORAL_ADDRESS: Type.String({ default: '127.0.0.1:7233', description: 'Temporal frontend host:port.' }),
  TEMPORAL_NAMESPACE: Type.String({ minLength: 1, default: 'default', description: 'Temporal namespace.' }),
  TEMPORAL_TASK_QUEUE: Type.String({ minLength: 1, default: 'healthbridge', description: 'Task queue shared by api (starts) and worker (runs).' }),
  TEMPORAL_UI_URL: Type.Optional(Type.String({ description: 'Temporal Web UI address, printed for operators.' })),
  LOG_LEVEL: StringEnum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
    default: 'info',
    description: 'pino log level.',
  }),
  BODY_LIMIT_BYTES: Type.Integer({ minimum: 1024, default: 1048576, description: 'Largest accepted request body; larger is 413.' }),
  USER_DELETION_GRACE_SECONDS: Type.Integer({
    minimum: 1,
    default: 604800,
    description: "Grace period between DELETE /v2/user/{id} and erasure of the user's data (7 days).",
  }),
  AUTH_CACHE_TTL_MS: Type.Integer({
    minimum: 0,
    default: 1000,
    description:
      'How long a verified team API key may stay cached in an api process. 1000 (the default): a key revoked through one api ' +
      'process is refused at once there and within a second on every other, and a client sending many requests a second ' +
      'costs about two key lookups a second per process (read in the background, at half the TTL, while the key is in use) ' +
      'instead of one per request. 0: every request reads the key (one indexed lookup), so a revoked key stops working at ' +
      'once everywhere.',
  }),
  WEBHOOK_RETRY_SCHEDULE_MS: Type.String({
    pattern: '^\\s*\\d+(\\s*,\\s*\\d+)*\\s*$',
    default: '0,5000,300000,1800000,7200000,18000000,36000000,36000000',
    description:
      'Webhook attempt schedule in ms: the delay before each attempt (first is 0 = at once), each with ±20% jitter. ' +
      'Snapshotted onto each delivery when the event is published.',
  }),
  WEBHOOK_ATTEMPT_TIMEOUT_MS: Type.Integer({ minimum: 100, default: 15000, description: 'Per-attempt webhook HTTP timeout (a timeout is a failure).' }),
  WEBHOOK_THROTTLE_FLOOR_MS: Type.Integer({
    minimum: 0,
    default: 60000,
    description: 'Least wait before the next attempt after a 429, 502, 504 or a timeout.',
  }),
  WEBHOOK_DISABLE_AFTER_MS: Type.Integer({
    minimum: 1,
    default: 432000000,
    description: 'An endpoint failing continuously for this long (5 days) is disabled; any success resets the clock.',
  }),
  WEBHOOK_SECRET_OVERLAP_MS: Type.Integer({
    minimum: 0,
    default: 86400000,
    description: 'After a secret rotation the previous secret keeps signing (second signature) for this long (24 h).',
  }),
  WEBHOOK_SECRET_ROTATIONS_PER_DAY: Type.Integer({
    minimum: 1,
    default: 5,
    description:
      'Most secret rotations of one webhook endpoint in any 24 h; one more is a 429 with Retry-After. Every secret still inside its overlap keeps signing.',
  }),
  DATA_ENCRYPTION_KEYS: Type.Optional(
    Type.String({
      description:
        'AES-256-GCM keys for data encrypted at rest (webhook signing secrets): comma-separated keyId:base64-of-32-bytes, the first ' +
        'encrypts, the others only decrypt. Required (production refuses to start without it; npm run dev and npm test generate one).',
    }),
  ),
  WEBHOOK_MAX_EVENT_BYTES: Type.Integer({
    minimum: 1024,
    default: 262144,
    description: 'Largest serialized event envelope; publishing a larger event is an error (send shallow events or chunks).',
  }),
  WEBHOOK_ALLOW_LOOPBACK: Type.Optional(
    Type.Boolean({
      description:
        'Allow webhook URLs (and pipeline brokers) on loopback addresses, in any environment. Default: false; ' +
        '`npm run dev`, `npm test` and `npm run bench` set it for their local receivers.',
    }),
  ),
  WEBHOOK_URL_ALLOWLIST: Type.String({
    default: '',
    description: 'Comma-separated host:port entries always accepted as webhook targets (e.g. local receivers), whatever they resolve to.',
  }),
  PIPELINE_BROKER_ALLOWLIST: Type.String({
    default: '',
    description:
      'Comma-separated host:port entries and CIDR subnets (e.g. 10.20.0.0/16) where pipeline brokers may live although private. ' +
      'Default empty: brokers on private, link-local or reserved addresses are refused (loopback follows WEBHOOK_ALLOW_LOOPBACK); ' +
      'cloud metadata addresses are refused always.',
  }),
  METRICS_TOKEN: Type.Optional(
    Type.String({
      description:
        'A long random value: GET /metrics (api and worker) then needs `Authorization: Bearer <token>`. Required in production; ' +
        'unset in sandbox, the metrics are open (scrape from inside the network).',
    }),
  ),
  WORKER_METRICS_PORT: Type.Integer({
    minimum: 0,
    maximum: 65535,
    default: 9464,
    description: "The worker's GET /metrics port (its own metrics and the Temporal SDK's); 0 picks a free port (logged).",
  }),
  WORKER_METRICS_HOST: Type.String({ default: '127.0.0.1', description: "Where the worker's metrics port listens (0.0.0.0 in a container)." }),
  WEBHOOK_BATCH_SIZE: Type.Integer({
    minimum: 1,
    maximum: 1000,
    default: 500,
    description: 'Deliveries one dispatcher batch takes (its database work is per batch; at most 100 requests to one endpoint are in flight).',
  }),
  // No default: unset, the sweep's interval is derived from the grace periods below (worker/stranded-work-sweep.ts).
  WEBHOOK_SWEEP_INTERVAL_MS: Type.Optional(
    Type.Integer({
      minimum: 100,
      description:
        "How often the stranded-work sweep runs, repairing what a crash left behind (events not fanned out, overdue deliveries, connections' unfinished steps, kit registrations). Unset: the longer of WEBHOOK_SWEEP_GRACE_MS and CONNECTION_STEPS_GRACE_MS.",
    }),
  ),
  WEBHOOK_SWEEP_GRACE_MS: Type.Integer({
    minimum: 0,
    default: 15000,
    description: 'Age after which the sweeper treats an unfinished fan-out or an overdue delivery as stranded.',
  }),
  CONNECTION_STEPS_GRACE_MS: Type.Integer({
    minimum: 0,
    default: 60000,
    description:
      'Age after which the stranded-work sweep finishes the second step of a two-step write whose api crashed in between: a connect or deregister (connected_sources, the workflow start or stop) and a kit registration (the order workflow told).',
  }),
  LAB_ORDER_STORE_GRACE_MS: Type.Integer({
    minimum: 1000,
    default: 120000,
    description: "How long a new lab order's workflow waits for the api to store the order before it gives up (the request crashed in between).",
  }),
  REQUISITION_URL_TTL_SECONDS: Type.Integer({
    minimum: 1,
    default: 604800,
    description: 'How long a signed requisition_form_url stays valid (7 days).',
  }),
  LAB_MLLP_PORT: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: 65535,
      description:
        "Port of the api's MLLP listener for lab results (ORU^R01). Unset: no listener (a deployment without lab accounts opens no port); 0: any free port (tests). `npm run dev` sets 2575.",
    }),
  ),
  LAB_MLLP_HOST: Type.Optional(
    Type.String({ minLength: 1, description: 'Interface the MLLP listener binds (default: API_HOST; 0.0.0.0 for labs on a VPN or the internet).' }),
  ),
  LAB_MLLP_TLS_CERT: Type.Optional(
    Type.String({ minLength: 1, description: "PEM file of the MLLP listener's TLS certificate (with LAB_MLLP_TLS_KEY: TLS, client certificates requested)." }),
  ),
  LAB_MLLP_TLS_KEY: Type.Optional(Type.String({ minLength: 1, description: "PEM file of the MLLP listener's TLS private key." })),
  LAB_ACTIVATION_TIME_SCALE: Type.Number({
    exclusiveMinimum: 0,
    maximum: 1,
    default: 1,
    description: "Multiplies the wait until an order's activate_by date (1 in production; tests shorten days to seconds).",
  }),
  WEBHOOK_RETENTION_DAYS: Type.Number({
    exclusiveMinimum: 0,
    maximum: 3650,
    default: 30,
    description: 'How long webhook events, finished deliveries and attempts are kept (the delivery log); TTL indexes delete older ones.',
  }),
  AUDIT_LOG_RETENTION_DAYS: Type.Number({
    exclusiveMinimum: 0,
    default: 365,
    description: 'How long audit log entries (management changes) are kept; a TTL index deletes older ones.',
  }),
  USER_TOMBSTONE_RETENTION_DAYS: Type.Number({
    exclusiveMinimum: 0,
    default: 365,
    description: 'How long the tombstone of an erased user (ids, status, when; so an undo can say "erased") is kept; a TTL index deletes older ones.',
  }),
  CONNECTION_HISTORY_RETENTION_DAYS: Type.Number({
    exclusiveMinimum: 0,
    default: 365,
    description: 'How long a connection that ended (disconnected) is kept as history; a TTL index deletes older ones.',
  }),
  IDEMPOTENCY_KEY_RETENTION_SECONDS: Type.Integer({
    minimum: 86400,
    default: 86400,
    description: 'How long a stored X-Idempotency-Key response is replayed (at least 24 h); a TTL index deletes older keys.',
  }),
  HISTORICAL_PULL_RETRYING_SINCE: Type.String({
    pattern: '^\\d{4}-\\d{2}-\\d{2}$',
    default: '2025-05-09',
    description: 'Connections made on or after this date retry retriable historical-pull failures (state `retrying`); older ones fail at once.',
  }),
  HISTORICAL_PULL_RETRY_INITIAL_SECONDS: Type.Number({
    exclusiveMinimum: 0,
    default: 60,
    description: 'First wait before retrying a resource whose historical pull failed retriably; doubles per attempt.',
  }),
  HISTORICAL_PULL_RETRY_MAX_SECONDS: Type.Number({ exclusiveMinimum: 0, default: 3600, description: 'Longest wait between historical-pull retries.' }),
  HISTORICAL_PULL_RETRY_QUOTA: Type.Integer({
    minimum: 1,
    maximum: 50,
    default: 6,
    description: 'Attempts per resource (the first included) before a retrying pull fails with retry_quota_exhausted.',
  }),
  HISTORICAL_PULL_GIVE_UP_SECONDS: Type.Number({
    exclusiveMinimum: 0,
    default: 3600,
    description:
      "How long a resource's historical pull may keep failing on our side (database or Temporal down, a stalled adapter) before it is recorded as failed (unexpected_error) and the connection goes on.",
  }),
  APPLE_HEALTH_IMPORT_HEAP_MB: Type.Integer({
    minimum: 32,
    default: 96,
    description:
      "The heap (V8's old generation, MB) of the worker thread that reads and stores an Apple Health export: what an import adds to the worker stays near it however large the file. An import whose thread runs out fails naming this setting.",
  }),
  WEARABLE_SYNC_INTERVAL_SECONDS: Type.Number({
    exclusiveMinimum: 0,
    default: 3600,
    description: 'How often each connection fetches new data after its history (POST /v2/user/refresh/{user_id} syncs at once).',
  }),
  WEARABLE_SYNCS_PER_RUN: Type.Integer({
    minimum: 1,
    maximum: 1000,
    default: 100,
    description: "Periodic syncs in one run of a connection's workflow before it continues as new (keeps its event history short).",
  }),
  SHUTDOWN_TIMEOUT_MS: Type.Integer({ minimum: 100, default: 10000, description: 'Grace for in-flight requests and activities on SIGTERM.' }),
  PROVIDER_TOKEN_REFRESH_SKEW_SECONDS: Type.Integer({
    minimum: 0,
    default: 300,
    description: 'A provider access token is refreshed this long before it expires (one refresh per connection at a time, across workers).',
  }),
  PROVIDER_REQUEST_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    default: 30000,
    description:
      'How long one request to a provider (API or token endpoint) may take before it counts as unanswered (a refresh then keeps its claim and is tried again with the same refresh token).',
  }),
  PROVIDER_SUBSCRIPTION_RENEW_DAYS: Type.Number({
    exclusiveMinimum: 0,
    default: 7,
    description:
      "Provider push subscriptions that expire (Oura's) are renewed this long before expiration_time by the provider-subscriptions Temporal Schedule.",
  }),
  ...providerAppSchema,
});

export type Config = Static<typeof ConfigSchema>;
export const configKeys = Object.keys(ConfigSchema.properties) as (keyof Config)[];

export class ConfigError extends Error {}

/** Reads config from the environment; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const raw: Record<string, unknown> = {};
  for (const key of configKeys) {
    const value = env[key];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  const candidate = { ...coerceFlat(ConfigSchema, raw), ...overrides };
  const validate = validatorFor(ConfigSchema);
  const problems = validate(candidate)
    ? []
    : toFieldErrors('env', validate.errors).map(
        (e) => `${e.loc.slice(1).join('.')}=${JSON.stringify((candidate as Record<string, unknown>)[String(e.loc[1])] ?? null)}: ${e.msg}`,
      );
  // Checked here rather than by the schema: a schema error echoes the value, and this one is key material.
  const keys = candidate.DATA_ENCRYPTION_KEYS;
  if (typeof keys === 'string') {
    const problem = dataKeysProblem(keys);
    if (problem) problems.push(`DATA_ENCRYPTION_KEYS (value not shown): ${problem}`);
  } else if (keys === undefined && candidate.DEPLOYMENT_ENVIRONMENT === 'production') {
    problems.push(`DATA_ENCRYPTION_KEYS: required in production (${MISSING_KEYS_HINT})`);
  }
  // Every URL the service returns (link pages, sign-in links, requisition forms, provider callbacks) starts with it;
  // a guessed http://API_HOST:API_PORT behind a proxy would hand customers addresses nobody can reach.
  if (candidate.PUBLIC_BASE_URL === undefined && candidate.DEPLOYMENT_ENVIRONMENT === 'production') {
    problems.push('PUBLIC_BASE_URL: required in production (the address customers and providers reach this API at, e.g. https://api.example.com)');
  }
  // Without it GET /metrics answers anyone who reaches the api's port: request rates, teams' error rates, queue depths.
  if (candidate.METRICS_TOKEN === undefined && candidate.DEPLOYMENT_ENVIRONMENT === 'production') {
    problems.push('METRICS_TOKEN: required in production (the bearer token a scrape of GET /metrics sends; make one with `openssl rand -hex 32`)');
  }
  if (Boolean(candidate.LAB_MLLP_TLS_CERT) !== Boolean(candidate.LAB_MLLP_TLS_KEY)) {
    problems.push('LAB_MLLP_TLS_CERT and LAB_MLLP_TLS_KEY: set both (TLS on the MLLP listener) or neither');
  }
  if (problems.length) {
    throw new ConfigError(`Invalid configuration: ${problems.join('; ')}. Fix the environment variable(s) named and restart.`);
  }
  return candidate as Config;
}

const MISSING_KEYS_HINT =
  'comma-separated keyId:base64-of-32-bytes, current key first; make one with `openssl rand -base64 32`, e.g. DATA_ENCRYPTION_KEYS=k1:<that>';

function dataKeysProblem(spec: string): string | null {
  try {
    parseDataKeys(spec);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * The cipher for data encrypted at rest, from DATA_ENCRYPTION_KEYS. Every process that reads or writes such
 * data needs it, in every environment: without it this throws a ConfigError (loadConfig already refuses a
 * production configuration without keys; `npm run dev` and `npm test` generate a key for sandbox).
 */
export function dataCipher(config: Pick<Config, 'DATA_ENCRYPTION_KEYS'>): FieldCipher {
  if (config.DATA_ENCRYPTION_KEYS === undefined) {
    throw new ConfigError(`Invalid configuration: DATA_ENCRYPTION_KEYS is not set (${MISSING_KEYS_HINT}). Set it and restart.`);
  }
  return FieldCipher.fromSpec(config.DATA_ENCRYPTION_KEYS);
}

export function publicBaseUrl(config: Config): string {
  const host = config.API_HOST === '0.0.0.0' ? '127.0.0.1' : config.API_HOST;
  return (config.PUBLIC_BASE_URL ?? `http://${host}:${config.API_PORT}`).replace(/\/$/, '');
}
