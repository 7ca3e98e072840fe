import { COLORS, createPdf, fieldGrid, footer, formatDate, formatDateTime, headerBand, pdfBytes, sectionTitle, table, ensureSpace, PAGE } from './layout';

export interface PdfAddress {
  first_line: string;
  second_line?: string | null;
  city: string;
  state: string;
  zip: string;
  country: string;
}

export interface RequisitionDocument {
  orderId: string;
  /** Short human id, e.g. the first 8 hex characters of the order id, upper case. */
  requisitionNumber: string;
  accountNumber: string;
  sampleId: string | null;
  orderedAt: Date;
  activateBy: string | null;
  priority: boolean;
  billingType: string;
  collectionMethod: string;
  fasting: boolean;
  lab: { name: string; address: string; clia: string };
  orderingOrganisation: string;
  patient: { first_name: string; last_name: string; dob: string; gender: string; phone_number: string; email: string; address: PdfAddress };
  physician: { first_name: string; last_name: string; npi: string } | null;
  tests: { code: string; name: string; sample_type: string; markers: { code: string; name: string; loinc: string | null }[] }[];
  healthInsuranceId: string | null;
  generatedAt: Date;
}

const METHOD_NAMES: Record<string, string> = { testkit: 'At-home test kit', walk_in_test: 'Patient service center draw', at_home_phlebotomy: 'At-home phlebotomy' };
const BILLING_NAMES: Record<string, string> = {
  client_bill: 'Client bill',
  commercial_insurance: 'Commercial insurance',
  patient_bill: 'Patient bill',
  patient_bill_passthrough: 'Patient bill (passthrough)',
};
const addressLines = (a: PdfAddress) => [a.first_line, a.second_line, `${a.city}, ${a.state} ${a.zip}`.trim(), a.country].filter(Boolean).join('\n');

/** The requisition a lab receives with the specimen: who, what to test, who ordered it, how it is billed. */
export function renderRequisitionPdf(r: RequisitionDocument): Promise<Buffer> {
  const doc = createPdf({ title: `Laboratory requisition ${r.requisitionNumber}`, author: r.lab.name, subject: `Order ${r.orderId}` });
  headerBand(doc, {
    labName: r.lab.name,
    labLines: [r.lab.address, `CLIA ${r.lab.clia}`],
    title: 'Laboratory Requisition',
    rightLines: [`Requisition ${r.requisitionNumber}`, `Account ${r.accountNumber}`, `Ordered ${formatDate(r.orderedAt)}`],
  });

  // The specimen id, large: the lab matches tube or kit to this form by it.
  doc.font('Helvetica').fontSize(7).fillColor(COLORS.muted).text('SPECIMEN / SAMPLE ID', PAGE.margin, doc.y);
  doc.font('Courier-Bold').fontSize(20).fillColor(COLORS.ink).text(r.sampleId ?? 'Assigned at collection', PAGE.margin, doc.y + 1);
  doc.font('Helvetica-Bold').fontSize(10).fillColor(r.priority ? COLORS.critical : COLORS.ink).text(r.priority ? 'PRIORITY: STAT' : 'PRIORITY: ROUTINE', PAGE.margin, doc.y - 18, { align: 'right' });
  doc.fillColor(COLORS.ink);
  doc.moveDown(1.2);

  const p = r.patient;
  sectionTitle(doc, 'Patient');
  fieldGrid(doc, [
    ['Name (last, first)', `${p.last_name}, ${p.first_name}`],
    ['Date of birth', p.dob],
    ['Sex', p.gender],
    ['Phone', p.phone_number],
    ['E-mail', p.email],
    ['Address', addressLines(p.address)],
  ]);

  sectionTitle(doc, 'Ordering provider');
  fieldGrid(doc, [
    ['Physician', r.physician ? `${r.physician.first_name} ${r.physician.last_name}` : "No physician: ordered under the organisation's protocol"],
    ['NPI', r.physician?.npi ?? '—'],
    ['Ordering organisation', r.orderingOrganisation],
    ['Account number', r.accountNumber],
    ['Bill type', BILLING_NAMES[r.billingType] ?? r.billingType],
    ['Health insurance id', r.healthInsuranceId ?? '—'],
  ]);

  sectionTitle(doc, 'Specimen');
  fieldGrid(doc, [
    ['Collection method', METHOD_NAMES[r.collectionMethod] ?? r.collectionMethod],
    ['Fasting', r.fasting ? 'Required: 8-12 hours, water only' : 'Not required'],
    ['Activate by', r.activateBy ?? 'On receipt'],
  ]);

  sectionTitle(doc, 'Tests ordered');
  table(
    doc,
    [
      { header: 'Code', width: 0.18, font: 'Courier' },
      { header: 'Test', width: 0.52 },
      { header: 'Specimen', width: 0.3 },
    ],
    r.tests.map((t) => ({
      cells: [t.code, t.name, t.sample_type.replace(/_/g, ' ')],
      bold: true,
      note: t.markers.length ? t.markers.map((m) => `${m.name}${m.loinc ? ` (LOINC ${m.loinc})` : ''}`).join('  ·  ') : undefined,
    })),
  );

  ensureSpace(doc, 90);
  sectionTitle(doc, 'Attestation');
  doc.font('Helvetica').fontSize(8.5).fillColor(COLORS.ink).text(
    'I attest that the tests above are medically necessary for this patient and that the patient has consented to testing. ' +
      'Specimens received without a matching specimen id will be rejected.',
    PAGE.margin,
    doc.y,
    { width: PAGE.width - 2 * PAGE.margin },
  );
  const lineY = doc.y + 34;
  doc.save().moveTo(PAGE.margin, lineY).lineTo(PAGE.margin + 260, lineY).moveTo(PAGE.margin + 320, lineY).lineTo(PAGE.width - PAGE.margin, lineY).lineWidth(0.6).strokeColor(COLORS.ink).stroke().restore();
  doc.font('Helvetica').fontSize(7).fillColor(COLORS.muted);
  doc.text(`Physician signature${r.physician ? ` (NPI ${r.physician.npi})` : ''}`, PAGE.margin, lineY + 3);
  doc.text('Date', PAGE.margin + 320, lineY + 3);

  footer(doc, `Order ${r.orderId} · generated ${formatDateTime(r.generatedAt)}`);
  return pdfBytes(doc);
}
