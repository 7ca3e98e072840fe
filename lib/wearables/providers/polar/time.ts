/**
 * Time helpers for Polar's mixed time formats (Polar AccessLink v3 docs, copied at newpush/coach docs/apis/polar.md):
 * - wall-clock local times WITHOUT an offset (exercise `start_time`, activity `start_time`, step and zone
 *   `timestamp`s, continuous heart-rate `sample_time`, sleep and Nightly Recharge `"HH:MM"` sample keys);
 * - ISO instants WITH an offset (sleep `sleep_start_time` / `sleep_end_time`);
 * - unix seconds (SpO2 `test_time`) and ISO 8601 durations (`duration`, `in-zone`).
 *
 * "Wall ms" below is a local wall-clock time encoded as if it were UTC; the instant is `wall - offset`.
 */

/** `YYYY-MM-DDTHH:MM[:SS[.fff]]` (no offset) as wall ms; NaN when it is not that shape. */
export function parseWall(s: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3})\d*)?)?$/.exec(s.trim());
  if (!m) return Number.NaN;
  return Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], m[6] ? +m[6] : 0, m[7] ? +m[7].padEnd(3, '0') : 0);
}

/** Whether an ISO string names an instant (ends in Z or ±HH:MM / ±HHMM) rather than a wall-clock time. */
export const hasZone = (s: string) => /(?:[zZ]|[+-]\d{2}:?\d{2})$/.test(s.trim());

/** An ISO instant with its offset: `2020-01-01T00:39:07+03:00` → the instant and +10800 s. */
export function parseZoned(s: string): { utcMs: number; offsetSec: number } {
  const t = s.trim();
  const utcMs = Date.parse(t);
  const m = /([+-])(\d{2}):?(\d{2})$/.exec(t);
  const offsetSec = m ? (m[1] === '-' ? -1 : 1) * (+m[2] * 3600 + +m[3] * 60) : 0;
  return { utcMs, offsetSec };
}

/** `YYYY-MM-DD` as wall ms of its midnight. */
export const dateWall = (date: string) => Date.parse(`${date}T00:00:00Z`);

/** The calendar date of a wall ms. */
export const wallDate = (wallMs: number) => new Date(wallMs).toISOString().slice(0, 10);

/** `HH:MM[:SS]` as milliseconds after midnight; NaN when malformed. */
export function clockMs(s: string): number {
  const m = /^(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?$/.exec(s.trim());
  if (!m || +m[1] > 23 || +m[2] > 59) return Number.NaN;
  return ((+m[1] * 60 + +m[2]) * 60 + (m[3] ? +m[3] : 0)) * 1000 + (m[4] ? +m[4].padEnd(3, '0') : 0);
}

export const isoUtc = (utcMs: number) => new Date(utcMs).toISOString();

/** ISO 8601 duration (`PT2H44M`, `PT210.026S`, `P1DT2H`) in seconds; NaN when malformed. */
export function durationSeconds(s: string | null | undefined): number {
  if (!s) return Number.NaN;
  const m = /^P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$/.exec(s.trim());
  if (!m || s.trim() === 'P' || s.trim() === 'PT') return Number.NaN;
  const [d, h, min, sec] = [m[1], m[2], m[3], m[4]].map((x) => (x ? Number(x) : 0));
  return d * 86_400 + h * 3600 + min * 60 + sec;
}

/** Seconds as an ISO 8601 duration (`PT1H2M3S`), whole seconds. */
export function isoDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600),
    m = Math.floor((s % 3600) / 60),
    r = s % 60;
  return `PT${h ? `${h}H` : ''}${m ? `${m}M` : ''}${r || (!h && !m) ? `${r}S` : ''}`;
}
