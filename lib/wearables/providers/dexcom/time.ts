/**
 * Dexcom's record times: `systemTime` is UTC, `displayTime` the device's wall clock, carrying an offset only when the
 * record comes from a mobile app (see mapping.ts for the sources). Query times go out as UTC without an offset.
 */

export interface DexcomTime {
  /** The wall clock the string shows, read as if it were UTC (ms). */
  wallMs: number;
  /** The offset the string carries (seconds east of UTC), or null when it carries none (receiver records). */
  offsetSeconds: number | null;
  /** The instant: wall clock minus the offset; a string without an offset is taken as UTC. */
  instantMs: number;
}

const DEXCOM_TIME = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$/;

/** Parses a Dexcom `systemTime`/`displayTime`: `2022-02-06T09:12:35`, `…+00:00`, `…-08:00` or `…Z`. */
export function parseDexcomTime(value: unknown): DexcomTime | null {
  if (typeof value !== 'string') return null;
  const m = DEXCOM_TIME.exec(value.trim());
  if (!m) return null;
  const wallMs = Date.parse(`${m[1]}${m[2] ?? ''}Z`);
  if (!Number.isFinite(wallMs)) return null;
  let offsetSeconds: number | null = null;
  if (m[3] === 'Z') offsetSeconds = 0;
  else if (m[3]) {
    const digits = m[3].replace(':', '');
    const sign = digits.startsWith('-') ? -1 : 1;
    offsetSeconds = sign * (Number(digits.slice(1, 3)) * 3600 + Number(digits.slice(3, 5)) * 60);
  }
  return { wallMs, offsetSeconds, instantMs: wallMs - (offsetSeconds ?? 0) * 1000 };
}

/**
 * A query time as Dexcom takes it: UTC, `YYYY-MM-DDThh:mm:ss`, no offset and no milliseconds (api-evangelist/dexcom
 * `components.parameters.StartDate`: "UTC, no offset"; jaredtheengineer1/dexcom-oauth-backend lib/egvs.ts: "DEXCOM
 * rejects requests with timezone or milliseconds").
 */
export function formatDexcomQueryTime(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19);
}

/** Time zones are whole quarter hours; device clocks drift by seconds to minutes. */
const QUARTER_HOUR_S = 900;
/** No zone is further than 14 h from UTC: a larger difference is a mis-set device clock, not a zone. */
const MAX_ZONE_S = 14 * 3600;

/**
 * The record's offset from UTC in seconds, applied to nothing: `timestamp` stays the UTC systemTime.
 * - displayTime with an offset (mobile apps): that offset.
 * - without (receivers): displayTime's wall clock minus systemTime, rounded to the quarter hour (drift). Equal
 *   clocks are ambiguous (a UTC user, or a receiver that does not know the local zone: validic.atlassian.net
 *   "Dexcom Time Representations"), so they give null and the user's fallback zone fills it in.
 */
export function recordOffsetSeconds(systemTime: DexcomTime, displayTime: DexcomTime | null): number | null {
  if (!displayTime) return null;
  if (displayTime.offsetSeconds !== null) return displayTime.offsetSeconds;
  const diffS = (displayTime.wallMs - systemTime.instantMs) / 1000;
  const rounded = Math.round(diffS / QUARTER_HOUR_S) * QUARTER_HOUR_S;
  if (rounded === 0 || Math.abs(rounded) > MAX_ZONE_S) return null;
  return rounded;
}
