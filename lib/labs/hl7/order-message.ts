import type { InsuranceRecord } from '../../../schemas/insurance';
import type { LabCatalogue } from '../catalogue';
import type { LabAccountDoc } from '../lab-accounts';
import type { AddressDoc, LabOrderDoc } from '../model';
import { placerNumberOf } from '../placer-number';
import { assertRepresentable, CharsetUnrepresentable, encodeHl7 } from './charsets';
import { escapeHl7 } from './escapes';

/**
 * The order message a lab receives (contract C3): `ORM^O01` in HL7 2.3 for the 2.3-era interfaces most labs still
 * run, or `OML^O21^OML_O21` in 2.5.1 following the Laboratory Orders Interface (LOI) guide, with its profile ids in
 * MSH-21 and every identifier under an ISO OID (the GU component). Pure: the caller reads the order, the account
 * and the insurance; this writes the text and its bytes in the lab's charset.
 *
 * Segments: MSH, PID, PV1, then IN1 + GT1 (commercial insurance) or GT1 (patient bill) or neither (client bill:
 * billed to the account), then per distinct lab order code an ORC (+ TQ1 in LOI) and OBR with the clinical notes
 * (NTE), the diagnoses (DG1), the ask-at-order-entry answers of its markers (OBX) and, in LOI, the specimen (SPM).
 * A cancellation repeats PID, PV1, ORC (ORC-1 = CA) and OBR: what the lab needs to find the order.
 */

/** Our assigning authority: `2.25.<uuid>` is an OID anyone may mint without registration (ITU-T X.667). */
export const HEALTHBRIDGE_ASSIGNING_AUTHORITY = { namespace: 'HEALTHBRIDGE', oid: '2.25.99237012636273541333842302135705443109' } as const;

/** The LOI profile components (MSH-21) [usnistgov hit-mu-tools LOI_GU_PRU / LOI_GU_PRN]. */
const LOI_COMMON = 'LOI_Common_Component^LOI Base Profile^2.16.840.1.113883.9.66^ISO';
const LOI_GU = 'LOI_GU_Component^LOI GU Profile^2.16.840.1.113883.9.78^ISO';
/** Placer order number unique per OBR (one ordered service). */
const LAB_PRU = 'LAB_PRU_Component^LOI PRU Profile^2.16.840.1.113883.9.82^ISO';
/** Placer order number shared by the OBRs of one order (ours, when it orders several codes); ORC-4 groups them. */
const LAB_PRN = 'LAB_PRN_Component^LOI PRN Profile^2.16.840.1.113883.9.81^ISO';
/** The NPI's assigning authority (CMS) as LOI's GU component writes it. */
const NPI_AUTHORITY = 'NPI&2.16.840.1.113883.4.6&ISO';

/** SNOMED CT specimen types (SPM-4) for the catalogue's sample types. */
const SPECIMEN_TYPES: Record<string, [string, string]> = {
  serum: ['119364003', 'Serum specimen'],
  dried_blood_spot: ['440500007', 'Dried blood spot specimen'],
  arm_collector: ['122554006', 'Capillary blood specimen'],
  saliva: ['119342007', 'Saliva specimen'],
  urine: ['122575003', 'Urine specimen'],
  stool: ['119339001', 'Stool specimen'],
};

export interface AoeAnswer {
  marker_id: number;
  question_id: string;
  answer: string;
}

/** The fields part A adds to orders (C2a); older orders lack them. */
type OrderWithLabFields = LabOrderDoc & { placer_number?: string; lab_account_id?: string | null };

export interface OrderMessageInput {
  order: LabOrderDoc;
  account: LabAccountDoc;
  catalogue: LabCatalogue;
  /** MSH-10: `<placer>O` for the order, `<placer>C` for its cancellation (stable across resends). */
  controlId: string;
  now: Date;
  /** ICD-10-CM codes (the order's `icd_codes`). */
  icdCodes: string[];
  aoeAnswers: AoeAnswer[];
  /** The order's health insurance record (`health_insurance_id`), for commercial_insurance orders. */
  insurance: InsuranceRecord | null;
  /** Our assigning authority for PID-3, ORC-2/OBR-2 and SPM-2 (default HEALTHBRIDGE_ASSIGNING_AUTHORITY). */
  assigningAuthority?: { namespace: string; oid: string };
}

/** The order cannot be written for this lab; `field` names the order's field (or the account's) at fault. */
export class OrderNotRenderable extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

export interface RenderedMessage {
  text: string;
  bytes: Buffer;
}

