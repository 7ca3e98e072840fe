import iconv from 'iconv-lite';

/**
 * The fake laboratory's own HL7 v2 text handling: parsing, the checks a lab's interface engine makes on an order
 * (LOI 2.5.1 / ORM 2.3), its acknowledgements, and the ORU^R01 results it sends. Written apart from
 * lib/labs/hl7/ on purpose, so that a mistake there is not repeated here and hidden.
 */

// ---------- text ----------

/** HL7 table 0211 names the fake understands → iconv-lite encodings. */
const CHARSETS: Record<string, string> = {
  ASCII: 'latin1', // checked to be 7-bit below
  '8859/1': 'latin1',
  '8859/2': 'iso-8859-2',
  '8859/5': 'iso-8859-5',
  '8859/7': 'iso-8859-7',
  '8859/15': 'iso-8859-15',
  'UNICODE UTF-8': 'utf8',
  'ISO IR87': 'shift_jis',
  'GB 18030-2000': 'gb18030',
  'KS X 1001': 'euc-kr',
  'BIG-5': 'big5',
};

export class Hl7Problem {
  constructor(
    /** AR: the message cannot be taken (type, version, profile, header); AE: its content is wrong. */
    readonly level: 'AR' | 'AE',
    /** HL7 table 0357. */
    readonly code: '100' | '101' | '102' | '103' | '200' | '202' | '203' | '204' | '207',
    readonly text: string,
    /** segment^sequence^field, e.g. PID^1^5. */
    readonly location: string | null = null,
  ) {}
}

const ERROR_NAMES: Record<Hl7Problem['code'], string> = {
  '100': 'Segment sequence error',
  '101': 'Required field missing',
  '102': 'Data type error',
  '103': 'Table value not found',
  '200': 'Unsupported message type',
  '202': 'Unsupported processing id',
  '203': 'Unsupported version id',
  '204': 'Unknown key identifier',
  '207': 'Application internal error',
};

/** MSH-18 read from the raw bytes (the header is ASCII in every character set the fake takes). */
export function msh18Of(bytes: Buffer): string {
  const header = bytes.toString('latin1', 0, Math.max(0, bytes.indexOf(0x0d) < 0 ? bytes.length : bytes.indexOf(0x0d)));
  return (header.split(header[3] ?? '|')[17] ?? '').split('~')[0].trim();
}

/** The message's text, by MSH-18 or the lab's agreed character set; a problem if the bytes are not in that set. */
export function decodeMessage(bytes: Buffer, defaultCharset: string): { text: string; charset: string; problem: Hl7Problem | null } {
  const charset = msh18Of(bytes) || defaultCharset;
  const encoding = CHARSETS[charset];
  if (!encoding)
    return {
      text: bytes.toString('latin1'),
      charset,
      problem: new Hl7Problem('AR', '103', `Character set '${charset}' (MSH-18) is not supported`, 'MSH^1^18'),
    };
  if (encoding === 'utf8') {
    try {
      return { text: new TextDecoder('utf-8', { fatal: true }).decode(bytes), charset, problem: null };
    } catch {
      return {
        text: bytes.toString('latin1'),
        charset,
        problem: new Hl7Problem('AE', '102', 'The message is not valid UTF-8 (MSH-18 says UNICODE UTF-8)', 'MSH^1^18'),
      };
    }
  }
  if (charset === 'ASCII' && bytes.some((b) => b > 0x7f))
    return { text: bytes.toString('latin1'), charset, problem: new Hl7Problem('AE', '102', 'A byte outside ASCII in an ASCII message', 'MSH^1^18') };
  return { text: iconv.decode(bytes, encoding), charset, problem: null };
}

export function encodeMessage(text: string, charset: string): Buffer {
  const encoding = CHARSETS[charset] ?? 'utf8';
  return encoding === 'utf8' ? Buffer.from(text, 'utf8') : iconv.encode(text, encoding);
}

/** HL7 escapes of a value written into a field (\F\ \S\ \T\ \R\ \E\, line breaks as \.br\). */
export function escapeValue(value: string): string {
  return value.replace(/\r\n|[\r\n\\|^&~]/g, (c) => ({ '\\': '\\E\\', '|': '\\F\\', '^': '\\S\\', '&': '\\T\\', '~': '\\R\\' })[c] ?? '\\.br\\');
}

