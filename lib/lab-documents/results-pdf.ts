import { banner, COLORS, createPdf, fieldGrid, footer, formatDateTime, headerBand, pdfBytes, sectionTitle, table, PAGE } from './layout';

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

/** H / L for abnormal, HH / LL for critical (A / AA when the direction is unknown, e.g. coded results). */
function flagOf(r: ResultsDocument['results'][number]): string {
  if (r.flag === 'normal') return '';
  const dir = r.isAboveMax ? 'H' : r.isBelowMin ? 'L' : 'A';
  return r.flag === 'critical' ? dir + dir : dir;
}

const BANNERS = {
  normal: { title: 'All results within reference ranges', text: 'No result is outside its reference range.', color: '#1e6b3a' },
  abnormal: { title: 'Abnormal results', text: 'One or more results are outside their reference range (flagged H or L).', color: COLORS.abnormal },
  critical: {
    title: 'CRITICAL RESULTS',
    text: 'One or more results are at a critical value (flagged HH or LL) and need prompt clinical attention.',
    color: COLORS.critical,
  },
};

/** The laboratory report: patient, specimen, every result with its flag and reference range. */
export function renderResultsPdf(r: ResultsDocument): Promise<Buffer> {
  const doc = createPdf({ title: `Laboratory report ${r.specimenNumber}`, author: r.lab.name, subject: `Order ${r.orderId}` });
  headerBand(doc, {
    labName: r.lab.name,
    labLines: [r.lab.address, `CLIA ${r.lab.clia}`],
    title: 'Laboratory Report',
    rightLines: [`Specimen ${r.specimenNumber}`, `Status ${r.status.toUpperCase()}`, `Reported ${formatDateTime(r.dateReported)}`],
  });

  sectionTitle(doc, 'Patient and specimen');
  fieldGrid(doc, [
    ['Patient', r.patient.name],
    ['Date of birth', r.patient.dob],
    ['Sex', r.patient.gender],
    ['Specimen id', r.specimenNumber],
    ['Collected', formatDateTime(r.dateCollected)],
    ['Received', formatDateTime(r.dateReceived)],
    ['Ordering physician', r.physician ? `${r.physician.name} (NPI ${r.physician.npi})` : '—'],
    ['Ordering organisation', r.orderingOrganisation],
    ['Report status', r.status === 'final' ? 'Final' : 'Partial: further results to follow'],
  ]);

  const b = BANNERS[r.interpretation];
  banner(doc, b.title, b.text, b.color);

  sectionTitle(doc, 'Results');
  table(
    doc,
    [
      { header: 'Test', width: 0.32 },
      { header: 'Result', width: 0.18, align: 'right' },
      { header: 'Flag', width: 0.07, align: 'center' },
      { header: 'Units', width: 0.13 },
      { header: 'Reference range', width: 0.16 },
      { header: 'LOINC', width: 0.14, font: 'Courier' },
    ],
    r.results.map((x) => ({
      cells: [x.name, x.result, flagOf(x), x.unit ?? '', x.referenceRange ?? '', x.loinc ?? ''],
      bold: x.flag !== 'normal',
      color: x.flag === 'critical' ? COLORS.critical : undefined,
      note: x.notes ?? undefined,
    })),
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
    );
  }

  doc.font('Helvetica').fontSize(7.5).fillColor(COLORS.muted).text(
    `Performed by ${r.lab.name}, ${r.lab.address} (CLIA ${r.lab.clia}). Reference ranges are the performing laboratory's. ` +
      'Flags: H high, L low, HH/LL critical, A abnormal.',
    PAGE.margin,
    doc.y + 4,
    { width: PAGE.width - 2 * PAGE.margin },
  );
  footer(doc, `Order ${r.orderId} · ${r.patient.name} · DOB ${r.patient.dob} · generated ${formatDateTime(r.generatedAt)}`);
  return pdfBytes(doc);
}
