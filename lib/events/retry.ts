/**
 * Pure retry arithmetic of webhook delivery (no I/O, deterministic given `random`): used by the delivery
 * activity; the schedule itself is data carried by each delivery (architecture rule 9).
 */
export interface RetryPolicy {
  /** Delay before each attempt of a pass; [0] is the first attempt (normally 0). */
  schedule_ms: number[];
  /** Least wait after a throttling answer (429, 502, 504) or a timeout. */
  throttle_floor_ms: number;
}

export interface FailedAttempt {
  /** 429 / 502 / 504 or a timeout. */
  throttled: boolean;
  /** Parsed Retry-After, if the receiver sent one. */
  retryAfterMs: number | null;
}

export const JITTER = 0.2;

/**
 * Delay before the next attempt after `attemptsMade` failed attempts of this pass, or null when the schedule
 * is exhausted. ±20% jitter; throttling raises the base to the floor; Retry-After is honoured but clamped to
 * [base, 2×base].
 */
export function nextAttemptDelay(policy: RetryPolicy, attemptsMade: number, failure: FailedAttempt, random: number): number | null {
  if (attemptsMade >= policy.schedule_ms.length) return null;
  let base = policy.schedule_ms[attemptsMade] * (1 + (random * 2 - 1) * JITTER);
  if (failure.throttled) base = Math.max(base, policy.throttle_floor_ms);
  let delay = base;
  if (failure.retryAfterMs !== null) delay = Math.min(Math.max(failure.retryAfterMs, base), 2 * base);
  return Math.max(0, Math.round(delay));
}

/** Retry-After as delta-seconds or an HTTP date; null when absent or unparseable. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | null {
  if (!value) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}

/** `filter_types` matching: empty = all; exact names or `prefix.*`. */
export function matchesFilter(filterTypes: string[], eventType: string): boolean {
  if (!filterTypes.length) return true;
  return filterTypes.some((f) => (f.endsWith('.*') ? eventType.startsWith(f.slice(0, -1)) : f === eventType));
}
