import type { Collection, Db } from 'mongodb';
import type { FieldCipher } from '../platform/field-encryption';
import type { Config } from '../platform/config';
import { EncryptedFields, type Sealed } from '../platform/database/encrypted-fields';
import { createIndexes, type IndexSpec, type QueryShape } from '../platform/database/indexes';
import type { LabAccountDoc, LabAccountTls } from './lab-accounts';

/**
 * Lab accounts (`lab_accounts`), one document per account. Written by the management API only (create, a
 * conditional update, delete); read by order creation, the worker's lab connections (findById) and the results
 * listener's allow-list (listAll: a handful per organisation). The TLS private key is kept out of `mllp` and
 * sealed in its own field (`tls_key`, EncryptedFields), opened only by findById. Lives until deleted.
 */

/** As stored: `mllp.tls.key` always null, the key sealed in `tls_key`. */
export interface PlainStoredAccount extends Omit<LabAccountDoc, 'mllp'> {
  mllp: { host: string; port: number; tls: (Omit<LabAccountTls, 'key'> & { key: null }) | null };
  tls_key: string | null;
}
const SEALED = ['tls_key'] as const;
type StoredLabAccount = Sealed<PlainStoredAccount, (typeof SEALED)[number]>;

/** What lists and views get: everything but the key, and whether there is one. */
export type ListedLabAccount = Omit<PlainStoredAccount, 'tls_key'> & { has_tls_key: boolean };

export const LAB_ACCOUNT_INDEXES: Record<'lab_accounts', IndexSpec[]> = {
  lab_accounts: [{ key: { org_id: 1, environment: 1, region: 1, _id: 1 } }],
};
export const LAB_ACCOUNT_QUERY_SHAPES: Record<'lab_accounts', QueryShape[]> = {
  lab_accounts: [
    { name: 'an account by id (read, conditional update, delete)', filter: ['_id'], residual: ['org_id', 'environment', 'region', 'updated_at'] },
    { name: "an organisation's accounts in one deployment, oldest first", filter: ['org_id', 'environment', 'region'], sort: ['_id'] },
    { name: 'every account (the results listener allow-list; reencrypt), in _id order', filter: ['_id'], sort: ['_id'] },
  ],
};

/** Where an account lives: its organisation and this deployment's environment and region. */
export interface LabAccountScope {
  orgId: string;
  environment: string;
  region: string;
}

/** An organisation's accounts in this deployment (accounts are managed per environment and region, each on its deployment). */
export const labAccountScope = (orgId: string, config: Pick<Config, 'DEPLOYMENT_ENVIRONMENT' | 'DEPLOYMENT_REGION'>): LabAccountScope => ({
  orgId,
  environment: config.DEPLOYMENT_ENVIRONMENT,
  region: config.DEPLOYMENT_REGION,
});

export class LabAccountRepository {
  readonly accounts: Collection<StoredLabAccount>;
  private readonly sealed: EncryptedFields<PlainStoredAccount, (typeof SEALED)[number]>;

  constructor(db: Db, cipher: FieldCipher) {
    this.accounts = db.collection('lab_accounts');
    this.sealed = new EncryptedFields(cipher, this.accounts.collectionName, SEALED);
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.accounts, LAB_ACCOUNT_INDEXES.lab_accounts);
  }

  /** Re-encrypts keys sealed under a retired data key (`npm run reencrypt`). */
  reencrypt(): Promise<number> {
    return this.sealed.rewriteStale(this.accounts);
  }

  private toStored(doc: LabAccountDoc): StoredLabAccount {
    const { tls } = doc.mllp;
    const plain: PlainStoredAccount = {
      ...doc,
      mllp: { host: doc.mllp.host, port: doc.mllp.port, tls: tls && { ca: tls.ca, cert: tls.cert, key: null } },
      tls_key: tls?.key ?? null,
    };
    return this.sealed.seal(doc._id, plain);
  }

  /** The account with its key in plaintext (for the worker's connection to the lab). */
  private opened(stored: StoredLabAccount): LabAccountDoc {
    const { tls_key, ...doc } = this.sealed.open(stored) as PlainStoredAccount;
    const tls = doc.mllp.tls;
    return { ...doc, mllp: { ...doc.mllp, tls: tls && { ...tls, key: tls_key } } };
  }

  /** The account without its key (lists and API views): the key is never even decrypted. */
  private listed(stored: StoredLabAccount): ListedLabAccount {
    const { tls_key, ...doc } = stored;
    return { ...(doc as Omit<PlainStoredAccount, 'tls_key'>), has_tls_key: tls_key !== null && tls_key !== undefined };
  }

  /** The account, its TLS key opened (the worker's connection). No scope: the caller holds an id it was given. */
  async findById(id: string): Promise<LabAccountDoc | null> {
    const doc = await this.accounts.findOne({ _id: id });
    return doc && this.opened(doc);
  }

  /** The account if it is the organisation's in this deployment (management reads; order and test checks). */
  async findInScope(scope: LabAccountScope, id: string): Promise<ListedLabAccount | null> {
    const doc = await this.accounts.findOne({ _id: id, org_id: scope.orgId, environment: scope.environment, region: scope.region });
    return doc && this.listed(doc);
  }

  /** Every account, keys opened (the results listener's allow-list; a small collection). */
  async listAll(): Promise<LabAccountDoc[]> {
    // Bounded on `_id` so the `_id` index serves the walk (architecture rule 2: a sentinel bound, not an empty filter).
    return (
      await this.accounts
        .find({ _id: { $gt: '' } })
        .sort({ _id: 1 })
        .toArray()
    ).map((d) => this.opened(d));
  }

  /** The organisation's accounts in one deployment, oldest first, without keys. */
  async listForOrg(orgId: string, environment: string, region: string): Promise<ListedLabAccount[]> {
    return (await this.accounts.find({ org_id: orgId, environment, region }).sort({ _id: 1 }).toArray()).map((d) => this.listed(d));
  }

  async create(doc: LabAccountDoc): Promise<ListedLabAccount> {
    const stored = this.toStored(doc);
    await this.accounts.insertOne(stored);
    return this.listed(stored);
  }

  /**
   * Changes an account in one conditional write: `change` gets the account as read (key opened) and returns it
   * changed (or throws to refuse); the write replaces it only if nobody changed it since (`updated_at` as read),
   * else it is read and changed again. Null: not the organisation's (or deleted meanwhile).
   */
  async update(scope: LabAccountScope, id: string, change: (current: LabAccountDoc) => LabAccountDoc): Promise<ListedLabAccount | null> {
    for (;;) {
      const current = await this.accounts.findOne({ _id: id, org_id: scope.orgId, environment: scope.environment, region: scope.region });
      if (!current) return null;
      const opened = this.opened(current);
      // Strictly later than the version read, so two changes within one millisecond still differ.
      const updatedAt = new Date(Math.max(Date.now(), current.updated_at.getTime() + 1));
      const next = this.toStored({ ...change(opened), _id: id, org_id: current.org_id, created_at: current.created_at, updated_at: updatedAt });
      const { matchedCount } = await this.accounts.replaceOne({ _id: id, updated_at: current.updated_at }, next);
      if (matchedCount === 1) return this.listed(next);
    }
  }

  /** Whether there was an account of the organisation to delete. */
  async delete(scope: LabAccountScope, id: string): Promise<boolean> {
    const { deletedCount } = await this.accounts.deleteOne({ _id: id, org_id: scope.orgId, environment: scope.environment, region: scope.region });
    return deletedCount === 1;
  }
}
