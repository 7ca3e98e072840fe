import PDFDocument from 'pdfkit';
import { code128Widths, QUIET_ZONE_MODULES } from './code128';
import { heightOf, registerFonts, useFace, widthOf, write } from './fonts';

/**
 * The one way lab documents are drawn (pdfkit; every word stays extractable text):
 * a header band, an identifier strip, section titles, labelled field grids, tables that break across pages,
 * banners and a footer with "page x of y". Text goes through ./fonts (useFace, write, widthOf, heightOf), which sets
 * each character in a font that has it.
 */
export type Pdf = PDFKit.PDFDocument;

export const PAGE = { width: 612, height: 792, margin: 40 };
export const CONTENT_WIDTH = PAGE.width - 2 * PAGE.margin;
/** Room kept at the bottom of every page for the footer. */
const FOOTER_SPACE = 44;
const CONTENT_BOTTOM = PAGE.height - PAGE.margin - FOOTER_SPACE;
export const COLORS = {
  ink: '#1a1a1a',
  muted: '#5f6368',
  rule: '#c8ccd0',
  band: '#0b3d5c',
  critical: '#b00020',
  abnormal: '#8a4b00',
  normal: '#1e6b3a',
  shade: '#f2f4f6',
};

export function createPdf(meta: { title: string; author: string; subject: string; createdAt: Date }): Pdf {
  const doc = new PDFDocument({
    size: 'LETTER',
    margins: { top: PAGE.margin, bottom: PAGE.margin, left: PAGE.margin, right: PAGE.margin },
    bufferPages: true, // the footer's "page x of y" is written once every page exists
    info: { Title: meta.title, Author: meta.author, Subject: meta.subject, Creator: 'Healthbridge', CreationDate: meta.createdAt },
  });
  registerFonts(doc);
  return doc;
}

/** Ends the document and resolves with its bytes. */
export function pdfBytes(doc: Pdf): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    doc.on('data', (c: Buffer) => chunks.push(c));
    doc.on('end', () => resolve(Buffer.concat(chunks)));
    doc.on('error', reject);
    doc.end();
  });
}

/** The lab's identity on the left, the document's title and numbers on the right; the band grows for a long address. */
export function headerBand(doc: Pdf, h: { labName: string; labLines: string[]; title: string; rightLines: string[] }): void {
  const top = PAGE.margin;
  const half = CONTENT_WIDTH / 2;
  const leftWidth = half - 12;
  // A long lab name is set smaller, then wrapped, never cut: it is the document's first identifier.
  let nameSize = 15;
  while (nameSize > 11 && widthOf(useFace(doc, 'bold', nameSize), h.labName) > leftWidth) nameSize -= 0.5;
  const nameHeight = heightOf(doc, h.labName, { width: leftWidth });
  const linesText = h.labLines.join('\n');
  const linesHeight = heightOf(useFace(doc, 'regular', 8.5), linesText, { width: leftWidth });
  const height = Math.max(74, 11 + nameHeight + 5 + linesHeight + 10);
  doc.save().rect(PAGE.margin, top, CONTENT_WIDTH, height).fill(COLORS.band).restore();
  write(useFace(doc, 'bold', nameSize).fillColor('#ffffff'), h.labName, PAGE.margin + 12, top + 11, { width: leftWidth });
  write(useFace(doc, 'regular', 8.5), linesText, PAGE.margin + 12, Math.max(top + 32, doc.y + 5), { width: leftWidth });
  write(useFace(doc, 'bold', 13), h.title.toUpperCase(), PAGE.margin + half, top + 12, { width: half - 12, align: 'right', lineBreak: false });
  useFace(doc, 'regular', 8.5);
  h.rightLines.forEach((line, i) => write(doc, line, PAGE.margin + half, top + 32 + i * 11, { width: half - 12, align: 'right', lineBreak: false }));
  doc.fillColor(COLORS.ink);
  doc.x = PAGE.margin;
  doc.y = top + height + 12;
}

