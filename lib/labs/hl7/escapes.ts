import iconv from 'iconv-lite';

/**
 * HL7 v2 escape sequences (v2.5.1 ch. 2.7). Field values are escaped when a message is written and unescaped when
 * one is read: @medplum/core's parser hands fields back raw. Messages we write always use the default delimiters
 * `|^~\&`; messages we read may name others in MSH-2, so reading takes the escape character as an option.
 */

const WRITE_ESCAPES: Record<string, string> = { '\\': '\\E\\', '|': '\\F\\', '^': '\\S\\', '&': '\\T\\', '~': '\\R\\' };

/**
 * A value made safe for a field, component or subcomponent: the delimiters become \F\ \S\ \T\ \R\ \E\, a line
 * break (CRLF, CR or LF) becomes \.br\ (LOI's way to carry one), and any other control character (which could
 * end a segment or an MLLP frame) is written as a hex escape \Xhh\. Tabs stay as they are.
 */
export function escapeHl7(value: string): string {
  return value.replace(/\r\n|[\r\n]|[\\|^&~]|[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, (c) => {
    if (c === '\r\n' || c === '\r' || c === '\n') return '\\.br\\';
    const escaped = WRITE_ESCAPES[c];
    if (escaped) return escaped;
    return `\\X${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}\\`;
  });
}

export interface UnescapeOptions {
  /**
   * The iconv-lite encoding the message's bytes were in (charsetOfMsh18), for hex escapes \Xhh…\: their bytes are
   * characters of that charset. Default UTF-8.
   */
  encoding?: string;
  /** MSH-2's escape character, when a sender chose another one than `\`. */
  escapeCharacter?: string;
  /** The sender's delimiters, when not the default ones (MSH-1 and MSH-2). */
  delimiters?: { field: string; component: string; repetition: string; subcomponent: string };
}

const regexpEscape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * A field value as it reads: \F\ \S\ \T\ \R\ \E\ become the delimiters, \.br\ (and \.sp\) a line break, hex
 * escapes \Xhh…\ their characters in the message's charset (adjacent ones joined, so a UTF-8 character split over
 * two sequences survives), the formatting marks \H\ \N\ and the other formatting commands (\.in\, \.ti\, \.ce\,
 * \.fi\, \.nf\, \.sk\) nothing. Charset switches (\Cxxyy\, \Mxxyyzz\) and locally defined escapes (\Z…\) are
 * dropped too: their meaning is outside what a field value can carry. A lone escape character stays as it is.
 */
export function unescapeHl7(value: string, options: UnescapeOptions = {}): string {
  const e = options.escapeCharacter ?? '\\';
  if (!value.includes(e)) return value;
  const d = options.delimiters ?? { field: '|', component: '^', repetition: '~', subcomponent: '&' };
  const encoding = options.encoding ?? 'utf8';
  const E = regexpEscape(e);
  const sequence = new RegExp(
    `${E}(F|S|T|R|E|H|N|\\.br|\\.sp[^${E}]*|\\.(?:in|ti|sk|ce|fi|nf)[^${E}]*|X[0-9A-Fa-f]*|C[0-9A-Fa-f]{4}|M[0-9A-Fa-f]{4,6}|Z[^${E}]*)${E}`,
    'g',
  );
  let out = '';
  let pendingHex: number[] = [];
  let last = 0;
  const flushHex = () => {
    if (pendingHex.length) out += iconv.decode(Buffer.from(pendingHex), encoding);
    pendingHex = [];
  };
  for (const match of value.matchAll(sequence)) {
    const text = value.slice(last, match.index);
    if (text) {
      flushHex();
      out += text;
    }
    last = match.index + match[0].length;
    const body = match[1];
    if (body.startsWith('X')) {
      const hex = body.slice(1);
      // An odd digit count is malformed: the whole sequence is kept so nothing is silently lost.
      if (hex.length % 2) {
        flushHex();
        out += match[0];
      } else for (let i = 0; i < hex.length; i += 2) pendingHex.push(Number.parseInt(hex.slice(i, i + 2), 16));
      continue;
    }
    flushHex();
    if (body === 'F') out += d.field;
    else if (body === 'S') out += d.component;
    else if (body === 'T') out += d.subcomponent;
    else if (body === 'R') out += d.repetition;
    else if (body === 'E') out += e;
    else if (body === '.br' || body.startsWith('.sp')) out += '\n';
  }
  flushHex();
  return out + value.slice(last);
}
