/**
 * What the providers' push verifiers share: header lookup, constant-time comparison, timestamp freshness and
 * HMAC-SHA256. Each provider keeps its own signature format (what is signed, and how the digest is written) in its
 * push.ts; only the mechanics live here.
 */
import { createHmac } from 'node:crypto';
import type { PushRequest } from './contract';

export { sameText } from '../../platform/keys';

/** A push whose timestamp is further than this from our clock is refused (a replay, or a clock gone wrong). */
export const MAX_PUSH_AGE_MS = 5 * 60_000;

/** A request header by name, whatever case the sender (or a proxy) wrote it in. */
export function pushHeader(req: PushRequest, name: string): string | undefined {
  const wanted = name.toLowerCase();
  const direct = req.headers[wanted];
  if (direct !== undefined) return direct;
  const key = Object.keys(req.headers).find((k) => k.toLowerCase() === wanted);
  return key === undefined ? undefined : req.headers[key];
}

/** Whether a push sent at `sentAtMs` is within `maxMs` of `now`, either side (false for a NaN time). */
export const freshWithin = (now: Date, sentAtMs: number, maxMs: number = MAX_PUSH_AGE_MS): boolean => Math.abs(now.getTime() - sentAtMs) <= maxMs;

/** HMAC-SHA256 keyed with `secret` over `parts` in order (as over their concatenation), written in `encoding`. */
export function hmacSha256(secret: string, parts: readonly (string | Buffer)[], encoding: 'hex' | 'base64'): string {
  const mac = createHmac('sha256', secret);
  for (const part of parts) mac.update(part);
  return mac.digest(encoding);
}
