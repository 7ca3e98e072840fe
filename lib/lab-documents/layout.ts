import PDFDocument from 'pdfkit';

/**
 * The one way lab documents are drawn (pdfkit, standard fonts only, so every word stays extractable text):
 * a header band, section titles, labelled field grids, tables that break across pages, and a footer.
 */
export type Pdf = PDFKit.PDFDocument;

export const PAGE = { width: 612, height: 792, margin: 40 };
const CONTENT_WIDTH = PAGE.width - 2 * PAGE.margin;
const FOOTER_SPACE = 40;
export const COLORS = { ink: '#1a1a1a', muted: '#5f6368', rule: '#c8ccd0', band: '#0b3d5c', critical: '#b00020', abnormal: '#8a4b00', shade: '#f2f4f6' };

export function createPdf(meta: { title: string; author: string; subject: string }): Pdf {
  return new PDFDocument({
    size: 'LETTER',
    margins: { top: PAGE.margin, bottom: PAGE.margin, left: PAGE.margin, right: PAGE.margin },
    bufferPages: true, // the footer's "page x of y" is written once every page exists
    info: { Title: meta.title, Author: meta.author, Subject: meta.subject, Creator: 'Healthbridge', CreationDate: new Date() },
  });
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

/** The lab's identity on the left, the document's title and numbers on the right. */
export function headerBand(doc: Pdf, h: { labName: string; labLines: string[]; title: string; rightLines: string[] }): void {
  const top = PAGE.margin;
  const height = 74;
  doc.save().rect(PAGE.margin, top, CONTENT_WIDTH, height).fill(COLORS.band).restore();
  doc.fillColor('#ffffff').font('Helvetica-Bold').fontSize(15).text(h.labName, PAGE.margin + 12, top + 10, { width: CONTENT_WIDTH / 2 });
  doc.font('Helvetica').fontSize(8.5);
  h.labLines.forEach((line, i) => doc.text(line, PAGE.margin + 12, top + 30 + i * 11, { width: CONTENT_WIDTH / 2 }));
  doc.font('Helvetica-Bold').fontSize(13).text(h.title.toUpperCase(), PAGE.margin + CONTENT_WIDTH / 2, top + 10, { width: CONTENT_WIDTH / 2 - 12, align: 'right' });
  doc.font('Helvetica').fontSize(8.5);
  h.rightLines.forEach((line, i) => doc.text(line, PAGE.margin + CONTENT_WIDTH / 2, top + 30 + i * 11, { width: CONTENT_WIDTH / 2 - 12, align: 'right' }));
  doc.fillColor(COLORS.ink);
  doc.x = PAGE.margin;
  doc.y = top + height + 14;
}

export function sectionTitle(doc: Pdf, text: string): void {
  ensureSpace(doc, 40);
  const y = doc.y;
  doc.font('Helvetica-Bold').fontSize(9.5).fillColor(COLORS.band).text(text.toUpperCase(), PAGE.margin, y, { characterSpacing: 0.6 });
  const ruleY = doc.y + 2;
  doc.save().moveTo(PAGE.margin, ruleY).lineTo(PAGE.margin + CONTENT_WIDTH, ruleY).lineWidth(0.7).strokeColor(COLORS.band).stroke().restore();
  doc.fillColor(COLORS.ink);
  doc.y = ruleY + 6;
}

/** Label above value, `columns` per row. */
export function fieldGrid(doc: Pdf, fields: [string, string][], columns = 3): void {
  const colWidth = CONTENT_WIDTH / columns;
  for (let i = 0; i < fields.length; i += columns) {
    const row = fields.slice(i, i + columns);
    ensureSpace(doc, 30);
    const y = doc.y;
    let bottom = y;
    row.forEach(([label, value], c) => {
      const x = PAGE.margin + c * colWidth;
      doc.font('Helvetica').fontSize(7).fillColor(COLORS.muted).text(label.toUpperCase(), x, y, { width: colWidth - 10 });
      doc.font('Helvetica').fontSize(9.5).fillColor(COLORS.ink).text(value || '—', x, doc.y + 1, { width: colWidth - 10 });
      bottom = Math.max(bottom, doc.y);
    });
    doc.y = bottom + 6;
  }
  doc.x = PAGE.margin;
}

export interface Column {
  header: string;
  /** Share of the content width. */
  width: number;
  align?: 'left' | 'right' | 'center';
  font?: 'Helvetica' | 'Courier';
}
export interface Row {
  cells: string[];
  bold?: boolean;
  color?: string;
  /** A full-width line under the row (notes, markers). */
  note?: string;
}

/** A table whose header repeats on every page it spans. */
export function table(doc: Pdf, columns: Column[], rows: Row[]): void {
  const widths = columns.map((c) => c.width * CONTENT_WIDTH);
  const drawHeader = () => {
    const y = doc.y;
    doc.save().rect(PAGE.margin, y, CONTENT_WIDTH, 16).fill(COLORS.shade).restore();
    let x = PAGE.margin;
    doc.font('Helvetica-Bold').fontSize(7.5).fillColor(COLORS.muted);
    columns.forEach((c, i) => {
      doc.text(c.header.toUpperCase(), x + 4, y + 5, { width: widths[i] - 8, align: c.align ?? 'left', lineBreak: false });
      x += widths[i];
    });
    doc.fillColor(COLORS.ink);
    doc.y = y + 20;
  };
  ensureSpace(doc, 50);
  drawHeader();
  for (const row of rows) {
    doc.font(row.bold ? 'Helvetica-Bold' : 'Helvetica').fontSize(9);
    const heights = row.cells.map((text, i) => doc.heightOfString(text || ' ', { width: widths[i] - 8 }));
    const noteHeight = row.note ? doc.font('Helvetica').fontSize(7.5).heightOfString(row.note, { width: CONTENT_WIDTH - 24 }) + 2 : 0;
    const height = Math.max(...heights) + noteHeight + 6;
    if (doc.y + height > PAGE.height - PAGE.margin - FOOTER_SPACE) {
      doc.addPage();
      drawHeader();
    }
    const y = doc.y;
    let x = PAGE.margin;
    row.cells.forEach((text, i) => {
      const column = columns[i];
      const font = column.font === 'Courier' ? 'Courier' : row.bold ? 'Helvetica-Bold' : 'Helvetica';
      doc.font(font).fontSize(9).fillColor(row.color ?? COLORS.ink).text(text || '', x + 4, y, { width: widths[i] - 8, align: column.align ?? 'left' });
      x += widths[i];
    });
    if (row.note) {
      doc.font('Helvetica').fontSize(7.5).fillColor(COLORS.muted).text(row.note, PAGE.margin + 16, y + Math.max(...heights) + 1, { width: CONTENT_WIDTH - 24 });
    }
    doc.fillColor(COLORS.ink);
    const ruleY = y + height - 3;
    doc.save().moveTo(PAGE.margin, ruleY).lineTo(PAGE.margin + CONTENT_WIDTH, ruleY).lineWidth(0.4).strokeColor(COLORS.rule).stroke().restore();
    doc.y = ruleY + 4;
  }
  doc.x = PAGE.margin;
  doc.moveDown(0.5);
}

/** A shaded box with a bold first line: banners such as the overall interpretation. */
export function banner(doc: Pdf, title: string, text: string, color: string): void {
  ensureSpace(doc, 44);
  const y = doc.y;
  const h = 18 + doc.font('Helvetica').fontSize(8.5).heightOfString(text, { width: CONTENT_WIDTH - 20 });
  doc.save().rect(PAGE.margin, y, CONTENT_WIDTH, h).fill(COLORS.shade).rect(PAGE.margin, y, 4, h).fill(color).restore();
  doc.font('Helvetica-Bold').fontSize(10).fillColor(color).text(title, PAGE.margin + 12, y + 5, { width: CONTENT_WIDTH - 20 });
  doc.font('Helvetica').fontSize(8.5).fillColor(COLORS.ink).text(text, PAGE.margin + 12, doc.y + 1, { width: CONTENT_WIDTH - 20 });
  doc.x = PAGE.margin;
  doc.y = y + h + 10;
}

export function ensureSpace(doc: Pdf, needed: number): void {
  if (doc.y + needed > PAGE.height - PAGE.margin - FOOTER_SPACE) doc.addPage();
}

/** "left text … Page x of y" on every page. */
export function footer(doc: Pdf, left: string): void {
  const range = doc.bufferedPageRange();
  for (let i = range.start; i < range.start + range.count; i++) {
    doc.switchToPage(i);
    const y = PAGE.height - PAGE.margin - 14;
    doc.save().moveTo(PAGE.margin, y - 4).lineTo(PAGE.margin + CONTENT_WIDTH, y - 4).lineWidth(0.4).strokeColor(COLORS.rule).stroke().restore();
    // Writing below the bottom margin must not add a page: lift the margin while drawing the footer.
    const bottom = doc.page.margins.bottom;
    doc.page.margins.bottom = 0;
    doc.font('Helvetica').fontSize(7).fillColor(COLORS.muted);
    doc.text(left, PAGE.margin, y, { width: CONTENT_WIDTH * 0.75, lineBreak: false });
    doc.text(`Page ${i - range.start + 1} of ${range.count}`, PAGE.margin + CONTENT_WIDTH * 0.75, y, { width: CONTENT_WIDTH * 0.25, align: 'right', lineBreak: false });
    doc.page.margins.bottom = bottom;
  }
  doc.fillColor(COLORS.ink);
}

export const formatDate = (d: Date | null) => (d ? d.toISOString().slice(0, 10) : '—');
export const formatDateTime = (d: Date | null) => (d ? `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC` : '—');
