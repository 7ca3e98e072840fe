/** ISO 8601 with an explicit offset (`+00:00`), as the spec's `created_on` shows. */
export const isoWithOffset = (d: Date): string => d.toISOString().replace('Z', '+00:00');

/** Today's calendar date (UTC) as YYYY-MM-DD. */
export const todayUtc = (now = new Date()): string => now.toISOString().slice(0, 10);
