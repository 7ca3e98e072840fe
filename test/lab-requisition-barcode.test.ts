import { renderRequisitionPdf, type RequisitionDocument, type RequisitionLabAccount } from '../lib/labs/pdf/requisition';
import { placerNumberOf } from '../lib/labs/placer-number';
import { createTenant, startTestApp, teamClient, type HttpClient, type TestApp } from './support/harness';
import { createUser, labTestIds, orderBody, orderReaches, patientDetails } from './support/lab';
import { type RenderedPage, renderPdfPages } from './support/pdf';

/**
 * The requisition's barcode is read the way a lab's scanner reads it: the PDF is drawn to pixels by pdf.js, rows of
 * pixels are cut into bars and spaces, and a Code 128 decoder of this file (its own table, from the standard's
 * 11-module bit patterns, not the renderer's) turns them back into text, checking the check symbol, the quiet
 * zones and the print size of a module. Labels are found the same way, and by their text on each page.
 */

/** Code 128 symbols 0..105 as 11 modules (1 bar, 0 space), and the stop (106) as 13. */
// biome-ignore format: eight values a row
const BITS = [
  '11011001100', '11001101100', '11001100110', '10010011000', '10010001100', '10001001100', '10011001000', '10011000100',
  '10001100100', '11001001000', '11001000100', '11000100100', '10110011100', '10011011100', '10011001110', '10111001100',
  '10011101100', '10011100110', '11001110010', '11001011100', '11001001110', '11011100100', '11001110100', '11101101110',
  '11101001100', '11100101100', '11100100110', '11101100100', '11100110100', '11100110010', '11011011000', '11011000110',
  '11000110110', '10100011000', '10001011000', '10001000110', '10110001000', '10001101000', '10001100010', '11010001000',
  '11000101000', '11000100010', '10110111000', '10110001110', '10001101110', '10111011000', '10111000110', '10001110110',
  '11101110110', '11010001110', '11000101110', '11011101000', '11011100010', '11011101110', '11101011000', '11101000110',
  '11100010110', '11101101000', '11101100010', '11100011010', '11101111010', '11001000010', '11110001010', '10100110000',
  '10100001100', '10010110000', '10010000110', '10000101100', '10000100110', '10110010000', '10110000100', '10011010000',
  '10011000010', '10000110100', '10000110010', '11000010010', '11001010000', '11110111010', '11000010100', '10001111010',
  '10100111100', '10010111100', '10010011110', '10111100100', '10011110100', '10011110010', '11110100100', '11110010100',
  '11110010010', '11011011110', '11011110110', '11110110110', '10101111000', '10100011110', '10001011110', '10111101000',
  '10111100010', '11110101000', '11110100010', '10111011110', '10111101110', '11101011110', '11110101110', '11010000100',
  '11010010000', '11010011100', '1100011101011',
];
const VALUE_OF = new Map(BITS.map((bits, value) => [bits, value]));
const [START_A, START_B, START_C, STOP] = [103, 104, 105, 106];

/** 300 dpi: a 0.25 mm module is 2.95 pixels. */
const SCALE = 300 / 72;
const MM_PER_POINT = 25.4 / 72;

interface Symbol128 {
  text: string;
  /** Where its first bar starts and the row it was read on, in pixels. */
  x: number;
  y: number;
  modulePoints: number;
  quietLeftModules: number;
  quietRightModules: number;
}

/** Elements (bar, space, ...) of `count` runs from `at`, as module counts, or null if they are not whole modules. */
function modulesOf(runs: number[], at: number, count: number, totalModules: number): string | null {
  if (at + count > runs.length) return null;
  let sum = 0;
  for (let k = 0; k < count; k++) sum += runs[at + k];
  const module = sum / totalModules;
  let bits = '';
  for (let k = 0; k < count; k++) {
    const width = Math.round(runs[at + k] / module);
    if (width < 1 || width > 4) return null;
    bits += (k % 2 === 0 ? '1' : '0').repeat(width);
  }
  return bits.length === totalModules ? bits : null;
}

/** The text of a symbol's values (start, data..., check, stop): sets A, B and C with their switches. */
function textOf(values: number[]): string | null {
  const data = values.slice(1, -2);
  const check = values[values.length - 2];
  const sum = data.reduce((s, v, i) => s + v * (i + 1), values[0]);
  if (sum % 103 !== check) return null;
  let set = values[0] === START_A ? 'A' : values[0] === START_B ? 'B' : 'C';
  let text = '';
  for (const v of data) {
    if (v === 99 && set !== 'C') set = 'C';
    else if (v === 100 && set !== 'B') set = 'B';
    else if (v === 101 && set !== 'A') set = 'A';
    else if (set === 'C') text += String(v).padStart(2, '0');
    else if (set === 'B') text += v < 95 ? String.fromCharCode(v + 32) : '';
    else text += String.fromCharCode(v < 64 ? v + 32 : v - 64);
  }
  return text;
}

