import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { renderRequisitionPdf, type RequisitionDocument } from '../lib/labs/pdf/requisition';
import { placerNumberOf } from '../lib/labs/placer-number';
import { renderResultsPdf, type ResultsDocument } from '../lib/labs/pdf/results';

/**
 * Renders the lab documents with realistic sample data, for looking at:
 *   npx tsc -p tsconfig.json && node dist/scripts/render-sample-pdfs.js [out-dir]
 * Writes to .devstack/sample-pdfs/ under the current directory unless told otherwise, and, where poppler's
 * pdftoppm is installed, every page as .devstack/screenshots/pdf-<sample>-<page>.png.
 */

/** As lib/labs/documents.ts builds it from the sandbox catalogue's entry. */
const LAB = { name: 'Quest Diagnostics', address: '500 Plaza Dr, Secaucus 07094', clia: '05D0642827' };
const ORDER_ID = '5f2b9c1e-8a47-4d3b-9e61-0c7a2f4d8b13';
const SAMPLE_ID = '8391042716';

const marker = (code: string, name: string, loinc: string | null) => ({ code, name, loinc });

const requisition: RequisitionDocument = {
  orderId: ORDER_ID,
  placerNumber: placerNumberOf(ORDER_ID),
  labAccount: { name: 'Quest Diagnostics — Northwind Health Partners', account_number: '97512846', labels: 'separate_sheet' },
  sampleId: SAMPLE_ID,
  orderedAt: new Date('2025-11-20T14:32:00Z'),
  activateBy: '2025-11-24',
  priority: false,
  billingType: 'client_bill',
  collectionMethod: 'walk_in_test',
  fasting: true,
  lab: LAB,
  orderingOrganisation: 'Northwind Health Partners',
  patient: {
    first_name: 'Margaret',
    last_name: 'Okonkwo-Lindqvist',
    dob: '1968-04-17',
    gender: 'female',
    phone_number: '+1 (415) 555-0142',
    email: 'margaret.okonkwo@example.com',
    address: { first_line: '1450 Valencia Street', second_line: 'Apt 3B', city: 'San Francisco', state: 'CA', zip: '94110', country: 'United States' },
  },
  physician: { first_name: 'Daniel', last_name: 'Reyes', npi: '1316938492' },
  tests: [
    {
      code: '10231',
      name: 'Comprehensive Metabolic Panel',
      sample_type: 'serum',
      markers: [
        marker('GLU', 'Glucose', '2345-7'),
        marker('BUN', 'Urea nitrogen (BUN)', '3094-0'),
        marker('CREA', 'Creatinine', '2160-0'),
        marker('EGFR', 'eGFR', '98979-8'),
        marker('NA', 'Sodium', '2951-2'),
        marker('K', 'Potassium', '2823-3'),
        marker('CL', 'Chloride', '2075-0'),
        marker('CO2', 'Carbon dioxide, total', '2028-9'),
        marker('CA', 'Calcium', '17861-6'),
        marker('TP', 'Protein, total', '2885-2'),
        marker('ALB', 'Albumin', '1751-7'),
        marker('TBIL', 'Bilirubin, total', '1975-2'),
        marker('ALP', 'Alkaline phosphatase', '6768-6'),
        marker('AST', 'AST', '1920-8'),
        marker('ALT', 'ALT', '1742-6'),
      ],
    },
    {
      code: '7600',
      name: 'Lipid Panel, Standard',
      sample_type: 'serum',
      markers: [
        marker('CHOL', 'Cholesterol, total', '2093-3'),
        marker('HDL', 'HDL cholesterol', '2085-9'),
        marker('TRIG', 'Triglycerides', '2571-8'),
        marker('LDL', 'LDL cholesterol (calculated)', '13457-7'),
      ],
    },
    { code: '496', name: 'Hemoglobin A1c', sample_type: 'whole_blood', markers: [marker('A1C', 'Hemoglobin A1c', '4548-4')] },
    { code: '899', name: 'TSH', sample_type: 'serum', markers: [marker('TSH', 'TSH', '3016-3')] },
    { code: '5463', name: 'Urinalysis, Complete', sample_type: 'urine', markers: [] },
  ],
  healthInsuranceId: null,
  generatedAt: new Date('2025-11-20T14:32:05Z'),
};