/** The identifier the lab matches specimen and paper by, large and monospaced, with status badges beside it. */
export function idStrip(
  doc: Pdf,
  s: { label: string; id: string | null; placeholder: string; badges: { label: string; value: string; color: string }[] },
): void {
  const y = doc.y;
  const height = 46;
  doc.save().rect(PAGE.margin, y, CONTENT_WIDTH, height).lineWidth(0.8).strokeColor(COLORS.rule).stroke().restore();
  write(useFace(doc, 'regular', 7).fillColor(COLORS.muted), s.label.toUpperCase(), PAGE.margin + 10, y + 7, { lineBreak: false });
  if (s.id) {
    write(useFace(doc, 'mono', 22).fillColor(COLORS.ink), s.id, PAGE.margin + 10, y + 17, { lineBreak: false });
  } else {
    write(useFace(doc, 'regular', 10).fillColor(COLORS.muted), s.placeholder, PAGE.margin + 10, y + 24, { lineBreak: false });
  }
  let right = PAGE.margin + CONTENT_WIDTH - 10;
  for (const badge of [...s.badges].reverse()) {
    const labelWidth = widthOf(useFace(doc, 'regular', 7), badge.label.toUpperCase());
    const width = Math.max(widthOf(useFace(doc, 'bold', 11), badge.value), labelWidth, 40) + 16;
    const left = right - width;
    doc
      .save()
      .roundedRect(left, y + 17, width, 20, 3)
      .fill(badge.color)
      .restore();
    write(doc.fillColor('#ffffff'), badge.value, left, y + 23, { width, align: 'center', lineBreak: false });
    write(useFace(doc, 'regular', 7).fillColor(COLORS.muted), badge.label.toUpperCase(), left, y + 7, { width, align: 'center', lineBreak: false });
    right = left - 8;
  }
  doc.fillColor(COLORS.ink);
  doc.x = PAGE.margin;
  doc.y = y + height + 12;
}

export function sectionTitle(doc: Pdf, text: string): void {
  ensureSpace(doc, 48); // a title alone at the foot of a page helps nobody
  const y = doc.y;
  write(useFace(doc, 'bold', 9.5).fillColor(COLORS.band), text.toUpperCase(), PAGE.margin, y, { characterSpacing: 0.6, lineBreak: false });
  const ruleY = y + 14;
  doc
    .save()
    .moveTo(PAGE.margin, ruleY)
    .lineTo(PAGE.margin + CONTENT_WIDTH, ruleY)
    .lineWidth(0.7)
    .strokeColor(COLORS.band)
    .stroke()
    .restore();
  doc.fillColor(COLORS.ink);
  doc.x = PAGE.margin;
  doc.y = ruleY + 6;
}

/** A labelled value; `null` leaves a line to write on by hand (collection time, collector's initials). */
export type Field = [label: string, value: string | null];

/** Label above value, `columns` per row; a value may run to several lines, and a row is never split. */
export function fieldGrid(doc: Pdf, fields: Field[], columns = 3): void {
  const colWidth = CONTENT_WIDTH / columns;
  const valueWidth = colWidth - 12;
  for (let i = 0; i < fields.length; i += columns) {
    const row = fields.slice(i, i + columns);
    useFace(doc, 'regular', 9.5);
    ensureSpace(doc, 10 + Math.max(12, ...row.map(([, value]) => (value === null ? 12 : heightOf(doc, value || '—', { width: valueWidth })))));
    const y = doc.y;
    let bottom = y + 22;
    row.forEach(([label, value], c) => {
      const x = PAGE.margin + c * colWidth;
      write(useFace(doc, 'regular', 7).fillColor(COLORS.muted), label.toUpperCase(), x, y, { width: valueWidth, lineBreak: false });
      if (value === null) {
        doc
          .save()
          .moveTo(x, y + 20)
          .lineTo(x + colWidth - 16, y + 20)
          .lineWidth(0.5)
          .strokeColor(COLORS.muted)
          .stroke()
          .restore();
        return;
      }
      write(useFace(doc, 'regular', 9.5).fillColor(COLORS.ink), value || '—', x, y + 10, { width: valueWidth });
      bottom = Math.max(bottom, doc.y);
    });
    doc.y = bottom + 7;
  }
  doc.fillColor(COLORS.ink);
  doc.x = PAGE.margin;
}

