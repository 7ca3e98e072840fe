import { randomBytes } from 'node:crypto';
import { Hl7Message, type Hl7Segment } from '@medplum/core';
import iconv from 'iconv-lite';
import { charsetOfMsh18, msh18OfBytes, UnsupportedCharset } from './charsets';
import { escapeHl7, unescapeHl7 } from './escapes';

/**
 * Acknowledgements both ways (contract C3): what a lab answers our orders with (ACK, ORR^O02 for ORM, ORL^O22 for
 * OML; MSA-1 AA/AE/AR, or CA/CE/CR as the accept ACK of enhanced mode) and the ACK we answer a lab's message with.
 */

export type AcknowledgementCode = 'AA' | 'AE' | 'AR' | 'CA' | 'CE' | 'CR';

export interface LabAcknowledgement {
  /** MSA-2: the control id (MSH-10) of the message acknowledged. */
  controlId: string;
  /** MSA-1 (C* = enhanced-mode accept ACK). */
  code: AcknowledgementCode;
  /** ERR-8 / ERR-3 text (2.5) / ERR-1 (2.3) / MSA-3, unescaped; else the reason of ORC-16 (a refused cancel). */
  text: string | null;
  /** ORR^O02 / ORL^O22 ORC-1: 'CR' cancelled as requested | 'UC' unable to cancel | 'OK' | 'UA' | … */
  orderControl: string | null;
  /** ORC-3 (else OBR-3) when the lab returns its filler order number. */
  fillerNumber: string | null;
  /** ORC-16 (order control code reason): why the lab refused, e.g. a cancel it could not do. */
  orderControlReason: string | null;
}

/** The lab's answer is not an acknowledgement this service can read (no MSA, unknown MSA-1). */
export class MalformedAcknowledgement extends Error {}

const CODES = new Set<string>(['AA', 'AE', 'AR', 'CA', 'CE', 'CR']);

/** Escape options from the message's own delimiters (MSH-1, MSH-2). */
function delimitersOf(message: Hl7Message) {
  const c = message.context;
  return {
    escapeCharacter: c.escapeCharacter,
    delimiters: { field: c.fieldSeparator, component: c.componentSeparator, repetition: c.repetitionSeparator, subcomponent: c.subcomponentSeparator },
  };
}

/**
 * Reads a lab's acknowledgement (text already decoded: charsets.decodeHl7). The order-control answer of an
 * ORR/ORL with several ORCs (one per test) is the refusal if any test was refused (UC, …), else the first one.
 */
export function parseAcknowledgement(text: string, encoding?: string): LabAcknowledgement {
  const body = text.replace(/^\u000b/, '').replace(/\u001c\r?$/, '');
  if (!body.startsWith('MSH')) throw new MalformedAcknowledgement('The acknowledgement does not start with an MSH segment.');
  const message = Hl7Message.parse(body);
  const readField = (value: string) => unescapeHl7(value, { ...delimitersOf(message), encoding });
  const msa = message.getSegment('MSA');
  if (!msa) throw new MalformedAcknowledgement('The acknowledgement has no MSA segment.');
  const code = msa.getComponent(1, 1).trim();
  if (!CODES.has(code)) throw new MalformedAcknowledgement(`MSA-1 '${code}' is not an acknowledgement code (AA, AE, AR, CA, CE, CR).`);
  const controlId = readField(msa.getComponent(2, 1));

  const errors = message
    .getAllSegments('ERR')
    .map((err) => errText(err, readField))
    .filter((t) => t !== '');
  const orcs = message.getAllSegments('ORC');
  const controls = orcs.map((orc) => orc.getComponent(1, 1)).filter(Boolean);
  // Table 0119: the U* answers (UA unable to accept, UC unable to cancel, …) and DE (data errors) refuse.
  const refused = controls.find((c) => c.startsWith('U') || c === 'DE');
  const orderControl = refused ?? controls[0] ?? null;
  const reasonOrc = orcs.find((orc) => orc.getComponent(1, 1) === orderControl && orc.getField(16)?.toString());
  const reasonField = reasonOrc?.getField(16);
  const orderControlReason = reasonField ? readField(reasonField.getComponent(2) || reasonField.getComponent(1)) || null : null;
  const filler =
    orcs.map((orc) => orc.getComponent(3, 1)).find(Boolean) ??
    message
      .getAllSegments('OBR')
      .map((obr) => obr.getComponent(3, 1))
      .find(Boolean);
  const msa3 = readField(msa.getComponent(3, 1));
  return {
    controlId,
    code: code as AcknowledgementCode,
    // A refused cancel's reason is ORC-16; MSA-3 is then often a bare "OK" for the message itself.
    text: errors.join('; ') || (refused ? orderControlReason : null) || msa3 || orderControlReason || null,
    orderControl,
    fillerNumber: filler ? readField(filler) : null,
    orderControlReason,
  };
}

