import { heightOf, useFace, widthOf, write } from './fonts';
import {
  banner,
  capitalise,
  COLORS,
  CONTENT_WIDTH,
  createPdf,
  ensureSpace,
  fieldGrid,
  footer,
  footerName,
  formatDateTime,
  headerBand,
  idStrip,
  PAGE,
  pdfBytes,
  sectionTitle,
  table,
  type Column,
  type Pdf,
  type Row,
} from './layout';

export interface ResultsDocument {
  orderId: string;
  specimenNumber: string;
  lab: { name: string; address: string; clia: string };
  orderingOrganisation: string;
  patient: { name: string; dob: string; gender: string };
  physician: { name: string; npi: string } | null;
  dateCollected: Date | null;
  dateReceived: Date | null;
  dateReported: Date;
  status: 'final' | 'partial';
  interpretation: 'normal' | 'abnormal' | 'critical';
  results: {
    name: string;
    loinc: string | null;
    result: string;
    unit: string | null;
    referenceRange: string | null;
    flag: 'normal' | 'abnormal' | 'critical';
    isAboveMax: boolean | null;
    isBelowMin: boolean | null;
    notes: string | null;
  }[];
  missingResults: { name: string; reason: string }[];
  generatedAt: Date;
}

type Result = ResultsDocument['results'][number];
/** What the caller prints for details erased at the patient's request. */
const ERASED = '—';

/** H / L for abnormal, HH / LL for critical (A / AA when the direction is unknown, e.g. coded results). */
function flagOf(r: Result): string {
  if (r.flag === 'normal') return '';
  const direction = r.isAboveMax ? 'H' : r.isBelowMin ? 'L' : 'A';
  return r.flag === 'critical' ? direction + direction : direction;
}

const BANNERS = {
  normal: { title: 'All results within reference ranges', text: 'No result is outside its reference range.', color: COLORS.normal },
  abnormal: { title: 'Abnormal results', text: 'One or more results are outside their reference range (flagged H, L or A).', color: COLORS.abnormal },
  critical: {
    title: 'CRITICAL RESULTS',
    text: 'One or more results are at a critical value (flagged HH, LL or AA) and need prompt clinical attention.',
    color: COLORS.critical,
  },
};

const COLUMNS: Column[] = [
  { header: 'Test', width: 0.31 },
  { header: 'Result', width: 0.13, align: 'right' },
  { header: 'Flag', width: 0.07, align: 'center' },
  { header: 'Units', width: 0.16 },
  { header: 'Reference range', width: 0.19 },
  { header: 'LOINC', width: 0.14 },
];
const RESULT_COLUMN = 1;

const isComment = (doc: Pdf, r: Result) =>
  r.result.includes('\n') || widthOf(useFace(doc, 'bold', 9), r.result) > COLUMNS[RESULT_COLUMN].width * CONTENT_WIDTH - 8;

/**
 * One table row per result. A result too long for its cell (a culture report, a pathologist's comment) is
 * printed as a full-width comment under the row instead of a tall, narrow column.
 */
function resultRow(doc: Pdf, r: Result): Row {
  const comment = isComment(doc, r);
  const note = [comment ? r.result : null, r.notes].filter(Boolean).join('\n');
  return {
    cells: [r.name, comment ? 'See comment' : r.result, flagOf(r), r.unit ?? '', r.referenceRange ?? '', r.loinc ?? ''],
    bold: r.flag !== 'normal',
    color: r.flag === 'critical' ? COLORS.critical : undefined,
    note: note || undefined,
  };
}

/** The overall banner names the critical results, so they are read first. */
function interpretationBanner(doc: Pdf, r: ResultsDocument): void {
  const b = BANNERS[r.interpretation];
  const critical = r.results
    .filter((x) => x.flag === 'critical')
    .map((x) => (isComment(doc, x) ? `${x.name} (${flagOf(x)}, see comment)` : `${x.name} ${x.result}${x.unit ? ` ${x.unit}` : ''} (${flagOf(x)})`));
  banner(doc, b.title, critical.length ? `${b.text} Critical: ${critical.join('; ')}.` : b.text, b.color);
}

/** The laboratory report: patient, specimen, every result with its flag and reference range. */
export function renderResultsPdf(r: ResultsDocument): Promise<Buffer> {
  const doc = createPdf({ title: `Laboratory report ${r.specimenNumber}`, author: r.lab.name, subject: `Order ${r.orderId}`, createdAt: r.generatedAt });
  headerBand(doc, {
    labName: r.lab.name,
    labLines: [r.lab.address, `CLIA ${r.lab.clia}`],
    title: 'Laboratory Report',
    rightLines: [`Specimen ${r.specimenNumber}`, `Status ${r.status.toUpperCase()}`, `Reported ${formatDateTime(r.dateReported)}`],
  });
  idStrip(doc, {
    label: 'Specimen id',
    id: r.specimenNumber,
    placeholder: '—',
    badges: [
      { label: 'Interpretation', value: r.interpretation.toUpperCase(), color: BANNERS[r.interpretation].color },
      { label: 'Report status', value: r.status.toUpperCase(), color: r.status === 'final' ? COLORS.band : COLORS.abnormal },
    ],
  });

  sectionTitle(doc, 'Patient, specimen and provider');
  fieldGrid(doc, [
    ['Patient', r.patient.name],
    ['Date of birth', r.patient.dob],
    ['Sex', capitalise(r.patient.gender)],
    ['Collected', formatDateTime(r.dateCollected)],
    ['Received', formatDateTime(r.dateReceived)],
    ['Reported', formatDateTime(r.dateReported)],
    ['Ordering physician', r.physician ? `${r.physician.name}\nNPI ${r.physician.npi}` : "No physician: ordered under the organisation's protocol"],
    ['Ordering organisation', r.orderingOrganisation],
    ['Report status', r.status === 'final' ? 'Final' : 'Partial: further results to follow'],
  ]);

  interpretationBanner(doc, r);

  sectionTitle(doc, `Results (${r.results.length})`);
  table(
    doc,
    COLUMNS,
    r.results.map((x) => resultRow(doc, x)),
    'Results',
  );

  if (r.missingResults.length) {
    sectionTitle(doc, 'Tests not resulted');
    table(
      doc,
      [
        { header: 'Test', width: 0.4 },
        { header: 'Reason', width: 0.6 },
      ],
      r.missingResults.map((m) => ({ cells: [m.name, m.reason] })),
      'Tests not resulted',
    );
  }

  // The performing lab's statement closes the report, kept whole on one page.
  const closing =
    `Performed by ${r.lab.name}, ${r.lab.address} (CLIA ${r.lab.clia}). Reference ranges are the performing laboratory's. ` +
    'Flags: H high, L low, A abnormal; HH, LL and AA are critical values.';
  useFace(doc, 'regular', 7.5);
  ensureSpace(doc, heightOf(doc, closing, { width: CONTENT_WIDTH }) + 4);
  write(doc.fillColor(COLORS.muted), closing, PAGE.margin, doc.y, { width: CONTENT_WIDTH });
  // Every page names the patient, as pages of a report get separated; an erased patient is said so, not dashed.
  const patientLine = r.patient.name === ERASED ? 'Patient details erased' : `Patient ${footerName(doc, r.patient.name)} · DOB ${r.patient.dob}`;
  footer(doc, [`Specimen ${r.specimenNumber} · order ${r.orderId}`, `${patientLine} · generated ${formatDateTime(r.generatedAt)}`]);
  return pdfBytes(doc);
}