/** MSH-10 of an order's messages: `<placer>O` for the order, `<placer>C` for its cancellation, the same on every resend. */
export function orderControlId(placerNumber: string, kind: 'order' | 'cancel'): string {
  return `${placerNumber}${kind === 'order' ? 'O' : 'C'}`;
}

export function renderOrderMessage(input: OrderMessageInput): RenderedMessage {
  return render(input, 'NW');
}

export function renderCancelMessage(input: OrderMessageInput): RenderedMessage {
  return render(input, 'CA');
}

/** An ordered service: one OBR, a lab order code covering some of the order's markers. */
interface OrderedService {
  code: string;
  loinc: string | null;
  name: string;
  markerIds: number[];
}

/** HL7 timestamp to the second, in UTC with its offset (LOI wants the offset). */
function hl7Timestamp(at: Date): string {
  return `${at.toISOString().replace(/[-:T]/g, '').slice(0, 14)}+0000`;
}

/** Fields of a segment (index = field number), trailing empty ones dropped. */
function segment(name: string, fields: Record<number, string | undefined>): string {
  const last = Math.max(
    0,
    ...Object.keys(fields)
      .map(Number)
      .filter((n) => fields[n]),
  );
  const out = [name];
  for (let n = 1; n <= last; n += 1) out.push(fields[n] ?? '');
  return out.join('|');
}

/** MSH with its fields by their numbers (MSH-1 is the separator itself, MSH-2 the encoding characters). */
function mshSegment(fields: Record<number, string | undefined>): string {
  const shifted: Record<number, string | undefined> = {};
  for (const [n, value] of Object.entries(fields)) shifted[Number(n) - 1] = value;
  return segment('MSH', { ...shifted, 1: '^~\\&' });
}

