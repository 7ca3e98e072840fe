import { createHash } from 'node:crypto';
import type { Collection, Db } from 'mongodb';
import type { FieldCipher } from '../platform/field-encryption';
import { EncryptedFields, type Sealed } from '../platform/database/encrypted-fields';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';
import type { LabReport } from './lab-adapter';
import { isDuplicateKeyError } from '../platform/database/store-errors';
import { Lease } from '../platform/database/leases';
import { IDEMPOTENCY_LEASE_MS } from '../platform/idempotency-store';

/**
 * HL7 result messages a team's lab sent (`lab_intake_messages`), one per MSH-10 control id: claimed by a
 * unique insert before anything is applied, so a resent message is applied once. The report (the patient's
 * results, encrypted) is what the order's workflow reads when it stores them, after the ACK; the whole record
 * expires like an X-Idempotency-Key (IDEMPOTENCY_KEY_RETENTION_SECONDS after it came).
 */
export interface Hl7IntakeMessageDoc {
  /** sha256(team id, control id). */
  _id: string;
  team_id: string;
  control_id: string;
  message_sha256: string;
  order_id: string;
  state: 'pending' | 'applied';
  /** The token of the delivery applying it now; every later write names it (a stalled one cannot write over its successor). */
  claim: string;
  /** When that delivery claimed it (or took it over): its lease (IDEMPOTENCY_LEASE_MS, like a request's) runs from here. */
  claimed_at: Date;
  /** What the order's workflow reads (lib/labs/hl7-lab.ts). */
  report: LabReport;
  /** The ACK the lab got (replayed on a resend). */
  ack: string | null;
  created_at: Date;
  applied_at: Date | null;
}

const SEALED = ['report'] as const;
type StoredIntakeMessage = Sealed<Hl7IntakeMessageDoc, (typeof SEALED)[number]>;

export const HL7_INTAKE_INDEXES: Record<'lab_intake_messages', IndexSpec[]> = {
  lab_intake_messages: [{ key: { created_at: 1 }, expireAfter: 'idempotencyKeys' }],
};
export const HL7_INTAKE_QUERY_SHAPES: Record<'lab_intake_messages', QueryShape[]> = {
  lab_intake_messages: [
    { name: 'a message by id (claim, read)', filter: ['_id'] },
    { name: 'take over or mark applied under a claim (conditional writes)', filter: ['_id'], residual: ['claim', 'claimed_at', 'state'] },
    { name: 'reencrypt: every document, in _id pages', filter: ['_id'], sort: ['_id'] },
  ],
};

export const intakeMessageId = (teamId: string, controlId: string) => createHash('sha256').update(`${teamId}\u0000${controlId}`).digest('hex');

export class Hl7IntakeRepository {
  readonly messages: Collection<StoredIntakeMessage>;
  private readonly sealed: EncryptedFields<Hl7IntakeMessageDoc, (typeof SEALED)[number]>;
  private readonly lease: Lease<StoredIntakeMessage>;

  constructor(db: Db, cipher: FieldCipher) {
    this.messages = db.collection('lab_intake_messages');
    this.sealed = new EncryptedFields(cipher, this.messages.collectionName, SEALED);
    this.lease = new Lease(this.messages, { token: 'claim', since: 'claimed_at', ms: IDEMPOTENCY_LEASE_MS, released: 'null' });
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.messages, HL7_INTAKE_INDEXES.lab_intake_messages, retention);
  }

  /** Re-encrypts reports under a retired data key (`npm run reencrypt`; they expire within a day anyway). */
  reencrypt(): Promise<number> {
    return this.sealed.rewriteStale(this.messages);
  }

  /** Inserts the message, or returns the one already claimed under its control id. */
  async claim(doc: Hl7IntakeMessageDoc): Promise<{ claimed: Hl7IntakeMessageDoc } | { existing: Hl7IntakeMessageDoc }> {
    try {
      await this.messages.insertOne(this.sealed.seal(doc._id, doc));
      return { claimed: doc };
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      const existing = await this.find(doc._id);
      if (!existing) throw err;
      return { existing };
    }
  }

  async find(id: string): Promise<Hl7IntakeMessageDoc | null> {
    const doc = await this.messages.findOne({ _id: id });
    return doc && (this.sealed.open(doc) as Hl7IntakeMessageDoc);
  }

  /** Takes over a pending message whose delivery's lease ran out, in one conditional write: one taker wins; false while it is live. */
  async takeOver(id: string, claim: string): Promise<boolean> {
    return (await this.lease.claim({ _id: id, state: 'pending' }, { token: claim })) !== null;
  }

  /** The order's workflow has taken the results: a resend gets this ACK again. Only under the delivery's own claim. */
  async markApplied(id: string, claim: string, ack: string): Promise<boolean> {
    const { matchedCount } = await this.messages.updateOne(
      { _id: id, ...this.lease.heldBy(claim) },
      { $set: { state: 'applied', ack, applied_at: new Date() } },
    );
    return matchedCount === 1;
  }
}
