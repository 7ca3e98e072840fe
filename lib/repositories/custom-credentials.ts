import type { Collection, Db } from 'mongodb';
import type { EncryptedValue, FieldCipher } from '../crypto/field-encryption';
import { createIndexes, type IndexSpec, type QueryShape } from './indexes';
import type { DocumentLocks, LockLease } from './locks';
import { teamLockKey } from './tenancy';

export interface CustomCredentialsInput {
  org_id: string;
  team_id: string;
  provider: string;
  environment: string;
  region: string;
  client_id: string;
  client_secret: string;
  /** Provider-specific settings (they may hold secrets too). */
  details: Record<string, unknown> | null;
  redirect_url_override: string | null;
}

/**
 * A team's own OAuth application at a provider (`team_custom_credentials`): one document per team and
 * provider, `_id` `<team_id>:<provider>`, so setting them again replaces them. The client secret and the
 * details (as JSON) are encrypted at rest (lib/crypto/field-encryption.ts) and never leave in full.
 * Lives as long as its team (deleted with it, or by DELETE).
 */
export type CustomCredentialsDoc = Omit<CustomCredentialsInput, 'client_secret' | 'details'> & {
  _id: string;
  client_secret: EncryptedValue;
  details: EncryptedValue | null;
  /** The secret's last characters, to recognise it (none for short secrets). */
  client_secret_hint: string;
  created_at: Date;
  updated_at: Date;
};

/** Secrets under 12 characters show nothing; longer ones their last 4. */
export const secretHint = (secret: string) => (secret.length >= 12 ? `…${secret.slice(-4)}` : '…');

const credentialsId = (teamId: string, provider: string) => `${teamId}:${provider}`;
/** The encryption context of a field: a ciphertext copied into another document or field does not decrypt. */
const fieldContext = (id: string, field: 'client_secret' | 'details') => `team_custom_credentials:${id}:${field}`;

export const CUSTOM_CREDENTIALS_INDEXES: Record<'team_custom_credentials', IndexSpec[]> = {
  team_custom_credentials: [{ key: { org_id: 1, team_id: 1, provider: 1 } }],
};

/** Every query CustomCredentialsRepository issues (test/indexes.test.ts). */
export const CUSTOM_CREDENTIALS_QUERY_SHAPES: Record<'team_custom_credentials', QueryShape[]> = {
  team_custom_credentials: [
    { name: 'credentials by id (team and provider: replace, delete)', filter: ['_id'] },
    { name: "an org's credentials by team and provider", filter: ['org_id'], sort: ['team_id', 'provider'] },
    { name: "some teams' credentials (list; a deleted team's)", filter: ['org_id', 'team_id'], sort: ['provider'] },
    // A maintenance pass over the whole (small) collection, by `_id`: no filter to index.
    { name: 'every document id (reencrypt)', filter: [] },
  ],
};

export class CustomCredentialsRepository {
  readonly credentials: Collection<CustomCredentialsDoc>;

  constructor(
    db: Db,
    private readonly locks: DocumentLocks,
    /** Encrypts client secrets and details at rest (DATA_ENCRYPTION_KEYS). */
    private readonly cipher: FieldCipher,
  ) {
    this.credentials = db.collection('team_custom_credentials');
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.credentials, CUSTOM_CREDENTIALS_INDEXES.team_custom_credentials);
  }

  private encrypted(id: string, secret: string, details: Record<string, unknown> | null) {
    return {
      client_secret: this.cipher.encrypt(secret, fieldContext(id, 'client_secret')),
      details: details === null ? null : this.cipher.encrypt(JSON.stringify(details), fieldContext(id, 'details')),
    };
  }

  /**
   * Sets (or replaces) a team's credentials for a provider. The caller holds the team's lock (`lease`,
   * TenancyRepository.withLiveTeam), so credentials are never added to a team being deleted.
   */
  async put(lease: LockLease, input: CustomCredentialsInput): Promise<CustomCredentialsDoc> {
    const id = credentialsId(input.team_id, input.provider);
    const now = new Date();
    const existing = await this.credentials.findOne({ _id: id }, { projection: { created_at: 1 } });
    const doc: CustomCredentialsDoc = {
      ...input,
      _id: id,
      ...this.encrypted(id, input.client_secret, input.details),
      client_secret_hint: secretHint(input.client_secret),
      created_at: existing?.created_at ?? now,
      updated_at: now,
    };
    await lease.assertHeld();
    await this.credentials.replaceOne({ _id: id }, doc, { upsert: true });
    return doc;
  }

  list(orgId: string, teamIds?: string[]): Promise<CustomCredentialsDoc[]> {
    const filter = teamIds ? { org_id: orgId, team_id: { $in: teamIds } } : { org_id: orgId };
    return this.credentials.find(filter).sort({ team_id: 1, provider: 1 }).toArray();
  }

  /** The caller holds the team's lock. Whether there was something to delete. */
  async delete(lease: LockLease, teamId: string, provider: string): Promise<boolean> {
    await lease.assertHeld();
    return (await this.credentials.deleteOne({ _id: credentialsId(teamId, provider) })).deletedCount === 1;
  }

  /** Every credential of a team (its deletion; the caller has marked the team, so none are added meanwhile). */
  async deleteAllOfTeam(orgId: string, teamId: string): Promise<void> {
    const ids = (await this.list(orgId, [teamId])).map((d) => d._id);
    if (ids.length) await this.credentials.deleteMany({ _id: { $in: ids } });
  }

  /** The client secret in plaintext (for the provider's OAuth flow). */
  revealSecret(doc: CustomCredentialsDoc): string {
    return this.cipher.decryptString(doc.client_secret, fieldContext(doc._id, 'client_secret'));
  }

  revealDetails(doc: CustomCredentialsDoc): Record<string, unknown> | null {
    return doc.details && JSON.parse(this.cipher.decryptString(doc.details, fieldContext(doc._id, 'details')));
  }

  /**
   * Re-encrypts values stored under a data key that is no longer current (`npm run reencrypt`), each document
   * under its team's lock so a concurrent POST is not overwritten with the older values. Returns how many changed.
   */
  async reencrypt(): Promise<number> {
    let changed = 0;
    for (const { _id, team_id } of await this.credentials.find({}, { projection: { _id: 1, team_id: 1 } }).toArray()) {
      await this.locks.withLock(teamLockKey(team_id), async (lease) => {
        const doc = await this.credentials.findOne({ _id });
        if (!doc || !(this.cipher.isStale(doc.client_secret) || (doc.details && this.cipher.isStale(doc.details)))) return;
        const fresh = this.encrypted(_id, this.revealSecret(doc), this.revealDetails(doc));
        await lease.assertHeld();
        await this.credentials.updateOne({ _id }, { $set: fresh });
        changed++;
      });
    }
    return changed;
  }
}
