// User scenarios of `npm run bench` and their baselines. Each scenario is { name, fn } for measureInRounds (load.mjs);
// userSuite() measures each with its baselines in turns and names the ratios.
import { createHash, randomUUID } from 'node:crypto';
import { distModule } from './environment.mjs';
import { httpClient, measureInRounds } from './load.mjs';

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

/** GET /v2/user/{user_id}, a random user of the pool per request: a measureInRounds scenario. */
const userRead = (client, pool) => ({ name: 'user read', fn: () => client.expect(200, 'GET', `/v2/user/${pick(pool)}`) });

/** Baseline A: GET /constant on the plain Koa + @koa/router stack in its own process. */
const constantRoute = (client) => ({ name: 'koa constant route', fn: () => client.expect(200, 'GET', '/constant') });

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

/** POST /v2/user/ with a fresh client_user_id each. */
const userCreate = (client, env) => ({
  name: 'user create',
  fn: ({ seq }) => client.expect(200, 'POST', '/v2/user/', { body: { client_user_id: `bench-create-${env.runId}-${seq}` } }),
});

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
function rawFind(env, pool) {
  const users = env.db.collection('users');
  const teamId = env.tenant.teamId;
  const lookupKey = keyLookup(env);
  return {
    name: 'raw driver find',
    fn: async () => {
      const id = pick(pool);
      await lookupKey();
      const doc = await users.findOne({ _id: id });
      if (doc?.team_id !== teamId) throw new Error(`findOne: user ${id} not found`);
    },
  };
}

/**
 * Baseline B (writes): the key lookup, then insertOne of user-shaped documents into a scratch collection that has the users
 * collection's indexes (created by UserRepository.ensureIndexes itself), so only the API's own work differs.
 */
async function rawInsert(env, scratch) {
  const { UserRepository } = await distModule('lib/users/store.js');
  await scratch.drop().catch(() => {});
  await new UserRepository({ collection: () => scratch }).ensureIndexes();
  const teamId = env.tenant.teamId;
  const lookupKey = keyLookup(env);
  return {
    name: 'raw driver insert',
    fn: async ({ seq }) => {
      await lookupKey();
      await scratch.insertOne(userShapedDoc(teamId, `bench-raw-${env.runId}-${seq}`));
    },
  };
}

/**
 * All user scenarios: each measured in turns with its baselines (measureInRounds), reads with the raw find and the
 * constant route, creates with the raw insert, so a ratio compares windows seconds apart.
 */
export async function userSuite(env, { log = console.log, ...opts } = {}) {
  const pool = await createUserPool(env, POOL_SIZE, log);
  const api = teamClient(env);
  const constant = httpClient(env.constantUrl);
  const scratch = env.db.collection(SCRATCH_COLLECTION);
  try {
    const reads = await measureInRounds({ scenarios: [userRead(api, pool), rawFind(env, pool), constantRoute(constant)], log, ...opts });
    const writes = await measureInRounds({ scenarios: [userCreate(api, env), await rawInsert(env, scratch)], log, ...opts });
    const [read, rawFound, constantRead] = reads.results;
    const [create, rawInserted] = writes.results;
    return {
      results: [constantRead, read, rawFound, rawInserted, create],
      ratios: [
        { name: 'user read / koa constant route', of: read, to: constantRead, ratio: reads.ratio(0, 2), target: 0.5 },
        { name: 'user create / raw driver insert', of: create, to: rawInserted, ratio: writes.ratio(0, 1), target: 0.5 },
        // GET /v2/user/{id} at the default settings (AUTH_CACHE_TTL_MS: a revoked key refused within a second on every
        // replica) against the raw driver's key lookup + findOne.
        { name: 'user read / raw driver key lookup + find', of: read, to: rawFound, ratio: reads.ratio(0, 1), target: 0.8 },
      ],
    };
  } finally {
    api.close();
    constant.close();
    await scratch.drop().catch(() => {});
  }
}
