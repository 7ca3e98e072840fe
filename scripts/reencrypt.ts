import { dataCipher, loadConfig } from '../lib/platform/config';
import { connectMongo } from '../lib/platform/database/mongo';
import { createRepositories, reencryptAll } from '../lib/repositories';

/**
 * `npm run reencrypt` (in containers: `node dist/scripts/reencrypt.js`): after a new data encryption key was put
 * first in DATA_ENCRYPTION_KEYS (the old ones kept after it), rewrites every encrypted field still under an old
 * key with the new one. Idempotent and safe while the api and worker run (each document is rewritten under its
 * lock). When it reports success, the old keys can be removed from DATA_ENCRYPTION_KEYS.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const cipher = dataCipher(config);
  const mongo = await connectMongo(config.MONGO_URL, config.MONGO_DB);
  try {
    const changed = await reencryptAll(createRepositories(mongo.db, cipher));
    console.log(JSON.stringify({ current_key_id: cipher.currentKeyId, rewritten: changed }));
  } finally {
    await mongo.close();
  }
}

main().catch((err) => {
  console.error(`re-encryption failed: ${(err as Error).message}`);
  process.exit(1);
});