/** Escape sequences HL7 v2 defines (2.5.1 §2.7); anything else after the escape character is malformed. */
const ESCAPE_SEQUENCE =
  /^(F|S|T|R|E|H|N|\.br|\.sp\d*|\.in[+-]?\d*|\.ti[+-]?\d*|\.sk[+-]?\d*|\.ce|\.fi|\.nf|X([0-9A-Fa-f]{2})+|Z[^\\]*|C[0-9A-Fa-f]{4}|M[0-9A-Fa-f]{4}([0-9A-Fa-f]{2})?)$/;

function malformedEscape(value: string, escapeCharacter: string): string | null {
  let i = value.indexOf(escapeCharacter);
  while (i >= 0) {
    const end = value.indexOf(escapeCharacter, i + 1);
    if (end < 0) return value.slice(i, i + 12);
    const sequence = value.slice(i + 1, end);
    if (!ESCAPE_SEQUENCE.test(sequence)) return value.slice(i, end + 1);
    i = value.indexOf(escapeCharacter, end + 1);
  }
  return null;
}

// ---------- parsing ----------

export interface ParsedSegment {
  name: string;
  /** fields[n] is field n as written (escapes kept); for MSH, fields[1] is the field separator, fields[2] the encoding characters. */
  fields: string[];
}

export interface ParsedMessage {
  segments: ParsedSegment[];
  separators: { field: string; component: string; repetition: string; escape: string; subcomponent: string };
}

export function parseMessage(text: string): ParsedMessage | null {
  if (!text.startsWith('MSH') || text.length < 8) return null;
  const field = text[3];
  const [component, repetition, escapeCharacter, subcomponent] = text.slice(4, 8);
  const segments = text
    .split('\r')
    .filter((line) => line !== '')
    .map((line) => {
      const parts = line.split(field);
      const name = parts[0];
      return { name, fields: name === 'MSH' ? ['MSH', field, ...parts.slice(1)] : parts };
    });
  return { segments, separators: { field, component, repetition, escape: escapeCharacter, subcomponent } };
}

/** Component `c` (1-based) of the first repetition of field `n` of a segment, as written. */
export function componentOf(message: ParsedMessage, segment: ParsedSegment | undefined, n: number, c = 1): string {
  const value = segment?.fields[n] ?? '';
  return (value.split(message.separators.repetition)[0].split(message.separators.component)[c - 1] ?? '').trim();
}

const segmentsNamed = (message: ParsedMessage, name: string) => message.segments.filter((s) => s.name === name);

// ---------- the checks of an order ----------

export type LabProfile = 'LOI_2.5.1' | 'ORM_2.3';
const LOI_COMMON = '2.16.840.1.113883.9.66';
const LOI_GU = '2.16.840.1.113883.9.78';
const LOI_NG = '2.16.840.1.113883.9.79';
const SEXES = new Set(['F', 'M', 'O', 'U', 'A', 'N']);

export interface CheckedOrder {
  type: 'ORM^O01' | 'OML^O21';
  version: string;
  controlId: string;
  /** ORC-1 of the message: NW new order, CA cancel request. */
  orderControl: 'NW' | 'CA';
  placerNumber: string;
  /** ORC-2 as written (with its assigning authority), echoed in results. */
  placerField: string;
  patient: { id: string; family: string; given: string; birthDate: string; sex: string };
  tests: { code: string; name: string }[];
}

/**
 * What a lab's interface engine checks before it takes an order. Problems at the header (type, version,
 * profile, processing id) make an AR; problems in the content an AE. Returns every problem found.
 */
