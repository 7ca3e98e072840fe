import { isUtf8 } from 'node:buffer';
import iconv from 'iconv-lite';

/**
 * HL7 table 0211 (alternate character sets, MSH-18) and the iconv-lite encodings that carry them. MLLP frames
 * bytes: a message's text is decoded by its MSH-18 (or, when that is empty, the lab's agreed charset) and encoded
 * in the lab's charset, never by a text decoder applied to a whole frame.
 *
 * The 0211 names iconv-lite cannot carry faithfully are listed with `null`: ISO IR87 / ISO IR159 (JIS X 0208 /
 * 0212) travel as ISO 2022 escape sequences, which iconv-lite does not implement; ISO IR14 (JIS X 0201) and
 * CNS 11643-1992 (EUC-TW) have no iconv-lite encoding. A message naming one is refused, not guessed at.
 */
const TABLE_0211: Record<string, string | null> = {
  ASCII: 'us-ascii',
  'ISO IR6': 'us-ascii',
  '8859/1': 'iso-8859-1',
  '8859/2': 'iso-8859-2',
  '8859/3': 'iso-8859-3',
  '8859/4': 'iso-8859-4',
  '8859/5': 'iso-8859-5',
  '8859/6': 'iso-8859-6',
  '8859/7': 'iso-8859-7',
  '8859/8': 'iso-8859-8',
  '8859/9': 'iso-8859-9',
  '8859/15': 'iso-8859-15',
  'GB 18030-2000': 'gb18030',
  'KS X 1001': 'euc-kr',
  'BIG-5': 'big5',
  // 0211 defines UNICODE as ISO/IEC 10646 without a form; like HAPI, it is read and written as UTF-8.
  UNICODE: 'utf8',
  'UNICODE UTF-8': 'utf8',
  'UNICODE UTF-16': 'utf16',
  'UNICODE UTF-32': 'utf32',
  'ISO IR14': null,
  'ISO IR87': null,
  'ISO IR159': null,
  'CNS 11643-1992': null,
};

/** The HL7 0211 names this service can send and receive (for the lab-account API's validation). */
export const SUPPORTED_HL7_CHARSETS: readonly string[] = Object.entries(TABLE_0211)
  .filter(([, encoding]) => encoding !== null)
  .map(([name]) => name);

export const DEFAULT_HL7_CHARSET = 'UNICODE UTF-8';

/** MSH-18 names a character set this service does not know or cannot carry. */
export class UnsupportedCharset extends Error {
  constructor(readonly charset: string) {
    const known = TABLE_0211[charset.trim()] === null;
    super(
      known
        ? `Character set '${charset}' (MSH-18) needs ISO 2022 code switching, which this service does not support.`
        : `Character set '${charset}' (MSH-18) is not one of HL7 table 0211's that this service supports (${SUPPORTED_HL7_CHARSETS.join(', ')}).`,
    );
  }
}