function render(input: OrderMessageInput, orderControl: 'NW' | 'CA'): RenderedMessage {
  const { account, catalogue, now } = input;
  const order = input.order as OrderWithLabFields;
  const loi = account.profile === 'LOI_2.5.1';
  if (!loi && account.profile !== 'ORM_2.3')
    throw new OrderNotRenderable('account.profile', `Lab account profile '${account.profile}' is not LOI_2.5.1 or ORM_2.3.`);
  const authority = input.assigningAuthority ?? HEALTHBRIDGE_ASSIGNING_AUTHORITY;
  const charset = account.charset || 'UNICODE UTF-8';
  const cancel = orderControl === 'CA';

  /** A value escaped for a field, once the lab's charset is known to carry it (else refused naming `field`). */
  const text = (value: string | null | undefined, field: string): string => {
    if (value === null || value === undefined || value === '') return '';
    try {
      assertRepresentable(value, charset, field);
    } catch (err) {
      if (err instanceof CharsetUnrepresentable) throw new OrderNotRenderable(field, err.message);
      throw err;
    }
    return escapeHl7(value);
  };
  /** An HD (MSH-3..6) as the account spells it: `name^oid^ISO` components kept, each escaped. */
  const hd = (value: string, field: string) =>
    value
      .split('^')
      .map((c) => text(c, field))
      .join('^');

  const patient = order.patient_details;
  if (!patient) throw new OrderNotRenderable('patient_details', 'The order has no patient details; a lab order needs the patient (PID).');
  const physician = order.physician;
  if (!physician) throw new OrderNotRenderable('physician', 'The order has no physician; a lab order needs the ordering provider (ORC-12, OBR-16).');
  if (!/^\d{10}$/.test(physician.npi)) throw new OrderNotRenderable('physician.npi', `The physician's NPI '${physician.npi}' is not 10 digits.`);

  const placer = order.placer_number ?? placerNumberOf(order._id);
  const services = orderedServices(order, account, catalogue);
  const shared = services.length > 1;
  const placerId = loi
    ? `${text(placer, 'placer_number')}^${text(authority.namespace, 'assigning_authority')}^${authority.oid}^ISO`
    : text(placer, 'placer_number');
  const provider = loi
    ? `${physician.npi}^${text(physician.last_name, 'physician.last_name')}^${text(physician.first_name, 'physician.first_name')}^^^^^^${NPI_AUTHORITY}^L^^^NPI`
    : `${physician.npi}^${text(physician.last_name, 'physician.last_name')}^${text(physician.first_name, 'physician.first_name')}^^^^^^NPI`;
  const authorityHd = loi ? `${text(authority.namespace, 'assigning_authority')}&${authority.oid}&ISO` : text(authority.namespace, 'assigning_authority');
  const codedRelationship = (relationship: string) => {
    const [code, name] = relationshipCode(relationship);
    return loi ? `${code}^${name}^HL70063` : code;
  };
  /** XAD; type H (home) for a person, B (business) for a company. */
  const address = (
    a: Pick<AddressDoc, 'first_line' | 'second_line' | 'city' | 'state' | 'zip' | 'country'> | null | undefined,
    field: string,
    type: 'H' | 'B' = 'H',
  ) =>
    a
      ? [
          text(a.first_line, `${field}.first_line`),
          text(a.second_line, `${field}.second_line`),
          text(a.city, `${field}.city`),
          text(a.state, `${field}.state`),
          text(a.zip, `${field}.zip`),
          text(countryCode(a.country), `${field}.country`),
          type,
        ].join('^')
      : '';
  const phone = (e164: string | null | undefined, field: string) => {
    if (!e164) return '';
    // NANP numbers in components (country, area, local); LOI leaves XTN-1 empty, 2.3 writes it as (999)999-9999.
    const nanp = /^\+1(\d{3})(\d{3})(\d{4})$/.exec(e164);
    if (nanp) return `${loi ? '' : `(${nanp[1]})${nanp[2]}-${nanp[3]}`}^PRN^PH^^1^${nanp[1]}^${nanp[2]}${nanp[3]}`;
    return `${text(e164, field)}^PRN^PH`;
  };
  const personName = (last: string, first: string, field: string) =>
    `${text(last, `${field}.last_name`)}^${text(first, `${field}.first_name`)}${loi ? '^^^^^L' : ''}`;
  const dob = (value: string | null | undefined, field: string) => {
    if (!value) return '';
    if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) throw new OrderNotRenderable(field, `Date of birth '${value}' is not YYYY-MM-DD.`);
    return value.replace(/-/g, '');
  };

  const segments: string[] = [];
  const ackTypes = account.ack_mode === 'enhanced' ? ['AL', 'AL'] : loi ? ['NE', 'AL'] : ['', ''];
  segments.push(
    mshSegment({
      3: hd(account.msh.sending_application, 'account.msh.sending_application'),
      4: hd(account.msh.sending_facility, 'account.msh.sending_facility'),
      5: hd(account.msh.receiving_application, 'account.msh.receiving_application'),
      6: hd(account.msh.receiving_facility, 'account.msh.receiving_facility'),
      7: hl7Timestamp(now),
      9: loi ? 'OML^O21^OML_O21' : 'ORM^O01',
      10: text(input.controlId, 'controlId'),
      11: account.environment === 'production' ? 'P' : 'T',
      12: loi ? '2.5.1' : '2.3',
      // Original mode is both empty in 2.3; LOI requires them, and its original-mode profile is NE/AL.
      15: ackTypes[0],
      16: ackTypes[1],
      18: text(charset, 'account.charset'),
      21: loi ? [LOI_COMMON, LOI_GU, shared ? LAB_PRN : LAB_PRU].join('~') : undefined,
    }),
  );

  const email = patient.email ? `^NET^Internet^${text(patient.email, 'patient_details.email')}` : '';
  segments.push(
    segment('PID', {
      1: '1',
      3: `${text(order.user_id, 'user_id')}^^^${authorityHd}^MR`,
      5: personName(patient.last_name, patient.first_name, 'patient_details'),
      7: dob(patient.dob, 'patient_details.dob'),
      8: sexCode(patient.gender),
      11: address(order.patient_address, 'patient_address'),
      13: [phone(patient.phone_number, 'patient_details.phone_number'), email].filter(Boolean).join('~'),
    }),
  );
  segments.push(segment('PV1', { 1: '1', 2: 'O' }));

  if (!cancel) {
    const billing = order.billing_type || 'client_bill';
    if (billing === 'commercial_insurance') {
      const insurance = input.insurance;
      if (!insurance)
        throw new OrderNotRenderable('health_insurance_id', "A commercial_insurance order needs the patient's insurance (IN1); the order has none.");
      if (input.icdCodes.length === 0)
        throw new OrderNotRenderable('icd_codes', 'A commercial_insurance order needs at least one ICD-10 diagnosis code (DG1) for the lab to bill the payor.');
      const insured = insurance.insured;
      segments.push(
        segment('IN1', {
          1: '1',
          2: text(insurance.payor_code, 'insurance.payor_code'),
          // IN1-3 is a CX; under LOI's GU component it needs an assigning authority: the payor code is ours.
          3: loi ? `${text(insurance.payor_code, 'insurance.payor_code')}^^^${authorityHd}` : text(insurance.payor_code, 'insurance.payor_code'),
          4: text(insurance.company.name, 'insurance.company.name'),
          5: address({ ...insurance.company.address, second_line: insurance.company.address.second_line ?? null }, 'insurance.company.address', 'B'),
          8: text(insurance.group_id, 'insurance.group_id'),
          16: personName(insured.last_name, insured.first_name, 'insurance.insured'),
          17: codedRelationship(insurance.relationship),
          18: dob(insured.dob, 'insurance.insured.dob'),
          19: address({ ...insured.address, second_line: insured.address.second_line ?? null }, 'insurance.insured.address'),
          36: text(insurance.member_id, 'insurance.member_id'),
        }),
      );
      // The guarantor is the insured themself unless the record names another one.
      const guarantor = insurance.guarantor;
      segments.push(
        guarantor
          ? segment('GT1', {
              1: '1',
              3: personName(guarantor.last_name, guarantor.first_name, 'insurance.guarantor'),
              5: address({ ...guarantor.address, second_line: guarantor.address.second_line ?? null }, 'insurance.guarantor.address'),
              6: phone(guarantor.phone_number, 'insurance.guarantor.phone_number'),
              11: codedRelationship(insurance.relationship),
            })
          : segment('GT1', {
              1: '1',
              3: personName(insured.last_name, insured.first_name, 'insurance.insured'),
              5: address({ ...insured.address, second_line: insured.address.second_line ?? null }, 'insurance.insured.address'),
              6: phone(insured.phone_number, 'insurance.insured.phone_number'),
              8: dob(insured.dob, 'insurance.insured.dob'),
              9: sexCode(insured.gender),
              11: codedRelationship('Self'),
            }),
      );
    } else if (billing === 'patient_bill' || billing === 'patient_bill_passthrough') {
      // The patient pays: they are the guarantor, and no IN1 says otherwise [labs.md §2].
      segments.push(
        segment('GT1', {
          1: '1',
          3: personName(patient.last_name, patient.first_name, 'patient_details'),
          5: address(order.patient_address, 'patient_address'),
          6: phone(patient.phone_number, 'patient_details.phone_number'),
          8: dob(patient.dob, 'patient_details.dob'),
          9: sexCode(patient.gender),
          11: codedRelationship('Self'),
        }),
      );
    } else if (billing !== 'client_bill') {
      throw new OrderNotRenderable('billing_type', `Billing type '${billing}' has no HL7 rendering (client_bill, commercial_insurance, patient_bill).`);
    }
  }

  const markerService = new Map<number, number>();
  services.forEach((s, i) => {
    for (const id of s.markerIds) markerService.set(id, i);
  });
  const answersByService = new Map<number, { answer: AoeAnswer; index: number }[]>();
  if (!cancel)
    input.aoeAnswers.forEach((answer, index) => {
      const at = markerService.get(answer.marker_id);
      if (at === undefined)
        throw new OrderNotRenderable(
          `aoe_answers[${index}].marker_id`,
          `Ask-at-order-entry answer ${index} is for marker ${answer.marker_id}, which the order does not include.`,
        );
      answersByService.set(at, [...(answersByService.get(at) ?? []), { answer, index }]);
    });

  const transactionTime = hl7Timestamp(now);
  const priority = order.priority ? 'S' : 'R';
  const specimen = SPECIMEN_TYPES[order.lab_test.sample_type];
  services.forEach((service, i) => {
    const universalService = [
      text(service.code, `account.order_codes.${service.markerIds[0]}.code`),
      text(service.name, 'lab_test.name'),
      'L',
      ...(service.loinc ? [text(service.loinc, `account.order_codes.${service.markerIds[0]}.loinc`), '', 'LN'] : []),
    ].join('^');
    segments.push(
      segment('ORC', {
        1: orderControl,
        2: placerId,
        4: loi && shared ? placerId : undefined,
        7: loi ? undefined : `^^^^^${priority}`,
        9: transactionTime,
        12: provider,
      }),
    );
    if (loi) segments.push(segment('TQ1', { 1: '1', 9: priority === 'S' ? 'S^Stat^HL70485' : 'R^Routine^HL70485' }));
    segments.push(
      segment('OBR', {
        1: String(i + 1),
        2: placerId,
        4: universalService,
        16: provider,
        18: text(account.account_number, 'account.account_number'),
        27: loi ? undefined : `^^^^^${priority}`,
      }),
    );
    if (cancel) return;
    if (order.clinical_notes) segments.push(segment('NTE', { 1: '1', 2: 'P', 3: text(order.clinical_notes, 'clinical_notes') }));
    input.icdCodes.forEach((code, n) => {
      const value = text(code.trim(), `icd_codes[${n}]`);
      segments.push(
        loi ? segment('DG1', { 1: String(n + 1), 3: `${value}^^I10C`, 6: 'W' }) : segment('DG1', { 1: String(n + 1), 2: 'I10', 3: `${value}^^I10`, 6: 'W' }),
      );
    });
    (answersByService.get(i) ?? []).forEach(({ answer, index }, n) => {
      segments.push(
        segment('OBX', {
          1: String(n + 1),
          2: 'ST',
          3: `${text(answer.question_id, `aoe_answers[${index}].question_id`)}^^L`,
          5: text(answer.answer, `aoe_answers[${index}].answer`),
          11: 'O',
        }),
      );
    });
    if (loi)
      segments.push(
        segment('SPM', {
          1: '1',
          2: `${text(order.sample_id, 'sample_id')}&${authorityHd}`,
          4: specimen ? `${specimen[0]}^${specimen[1]}^SCT` : `^${text(order.lab_test.sample_type, 'lab_test.sample_type')}`,
        }),
      );
  });

  // Segments separated by CR, none after the last: @medplum/core (and receivers built on it) would read a
  // trailing CR as an empty segment.
  const message = segments.join('\r');
  try {
    return { text: message, bytes: encodeHl7(message, charset) };
  } catch (err) {
    // Every value was checked above; this is the net under anything that was not.
    if (err instanceof CharsetUnrepresentable) throw new OrderNotRenderable(err.field, err.message);
    throw err;
  }
}

