import { Hl7Message, type Hl7Segment } from '@medplum/core';
import iconv from 'iconv-lite';
import type { InsuranceRecord } from '../schemas/insurance';
import { loadLabCatalogue } from '../lib/labs/catalogue';
import { readAcknowledgementHeader } from '../lib/labs/mllp/acknowledgement-header';
import { buildAcknowledgement, encodeAcknowledgement, MalformedAcknowledgement, parseAcknowledgement } from '../lib/labs/hl7/acknowledgement';
import { CharsetUnrepresentable, charsetOfMsh18, decodeHl7, decodeHl7Message, encodeHl7, UnsupportedCharset } from '../lib/labs/hl7/charsets';
import { escapeHl7, unescapeHl7 } from '../lib/labs/hl7/escapes';
import {
  HEALTHBRIDGE_ASSIGNING_AUTHORITY,
  OrderNotRenderable,
  orderControlId,
  renderCancelMessage,
  renderOrderMessage,
  type OrderMessageInput,
} from '../lib/labs/hl7/order-message';
import type { LabAccountDoc } from '../lib/labs/lab-accounts';
import type { LabOrderDoc } from '../lib/labs/model';
import { placerNumberOf } from '../lib/labs/placer-number';
import { parseOru } from '../lib/labs/hl7-oru';

/** Pure: the HL7 text layer of lab orders (lib/labs/hl7/), no stack. */

const catalogue = loadLabCatalogue();
const OID = HEALTHBRIDGE_ASSIGNING_AUTHORITY.oid;
const NOW = new Date('2026-03-04T05:06:07Z');

function account(overrides: Partial<LabAccountDoc> = {}): LabAccountDoc {
  return {
    _id: '0b8f3c59-1d0a-4c57-9f3e-2f1c7d0e9a10',
    org_id: 'org-1',
    environment: 'production',
    region: 'us',
    lab_slug: 'labcorp',
    lab_id: 3,
    name: 'Labcorp (Acme Health)',
    account_number: '04123456',
    mllp: { host: '127.0.0.1', port: 2575, tls: null },
    msh: {
      sending_application: 'HEALTHBRIDGE^2.25.1^ISO',
      sending_facility: 'ACME^2.25.2^ISO',
      receiving_application: 'LCS^2.16.840.1.113883.3.1^ISO',
      receiving_facility: 'LABCORP^2.16.840.1.113883.3.2^ISO',
    },
    profile: 'LOI_2.5.1',
    ack_mode: 'original',
    charset: 'UNICODE UTF-8',
    results_from: ['127.0.0.1'],
    order_codes: {
      '3040': { code: '322000', loinc: '24323-8' },
      '3041': { code: '005009', loinc: '58410-2' },
      '3042': { code: '224576', loinc: null },
      '2040': { code: 'CMP-10231', loinc: null },
      '2041': { code: 'CBC-6399', loinc: null },
    },
    bill_types: ['client_bill', 'commercial_insurance', 'patient_bill'],
    labels: 'in_requisition',
    ack_timeout_ms: 30000,
    created_at: NOW,
    updated_at: NOW,
    ...overrides,
  };
}

function order(testIds: string[], overrides: Partial<LabOrderDoc> = {}): LabOrderDoc {
  const tests = testIds.map((id) => catalogue.labTestById(id)!);
  const first = tests[0];
  return {
    _id: '018f2a3b-4c5d-7e6f-8a9b-0c1d2e3f4a5b',
    team_id: 'team-1',
    user_id: '5f0c2d1e-8b7a-4c3d-9e2f-1a0b9c8d7e6f',
    method: first.method as LabOrderDoc['method'],
    status: 'ordered' as LabOrderDoc['status'],
    low_level_status: 'ordered',
    low_level_status_created_at: NOW,
    events: [],
    lab_test: { ...first, team_owned: false, lab_account_id: null, created_at: NOW, updated_at: NOW },
    lab_test_ids: testIds,
    marker_ids: [...new Set(tests.flatMap((t) => t.marker_ids))],
    patient_details: { first_name: 'Ana', last_name: 'Smith', dob: '1988-04-12', gender: 'female', phone_number: '+14155552671', email: 'ana@example.com' },
    patient_address: {
      receiver_name: null,
      first_line: '1 Main St',
      second_line: 'Apt 2',
      city: 'San Francisco',
      state: 'CA',
      zip: '94105',
      country: 'US',
      phone_number: null,
    },
    shipping_details: null,
    physician: { first_name: 'Hans', last_name: 'Feller', npi: '1234567893' },
    consents: [],
    sample_id: 'S123456789',
    health_insurance_id: null,
    notes: null,
    clinical_notes: null,
    activate_by: null,
    created_with_activate_by: false,
    priority: false,
    billing_type: 'client_bill',
    has_abn: false,
    origin: 'initial',
    parent_id: null,
    order_transaction_id: 'tx-1',
    interpretation: null,
    has_missing_results: false,
    details_id: 'details-1',
    shipment: null,
    lab_reference: null,
    dispatched_at: null,
    // Part A's order fields (C2a), merged in lab-d: the same placer number as the renderer derives from the id.
    lab_account_id: null,
    placer_number: placerNumberOf('018f2a3b-4c5d-7e6f-8a9b-0c1d2e3f4a5b'),
    icd_codes: [],
    aoe_answers: [],
    created_at: NOW,
    updated_at: NOW,
    ...overrides,
  };
}

