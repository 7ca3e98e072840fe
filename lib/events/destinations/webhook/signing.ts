import { randomBytes, timingSafeEqual } from 'node:crypto';
import { hmacUnder } from '../../../platform/keys';

/**
 * Standard Webhooks (v1, symmetric) signing: `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`, where the
 * key is the base64-decoded part of a `whsec_` secret. Headers are sent both as `webhook-*` and as `svix-*`, so
 * receivers written for either verify unchanged.
 */
export const SECRET_PREFIX = 'whsec_';
export const SIGNATURE_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'svix-id', 'svix-timestamp', 'svix-signature'] as const;

/** A new secret: `whsec_` + base64 of 32 random bytes (the spec allows 24–64). */
export function generateSecret(bytes = 32): string {
  return SECRET_PREFIX + randomBytes(bytes).toString('base64');
}

/** True for `whsec_` + base64 of 24–64 bytes. */
export function isValidSecret(secret: string): boolean {
  if (!secret.startsWith(SECRET_PREFIX)) return false;
  const b64 = secret.slice(SECRET_PREFIX.length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) return false;
  const len = Buffer.from(b64, 'base64').length;
  return len >= 24 && len <= 64;
}

/** Secrets decoded (each Buffer then imported once: hmacUnder), a bounded number of them. */
const decodedSecrets = new Map<string, Buffer>();
const MAX_DECODED_SECRETS = 10_000;
function secretKey(secret: string): Buffer {
  let key = decodedSecrets.get(secret);
  if (!key) {
    if (decodedSecrets.size >= MAX_DECODED_SECRETS) decodedSecrets.clear();
    key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
    decodedSecrets.set(secret, key);
  }
  return key;
}

/** One `v1,<base64>` entry. */
export function sign(secret: string, msgId: string, timestampSeconds: number, body: string): string {
  const mac = hmacUnder(secretKey(secret)).update(`${msgId}.${timestampSeconds}.${body}`).digest('base64');
  return `v1,${mac}`;
}

/** The signature headers of one attempt: one signature per active secret, space-separated. */
export function signatureHeaders(secrets: string[], msgId: string, timestampSeconds: number, body: string): Record<string, string> {
  const signature = secrets.map((s) => sign(s, msgId, timestampSeconds, body)).join(' ');
  const ts = String(timestampSeconds);
  return {
    'webhook-id': msgId,
    'webhook-timestamp': ts,
    'webhook-signature': signature,
    'svix-id': msgId,
    'svix-timestamp': ts,
    'svix-signature': signature,
  };
}

export class WebhookVerificationError extends Error {}

/**
 * For receivers written in TypeScript: verifies a delivery and returns the parsed envelope, or throws a
 * WebhookVerificationError. Accepts `webhook-*` or `svix-*` headers; any matching `v1` signature passes
 * (during a secret rotation two are sent); the timestamp must be within `toleranceSeconds` (default 5 min).
 *
 *   const event = verifyWebhookSignature({ secret: process.env.WEBHOOK_SECRET!, headers: req.headers, body: rawBody });
 */
export function verifyWebhookSignature<T = unknown>(opts: {
  secret: string;
  headers: Record<string, string | string[] | undefined> | Headers;
  body: string | Buffer;
  toleranceSeconds?: number;
  now?: Date;
}): T {
  const get = (name: string): string | undefined => {
    const h = opts.headers;
    if (typeof (h as Headers).get === 'function') return (h as Headers).get(name) ?? undefined;
    const rec = h as Record<string, string | string[] | undefined>;
    const v = rec[name] ?? rec[name.toLowerCase()] ?? Object.entries(rec).find(([k]) => k.toLowerCase() === name)?.[1];
    return Array.isArray(v) ? v[0] : v;
  };
  const id = get('webhook-id') ?? get('svix-id');
  const ts = get('webhook-timestamp') ?? get('svix-timestamp');
  const sigs = get('webhook-signature') ?? get('svix-signature');
  if (!id || !ts || !sigs) throw new WebhookVerificationError('Missing webhook-id, webhook-timestamp or webhook-signature header');
  const timestamp = Number(ts);
  if (!Number.isInteger(timestamp)) throw new WebhookVerificationError('Invalid webhook-timestamp');
  const tolerance = opts.toleranceSeconds ?? 300;
  const now = Math.floor((opts.now ?? new Date()).getTime() / 1000);
  if (Math.abs(now - timestamp) > tolerance) throw new WebhookVerificationError('Message timestamp outside the tolerance window');
  const body = typeof opts.body === 'string' ? opts.body : opts.body.toString('utf8');
  const expected = Buffer.from(sign(opts.secret, id, timestamp, body).slice(3), 'base64');
  for (const entry of sigs.split(' ')) {
    const [version, value] = entry.split(',', 2);
    if (version !== 'v1' || !value) continue;
    const given = Buffer.from(value, 'base64');
    if (given.length === expected.length && timingSafeEqual(given, expected)) return JSON.parse(body) as T;
  }
  throw new WebhookVerificationError('No matching signature');
}