/** Every Code 128 symbol one row of pixels crosses. */
function symbolsInRow(page: RenderedPage, y: number): Symbol128[] {
  const runs: number[] = [];
  const starts: number[] = [];
  let dark = false;
  for (let x = 0; x < page.width; x++) {
    const isDark = page.grey[y * page.width + x] < 128;
    if (x === 0 || isDark !== dark) {
      runs.push(0);
      starts.push(x);
      dark = isDark;
    }
    runs[runs.length - 1] += 1;
  }
  const firstDark = page.grey[y * page.width] < 128 ? 0 : 1;
  const found: Symbol128[] = [];
  for (let i = firstDark; i < runs.length; i += 2) {
    const startBits = modulesOf(runs, i, 6, 11);
    const start = startBits === null ? undefined : VALUE_OF.get(startBits);
    if (start !== START_A && start !== START_B && start !== START_C) continue;
    const values = [start];
    let at = i + 6;
    for (;;) {
      const stop = modulesOf(runs, at, 7, 13);
      if (stop !== null && VALUE_OF.get(stop) === STOP) {
        values.push(STOP);
        break;
      }
      const bits = modulesOf(runs, at, 6, 11);
      const value = bits === null ? undefined : VALUE_OF.get(bits);
      if (value === undefined || value >= START_A) break;
      values.push(value);
      at += 6;
    }
    if (values[values.length - 1] !== STOP || values.length < 4) continue;
    const text = textOf(values);
    if (text === null) continue;
    const end = at + 7;
    const widthPixels = starts[end - 1] + runs[end - 1] - starts[i];
    const modulePixels = widthPixels / (11 * (values.length - 1) + 13);
    found.push({
      text,
      x: starts[i],
      y,
      modulePoints: modulePixels / SCALE,
      quietLeftModules: i > 0 ? runs[i - 1] / modulePixels : 0,
      quietRightModules: end < runs.length ? runs[end] / modulePixels : 0,
    });
    i = end - 1;
  }
  return found;
}

/** The symbols on a page, each once (the rows that read one are merged by where its first bar starts). */
function symbolsOn(page: RenderedPage): Symbol128[] {
  const symbols: Symbol128[] = [];
  for (let y = 0; y < page.height; y += 3) {
    for (const hit of symbolsInRow(page, y)) {
      const same = symbols.find((s) => s.text === hit.text && Math.abs(s.x - hit.x) <= 3 && hit.y - s.y < 200);
      if (!same) symbols.push(hit);
    }
  }
  return symbols;
}

const PLACER = placerNumberOf('5f2b9c1e-8a47-4d3b-9e61-0c7a2f4d8b13');
const LABCORP: RequisitionLabAccount = { name: 'Labcorp — Northwind Health', account_number: '04418830', labels: 'in_requisition' };
const QUEST: RequisitionLabAccount = { name: 'Quest Diagnostics — Northwind Health', account_number: '97512846', labels: 'separate_sheet' };

const requisition = (placerNumber: string, labAccount: RequisitionLabAccount | null): RequisitionDocument => ({
  orderId: '5f2b9c1e-8a47-4d3b-9e61-0c7a2f4d8b13',
  placerNumber,
  labAccount,
  sampleId: '8391042716',
  orderedAt: new Date('2025-11-20T14:32:00Z'),
  activateBy: null,
  priority: false,
  billingType: 'client_bill',
  collectionMethod: 'walk_in_test',
  fasting: true,
  lab: { name: 'Quest Diagnostics', address: '500 Plaza Dr, Secaucus 07094', clia: '05D0642827' },
  orderingOrganisation: 'Northwind Health Partners',
  patient: {
    first_name: 'Margaret',
    last_name: 'Okonkwo',
    dob: '1968-04-17',
    gender: 'female',
    phone_number: '+1 415 555 0142',
    email: 'margaret@example.com',
    address: { first_line: '1 Main St', second_line: null, city: 'Oakland', state: 'CA', zip: '94612', country: 'United States' },
  },
  physician: { first_name: 'Gregory', last_name: 'House', npi: '1234567893' },
  tests: [
    {
      code: 'CMP',
      name: 'Comprehensive metabolic panel',
      sample_type: 'serum',
      markers: [{ code: '1', name: 'Glucose', loinc: '2345-7' }],
    },
  ],
  healthInsuranceId: null,
  generatedAt: new Date('2025-11-20T14:32:05Z'),
});

const count = (text: string, needle: string) => text.split(needle).length - 1;
/** Line breaks and spacing are the reader's layout. */
const squeezed = (s: string) => s.replace(/\s+/g, ' ');

async function rendered(placer: string, account: RequisitionLabAccount | null) {
  const bytes = await renderRequisitionPdf(requisition(placer, account));
  // Bars are vector rectangles, sharp at any printer's resolution: the document holds no picture.
  expect(bytes.includes('/Subtype /Image')).toBe(false);
  const pages = await renderPdfPages(bytes, SCALE);
  return pages.map((page) => ({ page, text: squeezed(page.text), symbols: symbolsOn(page) }));
}

