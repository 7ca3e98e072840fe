/** A UTC day in milliseconds (calendar arithmetic on dates involves no time zone). */
export const DAY_MS = 86_400_000;

const TWO_DIGITS = Array.from({ length: 100 }, (_, n) => String(n).padStart(2, '0'));
const THREE_DIGITS = Array.from({ length: 1000 }, (_, n) => String(n).padStart(3, '0'));
/** The last day `isoWithOffset` formatted (days since the epoch) and its `YYYY-MM-DDT`. */
let formattedDay = NaN;
let formattedDayPrefix = '';

/**
 * ISO 8601 with an explicit offset (`+00:00`), as the spec's `created_on` shows. A timeseries read formats tens
 * of thousands of instants, mostly of the same few days: the date part is kept from the last call and the time
 * of day written from tables, in about a quarter of the time `toISOString` takes. An invalid date throws as it does.
 */
export function isoWithOffset(d: Date): string {
  const ms = d.getTime();
  const day = Math.floor(ms / DAY_MS);
  if (day !== formattedDay) {
    const iso = d.toISOString();
    formattedDayPrefix = iso.slice(0, iso.indexOf('T') + 1);
    formattedDay = day;
  }
  let rest = ms - day * DAY_MS;
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  const text = `${formattedDayPrefix}${TWO_DIGITS[hours]}:${TWO_DIGITS[minutes]}:${TWO_DIGITS[seconds]}.${THREE_DIGITS[rest - seconds * 1000]}+00:00`;
  // Flattened now (charCodeAt flattens a concatenation): kept as nine pieces, a read's 43,200 timestamps would
  // take four times the memory until the response is written, and JSON.stringify would walk every piece.
  text.charCodeAt(0);
  return text;
}

/** Today's calendar date (UTC) as YYYY-MM-DD. */
export const todayUtc = (now = new Date()): string => now.toISOString().slice(0, 10);

/** One formatter per zone: making one costs far more than using it (a phone's chunk asks 10,000 times). */
const offsetFormats = new Map<string, Intl.DateTimeFormat>();
function offsetFormat(timeZone: string): Intl.DateTimeFormat {
  let format = offsetFormats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'longOffset' });
    // Zones are few (IANA's ~600); the map is bounded by them, an unknown zone throws before it is kept.
    offsetFormats.set(timeZone, format);
  }
  return format;
}

/**
 * Offsets asked before, per zone and quarter hour: every zone's offsets are whole quarter hours and change on one, so
 * a quarter hour has one offset. A phone's chunk of 10,000 samples asks for the offset of each; they share a few.
 */
const QUARTER_HOUR_MS = 15 * 60_000;
const offsetsSeen = new Map<string, Map<number, number>>();

/** The offset (seconds east of UTC) of an IANA time zone at an instant; 0 for an unknown zone. */
export function zoneOffsetSeconds(timeZone: string | null | undefined, at: Date | number): number {
  if (!timeZone) return 0;
  const quarter = Math.floor((typeof at === 'number' ? at : at.getTime()) / QUARTER_HOUR_MS);
  const seen = offsetsSeen.get(timeZone)?.get(quarter);
  if (seen !== undefined) return seen;
  try {
    const parts = offsetFormat(timeZone).formatToParts(new Date(quarter * QUARTER_HOUR_MS));
    const name = parts.find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
    const m = /GMT([+-])(\d{2}):(\d{2})/.exec(name);
    const offset = m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 3600 + Number(m[3]) * 60) : 0;
    let zone = offsetsSeen.get(timeZone);
    if (!zone) offsetsSeen.set(timeZone, (zone = new Map()));
    // Bounded: a zone's cache starts again past 100,000 quarter hours (three years).
    if (zone.size >= 100_000) zone.clear();
    zone.set(quarter, offset);
    return offset;
  } catch {
    return 0;
  }
}

/** Local dates by day number (days since the epoch), made once each: ingestion asks for one per sample. */
const dayNames = new Map<number, string>();

/** The local calendar date (YYYY-MM-DD) of an instant at a fixed offset. */
export function localDate(at: Date, offsetSeconds: number): string {
  const ms = at.getTime() + offsetSeconds * 1000;
  const day = Math.floor(ms / DAY_MS);
  let name = dayNames.get(day);
  if (name === undefined) {
    name = new Date(ms).toISOString().slice(0, 10);
    if (dayNames.size >= 100_000) dayNames.clear();
    dayNames.set(day, name);
  }
  return name;
}

/** YYYY-MM-DD plus `days` (negative: earlier). */
export const addDays = (date: string, days: number): string => new Date(Date.parse(`${date}T00:00:00Z`) + days * DAY_MS).toISOString().slice(0, 10);

/** Whole days from `a` to `b` (both YYYY-MM-DD; negative when `b` is earlier). */
export const daysBetween = (a: string, b: string): number => Math.round((Date.parse(`${b}T00:00:00Z`) - Date.parse(`${a}T00:00:00Z`)) / DAY_MS);