/** A character the lab's character set cannot carry (`field` names where it is). */
export class CharsetUnrepresentable extends Error {
  constructor(
    readonly field: string,
    readonly character: string,
    readonly charset: string,
  ) {
    const codePoint = `U+${character.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
    super(`${field}: '${character}' (${codePoint}) cannot be written in character set ${charset}.`);
  }
}

/**
 * The iconv-lite encoding for an MSH-18 value (its first repetition: the message's default set), else for the
 * fallback (the lab account's charset) when MSH-18 is empty. Names are matched as written in table 0211; common
 * spellings labs put there instead (UTF-8, ISO-8859-1, …) are accepted on read when iconv-lite knows them.
 */
export function charsetOfMsh18(msh18: string | null, fallback: string): string {
  const name = (msh18 ?? '').split('~')[0].trim() || fallback.trim() || DEFAULT_HL7_CHARSET;
  const encoding = TABLE_0211[name] ?? TABLE_0211[name.toUpperCase()];
  if (encoding) return encoding;
  if (encoding === undefined && iconv.encodingExists(name)) return name.toLowerCase();
  throw new UnsupportedCharset(name);
}

/** The byte order a UTF-16/32 message starts with, if it is one (its MSH is not ASCII then). */
function wideEncodingOf(bytes: Buffer): string | null {
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xfe && bytes[2] === 0 && bytes[3] === 0) return 'utf-32le';
  if (bytes.length >= 4 && bytes[0] === 0 && bytes[1] === 0 && bytes[2] === 0xfe && bytes[3] === 0xff) return 'utf-32be';
  if (bytes.length >= 2 && bytes[0] === 0xff && bytes[1] === 0xfe) return 'utf-16le';
  if (bytes.length >= 2 && bytes[0] === 0xfe && bytes[1] === 0xff) return 'utf-16be';
  if (bytes.length >= 4 && bytes[0] === 0x4d && bytes[1] === 0 && bytes[2] === 0 && bytes[3] === 0) return 'utf-32le';
  if (bytes.length >= 2 && bytes[0] === 0x4d && bytes[1] === 0) return 'utf-16le';
  if (bytes.length >= 2 && bytes[0] === 0 && bytes[1] === 0x4d) return 'utf-16be';
  return null;
}

/**
 * MSH-18 read from the raw bytes, before any decoding: in every ASCII-compatible charset the delimiters and the
 * MSH-18 names are ASCII bytes, so reading the MSH byte for byte (latin1 keeps positions) is exact.
 */
export function msh18OfBytes(bytes: Buffer): string | null {
  let start = 0;
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) start = 3; // UTF-8 byte order mark
  if (bytes.toString('latin1', start, start + 3) !== 'MSH') return null;
  let end = start;
  while (end < bytes.length && bytes[end] !== 0x0d && bytes[end] !== 0x0a) end += 1;
  const msh = bytes.toString('latin1', start, end);
  const fields = msh.split(msh[3]);
  // fields[0] = 'MSH', fields[1] = MSH-2 (MSH-1 is the separator itself): MSH-n is fields[n - 1].
  const msh18 = fields[17];
  if (msh18 === undefined) return null;
  const repetition = fields[1]?.[1] ?? '~';
  return (
    msh18
      .split(repetition)
      .map((s) => s.trim())
      .join('~') || null
  );
}

/** A message's text and the encoding it was read in (hex escapes \Xhh\ in its fields decode in that encoding). */
export function decodeHl7Message(bytes: Buffer, fallbackCharset: string): { text: string; encoding: string } {
  const wide = wideEncodingOf(bytes);
  if (wide) return { text: iconv.decode(bytes, wide), encoding: wide };
  const msh18 = msh18OfBytes(bytes);
  let encoding = charsetOfMsh18(msh18, fallbackCharset);
  // A lab that declares ASCII and sends 8-bit bytes almost always means Latin-1 (a common trap): read it so
  // rather than turning each byte into U+FFFD. Likewise a message with no MSH-18 whose bytes are not UTF-8 when
  // the account expects UTF-8: Latin-1 without MSH-18 is what such labs send. Writing stays strict (encodeHl7).
  if (encoding === 'us-ascii' && bytes.some((b) => b > 0x7f)) encoding = 'iso-8859-1';
  if (encoding === 'utf8' && msh18 === null && !isUtf8(bytes)) encoding = 'iso-8859-1';
  return { text: iconv.decode(bytes, encoding), encoding };
}

/** A message's text: MSH-18 read from the raw bytes first, else the fallback (the lab account's charset). */
export function decodeHl7(bytes: Buffer, fallbackCharset: string): string {
  return decodeHl7Message(bytes, fallbackCharset).text;
}

/** Whether iconv-lite carries `text` in `encoding` exactly (it silently writes '?' for what it cannot). */
const roundTrips = (text: string, encoding: string) => iconv.decode(iconv.encode(text, encoding), encoding) === text;

/** The first character of `text` that `encoding` cannot carry, or null. */
export function firstUnrepresentable(text: string, encoding: string): string | null {
  if (roundTrips(text, encoding)) return null;
  for (const character of text) if (!roundTrips(character, encoding)) return character;
  return null;
}

/**
 * Throws CharsetUnrepresentable (naming `field`) when the HL7 charset cannot carry every character of `value`:
 * the renderer checks each order field with it so the refusal names the order's field, not a segment.
 */
export function assertRepresentable(value: string, charset: string, field: string): void {
  const character = firstUnrepresentable(value, charsetOfMsh18(null, charset));
  if (character !== null) throw new CharsetUnrepresentable(field, character, charset);
}

/** Where in a message a text offset is, as `SEG-n` (for a refusal that no order field explains). */
function fieldAt(text: string, offset: number): string {
  const segmentStart = Math.max(text.lastIndexOf('\r', offset - 1), text.lastIndexOf('\n', offset - 1)) + 1;
  const before = text.slice(segmentStart, offset);
  const name = before.slice(0, 3);
  const separators = before.split(text[3] ?? '|').length - 1;
  return `${name}-${name === 'MSH' ? separators + 1 : separators}`;
}

/**
 * The message's bytes in the HL7 charset `charset` (a table 0211 name). A character the charset cannot carry is
 * refused with CharsetUnrepresentable (field: where in the message, e.g. `PID-5`) instead of iconv-lite's '?'.
 */
export function encodeHl7(text: string, charset: string): Buffer {
  const encoding = charsetOfMsh18(null, charset);
  const bytes = iconv.encode(text, encoding);
  if (iconv.decode(bytes, encoding) === text) return bytes;
  let offset = 0;
  for (const character of text) {
    if (!roundTrips(character, encoding)) throw new CharsetUnrepresentable(fieldAt(text, offset), character, charset);
    offset += character.length;
  }
  return bytes;
}
