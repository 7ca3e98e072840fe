import { Hl7Message, parseHl7DateTime, type Hl7Segment } from '@medplum/core';
import { buildAcknowledgement } from './hl7/acknowledgement';
import { unescapeHl7 } from './hl7/escapes';

/**
 * HL7 v2 ORU^R01 (unsolicited observation results) as labs send them, read with @medplum/core's Hl7Message
 * parser. Pure: no database, no order. What a message means for an order is hl7-results.ts.
 */

/** A message refused before it touches anything: AR (cannot be processed: malformed, wrong type) or AE (an error applying it). */
export class Hl7Refusal extends Error {
  constructor(
    readonly ackCode: 'AR' | 'AE',
    readonly httpStatus: 400 | 404 | 409 | 422,
    readonly reason: string,
  ) {
    super(reason);
  }
}

const malformed = (reason: string) => new Hl7Refusal('AR', 400, reason);

export interface Hl7Observation {
  /** OBX-1, for messages naming the observation. */
  setId: string;
  /** OBX-2: NM, SN, ST, TX, FT, CE, CWE, or ED (an embedded document: the lab's report PDF). */
  valueType: string;
  /** OBX-3: the LOINC code (coding system LN, first or alternate triplet) and the lab's own code. */
  loinc: string | null;
  localCode: string | null;
  name: string;
  /** OBX-5, components as sent (SN and CE/CWE have several). */
  value: string[];
  /** OBX-6 identifier (e.g. mg/dL). */
  units: string | null;
  /** OBX-7 (e.g. 70-99, >39, <200). */
  referenceRange: string | null;
  /** OBX-8, every repetition (H, L, HH, LL, A, AA, N, …). */
  abnormalFlags: string[];
  /** OBX-11: F final, C corrected, P preliminary, X cannot be obtained. */
  status: 'F' | 'C' | 'P' | 'X';
  /** OBX-14, else null. */
  observedAt: Date | null;
  /** OBX-23: the performing organisation's name. */
  performingLab: string | null;
  /** NTE segments following the OBX. */
  notes: string[];
  /** OBX-5 of an ED observation: the document's MIME type and its bytes (Base64 decoded). */
  document: { type: string; data: Buffer } | null;
}

export interface Hl7ObservationRequest {
  /** OBR-2 (else ORC-2): the placer order number, which is our order id on the requisition. */
  placerOrderNumber: string;
  /** OBR-3 (else ORC-3): the lab's accession number. */
  fillerOrderNumber: string | null;
  /** OBR-4 identifier and text. */
  service: string;
  /** OBR-7, OBR-14, OBR-22. */
  collectedAt: Date | null;
  receivedAt: Date | null;
  reportedAt: Date | null;
  /** OBR-25 (else ORC-5): F final, C corrected, P preliminary, X cannot be done, I specimen received (no results yet), … */
  resultStatus: string;
  /** SPM-2 (else OBR-15's specimen id): the sample id the lab read off the tube or kit. */
  specimenId: string | null;
  /** SPM-21 (HL7 table 0490: RH hemolysis, QS quantity not sufficient, …): why the lab rejected the specimen. */
  specimenRejectReason: { code: string; text: string } | null;
  /** NTE segments right after the OBR (before any OBX): the lab's comment on the whole test (e.g. why it is X). */
  notes: string[];
  observations: Hl7Observation[];
}

export interface Hl7OruMessage {
  /** MSH-10, unique per sender: a resend carries the same one. */
  controlId: string;
  /** MSH-4 (sending facility). */
  sendingFacility: string;
  messageTime: Date | null;
  requests: Hl7ObservationRequest[];
  /** PID-3, PID-5 and PID-7 as the lab sent them (what an operator matches an unsolicited result by), or null without a PID. */
  patient: { id: string; name: string; dob: string } | null;
}

const VALUE_TYPES = new Set(['NM', 'SN', 'ST', 'TX', 'FT', 'CE', 'CWE', 'ED']);
/** OBR-25 statuses that come without observations: specimen received (I), test cannot be done (X). */
const STATUS_ONLY = new Set(['I', 'X']);
const OBX_STATUSES = new Set(['F', 'C', 'P', 'X']);
const SEGMENT_NAME = /^[A-Z][A-Z0-9]{2}$/;

/** MLLP framing (VT … FS CR) and any line-ending convention removed; segments separated by CR. */
export function unframe(raw: string): string {
  return raw
    .replace(/^\u000b/, '')
    .replace(/\u001c\r?$/, '')
    .split(/\r\n|\n|\r/)
    .map((line) => line.trimEnd())
    .filter((line) => line !== '')
    .join('\r');
}