const METABOLIC_CBC = '0c1d2e3f-4a5b-4c6d-8e7f-8a9b0c1d2eaa'; // Labcorp, markers 3040 + 3041
const THYROID = '7e8f9a0b-1c2d-4e3f-8a5b-6c7d8e9f0a88'; // Labcorp, marker 3042
const CMP = '1f2e3d4c-5b6a-4978-8a6b-5c4d3e2f1a55'; // Quest, marker 2040
const CBC = '6d5c4b3a-2e1f-4a0b-9c8d-7e6f5a4b3c66'; // Quest, marker 2041

function input(o: LabOrderDoc, a: LabAccountDoc, extra: Partial<OrderMessageInput> = {}): OrderMessageInput {
  return {
    order: o,
    account: a,
    catalogue,
    controlId: orderControlId(placerNumberOf(o._id), 'order'),
    now: NOW,
    icdCodes: [],
    aoeAnswers: [],
    insurance: null,
    ...extra,
  };
}

const insurance: InsuranceRecord = {
  member_id: 'W123|456',
  payor_code: 'AETNA',
  relationship: 'Spouse',
  insured: {
    first_name: 'Bo',
    last_name: 'Smith',
    gender: 'male',
    address: { first_line: '1 Main St', second_line: '', country: 'US', zip: '94105', city: 'San Francisco', state: 'CA' },
    dob: '1985-01-02',
    email: 'bo@example.com',
    phone_number: '+14155550000',
  },
  company: {
    name: 'Aetna',
    address: { first_line: '151 Farmington Avenue', second_line: '', country: 'US', zip: '06156', city: 'Hartford', state: 'CT' },
  },
  group_id: 'GRP-7',
  guarantor: {
    first_name: 'Bo',
    last_name: 'Smith',
    address: { first_line: '1 Main St', second_line: '', country: 'US', zip: '94105', city: 'San Francisco', state: 'CA' },
    phone_number: '+14155550000',
  },
  is_primary: true,
};

/** The rendered bytes decoded as a lab would (MSH-18 first) and parsed. */
function received(bytes: Buffer): { message: Hl7Message; encoding: string } {
  const { text, encoding } = decodeHl7Message(bytes, 'ASCII');
  return { message: Hl7Message.parse(text), encoding };
}

const seg = (m: Hl7Message, name: string, n = 0): Hl7Segment => {
  const found = m.getAllSegments(name)[n];
  if (!found) throw new Error(`no ${name} #${n} in ${m.toString()}`);
  return found;
};
const field = (s: Hl7Segment, n: number) => s.getField(n)?.toString() ?? '';
const names = (m: Hl7Message) => m.segments.map((s) => s.name);

describe('escapes', () => {
  it('writes every delimiter, line breaks and control characters as escape sequences, and reads them back', () => {
    const value = 'a|b^c~d\\e&f\r\ng\nh\ri\u000bj\u001ck\tl';
    const escaped = escapeHl7(value);
    expect(escaped).toBe('a\\F\\b\\S\\c\\R\\d\\E\\e\\T\\f\\.br\\g\\.br\\h\\.br\\i\\X0B\\j\\X1C\\k\tl');
    expect(escaped).not.toMatch(/[|^~&\r\n\u000b\u001c]/);
    expect(unescapeHl7(escaped)).toBe('a|b^c~d\\e&f\ng\nh\ni\u000bj\u001ck\tl');
    for (const c of ['|', '^', '~', '\\', '&']) expect(unescapeHl7(escapeHl7(`x${c}${c}y`))).toBe(`x${c}${c}y`);
    // \E\ is read once: "\E\F\" is a backslash followed by F\, never a field separator.
    expect(unescapeHl7('\\E\\F\\')).toBe('\\F\\');
  });

  it('decodes hex escapes in the message charset, joining adjacent ones, and drops formatting marks', () => {
    expect(unescapeHl7('M\\XC3BC\\ller')).toBe('Müller');
    expect(unescapeHl7('M\\XC3\\\\XBC\\ller')).toBe('Müller');
    expect(unescapeHl7('M\\XFC\\ller', { encoding: 'iso-8859-1' })).toBe('Müller');
    expect(unescapeHl7('\\H\\high\\N\\ line\\.sp 2\\next\\.in+4\\')).toBe('high line\nnext');
    // A lone escape character or an unknown sequence stays as written.
    expect(unescapeHl7('C:\\temp')).toBe('C:\\temp');
    expect(unescapeHl7('a\\X4\\b')).toBe('a\\X4\\b');
    // A sender's own escape character (MSH-2).
    expect(unescapeHl7('a#F#b#E#', { escapeCharacter: '#' })).toBe('a|b#');
  });
});