/** No physician, STAT, at-home draw, a patient whose details were erased, the sandbox lab: the edge cases on one form. */
const requisitionEdgeCases: RequisitionDocument = {
  ...requisition,
  labAccount: null,
  sampleId: null,
  priority: true,
  billingType: 'commercial_insurance',
  collectionMethod: 'at_home_phlebotomy',
  fasting: false,
  activateBy: null,
  physician: null,
  healthInsuranceId: 'W219 448 301-02',
  patient: {
    first_name: '—',
    last_name: '—',
    dob: '—',
    gender: '—',
    phone_number: '—',
    email: '—',
    address: { first_line: '—', second_line: null, city: '', state: '', zip: '', country: '' },
  },
  tests: requisition.tests.slice(0, 2),
};

/** Names in Japanese, Greek, Korean, Cyrillic, Polish and Vietnamese, and an address mixing scripts on one line. */
const requisitionUnicode: RequisitionDocument = {
  ...requisition,
  // A Labcorp-style account: the specimen labels print inside the requisition.
  labAccount: { name: 'Labcorp — Nguyễn Thị Minh Khai 診療所', account_number: '04418830', labels: 'in_requisition' },
  orderingOrganisation: 'Nguyễn Thị Minh Khai 診療所',
  patient: {
    ...requisition.patient,
    first_name: '花子',
    last_name: '佐藤',
    email: 'hanako.sato@example.jp',
    address: {
      first_line: '서울특별시 강남구 테헤란로 152 (김민준 방)',
      second_line: 'ул. Тверская, д. 7',
      city: 'Łódź',
      state: 'Łódzkie',
      zip: '90-001',
      country: 'Poland',
    },
  },
  physician: { first_name: 'Παναγιώτης', last_name: 'Παπαδόπουλος', npi: '1316938492' },
  tests: requisition.tests.slice(2),
};

/** The longest names the API accepts (50 characters each), to see that they wrap rather than overflow. */
const requisitionLongNames: RequisitionDocument = {
  ...requisitionUnicode,
  patient: {
    ...requisitionUnicode.patient,
    first_name: 'Zoë Ångström-Ñúñez Łucja Żółkiewska Nguyễn Thị Minh',
    last_name: 'Wolfeschlegelsteinhausenbergerdorff-Ångström-Ñúñez',
  },
  physician: { first_name: 'Дмитрий Дмитриевич Александр-Константинович', last_name: '王小明 佐藤花子 김민준 Παπαδόπουλος Шостакович', npi: '1316938492' },
};

type Result = ResultsDocument['results'][number];
const normal = (name: string, loinc: string, result: string, unit: string, referenceRange: string): Result => ({
  name,
  loinc,
  result,
  unit,
  referenceRange,
  flag: 'normal',
  isAboveMax: false,
  isBelowMin: false,
  notes: null,
});
const high = (r: Result, flag: 'abnormal' | 'critical' = 'abnormal'): Result => ({ ...r, flag, isAboveMax: true });
const low = (r: Result, flag: 'abnormal' | 'critical' = 'abnormal'): Result => ({ ...r, flag, isBelowMin: true });

const chemistry: Result[] = [
  high(normal('Glucose', '2345-7', '128', 'mg/dL', '65-99')),
  normal('Urea nitrogen (BUN)', '3094-0', '14', 'mg/dL', '7-25'),
  normal('Creatinine', '2160-0', '0.82', 'mg/dL', '0.50-1.05'),
  normal('eGFR', '98979-8', '84', 'mL/min/1.73m2', '> OR = 60'),
  normal('Sodium', '2951-2', '139', 'mmol/L', '135-146'),
  high(normal('Potassium', '2823-3', '6.8', 'mmol/L', '3.5-5.3'), 'critical'),
  normal('Chloride', '2075-0', '102', 'mmol/L', '98-110'),
  normal('Carbon dioxide, total', '2028-9', '25', 'mmol/L', '20-32'),
  normal('Calcium', '17861-6', '9.4', 'mg/dL', '8.6-10.4'),
  normal('Protein, total', '2885-2', '7.1', 'g/dL', '6.1-8.1'),
  low(normal('Albumin', '1751-7', '3.3', 'g/dL', '3.6-5.1')),
  normal('Bilirubin, total', '1975-2', '0.6', 'mg/dL', '0.2-1.2'),
  normal('Alkaline phosphatase', '6768-6', '71', 'U/L', '37-153'),
  normal('AST', '1920-8', '22', 'U/L', '10-35'),
  normal('ALT', '1742-6', '19', 'U/L', '6-29'),
  high(normal('Cholesterol, total', '2093-3', '231', 'mg/dL', '<200')),
  normal('HDL cholesterol', '2085-9', '58', 'mg/dL', '> OR = 50'),
  high(normal('Triglycerides', '2571-8', '182', 'mg/dL', '<150')),
  high(normal('LDL cholesterol (calculated)', '13457-7', '140', 'mg/dL (calc)', '<100')),
  high(normal('Hemoglobin A1c', '4548-4', '6.1', '% of total Hgb', '<5.7')),
  normal('TSH', '3016-3', '2.14', 'mIU/L', '0.40-4.50'),
  low(normal('Hemoglobin', '718-7', '6.4', 'g/dL', '11.7-15.5'), 'critical'),
  normal('Platelet count', '777-3', '251', 'Thousand/uL', '140-400'),
  {
    ...normal('Urine culture', '630-4', 'See note', '', ''),
    flag: 'abnormal',
    isAboveMax: null,
    isBelowMin: null,
    notes:
      'Greater than 100,000 CFU/mL of Escherichia coli. Susceptibility testing to follow. This organism is frequently ' +
      'resistant to ampicillin; correlate with clinical findings before starting therapy.',
  },
  {
    ...normal(
      'Pathologist comment',
      '',
      'Specimen received slightly hemolysed; potassium may be falsely elevated. ' +
        'A redraw is recommended to confirm the potassium result before any clinical action is taken.',
      '',
      '',
    ),
    loinc: null,
  },
];