export function checkOrder(text: string, accepted: LabProfile[]): { order: CheckedOrder | null; problems: Hl7Problem[] } {
  const message = parseMessage(text);
  if (!message) return { order: null, problems: [new Hl7Problem('AR', '100', 'The message does not start with an MSH segment')] };
  const problems: Hl7Problem[] = [];
  const msh = message.segments[0];
  if (msh.fields.join('').includes('\n'))
    return { order: null, problems: [new Hl7Problem('AR', '100', 'Segments must end with CR; the header runs into a line feed', 'MSH')] };
  const c = (segment: ParsedSegment | undefined, n: number, k = 1) => componentOf(message, segment, n, k);
  const type = `${c(msh, 9, 1)}^${c(msh, 9, 2)}`;
  const version = c(msh, 12);
  const controlId = (msh.fields[10] ?? '').trim();
  const takes = (profile: LabProfile) => accepted.includes(profile);
  if (type === 'OML^O21' && takes('LOI_2.5.1')) {
    if (version !== '2.5.1') problems.push(new Hl7Problem('AR', '203', `OML^O21 (LOI) must be HL7 2.5.1; MSH-12 is '${version}'`, 'MSH^1^12'));
    const profiles = (msh.fields[21] ?? '').split(message.separators.repetition).flatMap((p) => p.split(message.separators.component));
    if (!profiles.includes(LOI_COMMON))
      problems.push(new Hl7Problem('AR', '203', `MSH-21 does not declare the LOI common profile (${LOI_COMMON})`, 'MSH^1^21'));
    if (!profiles.includes(LOI_GU) && !profiles.includes(LOI_NG))
      problems.push(new Hl7Problem('AR', '203', `MSH-21 declares neither the LOI GU (${LOI_GU}) nor the NG (${LOI_NG}) profile`, 'MSH^1^21'));
  } else if (type === 'ORM^O01' && takes('ORM_2.3')) {
    if (version !== '2.3' && version !== '2.3.1')
      problems.push(new Hl7Problem('AR', '203', `ORM^O01 is taken in HL7 2.3 or 2.3.1; MSH-12 is '${version}'`, 'MSH^1^12'));
  } else {
    const wanted = accepted.map((p) => (p === 'LOI_2.5.1' ? 'OML^O21 (2.5.1 LOI)' : 'ORM^O01 (2.3)')).join(' or ');
    problems.push(new Hl7Problem('AR', '200', `Message type '${type}' (MSH-9) is not taken; this lab takes ${wanted}`, 'MSH^1^9'));
  }
  if (!controlId) problems.push(new Hl7Problem('AR', '101', 'MSH-10 (message control id) is empty', 'MSH^1^10'));
  if (!['P', 'T', 'D'].includes(c(msh, 11))) problems.push(new Hl7Problem('AR', '202', `MSH-11 (processing id) '${c(msh, 11)}' is not P, T or D`, 'MSH^1^11'));
  if (problems.length) return { order: null, problems };
  const guProfile = type === 'OML^O21' && (msh.fields[21] ?? '').includes(LOI_GU);

  // Every field's escapes, and no raw line break inside a segment (LOI: line breaks travel as \.br\).
  for (const segment of message.segments) {
    if (segment.name.includes('\n'))
      problems.push(new Hl7Problem('AE', '102', 'A raw line feed inside the message: segments end with CR, line breaks in values are \\.br\\'));
    segment.fields.forEach((value, n) => {
      if (n === 0 || (segment.name === 'MSH' && n <= 2)) return;
      if (value.includes('\n'))
        problems.push(new Hl7Problem('AE', '102', `${segment.name}-${n} holds a raw line feed (line breaks are \\.br\\)`, `${segment.name}^1^${n}`));
      const bad = malformedEscape(value, message.separators.escape);
      if (bad !== null)
        problems.push(new Hl7Problem('AE', '102', `${segment.name}-${n} has a malformed escape sequence near '${bad}'`, `${segment.name}^1^${n}`));
    });
  }

  const pid = segmentsNamed(message, 'PID')[0];
  if (!pid) problems.push(new Hl7Problem('AE', '100', 'No PID segment', 'PID'));
  const patient = { id: c(pid, 3), family: c(pid, 5, 1), given: c(pid, 5, 2), birthDate: c(pid, 7), sex: c(pid, 8) };
  if (pid) {
    if (!patient.id) problems.push(new Hl7Problem('AE', '101', 'PID-3 (patient identifier) is empty', 'PID^1^3'));
    if (!patient.family) problems.push(new Hl7Problem('AE', '101', 'PID-5 (patient name) has no family name', 'PID^1^5'));
    if (!patient.birthDate) problems.push(new Hl7Problem('AE', '101', 'PID-7 (date of birth) is empty', 'PID^1^7'));
    else if (!/^\d{8}(\d{2,6})?([+-]\d{4})?$/.test(patient.birthDate))
      problems.push(new Hl7Problem('AE', '102', `PID-7 (date of birth) '${patient.birthDate}' is not YYYYMMDD`, 'PID^1^7'));
    if (!patient.sex) problems.push(new Hl7Problem('AE', '101', 'PID-8 (administrative sex) is empty', 'PID^1^8'));
    else if (!SEXES.has(patient.sex)) problems.push(new Hl7Problem('AE', '103', `PID-8 (administrative sex) '${patient.sex}' is not in table 0001`, 'PID^1^8'));
  }

  const insurance = segmentsNamed(message, 'IN1');
  if (insurance.length > 3) problems.push(new Hl7Problem('AE', '100', `${insurance.length} IN1 segments; a lab takes up to three`, 'IN1'));
  if (insurance.length && !segmentsNamed(message, 'GT1').length) problems.push(new Hl7Problem('AE', '100', 'IN1 is sent without a GT1 (guarantor)', 'GT1'));
  if (insurance.length && !segmentsNamed(message, 'DG1').length)
    problems.push(new Hl7Problem('AE', '101', 'Insurance billing needs at least one DG1 (ICD-10 diagnosis)', 'DG1'));

  // ORC then OBR, per test.
  const tests: CheckedOrder['tests'] = [];
  const controls = new Set<string>();
  let placerNumber = '';
  let placerField = '';
  message.segments.forEach((orc, i) => {
    if (orc.name !== 'ORC') return;
    const n = tests.length + 1;
    const next = message.segments.slice(i + 1).find((s) => s.name === 'ORC' || s.name === 'OBR');
    const obr = next?.name === 'OBR' ? next : undefined;
    const control = c(orc, 1);
    controls.add(control);
    if (control !== 'NW' && control !== 'CA') problems.push(new Hl7Problem('AE', '103', `ORC-1 (order control) '${control}' is not NW or CA`, `ORC^${n}^1`));
    const placer = c(orc, 2);
    if (!placer) problems.push(new Hl7Problem('AE', '101', 'ORC-2 (placer order number) is empty', `ORC^${n}^2`));
    else if (guProfile && (!c(orc, 2, 3) || c(orc, 2, 4) !== 'ISO'))
      problems.push(new Hl7Problem('AE', '102', 'ORC-2 has no ISO assigning authority (the LOI GU profile requires one)', `ORC^${n}^2`));
    placerNumber ||= placer;
    placerField ||= (orc.fields[2] ?? '').split(message.separators.repetition)[0];
    if (!obr) {
      problems.push(new Hl7Problem('AE', '100', `ORC ${n} is not followed by an OBR`, `ORC^${n}`));
      return;
    }
    if (c(obr, 2) !== placer) problems.push(new Hl7Problem('AE', '102', `OBR-2 '${c(obr, 2)}' differs from ORC-2 '${placer}'`, `OBR^${n}^2`));
    if (!c(obr, 4)) problems.push(new Hl7Problem('AE', '101', 'OBR-4 (universal service identifier) is empty', `OBR^${n}^4`));
    const npi = [c(orc, 12), c(obr, 16)].find((id) => /^\d{10}$/.test(id));
    if (!npi) problems.push(new Hl7Problem('AE', '101', 'No ordering provider with an NPI (10 digits) in ORC-12 or OBR-16', `ORC^${n}^12`));
    tests.push({ code: c(obr, 4, 1), name: c(obr, 4, 2) });
  });
  if (!tests.length && !problems.some((p) => p.location?.startsWith('ORC'))) problems.push(new Hl7Problem('AE', '100', 'No ORC/OBR order group', 'ORC'));
  if (controls.size > 1) problems.push(new Hl7Problem('AE', '102', `ORC-1 differs between tests (${[...controls].join(', ')})`, 'ORC^1^1'));
  if (problems.length) return { order: null, problems };
  return {
    order: {
      type: type as CheckedOrder['type'],
      version,
      controlId,
      orderControl: [...controls][0] as 'NW' | 'CA',
      placerNumber,
      placerField,
      patient,
      tests,
    },
    problems,
  };
}

