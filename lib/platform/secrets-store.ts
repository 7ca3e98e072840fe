import { randomBytes } from 'node:crypto';
import type { Collection, Db } from 'mongodb';
import { isDuplicateKeyError } from './database/store-errors';
import type { IndexSpec, QueryShape } from './database/indexes';

interface SecretDoc {
  _id: string;
  /** base64 */
  value: string;
  created_at: Date;
}

export const SECRET_INDEXES: IndexSpec[] = [];
export const SECRET_QUERY_SHAPES: QueryShape[] = [{ name: 'secret by name', filter: ['_id'] }];

/**
 * Deployment-wide keys generated on first use and shared by every api and worker process (e.g. the key
 * that signs document URLs). The first writer's unique `_id` insert wins; everyone reads the winner.
 */
export class SecretsRepository {
  private readonly secrets: Collection<SecretDoc>;
  private readonly cache = new Map<string, Promise<Buffer>>();

  constructor(db: Db) {
    this.secrets = db.collection('deployment_secrets');
  }

  async ensureIndexes(): Promise<void> {}

  /** The named 32-byte key (created once per database). */
  key(name: string): Promise<Buffer> {
    let key = this.cache.get(name);
    if (!key) {
      key = this.load(name);
      this.cache.set(name, key);
      key.catch(() => this.cache.delete(name));
    }
    return key;
  }

  private async load(name: string): Promise<Buffer> {
    const existing = await this.secrets.findOne({ _id: name });
    if (existing) return Buffer.from(existing.value, 'base64');
    try {
      const value = randomBytes(32).toString('base64');
      await this.secrets.insertOne({ _id: name, value, created_at: new Date() });
      return Buffer.from(value, 'base64');
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      const winner = await this.secrets.findOne({ _id: name });
      if (!winner) throw err;
      return Buffer.from(winner.value, 'base64');
    }
  }
}
