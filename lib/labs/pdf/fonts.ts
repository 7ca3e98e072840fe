import path from 'node:path';
import * as fontkit from 'fontkit';

/**
 * The faces lab documents are set in. Names come from users in any script, so text is set in embedded Noto
 * fonts (npm packages, OFL): Noto Sans for Latin, Greek, Cyrillic and Vietnamese, Noto Sans SC for Han and kana,
 * Noto Sans KR for Hangul. A string is split into runs by the first font of its face that has each character,
 * and the runs are set on one line. pdfkit embeds only the glyphs a document uses.
 * Codes (sample ids, test codes) stay in Courier-Bold, falling back to the bold chain for anything else.
 */
type Pdf = PDFKit.PDFDocument;
type TextOptions = PDFKit.Mixins.TextOptions;
export type Face = 'regular' | 'bold' | 'mono';

interface FontRef {
  /** The name the font is registered under in each document (or a standard font's own name). */
  key: string;
  covers(codePoint: number): boolean;
  /** The font file; none for a standard font. */
  src?: string;
}

const fontFile = (pkg: string, file: string) => path.join(path.dirname(require.resolve(pkg)), '..', 'fonts', file);

function embedded(key: string, pkg: string, file: string): FontRef {
  const src = fontFile(pkg, file);
  // Opened only when a character is looked up in it: a Latin-only document never reads the CJK files.
  let font: fontkit.Font | null = null;
  return { key, src, covers: (cp) => (font ??= fontkit.openSync(src)).hasGlyphForCodePoint(cp) };
}

/** Courier-Bold is a standard font: it has the WinAnsi characters and nothing else. */
const WIN_ANSI_EXTRA = new Set([...'€‚ƒ„…†‡ˆ‰Š‹ŒŽ‘’“”•–—˜™š›œžŸ'].map((c) => c.codePointAt(0)!));
const COURIER_BOLD: FontRef = { key: 'Courier-Bold', covers: (cp) => (cp >= 0x20 && cp < 0x7f) || (cp >= 0xa0 && cp <= 0xff) || WIN_ANSI_EXTRA.has(cp) };

const REGULAR = [
  embedded('NotoSans', '@embedpdf/fonts-latin', 'NotoSans-Regular.ttf'),
  embedded('NotoSansSC', '@embedpdf/fonts-sc', 'NotoSansHans-Regular.otf'),
  embedded('NotoSansKR', '@embedpdf/fonts-kr', 'NotoSansKR-Regular.otf'),
];
const BOLD = [
  embedded('NotoSans-Bold', '@embedpdf/fonts-latin', 'NotoSans-Bold.ttf'),
  embedded('NotoSansSC-Bold', '@embedpdf/fonts-sc', 'NotoSansHans-Bold.otf'),
  embedded('NotoSansKR-Bold', '@embedpdf/fonts-kr', 'NotoSansKR-Bold.otf'),
];
const FACES: Record<Face, FontRef[]> = { regular: REGULAR, bold: BOLD, mono: [COURIER_BOLD, ...BOLD] };

/** Makes the faces' fonts known to a new document (each file is read only if the document uses it). */
export function registerFonts(doc: Pdf): void {
  for (const font of [...REGULAR, ...BOLD]) doc.registerFont(font.key, font.src!);
}

export interface Run {
  font: FontRef;
  text: string;
}

const STAYS_IN_RUN = /[\p{M}\p{Z}\p{P}\p{S}]/u;

/** `text` split where the font changes: each character in the first font of the face that has it. */
export function runsOf(text: string, face: Face): Run[] {
  const chain = FACES[face];
  const runs: Run[] = [];
  // Composed form: "ễ" as one glyph rather than "e" with two stacked marks.
  for (const ch of text.normalize('NFC')) {
    const cp = ch.codePointAt(0)!;
    const last = runs[runs.length - 1];
    // Whitespace, marks and punctuation stay in the run they follow when its font has them: a combining mark
    // belongs with its letter, and the comma in "王, 小明" should not switch fonts twice.
    const stays = last && (/\s/.test(ch) || (STAYS_IN_RUN.test(ch) && last.font.covers(cp)));
    const font = stays ? last.font : (chain.find((f) => f.covers(cp)) ?? chain[0]);
    if (last && last.font === font) last.text += ch;
    else runs.push({ font, text: ch });
  }
  return runs;
}

/**
 * Every font is set with Helvetica's metrics, which the layout was drawn for: the baseline 0.718 em below the
 * top pdfkit places a line by, and lines 1.156 em apart. Fonts with other ascenders (Noto Sans 1.069,
 * Noto Sans CJK 1.16, Courier 0.629) then share one baseline on a line, and the documents keep their spacing.
 */