export interface Column {
  header: string;
  /** Share of the content width. */
  width: number;
  align?: 'left' | 'right' | 'center';
  /** Codes read better monospaced and bold; everything else is Noto Sans. */
  mono?: boolean;
  /** Detail rows are indented in this column, under their group's name. */
  nests?: boolean;
}
export interface Row {
  cells: string[];
  /** `group` heads the `detail` rows under it (a test and its markers) and is kept on a page with the first. */
  kind?: 'plain' | 'group' | 'detail';
  bold?: boolean;
  color?: string;
  /** A full-width line under the row: notes, comments too long for their cell. */
  note?: string;
}

const CELL_PAD = 4;
const ROW_PAD = 3;
const rowFontSize = (row: Row) => (row.kind === 'detail' ? 8 : 9);
const rowFace = (row: Row, column: Column) => (column.mono ? 'mono' : row.bold || row.kind === 'group' ? 'bold' : 'regular');
const NOTE_INDENT = 14;
const NOTE_SIZE = 8;
const NOTE_WIDTH = CONTENT_WIDTH - NOTE_INDENT - CELL_PAD;
const DETAIL_INDENT = 10;
const indentOf = (row: Row, column: Column) => (row.kind === 'detail' && column.nests ? DETAIL_INDENT : 0);
const cellWidth = (row: Row, column: Column, width: number) => width - 2 * CELL_PAD - indentOf(row, column);

function rowHeight(doc: Pdf, row: Row, columns: Column[], widths: number[]): { cells: number; total: number } {
  const size = rowFontSize(row);
  const cells = Math.max(
    ...row.cells.map((text, i) => heightOf(useFace(doc, rowFace(row, columns[i]), size), text || ' ', { width: cellWidth(row, columns[i], widths[i]) })),
  );
  const note = row.note ? heightOf(useFace(doc, 'regular', NOTE_SIZE), row.note, { width: NOTE_WIDTH }) + 2 : 0;
  return { cells, total: cells + note + 2 * ROW_PAD };
}

/**
 * A table whose header row (and a "continued" caption) repeats on every page it spans. Rows move whole to the
 * next page; only a note taller than a page is split.
 */
export function table(doc: Pdf, columns: Column[], rows: Row[], continuedCaption?: string): void {
  const widths = columns.map((c) => c.width * CONTENT_WIDTH);
  const drawHeader = () => {
    const y = doc.y;
    doc.save().rect(PAGE.margin, y, CONTENT_WIDTH, 16).fill(COLORS.shade).restore();
    useFace(doc, 'bold', 7).fillColor(COLORS.muted);
    let x = PAGE.margin;
    columns.forEach((c, i) => {
      write(doc, c.header.toUpperCase(), x + CELL_PAD, y + 5, { width: widths[i] - 2 * CELL_PAD, align: c.align ?? 'left', lineBreak: false });
      x += widths[i];
    });
    doc.y = y + 18;
  };
  const newPage = () => {
    doc.addPage();
    if (continuedCaption) {
      write(useFace(doc, 'bold', 8).fillColor(COLORS.band), `${continuedCaption.toUpperCase()} (CONTINUED)`, PAGE.margin, doc.y, { lineBreak: false });
      doc.y += 14;
    }
    drawHeader();
  };

  const draw = (row: Row, detailFollows: boolean) => {
    const height = rowHeight(doc, row, columns, widths);
    drawRow(doc, row, columns, widths, height.cells, height.total, detailFollows);
  };
  const firstRowTop = PAGE.margin + (continuedCaption ? 14 : 0) + 18;

  ensureSpace(doc, 50);
  drawHeader();
  let group: Row | null = null;
  rows.forEach((row, index) => {
    if (row.kind !== 'detail') group = row.kind === 'group' ? row : null;
    const next = rows[index + 1];
    const detailFollows = next?.kind === 'detail';
    const keepWith = row.kind === 'group' && detailFollows ? rowHeight(doc, next, columns, widths).total : 0;
    let pending: Row = row;
    for (;;) {
      const height = rowHeight(doc, pending, columns, widths);
      if (doc.y + height.total + keepWith <= CONTENT_BOTTOM) break;
      const freshPage = doc.y <= firstRowTop + 1;
      if (pending.note && firstRowTop + height.total > CONTENT_BOTTOM) {
        // A note taller than a whole page is the one thing split: this page takes what fits, the rest follows.
        const [head, tail] = splitWords(doc, pending.note, NOTE_WIDTH, CONTENT_BOTTOM - doc.y - height.cells - 2 * ROW_PAD - 2);
        if (head) {
          draw({ ...pending, note: head }, false);
          pending = { ...continued(pending, columns, 'blank'), note: tail };
        } else if (freshPage) break;
      } else if (freshPage) break; // cells alone taller than a page: drawn as they are rather than looping
      newPage();
      if (row.kind === 'detail' && group) draw(continued(group, columns, 'keep'), true);
    }
    draw(pending, detailFollows);
  });
  doc.fillColor(COLORS.ink);
  doc.x = PAGE.margin;
  doc.y += 8;
}

