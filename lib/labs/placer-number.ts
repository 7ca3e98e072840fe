import { createHash } from 'node:crypto';

/**
 * Our placer order number (ORC-2/OBR-2, printed as the requisition's barcode): `HB` + 12 Crockford base-32
 * characters of sha256(order id). Derived, so every retry, resend and render of an order says the same number;
 * short (14 characters) so it fits ORM 2.3's 22-character EI, a specimen label and a Code 128 barcode; free of
 * I, L, O and U so a person can read it off a tube. Unique: orders store it under a unique index.
 */
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

export function placerNumberOf(orderId: string): string {
  const digest = createHash('sha256').update(`placer:${orderId}`).digest();
  let bits = 0n;
  for (let i = 0; i < 8; i += 1) bits = (bits << 8n) | BigInt(digest[i]);
  let out = '';
  for (let i = 0; i < 12; i += 1) {
    out += CROCKFORD[Number(bits & 31n)];
    bits >>= 5n;
  }
  return `HB${out}`;
}

/** Looks like one of ours (a result's OBR-2 is matched by it before the filler number is tried). */
export const isPlacerNumber = (value: string) => /^HB[0-9A-HJKMNP-TV-Z]{12}$/.test(value);