/** Further panels (CBC, iron, vitamins, hormones), so the report runs to 60+ rows and its table spans pages. */
const furtherPanels: Result[] = [
  normal('White blood cell count', '6690-2', '6.2', 'Thousand/uL', '3.8-10.8'),
  normal('Red blood cell count', '789-8', '4.21', 'Million/uL', '3.80-5.10'),
  low(normal('Hematocrit', '4544-3', '21.0', '%', '35.0-45.0')),
  normal('MCV', '787-2', '88.4', 'fL', '80.0-100.0'),
  normal('MCH', '785-6', '29.1', 'pg', '27.0-33.0'),
  normal('MCHC', '786-4', '32.9', 'g/dL', '32.0-36.0'),
  normal('RDW', '788-0', '13.1', '%', '11.0-15.0'),
  normal('MPV', '32623-1', '10.2', 'fL', '7.5-12.5'),
  normal('Absolute neutrophils', '751-8', '3720', 'cells/uL', '1500-7800'),
  normal('Absolute lymphocytes', '731-0', '1810', 'cells/uL', '850-3900'),
  normal('Absolute monocytes', '742-7', '490', 'cells/uL', '200-950'),
  normal('Absolute eosinophils', '711-2', '140', 'cells/uL', '15-500'),
  normal('Absolute basophils', '704-7', '40', 'cells/uL', '0-200'),
  normal('Neutrophils', '770-8', '60.0', '%', ''),
  normal('Lymphocytes', '736-9', '29.2', '%', ''),
  normal('Monocytes', '5905-5', '7.9', '%', ''),
  normal('Eosinophils', '713-8', '2.3', '%', ''),
  normal('Basophils', '706-2', '0.6', '%', ''),
  low(normal('Iron, total', '2498-4', '38', 'mcg/dL', '45-160')),
  normal('Iron binding capacity', '2500-7', '402', 'mcg/dL (calc)', '250-450'),
  low(normal('% saturation', '2502-3', '9', '% (calc)', '16-45')),
  low(normal('Ferritin', '2276-4', '11', 'ng/mL', '16-232')),
  normal('Vitamin B12', '2132-9', '512', 'pg/mL', '200-1100'),
  normal('Folate, serum', '2284-8', '14.2', 'ng/mL', '> 5.4'),
  low(normal('Vitamin D, 25-OH, total', '62292-8', '22', 'ng/mL', '30-100')),
  normal('Magnesium', '19123-9', '2.1', 'mg/dL', '1.5-2.5'),
  normal('Phosphorus', '2777-1', '3.6', 'mg/dL', '2.1-4.3'),
  normal('Uric acid', '3084-1', '5.2', 'mg/dL', '2.5-7.0'),
  normal('GGT', '2324-2', '18', 'U/L', '3-55'),
  normal('LD', '2532-0', '168', 'U/L', '120-250'),
  high(normal('hs-CRP', '30522-7', '3.4', 'mg/L', '< 1.0 lower risk')),
  normal('Insulin', '20448-7', '9.8', 'uIU/mL', '<= 18.4'),
  high(normal('Apolipoprotein B', '1884-6', '112', 'mg/dL', '< 90')),
  normal('Lipoprotein (a)', '10835-7', '41', 'nmol/L', '< 75'),
  normal('Homocysteine', '13965-9', '9.1', 'umol/L', '< 11.4'),
  normal('T4, free', '3024-7', '1.2', 'ng/dL', '0.8-1.8'),
  normal('T3, free', '3051-0', '3.1', 'pg/mL', '2.3-4.2'),
  normal('Thyroid peroxidase antibodies', '8099-4', '3', 'IU/mL', '< 9'),
  normal('Cortisol, total', '2143-6', '13.8', 'mcg/dL', '4.0-22.0'),
  normal('DHEA sulfate', '2191-5', '92', 'mcg/dL', '35-256'),
  normal('Estradiol', '2243-4', '< 15', 'pg/mL', 'Postmenopausal: < 10-31'),
  normal('FSH', '15067-2', '68.4', 'mIU/mL', 'Postmenopausal: 25.8-134.8'),
  normal('Prolactin', '2842-3', '8.9', 'ng/mL', '2.0-18.0'),
  { ...normal('Hepatitis C antibody', '13955-0', 'Non-reactive', '', 'Non-reactive'), notes: null },
];
const manyResults: Result[] = [...chemistry, ...furtherPanels];

