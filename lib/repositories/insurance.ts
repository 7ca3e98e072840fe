import type { Collection, Db } from 'mongodb';
import type { EncryptedValue, FieldCipher } from '../crypto/field-encryption';
import type { InsuranceRecord } from '../../schemas/insurance';
import { createIndexes, type IndexSpec, type QueryShape } from './indexes';

/** The personal part of an insurance record: stored only encrypted (`personal`). */
type PersonalFields = Pick<InsuranceRecord, 'member_id' | 'group_id' | 'insured' | 'guarantor'>;

/** An insurance record as the rest of the code sees it. */
export interface InsuranceDoc extends InsuranceRecord {
  _id: string;
  team_id: string;
  user_id: string;
  created_at: Date;
}

/**
 * As stored: the member's identity (member and group ids, the insured, the guarantor) is one field-encrypted
 * value; what the queries and the catalogue need (primacy, payor, relationship, the payor's company) is plain.
 */
interface StoredInsurance extends Omit<InsuranceDoc, keyof PersonalFields> {
  personal: EncryptedValue;
}

export const INSURANCE_INDEXES: Record<'insurance_records', IndexSpec[]> = {
  insurance_records: [{ key: { team_id: 1, user_id: 1, is_primary: 1, created_at: 1, _id: 1 } }, { key: { 'personal.key_id': 1 } }],
};
export const INSURANCE_QUERY_SHAPES: Record<'insurance_records', QueryShape[]> = {
  insurance_records: [
    { name: "a user's latest record of one primacy", filter: ['team_id', 'user_id', 'is_primary'], sort: ['created_at', '_id'] },
    { name: "erase a user's records", filter: ['team_id', 'user_id'] },
    { name: 'records under a retired data key (reencrypt)', filter: ['personal.key_id'] },
  ],
};

/** The encryption context: a ciphertext copied into another record does not decrypt. */
const personalContext = (id: string) => `insurance_records:${id}:personal`;

/** Insurance records (closed beta). Records are never updated: a change is a new record. */
export class InsuranceRepository {
  readonly records: Collection<StoredInsurance>;

  constructor(
    db: Db,
    private readonly cipher: FieldCipher,
  ) {
    this.records = db.collection('insurance_records');
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.records, INSURANCE_INDEXES.insurance_records);
  }

  async create(doc: InsuranceDoc): Promise<void> {
    await this.records.insertOne(this.stored(doc));
  }

  /** The most recently created record of this primacy, decrypted. */
  async latest(teamId: string, userId: string, isPrimary: boolean): Promise<InsuranceDoc | null> {
    const [doc] = await this.records
      .find({ team_id: teamId, user_id: userId, is_primary: isPrimary })
      .sort({ created_at: -1, _id: -1 })
      .limit(1)
      .toArray();
    return doc ? this.decrypted(doc) : null;
  }

  async eraseAllForUser(teamId: string, userId: string): Promise<number> {
    return (await this.records.deleteMany({ team_id: teamId, user_id: userId })).deletedCount;
  }

  /** Rewrites records encrypted under a retired data key with the current one (`npm run reencrypt`). */
  async reencrypt(): Promise<number> {
    let changed = 0;
    for (const doc of await this.records.find({ 'personal.key_id': { $ne: this.cipher.currentKeyId } }).toArray()) {
      // Records are immutable, so a plain rewrite by `_id` races nothing but erasure (which deletes it anyway).
      await this.records.updateOne({ _id: doc._id }, { $set: { personal: this.stored(this.decrypted(doc)).personal } });
      changed++;
    }
    return changed;
  }

  private stored(doc: InsuranceDoc): StoredInsurance {
    const { member_id, group_id, insured, guarantor, ...plain } = doc;
    const personal: PersonalFields = { member_id, group_id, insured, guarantor };
    return { ...plain, personal: this.cipher.encrypt(JSON.stringify(personal), personalContext(doc._id)) };
  }

  private decrypted({ personal, ...plain }: StoredInsurance): InsuranceDoc {
    const fields = JSON.parse(this.cipher.decryptString(personal, personalContext(plain._id))) as PersonalFields;
    return { ...plain, ...fields };
  }
}
