import { randomBytes } from 'node:crypto';
import type { Collection, Db } from 'mongodb';
import { isDuplicateKeyError } from './database/store-errors';
import type { IndexSpec, QueryShape } from './database/indexes';
import { EncryptedFields, type Sealed } from './database/encrypted-fields';
import type { FieldCipher } from './field-encryption';

interface SecretDoc {
  _id: string;
  /** base64; sealed (encrypted with the data key) at rest. Earlier versions stored it in plaintext. */
  value: string;
  created_at: Date;
}

export const SECRET_INDEXES: IndexSpec[] = [];
export const SECRET_QUERY_SHAPES: QueryShape[] = [
  { name: 'secret by name', filter: ['_id'] },
  { name: 'reencrypt: every document, in _id pages', filter: ['_id'], sort: ['_id'] },
];

/**
 * Deployment-wide keys generated on first use and shared by every api and worker process (e.g. the key
 * that signs document URLs). The first writer's unique `_id` insert wins; everyone reads the winner. Stored
 * encrypted with the data key like the other secrets: a database dump alone cannot sign a document link.
 */
export class SecretsRepository {
  private readonly secrets: Collection<Sealed<SecretDoc, 'value'>>;
  private readonly sealed: EncryptedFields<SecretDoc, 'value'>;
  private readonly cache = new Map<string, Promise<Buffer>>();

  constructor(db: Db, cipher: FieldCipher) {
    this.secrets = db.collection('deployment_secrets');
    this.sealed = new EncryptedFields<SecretDoc, 'value'>(cipher, 'deployment_secrets', ['value']);
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

  /** Re-encrypts secrets under a retired data key, and any still in plaintext (`npm run reencrypt`). */
  reencrypt(): Promise<number> {
    return this.sealed.rewriteStale(this.secrets);
  }

  private async load(name: string): Promise<Buffer> {
    const existing = await this.secrets.findOne({ _id: name });
    if (existing) return this.opened(existing);
    try {
      const value = randomBytes(32).toString('base64');
      await this.secrets.insertOne(this.sealed.seal(name, { _id: name, value, created_at: new Date() }));
      return Buffer.from(value, 'base64');
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      const winner = await this.secrets.findOne({ _id: name });
      if (!winner) throw err;
      return this.opened(winner);
    }
  }

  /** The key of a stored secret; one an earlier version stored in plaintext is encrypted in place (one conditional write). */
  private async opened(doc: Sealed<SecretDoc, 'value'>): Promise<Buffer> {
    const { value } = this.sealed.open(doc);
    if (typeof doc.value === 'string') await this.secrets.updateOne({ _id: doc._id, value: doc.value }, { $set: this.sealed.seal(doc._id, { value }) });
    return Buffer.from(value, 'base64');
  }
}