describe('charsets', () => {
  it('maps HL7 table 0211 names to encodings and refuses those it cannot carry', () => {
    expect(charsetOfMsh18('8859/1', 'ASCII')).toBe('iso-8859-1');
    expect(charsetOfMsh18('UNICODE UTF-8', 'ASCII')).toBe('utf8');
    expect(charsetOfMsh18('', '8859/15')).toBe('iso-8859-15');
    expect(charsetOfMsh18(null, 'ASCII')).toBe('us-ascii');
    expect(charsetOfMsh18('8859/5~ISO IR6', 'ASCII')).toBe('iso-8859-5');
    expect(charsetOfMsh18('UTF-8', 'ASCII')).toBe('utf-8');
    expect(() => charsetOfMsh18('ISO IR87', 'ASCII')).toThrow(UnsupportedCharset);
    expect(() => charsetOfMsh18('KLINGON', 'ASCII')).toThrow(/KLINGON/);
  });

  it('reads MSH-18 from the raw bytes, else the fallback; a Latin-1 message without MSH-18 decodes by the account', () => {
    const latin1 = iconv.encode('MSH|^~\\&|LAB|F|HB|F|20260101||ORU^R01|1|P|2.5.1||||||8859/1\rPID|1||1||Müller^Zoë', 'latin1');
    expect(decodeHl7(latin1, 'UNICODE UTF-8')).toContain('Müller^Zoë');
    const noMsh18 = iconv.encode('MSH|^~\\&|LAB|F|HB|F|20260101||ORU^R01|1|P|2.3\rPID|1||1||Müller', 'latin1');
    expect(decodeHl7(noMsh18, '8859/1')).toContain('Müller');
    // Declared ASCII with 8-bit bytes: read as Latin-1, never as U+FFFD.
    expect(decodeHl7(noMsh18, 'ASCII')).toContain('Müller');
    // …and with an account expecting UTF-8, bytes that are not UTF-8 and no MSH-18 to say otherwise are Latin-1.
    expect(decodeHl7(noMsh18, 'UNICODE UTF-8')).toContain('Müller');
    expect(decodeHl7(Buffer.from('MSH|^~\\&|L|F|H|F|1||ORU^R01|1|P|2.3\rPID|1||1||Müller'), 'UNICODE UTF-8')).toContain('Müller');
    const utf8 = Buffer.from('\ufeffMSH|^~\\&|LAB|F|HB|F|20260101||ORU^R01|1|P|2.5.1||||||UNICODE UTF-8\rPID|1||1||李^小龍', 'utf8');
    expect(decodeHl7(utf8, 'ASCII')).toMatch(/^MSH.*\rPID\|1\|\|1\|\|李\^小龍$/);
    const utf16 = iconv.encode('MSH|^~\\&|LAB|F|HB|F|20260101||ORU^R01|1|P|2.5.1||||||UNICODE UTF-16\rPID|1||1||Ἀλέξανδρος', 'utf16');
    expect(decodeHl7(utf16, 'ASCII')).toContain('Ἀλέξανδρος');
  });

  it('encodes exactly or refuses the character, never writing iconv-lite\'s "?"', () => {
    expect(encodeHl7('PID|1||1||Müller', '8859/1')).toEqual(Buffer.from([...Buffer.from('PID|1||1||M'), 0xfc, ...Buffer.from('ller')]));
    expect(() => encodeHl7('MSH|^~\\&|A\rPID|1||1||李', '8859/1')).toThrow(CharsetUnrepresentable);
    expect(() => encodeHl7('MSH|^~\\&|A\rPID|1||1||Smith^李', '8859/1')).toThrow(expect.objectContaining({ character: '李', field: 'PID-5' }));
    expect(() => encodeHl7('Müller', 'ASCII')).toThrow(/'ü'/);
    expect(encodeHl7('Дмитрий', '8859/5').length).toBe(7);
  });
});

