import { encodeMessage, escapeValue, hl7Time } from './fake-lab-hl7';

/**
 * ORU^R01 results as the fake laboratory sends them: HL7 2.5.1 LRI (MSH-21 profile ids) or the legacy 2.3 most
 * labs still send; through their life (P, F, C, X), several OBRs in one message, a PDF in an ED OBX, any character
 * set with or without MSH-18, and the lab's status messages (specimen received, specimen problem).
 */

export interface FakeObservation {
  loinc?: string | null;
  /** The lab's own code (OBX-3, with LOINC first when there is one). */
  code: string;
  name: string;
  /** OBX-5, escaped by the builder (delimiters, line breaks). */
  value?: string;
  /** OBX-5 written as is (already HL7-escaped, e.g. '\\X41\\'): to send escape sequences a test chooses. */
  rawValue?: string;
  /** OBX-2 (default NM for a number, else ST). */
  valueType?: 'NM' | 'SN' | 'ST' | 'TX' | 'FT' | 'CE' | 'CWE';
  units?: string | null;
  range?: string | null;
  flags?: string | string[] | null;
  /** OBX-11 (default: the OBR's status, P/F/C). */
  status?: 'P' | 'F' | 'C' | 'X' | 'W';
  notes?: string[];
}

export interface FakeResultTest {
  /** OBR-4: the lab's order code and name (and LOINC). */
  code: string;
  name: string;
  loinc?: string | null;
  /** OBR-25: P preliminary, F final, C corrected, X cannot be done (sent with no OBX), I specimen received (no OBX). */
  status: 'P' | 'F' | 'C' | 'X' | 'I';
  observations?: FakeObservation[];
  /** With status X: why the specimen was rejected (HL7 table 0490, e.g. RB broken container) — SPM-21 (LRI), NTE (2.3). */
  specimenRejectReason?: { code: string; text: string };
}

export interface FakeResult {
  /** Default (FakeLab.sendResults): ORU_2.3 when the order the lab holds came as ORM^O01, else LRI_2.5.1. */
  profile?: 'LRI_2.5.1' | 'ORU_2.3';
  /** MSH-10 (default: a fresh one). The same id and `at` give the same bytes: a resend. */
  controlId?: string;
  /** MSH-7 and the observation times (default now). */
  at?: Date;
  /** ORC-2/OBR-2; null: unsolicited (the lab's own order, no placer number). */
  placerNumber: string | null;
  /** ORC-2 as the order wrote it (with its assigning authority); default: the placer number alone. */
  placerField?: string;
  /** ORC-3/OBR-3 (default: the fake's accession number for the order). */
  fillerNumber?: string | null;
  patient?: { id?: string; family: string; given: string; birthDate: string; sex?: string };
  tests: FakeResultTest[];
  /** The report as a PDF: an ED OBX (base64) after the first OBR's observations. */
  pdf?: Buffer;
  /** Default (FakeLab.sendResults): the lab's agreed character set if it is one of these, else 'UNICODE UTF-8'. */
  charset?: 'UNICODE UTF-8' | '8859/1' | 'ASCII';
  /** Default true; false leaves MSH-18 empty (Latin-1 messages without MSH-18 are common). */
  declareCharset?: boolean;
  sender?: { application: string; facility: string };
  receiver?: { application: string; facility: string };
}

const LRI_PROFILES = [
  'LRI_Common_Component^^2.16.840.1.113883.9.16^ISO',
  'LRI_GU_Component^^2.16.840.1.113883.9.12^ISO',
  'LRI_RU_Component^^2.16.840.1.113883.9.14^ISO',
].join('~');

const line = (fields: (string | undefined)[]) =>
  Array.from(fields, (v) => v ?? '')
    .join('|')
    .replace(/\|+$/, '');

function observationId(o: { loinc?: string | null; code: string; name: string }): string {
  const name = escapeValue(o.name);
  return o.loinc ? `${o.loinc}^${name}^LN^${escapeValue(o.code)}^${name}^L` : `${escapeValue(o.code)}^${name}^L`;
}

