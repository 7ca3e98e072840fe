import type { Collection, Db, Filter } from 'mongodb';
import type { FieldCipher } from '../platform/field-encryption';
import { EncryptedFields, type Sealed } from '../platform/database/encrypted-fields';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';
import { insertIgnoringDuplicates } from '../platform/database/bulk';

/**
 * The review inbox (`lab_result_reviews`): results a lab sent that match no order of the lab account's organisation
 * (a paper order, a changed number format, an order whose patient data was erased), kept until an operator matches
 * them to an order or rejects them; never dropped, never guessed onto an order. One per result message and reason
 * (`_id` = the message's id: a retried apply files it once). What the lab said about the patient is sealed; the
 * numbers that failed to match are plain (operators search by them).
 */
export type LabReviewStatus = 'pending' | 'matched' | 'rejected';

export interface LabResultReviewDoc {
  _id: string;
  org_id: string;
  environment: string;
  region: string;
  account_id: string;
  lab_slug: string;
  message_id: string;
  control_id: string | null;
  /** Machine-readable: `no_matching_order` (also for an erased order's, answered as unknown), `not_applicable` (the order cannot take it). */
  reason: 'no_matching_order' | 'not_applicable';
  /** For people: what did not match, or why the order could not take it. */
  detail: string;
  /** Which OBRs of the message are under review (0-based, in message order): a match applies these. */
  request_indexes: number[];
  /** OBR-2/ORC-2 and OBR-3/ORC-3 of the requests under review. */
  placer_numbers: string[];
  filler_numbers: string[];
  /** OBR-4 of each request under review (test names, as the lab wrote them). */
  services: string[];
  /** PID-3 / PID-5 / PID-7 as the lab sent them (sealed): what an operator matches by. */
  patient: { id: string; name: string; dob: string } | null;
  status: LabReviewStatus;
  matched_order_id: string | null;
  /** The team of the matched order. */
  matched_team_id: string | null;
  resolved_by: { management_key_id: string } | null;
  resolved_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const SEALED = ['patient'] as const;
type StoredReview = Sealed<LabResultReviewDoc, (typeof SEALED)[number]>;

export const LAB_REVIEW_INDEXES: Record<'lab_result_reviews', IndexSpec[]> = {
  lab_result_reviews: [{ key: { org_id: 1, _id: -1 } }, { key: { org_id: 1, status: 1, _id: -1 } }],
};
export const LAB_REVIEW_QUERY_SHAPES: Record<'lab_result_reviews', QueryShape[]> = {
  lab_result_reviews: [
    { name: 'a review by id (file once; get)', filter: ['_id'], residual: ['org_id'] },
    { name: "list: an org's reviews, newest first", filter: ['org_id', '_id'], sort: ['_id'], residual: ['environment', 'region'] },
    { name: "list: an org's reviews by status, newest first", filter: ['org_id', 'status', '_id'], sort: ['_id'], residual: ['environment', 'region'] },
    { name: 'match or reject a pending review (conditional write)', filter: ['_id'], residual: ['org_id', 'status', 'matched_order_id'] },
    { name: 'reencrypt: every review, in _id pages', filter: ['_id'], sort: ['_id'] },
  ],
};

export class LabReviewRepository {
  readonly reviews: Collection<StoredReview>;
  private readonly sealed: EncryptedFields<LabResultReviewDoc, (typeof SEALED)[number]>;

  constructor(db: Db, cipher: FieldCipher) {
    this.reviews = db.collection('lab_result_reviews');
    this.sealed = new EncryptedFields(cipher, this.reviews.collectionName, SEALED);
  }

  async ensureIndexes(_retention?: Retention): Promise<void> {
    await createIndexes(this.reviews, LAB_REVIEW_INDEXES.lab_result_reviews);
  }

  async reencrypt(): Promise<number> {
    return this.sealed.rewriteStale(this.reviews);
  }

  private open(doc: StoredReview): LabResultReviewDoc {
    return this.sealed.open(doc) as LabResultReviewDoc;
  }

  /** Files reviews once, in one round trip (an applier's batch); the ids already filed (a retried apply) are answered. */
  async fileMany(docs: LabResultReviewDoc[]): Promise<Set<string>> {
    return insertIgnoringDuplicates(
      this.reviews,
      docs.map((doc) => this.sealed.seal(doc._id, doc)),
    );
  }

  async find(orgId: string, id: string): Promise<LabResultReviewDoc | null> {
    const doc = await this.reviews.findOne({ _id: id });
    return doc && doc.org_id === orgId ? this.open(doc) : null;
  }

  /** An org's reviews in this deployment, newest first, a page after `after` (a review id). */
  async list(
    orgId: string,
    where: { environment: string; region: string; status?: LabReviewStatus },
    page: { after?: string; size: number },
  ): Promise<LabResultReviewDoc[]> {
    const filter: Filter<StoredReview> = {
      org_id: orgId,
      ...(where.status ? { status: where.status } : {}),
      _id: { $lt: page.after ?? '~' },
      environment: where.environment,
      region: where.region,
    };
    const docs = await this.reviews.find(filter).sort({ _id: -1 }).limit(page.size).toArray();
    return docs.map((d) => this.open(d));
  }

  /**
   * Settles a pending review in one conditional write: the first of two racing operators wins. Matching again to the
   * same order (a retried request) returns the review as it is, so the caller may apply again (idempotent per order).
   */
  async resolve(
    orgId: string,
    id: string,
    resolution: { status: 'matched'; orderId: string; teamId: string } | { status: 'rejected' },
    by: { management_key_id: string },
  ): Promise<{ resolved: LabResultReviewDoc; repeated: boolean } | { conflict: LabResultReviewDoc } | null> {
    const now = new Date();
    const set =
      resolution.status === 'matched'
        ? { status: 'matched' as const, matched_order_id: resolution.orderId, matched_team_id: resolution.teamId }
        : { status: 'rejected' as const };
    const updated = await this.reviews.findOneAndUpdate(
      { _id: id, org_id: orgId, status: 'pending' },
      { $set: { ...set, resolved_by: by, resolved_at: now, updated_at: now } },
      { returnDocument: 'after' },
    );
    if (updated) return { resolved: this.open(updated), repeated: false };
    const current = await this.find(orgId, id);
    if (!current) return null;
    const same =
      resolution.status === 'matched' ? current.status === 'matched' && current.matched_order_id === resolution.orderId : current.status === 'rejected';
    return same ? { resolved: current, repeated: true } : { conflict: current };
  }

  /** Puts a matched review back to pending (the order could not take the results): only if still matched to that order. */
  async reopen(orgId: string, id: string, orderId: string): Promise<void> {
    await this.reviews.updateOne(
      { _id: id, org_id: orgId, status: 'matched', matched_order_id: orderId },
      { $set: { status: 'pending', matched_order_id: null, matched_team_id: null, resolved_by: null, resolved_at: null, updated_at: new Date() } },
    );
  }
}
