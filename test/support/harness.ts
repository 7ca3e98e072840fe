import { randomUUID } from 'node:crypto';
import { loadPayorCatalogue } from '../../lib/insurance/payor-catalogue';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TSchema } from '@sinclair/typebox';
import type { Db } from 'mongodb';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { listenApi } from '../../api/app';
import type { AppDeps } from '../../api/deps';
import { loadProviderCatalogue } from '../../lib/wearables/provider-catalogue';
import { loadLabCatalogue } from '../../lib/labs/catalogue';
import { dataCipher, loadConfig, type Config } from '../../lib/platform/config';
import { createLogger, type Logger } from '../../lib/platform/logger';
import { EventPublisher } from '../../lib/events/publisher';
import type { WebhookStore } from '../../lib/events/store';
import { connectMongo } from '../../lib/platform/database/mongo';
import { createRepositories, ensureIndexes } from '../../lib/repositories';
import { retentionFrom } from '../../lib/platform/database/indexes';
import { startReceiver, type Receiver } from './receiver';
import { connectTemporal } from '../../lib/platform/temporal';
import { initProcessMetrics } from '../../lib/platform/metrics';

/**
 * The real app on a real port, against the real MongoDB-wire database and Temporal server that
 * scripts/test.mjs started (their addresses come in through the environment, with a worker already
 * polling the test task queue).
 */
export interface TestApp {
  url: string;
  deps: AppDeps;
  /** The api's HTTP server (its timeouts). */
  server: Server;
  /**
   * The same database through a connection of the test's own, for what a test reads or writes directly to
   * check or arrange the stored state. Queries through it are not the product's, so they are not recorded
   * for the index check (test/query-shapes.after-suite.ts).
   */
  inspect: Db;
  close(): Promise<void>;
}

export async function startTestApp(overrides: Partial<Config> = {}, options: { logger?: Logger } = {}): Promise<TestApp> {
  // PUBLIC_BASE_URL (which production requires) becomes the app's own address once it listens.
  const config = loadConfig(process.env, { API_PORT: 0, PUBLIC_BASE_URL: 'http://127.0.0.1', ...overrides });
  // As api/main.ts does (the test process is an api process), without Node's process metrics: their event-loop and
  // GC observers would outlive the test file.
  initProcessMetrics('api', { nodeMetrics: false });
  const logger = options.logger ?? createLogger(process.env.LOG_LEVEL ?? 'warn', 'api-test');
  const mongo = await connectMongo(config.MONGO_URL, config.MONGO_DB, { queryShapeLog: config.MONGO_QUERY_SHAPE_LOG });
  const inspect = await connectMongo(config.MONGO_URL, config.MONGO_DB);
  const repos = createRepositories(mongo.db, dataCipher(config));
  await ensureIndexes(repos, retentionFrom(config));
  const temporal = await connectTemporal(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE, config.TEMPORAL_TASK_QUEUE, { failFast: true });
  const deps: AppDeps = {
    config,
    logger,
    db: mongo.db,
    repos,
    temporal,
    providers: loadProviderCatalogue(),
    labCatalogue: loadLabCatalogue(),
    payors: loadPayorCatalogue(),
    publisher: new EventPublisher({ config, repos, temporal, logger }),
  };
  const server: Server = await listenApi(deps, 0, '127.0.0.1');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  deps.config = { ...config, PUBLIC_BASE_URL: url };
  return {
    url,
    deps,
    server,
    inspect: inspect.db,
    async close() {
      // As the api stops (api/main.ts): requests still running finish before the Temporal connection closes under
      // them (a call cut off there is retried by the client on a timer, which then throws on the closed channel).
      const force = setTimeout(() => server.closeAllConnections(), 10_000);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await closed;
      clearTimeout(force);
      await deps.publisher.settle(); // as the api does on shutdown
      await temporal.connection.close();
      await mongo.close();
      await inspect.close();
    },
  };
}

/**
 * A publisher (another process's, say) of the app's deps whose webhook store is the real one with some methods
 * replaced: each replacement gets the real store to call through to, so a test can watch, hold or fail a write.
 */
