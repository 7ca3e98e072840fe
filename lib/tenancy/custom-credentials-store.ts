import type { Collection, Db } from 'mongodb';
import type { FieldCipher } from '../platform/field-encryption';
import { EncryptedFields, type Sealed } from '../platform/database/encrypted-fields';
import { createIndexes, type IndexSpec, type QueryShape } from '../platform/database/indexes';

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
 * details are encrypted at rest field by field (lib/platform/database/encrypted-fields.ts) and never leave in full.
 * Lives as long as its team (deleted with it, or by DELETE).
 */
type PlainCredentials = CustomCredentialsInput & {
  _id: string;
  /** The secret's last characters, to recognise it (none for short secrets). */
  client_secret_hint: string;
  created_at: Date;
  updated_at: Date;
};
type SecretField = 'client_secret' | 'details';
const SECRET_FIELDS: readonly SecretField[] = ['client_secret', 'details'];
/** As stored (and listed): the secret fields encrypted. */
export type CustomCredentialsDoc = Sealed<PlainCredentials, SecretField>;

/** Secrets under 12 characters show nothing; longer ones their last 4. */
export const secretHint = (secret: string) => (secret.length >= 12 ? `…${secret.slice(-4)}` : '…');

const credentialsId = (teamId: string, provider: string) => `${teamId}:${provider}`;

export const CUSTOM_CREDENTIALS_INDEXES: Record<'team_custom_credentials', IndexSpec[]> = {
  team_custom_credentials: [{ key: { org_id: 1, team_id: 1, provider: 1 } }, { key: { provider: 1 } }],
};

/** Every query CustomCredentialsRepository issues (test/indexes.test.ts). */
export const CUSTOM_CREDENTIALS_QUERY_SHAPES: Record<'team_custom_credentials', QueryShape[]> = {
  team_custom_credentials: [
    { name: 'credentials by id (team and provider: replace, delete)', filter: ['_id'] },
    { name: "an org's credentials by team and provider", filter: ['org_id'], sort: ['team_id', 'provider'] },
    { name: "some teams' credentials (list; a deleted team's)", filter: ['org_id', 'team_id'], sort: ['provider'] },
    { name: 'reencrypt: every document, in _id pages', filter: ['_id'], sort: ['_id'] },
    { name: "every team's own app at a provider (verifying that provider's pushes)", filter: ['provider'] },
  ],
};

export class CustomCredentialsRepository {
  readonly credentials: Collection<CustomCredentialsDoc>;
  private readonly secrets: EncryptedFields<PlainCredentials, SecretField>;

  constructor(
    db: Db,
    /** Encrypts client secrets and details at rest (DATA_ENCRYPTION_KEYS). */
    cipher: FieldCipher,
  ) {
    this.credentials = db.collection('team_custom_credentials');
    this.secrets = new EncryptedFields<PlainCredentials, SecretField>(cipher, 'team_custom_credentials', SECRET_FIELDS);
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.credentials, CUSTOM_CREDENTIALS_INDEXES.team_custom_credentials);
  }

  /**
   * Sets (or replaces) a team's credentials for a provider. Through TenancyRepository.addToLiveTeam, so
   * credentials are never left in a team being deleted.
   */
  async put(input: CustomCredentialsInput): Promise<CustomCredentialsDoc> {
    const id = credentialsId(input.team_id, input.provider);
    const now = new Date();
    const existing = await this.credentials.findOne({ _id: id }, { projection: { created_at: 1 } });
    const doc = this.secrets.seal(id, {
      ...input,
      _id: id,
      client_secret_hint: secretHint(input.client_secret),
      created_at: existing?.created_at ?? now,
      updated_at: now,
    }) as CustomCredentialsDoc;
    await this.credentials.replaceOne({ _id: id }, doc, { upsert: true });
    return doc;
  }

  list(orgId: string, teamIds?: string[]): Promise<CustomCredentialsDoc[]> {
    const filter = teamIds ? { org_id: orgId, team_id: { $in: teamIds } } : { org_id: orgId };
    return this.credentials.find(filter).sort({ team_id: 1, provider: 1 }).toArray();
  }

  /** Whether there was something to delete. */
  async delete(teamId: string, provider: string): Promise<boolean> {
    return (await this.credentials.deleteOne({ _id: credentialsId(teamId, provider) })).deletedCount === 1;
  }

  /** Every credential of a team (its deletion; the caller has marked the team, so none are added meanwhile). */
  async deleteAllOfTeam(orgId: string, teamId: string): Promise<void> {
    const ids = (await this.list(orgId, [teamId])).map((d) => d._id);
    if (ids.length) await this.credentials.deleteMany({ _id: { $in: ids } });
  }

  /** A team's credentials for one provider (by `_id`), or null. */
  findForTeam(teamId: string, provider: string): Promise<CustomCredentialsDoc | null> {
    return this.credentials.findOne({ _id: credentialsId(teamId, provider) });
  }

  /** A team's credentials for any of `providers` (by `_id`, one read). */
  findForTeamProviders(teamId: string, providers: string[]): Promise<CustomCredentialsDoc[]> {
    return this.credentials.find({ _id: { $in: providers.map((p) => credentialsId(teamId, p)) } }).toArray();
  }

  /** Every team's own app at `provider` (a push is verified against each app's secret). */
  listForProvider(provider: string, limit = 1000): Promise<CustomCredentialsDoc[]> {
    return this.credentials.find({ provider }).limit(limit).toArray();
  }

  /** The client secret in plaintext (for the provider's OAuth flow). */
  revealSecret(doc: CustomCredentialsDoc): string {
    return this.secrets.open(doc).client_secret as string;
  }

  revealDetails(doc: CustomCredentialsDoc): Record<string, unknown> | null {
    return (this.secrets.open(doc).details as Record<string, unknown> | null) ?? null;
  }

  /**
   * Re-encrypts values stored under a data key that is no longer current (`npm run reencrypt`); a document is
   * rewritten only where its ciphertext is still the one read, so a concurrent POST is never overwritten with the
   * older values (rewriteStale). Returns how many changed.
   */
  reencrypt(): Promise<number> {
    return this.secrets.rewriteStale(this.credentials);
  }
}
