import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ensureDevTenant, type DevCredentials } from '../lib/tenancy/bootstrap';
import { dataCipher, loadConfig } from '../lib/platform/config';
import { connectMongo } from '../lib/platform/database/mongo';
import { createRepositories, ensureIndexes } from '../lib/repositories';
import { retentionFrom } from '../lib/platform/database/indexes';

/** Used by `npm run dev`: seeds the sandbox tenant on first start and writes .devstack/credentials.json. */
async function main(): Promise<void> {
  const file = process.argv[2] ?? path.resolve(__dirname, '../../.devstack/credentials.json');
  const config = loadConfig();
  const mongo = await connectMongo(config.MONGO_URL, config.MONGO_DB);
  try {
    const repos = createRepositories(mongo.db, dataCipher(config));
    await ensureIndexes(repos, retentionFrom(config));
    const saved = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as DevCredentials) : null;
    const { credentials, created } = await ensureDevTenant(repos, config, saved, process.env.TEMPORAL_UI_URL || null);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
    console.log(JSON.stringify({ created, file }));
  } finally {
    await mongo.close();
  }
}

main().catch((err) => {
  console.error(`seeding failed: ${(err as Error).message}`);
  process.exit(1);
});
