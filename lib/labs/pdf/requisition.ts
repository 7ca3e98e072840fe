import { useFace, write } from './fonts';
import {
  banner,
  capitalise,
  COLORS,
  CONTENT_WIDTH,
  createPdf,
  ensureSpace,
  fieldGrid,
  fit,
  footer,
  footerName,
  formatDateTime,
  headerBand,
  idStrip,
  PAGE,
  pdfBytes,
  sectionTitle,
  table,
  type Pdf,
} from './layout';

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

const METHOD_NAMES: Record<string, string> = {
  testkit: 'At-home test kit',
  walk_in_test: 'Patient service center draw',
  at_home_phlebotomy: 'At-home phlebotomy',
};
const BILLING_NAMES: Record<string, string> = {
  client_bill: 'Client bill',
  commercial_insurance: 'Commercial insurance',
  patient_bill: 'Patient bill',
  patient_bill_passthrough: 'Patient bill (passthrough)',
};
const ERASED = '—';
/** Parts left empty or erased are dropped rather than printed as stray commas; nothing left prints as '—'. */
const present = (s: string | null | undefined): s is string => !!s && s.trim() !== '' && s !== ERASED;
const joined = (parts: (string | null | undefined)[], separator: string) => parts.filter(present).join(separator) || ERASED;
const addressLines = (a: PdfAddress) => joined([a.first_line, a.second_line, joined([joined([a.city, a.state], ', '), a.zip], ' '), a.country], '\n');
const sampleTypeName = (t: string) => capitalise(t.replace(/_/g, ' '));

/** The requisition a lab receives with the specimen: who, what to test, who ordered it, how it is billed. */
export function renderRequisitionPdf(r: RequisitionDocument): Promise<Buffer> {
  const doc = createPdf({
    title: `Laboratory requisition ${r.requisitionNumber}`,
    author: r.lab.name,
    subject: `Order ${r.orderId}`,
    createdAt: r.generatedAt,
  });
  headerBand(doc, {
    labName: r.lab.name,
    labLines: [r.lab.address, `CLIA ${r.lab.clia}`],
    title: 'Laboratory Requisition',
    rightLines: [`Requisition ${r.requisitionNumber}`, `Account ${r.accountNumber}`, `Ordered ${formatDateTime(r.orderedAt)}`],
  });
  // The specimen id, large: the lab matches tube or kit to this form by it.
  idStrip(doc, {
    label: 'Specimen / sample id',
    id: r.sampleId,
    placeholder: 'Assigned at collection: copy it from the tube or kit label',
    badges: [
      { label: 'Fasting', value: r.fasting ? 'FASTING' : 'NON-FASTING', color: r.fasting ? COLORS.abnormal : COLORS.muted },
      { label: 'Priority', value: r.priority ? 'STAT' : 'ROUTINE', color: r.priority ? COLORS.critical : COLORS.band },
    ],
  });

  const p = r.patient;
  sectionTitle(doc, 'Patient');
  fieldGrid(doc, [
    ['Name (last, first)', joined([p.last_name, p.first_name], ', ')],
    ['Date of birth', p.dob],
    ['Sex', capitalise(p.gender)],
    ['Phone', p.phone_number],
    ['E-mail', p.email],
    ['Address', addressLines(p.address)],
  ]);

  sectionTitle(doc, 'Ordering provider and billing');
  fieldGrid(doc, [
    ['Ordering physician', r.physician ? `${r.physician.first_name} ${r.physician.last_name}` : "No physician: ordered under the organisation's protocol"],
    ['Physician NPI', r.physician?.npi ?? ERASED],
    ['Ordering organisation', r.orderingOrganisation],
    ['Account number', r.accountNumber],
    ['Bill type', BILLING_NAMES[r.billingType] ?? r.billingType],
    ['Health insurance id', r.healthInsuranceId ?? ERASED],
  ]);

  sectionTitle(doc, 'Specimen');
  const sampleTypes = [...new Set(r.tests.map((t) => sampleTypeName(t.sample_type)))];
  fieldGrid(doc, [
    ['Collection method', METHOD_NAMES[r.collectionMethod] ?? r.collectionMethod],
    ['Specimen types', sampleTypes.join(', ')],
    ['Fasting', r.fasting ? 'Required: 8-12 hours, water only' : 'Not required'],
    ['Priority', r.priority ? 'STAT' : 'Routine'],
    ['Activate by', r.activateBy ?? 'On receipt'],
    ['Sample id', r.sampleId ?? 'Assigned at collection'],
    // Filled in by hand by whoever draws the specimen.
    ['Collection date and time', null],
    ['Collector initials', null],
  ]);

  sectionTitle(doc, `Tests ordered (${r.tests.length})`);
  table(
    doc,
    [
      { header: 'Code', width: 0.14, mono: true },
      { header: 'Test / analyte', width: 0.5, nests: true },
      { header: 'Specimen', width: 0.18 },
      { header: 'LOINC', width: 0.18 },
    ],
    r.tests.flatMap((t) => [
      { cells: [t.code, t.name, sampleTypeName(t.sample_type), ''], kind: 'group' as const },
      ...t.markers.map((m) => ({ cells: ['', m.name, '', m.loinc ?? ''], kind: 'detail' as const })),
    ]),
    'Tests ordered',
  );

  attestation(doc, r);
  const patientLine = present(p.last_name) ? `Patient ${footerName(doc, `${p.last_name}, ${p.first_name}`)} · DOB ${p.dob}` : 'Patient details erased';
  footer(doc, [`Requisition ${r.requisitionNumber} · order ${r.orderId}`, `${patientLine} · generated ${formatDateTime(r.generatedAt)}`]);
  return pdfBytes(doc);
}

/** The ordering physician's statement and signature (or the organisation's, when it orders under its protocol). */
function attestation(doc: Pdf, r: RequisitionDocument): void {
  ensureSpace(doc, 120);
  sectionTitle(doc, 'Attestation');
  const signer = r.physician ? `Dr. ${r.physician.first_name} ${r.physician.last_name}` : `An authorised signatory of ${r.orderingOrganisation}`;
  banner(
    doc,
    'Medical necessity and consent',
    `${signer} attests that the tests above are medically necessary for this patient and that the patient has consented to testing. ` +
      'Specimens received without a matching specimen id, or unlabelled, will be rejected.',
    COLORS.band,
  );
  const lineY = doc.y + 26;
  const signatureWidth = CONTENT_WIDTH * 0.6;
  const dateLeft = PAGE.margin + signatureWidth + 30;
  doc
    .save()
    .moveTo(PAGE.margin, lineY)
    .lineTo(PAGE.margin + signatureWidth, lineY)
    .moveTo(dateLeft, lineY)
    .lineTo(PAGE.margin + CONTENT_WIDTH, lineY);
  doc.lineWidth(0.6).strokeColor(COLORS.ink).stroke().restore();
  useFace(doc, 'regular', 7).fillColor(COLORS.muted);
  const signatureLabel = r.physician
    ? `Ordering physician signature: ${r.physician.first_name} ${r.physician.last_name}, NPI ${r.physician.npi}`
    : `Authorised signature, ${r.orderingOrganisation}`;
  write(doc, fit(doc, signatureLabel, signatureWidth), PAGE.margin, lineY + 4, { lineBreak: false });
  write(doc, 'Date', dateLeft, lineY + 4, { lineBreak: false });
  doc.fillColor(COLORS.ink);
  doc.x = PAGE.margin;
  doc.y = lineY + 16;
}
