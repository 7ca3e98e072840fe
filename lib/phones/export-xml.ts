/**
 * A streaming reader of the Apple Health export's `export.xml`: the file is gigabytes, so it is read as text chunks
 * and handed on one top-level element at a time (`Record`, `Correlation`, `Workout`, `ActivitySummary` …, each with
 * its children), never held whole.
 *
 * Tolerant where Apple's files break strict parsers (phones.md §3): the inline DTD is skipped unread (iOS 16 wrote a
 * malformed one), and control characters XML forbids (a stray `\x0b` in a source name) are dropped from values. Only
 * what the export uses is read: elements and double- or single-quoted attributes; text content is ignored.
 */

/** The file is not a readable export (not the bytes of a database or worker failure: retrying changes nothing). */
export class ExportFileError extends Error {}

export interface ExportElement {
  name: string;
  attrs: Record<string, string>;
  children: ExportElement[];
}

/** A start or end tag, or an empty-element tag (`<Record … />`). */
const TAG = /<(\/?)([A-Za-z_][\w.:-]*)((?:\s+[^\s=/>]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*(\/?)>/y;
// XML 1.0 §2.2: no C0 control characters but tab, newline and carriage return.
const FORBIDDEN = /[\x00-\x08\x0b\x0c\x0e-\x1f]/g;
const ENTITY = /&(#x[0-9a-fA-F]+|#\d+|amp|lt|gt|quot|apos);/g;
const NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
/** A tag (or DTD) longer than this without its end is not a tag: the file is not what it says. */
const LONGEST_MARKUP = 4 << 20;

/** What a value may hold that is not its own text: an entity, or a control character XML forbids. */
const NEEDS_DECODING = /[&\x00-\x08\x0b\x0c\x0e-\x1f]/;

/**
 * A string of its own: a value read from the text is a slice of the chunk it came from, and a slice kept (a map key, a
 * name kept to the end) would keep that whole chunk in memory.
 */
export const detached = (value: string) => Buffer.from(value, 'utf8').toString('utf8');

/** Decoded values by their text: an export repeats a few (`&lt;&lt;HKDevice: …&gt;` on every record of a device). */
const decodedValues = new Map<string, string>();

function decodeValue(raw: string): string {
  let value = decodedValues.get(raw);
  if (value === undefined) {
    value = (
      raw.includes('&')
        ? raw.replace(ENTITY, (_, e: string) =>
            e[0] === '#' ? String.fromCodePoint(e[1] === 'x' ? Number.parseInt(e.slice(2), 16) : Number(e.slice(1))) : NAMED[e],
          )
        : raw
    ).replace(FORBIDDEN, '');
    if (decodedValues.size >= 1024) decodedValues.clear();
    decodedValues.set(detached(raw), detached(value));
  }
  return value;
}

const isSpace = (c: number) => c === 32 || c === 10 || c === 9 || c === 13;

/**
 * A tag's attributes from its source, which TAG has matched as `(\s+name\s*=\s*("…"|'…'))*`: read by index, not by
 * a second regex (the reader's hottest loop: a record has eight attributes), and values decoded only when the tag
 * holds an entity or a forbidden character, and then the same text once (a cache).
 */
function parseAttrs(source: string): Record<string, string> {
  const attrs: Record<string, string> = {};
  if (!source) return attrs;
  const decode = NEEDS_DECODING.test(source);
  for (let at = 0, eq = source.indexOf('='); eq >= 0; eq = source.indexOf('=', at)) {
    let start = at;
    while (isSpace(source.charCodeAt(start))) start++;
    let end = eq;
    while (isSpace(source.charCodeAt(end - 1))) end--;
    let open = eq + 1;
    while (isSpace(source.charCodeAt(open))) open++;
    const close = source.indexOf(source[open], open + 1);
    const raw = source.slice(open + 1, close);
    attrs[source.slice(start, end)] = decode && NEEDS_DECODING.test(raw) ? decodeValue(raw) : raw;
    at = close + 1;
  }
  return attrs;
}

/** Where markup that is not an element ends (declaration, comment, DTD, CDATA), or -1 when it has not arrived yet. */
function skipSpecial(buf: string, at: number): number {
  if (buf.startsWith('<?', at)) return endAfter(buf, '?>', at);
  if (buf.startsWith('<!--', at)) return endAfter(buf, '-->', at);
  if (buf.startsWith('<![CDATA[', at)) return endAfter(buf, ']]>', at);
  if (buf.startsWith('<!DOCTYPE', at)) {
    // The internal subset is skipped to its `]>` whatever it declares: Apple's is not always well-formed.
    const bracket = buf.indexOf('[', at);
    const close = buf.indexOf('>', at);
    if (close < 0) return -1;
    return bracket >= 0 && bracket < close ? endAfter(buf, ']>', at) : close + 1;
  }
  if (buf.length - at < 9) return -1;
  return -2;
}

function endAfter(buf: string, marker: string, at: number): number {
  const i = buf.indexOf(marker, at);
  return i < 0 ? -1 : i + marker.length;
}

/**
 * The top-level elements under the root (`HealthData`), in file order, from the file's text: those each chunk of text
 * completes, together (one step of the async iteration per chunk, not per element: it was a tenth of the reader's
 * garbage). `offset` of each chunk is not needed: a malformed file fails with the character position it broke at.
 */
export async function* exportElements(text: AsyncIterable<string>): AsyncGenerator<ExportElement[]> {
  let buf = '';
  let consumed = 0;
  const open: ExportElement[] = [];
  let depth = 0;
  const malformed = (at: number) =>
    new ExportFileError(`export.xml is not well-formed near character ${consumed + at}: ${JSON.stringify(buf.slice(at, at + 80))}`);

  function scan(final: boolean): ExportElement[] {
    const done: ExportElement[] = [];
    let pos = 0;
    for (;;) {
      const at = buf.indexOf('<', pos);
      if (at < 0) {
        pos = buf.length;
        break;
      }
      TAG.lastIndex = at;
      const m = TAG.exec(buf);
      if (!m) {
        const end = skipSpecial(buf, at);
        if (end >= 0) {
          pos = end;
          continue;
        }
        // Not all here yet (-1), or not markup the export has (-2): a tag may hold `>` in quotes, so wait for more
        // unless the file has ended or the markup is longer than any tag.
        if (final || buf.length - at > LONGEST_MARKUP) throw malformed(at);
        pos = at;
        break;
      }
      pos = TAG.lastIndex;
      const [, closing, name, attrSource, selfClosing] = m;
      if (closing) {
        depth--;
        if (depth === 1 && open.length) {
          const element = open.pop()!;
          if (!open.length) done.push(element);
        } else if (depth > 1) open.pop();
        continue;
      }
      // depth 0 is the root; its children are the top-level elements.
      if (depth === 0) {
        if (!selfClosing) depth++;
        continue;
      }
      const element: ExportElement = { name, attrs: parseAttrs(attrSource), children: [] };
      if (open.length) open[open.length - 1].children.push(element);
      if (selfClosing) {
        if (!open.length) done.push(element);
        continue;
      }
      open.push(element);
      depth++;
    }
    consumed += pos;
    buf = buf.slice(pos);
    return done;
  }

  for await (const chunk of text) {
    buf += chunk;
    const done = scan(false);
    if (done.length) yield done;
  }
  const done = scan(true);
  if (done.length) yield done;
  if (depth !== 0) throw new ExportFileError('export.xml ended inside an element: the file is cut short (upload it whole, or resume the upload).');
}

const EXPORT_DATE = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) ?([+-])(\d\d):?(\d\d)$/;
/** The usual export date, character by character: d a digit, s a sign, anything else itself. */
const USUAL_EXPORT_DATE = 'dddd-dd-dd dd:dd:dd sdddd';

function usualShape(value: string): boolean {
  if (value.length !== USUAL_EXPORT_DATE.length) return false;
  for (let i = 0; i < value.length; i++) {
    const want = USUAL_EXPORT_DATE.charCodeAt(i);
    const c = value.charCodeAt(i);
    if (want === 100 ? c < 48 || c > 57 : want === 115 ? c !== 43 && c !== 45 : c !== want) return false;
  }
  return true;
}

/** `2024-09-15 10:07:43 -0500` (the export's dates) → the ISO instant and the offset it was written with. */
export function exportDate(value: string | undefined): { iso: string; offset: number } | null {
  if (value === undefined) return null;
  // Every date of a file has the usual shape: read without the regex (each record has three dates).
  if (usualShape(value)) {
    const hours = value.slice(21, 23);
    const minutes = value.slice(23, 25);
    const offset = (value.charCodeAt(20) === 45 ? -1 : 1) * (Number(hours) * 3600 + Number(minutes) * 60);
    return { iso: `${value.slice(0, 10)}T${value.slice(11, 19)}${value[20]}${hours}:${minutes}`, offset };
  }
  const m = EXPORT_DATE.exec(value);
  if (!m) return null;
  const offset = (m[3] === '-' ? -1 : 1) * (Number(m[4]) * 3600 + Number(m[5]) * 60);
  return { iso: `${m[1]}T${m[2]}${m[3]}${m[4]}:${m[5]}`, offset };
}