/**
 * The order's services: its markers grouped by the account's order code, in the order's test and marker order.
 * A marker the account has no code for makes the order unrenderable for this lab, naming the marker.
 */
function orderedServices(order: LabOrderDoc, account: LabAccountDoc, catalogue: LabCatalogue): OrderedService[] {
  const tests = order.lab_test_ids.map((id, i) => {
    const entry = catalogue.labTestById(id);
    if (entry) return { name: entry.name, markerIds: entry.marker_ids };
    return i === 0 || id === order.lab_test.id ? { name: order.lab_test.name, markerIds: order.lab_test.marker_ids } : null;
  });
  const known = tests.filter((t) => t !== null);
  // A team's own test beyond the first is not in the catalogue: its markers are those of the order no other test has.
  const covered = new Set(known.flatMap((t) => t.markerIds));
  const rest = order.marker_ids.filter((id) => !covered.has(id));
  if (rest.length) known.push({ name: order.lab_test.name, markerIds: rest });

  const services = new Map<string, OrderedService & { tests: Set<string> }>();
  for (const test of known) {
    for (const markerId of test.markerIds) {
      const entry = account.order_codes[String(markerId)];
      if (!entry?.code) {
        const marker = catalogue.markerById(markerId);
        throw new OrderNotRenderable(
          'marker_ids',
          `Lab account '${account.name}' has no order code for marker ${markerId}${marker ? ` (${marker.name})` : ''} of test '${test.name}'.`,
        );
      }
      const service = services.get(entry.code) ?? { code: entry.code, loinc: null, name: test.name, markerIds: [], tests: new Set<string>() };
      if (!service.markerIds.includes(markerId)) service.markerIds.push(markerId);
      service.loinc ??= entry.loinc ?? null;
      service.tests.add(test.name);
      services.set(entry.code, service);
    }
  }
  return [...services.values()].map(({ tests: from, ...service }) => {
    // A code for one marker of a larger test is named after the marker; a code covering a whole test, after the test.
    const whole = known.some((t) => from.has(t.name) && t.markerIds.every((id) => service.markerIds.includes(id)));
    const single = service.markerIds.length === 1 ? catalogue.markerById(service.markerIds[0])?.name : undefined;
    return { ...service, name: whole ? service.name : (single ?? service.name) };
  });
}

/** HL7 table 0001 (administrative sex). */
function sexCode(gender: string | null | undefined): string {
  return ({ female: 'F', male: 'M', other: 'O' } as Record<string, string>)[gender ?? ''] ?? 'U';
}

/** HL7 table 0063 (relationship) for the insurance record's free-text relationship. */
function relationshipCode(relationship: string): [string, string] {
  const key = relationship.trim().toLowerCase();
  if (key === 'self') return ['SEL', 'Self'];
  if (key === 'spouse') return ['SPO', 'Spouse'];
  if (key === 'child') return ['CHD', 'Child'];
  if (key === 'parent') return ['PAR', 'Parent'];
  if (key === 'domestic partner') return ['DOM', 'Life partner'];
  return ['OTH', 'Other'];
}

/**
 * XAD-6 country: table 0399 is ISO 3166 alpha-3. Orders store alpha-2; US labs see US addresses, so 'US' is
 * written 'USA' and any other code as stored.
 */
function countryCode(country: string | null | undefined): string {
  if (!country) return '';
  return country.trim().toUpperCase() === 'US' ? 'USA' : country;
}
