import { BSON, type Collection } from 'mongodb';
import { FieldCipher, type EncryptedValue } from '../field-encryption';

/**
 * Named fields of one collection's documents, encrypted at rest one by one with the field cipher
 * (lib/platform/field-encryption.ts): each non-null value is stored as an `EncryptedValue` of its BSON encoding
 * (dates, numbers, arrays and subdocuments come back as they went in), bound to the collection, the
 * document's `_id` and the field, so a value copied into another document or field does not decrypt. `null`
 * stays `null`; every other field of the document stays a plain field. Repositories seal on write and open on
 * read, so the rest of the code sees plaintext; nothing may filter on a sealed field (the database sees only
 * ciphertext).
 */

/** A document as stored: each sealed field holds an EncryptedValue, null, or plaintext written by an earlier version. */
export type Sealed<T, F extends keyof T> = Omit<T, F> & { [K in F]: T[K] | EncryptedValue };

/** The `_id` pages of a pass over a whole collection (`reencrypt`). */
const PASS_PAGE = 500;

export class EncryptedFields<T extends { _id: string }, F extends keyof T & string> {
  constructor(
    private readonly cipher: FieldCipher,
    private readonly collection: string,
    readonly fields: readonly F[],
  ) {}

  private context(id: string, field: F): string {
    return `${this.collection}:${id}:${field}`;
  }

  /** `doc` (whole, or the fields of an update) with each sealed field it holds encrypted. */
  seal<D extends Partial<T>>(id: string, doc: D): Sealed<D, F & keyof D> {
    const out: Record<string, unknown> = { ...doc };
    for (const field of this.fields) {
      const value = doc[field];
      if (value !== undefined && value !== null) out[field] = this.cipher.encrypt(Buffer.from(BSON.serialize({ value })), this.context(id, field));
    }
    return out as Sealed<D, F & keyof D>;
  }

  /** The document with its sealed fields decrypted; a value in plaintext (earlier versions) is read as it is. */
  open<D extends Partial<Sealed<T, F>> & { _id: string }>(doc: D): Omit<D, F> & Pick<T, F & keyof D> {
    const out: Record<string, unknown> = { ...doc };
    for (const field of this.fields) {
      const value = doc[field];
      if (FieldCipher.isEncrypted(value)) out[field] = BSON.deserialize(this.cipher.decrypt(value, this.context(doc._id, field))).value;
    }
    return out as Omit<D, F> & Pick<T, F & keyof D>;
  }

  /** Whether a sealed field of `doc` is in plaintext or under a data key that is no longer current. */
  stale(doc: Partial<Sealed<T, F>>): boolean {
    return this.fields.some((field) => {
      const value = doc[field];
      if (value === undefined || value === null) return false;
      return !FieldCipher.isEncrypted(value) || this.cipher.isStale(value);
    });
  }

  /**
   * Encrypts sealed fields stored in plaintext (earlier versions) and re-encrypts those under a retired data
   * key with the current one. A pass over the whole collection in `_id` order, a page at a time, reading only
   * the sealed fields (the `_id` index serves it; nothing can filter on ciphertext). Each stale document is
   * rewritten in one conditional write whose filter holds the sealed values as they were read: if any other
   * writer changed one meanwhile (a new value, an erasure), nothing is written and the document is read again.
   * Only the sealed fields are written, and only those holding a value: a document deleted or erased meanwhile
   * stays so. Idempotent; returns how many documents changed.
   */
  async rewriteStale(collection: Collection<Sealed<T, F>>): Promise<number> {
    // Only `_id` and the sealed fields are read and written: no need for the collection's own document type.
    const raw = collection as unknown as Collection<{ _id: string; [field: string]: unknown }>;
    type Stored = Partial<Sealed<T, F>> & { _id: string };
    const projection = Object.fromEntries(this.fields.map((f) => [f, 1]));
    let changed = 0;
    for (let after = ''; ; ) {
      const page = await raw
        .find({ _id: { $gt: after } }, { projection })
        .sort({ _id: 1 })
        .limit(PASS_PAGE)
        .toArray();
      for (const listed of page) {
        for (let doc = listed as Stored | null; doc && this.stale(doc); doc = (await raw.findOne({ _id: listed._id }, { projection })) as Stored | null) {
          const _id = doc._id;
          const { _id: _omitted, ...plain } = this.open(doc) as Record<string, unknown>;
          const present = Object.fromEntries(Object.entries(plain).filter(([, v]) => v !== null && v !== undefined));
          const asRead = Object.fromEntries(this.fields.map((f) => [f, doc![f] ?? null])); // null also matches a missing field
          const { matchedCount } = await raw.updateOne({ _id, ...asRead }, { $set: this.seal(_id, present as Partial<T>) });
          if (matchedCount === 1) {
            changed++;
            break;
          }
        }
      }
      if (page.length < PASS_PAGE) return changed;
      after = page[page.length - 1]._id;
    }
  }
}