/** The ORU^R01 text and bytes (in the message's character set). */
export function buildResultMessage(
  result: FakeResult,
  defaults: { controlId: string; fillerNumber: string },
): { controlId: string; text: string; bytes: Buffer } {
  const lri = (result.profile ?? 'LRI_2.5.1') === 'LRI_2.5.1';
  const at = result.at ?? new Date();
  const time = hl7Time(at);
  const collected = hl7Time(new Date(at.getTime() - 26 * 3600_000));
  const received = hl7Time(new Date(at.getTime() - 20 * 3600_000));
  const controlId = result.controlId ?? defaults.controlId;
  const charset = result.charset ?? 'UNICODE UTF-8';
  const declare = result.declareCharset ?? true;
  const placer = result.placerNumber === null ? '' : (result.placerField ?? escapeValue(result.placerNumber));
  const filler = result.fillerNumber === null ? '' : escapeValue(result.fillerNumber ?? defaults.fillerNumber);
  const sender = result.sender ?? { application: 'FAKELAB', facility: 'FAKELAB^05D0000000^CLIA' };
  const receiver = result.receiver ?? { application: 'HEALTHBRIDGE', facility: 'HEALTHBRIDGE' };
  const patient = result.patient ?? { family: 'UNKNOWN', given: 'PATIENT', birthDate: '19700101' };
  const msh = [
    'MSH',
    '^~\\&',
    sender.application,
    sender.facility,
    receiver.application,
    receiver.facility,
    time,
    '',
    lri ? 'ORU^R01^ORU_R01' : 'ORU^R01',
    controlId,
    'P',
    lri ? '2.5.1' : '2.3',
    '',
    '',
    lri ? 'NE' : '',
    lri ? 'NE' : '',
    '',
    declare ? charset : '',
    '',
    '',
    lri ? LRI_PROFILES : '',
  ];
  const segments = [`MSH|${line(msh.slice(1))}`];
  const birthDate = patient.birthDate.replace(/-/g, '');
  segments.push(
    line([
      'PID',
      '1',
      '',
      `${escapeValue(patient.id ?? 'UNKNOWN')}^^^FAKELAB^PI`,
      '',
      `${escapeValue(patient.family)}^${escapeValue(patient.given)}`,
      '',
      birthDate,
      patient.sex ?? 'U',
    ]),
  );
  result.tests.forEach((test, t) => {
    const orcStatus = test.status === 'X' ? 'CA' : test.status === 'I' ? 'IP' : 'CM';
    segments.push(line(['ORC', 'RE', placer, filler, '', orcStatus]));
    const obr: string[] = ['OBR', String(t + 1), placer, filler, observationId(test), '', '', collected];
    obr[14] = lri ? '' : received;
    obr[22] = time;
    obr[25] = test.status;
    segments.push(line(obr));
    if (!lri && test.specimenRejectReason) segments.push(line(['NTE', '1', 'L', escapeValue(`Specimen rejected: ${test.specimenRejectReason.text}`)]));
    let setId = 0;
    const observations = test.status === 'X' || test.status === 'I' ? [] : (test.observations ?? []);
    for (const o of observations) {
      const value = o.rawValue ?? escapeValue(o.value ?? '');
      const valueType = o.valueType ?? (/^-?\d+(\.\d+)?$/.test(o.value ?? '') ? 'NM' : 'ST');
      const flags = Array.isArray(o.flags) ? o.flags.join('~') : (o.flags ?? '');
      const obx: string[] = ['OBX', String(++setId), valueType, observationId(o), '', value];
      obx[6] = o.units ? (lri ? `${escapeValue(o.units)}^^UCUM` : escapeValue(o.units)) : '';
      obx[7] = escapeValue(o.range ?? '');
      obx[8] = flags;
      obx[11] = o.status ?? test.status;
      obx[14] = collected;
      if (lri) {
        obx[19] = time;
        obx[23] = 'Fake Laboratory^^^^^CLIA&2.16.840.1.113883.4.7&ISO^XX^^^05D0000000';
      }
      segments.push(line(obx));
      (o.notes ?? []).forEach((note, n) => segments.push(line(['NTE', String(n + 1), 'L', escapeValue(note)])));
    }
    if (t === 0 && result.pdf) {
      const obx: string[] = ['OBX', String(++setId), 'ED', 'PDF^Report^L', '', `FAKELAB^application^pdf^Base64^${result.pdf.toString('base64')}`];
      obx[11] = test.status === 'I' || test.status === 'X' ? 'F' : test.status;
      segments.push(line(obx));
    }
    if (lri) {
      const spm: string[] = ['SPM', '1', `${placer.split('^')[0]}-S1&&&^${filler}`, '', '119297000^Blood specimen^SCT'];
      spm[17] = collected;
      spm[18] = received;
      if (test.specimenRejectReason) spm[21] = `${escapeValue(test.specimenRejectReason.code)}^${escapeValue(test.specimenRejectReason.text)}^HL70490`;
      segments.push(line(spm));
    }
  });
  const text = `${segments.join('\r')}\r`;
  return { controlId, text, bytes: encodeMessage(text, charset) };
}

/** Status message: the lab received the specimen (OBR-25 I, no results yet). */
export function specimenReceived(placerNumber: string, tests: { code: string; name: string }[]): FakeResult {
  return { placerNumber, tests: tests.map((t) => ({ ...t, status: 'I' as const })) };
}

/** Status message: the specimen cannot be tested (OBR-25 X, no OBX, SPM-21 reject reason). */
export function specimenProblem(placerNumber: string, tests: { code: string; name: string }[], reason = { code: 'RB', text: 'Broken container' }): FakeResult {
  return { placerNumber, tests: tests.map((t) => ({ ...t, status: 'X' as const, specimenRejectReason: reason })) };
}
