import { Type, type Static } from '@sinclair/typebox';
import { StringEnum } from '../schemas/common';
import { coerceFlat, toFieldErrors, validatorFor } from '../schemas/validator';

/**
 * Every environment variable the service reads. The README's configuration table and the docker-compose
 * check (test/config.test.ts) are driven by this schema: a key missing here is not configuration.
 */
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
  PUBLIC_BASE_URL: Type.Optional(
    Type.String({ format: 'uri', description: 'Externally visible base URL (used in provider logo URLs). Default http://API_HOST:API_PORT.' }),
  ),
  MONGO_URL: Type.String({ default: 'mongodb://127.0.0.1:27017/', description: 'MongoDB connection string (MongoDB 7 or FerretDB).' }),
  MONGO_DB: Type.String({ minLength: 1, default: 'healthbridge', description: 'Database name.' }),
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
    description: 'Grace period between DELETE /v2/user/{id} and erasure of the user\'s data (7 days).',
  }),
  AUTH_CACHE_TTL_MS: Type.Integer({
    minimum: 0,
    default: 5000,
    description: 'How long a verified API key stays cached in the api process (0 disables); a revoked key stops working within this time.',
  }),
  SHUTDOWN_TIMEOUT_MS: Type.Integer({ minimum: 100, default: 10000, description: 'Grace for in-flight requests and activities on SIGTERM.' }),
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
  if (!validate(candidate)) {
    const problems = toFieldErrors('env', validate.errors).map(
      (e) => `${e.loc.slice(1).join('.')}=${JSON.stringify((candidate as Record<string, unknown>)[String(e.loc[1])] ?? null)}: ${e.msg}`,
    );
    throw new ConfigError(`Invalid configuration: ${problems.join('; ')}. Fix the environment variable(s) named and restart.`);
  }
  return candidate;
}

export function publicBaseUrl(config: Config): string {
  const host = config.API_HOST === '0.0.0.0' ? '127.0.0.1' : config.API_HOST;
  return (config.PUBLIC_BASE_URL ?? `http://${host}:${config.API_PORT}`).replace(/\/$/, '');
}
