import { createHash } from 'node:crypto';
import type { Collection, Db } from 'mongodb';
import type { FieldCipher } from '../platform/field-encryption';
import { EncryptedFields, type Sealed } from '../platform/database/encrypted-fields';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';
import { isDuplicateKeyError } from '../platform/database/store-errors';
import type { LabReport } from './lab-adapter';

/**
 * Result messages labs sent to our MLLP listener (`lab_inbound_messages`): stored before they are acknowledged
 * (commit, then ACK), one per lab account and MSH-10 and one per lab account and content, each by a unique insert:
 * a resend (same control id) or a re-send under a new control id of the same content (MSH-7 and MSH-10 left out of
 * the hash) is a duplicate, acknowledged again and applied once. The raw bytes and the decoded text are patient data,
 * sealed. `_id` is time-ordered (UUIDv7): the account's applier workflow (workflows/lab-results.ts) applies them in
 * arrival order, and the stranded-work sweep finds those still `received` whose signal was lost.
 *
 * State: `received` (stored, acknowledged AA) → `applied` (every order it names took it) | `in_review` (part of it
 * matched no order: lib/labs/lab-reviews-store.ts holds it until an operator matches or rejects it); `refused` (it
 * could not be parsed at all: acknowledged AR, kept for the record); `rejected` (an operator rejected its review). `settled_at` is set when nothing more will happen
 * to it; the store deletes it 30 days later (a message waiting in review never expires).
 */
export type LabInboundState = 'received' | 'applied' | 'in_review' | 'refused' | 'rejected';

export interface LabInboundMessageDoc {
  _id: string;
  account_id: string;
  org_id: string;
  /** The account's lab (catalogue slug), for the review inbox. */
  lab_slug: string;
  /** MSH-10, or null for a message whose control id could not be read. */
  control_id: string | null;
  /** sha256 of the decoded text without MSH-7 and MSH-10 (hex). */
  content_sha256: string;
  /**
   * Unique: `<account>\u0000<control id>` (a message without one: `<account>\u0000sha:<content hash>`; another message
   * under a control id already used: `<account>\u0000<control id>\u0000<content hash>`).
   */
  control_key: string;
  /** Unique: `<account>\u0000<content hash>`. */
  content_key: string;
  peer: { address: string; certificate: string | null };
  /** The encoding (iconv-lite name) the text was decoded with: by MSH-18, else the account's character set. */
  charset: string;
  /** The bytes as they came (Base64, sealed). */
  raw: string;
  /** The decoded text, HL7 escapes still in place (sealed). */
  text: string;
  state: LabInboundState;
  /** Accepted (AA, or CA in enhanced mode) or refused (AR / CR): what a resend of it is answered. */
  ack_code: 'AA' | 'AR';
  /** Why it was refused, or what the applier made of it (for people reading the store and the logs). */
  detail: string | null;
  /** The orders it was applied to, with the status each was asked to reach. */
  applied_to: { order_id: string; outcome: string }[];
  /** Resends seen after the first (by control id or content). */
  duplicates: number;
  received_at: Date;
  settled_at: Date | null;
}

/** One order's report out of a message (`lab_inbound_reports`, `_id` = `<message id>:<order id>`): what the order's workflow reads. */
export interface LabInboundReportDoc {
  _id: string;
  message_id: string;
  order_id: string;
  report: LabReport;
  created_at: Date;
}

const SEALED = ['raw', 'text'] as const;
const REPORT_SEALED = ['report'] as const;
type StoredInbound = Sealed<LabInboundMessageDoc, (typeof SEALED)[number]>;
type StoredReport = Sealed<LabInboundReportDoc, (typeof REPORT_SEALED)[number]>;

