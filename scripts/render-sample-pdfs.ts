import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { renderRequisitionPdf, type RequisitionDocument } from '../lib/lab-documents/requisition-pdf';
import { renderResultsPdf, type ResultsDocument } from '../lib/lab-documents/results-pdf';

/**
 * Renders the lab documents with realistic sample data, for looking at:
 *   npx tsc -p tsconfig.json && node dist/scripts/render-sample-pdfs.js [out-dir]
 * Writes to .devstack/sample-pdfs/ under the current directory unless told otherwise.
 */

const LAB = { name: 'Quest Diagnostics', address: '500 Plaza Drive, Secaucus NJ 07094', clia: '31D0696246' };
const ORDER_ID = '5f2b9c1e-8a47-4d3b-9e61-0c7a2f4d8b13';
const SAMPLE_ID = '8391042716';

const marker = (code: string, name: string, loinc: string | null) => ({ code, name, loinc });

const requisition: RequisitionDocument = {
  orderId: ORDER_ID,
  requisitionNumber: ORDER_ID.slice(0, 8).toUpperCase(),
  accountNumber: '1234567890',
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

/** No physician, STAT, at-home draw, a patient whose details were erased: the edge cases on one form. */
const requisitionEdgeCases: RequisitionDocument = {
  ...requisition,
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

type Result = ResultsDocument['results'][number];
const normal = (name: string, loinc: string, result: string, unit: string, referenceRange: string): Result => ({
  name, loinc, result, unit, referenceRange, flag: 'normal', isAboveMax: false, isBelowMin: false, notes: null,
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
    ...normal('Pathologist comment', '', 'Specimen received slightly hemolysed; potassium may be falsely elevated. ' +
      'A redraw is recommended to confirm the potassium result before any clinical action is taken.', '', ''),
    loinc: null,
  },
];

/** 60+ rows so the table spans pages: the chemistry block, then a long panel of further (normal) analytes. */
const manyResults: Result[] = [
  ...chemistry,
  ...Array.from({ length: 40 }, (_, i) => normal(`Amino acid fraction ${String(i + 1).padStart(2, '0')}`, `${30100 + i}-${i % 10}`, `${(12 + i * 1.7).toFixed(1)}`, 'umol/L', `${5 + i}-${40 + i * 2}`)),
];

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

async function main(): Promise<void> {
  const outDir = path.resolve(process.argv[2] ?? '.devstack/sample-pdfs');
  mkdirSync(outDir, { recursive: true });
  const samples: [string, Promise<Buffer>][] = [
    ['requisition.pdf', renderRequisitionPdf(requisition)],
    ['requisition-edge-cases.pdf', renderRequisitionPdf(requisitionEdgeCases)],
    ['results.pdf', renderResultsPdf(results)],
    ['results-normal.pdf', renderResultsPdf(resultsNormal)],
  ];
  for (const [name, rendering] of samples) {
    const bytes = await rendering;
    writeFileSync(path.join(outDir, name), bytes);
    console.log(`${path.join(outDir, name)} ${bytes.length} bytes`);
  }
}

main().catch((err) => {
  console.error(`rendering failed: ${(err as Error).stack ?? err}`);
  process.exit(1);
});