/** MSH-10 of a message, if one can be read at all (the ACK of a refusal echoes it). */
export function controlIdOf(text: string): string {
  try {
    return Hl7Message.parse(text).header?.getField(10)?.toString() ?? '';
  } catch {
    return '';
  }
}

function hl7Time(value: string, what: string): Date | null {
  if (!value) return null;
  if (!/^\d{4}(\d{2}){0,5}(\.\d{1,4})?([+-]\d{4})?$/.test(value)) throw malformed(`${what} '${value}' is not an HL7 date/time (YYYYMMDDHHMMSS[+ZZZZ]).`);
  return new Date(parseHl7DateTime(value)!);
}

/** Resolves a field value's HL7 escapes (hex escapes \\Xhh\\ in the message's character set). */
type Unescape = (value: string) => string;

/** OBX-5 of an ED: source^type^subtype^encoding^data; only Base64 documents are read. */
function embeddedDocument(components: string[], where: string): { type: string; data: Buffer } {
  const [, type = '', subtype = '', encoding = '', data = ''] = components;
  if (encoding.toLowerCase() !== 'base64') throw malformed(`${where}: an ED document in encoding '${encoding}' (OBX-5.4); only Base64 is taken.`);
  const bytes = Buffer.from(data.replace(/\s+/g, ''), 'base64');
  if (!bytes.length) throw malformed(`${where}: the ED document (OBX-5.5) is empty.`);
  const mime = /\//.test(subtype)
    ? subtype
    : `${type.toLowerCase() === 'application' || !type ? 'application' : type.toLowerCase()}/${subtype.toLowerCase() || 'octet-stream'}`;
  return { type: mime, data: bytes };
}

function observation(obx: Hl7Segment, notes: string[], resolveEscapes: Unescape): Hl7Observation {
  // Component `i` of field `n`, escapes resolved (components are split first: an escaped ^ stays text).
  const text = (segment: Hl7Segment, n: number, i = 1) => resolveEscapes(segment.getComponent(n, i));
  const setId = obx.getField(1)?.toString() || '?';
  const where = `OBX ${setId}`;
  const valueType = obx.getComponent(2, 1);
  if (!VALUE_TYPES.has(valueType)) throw malformed(`${where}: value type (OBX-2) '${valueType}' is not one of ${[...VALUE_TYPES].join(', ')}.`);
  const code = (i: number) => ({ id: text(obx, 3, i), system: obx.getComponent(3, i + 2) });
  const [first, alternate] = [code(1), code(4)];
  if (!first.id) throw malformed(`${where}: no observation identifier (OBX-3).`);
  const loinc = [first, alternate].find((c) => c.system === 'LN' && c.id)?.id ?? null;
  const local = [first, alternate].find((c) => c.system !== 'LN' && c.id)?.id ?? null;
  const status = obx.getComponent(11, 1);
  if (!OBX_STATUSES.has(status)) throw malformed(`${where}: result status (OBX-11) '${status}' is not F, C, P or X.`);
  const raw = obx.getField(5)?.components[0] ?? [];
  const document = valueType === 'ED' && status !== 'X' ? embeddedDocument(raw, where) : null;
  const value = document ? [] : raw.map(resolveEscapes);
  if (!document && status !== 'X' && value.every((v) => v === '')) throw malformed(`${where}: no value (OBX-5).`);
  const flags =
    obx
      .getField(8)
      ?.components.map((c) => c[0])
      .filter(Boolean) ?? [];
  return {
    setId,
    valueType,
    loinc,
    localCode: local,
    name: text(obx, 3, 2) || text(obx, 3, 5),
    value,
    units: text(obx, 6) || null,
    referenceRange: text(obx, 7) || null,
    abnormalFlags: flags,
    status: status as Hl7Observation['status'],
    observedAt: hl7Time(obx.getComponent(14, 1), `${where}: OBX-14`),
    performingLab: text(obx, 23) || null,
    notes,
    document,
  };
}

/**
 * Parses an ORU^R01 and checks what this service relies on: the MSH header with a control id, the message
 * type, at least one OBR, every OBX and SPM under an OBR, known value types and statuses, readable times.
 * Anything else throws an Hl7Refusal (AR) that says what is wrong, and where.
 */
