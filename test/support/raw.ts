import { Binary } from 'mongodb';

/** A raw stored document as text (binary as base64), to check that no plaintext of a secret field is in it. */
export function rawText(doc: unknown): string {
  return JSON.stringify(doc, (_k, v) => (v instanceof Binary ? Buffer.from(v.buffer.subarray(0, v.position)).toString('base64') : v));
}
