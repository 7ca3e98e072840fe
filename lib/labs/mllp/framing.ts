/**
 * MLLP framing (HL7 v2 over TCP): each message travels as VT <message bytes> FS CR. Framing is done on Buffers only:
 * a message's text encoding is its MSH-18 (or the lab's agreement), and putting the stream through a text decoder
 * corrupts both the framing and multi-byte characters split across reads.
 *
 * Why our own framing rather than a library (checked Dec 2026):
 * - @medplum/hl7 4.5.2 ends a frame only when a TCP read ends with FS CR, so two frames merged into one read become
 *   one message; its enhanced mode sends the CA accept ACK before the handler has stored anything.
 * - node-hl7-client 4.0.0 (MLLPCodec) takes a frame as complete once FS and CR appear anywhere in the buffer and
 *   decodes the whole buffer, framing bytes included, as text: merged frames become one message. Its replies go
 *   to one handler in arrival order (no MSA-2 matching) and it has no enhanced mode.
 * - node-hl7-server 2.5.0 sets a text encoding on the socket, handles only the first frame of a read, and starts
 *   every message's handler at once (no order per connection).
 * node:net and node:tls give TLS, mutual TLS and reconnects; what is left is the ~100 lines here and in client.ts
 * and server.ts.
 */

export const VT = 0x0b;
export const FS = 0x1c;
export const CR = 0x0d;

const START = Buffer.from([VT]);
const END = Buffer.from([FS, CR]);

/** The message as one MLLP frame. */
export function frame(message: Buffer): Buffer {
  return Buffer.concat([START, message, END]);
}

/** A frame longer than the reader takes: the peer is not speaking MLLP, or is flooding; the connection is dropped. */
export class MllpFrameTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`MLLP frame over ${limit} bytes`);
  }
}

/** Results can carry a PDF in base64: a few MB. Past this, a frame is taken as a broken or hostile peer. */
const DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024;

/**
 * Reassembles frames from TCP reads: a frame split across any number of reads (down to one byte each, FS and CR in
 * different reads) and several frames merged into one read. Bytes outside a frame (before VT) are dropped; a VT
 * inside an unfinished frame starts a new frame (the sender gave up on the first one). Chunks are kept as they came
 * and copied once, when their frame is complete.
 */
export class MllpFrameReader {
  private inFrame = false;
  private parts: Buffer[] = [];
  private size = 0;
  /** The last byte read was an FS whose CR has not arrived yet (it is not in `parts`). */
  private pendingFs = false;

  constructor(private readonly maxFrameBytes = DEFAULT_MAX_FRAME_BYTES) {}

  /** True while a frame has started and not ended: the peer stopped mid-frame if nothing more comes. */
  get midFrame(): boolean {
    return this.inFrame;
  }

  push(chunk: Buffer): Buffer[] {
    const frames: Buffer[] = [];
    let pos = 0;
    while (pos < chunk.length) {
      if (!this.inFrame) {
        const start = chunk.indexOf(VT, pos);
        if (start < 0) break; // junk between frames
        this.startFrame();
        pos = start + 1;
        continue;
      }
      if (this.pendingFs) {
        this.pendingFs = false;
        if (chunk[pos] === CR) {
          frames.push(this.endFrame());
          pos += 1;
          continue;
        }
        this.keep(END.subarray(0, 1)); // an FS not followed by CR is content (malformed, but not ours to judge)
      }
      const fs = chunk.indexOf(FS, pos);
      const vt = chunk.indexOf(VT, pos);
      if (vt >= 0 && (fs < 0 || vt < fs)) {
        this.startFrame(); // restart: the unfinished frame is abandoned
        pos = vt + 1;
        continue;
      }
      if (fs < 0) {
        this.keep(chunk.subarray(pos));
        break;
      }
      this.keep(chunk.subarray(pos, fs));
      if (fs + 1 === chunk.length) {
        this.pendingFs = true;
        break;
      }
      if (chunk[fs + 1] === CR) {
        frames.push(this.endFrame());
        pos = fs + 2;
      } else {
        this.keep(chunk.subarray(fs, fs + 1));
        pos = fs + 1;
      }
    }
    return frames;
  }

  private startFrame(): void {
    this.inFrame = true;
    this.parts = [];
    this.size = 0;
    this.pendingFs = false;
  }

  private keep(part: Buffer): void {
    if (!part.length) return;
    this.size += part.length;
    if (this.size > this.maxFrameBytes) {
      this.inFrame = false;
      this.parts = [];
      throw new MllpFrameTooLarge(this.maxFrameBytes);
    }
    this.parts.push(part);
  }

  private endFrame(): Buffer {
    const message = Buffer.concat(this.parts, this.size);
    this.inFrame = false;
    this.parts = [];
    this.size = 0;
    return message;
  }
}
