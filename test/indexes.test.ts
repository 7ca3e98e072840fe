import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { Collection, MongoClient } from 'mongodb';
import type { FieldCipher } from '../lib/platform/field-encryption';
import { createRepositories } from '../lib/repositories';
import { coveredBy, type IndexSpec, type QueryShape } from '../lib/platform/database/indexes';
import { startTestApp } from './support/harness';
import { ID_INDEX, INDEX_TABLE } from './support/index-table';

/**
 * Every query shape a repository declares is served by one of its declared indexes (architecture rule 2):
 * with the suite's small collections a scan is fast too, so only this check shows a missing index before
 * production data does.
 */
const collections = INDEX_TABLE;

/**
 * `.collection(...)` calls whose name is not a string literal, by file, with the collections they reach
 * (each of them must be in the table unless said otherwise). A new one fails the source scan below until
 * it is listed here.
 */
const DYNAMIC_COLLECTION_CALLS: Record<string, { arg: string; reaches: string }> = {
  'lib/events/destinations/webhook/endpoints-store.ts': { arg: 'this.endpoints.collectionName', reaches: 'webhook_endpoints' },
  // The store toolkit's database handle: it passes each store's own collection name through (write conflicts retried).
  'lib/platform/database/write-conflicts.ts': { arg: '...args', reaches: '' },
};
/** Source the product runs (scripts/bench is left out: its raw-driver baselines use scratch `bench_raw_*` collections). */
const SOURCE_DIRS = ['lib', 'api', 'activities', 'workflows', 'worker', 'scripts'];
const root = path.resolve(__dirname, '..');
function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir)).flatMap((f) => {
    const rel = `${dir}/${f}`;
    if (statSync(path.join(root, rel)).isDirectory()) return rel === 'scripts/bench' || f === 'node_modules' ? [] : sourceFiles(rel);
    return /\.(ts|mts|mjs|js)$/.test(f) ? [rel] : [];
  });
}

describe('declared query shapes have indexes', () => {
  for (const [name, { shapes, indexes }] of Object.entries(collections)) {
    it.each(shapes.map((s) => [s.name, s]))(`${name}: %s`, (_label, shape) => {
      expect(coveredBy(shape as QueryShape, [ID_INDEX, ...indexes])).toBe(true);
    });
  }

  it('every collection the code touches has an entry in the table (add its indexes and query shapes there)', () => {
    const missing: string[] = [];
    for (const file of SOURCE_DIRS.flatMap(sourceFiles)) {
      const text = readFileSync(path.join(root, file), 'utf8');
      for (const [, arg] of text.matchAll(/\.collection(?:<[^>]*>)?\(\s*([^)]*?)\s*\)/g)) {
        const literal = /^['"`]([\w.-]+)['"`]$/.exec(arg);
        if (literal) {
          if (!collections[literal[1]]) missing.push(`${file}: '${literal[1]}'`);
        } else if (DYNAMIC_COLLECTION_CALLS[file]?.arg !== arg) {
          missing.push(`${file}: collection(${arg}) has no literal name (list it in DYNAMIC_COLLECTION_CALLS)`);
        }
      }
    }
    for (const { reaches } of Object.values(DYNAMIC_COLLECTION_CALLS)) {
      for (const name of reaches.split(', ').filter(Boolean)) if (!collections[name]) missing.push(`dynamic call: '${name}'`);
    }
    expect(missing).toEqual([]);
  });

  it('every collection in the table declares its query shapes and indexes', () => {
    const incomplete = Object.entries(collections)
      .filter(([, { shapes, indexes }]) => !shapes?.length || !indexes)
      .map(([name]) => name);
    expect(incomplete).toEqual([]);
  });

  it('every collection a repository holds has an entry in the table', async () => {
    const client = new MongoClient('mongodb://127.0.0.1:9/never-connected'); // building repositories does not connect
    try {
      const repos = createRepositories(client.db('indexes-test'), {} as FieldCipher);
      const held = Object.values(repos).flatMap((repo) => Object.values(repo).filter((v): v is Collection => v instanceof Collection));
      expect(held.map((c) => c.collectionName)).toContain('users'); // the scan sees the repositories' collections at all
      expect(held.map((c) => c.collectionName).filter((name) => !collections[name])).toEqual([]);
    } finally {
      await client.close();
    }
  });

  it('the coverage rule itself rejects a shape without a matching index', () => {
    const indexes: IndexSpec[] = [{ key: { team_id: 1, created_at: -1 } }];
    expect(coveredBy({ name: 'by user', filter: ['team_id', 'user_id'] }, indexes)).toBe(false);
    expect(coveredBy({ name: 'sorted differently', filter: ['team_id'], sort: ['updated_at'] }, indexes)).toBe(false);
    expect(coveredBy({ name: 'ok', filter: ['team_id'], sort: ['created_at'] }, indexes)).toBe(true);
  });

  it('the database holds every declared index after start-up (real MongoDB-wire store)', async () => {
    const app = await startTestApp();
    try {
      for (const [name, { indexes }] of Object.entries(collections)) {
        if (!indexes.length) continue; // `_id` only: the collection may not exist yet
        const present = (await app.deps.db.collection(name).indexes()).map((ix) => JSON.stringify(ix.key));
        for (const index of indexes) expect(present).toContain(JSON.stringify(index.key));
      }
    } finally {
      await app.close();
    }
  });
});