// ---------- acknowledgements ----------

export const hl7Time = (at: Date) => `${at.toISOString().replace(/[-:T]/g, '').slice(0, 14)}+0000`;

export interface AnswerHeader {
  /** The answered message's MSH-3/4 (its sender, our receiver) and MSH-5/6. */
  theirApplication: string;
  theirFacility: string;
  ourApplication: string;
  ourFacility: string;
  version: string;
  charset: string;
  controlId: string;
  at: Date;
}

/** The header fields of a message the fake answers: who sent it, its version and character set. */
export function answerHeaderOf(text: string, charset: string, at: Date): AnswerHeader {
  const message = parseMessage(text);
  const msh = message?.segments[0];
  const f = (n: number) => (msh?.fields[n] ?? '').trim();
  return {
    theirApplication: f(3),
    theirFacility: f(4),
    ourApplication: f(5) || 'FAKELAB',
    ourFacility: f(6) || 'FAKELAB',
    // LOI's OML is answered in 2.5.1 whatever its MSH-12 claimed; the legacy interface answers in the message's version.
    version: f(12) === '2.5.1' || f(9).startsWith('OML') ? '2.5.1' : f(12) || '2.3',
    charset,
    controlId: f(10),
    at,
  };
}

function mshOf(h: AnswerHeader, type: string, answerId: string): string {
  const fields = [h.ourApplication, h.ourFacility, h.theirApplication, h.theirFacility, hl7Time(h.at), '', type, answerId, 'P', h.version];
  return `MSH|^~\\&|${fields.join('|')}||||||${h.charset}`;
}