describe('order messages: LOI OML^O21 2.5.1', () => {
  it('carries the order: MSH with the LOI profile ids, PID, PV1, ORC/TQ1/OBR per order code, DG1, NTE, OBX, SPM', () => {
    const o = order([METABOLIC_CBC], {
      clinical_notes: 'Fasting 12h | patient on "metformin" ^ & ~ \\ ok\nsecond line',
      priority: true,
    });
    const rendered = renderOrderMessage(
      input(o, account(), { icdCodes: ['E11.9', 'Z13.220'], aoeAnswers: [{ marker_id: 3041, question_id: 'FAST', answer: 'Y^es' }] }),
    );
    expect(rendered.text).toBe(rendered.bytes.toString('utf8'));
    const { message } = received(rendered.bytes);
    const placer = placerNumberOf(o._id);
    expect(names(message)).toEqual([
      'MSH',
      'PID',
      'PV1',
      'ORC',
      'TQ1',
      'OBR',
      'NTE',
      'DG1',
      'DG1',
      'SPM',
      'ORC',
      'TQ1',
      'OBR',
      'NTE',
      'DG1',
      'DG1',
      'OBX',
      'SPM',
    ]);

    const msh = message.header;
    expect(field(msh, 3)).toBe('HEALTHBRIDGE^2.25.1^ISO');
    expect(field(msh, 6)).toBe('LABCORP^2.16.840.1.113883.3.2^ISO');
    expect(field(msh, 7)).toBe('20260304050607+0000');
    expect(field(msh, 9)).toBe('OML^O21^OML_O21');
    expect(field(msh, 10)).toBe(`${placer}O`);
    expect(field(msh, 11)).toBe('P');
    expect(field(msh, 12)).toBe('2.5.1');
    expect([field(msh, 15), field(msh, 16)]).toEqual(['NE', 'AL']);
    expect(field(msh, 18)).toBe('UNICODE UTF-8');
    // Two OBRs share the placer number: the PRN component (non-unique placer number, grouped by ORC-4).
    expect(msh.getField(21).components.map((c) => c[2])).toEqual(['2.16.840.1.113883.9.66', '2.16.840.1.113883.9.78', '2.16.840.1.113883.9.81']);
    expect(msh.getField(21).components.every((c) => c[3] === 'ISO')).toBe(true);

    const pid = seg(message, 'PID');
    expect(field(pid, 3)).toBe(`${o.user_id}^^^HEALTHBRIDGE&${OID}&ISO^MR`);
    expect(field(pid, 5)).toBe('Smith^Ana^^^^^L');
    expect(field(pid, 7)).toBe('19880412');
    expect(field(pid, 8)).toBe('F');
    expect(field(pid, 11)).toBe('1 Main St^Apt 2^San Francisco^CA^94105^USA^H');
    expect(field(pid, 13)).toBe('^PRN^PH^^1^415^5552671~^NET^Internet^ana@example.com');
    expect(field(seg(message, 'PV1'), 2)).toBe('O');
    expect(message.getAllSegments('IN1')).toHaveLength(0);
    expect(message.getAllSegments('GT1')).toHaveLength(0);

    const placerId = `${placer}^HEALTHBRIDGE^${OID}^ISO`;
    const provider = '1234567893^Feller^Hans^^^^^^NPI&2.16.840.1.113883.4.6&ISO^L^^^NPI';
    for (const n of [0, 1]) {
      const orc = seg(message, 'ORC', n);
      const obr = seg(message, 'OBR', n);
      expect([field(orc, 1), field(orc, 2), field(orc, 4), field(orc, 9), field(orc, 12)]).toEqual(['NW', placerId, placerId, '20260304050607+0000', provider]);
      expect([field(obr, 1), field(obr, 2), field(obr, 16), field(obr, 18)]).toEqual([String(n + 1), placerId, provider, '04123456']);
      expect(field(seg(message, 'TQ1', n), 9)).toBe('S^Stat^HL70485');
      expect(field(seg(message, 'SPM', n), 2)).toBe(`S123456789&HEALTHBRIDGE&${OID}&ISO`);
      expect(field(seg(message, 'SPM', n), 4)).toBe('119364003^Serum specimen^SCT');
    }
    // OBR-4: the account's code for the markers, named after the marker, LOINC as the alternate.
    expect(field(seg(message, 'OBR', 0), 4)).toBe('322000^Comprehensive Metabolic Panel (CMP-14)^L^24323-8^^LN');
    expect(field(seg(message, 'OBR', 1), 4)).toBe('005009^CBC With Differential/Platelet^L^58410-2^^LN');
    expect([field(seg(message, 'DG1', 0), 3), field(seg(message, 'DG1', 1), 3), field(seg(message, 'DG1', 1), 6)]).toEqual([
      'E11.9^^I10C',
      'Z13.220^^I10C',
      'W',
    ]);
    // The answer sits under the OBR of its marker; values escaped, read back intact.
    const obx = seg(message, 'OBX');
    expect([field(obx, 2), field(obx, 3), field(obx, 5), field(obx, 11)]).toEqual(['ST', 'FAST^^L', 'Y\\S\\es', 'O']);
    expect(unescapeHl7(field(obx, 5))).toBe('Y^es');
    const nte = seg(message, 'NTE');
    expect(field(nte, 2)).toBe('P');
    expect(unescapeHl7(field(nte, 3))).toBe('Fasting 12h | patient on "metformin" ^ & ~ \\ ok\nsecond line');
  });

  it('says PRU for a single ordered code, AL/AL in enhanced mode and T outside production', () => {
    const { message } = received(renderOrderMessage(input(order([THYROID]), account({ ack_mode: 'enhanced', environment: 'sandbox' }))).bytes);
    const msh = message.header;
    expect(msh.getField(21).components.map((c) => c[2])).toEqual(['2.16.840.1.113883.9.66', '2.16.840.1.113883.9.78', '2.16.840.1.113883.9.82']);
    expect([field(msh, 15), field(msh, 16), field(msh, 11)]).toEqual(['AL', 'AL', 'T']);
    expect(field(seg(message, 'ORC'), 4)).toBe('');
    expect(field(seg(message, 'TQ1'), 9)).toBe('R^Routine^HL70485');
    expect(field(seg(message, 'OBR'), 4)).toBe('224576^Thyroid Panel (at-home phlebotomy)^L');
  });

  it('bills by type: IN1 + GT1 for commercial insurance, GT1 (the patient) for patient bill, neither for client bill', () => {
    const insured = renderOrderMessage(
      input(order([THYROID], { billing_type: 'commercial_insurance', health_insurance_id: 'ins-1' }), account(), { insurance, icdCodes: ['E03.9'] }),
    );
    const { message } = received(insured.bytes);
    expect(names(message).slice(0, 5)).toEqual(['MSH', 'PID', 'PV1', 'IN1', 'GT1']);
    const in1 = seg(message, 'IN1');
    expect([field(in1, 2), field(in1, 3), field(in1, 4), field(in1, 8), field(in1, 16), field(in1, 17), field(in1, 18)]).toEqual([
      'AETNA',
      `AETNA^^^HEALTHBRIDGE&${OID}&ISO`,
      'Aetna',
      'GRP-7',
      'Smith^Bo^^^^^L',
      'SPO^Spouse^HL70063',
      '19850102',
    ]);
    expect(field(in1, 5)).toBe('151 Farmington Avenue^^Hartford^CT^06156^USA^B');
    expect(unescapeHl7(field(in1, 36))).toBe('W123|456');
    const gt1 = seg(message, 'GT1');
    expect([field(gt1, 3), field(gt1, 6), field(gt1, 11)]).toEqual(['Smith^Bo^^^^^L', '^PRN^PH^^1^415^5550000', 'SPO^Spouse^HL70063']);

    const patientBill = received(renderOrderMessage(input(order([THYROID], { billing_type: 'patient_bill' }), account())).bytes).message;
    expect(names(patientBill).slice(0, 4)).toEqual(['MSH', 'PID', 'PV1', 'GT1']);
    expect(patientBill.getAllSegments('IN1')).toHaveLength(0);
    const patientGt1 = seg(patientBill, 'GT1');
    expect([field(patientGt1, 3), field(patientGt1, 8), field(patientGt1, 9), field(patientGt1, 11)]).toEqual([
      'Smith^Ana^^^^^L',
      '19880412',
      'F',
      'SEL^Self^HL70063',
    ]);

    expect(() => renderOrderMessage(input(order([THYROID], { billing_type: 'commercial_insurance' }), account(), { icdCodes: ['E03.9'] }))).toThrow(
      expect.objectContaining({ field: 'health_insurance_id' }),
    );
    expect(() => renderOrderMessage(input(order([THYROID], { billing_type: 'commercial_insurance' }), account(), { insurance }))).toThrow(
      expect.objectContaining({ field: 'icd_codes' }),
    );
  });

  it('cancels with ORC-1 = CA, the same control-id scheme and placer number, without billing or clinical segments', () => {
    const o = order([METABOLIC_CBC], { billing_type: 'commercial_insurance', clinical_notes: 'x' });
    const cancel = renderCancelMessage({
      ...input(o, account(), { icdCodes: ['E11.9'], insurance }),
      controlId: orderControlId(placerNumberOf(o._id), 'cancel'),
    });
    const { message } = received(cancel.bytes);
    expect(names(message)).toEqual(['MSH', 'PID', 'PV1', 'ORC', 'TQ1', 'OBR', 'ORC', 'TQ1', 'OBR']);
    expect(field(message.header, 10)).toBe(`${placerNumberOf(o._id)}C`);
    expect(message.getAllSegments('ORC').map((orc) => field(orc, 1))).toEqual(['CA', 'CA']);
    expect(field(seg(message, 'OBR'), 2)).toBe(`${placerNumberOf(o._id)}^HEALTHBRIDGE^${OID}^ISO`);
  });

  it('uses the stored placer number when the order has one', () => {
    const o = { ...order([THYROID]), placer_number: 'HB0123456789AB' } as LabOrderDoc;
    const { message } = received(renderOrderMessage(input(o, account())).bytes);
    expect(field(seg(message, 'ORC'), 2)).toBe(`HB0123456789AB^HEALTHBRIDGE^${OID}^ISO`);
  });
});