export function publisherOverStore(
  app: TestApp,
  replaced: { [K in keyof WebhookStore]?: WebhookStore[K] extends (...args: infer A) => infer R ? (real: WebhookStore, ...args: A) => R : never },
): EventPublisher {
  const real = app.deps.repos.webhookStore;
  const webhookStore = new Proxy(real, {
    get(target, prop) {
      const replacement = (replaced as Record<PropertyKey, ((real: WebhookStore, ...args: unknown[]) => unknown) | undefined>)[prop];
      if (replacement) return (...args: unknown[]) => replacement(target, ...args);
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return new EventPublisher({ ...app.deps, repos: { ...app.deps.repos, webhookStore } });
}

/**
 * A database of the test's own on the suite's server, for tests whose repositories run under test keys or
 * need a collection to themselves (the worker never reads it); `drop` removes it and closes the connection.
 */
export interface OwnDatabase {
  name: string;
  db: Db;
  drop(): Promise<void>;
}
export async function ownDatabase(app: TestApp, prefix: string): Promise<OwnDatabase> {
  const name = `hb_test_${prefix}_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const mongo = await connectMongo(app.deps.config.MONGO_URL, name);
  return {
    name,
    db: mongo.db,
    async drop() {
      await mongo.db.dropDatabase().catch(() => undefined);
      await mongo.close();
    },
  };
}

export interface Tenant {
  orgId: string;
  teamId: string;
  teamKey: string;
  managementKey: string;
}

/**
 * A real webhook receiver subscribed to the tenant's events of `filterTypes` (a webhook endpoint at `rx.url` + `path`),
 * with the endpoint's signing secret for verifying what arrives.
 */
export async function subscribeReceiver(app: TestApp, tenant: Tenant, filterTypes: string[], path = ''): Promise<{ rx: Receiver; secret: string }> {
  const rx = await startReceiver();
  const mgmt = managementClient(app, tenant);
  const base = `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`;
  const hook = (await mgmt.post(base, { url: `${rx.url}${path}`, filter_types: filterTypes })).body;
  return { rx, secret: (await mgmt.get(`${base}/${hook.id}/secret`)).body.key };
}

/** A fresh org with an org management key, one team and a team API key (tests never reset the database). */
export async function createTenant(deps: AppDeps, name = 'Test org'): Promise<Tenant> {
  const { repos, config } = deps;
  const org = await repos.tenancy.createOrg(name);
  const mgmt = await repos.tenancy.createManagementKey(org._id, 'test', 'org_admin', []);
  const team = await repos.tenancy.createTeam(org._id, `${name} team`, config.DEPLOYMENT_ENVIRONMENT, config.DEPLOYMENT_REGION);
  const key = await repos.tenancy.createTeamApiKey(team, 'test');
  return { orgId: org._id, teamId: team._id, teamKey: key.value, managementKey: mgmt.value };
}

export interface HttpResult<T = any> {
  status: number;
  body: T;
  headers: Headers;
  text: string;
}

export type HttpClient = ReturnType<typeof httpClient>;

/** Minimal JSON client over fetch (real HTTP to the app). */
export function httpClient(baseUrl: string, defaultHeaders: Record<string, string> = {}) {
  async function request<T = any>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<HttpResult<T>> {
    const res = await fetch(baseUrl + path, {
      method,
      headers: {
        ...defaultHeaders,
        ...(body !== undefined && typeof body !== 'string' ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON: keep the text */
    }
    return { status: res.status, body: parsed as T, headers: res.headers, text };
  }
  return {
    request,
    get: <T = any>(path: string, headers?: Record<string, string>) => request<T>('GET', path, undefined, headers),
    post: <T = any>(path: string, body?: unknown, headers?: Record<string, string>) => request<T>('POST', path, body ?? {}, headers),
    put: <T = any>(path: string, body?: unknown, headers?: Record<string, string>) => request<T>('PUT', path, body ?? {}, headers),
    patch: <T = any>(path: string, body?: unknown, headers?: Record<string, string>) => request<T>('PATCH', path, body ?? {}, headers),
    del: <T = any>(path: string, headers?: Record<string, string>) => request<T>('DELETE', path, undefined, headers),
  };
}

export const teamClient = (app: TestApp, tenant: Tenant) => httpClient(app.url, { 'x-service-api-key': tenant.teamKey });
export const managementClient = (app: TestApp, tenant: Tenant) => httpClient(app.url, { 'X-Management-Key': tenant.managementKey });

// An independent, strict validator for response bodies (no defaults, no stripping).
const responseAjv = addFormats(new Ajv({ allErrors: true, strict: false }));
const compiledResponseSchemas = new WeakMap<TSchema, ReturnType<typeof responseAjv.compile>>();

/** Fails the test with ajv's errors if `body` does not match the response schema. */
export function expectSchema(schema: TSchema, body: unknown): void {
  let validate = compiledResponseSchemas.get(schema);
  if (!validate) {
    // `$id`s are dropped so the same shape nested in several schemas compiles independently.
    validate = responseAjv.compile(JSON.parse(JSON.stringify(schema, (k, v) => (k === '$id' ? undefined : v))));
    compiledResponseSchemas.set(schema, validate);
  }
  if (!validate(body)) {
    throw new Error(`Response does not match schema: ${responseAjv.errorsText(validate.errors)}\n${JSON.stringify(body, null, 2)}`);
  }
}

/**
 * Polls `probe` until it returns a truthy value (for effects of workflows). The deadline is real time, also where
 * `Date` follows a time-skipping Temporal server (test/support/time-skipping.ts).
 */
export async function eventually<T>(probe: () => Promise<T | undefined | null | false>, timeoutMs = 30000, label = 'condition'): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  let last: unknown;
  while (performance.now() < deadline) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`Timed out waiting for ${label}${last ? `: ${(last as Error).message}` : ''}`);
}

export const uniqueId = (prefix = 'client') => `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
