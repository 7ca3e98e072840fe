import { timingSafeEqual } from 'node:crypto';
import { hmacUnder } from '../platform/keys';

/**
 * Signed links to order documents (the deprecated `requisition_form_url`): anyone holding the link can
 * fetch the document until it expires, without an API key. The signature covers the path and the expiry.
 */
export const DOCUMENT_URL_KEY = 'document-url-signing';

function signature(key: Buffer, path: string, expiresAtSec: number): string {
  return hmacUnder(key).update(`${path}\n${expiresAtSec}`).digest('base64url');
}

export function signedDocumentUrl(baseUrl: string, path: string, key: Buffer, ttlSeconds: number, now = Date.now()): string {
  const expires = Math.floor(now / 1000) + ttlSeconds;
  return `${baseUrl}${path}?expires=${expires}&signature=${signature(key, path, expires)}`;
}

export type SignedUrlCheck = 'valid' | 'expired' | 'invalid';

export function checkSignedDocumentUrl(path: string, expires: number, given: string, key: Buffer, now = Date.now()): SignedUrlCheck {
  const expected = Buffer.from(signature(key, path, expires));
  const actual = Buffer.from(given);
  if (expected.length !== actual.length || !timingSafeEqual(expected, actual)) return 'invalid';
  return expires * 1000 < now ? 'expired' : 'valid';
}
