import type { Collection, Filter } from 'mongodb';
import type { EncryptedFields } from '../platform/database/encrypted-fields';
import type { SecretsRepository } from '../platform/secrets-store';
import { PATIENT_NAME_INDEX_KEY, PatientNameIndex } from './blind-index';
import type { LabOrderDoc } from './model';
import type { PatientField, StoredLabOrder } from './orders-store';

/**
 * The blind index of patients' names on `lab_orders` (blind-index.ts), part of LabOrderRepository: the fields each
 * order stores beside its sealed `patient_details`, the tokens a search looks for, and the pass that (re)builds the
 * index of orders made before it or under another key.
 */

/**
 * Keyed HMACs of the name's tokens, and the fingerprint of the key that made them. Orders of earlier versions lack
 * both until the start-up pass (or `npm run reencrypt`) adds them.
 */
export interface NameIndexFields {
  patient_name_tokens?: string[];
  patient_name_index_key?: string | null;
}

const PASS_PAGE = 500;

export class PatientNameIndexStore {
  constructor(
    private readonly orders: Collection<StoredLabOrder>,
    private readonly patientData: EncryptedFields<LabOrderDoc, PatientField>,
    /** Holds the name index key: a deployment secret of its own, stored encrypted with the data key. */
    private readonly secrets: SecretsRepository,
  ) {}

  private async index(): Promise<PatientNameIndex> {
    return new PatientNameIndex(await this.secrets.key(PATIENT_NAME_INDEX_KEY));
  }

  /** The blind index of a patient's name as stored beside it (no tokens once erased). */
  async fieldsOf(teamId: string, details: LabOrderDoc['patient_details']): Promise<Required<NameIndexFields>> {
    const index = await this.index();
    const tokens = details ? index.tokensOf(teamId, [details.first_name, details.last_name]) : [];
    return { patient_name_tokens: tokens, patient_name_index_key: index.keyFingerprint };
  }

  /** What a name search looks for: the tokens of `text`, keyed as the orders' (none when it has no letters). */
  async searchTokens(teamId: string, text: string): Promise<string[]> {
    return (await this.index()).tokensOf(teamId, [text]);
  }

  /**
   * Gives every order whose name index is missing (earlier versions) or was made under another key its tokens
   * under the current key. A pass in `_id` pages; each order is rewritten in one conditional write holding its
   * `patient_details` and key as read, so a registration or an erasure meanwhile (each writes its own tokens) wins.
   * Idempotent; returns how many orders changed. Run by a start-up migration and `npm run reencrypt`.
   */
  async rebuild(): Promise<number> {
    const current = (await this.index()).keyFingerprint;
    const projection = { team_id: 1, patient_details: 1, patient_name_index_key: 1 };
    let changed = 0;
    for (let after = ''; ; ) {
      const page = await this.orders
        .find({ _id: { $gt: after } }, { projection })
        .sort({ _id: 1 })
        .limit(PASS_PAGE)
        .toArray();
      for (const doc of page) {
        if (doc.patient_name_index_key === current) continue;
        const { patient_details: details } = this.patientData.open({ _id: doc._id, patient_details: doc.patient_details ?? null });
        const asRead = { _id: doc._id, patient_details: doc.patient_details ?? null, patient_name_index_key: doc.patient_name_index_key ?? null };
        const set = await this.fieldsOf(doc.team_id, details ?? null);
        changed += (await this.orders.updateOne(asRead as Filter<StoredLabOrder>, { $set: set })).modifiedCount;
      }
      if (page.length < PASS_PAGE) return changed;
      after = page[page.length - 1]._id;
    }
  }
}
