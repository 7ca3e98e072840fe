import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { configKeys } from '../lib/platform/config';
import { SEARCH_ATTRIBUTES } from '../lib/labs/order-workflow-terms';

/**
 * The deployment files and the docs cannot drift from lib/platform/config.ts: docker-compose.yml configures the
 * api and worker only with variables the service reads, and README.md documents every one of them.
 * Pure file checks: no stack needed.
 */

const root = path.resolve(__dirname, '..');
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');

interface ComposeService {
  build?: unknown;
  image?: string;
  command?: string | string[];
  environment?: Record<string, unknown> | string[];
}

// `merge: true` resolves the `<<: *anchor` merge keys the compose file uses for the shared app settings.
const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, ComposeService> };
const known = new Set<string>(configKeys);

/** The variables a service sets, from either compose form: a map or a list of `KEY=value`. */
function environmentOf(service: ComposeService): Record<string, string> {
  const env = service.environment ?? {};
  if (Array.isArray(env)) {
    return Object.fromEntries(
      env.map((entry) => {
        const text = String(entry);
        const eq = text.indexOf('=');
        return eq === -1 ? [text, ''] : [text.slice(0, eq), text.slice(eq + 1)];
      }),
    );
  }
  return Object.fromEntries(Object.entries(env).map(([key, value]) => [key, value === null ? '' : String(value)]));
}

/** The value compose uses when the shell sets nothing: `${VAR:-default}` gives the default. */
const composeDefault = (value: string | undefined) => /^\$\{[A-Z_]+:-(.*)\}$/.exec(value ?? '')?.[1] ?? value;

const commandOf = (service: ComposeService) => (Array.isArray(service.command) ? service.command.join(' ') : String(service.command ?? ''));

describe('docker-compose.yml', () => {
  const { api, worker } = compose.services;

  test('has the production topology', () => {
    expect(Object.keys(compose.services)).toEqual(expect.arrayContaining(['api', 'mongo', 'temporal', 'temporal-db', 'temporal-ui', 'worker']));
  });

  test.each(['api', 'worker'])('the %s service sets only variables that lib/platform/config.ts reads', (name) => {
    const keys = Object.keys(environmentOf(compose.services[name]));
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.filter((key) => !known.has(key))).toEqual([]);
  });

  test.each(['api', 'worker'])('the %s service reaches MongoDB and Temporal by their service names', (name) => {
    const env = environmentOf(compose.services[name]);
    expect(composeDefault(env.MONGO_URL)).toMatch(/^mongodb:\/\/mongo:27017\b/);
    expect(env.TEMPORAL_ADDRESS).toBe('temporal:7233');
  });

  test('api and worker run the same image with the same configuration, differing only in command', () => {
    expect(api.build).toBeDefined();
    expect(worker.build).toEqual(api.build);
    expect(worker.image).toEqual(api.image);
    expect(environmentOf(worker)).toEqual(environmentOf(api));
    expect(commandOf(api)).toBe('node dist/api/main.js');
    expect(commandOf(worker)).toBe('node --single-threaded-gc dist/worker/main.js');
    // The worker's node options are the ones the dev stack, the tests and the bench start it with (scripts/setup.mjs).
    expect(JSON.parse(read('package.json')).scripts['start:worker']).toBe(commandOf(worker));
    const devOptions = /'worker\/main\.js': \[([^\]]*)\]/.exec(read('scripts/setup.mjs'))?.[1].replace(/'/g, '').split(/,\s*/);
    expect(`node ${devOptions?.join(' ')} dist/worker/main.js`).toBe(commandOf(worker));
  });

  test('registers the search attributes that lab order workflows set', () => {
    const registration = JSON.stringify(compose.services['temporal-search-attributes'].command);
    for (const key of Object.values(SEARCH_ATTRIBUTES)) expect(registration).toContain(`--name ${key.name} --type Keyword`);
  });

  test('the documentdb profile runs PostgreSQL + DocumentDB behind FerretDB v2 in place of MongoDB', () => {
    const { documentdb, ferretdb } = compose.services as Record<
      string,
      ComposeService & { profiles?: string[]; image?: string; depends_on?: Record<string, unknown> }
    >;
    expect(documentdb.profiles).toEqual(['documentdb']);
    expect(ferretdb.profiles).toEqual(['documentdb']);
    expect(ferretdb.image).toBe('ghcr.io/ferretdb/ferretdb:2.7.0'); // the FerretDB of the embedded store (scripts/stack.mjs)
    expect(documentdb.image).toMatch(/^ghcr\.io\/ferretdb\/postgres-documentdb:\d+-[\d.]+-ferretdb-2\.7\.0$/);
    expect(environmentOf(ferretdb).FERRETDB_POSTGRESQL_URL).toMatch(/@documentdb:5432\/postgres$/);
    // Go's collector as the embedded store's FerretDB runs it (scripts/stack/lifecycle.mjs).
    expect(environmentOf(ferretdb).GOGC).toBe(/GOGC: process\.env\.GOGC \?\? '(\d+)'/.exec(read('scripts/stack/lifecycle.mjs'))?.[1]);
    // api and worker wait for it when the profile is on, and ignore it when it is off.
    for (const app of [api, worker]) {
      expect((app as { depends_on?: Record<string, unknown> }).depends_on?.ferretdb).toEqual({ condition: 'service_healthy', required: false });
    }
  });

  test('the brokers profile runs the RabbitMQ and Kafka versions the test stack runs', () => {
    const { rabbitmq, kafka } = compose.services as Record<string, ComposeService & { profiles?: string[]; image?: string }>;
    expect(rabbitmq.profiles).toEqual(['brokers']);
    expect(kafka.profiles).toEqual(['brokers']);
    expect(rabbitmq.image).toMatch(/^rabbitmq:3\.10\.8\b/);
    expect(kafka.image).toBe('apache/kafka:4.4.0');
    expect(environmentOf(kafka).KAFKA_PROCESS_ROLES).toBe('broker,controller'); // KRaft: no ZooKeeper
  });

  test('the api listens on every interface of its container', () => {
    expect(environmentOf(api).API_HOST).toBe('0.0.0.0');
  });
});