function errOf(h: AnswerHeader, problem: Pick<Hl7Problem, 'code' | 'text' | 'location'>, severity: 'E' | 'W'): string {
  const code = `${problem.code}^${ERROR_NAMES[problem.code]}^HL70357`;
  if (h.version === '2.5.1') return `ERR||${problem.location ?? ''}|${code}|${severity}||||${escapeValue(problem.text)}`;
  const [segment = '', sequence = '', field = ''] = (problem.location ?? '').split('^');
  return `ERR|${segment}^${sequence}^${field}^${code.replace(/\^/g, '&')}`;
}

/** An ACK (original mode; or an enhanced-mode accept ACK with CA/CE/CR). */
export function buildAck(
  h: AnswerHeader,
  code: 'AA' | 'AE' | 'AR' | 'CA' | 'CE' | 'CR',
  answerId: string,
  problems: Pick<Hl7Problem, 'code' | 'text' | 'location'>[] = [],
): string {
  const type = h.version === '2.5.1' ? 'ACK^O21^ACK' : 'ACK';
  const text = h.version === '2.5.1' || !problems.length ? '' : `|${escapeValue(problems[0].text)}`;
  return `${[mshOf(h, type, answerId), `MSA|${code}|${h.controlId}${text}`, ...problems.slice(0, 10).map((p) => errOf(h, p, 'E'))].join('\r')}\r`;
}

/** The answer to a cancel request: ORL^O22 (2.5.1) or ORR^O02 (2.3) with ORC-1 CR (cancelled) or UC (unable). */
export function buildCancelAnswer(
  h: AnswerHeader,
  answerId: string,
  order: { placerField: string; fillerNumber: string; patientId: string; tests: { code: string; name: string }[] },
  outcome: { control: 'CR' } | { control: 'UC'; reason: string },
): string {
  const type = h.version === '2.5.1' ? 'ORL^O22^ORL_O22' : 'ORR^O02';
  const reason = outcome.control === 'UC' ? outcome.reason : '';
  const lines = [mshOf(h, type, answerId), `MSA|AA|${h.controlId}${h.version === '2.5.1' || !reason ? '' : `|${escapeValue(reason)}`}`];
  if (reason) lines.push(errOf(h, { code: '207', text: reason, location: 'ORC^1^1' }, 'W'));
  lines.push(`PID|1||${order.patientId}`);
  for (const test of order.tests) {
    const orc = ['ORC', outcome.control, order.placerField, order.fillerNumber, '', outcome.control === 'CR' ? 'CA' : 'IP'];
    if (reason) orc[16] = `SIP^${escapeValue(reason)}^L`;
    lines.push(Array.from(orc, (v) => v ?? '').join('|'));
    if (h.version !== '2.5.1') lines.push(`OBR|1|${order.placerField}|${order.fillerNumber}|${test.code}^${escapeValue(test.name)}^L`);
  }
  return `${lines.join('\r')}\r`;
}

/** The common escapes resolved (\F\ \S\ \T\ \R\ \E\ \.br\); others are left as written. */
export function unescapeValue(value: string): string {
  return value.replace(/\\(F|S|T|R|E|\.br)\\/g, (_, e: string) => ({ F: '|', S: '^', T: '&', R: '~', E: '\\' })[e] ?? '\n');
}