describe('order messages: ORM^O01 2.3', () => {
  it('carries the order in 2.3 form: no MSH-21, original mode with MSH-15/16 empty, plain placer number, I10 diagnoses', () => {
    const quest = account({
      lab_slug: 'quest',
      lab_id: 2,
      profile: 'ORM_2.3',
      charset: '8859/1',
      msh: { sending_application: 'HB', sending_facility: '73917104', receiving_application: '', receiving_facility: 'QDI' },
    });
    const o = order([CMP, CBC], { priority: true, clinical_notes: 'note' });
    const rendered = renderOrderMessage(input(o, quest, { icdCodes: ['R73.09'], aoeAnswers: [{ marker_id: 2040, question_id: 'FASTING', answer: 'Y' }] }));
    const { message, encoding } = received(rendered.bytes);
    expect(encoding).toBe('iso-8859-1');
    expect(names(message)).toEqual(['MSH', 'PID', 'PV1', 'ORC', 'OBR', 'NTE', 'DG1', 'OBX', 'ORC', 'OBR', 'NTE', 'DG1']);
    const msh = message.header;
    expect([field(msh, 4), field(msh, 5), field(msh, 6), field(msh, 9), field(msh, 12), field(msh, 15), field(msh, 16), field(msh, 18)]).toEqual([
      '73917104',
      '',
      'QDI',
      'ORM^O01',
      '2.3',
      '',
      '',
      '8859/1',
    ]);
    expect(msh.getField(21)).toBeUndefined();
    const placer = placerNumberOf(o._id);
    expect(field(seg(message, 'PID'), 3)).toBe(`${o.user_id}^^^HEALTHBRIDGE^MR`);
    expect(field(seg(message, 'PID'), 5)).toBe('Smith^Ana');
    expect(field(seg(message, 'PID'), 13)).toBe('(415)555-2671^PRN^PH^^1^415^5552671~^NET^Internet^ana@example.com');
    const orc = seg(message, 'ORC');
    expect([field(orc, 1), field(orc, 2), field(orc, 7), field(orc, 12)]).toEqual(['NW', placer, '^^^^^S', '1234567893^Feller^Hans^^^^^^NPI']);
    expect([field(seg(message, 'OBR'), 2), field(seg(message, 'OBR'), 4), field(seg(message, 'OBR'), 27)]).toEqual([
      placer,
      'CMP-10231^Comprehensive Metabolic Panel (walk-in)^L',
      '^^^^^S',
    ]);
    expect(field(seg(message, 'OBR', 1), 4)).toBe('CBC-6399^Complete Blood Count (walk-in)^L');
    const dg1 = seg(message, 'DG1');
    expect([field(dg1, 2), field(dg1, 3), field(dg1, 6)]).toEqual(['I10', 'R73.09^^I10', 'W']);
  });
});