function expectScannable(symbols: Symbol128[], placer: string): void {
  for (const symbol of symbols) {
    expect(symbol.text).toBe(placer);
    expect(symbol.modulePoints * MM_PER_POINT).toBeGreaterThanOrEqual(0.25);
    // 10 modules of quiet zone each side (a pixel of anti-aliasing either way is the renderer's, not the layout's).
    expect(symbol.quietLeftModules).toBeGreaterThanOrEqual(9.5);
    expect(symbol.quietRightModules).toBeGreaterThanOrEqual(9.5);
  }
}

describe('the requisition barcode and specimen labels', () => {
  it('a Labcorp-style account gets the placer barcode, its account number and two labels inside the requisition page', async () => {
    const pages = await rendered(PLACER, LABCORP);
    const [first] = pages;
    // The form's barcode and one on each label, all on the first page.
    expect(first.symbols).toHaveLength(3);
    expectScannable(first.symbols, PLACER);
    expect(first.text).toContain('Account 04418830');
    expect(first.text).toContain('LAB ACCOUNT 04418830');
    expect(count(first.text, 'Okonkwo, Margaret DOB 1968-04-17 Account 04418830')).toBe(2);
    expect(count(first.text, 'Collection date')).toBe(2);
    // No label sheet: no other page has a barcode or a label.
    for (const other of pages.slice(1)) {
      expect(other.symbols).toEqual([]);
      expect(other.text).not.toContain('Collection date');
    }
  });

  it('any other account gets a separate sheet of ten labels after the form', async () => {
    const pages = await rendered(PLACER, QUEST);
    expect(pages.length).toBeGreaterThanOrEqual(2);
    const sheet = pages[pages.length - 1];
    expect(sheet.symbols).toHaveLength(10);
    expectScannable(sheet.symbols, PLACER);
    expect(count(sheet.text, 'Okonkwo, Margaret DOB 1968-04-17 Account 97512846')).toBe(10);
    expect(count(sheet.text, 'Collection date')).toBe(10);
    expect(sheet.text).toContain('SPECIMEN LABELS');
    // The form keeps its own barcode and no label.
    expect(pages[0].symbols).toHaveLength(1);
    expectScannable(pages[0].symbols, PLACER);
    expect(pages[0].text).toContain('LAB ACCOUNT 97512846');
    for (const form of pages.slice(0, -1)) expect(form.text).not.toContain('Collection date');
  });

  it('the sandbox lab has no account: the barcode, and "not a real account" where the number would be', async () => {
    // Digits in a run switch the symbol to code set C and back: the decoder reads both sets.
    const numericRun = 'HB0123456789AB';
    const pages = await rendered(numericRun, null);
    expectScannable(pages[0].symbols, numericRun);
    expect(pages[0].symbols).toHaveLength(1);
    expect(pages[0].text).toContain('Sandbox lab — not a real account');
    const sheet = pages[pages.length - 1];
    expect(sheet.symbols).toHaveLength(10);
    expectScannable(sheet.symbols, numericRun);
    expect(count(sheet.text, 'Okonkwo, Margaret DOB 1968-04-17 Sandbox lab — not a real account')).toBe(10);
  });
});

describe('the requisition served for an order', () => {
  let app: TestApp;
  let client: HttpClient;
  let teamKey: string;

  beforeAll(async () => {
    app = await startTestApp();
    const tenant = await createTenant(app.deps, 'Barcode Clinic');
    teamKey = tenant.teamKey;
    client = teamClient(app, tenant);
  });
  afterAll(async () => {
    await app?.close();
  });

  it("carries the order's placer number as its barcode", async () => {
    const userId = await createUser(client);
    const created = await client.post('/v3/order', orderBody(userId, (await labTestIds(client)).walk_in_test));
    expect(created.status).toBe(200);
    const id = created.body.order.id;
    await orderReaches(client, id, 'requisition_created');
    const res = await fetch(`${app.url}/v3/order/${id}/requisition/pdf`, { headers: { 'x-service-api-key': teamKey } });
    expect(res.status).toBe(200);
    const pages = await renderPdfPages(Buffer.from(await res.arrayBuffer()), SCALE);
    const stored = (await app.deps.repos.labOrders.findById(id)) as { placer_number?: string } | null;
    const placer = stored?.placer_number ?? placerNumberOf(id);
    const symbols = symbolsOn(pages[0]);
    expect(symbols).toHaveLength(1);
    expectScannable(symbols, placer);
    expect(squeezed(pages[0].text)).toContain(`Requisition ${placer}`);
    // The sandbox lab's order has no lab account: its labels come on a sheet of their own.
    const sheet = pages[pages.length - 1];
    expectScannable(symbolsOn(sheet), placer);
    expect(count(squeezed(sheet.text), `${patientDetails.last_name}, ${patientDetails.first_name} DOB ${patientDetails.dob}`)).toBe(10);
  });
});