export const LAB_INBOUND_INDEXES: Record<'lab_inbound_messages' | 'lab_inbound_reports', IndexSpec[]> = {
  lab_inbound_messages: [
    { key: { control_key: 1 }, unique: true },
    { key: { content_key: 1 }, unique: true },
    // Sparse in effect: only messages not yet applied are `received` (the sweep's query); the rest leave it.
    { key: { state: 1, received_at: 1 } },
    { key: { settled_at: 1 }, expireAfter: 'labInboundMessages' },
    // Multikey: the orders a message was applied to (erasure of an order's patient data).
    { key: { 'applied_to.order_id': 1 } },
  ],
  // Read by the order's workflow right after the apply (or by a correction's run): kept as long as a settled message.
  lab_inbound_reports: [{ key: { created_at: 1 }, expireAfter: 'labInboundMessages' }, { key: { order_id: 1 } }],
};
export const LAB_INBOUND_QUERY_SHAPES: Record<'lab_inbound_messages' | 'lab_inbound_reports', QueryShape[]> = {
  lab_inbound_messages: [
    { name: 'a message by id', filter: ['_id'] },
    { name: 'the message a duplicate insert collided with, by content', filter: ['content_key'] },
    { name: 'a control id already used by another message', filter: ['control_key'] },
    { name: 'received but not applied before a time (stranded-work sweep)', filter: ['state', 'received_at'], sort: ['received_at'] },
    { name: 'settle a message (conditional on its state)', filter: ['_id'], residual: ['state'] },
    { name: 'erasure: the messages applied to an order (their bytes and text removed)', filter: ['applied_to.order_id'] },
    { name: 'reencrypt: every message, in _id pages', filter: ['_id'], sort: ['_id'] },
  ],
  lab_inbound_reports: [
    { name: 'a report by id', filter: ['_id'] },
    { name: "erasure: an order's reports (their messages' ids, then removed)", filter: ['order_id'] },
    { name: 'reencrypt: every report, in _id pages', filter: ['_id'], sort: ['_id'] },
  ],
};

/** The content hash: the decoded text with MSH-7 (time) and MSH-10 (control id) blanked, so a re-send under a new id matches. */
export function contentHashOf(text: string): string {
  const [msh, ...rest] = text.split('\r');
  const fields = msh.split('|');
  // MSH-1 is the separator itself, so MSH-n is fields[n - 1].
  if (fields.length > 9) fields[9] = '';
  if (fields.length > 6) fields[6] = '';
  return createHash('sha256')
    .update([fields.join('|'), ...rest.filter(Boolean)].join('\r'))
    .digest('hex');
}

export const inboundReportId = (messageId: string, orderId: string) => `${messageId}:${orderId}`;

export class LabInboundRepository {
  readonly messages: Collection<StoredInbound>;
  readonly reports: Collection<StoredReport>;
  private readonly sealed: EncryptedFields<LabInboundMessageDoc, (typeof SEALED)[number]>;
  private readonly sealedReports: EncryptedFields<LabInboundReportDoc, (typeof REPORT_SEALED)[number]>;

