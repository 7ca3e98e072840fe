/** ISO 8601 with an explicit offset (`+00:00`), as the spec's `created_on` shows. */
export const isoWithOffset = (d: Date): string => d.toISOString().replace('Z', '+00:00');

/** Today's calendar date (UTC) as YYYY-MM-DD. */
export const todayUtc = (now = new Date()): string => now.toISOString().slice(0, 10);

const DAY_MS = 86_400_000;

/** The offset (seconds east of UTC) of an IANA time zone at an instant; 0 for an unknown zone. */
export function zoneOffsetSeconds(timeZone: string | null | undefined, at: Date): number {
  if (!timeZone) return 0;
  try {
    const parts = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'longOffset' }).formatToParts(at);
    const name = parts.find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
    const m = /GMT([+-])(\d{2}):(\d{2})/.exec(name);
    return m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 3600 + Number(m[3]) * 60) : 0;
  } catch {
    return 0;
  }
}

/** The local calendar date (YYYY-MM-DD) of an instant at a fixed offset. */
export const localDate = (at: Date, offsetSeconds: number): string => new Date(at.getTime() + offsetSeconds * 1000).toISOString().slice(0, 10);

/** YYYY-MM-DD plus `days` (negative: earlier). */
export const addDays = (date: string, days: number): string => new Date(Date.parse(`${date}T00:00:00Z`) + days * DAY_MS).toISOString().slice(0, 10);

/** Every date from `start` to `end`, both included (empty when start > end). */
export function datesBetween(start: string, end: string): string[] {
  const out: string[] = [];
  for (let d = start; d <= end; d = addDays(d, 1)) out.push(d);
  return out;
}
