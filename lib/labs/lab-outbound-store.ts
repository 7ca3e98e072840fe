import type { Collection, Db } from 'mongodb';
import type { FieldCipher } from '../platform/field-encryption';
import { EncryptedFields, type Sealed } from '../platform/database/encrypted-fields';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';
import { isDuplicateKeyError } from '../platform/database/store-errors';

/**
 * A lab's answer to one of our messages, as lib/labs/hl7/acknowledgement.ts reads it (`LabAcknowledgement`, contract
 * C3), stored with the message. Declared here too so the store does not depend on the parser.
 */
export interface OutboundAnswer {
  controlId: string;
  code: 'AA' | 'AE' | 'AR' | 'CA' | 'CE' | 'CR';
  text: string | null;
  orderControl: string | null;
  fillerNumber: string | null;
}

/**
 * HL7 messages we send to laboratories (`lab_outbound_messages`), one per control id (MSH-10): an order's order
 * message `<placer>O`, its cancel `<placer>C`. Stored (unique insert) before the first send, so every send of it,
 * whichever worker makes it and however often, carries the same bytes; the lab de-duplicates by control id. The
 * answer is stored on it whoever receives it (the send that waited for it, or a late reply on the connection), so a
 * retried send finds it answered and does not send again. Lives as long as its order; erased with the order's
 * patient data (the message is the patient's details, sealed).
 */
export interface LabOutboundMessageDoc {
  /** The control id (MSH-10). */
  _id: string;
  order_id: string;
  account_id: string;
  kind: 'order' | 'cancel';
  /** The exact bytes sent (base64), encoded in `charset`. Sealed. */
  message: string;
  /** HL7 table 0211 name (MSH-18) the bytes are in. */
  charset: string;
  /** `committed`: an enhanced-mode lab has accepted it into safe storage; its application ACK is still to come. */
  state: 'pending' | 'committed' | 'answered';
  answer: OutboundAnswer | null;
  sends: number;
  last_sent_at: Date | null;
  answered_at: Date | null;
  created_at: Date;
}

const SEALED = ['message'] as const;
type StoredOutboundMessage = Sealed<LabOutboundMessageDoc, (typeof SEALED)[number]>;

const UNANSWERED = ['pending', 'committed'] as const;

export const LAB_OUTBOUND_INDEXES: Record<'lab_outbound_messages', IndexSpec[]> = {
  lab_outbound_messages: [{ key: { order_id: 1 } }, { key: { state: 1 } }],
};
export const LAB_OUTBOUND_QUERY_SHAPES: Record<'lab_outbound_messages', QueryShape[]> = {
  lab_outbound_messages: [
    { name: 'a message by control id (store, read)', filter: ['_id'] },
    { name: 'a send, a commit or an answer (conditional writes on the state)', filter: ['_id'], residual: ['state', 'account_id'] },
    { name: 'unanswered messages (metrics)', filter: ['state'] },
    { name: "an order's messages (erasure)", filter: ['order_id'] },
    { name: 'reencrypt: every document, in _id pages', filter: ['_id'], sort: ['_id'] },
  ],
};

export class LabOutboundRepository {
  readonly messages: Collection<StoredOutboundMessage>;
  private readonly sealed: EncryptedFields<LabOutboundMessageDoc, (typeof SEALED)[number]>;

  constructor(db: Db, cipher: FieldCipher) {
    this.messages = db.collection('lab_outbound_messages');
    this.sealed = new EncryptedFields(cipher, this.messages.collectionName, SEALED);
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.messages, LAB_OUTBOUND_INDEXES.lab_outbound_messages, retention);
  }

  reencrypt(): Promise<number> {
    return this.sealed.rewriteStale(this.messages);
  }

  /** Stores the message, or returns the one already stored under its control id (then its bytes are what is sent). */
  async store(doc: LabOutboundMessageDoc): Promise<LabOutboundMessageDoc> {
    try {
      await this.messages.insertOne(this.sealed.seal(doc._id, doc));
      return doc;
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      const existing = await this.find(doc._id);
      if (!existing) throw err;
      return existing;
    }
  }

  async find(controlId: string): Promise<LabOutboundMessageDoc | null> {
    const doc = await this.messages.findOne({ _id: controlId });
    return doc && (this.sealed.open(doc) as LabOutboundMessageDoc);
  }

  /** Counts a send about to go out; null when the message is answered meanwhile (then nothing is sent). */
  async recordSend(controlId: string): Promise<{ sends: number } | null> {
    const doc = await this.messages.findOneAndUpdate(
      { _id: controlId, state: { $in: [...UNANSWERED] } },
      { $inc: { sends: 1 }, $set: { last_sent_at: new Date() } },
      { returnDocument: 'after', projection: { sends: 1 } },
    );
    return doc ? { sends: doc.sends } : null;
  }

  /** An enhanced-mode lab's accept ACK: the message is in its safe storage; a retry waits for the application ACK. */
  async markCommitted(controlId: string): Promise<void> {
    await this.messages.updateOne({ _id: controlId, state: 'pending' }, { $set: { state: 'committed' } });
  }

  /**
   * Stores the lab's application answer once (the first one wins: a duplicate ACK of a resend changes nothing). From
   * the account the message went to only: a reply on another lab's connection naming our control id is not its answer.
   * True when this call stored it.
   */
  async recordAnswer(controlId: string, accountId: string, answer: OutboundAnswer): Promise<boolean> {
    const { matchedCount } = await this.messages.updateOne(
      { _id: controlId, account_id: accountId, state: { $in: [...UNANSWERED] } },
      { $set: { state: 'answered', answer, answered_at: new Date() } },
    );
    return matchedCount === 1;
  }

  /** Messages sent or being sent that no lab has answered yet (a gauge; counted up to 100,000). */
  unansweredCount(): Promise<number> {
    return this.messages.countDocuments({ state: { $in: [...UNANSWERED] } }, { limit: 100_000 });
  }

  /** The order's patient data is erased: so are the messages that carried it. */
  async eraseForOrder(orderId: string): Promise<void> {
    await this.messages.deleteMany({ order_id: orderId });
  }
}