/** `±HH:MM` of an offset in seconds east of UTC (`+00:00` for UTC, `-04:00`, `+05:45`). */
export function offsetSuffix(offsetSeconds: number): string {
  const abs = Math.abs(offsetSeconds);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${offsetSeconds < 0 ? '-' : '+'}${pad(Math.floor(abs / 3600))}:${pad(Math.floor((abs % 3600) / 60))}`;
}

/** The instant as local wall-clock time at an offset, to the second: `YYYY-MM-DDTHH:MM:SS±HH:MM`, e.g. `2026-11-01T23:10:00+01:00`. */
export const isoLocal = (instantMs: number, offsetSeconds: number): string =>
  `${new Date(instantMs + offsetSeconds * 1000).toISOString().slice(0, 19)}${offsetSuffix(offsetSeconds)}`;

/** Every date from `start` to `end`, both included (empty when start > end). */
export function datesBetween(start: string, end: string): string[] {
  const out: string[] = [];
  for (let d = start; d <= end; d = addDays(d, 1)) out.push(d);
  return out;
}

// Known zone ids by lower case, to fix the caller's casing without swapping in ICU's legacy aliases
// (ICU resolves Europe/Kyiv to Europe/Kiev and Asia/Kolkata to Asia/Calcutta).
const ZONES_BY_LOWER_CASE = new Map(Intl.supportedValuesOf('timeZone').map((z) => [z.toLowerCase(), z]));

/** Answers of canonicalTimeZone so far (an import asks it for every sample with HKTimeZone; ICU's check is costly). */
const canonicalZones = new Map<string, string | null>();

/** The IANA id as the caller meant it (`europe/berlin` → `Europe/Berlin`), or null if not one. */
export function canonicalTimeZone(tz: string): string | null {
  const known = canonicalZones.get(tz);
  if (known !== undefined) return known;
  let canonical: string | null = null;
  if (/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(tz)) {
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: tz });
      canonical = ZONES_BY_LOWER_CASE.get(tz.toLowerCase()) ?? tz;
    } catch {
      canonical = null;
    }
  }
  // Bounded: the names a client sends are not (a few hundred zones exist).
  if (canonicalZones.size >= 4096) canonicalZones.clear();
  canonicalZones.set(tz, canonical);
  return canonical;
}

/** Two ASCII digits at `i` of `text` as a number, or -1. */
const digitsAt = (text: string, i: number) => {
  const a = text.charCodeAt(i) - 48;
  const b = text.charCodeAt(i + 1) - 48;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : -1;
};

/** Days of each month outside leap years (29 February is left to the full parsers). */
const DAYS_IN_MONTH = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  return era * 146_097 + yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear - 719_468;
}

/**
 * The instant (ms since the epoch) of a date-time in the shape clients send, `2026-01-02T03:04:05(.sss…)(Z|±hh:mm)` with
 * a real day and time, read by arithmetic; null for anything else (29 February, leap seconds, other separators, other
 * shapes), which the caller hands to a full parser. A phone's chunk has 10,000 of these: V8's parser and ajv-formats'
 * check each took a twentieth to a tenth of its upload's time. Used by parseInstant and the `date-time` format.
 */
export function usualInstantMs(text: string): number | null {
  const n = text.length;
  if (
    n < 20 ||
    text.charCodeAt(4) !== 45 ||
    text.charCodeAt(7) !== 45 ||
    text.charCodeAt(10) !== 84 ||
    text.charCodeAt(13) !== 58 ||
    text.charCodeAt(16) !== 58
  ) {
    return null;
  }
  const century = digitsAt(text, 0);
  const yearInCentury = digitsAt(text, 2);
  const month = digitsAt(text, 5);
  const day = digitsAt(text, 8);
  const hour = digitsAt(text, 11);
  const minute = digitsAt(text, 14);
  const second = digitsAt(text, 17);
  if (century < 0 || yearInCentury < 0 || month < 1 || month > 12 || day < 1 || day > DAYS_IN_MONTH[month]) return null;
  if (hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59) return null;
  let i = 19;
  let ms = 0;
  if (text.charCodeAt(i) === 46) {
    // Milliseconds: the first three digits (Date.parse drops the rest).
    const first = ++i;
    while (i < n && text.charCodeAt(i) >= 48 && text.charCodeAt(i) <= 57) {
      if (i - first < 3) ms = ms * 10 + (text.charCodeAt(i) - 48);
      i++;
    }
    if (i === first) return null;
    for (let k = i - first; k < 3; k++) ms *= 10;
  }
  let offsetMs = 0;
  if (i === n - 1 && text.charCodeAt(i) === 90) offsetMs = 0;
  else if (i === n - 6 && (text.charCodeAt(i) === 43 || text.charCodeAt(i) === 45) && text.charCodeAt(i + 3) === 58) {
    const offsetHours = digitsAt(text, i + 1);
    const offsetMinutes = digitsAt(text, i + 4);
    if (offsetHours < 0 || offsetHours > 23 || offsetMinutes < 0 || offsetMinutes > 59) return null;
    offsetMs = (offsetHours * 60 + offsetMinutes) * 60_000 * (text.charCodeAt(i) === 45 ? -1 : 1);
  } else return null;
  return daysFromCivil(century * 100 + yearInCentury, month, day) * DAY_MS + ((hour * 60 + minute) * 60 + second) * 1000 + ms - offsetMs;
}

/** `Date.parse` of an instant (ms since the epoch; NaN when it is not a date), the usual shape read fast (usualInstantMs). */
export function parseInstant(text: string): number {
  return usualInstantMs(text) ?? Date.parse(text);
}

/** The earlier of two times either of which may be absent (null when both are). */
export const earliestOf = (a: Date | null, b: Date | null): Date | null => (a && b ? (a < b ? a : b) : (a ?? b));