/** The longest run of whole words of `text` that fits `maxHeight` as a note, and the rest. */
function splitWords(doc: Pdf, text: string, width: number, maxHeight: number): [string, string] {
  const words = text.split(' ');
  useFace(doc, 'regular', NOTE_SIZE);
  let fits = 0;
  let tooMany = words.length + 1;
  while (tooMany - fits > 1) {
    const mid = Math.floor((fits + tooMany) / 2);
    if (heightOf(doc, words.slice(0, mid).join(' '), { width }) <= maxHeight) fits = mid;
    else tooMany = mid;
  }
  return [words.slice(0, fits).join(' '), words.slice(fits).join(' ')];
}

/** The row again with its name marked "(continued)": a group over its details, a note carried to a new page. */
function continued(row: Row, columns: Column[], otherCells: 'keep' | 'blank'): Row {
  const nameColumn = Math.max(
    0,
    columns.findIndex((c) => c.nests),
  );
  const cells = row.cells.map((text, i) => (i === nameColumn ? `${text} (continued)` : otherCells === 'keep' ? text : ''));
  return { ...row, cells };
}

function drawRow(doc: Pdf, row: Row, columns: Column[], widths: number[], cellsHeight: number, total: number, detailFollows: boolean): void {
  const y = doc.y + ROW_PAD;
  const size = rowFontSize(row);
  const color = row.color ?? (row.kind === 'detail' ? COLORS.muted : COLORS.ink);
  let x = PAGE.margin;
  row.cells.forEach((text, i) => {
    const column = columns[i];
    write(useFace(doc, rowFace(row, column), size).fillColor(color), text || '', x + CELL_PAD + indentOf(row, column), y, {
      width: cellWidth(row, column, widths[i]),
      align: column.align ?? 'left',
    });
    x += widths[i];
  });
  if (row.note) {
    write(useFace(doc, 'regular', NOTE_SIZE).fillColor(COLORS.ink), row.note, PAGE.margin + NOTE_INDENT, y + cellsHeight + 2, { width: NOTE_WIDTH });
  }
  const ruleY = (doc.y = y - ROW_PAD + total);
  // Markers under a test read as one block: only the block gets a rule below it.
  if (!detailFollows) {
    doc
      .save()
      .moveTo(PAGE.margin, ruleY)
      .lineTo(PAGE.margin + CONTENT_WIDTH, ruleY)
      .lineWidth(0.4)
      .strokeColor(COLORS.rule)
      .stroke()
      .restore();
  }
}

/** A shaded box with a coloured edge and a bold title: the overall interpretation, the attestation. */
export function banner(doc: Pdf, title: string, text: string, color: string): void {
  const textHeight = heightOf(useFace(doc, 'regular', 8.5), text, { width: CONTENT_WIDTH - 24 });
  const height = textHeight + 26;
  ensureSpace(doc, height + 10);
  const y = doc.y;
  doc.save().rect(PAGE.margin, y, CONTENT_WIDTH, height).fill(COLORS.shade).rect(PAGE.margin, y, 4, height).fill(color).restore();
  write(useFace(doc, 'bold', 10).fillColor(color), title, PAGE.margin + 14, y + 7, { width: CONTENT_WIDTH - 24, lineBreak: false });
  write(useFace(doc, 'regular', 8.5).fillColor(COLORS.ink), text, PAGE.margin + 14, y + 20, { width: CONTENT_WIDTH - 24 });
  doc.x = PAGE.margin;
  doc.y = y + height + 12;
}