describe('names and addresses in three scripts', () => {
  const people = [
    { script: 'Latin with diacritics', first: 'Zoë', last: 'Łukasiewicz-Müller', city: 'Kraków', street: 'ul. Źródlana 7' },
    { script: 'Greek', first: 'Ἀλέξανδρος', last: 'Παπαδόπουλος', city: 'Αθήνα', street: 'Οδός Ερμού 12' },
    { script: 'Cyrillic', first: 'Дмитрий', last: 'Шостакович', city: 'Санкт-Петербург', street: 'Невский проспект 28' },
    { script: 'CJK', first: '小龍', last: '李', city: '東京都', street: '千代田区1-1' },
  ];
  const withPerson = (p: (typeof people)[number]) =>
    order([THYROID], {
      patient_details: { first_name: p.first, last_name: p.last, dob: '1990-01-01', gender: 'male', phone_number: '+442071234567', email: 'p@example.com' },
      patient_address: {
        receiver_name: null,
        first_line: p.street,
        second_line: null,
        city: p.city,
        state: '',
        zip: '00-001',
        country: 'PL',
        phone_number: null,
      },
    });

  it.each(people)('$script round-trips through UTF-8 in both profiles', (p) => {
    for (const profile of ['LOI_2.5.1', 'ORM_2.3'] as const) {
      const { message } = received(renderOrderMessage(input(withPerson(p), account({ profile }))).bytes);
      const pid = seg(message, 'PID');
      expect([unescapeHl7(pid.getComponent(5, 1)), unescapeHl7(pid.getComponent(5, 2))]).toEqual([p.last, p.first]);
      expect([unescapeHl7(pid.getComponent(11, 1)), unescapeHl7(pid.getComponent(11, 3))]).toEqual([p.street, p.city]);
    }
  });

  it('Latin-1 carries Müller and refuses 李, naming the field; 8859/5 carries Cyrillic, ASCII refuses it', () => {
    const latin1 = account({ charset: '8859/1' });
    const muller = renderOrderMessage(input(order([THYROID], { patient_details: { ...order([THYROID]).patient_details!, last_name: 'Müller' } }), latin1));
    expect(muller.bytes.includes(Buffer.from([0x4d, 0xfc, 0x6c, 0x6c]))).toBe(true); // "Mül" in Latin-1
    expect(seg(received(muller.bytes).message, 'PID').getComponent(5, 1)).toBe('Müller');

    const refusal = (p: (typeof people)[number], charset: string) => {
      try {
        renderOrderMessage(input(withPerson(p), account({ charset })));
      } catch (err) {
        return err;
      }
      return null;
    };
    const cjk = refusal(people[3], '8859/1');
    expect(cjk).toBeInstanceOf(OrderNotRenderable);
    expect(cjk).toMatchObject({ field: 'patient_details.last_name' });
    expect((cjk as Error).message).toContain("'李'");
    expect(refusal(people[2], 'ASCII')).toMatchObject({ field: 'patient_details.last_name' });
    expect(refusal(people[1], '8859/1')).toMatchObject({ field: 'patient_details.last_name' });
    expect(refusal(people[0], '8859/1')).toMatchObject({ field: 'patient_details.last_name' }); // Ł is not Latin-1
    expect(refusal(people[0], 'UNICODE UTF-8')).toBeNull();
    expect(refusal(people[2], '8859/5')).toBeNull();
    expect(refusal(people[1], '8859/7')).toMatchObject({ field: 'patient_details.first_name' }); // polytonic Ἀ is not in 8859/7

    const cityOnly = order([THYROID], { patient_address: { ...order([THYROID]).patient_address!, city: 'Αθήνα' } });
    expect(() => renderOrderMessage(input(cityOnly, latin1))).toThrow(expect.objectContaining({ field: 'patient_address.city' }));
  });
});

