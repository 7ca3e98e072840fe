import type { Collection, Db } from 'mongodb';
import type { FieldCipher } from '../platform/field-encryption';
import type { InsuranceRecord } from '../../schemas/insurance';
import { EncryptedFields, type Sealed } from '../platform/database/encrypted-fields';
import { createIndexes, type IndexSpec, type QueryShape } from '../platform/database/indexes';

/** An insurance record as the rest of the code sees it. */
export interface InsuranceDoc extends InsuranceRecord {
  _id: string;
  team_id: string;
  user_id: string;
  created_at: Date;
}

/**
 * The member's identity (member and group ids, the insured, the guarantor) is stored only encrypted, field by
 * field; what the queries and the catalogue need (primacy, payor, relationship, the payor's company) is plain.
 */
const PERSONAL_FIELDS = ['member_id', 'group_id', 'insured', 'guarantor'] as const;
type PersonalField = (typeof PERSONAL_FIELDS)[number];
type StoredInsurance = Sealed<InsuranceDoc, PersonalField>;

export const INSURANCE_INDEXES: Record<'insurance_records', IndexSpec[]> = {
  insurance_records: [{ key: { team_id: 1, user_id: 1, is_primary: 1, created_at: 1, _id: 1 } }],
};
export const INSURANCE_QUERY_SHAPES: Record<'insurance_records', QueryShape[]> = {
  insurance_records: [
    { name: "a user's latest record of one primacy", filter: ['team_id', 'user_id', 'is_primary'], sort: ['created_at', '_id'] },
    { name: "erase a user's records", filter: ['team_id', 'user_id'] },
    { name: "an order's record (a lab message's IN1/GT1)", filter: ['_id'], residual: ['team_id'] },
    { name: 'reencrypt: every record, in _id pages', filter: ['_id'], sort: ['_id'] },
    { name: 'reencrypt: one record', filter: ['_id'] },
  ],
};

/** Insurance records (closed beta). Records are never updated: a change is a new record. */
export class InsuranceRepository {
  readonly records: Collection<StoredInsurance>;
  private readonly personal: EncryptedFields<InsuranceDoc, PersonalField>;

  constructor(db: Db, cipher: FieldCipher) {
    this.records = db.collection('insurance_records');
    this.personal = new EncryptedFields<InsuranceDoc, PersonalField>(cipher, 'insurance_records', PERSONAL_FIELDS);
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.records, INSURANCE_INDEXES.insurance_records);
  }

  async create(doc: InsuranceDoc): Promise<void> {
    await this.records.insertOne(this.personal.seal(doc._id, doc));
  }

  /** The most recently created record of this primacy, decrypted. */
  async latest(teamId: string, userId: string, isPrimary: boolean): Promise<InsuranceDoc | null> {
    const [doc] = await this.records.find({ team_id: teamId, user_id: userId, is_primary: isPrimary }).sort({ created_at: -1, _id: -1 }).limit(1).toArray();
    return doc ? (this.personal.open(doc) as InsuranceDoc) : null;
  }

  /** One record of the team, decrypted (an order's `health_insurance_id`). */
  async findById(teamId: string, id: string): Promise<InsuranceDoc | null> {
    const doc = await this.records.findOne({ _id: id, team_id: teamId });
    return doc ? (this.personal.open(doc) as InsuranceDoc) : null;
  }

  async eraseAllForUser(teamId: string, userId: string): Promise<number> {
    return (await this.records.deleteMany({ team_id: teamId, user_id: userId })).deletedCount;
  }

  /**
   * Rewrites records encrypted under a retired data key with the current one (`npm run reencrypt`). Records are
   * immutable, so the rewrite races nothing but erasure, which the pass leaves deleted.
   */
  reencrypt(): Promise<number> {
    return this.personal.rewriteStale(this.records);
  }
}
