// User scenarios of `npm run bench` and their baselines. Each function takes the environment from
// environment.mjs and returns one measure() result; userSuite() runs them in comparison order and
// names the ratios.
import { createHash, randomUUID } from 'node:crypto';
import { distModule } from './environment.mjs';
import { httpClient, measure } from './load.mjs';

const POOL_SIZE = 200;
const POOL_CONCURRENCY = 8;
const SCRATCH_COLLECTION = 'bench_raw_users';

const pick = (items) => items[Math.floor(Math.random() * items.length)];

/** The document POST /v2/user/ stores for a body of just { client_user_id } (api/routes/users.ts, UserDoc). */
export function userShapedDoc(teamId, clientUserId) {
  const now = new Date();
  return {
    _id: randomUUID(),
    team_id: teamId,
    client_user_id: clientUserId,
    client_user_key: clientUserId,
    status: 'active',
    created_on: now,
    updated_at: now,
    fallback_time_zone: null,
    fallback_birth_date: null,
    ingestion_start: null,
    ingestion_end: null,
    connected_sources: [],
  };
}

const teamClient = (env) => httpClient(env.apiUrl, { headers: { 'x-service-api-key': env.tenant.teamKey } });

async function withClient(client, fn) {
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

/** Baseline A: GET /constant on the plain Koa + @koa/router stack in its own process. */
export function constantRoute(env, opts = {}) {
  return withClient(httpClient(env.constantUrl), (client) =>
    measure({ name: 'koa constant route', ...opts, fn: () => client.expect(200, 'GET', '/constant') }),
  );
}

/** Creates `count` users through the API (not measured) and returns their user_ids. */
export async function createUserPool(env, count = POOL_SIZE, log = console.log) {
  log(`bench: creating ${count} users through the API for the read pool...`);
  return withClient(teamClient(env), async (client) => {
    const ids = [];
    let next = 0;
    const worker = async () => {
      while (next < count) {
        const n = next++;
        const res = await client.expect(200, 'POST', '/v2/user/', {
          body: { client_user_id: `bench-pool-${env.runId}-${n}` },
          json: true,
        });
        ids.push(res.json.user_id);
      }
    };
    await Promise.all(Array.from({ length: POOL_CONCURRENCY }, worker));
    return ids;
  });
}

/** GET /v2/user/{user_id}, a random user of the pool per request. */
export function userRead(env, pool, opts = {}) {
  return withClient(teamClient(env), (client) => measure({ name: 'user read', ...opts, fn: () => client.expect(200, 'GET', `/v2/user/${pick(pool)}`) }));
}

/** POST /v2/user/ with a fresh client_user_id each. */
export function userCreate(env, opts = {}) {
  return withClient(teamClient(env), (client) =>
    measure({
      name: 'user create',
      ...opts,
      fn: ({ seq }) => client.expect(200, 'POST', '/v2/user/', { body: { client_user_id: `bench-create-${env.runId}-${seq}` } }),
    }),
  );
}

/**
 * The raw baselines look the caller's team API key up on every request, by the key's hash on its unique index: the
 * database work of an api that does not cache keys (AUTH_CACHE_TTL_MS=0). The api at its default caches a verified key
 * for a second (revocation within a second on every replica), so that lookup is what it saves.
 */
function keyLookup(env) {
  const keys = env.db.collection('team_api_keys');
  const keyHash = createHash('sha256').update(env.tenant.teamKey, 'utf8').digest('hex');
  return async () => {
    if (!(await keys.findOne({ key_hash: keyHash }))) throw new Error('team API key not found');
  };
}

/** Baseline B (reads): the key lookup, then findOne by _id on the users collection and the team check, as UserRepository.find does. */
export function rawFind(env, pool, opts = {}) {
  const users = env.db.collection('users');
  const teamId = env.tenant.teamId;
  const lookupKey = keyLookup(env);
  return measure({
    name: 'raw driver find',
    ...opts,
    fn: async () => {
      const id = pick(pool);
      await lookupKey();
      const doc = await users.findOne({ _id: id });
      if (doc?.team_id !== teamId) throw new Error(`findOne: user ${id} not found`);
    },
  });
}

/**
 * Baseline B (writes): the key lookup, then insertOne of user-shaped documents into a scratch collection that has the users
 * collection's indexes (created by UserRepository.ensureIndexes itself), so only the API's own work differs.
 */
export async function rawInsert(env, opts = {}) {
  const { UserRepository } = await distModule('lib/users/store.js');
  const scratch = env.db.collection(SCRATCH_COLLECTION);
  await scratch.drop().catch(() => {});
  await new UserRepository({ collection: () => scratch }).ensureIndexes();
  const teamId = env.tenant.teamId;
  const lookupKey = keyLookup(env);
  try {
    return await measure({
      name: 'raw driver insert',
      ...opts,
      fn: async ({ seq }) => {
        await lookupKey();
        await scratch.insertOne(userShapedDoc(teamId, `bench-raw-${env.runId}-${seq}`));
      },
    });
  } finally {
    await scratch.drop().catch(() => {});
  }
}

/** All user scenarios, pairs next to each other so background load drifts as little as possible between them. */
export async function userSuite(env, { log = console.log, ...opts } = {}) {
  const results = {};
  results.constant = await constantRoute(env, { log, ...opts });
  const pool = await createUserPool(env, POOL_SIZE, log);
  results.read = await userRead(env, pool, { log, ...opts });
  results.rawFind = await rawFind(env, pool, { log, ...opts });
  results.rawInsert = await rawInsert(env, { log, ...opts });
  results.create = await userCreate(env, { log, ...opts });
  return {
    results: [results.constant, results.read, results.rawFind, results.rawInsert, results.create],
    ratios: [
      { name: 'user read / koa constant route', of: results.read, to: results.constant, target: 0.5 },
      { name: 'user create / raw driver insert', of: results.create, to: results.rawInsert, target: 0.5 },
      // GET /v2/user/{id} at the default settings (AUTH_CACHE_TTL_MS: a revoked key refused within a second on every
      // replica) against the raw driver's key lookup + findOne.
      { name: 'user read / raw driver key lookup + find', of: results.read, to: results.rawFind, target: 0.8 },
    ],
  };
}
