import { createOrgWithAdminKey } from '../lib/tenancy/bootstrap';
import { dataCipher, loadConfig } from '../lib/platform/config';
import { connectMongo } from '../lib/platform/database/mongo';
import { createRepositories, ensureIndexes } from '../lib/repositories';
import { retentionFrom } from '../lib/platform/database/indexes';

/**
 * Production bootstrap (`npm run bootstrap -- "Org name"`): creates the organisation and its first org
 * management key, exactly once per database, and prints the key once. A marker document with a fixed id
 * makes two concurrent runs create one org.
 */
async function main(): Promise<void> {
  const name = process.argv[2] ?? 'Organisation';
  const config = loadConfig();
  const mongo = await connectMongo(config.MONGO_URL, config.MONGO_DB);
  try {
    const repos = createRepositories(mongo.db, dataCipher(config));
    await ensureIndexes(repos, retentionFrom(config));
    if (!(await repos.tenancy.claimBootstrap())) {
      console.error('This database is already bootstrapped; its organisation exists. Create further keys with the management API.');
      process.exitCode = 1;
      return;
    }
    let created: Awaited<ReturnType<typeof createOrgWithAdminKey>>;
    try {
      created = await createOrgWithAdminKey(repos, name);
    } catch (err) {
      await repos.tenancy.releaseBootstrap();
      throw err;
    }
    const { org, managementKey } = created;
    console.log(`Organisation created: ${org._id} (${name})`);
    console.log(`Org management key (shown once, store it now): ${managementKey}`);
    console.log('Next: create a team (POST /v1/org/{org_id}/team) and a team API key (POST /v1/org/{org_id}/team_api_keys/{env}/{region}).');
  } finally {
    await mongo.close();
  }
}

main().catch((err) => {
  console.error(`bootstrap failed: ${(err as Error).message}`);
  process.exit(1);
});
