/**
 * Strava's rate limits (developers.strava.com/docs/rate-limits): per application, an overall limit (default 200 per
 * 15 minutes and 2,000 per day) and a "non-upload" (read) limit (default 100 per 15 minutes and 1,000 per day). The
 * 15-minute windows reset at :00, :15, :30 and :45; the daily window at midnight UTC. Every response carries
 * `X-RateLimit-Limit` / `X-RateLimit-Usage` and `X-ReadRateLimit-Limit` / `X-ReadRateLimit-Usage`, each
 * "15-minute,daily" (two comma-separated integers). A 429 carries no Retry-After.
 */
import { DAY_MS } from '../../../platform/time';

const QUARTER_HOUR_MS = 15 * 60_000;

/** "15-minute,daily" → the two numbers, or null when absent or malformed. */
export function parsePair(value: string | null): [number, number] | null {
  if (!value) return null;
  const parts = value.split(',').map((p) => Number(p.trim()));
  return parts.length === 2 && parts.every((n) => Number.isFinite(n)) ? [parts[0], parts[1]] : null;
}

export const nextQuarterHour = (now: Date): Date => new Date((Math.floor(now.getTime() / QUARTER_HOUR_MS) + 1) * QUARTER_HOUR_MS);
export const nextUtcMidnight = (now: Date): Date => new Date((Math.floor(now.getTime() / DAY_MS) + 1) * DAY_MS);

/** Whether a (limit, usage) header pair says the daily allowance is spent. */
function dailySpent(headers: Headers, limitHeader: string, usageHeader: string): boolean {
  const limit = parsePair(headers.get(limitHeader));
  const usage = parsePair(headers.get(usageHeader));
  return Boolean(limit && usage && limit[1] > 0 && usage[1] >= limit[1]);
}

/**
 * When to ask again after a 429: midnight UTC when either daily allowance (overall or read) is spent (requests over
 * the short-term limit still count toward the daily one), otherwise the next quarter hour.
 */
export function stravaRateLimitResetAt(headers: Headers, now: Date): Date {
  const daily = dailySpent(headers, 'x-ratelimit-limit', 'x-ratelimit-usage') || dailySpent(headers, 'x-readratelimit-limit', 'x-readratelimit-usage');
  return daily ? nextUtcMidnight(now) : nextQuarterHour(now);
}