describe('orders a lab cannot take', () => {
  it('names the marker the account has no order code for', () => {
    const codes = { ...account().order_codes };
    delete codes['3041'];
    expect(() => renderOrderMessage(input(order([METABOLIC_CBC]), account({ order_codes: codes })))).toThrow(
      expect.objectContaining({ field: 'marker_ids', message: expect.stringMatching(/marker 3041 \(CBC With Differential\/Platelet\)/) }),
    );
  });

  it('names a missing patient, physician or an answer for a marker the order lacks', () => {
    expect(() => renderOrderMessage(input(order([THYROID], { patient_details: null }), account()))).toThrow(
      expect.objectContaining({ field: 'patient_details' }),
    );
    expect(() => renderOrderMessage(input(order([THYROID], { physician: null }), account()))).toThrow(expect.objectContaining({ field: 'physician' }));
    expect(() => renderOrderMessage(input(order([THYROID]), account(), { aoeAnswers: [{ marker_id: 3041, question_id: 'Q', answer: 'A' }] }))).toThrow(
      expect.objectContaining({ field: 'aoe_answers[0].marker_id' }),
    );
  });
});

describe('acknowledgements', () => {
  const header = (type: string, version = '2.5.1') => `MSH|^~\\&|LCS|LABCORP|HEALTHBRIDGE|ACME|20260304050608||${type}|L1|P|${version}`;

  it('reads AA, and AE/AR with the ERR text unescaped (ERR-8, ERR-3, 2.3 ERR-1, MSA-3)', () => {
    expect(parseAcknowledgement(`${header('ACK^O21^ACK')}\rMSA|AA|HB1O`)).toEqual({
      controlId: 'HB1O',
      code: 'AA',
      text: null,
      orderControl: null,
      fillerNumber: null,
      orderControlReason: null,
    });
    const ae = parseAcknowledgement(`${header('ACK^O21^ACK')}\rMSA|AE|HB1O\rERR||PID^1^7|102^Data type error^HL70357|E||||Date of birth \\F\\ invalid`);
    expect(ae).toMatchObject({ code: 'AE', text: 'PID-7: Date of birth | invalid' });
    expect(parseAcknowledgement(`${header('ACK^O21^ACK')}\rMSA|AR|HB1O\rERR|||200^Unsupported message type^HL70357|E`).text).toBe('Unsupported message type');
    expect(parseAcknowledgement(`${header('ACK^O01', '2.3')}\rMSA|AR|HB1O|Bad order\rERR|OBR^1^4^204&Unknown test code&HL70357`).text).toBe(
      'OBR-4: Unknown test code',
    );
    expect(parseAcknowledgement(`${header('ACK^O01', '2.3')}\rMSA|AE|HB1O|Account 0412 \\T\\ unknown`).text).toBe('Account 0412 & unknown');
    expect(parseAcknowledgement(`${header('ACK^O21^ACK')}\rMSA|CA|HB1O`).code).toBe('CA');
    expect(() => parseAcknowledgement(`${header('ACK')}\rMSA|ZZ|HB1O`)).toThrow(MalformedAcknowledgement);
    expect(() => parseAcknowledgement(`${header('ACK')}`)).toThrow(/no MSA/);
  });

  it('reads ORR^O02 / ORL^O22: CR, UC with its reason (ORC-16), the filler number (ORC-3)', () => {
    const orr = parseAcknowledgement(`${header('ORR^O02', '2.3')}\rMSA|AA|HB1C\rPID|1||u1\rORC|CR|HB1|LC998877`);
    expect(orr).toMatchObject({ code: 'AA', orderControl: 'CR', fillerNumber: 'LC998877', text: null });
    const orl = parseAcknowledgement(
      `${header('ORL^O22^ORL_O22')}\rMSA|AA|HB1C\rPID|1||u1\rORC|CR|HB1^HB^2.25^ISO|LC1^LAB^2.16^ISO\rORC|UC|HB1^HB^2.25^ISO|LC1^LAB^2.16^ISO|||||||||||||SPR^Specimen already in process\\F\\tested`,
    );
    expect(orl).toMatchObject({
      orderControl: 'UC',
      fillerNumber: 'LC1',
      orderControlReason: 'Specimen already in process|tested',
      text: 'Specimen already in process|tested',
    });
    expect(parseAcknowledgement(`${header('ORL^O22^ORL_O22')}\rMSA|AA|HB1O\rORC|OK|HB1|\rOBR|1|HB1|F-77`).fillerNumber).toBe('F-77');
    expect(parseAcknowledgement(`${header('ORR^O02', '2.3')}\rMSA|AA|HB1C|OK\rORC|UC|HB1|F-77|||||||||||||^Already tested`).text).toBe('Already tested');
  });

  it('the transport finds MSA-2 in raw bytes whatever the charset', () => {
    const latin1 = iconv.encode(`${header('ACK^O21^ACK')}|||||||8859/1\rMSA|AE|HB00000000000O|Müller unbekannt`, 'latin1');
    expect(readAcknowledgementHeader(latin1)).toEqual({ code: 'AE', controlId: 'HB00000000000O' });
    expect(readAcknowledgementHeader(Buffer.from(`${header('ACK')}\rERR|x`))).toBeNull();
    expect(readAcknowledgementHeader(Buffer.from('garbage'))).toBeNull();
  });

  it('builds our ACK: MSH swapped, MSA, ERR on refusals, MSH-18 kept so the reply is written in the message charset', () => {
    const incoming = 'MSH|^~\\&|LAB|LABFAC|HB|HBFAC|20260304||ORU^R01^ORU_R01|M-42|P|2.5.1||||||8859/1\rPID|1';
    const ack = buildAcknowledgement(incoming, 'AE', 'Order HB1 | unknown', { now: NOW, controlId: 'A1' });
    const message = Hl7Message.parse(ack);
    expect([3, 4, 5, 6, 7, 9, 10, 12, 18].map((n) => field(message.header, n))).toEqual([
      'HB',
      'HBFAC',
      'LAB',
      'LABFAC',
      '20260304050607+0000',
      'ACK^R01^ACK',
      'A1',
      '2.5.1',
      '8859/1',
    ]);
    expect(field(seg(message, 'MSA'), 1)).toBe('AE');
    expect(field(seg(message, 'MSA'), 2)).toBe('M-42');
    expect(field(seg(message, 'ERR'), 3)).toBe('207^Application internal error^HL70357');
    expect(parseAcknowledgement(ack)).toMatchObject({ controlId: 'M-42', code: 'AE', text: 'Order HB1 | unknown' });
    // Written in the message's charset; what that charset cannot carry in our own text becomes '?', never a failed ACK.
    const latin1Ack = buildAcknowledgement(incoming, 'AE', 'Müller ≠ 李');
    expect(encodeAcknowledgement(latin1Ack, 'UNICODE UTF-8').includes(Buffer.from([0x4d, 0xfc, 0x6c, 0x6c, 0x65, 0x72, 0x20, 0x3f, 0x20, 0x3f]))).toBe(true);
    expect(decodeHl7(encodeAcknowledgement(buildAcknowledgement(incoming.replace('8859/1', ''), 'AE', '李'), 'UNICODE UTF-8'), 'UNICODE UTF-8')).toContain(
      'MSA|AE|M-42|李',
    );

    const legacy = buildAcknowledgement(incoming.replace('2.5.1', '2.3'), 'AR', 'bad & worse');
    expect(legacy).toContain('\rERR|^^^207&bad \\T\\ worse&HL70357');
    expect(parseAcknowledgement(legacy).text).toBe('bad & worse');
    const aa = Hl7Message.parse(buildAcknowledgement(incoming, 'AA'));
    expect(aa.getAllSegments('ERR')).toHaveLength(0);
    expect(field(aa.header, 10).length).toBeLessThanOrEqual(20);
    expect(buildAcknowledgement('not hl7', 'AR', 'unreadable')).toMatch(/^MSH\|\^~\\&\|.*\rMSA\|AR\|\|unreadable\rERR/);
  });

  it('the ORU reader still unescapes what labs send (shared escapes)', () => {
    const oru = parseOru(
      'MSH|^~\\&|LAB|F|HB|F|20260304||ORU^R01|C1|P|2.5.1\rOBR|1|HB1||X^Y|||20260304\rOBX|1|ST|1-8^Z^LN||A\\T\\B \\XC3BC\\||||||F\rNTE|1||line\\.br\\two',
    );
    expect(oru.requests[0].observations[0].value[0]).toBe('A&B ü');
    expect(oru.requests[0].observations[0].notes).toEqual(['line\ntwo']);
  });
});