/**
 * An ERR segment's words: ERR-8 (user message) first, else ERR-3's text (2.5 HL7 error code), else 2.3's ERR-1
 * (error code and location: its 4th component's text). ERR-7 (diagnostic information) is added when present.
 */
function errText(err: Hl7Segment, readField: (v: string) => string): string {
  const userMessage = readField(err.getComponent(8, 1));
  const diagnostic = readField(err.getComponent(7, 1));
  const errorCode = readField(err.getComponent(3, 2) || err.getComponent(3, 9) || err.getComponent(3, 1));
  const legacy = err.getField(1);
  const legacyText = legacy ? readField(legacy.getComponent(4, 1) || legacy.getComponent(4, 0)) : '';
  const parts = [...new Set([userMessage || errorCode || legacyText, diagnostic].filter(Boolean))].join(': ');
  // ERR-2 (2.5) or ERR-1's first components (2.3): where the lab found the error, e.g. PID-5.
  const segment = err.getComponent(2, 1) || legacy?.getComponent(1) || '';
  const position = err.getComponent(2, 3) || legacy?.getComponent(3) || '';
  const where = /^[A-Z][A-Z0-9]{2}$/.test(segment) ? `${segment}${/^\d+$/.test(position) ? `-${position}` : ''}` : '';
  return parts && where ? `${where}: ${parts}` : parts;
}

/** A control id for a message we originate: unique, ≤ 20 characters (ST length of MSH-10). */
function newControlId(now: Date): string {
  return `${now.getTime().toString(36)}${randomBytes(5).toString('hex')}`.toUpperCase();
}

/** HL7 DTM to the second, in UTC with its offset. */
function timestamp(at: Date): string {
  return `${at.toISOString().replace(/[-:T]/g, '').slice(0, 14)}+0000`;
}

const FALLBACK_HEADER = 'MSH|^~\\&|||||||ACK|';

/**
 * The acknowledgement we send a lab for `incomingText` (decoded): MSH with sender and receiver swapped, MSH-12 and
 * MSH-18 as the message had them (so the caller encodes it in the same charset), MSA-1 the code, MSA-2 its
 * control id, MSA-3 the reason; on AE/AR an ERR too: ERR-3 (207, application internal error), ERR-4 E and ERR-8
 * the reason from 2.5 on, ERR-1 (its error code and location) in 2.3/2.4, where ERR-3 and ERR-8 do not exist.
 */
export function buildAcknowledgement(
  incomingText: string,
  code: 'AA' | 'AE' | 'AR' | 'CA' | 'CE' | 'CR',
  text?: string,
  options: { now?: Date; controlId?: string } = {},
): string {
  let incoming: Hl7Message;
  try {
    incoming = Hl7Message.parse(incomingText.startsWith('MSH') ? incomingText : FALLBACK_HEADER);
  } catch {
    incoming = Hl7Message.parse(FALLBACK_HEADER);
  }
  const now = options.now ?? new Date();
  const msh = incoming.header;
  const field = (n: number) => msh.getField(n)?.toString() ?? '';
  const version = msh.getComponent(12, 1) || '2.5.1';
  const trigger = msh.getComponent(9, 2);
  const structure = msh.getComponent(9, 3);
  const messageType = trigger && structure ? `ACK^${trigger}^ACK` : trigger ? `ACK^${trigger}` : 'ACK';
  const legacy = /^2\.[1-4](\.|$)/.test(version);
  const reason = text ? escapeHl7(text) : '';
  const header = [
    'MSH',
    '^~\\&',
    field(5),
    field(6),
    field(3),
    field(4),
    timestamp(now),
    '',
    messageType,
    options.controlId ?? newControlId(now),
    field(11) || 'P',
    field(12) || version,
    '',
    '',
    '',
    '',
    '',
    field(18),
  ];
  while (header.length > 12 && header[header.length - 1] === '') header.pop();
  const segments = [header.join('|'), ['MSA', code, field(10), reason].join('|').replace(/\|+$/, '')];
  if ((code === 'AE' || code === 'AR' || code === 'CE' || code === 'CR') && text)
    segments.push(legacy ? `ERR|^^^207&${reason}&HL70357` : `ERR|||207^Application internal error^HL70357|E||||${reason}`);
  return segments.join('\r');
}

/**
 * Our acknowledgement's bytes, in the charset its MSH-18 names (the message's, copied by buildAcknowledgement),
 * else `fallbackCharset` (the lab account's). An ACK must always go out: a character of our own reason text the
 * charset cannot carry becomes '?' here (iconv-lite's substitute), where an order would be refused.
 */
export function encodeAcknowledgement(ackText: string, fallbackCharset: string): Buffer {
  let encoding: string;
  try {
    encoding = charsetOfMsh18(msh18OfBytes(Buffer.from(ackText, 'latin1')), fallbackCharset);
  } catch (err) {
    if (!(err instanceof UnsupportedCharset)) throw err;
    encoding = 'utf8';
  }
  return iconv.encode(ackText, encoding);
}
