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
const ATTR = /([^\s=/>]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g;
// XML 1.0 §2.2: no C0 control characters but tab, newline and carriage return.
const FORBIDDEN = /[\x00-\x08\x0b\x0c\x0e-\x1f]/g;
const ENTITY = /&(#x[0-9a-fA-F]+|#\d+|amp|lt|gt|quot|apos);/g;
const NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
/** A tag (or DTD) longer than this without its end is not a tag: the file is not what it says. */
const LONGEST_MARKUP = 4 << 20;

function decodeValue(raw: string): string {
  let value = raw.includes('&')
    ? raw.replace(ENTITY, (_, e: string) =>
        e[0] === '#' ? String.fromCodePoint(e[1] === 'x' ? Number.parseInt(e.slice(2), 16) : Number(e.slice(1))) : NAMED[e],
      )
    : raw;
  if (FORBIDDEN.test(value)) value = value.replace(FORBIDDEN, '');
  FORBIDDEN.lastIndex = 0;
  return value;
}

function parseAttrs(source: string): Record<string, string> {
  const attrs: Record<string, string> = {};
  if (!source) return attrs;
  ATTR.lastIndex = 0;
  for (let m = ATTR.exec(source); m; m = ATTR.exec(source)) attrs[m[1]] = decodeValue(m[2] ?? m[3] ?? '');
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
 * The top-level elements under the root (`HealthData`), in file order, from the file's text. `offset` of each chunk
 * is not needed: a malformed file fails with the character position it broke at.
 */
export async function* exportElements(text: AsyncIterable<string>): AsyncGenerator<ExportElement> {
  let buf = '';
  let consumed = 0;
  const open: ExportElement[] = [];
  let depth = 0;
  const malformed = (at: number) =>
    new ExportFileError(`export.xml is not well-formed near character ${consumed + at}: ${JSON.stringify(buf.slice(at, at + 80))}`);

  function* scan(final: boolean): Generator<ExportElement> {
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
          const done = open.pop()!;
          if (!open.length) yield done;
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
        if (!open.length) yield element;
        continue;
      }
      open.push(element);
      depth++;
    }
    consumed += pos;
    buf = buf.slice(pos);
  }

  for await (const chunk of text) {
    buf += chunk;
    yield* scan(false);
  }
  yield* scan(true);
  if (depth !== 0) throw new ExportFileError('export.xml ended inside an element: the file is cut short (upload it whole, or resume the upload).');
}

/** `2024-09-15 10:07:43 -0500` (the export's dates) → the ISO instant and the offset it was written with. */
export function exportDate(value: string | undefined): { iso: string; offset: number } | null {
  const m = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) ?([+-])(\d\d):?(\d\d)$/.exec(value ?? '');
  if (!m) return null;
  const offset = (m[3] === '-' ? -1 : 1) * (Number(m[4]) * 3600 + Number(m[5]) * 60);
  return { iso: `${m[1]}T${m[2]}${m[3]}${m[4]}:${m[5]}`, offset };
}