const results: ResultsDocument = {
  orderId: ORDER_ID,
  specimenNumber: SAMPLE_ID,
  lab: LAB,
  orderingOrganisation: 'Northwind Health Partners',
  patient: { name: 'Okonkwo-Lindqvist, Margaret', dob: '1968-04-17', gender: 'female' },
  physician: { name: 'Daniel Reyes', npi: '1316938492' },
  dateCollected: new Date('2025-11-21T08:05:00Z'),
  dateReceived: new Date('2025-11-21T13:40:00Z'),
  dateReported: new Date('2025-11-22T06:12:00Z'),
  status: 'partial',
  interpretation: 'critical',
  results: manyResults,
  missingResults: [
    { name: 'Urinalysis, Complete', reason: 'Quantity not sufficient: the urine container arrived with less than 2 mL.' },
    { name: 'Vitamin D, 25-Hydroxy', reason: 'Specimen hemolysed' },
  ],
  generatedAt: new Date('2025-11-22T06:12:30Z'),
};

/** A short, all-normal, final report with no physician and an erased patient. */
const resultsNormal: ResultsDocument = {
  ...results,
  patient: { name: '—', dob: '—', gender: '—' },
  physician: null,
  dateCollected: null,
  dateReceived: null,
  status: 'final',
  interpretation: 'normal',
  results: chemistry.filter((r) => r.flag === 'normal' && r.loinc),
  missingResults: [],
};

const resultsUnicode: ResultsDocument = {
  ...resultsNormal,
  patient: { name: '김, 민준', dob: '1990-02-03', gender: 'male' },
  physician: { name: 'Дмитрий Шостакович', npi: '1316938492' },
  orderingOrganisation: 'Zoë Ångström-Ñúñez Praxis',
};

/** Each page of `pdf` as a PNG beside the other screenshots, when poppler is there to draw it. */
function screenshot(pdf: string): void {
  const prefix = path.resolve('.devstack/screenshots', `pdf-${path.basename(pdf, '.pdf')}`);
  mkdirSync(path.dirname(prefix), { recursive: true });
  try {
    execFileSync('pdftoppm', ['-r', '110', '-png', pdf, prefix]);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    console.log('no pdftoppm (apt-get install poppler-utils): PDFs only');
  }
}

async function main(): Promise<void> {
  const outDir = path.resolve(process.argv[2] ?? '.devstack/sample-pdfs');
  mkdirSync(outDir, { recursive: true });
  const samples: [string, Promise<Buffer>][] = [
    ['requisition.pdf', renderRequisitionPdf(requisition)],
    ['requisition-edge-cases.pdf', renderRequisitionPdf(requisitionEdgeCases)],
    ['results.pdf', renderResultsPdf(results)],
    ['results-normal.pdf', renderResultsPdf(resultsNormal)],
    ['requisition-unicode.pdf', renderRequisitionPdf(requisitionUnicode)],
    ['requisition-long-names.pdf', renderRequisitionPdf(requisitionLongNames)],
    ['results-unicode.pdf', renderResultsPdf(resultsUnicode)],
  ];
  for (const [name, rendering] of samples) {
    const bytes = await rendering;
    writeFileSync(path.join(outDir, name), bytes);
    screenshot(path.join(outDir, name));
    console.log(`${path.join(outDir, name)} ${bytes.length} bytes`);
  }
}

main().catch((err) => {
  console.error(`rendering failed: ${(err as Error).stack ?? err}`);
  process.exit(1);
});