const ASCENT = 0.718;
const LINE_HEIGHT = 1.156;
/**
 * Without glyph composition (ccmp): Noto Sans would draw "ị" as "i" plus a combining dot, and the dot has no
 * character to map back to, so the name would not extract as it was written. NFC text needs no composing.
 * A new object each time: fontkit writes its defaults into the one it is given. (pdfkit's types know only the
 * array form, which can add features but not turn one off.)
 */
const features = () => ({ ccmp: false }) as unknown as PDFKit.Mixins.OpenTypeFeatures[];
const metrics = (doc: Pdf, size: number) => ({ baseline: -ASCENT * size, lineGap: LINE_HEIGHT * size - doc.currentLineHeight(true), features: features() });

const current = new WeakMap<Pdf, { face: Face; size: number }>();
const faceOf = (doc: Pdf) => current.get(doc) ?? { face: 'regular' as Face, size: 12 };

/** Chooses the face and size of the text drawn and measured next; returns the document for chaining. */
export function useFace(doc: Pdf, face: Face, size: number): Pdf {
  current.set(doc, { face, size });
  return doc.font(FACES[face][0].key, size);
}

/** Draws `text` in the current face like `doc.text`, font by font. */
export function write(doc: Pdf, text: string, x?: number, y?: number, options: TextOptions = {}): Pdf {
  const { face, size } = faceOf(doc);
  const runs = runsOf(text, face);
  if (runs.length <= 1) {
    doc.font(runs[0]?.font.key ?? FACES[face][0].key, size);
    const opts = { ...options, ...metrics(doc, size) };
    return x === undefined ? doc.text(text, opts) : doc.text(text, x, y, opts);
  }
  // pdfkit chains fonts on a line with `continued`, left aligned only: a single line that is centred or set
  // right is placed by its measured width instead. A chain loses line breaks, so each line is a chain of its own.
  const { align, ...rest } = options;
  const left = x ?? doc.x;
  const single = options.lineBreak === false;
  if (single) delete rest.width;
  text.split('\n').forEach((line, n) => {
    let lineLeft = left;
    if (single) {
      const room = (options.width ?? 0) - widthOf(doc, line, rest);
      if (align === 'center') lineLeft += Math.max(0, room / 2);
      if (align === 'right') lineLeft += Math.max(0, room);
    }
    const lineRuns = runsOf(line || ' ', face);
    lineRuns.forEach((run, i) => {
      doc.font(run.font.key, size);
      const opts = { ...rest, ...metrics(doc, size), continued: i < lineRuns.length - 1 };
      if (i === 0) doc.text(run.text, lineLeft, n === 0 ? (y ?? doc.y) : doc.y, opts);
      else doc.text(run.text, opts);
    });
  });
  return doc.font(FACES[face][0].key, size);
}

/** The width `text` takes in the current face. */
export function widthOf(doc: Pdf, text: string, options: TextOptions = {}): number {
  const { face, size } = faceOf(doc);
  const width = runsOf(text, face).reduce((sum, run) => sum + doc.font(run.font.key, size).widthOfString(run.text, { ...options, features: features() }), 0);
  doc.font(FACES[face][0].key, size);
  return width;
}

/** pdfkit's line wrapper, which `heightOf` drives run by run to count the lines mixed fonts wrap to. */
type WrappingPdf = { _text(text: string, options: TextOptions, y: undefined, more: undefined, onLine: () => void): void };

/** The height `text` takes wrapped to `options.width` in the current face, as `write` draws it. */
export function heightOf(doc: Pdf, text: string, options: TextOptions & { width: number }): number {
  const { face, size } = faceOf(doc);
  const runs = runsOf(text, face);
  if (runs.length <= 1) {
    doc.font(runs[0]?.font.key ?? FACES[face][0].key, size);
    return doc.heightOfString(text, { ...options, ...metrics(doc, size) });
  }
  const { x, y } = doc;
  for (const line of text.split('\n')) {
    const lineRuns = runsOf(line || ' ', face);
    lineRuns.forEach((run, i) => {
      doc.font(run.font.key, size);
      const opts = { ...options, ...metrics(doc, size), height: Infinity, continued: i < lineRuns.length - 1 };
      (doc as unknown as WrappingPdf)._text(run.text, opts, undefined, undefined, () => {
        doc.y += LINE_HEIGHT * size;
      });
    });
    doc.x = x;
  }
  const height = doc.y - y;
  doc.x = x;
  doc.y = y;
  doc.font(FACES[face][0].key, size);
  return height;
}
