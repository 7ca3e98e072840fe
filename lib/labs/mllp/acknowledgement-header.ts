/**
 * MSA-1 (acknowledgement code) and MSA-2 (the acknowledged message's control id) read straight from a reply's bytes,
 * for matching replies to messages without decoding the message: both are ASCII in every HL7 character set this
 * service speaks (single-byte sets and UTF-8 keep ASCII as is), and so are the segment names and separators.
 */
export interface AcknowledgementHeader {
  code: string;
  controlId: string;
}

const SEGMENT_END = new Set([0x0d, 0x0a]);

/** Null when the reply has no MSH header or no MSA segment. */
export function readAcknowledgementHeader(reply: Buffer): AcknowledgementHeader | null {
  if (reply.length < 4 || reply.toString('latin1', 0, 3) !== 'MSH') return null;
  const fieldSeparator = reply[3];
  let start = 0;
  while (start < reply.length) {
    let end = start;
    while (end < reply.length && !SEGMENT_END.has(reply[end])) end++;
    if (end - start >= 4 && reply.toString('latin1', start, start + 3) === 'MSA' && reply[start + 3] === fieldSeparator) {
      // latin1 maps each byte to one character: a byte outside ASCII cannot shift the field boundaries.
      const fields = reply.toString('latin1', start, end).split(String.fromCharCode(fieldSeparator));
      return { code: (fields[1] ?? '').trim(), controlId: (fields[2] ?? '').trim() };
    }
    start = end + 1;
  }
  return null;
}