  constructor(db: Db, cipher: FieldCipher) {
    this.messages = db.collection('lab_inbound_messages');
    this.reports = db.collection('lab_inbound_reports');
    this.sealed = new EncryptedFields(cipher, this.messages.collectionName, SEALED);
    this.sealedReports = new EncryptedFields(cipher, this.reports.collectionName, REPORT_SEALED);
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.messages, LAB_INBOUND_INDEXES.lab_inbound_messages, retention);
    await createIndexes(this.reports, LAB_INBOUND_INDEXES.lab_inbound_reports, retention);
  }

  async reencrypt(): Promise<number> {
    return (await this.sealed.rewriteStale(this.messages)) + (await this.sealedReports.rewriteStale(this.reports));
  }

  /**
   * Stores a message, unless its account already has one with its content (a resend under the same control id, or a
   * re-send under a new one): then that one is returned, counted as resent. A different message under a control id
   * already used (a lab that reuses ids) is stored too, under its content: never dropped. Either way the message is
   * durable when this returns, and the caller may ACK.
   */
  async store(doc: LabInboundMessageDoc): Promise<{ stored: LabInboundMessageDoc } | { duplicate: LabInboundMessageDoc }> {
    try {
      await this.messages.insertOne(this.sealed.seal(doc._id, doc));
      return { stored: doc };
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      const existing = await this.messages.findOneAndUpdate({ content_key: doc.content_key }, { $inc: { duplicates: 1 } }, { returnDocument: 'after' });
      if (existing) return { duplicate: this.sealed.open(existing) as LabInboundMessageDoc };
      const reused = await this.messages.findOne({ control_key: doc.control_key }, { projection: { _id: 1 } });
      // The control id names another message: this one is kept under its content (its control id stays as sent).
      if (reused) return this.store({ ...doc, control_key: `${doc.control_key}\u0000${doc.content_sha256}` });
      // Gone between the insert and the read (expired): store it anew.
      return this.store(doc);
    }
  }

  async find(id: string): Promise<LabInboundMessageDoc | null> {
    const doc = await this.messages.findOne({ _id: id });
    return doc && (this.sealed.open(doc) as LabInboundMessageDoc);
  }

  /**
   * Several messages at once (an applier's batch), in no particular order; the ones gone are missing. Without the
   * bytes as received (`raw`): what is applied is the decoded text.
   */
  async findMany(ids: string[]): Promise<Omit<LabInboundMessageDoc, 'raw'>[]> {
    const docs = await this.messages.find({ _id: { $in: ids } }, { projection: { raw: 0 } }).toArray();
    return docs.map((doc) => this.sealed.open(doc) as Omit<LabInboundMessageDoc, 'raw'>);
  }

  /** Messages still `received` since before `before` (their applier's signal was lost), oldest first. */
  async receivedBefore(before: Date, limit: number): Promise<Pick<LabInboundMessageDoc, '_id' | 'account_id'>[]> {
    return this.messages
      .find({ state: 'received', received_at: { $lt: before } }, { projection: { _id: 1, account_id: 1 } })
      .sort({ received_at: 1 })
      .limit(limit)
      .toArray();
  }

  /**
   * Records what the applier made of a message, once: only from `received` (or from `in_review` when an operator
   * settles its review). A repeated apply finds it settled and changes nothing.
   */
  async settle(
    id: string,
    from: LabInboundState,
    to: Exclude<LabInboundState, 'received'>,
    outcome: { detail: string | null; appliedTo: LabInboundMessageDoc['applied_to'] },
  ): Promise<boolean> {
    return (await this.settleMany([{ id, from, to, ...outcome }])) === 1;
  }

  /** `settle` of several messages in one round trip (an applier's batch); how many were settled by it. */
  async settleMany(
    settlements: {
      id: string;
      from: LabInboundState;
      to: Exclude<LabInboundState, 'received'>;
      detail: string | null;
      appliedTo: LabInboundMessageDoc['applied_to'];
    }[],
  ): Promise<number> {
    if (!settlements.length) return 0;
    const now = new Date();
    const { matchedCount } = await this.messages.bulkWrite(
      settlements.map(({ id, from, to, detail, appliedTo }) => ({
        updateOne: {
          filter: { _id: id, state: from },
          update: { $set: { state: to, detail, applied_to: appliedTo, settled_at: to === 'in_review' ? null : now } },
        },
      })),
      { ordered: false },
    );
    return matchedCount;
  }

  /** One order's report out of a message (idempotent by id: a retried apply writes the same). */
  async saveReport(doc: LabInboundReportDoc): Promise<void> {
    await this.reports.replaceOne({ _id: doc._id }, this.sealedReports.seal(doc._id, doc), { upsert: true });
  }

  /**
   * An order's patient data is erased: its reports go, and the messages applied to it lose their bytes and text
   * (kept: ids, control id, state, what was applied, for the record). Messages still waiting in review name no order.
   */
  async eraseForOrder(orderId: string): Promise<void> {
    const erased = { $set: { raw: '', text: '', detail: 'patient data erased' } };
    // The messages whose results went to it: their report names it from before the order took them (the message
    // itself names the order only once settled, a moment after the order recorded them).
    const reports = await this.reports.find({ order_id: orderId }, { projection: { message_id: 1 } }).toArray();
    if (reports.length) await this.messages.updateMany({ _id: { $in: reports.map((r) => r.message_id) } }, erased);
    await this.messages.updateMany({ 'applied_to.order_id': orderId }, erased);
    await this.reports.deleteMany({ order_id: orderId });
  }

  async findReport(id: string): Promise<LabReport | null> {
    const doc = await this.reports.findOne({ _id: id });
    return doc ? (this.sealedReports.open(doc) as LabInboundReportDoc).report : null;
  }
}
