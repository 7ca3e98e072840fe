import { hmacUnder } from '../platform/keys';

/**
 * A keyed blind index of patients' names, so `GET /v3/orders?patient_name=` and `search_input` can find orders
 * although names are encrypted at rest. Each order stores, beside its sealed `patient_details`, the HMAC-SHA256 of
 * each normalised token of the patient's first and last name (`patient_name_tokens`); a search computes the same
 * HMACs of its own tokens and matches them with an index `{team_id, patient_name_tokens, _id}`. No name is stored in
 * plaintext.
 *
 * The key is a deployment secret of its own (`deployment_secrets`, generated once, stored encrypted with the data
 * key): rotating DATA_ENCRYPTION_KEYS re-encrypts that secret but leaves its bytes, so the index stays valid. Each
 * order records which key made its tokens (`patient_name_index_key`, a fingerprint), so a pass can rebuild those made
 * under another key (LabOrderRepository.indexPatientNames; README "Lab testing → Searching by name").
 *
 * Tokens are bound to the team (the team id is part of the HMAC input): equal names in two teams give different
 * tokens. What the index reveals, to whoever reads the database without the key: which orders of one team share a
 * name token (and so how often each token occurs in the team), and how many tokens each order's name has. Not the
 * names, nor their length, nor anything across teams; guessing a name needs the key. Whole tokens only (no
 * prefixes): prefixes would reveal which names share their first letters.
 */
export const PATIENT_NAME_INDEX_KEY = 'lab-order-patient-name-index';

/** `Ana-María O'Neil` → `['ana', 'maria', 'o', 'neil']`: NFKD, accents dropped, lower case, split at every non-letter. */
export function nameTokens(text: string): string[] {
  const plain = text.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase();
  return [...new Set(plain.split(/[^\p{L}]+/u).filter(Boolean))];
}

export class PatientNameIndex {
  /** Names the key in stored orders (not secret: an HMAC of a constant under the key). */
  readonly keyFingerprint: string;

  constructor(private readonly key: Buffer) {
    this.keyFingerprint = hmacUnder(key).update('patient-name-index:fingerprint').digest('hex').slice(0, 16);
  }

  /** The stored tokens of a patient's name: one per distinct token of the names given, sorted. */
  tokensOf(teamId: string, names: string[]): string[] {
    const tokens = new Set(names.flatMap(nameTokens).map((t) => this.token(teamId, t)));
    return [...tokens].sort();
  }

  private token(teamId: string, normalised: string): string {
    // 128 bits: collisions are out of reach, and the index entries stay short.
    return hmacUnder(this.key).update(`${teamId}\u0000${normalised}`).digest('base64url').slice(0, 22);
  }
}
