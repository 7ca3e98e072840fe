import { useFace, widthOf, write } from './fonts';
import {
  banner,
  barcode,
  barcodeWidth,
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

/** What the requisition needs of the order's lab account (lib/labs/lab-accounts.ts has the whole account). */
export interface RequisitionLabAccount {
  name: string;
  /** Our client account at the lab: printed on the requisition and on every specimen label. */
  account_number: string;
  /** Labcorp-style labs take the labels inside the requisition; the others a separate sheet of labels. */
  labels: 'in_requisition' | 'separate_sheet';
}

export interface RequisitionDocument {
  orderId: string;
  /** Our placer order number (lib/labs/placer-number.ts): the requisition's number and its barcode. */
  placerNumber: string;
  /** The order's lab account; null for the sandbox lab, which has none. */
  labAccount: RequisitionLabAccount | null;
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
const SANDBOX_ACCOUNT = 'Sandbox lab — not a real account';
const accountLine = (r: RequisitionDocument) => (r.labAccount ? `Account ${r.labAccount.account_number}` : SANDBOX_ACCOUNT);

/** The requisition a lab receives with the specimen: who, what to test, who ordered it, how it is billed. */
export function renderRequisitionPdf(r: RequisitionDocument): Promise<Buffer> {
  const doc = createPdf({
    title: `Laboratory requisition ${r.placerNumber}`,
    author: r.lab.name,
    subject: `Order ${r.orderId}`,
    createdAt: r.generatedAt,
  });
  headerBand(doc, {
    labName: r.lab.name,
    labLines: [r.lab.address, `CLIA ${r.lab.clia}`],
    title: 'Laboratory Requisition',
    rightLines: [`Requisition ${r.placerNumber}`, accountLine(r), `Ordered ${formatDateTime(r.orderedAt)}`],
  });
  placerStrip(doc, r);
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
    ['Account number', r.labAccount ? r.labAccount.account_number : SANDBOX_ACCOUNT],
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
  const labelsInside = r.labAccount?.labels === 'in_requisition';
  if (labelsInside) {
    ensureSpace(doc, 24 + LABEL.height); // the title and its labels on one page
    sectionTitle(doc, 'Specimen labels');
    labelRow(doc, r, 2);
  }

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
  if (!labelsInside) labelSheet(doc, r);
  footer(doc, [`Requisition ${r.placerNumber} · order ${r.orderId}`, `${patientLine} · generated ${formatDateTime(r.generatedAt)}`]);
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

/** The placer number as a barcode (the lab scans it to find our order) beside the account it is billed to. */
function placerStrip(doc: Pdf, r: RequisitionDocument): void {
  const y = doc.y;
  const height = 74;
  doc.save().rect(PAGE.margin, y, CONTENT_WIDTH, height).lineWidth(0.8).strokeColor(COLORS.rule).stroke().restore();
  write(useFace(doc, 'regular', 7).fillColor(COLORS.muted), 'PLACER ORDER NUMBER', PAGE.margin + 10, y + 7, { lineBreak: false });
  barcode(doc, r.placerNumber, PAGE.margin + 4, y + 19, { height: 36, textSize: 10 });
  const left = PAGE.margin + 4 + barcodeWidth(r.placerNumber) + 24;
  const width = PAGE.margin + CONTENT_WIDTH - 10 - left;
  write(useFace(doc, 'regular', 7).fillColor(COLORS.muted), 'LAB ACCOUNT', left, y + 7, { lineBreak: false });
  if (r.labAccount) {
    write(useFace(doc, 'mono', 18).fillColor(COLORS.ink), fit(doc, r.labAccount.account_number, width), left, y + 20, { lineBreak: false });
    write(useFace(doc, 'regular', 8.5).fillColor(COLORS.ink), fit(doc, r.labAccount.name, width), left, y + 44, { lineBreak: false });
  } else {
    write(useFace(doc, 'bold', 11).fillColor(COLORS.abnormal), SANDBOX_ACCOUNT, left, y + 20, { width, lineBreak: false });
    write(useFace(doc, 'regular', 8.5).fillColor(COLORS.muted), 'Orders to the sandbox lab are simulated: no laboratory receives this form.', left, y + 38, {
      width,
    });
  }
  doc.fillColor(COLORS.ink);
  doc.x = PAGE.margin;
  doc.y = y + height + 12;
}

/** A specimen label: 3.5 x 1.44 in, two rows of two across the content width, cut along its dashed edge. */
const LABEL = { width: 252, height: 104, gap: 12, pad: 8 };
const LABELS_PER_SHEET = 10;

/**
 * One label for a tube or kit: two patient identifiers (name with date of birth, and the placer number as barcode
 * and text), the account and a line for the collection date, as labs require of a specimen.
 */
function specimenLabel(doc: Pdf, r: RequisitionDocument, x: number, y: number): void {
  doc.save().rect(x, y, LABEL.width, LABEL.height).dash(3, { space: 2 }).lineWidth(0.5).strokeColor(COLORS.muted).stroke().undash().restore();
  const inner = LABEL.width - 2 * LABEL.pad;
  const left = x + LABEL.pad;
  const p = r.patient;
  // A long name is set smaller before it is shortened: the more of it a label shows, the better it identifies.
  const name = joined([p.last_name, p.first_name], ', ');
  let nameSize = 9.5;
  while (nameSize > 7 && widthOf(useFace(doc, 'regular', nameSize), name) > inner) nameSize -= 0.5;
  write(doc.fillColor(COLORS.ink), fit(doc, name, inner), left, y + 6, { lineBreak: false });
  useFace(doc, 'regular', 8);
  write(doc, `DOB ${p.dob}`, left, y + 19, { lineBreak: false });
  const account = fit(doc, accountLine(r), inner - widthOf(doc, `DOB ${p.dob}`) - 12);
  write(doc, account, left, y + 19, { width: inner, align: 'right', lineBreak: false });
  const symbolWidth = barcodeWidth(r.placerNumber);
  barcode(doc, r.placerNumber, x + (LABEL.width - symbolWidth) / 2, y + 32, { height: 30, textSize: 8 });
  const lineY = y + LABEL.height - 9;
  useFace(doc, 'regular', 7.5).fillColor(COLORS.ink);
  const dateLabel = 'Collection date';
  const timeLabel = 'Time';
  write(doc, dateLabel, left, lineY - 9, { lineBreak: false });
  const dateLeft = left + widthOf(doc, dateLabel) + 4;
  const timeLeft = left + inner - 70;
  write(doc, timeLabel, timeLeft, lineY - 9, { lineBreak: false });
  doc
    .save()
    .moveTo(dateLeft, lineY)
    .lineTo(timeLeft - 8, lineY)
    .moveTo(timeLeft + widthOf(doc, timeLabel) + 4, lineY)
    .lineTo(left + inner, lineY)
    .lineWidth(0.5)
    .strokeColor(COLORS.muted)
    .stroke()
    .restore();
}

/** One or two labels side by side from the current position. */
function labelRow(doc: Pdf, r: RequisitionDocument, count: number): void {
  const y = doc.y;
  const across = CONTENT_WIDTH - LABEL.width; // the second label sits at the right edge
  for (let i = 0; i < count; i += 1) specimenLabel(doc, r, PAGE.margin + i * across, y);
  doc.x = PAGE.margin;
  doc.y = y + LABEL.height + LABEL.gap;
}

/** A page of labels after the requisition, for labs that take the labels apart from the form. */
function labelSheet(doc: Pdf, r: RequisitionDocument): void {
  doc.addPage();
  sectionTitle(doc, 'Specimen labels');
  useFace(doc, 'regular', 8.5).fillColor(COLORS.muted);
  write(doc, `Requisition ${r.placerNumber}: cut along the dashed lines and put one label on each tube or kit.`, PAGE.margin, doc.y, {
    width: CONTENT_WIDTH,
  });
  doc.y += 8;
  for (let row = 0; row < LABELS_PER_SHEET / 2; row += 1) labelRow(doc, r, 2);
}