describe('Dockerfile', () => {
  test('runs the api by default as a non-root user', () => {
    const dockerfile = read('Dockerfile');
    expect(dockerfile).toMatch(/^CMD \["node", "dist\/api\/main\.js"\]$/m);
    const users = [...dockerfile.matchAll(/^USER\s+(\S+)/gm)].map((m) => m[1]);
    expect(users.length).toBeGreaterThan(0);
    expect(users[users.length - 1]).not.toMatch(/^(root|0)(:|$)/);
  });
});

describe('Node.js 24 LTS everywhere', () => {
  const major = (version: string) => Number(/(\d+)\./.exec(version)?.[1]);
  const engines = JSON.parse(read('package.json')).engines.node as string;
  const pinned = /NODE_RUNTIME = \{\s*version: '([\d.]+)'/.exec(read('scripts/stack/common.mjs'))?.[1] ?? '';

  test('package.json engines, the Docker image and the Node the setup fetches are all 24', () => {
    expect(engines).toMatch(/^>=24\.\d+$/);
    expect(read('Dockerfile')).toMatch(/^ARG NODE_IMAGE=node:24-bookworm-slim$/m);
    expect(major(pinned)).toBe(24);
    // The fetched binary meets engines' minor too, and the README names the version it fetches.
    expect(Number(pinned.split('.')[1])).toBeGreaterThanOrEqual(Number(engines.split('.')[1]));
    expect(read('README.md')).toContain(`Node.js ${pinned}`);
  });

  test('this jest run, and every process it starts with process.execPath, runs on Node 24 or newer', () => {
    expect(major(process.version)).toBeGreaterThanOrEqual(24);
  });
});

describe('README.md configuration table', () => {
  /** First-column names of the table(s) in the `## Configuration` section. */
  function documentedKeys(): string[] {
    const readme = read('README.md');
    const start = readme.search(/^## Configuration\b/m);
    expect(start).toBeGreaterThanOrEqual(0);
    const rest = readme.slice(start + 1);
    const next = rest.search(/^## /m);
    const section = next === -1 ? rest : rest.slice(0, next);
    return section
      .split('\n')
      .filter((line) => line.trimStart().startsWith('|'))
      .map((line) => line.split('|')[1]?.trim() ?? '')
      .map((cell) => /^`([A-Z][A-Z0-9_]*)`$/.exec(cell)?.[1])
      .filter((key): key is string => key !== undefined);
  }

  test('documents every key of ConfigSchema', () => {
    const documented = new Set(documentedKeys());
    expect(configKeys.filter((key) => !documented.has(key))).toEqual([]);
  });

  test('documents no variable the service does not read', () => {
    expect(documentedKeys().filter((key) => !known.has(key))).toEqual([]);
  });
});