/**
 * A barcode module (the narrowest bar): 0.96 pt = 0.34 mm, above the 0.25 mm a scanner needs from print, and a
 * whole number of printer dots at 300 and 600 dpi, so every bar of one width prints equally wide.
 */
export const BARCODE_MODULE = 0.96;

/** The width a Code 128 symbol of `text` takes, its quiet zones included. */
export const barcodeWidth = (text: string, module = BARCODE_MODULE) => (code128Widths(text).reduce((sum, w) => sum + w, 0) + 2 * QUIET_ZONE_MODULES) * module;

/**
 * `text` as a Code 128 symbol whose left quiet zone starts at `x`: bars as filled rectangles (vector, sharp at any
 * print resolution), `height` tall from `y`, and the same text under them for a person to read.
 */
export function barcode(doc: Pdf, text: string, x: number, y: number, options: { height: number; textSize: number; module?: number }): void {
  const module = options.module ?? BARCODE_MODULE;
  let left = x + QUIET_ZONE_MODULES * module;
  doc.save();
  code128Widths(text).forEach((width, i) => {
    if (i % 2 === 0) doc.rect(left, y, width * module, options.height); // even elements are bars, odd ones spaces
    left += width * module;
  });
  doc.fill('#000000').restore();
  write(useFace(doc, 'mono', options.textSize).fillColor(COLORS.ink), text, x, y + options.height + 2, {
    width: barcodeWidth(text, module),
    align: 'center',
    lineBreak: false,
  });
}

export function ensureSpace(doc: Pdf, needed: number): void {
  if (doc.y + needed > CONTENT_BOTTOM) doc.addPage();
}

/** Shortens `text` with an ellipsis until it fits `width` in the current face. */
export function fit(doc: Pdf, text: string, width: number): string {
  if (widthOf(doc, text) <= width) return text;
  let cut = [...text];
  while (cut.length > 1 && widthOf(doc, `${cut.join('')}…`) > width) cut = cut.slice(0, -1);
  return `${cut.join('').trimEnd()}…`;
}

const FOOTER_SIZE = 7;

/** A name for a footer line, shortened where it is long so what follows it (the date of birth) still shows. */
export const footerName = (doc: Pdf, name: string) => fit(useFace(doc, 'regular', FOOTER_SIZE), name, CONTENT_WIDTH * 0.4);

/** Up to two lines of identification on the left of every page, "Page x of y" on the right. */
export function footer(doc: Pdf, lines: string[]): void {
  const range = doc.bufferedPageRange();
  const top = PAGE.height - PAGE.margin - 22;
  for (let i = range.start; i < range.start + range.count; i++) {
    doc.switchToPage(i);
    doc
      .save()
      .moveTo(PAGE.margin, top - 5)
      .lineTo(PAGE.margin + CONTENT_WIDTH, top - 5)
      .lineWidth(0.4)
      .strokeColor(COLORS.rule)
      .stroke()
      .restore();
    // Text below the bottom margin would make pdfkit start a page: lift the margin while drawing the footer.
    const bottom = doc.page.margins.bottom;
    doc.page.margins.bottom = 0;
    useFace(doc, 'regular', FOOTER_SIZE).fillColor(COLORS.muted);
    lines.slice(0, 2).forEach((line, n) => write(doc, fit(doc, line, CONTENT_WIDTH * 0.8), PAGE.margin, top + n * 10, { lineBreak: false }));
    useFace(doc, 'bold', 8).fillColor(COLORS.ink);
    write(doc, `Page ${i - range.start + 1} of ${range.count}`, PAGE.margin + CONTENT_WIDTH * 0.8, top, {
      width: CONTENT_WIDTH * 0.2,
      align: 'right',
      lineBreak: false,
    });
    doc.page.margins.bottom = bottom;
  }
  doc.fillColor(COLORS.ink);
}

export const formatDateTime = (d: Date | null) => (d ? `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC` : '—');
/** "female" → "Female"; placeholders such as '—' pass through. */
export const capitalise = (s: string) => (s ? s[0].toUpperCase() + s.slice(1) : s);
