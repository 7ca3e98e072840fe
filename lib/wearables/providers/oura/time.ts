/**
 * Oura's times. Its documents carry the user's offset inside their ISO strings (`LocalizedDateTime`, e.g.
 * `bedtime_start: "2024-10-10T01:01:59+02:00"`, sample series `"2024-10-10T01:01:59.000+02:00"`), its heart-rate rows
 * are UTC (`"2024-12-13T12:31:21+00:00"`), and its date filters are local calendar dates (1.37 FAQ "How do I handle
 * timezone differences?": "the dates are interpreted in the user's local timezone"). The offset is read from the
 * string and applied exactly once: the instant is what the string denotes, the local form is rebuilt from it.
 */

export interface OuraTime {
  /** The instant (ms since the epoch). */
  instantMs: number;
  /** Seconds east of UTC the string carries; null when it carries none (then it is read as UTC). */
  offsetSeconds: number | null;
}

const ISO = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}(?::\d{2})?)(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$/;

export function parseOuraTime(value: unknown): OuraTime | null {
  if (typeof value !== 'string') return null;
  const m = ISO.exec(value.trim());
  if (!m) return null;
  const [, date, clock, fraction = '', zone] = m;
  const wallMs = Date.parse(`${date}T${clock.length === 5 ? `${clock}:00` : clock}${fraction}Z`);
  if (!Number.isFinite(wallMs)) return null;
  let offsetSeconds: number | null = null;
  if (zone === 'Z') offsetSeconds = 0;
  else if (zone) {
    const digits = zone.replace(':', '');
    const sign = digits.startsWith('-') ? -1 : 1;
    offsetSeconds = sign * (Number(digits.slice(1, 3)) * 3600 + Number(digits.slice(3, 5)) * 60);
  }
  return { instantMs: wallMs - (offsetSeconds ?? 0) * 1000, offsetSeconds };
}

export const utcIso = (instantMs: number) => new Date(instantMs).toISOString();

/** The instant of local midnight starting `date` at `offsetSeconds`. */
export const localMidnightMs = (date: string, offsetSeconds: number) => Date.parse(`${date}T00:00:00Z`) - offsetSeconds * 1000;

export const isDate = (value: unknown): value is string =>
  typeof value === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(value) && Number.isFinite(Date.parse(`${value}T00:00:00Z`));