export function parseOru(text: string, options: { encoding?: string } = {}): Hl7OruMessage {
  const resolveEscapes: Unescape = (value) => unescapeHl7(value, { encoding: options.encoding });
  const field = (segment: Hl7Segment, n: number, i = 1) => resolveEscapes(segment.getComponent(n, i));
  if (!text.startsWith('MSH')) throw malformed('The message does not start with an MSH segment.');
  let message: Hl7Message;
  try {
    message = Hl7Message.parse(text);
  } catch (err) {
    throw malformed(`The message cannot be parsed: ${(err as Error).message}.`);
  }
  const msh = message.header;
  const controlId = msh.getField(10)?.toString() ?? '';
  if (!controlId) throw malformed('MSH-10 (message control id) is empty.');
  const type = `${msh.getComponent(9, 1)}^${msh.getComponent(9, 2)}`;
  if (type !== 'ORU^R01') throw malformed(`Message type (MSH-9) is '${type}'; this endpoint takes ORU^R01 results.`);
  const bad = message.segments.find((s) => !SEGMENT_NAME.test(s.name));
  if (bad) throw malformed(`'${bad.toString().slice(0, 20)}' is not an HL7 segment (a segment starts with a three-character name).`);

  const requests: Hl7ObservationRequest[] = [];
  let orc: Hl7Segment | undefined;
  let current: Hl7ObservationRequest | undefined;
  let lastObx: Hl7Observation | undefined;
  for (const segment of message.segments.slice(1)) {
    if (segment.name === 'ORC') orc = segment;
    else if (segment.name === 'OBR') {
      const n = requests.length + 1;
      current = {
        placerOrderNumber: segment.getComponent(2, 1) || orc?.getComponent(2, 1) || '',
        fillerOrderNumber: segment.getComponent(3, 1) || orc?.getComponent(3, 1) || null,
        service: [segment.getComponent(4, 1), segment.getComponent(4, 2)].filter(Boolean).join(' '),
        collectedAt: hl7Time(segment.getComponent(7, 1), `OBR ${n}: OBR-7`),
        receivedAt: hl7Time(segment.getComponent(14, 1), `OBR ${n}: OBR-14`),
        reportedAt: hl7Time(segment.getComponent(22, 1), `OBR ${n}: OBR-22`),
        resultStatus: segment.getComponent(25, 1) || orc?.getComponent(5, 1) || '',
        specimenId: segment.getComponent(15, 1) || null,
        specimenRejectReason: null,
        notes: [],
        observations: [],
      };
      // An unsolicited result (the lab's own order) names only its filler number: it is taken, and matched by that or reviewed.
      if (!current.placerOrderNumber && !current.fillerOrderNumber)
        throw malformed(`OBR ${n}: no placer order number (OBR-2 or ORC-2) nor filler order number (OBR-3 or ORC-3); nothing names its order.`);
      requests.push(current);
      lastObx = undefined;
    } else if (segment.name === 'OBX') {
      if (!current) throw malformed('An OBX segment comes before any OBR segment.');
      lastObx = observation(segment, [], resolveEscapes);
      current.observations.push(lastObx);
    } else if (segment.name === 'NTE') {
      const note = resolveEscapes(segment.getField(3)?.toString() ?? '');
      if (lastObx) lastObx.notes.push(note);
      else current?.notes.push(note);
    } else if (segment.name === 'SPM') {
      if (!current) throw malformed('An SPM segment comes before any OBR segment.');
      // SPM-2 is an EIP: placer^filler assigned identifiers, each an EI whose subcomponents (&) carry its authority.
      current.specimenId = segment.getComponent(2, 1).split('&')[0] || current.specimenId;
      current.receivedAt ??= hl7Time(segment.getComponent(18, 1), 'SPM-18');
      // SPM-21 (CWE): code^text^system; the first specimen problem the lab names.
      const reject = { code: segment.getComponent(21, 1), text: field(segment, 21, 2) };
      if (reject.code || reject.text) current.specimenRejectReason ??= reject;
    }
  }
  if (!requests.length) throw malformed('The message has no OBR segment (observation request); there is nothing to apply.');
  // A test the lab cannot do (X) or whose specimen it has only received (I) comes without observations.
  const empty = requests.find((r) => r.observations.length === 0 && !STATUS_ONLY.has(r.resultStatus));
  if (empty) throw malformed(`OBR for order ${empty.placerOrderNumber} has no OBX segment (observation).`);
  return {
    controlId,
    sendingFacility: field(msh, 4),
    messageTime: hl7Time(msh.getComponent(7, 1), 'MSH-7'),
    requests,
    patient: patientOf(message.getSegment('PID')),
  };
}

function patientOf(pid: Hl7Segment | undefined): Hl7OruMessage['patient'] {
  if (!pid) return null;
  const name = [pid.getComponent(5, 2), pid.getComponent(5, 1)].filter(Boolean).join(' ');
  return { id: pid.getComponent(3, 1), name, dob: pid.getComponent(7, 1) };
}

/**
 * The HL7 acknowledgement of `text` (MSA-1 the code, MSA-3 the reason; an ERR segment on a refusal): the one
 * implementation in hl7/acknowledgement.ts, which the MLLP listener answers with too.
 */
export function acknowledgement(text: string, ackCode: 'AA' | 'AE' | 'AR', reason?: string): string {
  return buildAcknowledgement(text, ackCode, reason);
}
