/**
 * Time helpers for Withings records. Withings names time zones by IANA name per record (`timezone: "Europe/Paris"` on
 * activities, sleep summaries, workouts and the getmeas body; developer.withings.com api-reference activity_object,
 * sleep_summary_object, workout_object, Measure - Getmeas) and gives instants as unix epoch seconds. The offset is
 * computed once per record from its zone at its own instant; instants are never shifted, only formatted.
 */

const formatters = new Map<string, Intl.DateTimeFormat | null>();

function formatterFor(timeZone: string): Intl.DateTimeFormat | null {
  if (!formatters.has(timeZone)) {
    let f: Intl.DateTimeFormat | null = null;
    try {
      f = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'longOffset' });
    } catch {
      f = null; // not an IANA name this runtime knows
    }
    formatters.set(timeZone, f);
  }
  return formatters.get(timeZone) ?? null;
}

/** Seconds east of UTC of `timeZone` at `epochSeconds`; `fallback` when the zone is missing or unknown. */
export function offsetSecondsAt(timeZone: string | null | undefined, epochSeconds: number, fallback: number): number {
  if (!timeZone) return fallback;
  const f = formatterFor(timeZone);
  if (!f) return fallback;
  const name = f.formatToParts(new Date(epochSeconds * 1000)).find((p) => p.type === 'timeZoneName')?.value ?? '';
  if (name === 'GMT' || name === 'UTC') return 0;
  const m = /^GMT([+-])(\d{1,2})(?::(\d{2}))?$/.exec(name);
  if (!m) return fallback;
  const seconds = Number(m[2]) * 3600 + Number(m[3] ?? 0) * 60;
  return m[1] === '-' ? -seconds : seconds;
}

/** The instant as UTC ISO 8601 (`2026-11-01T05:42:00.000Z`). */
export const utcIso = (epochSeconds: number): string => new Date(epochSeconds * 1000).toISOString();

/** The local calendar date (YYYY-MM-DD) of an instant at an offset. */
export const localDate = (epochSeconds: number, offsetSeconds: number): string => new Date((epochSeconds + offsetSeconds) * 1000).toISOString().slice(0, 10);

/** The UTC calendar date of an instant. */
export const utcDate = (epochSeconds: number): string => new Date(epochSeconds * 1000).toISOString().slice(0, 10);

/** Local midnight of `ymd` at `offsetSeconds`, as epoch seconds. */
export const localMidnightEpoch = (ymd: string, offsetSeconds: number): number => Date.parse(`${ymd}T00:00:00Z`) / 1000 - offsetSeconds;

/** The deprecated `date` field of our summaries: the calendar date at 00:00 UTC. */
export const utcMidnightOf = (ymd: string): string => `${ymd}T00:00:00+00:00`;
