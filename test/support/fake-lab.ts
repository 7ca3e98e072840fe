import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { frame, MllpFrameReader } from '../../lib/labs/mllp/framing';
import {
  answerHeaderOf,
  buildAck,
  buildCancelAnswer,
  type CheckedOrder,
  checkOrder,
  componentOf,
  decodeMessage,
  encodeMessage,
  Hl7Problem,
  type LabProfile,
  parseMessage,
  unescapeValue,
} from './fake-lab-hl7';
import { buildResultMessage, type FakeResult } from './fake-lab-results';

export type { FakeObservation, FakeResult, FakeResultTest } from './fake-lab-results';
export { buildResultMessage, specimenProblem, specimenReceived } from './fake-lab-results';

/**
 * A laboratory on loopback that speaks HL7 v2 over MLLP as LOI/LRI describe (../shared/reference/labs.md §5): it
 * takes orders (OML^O21 2.5.1 LOI, ORM^O01 2.3) and checks them as a lab's interface engine does (framing, MSH-21
 * profile, required fields, escapes), answers AA/AE/AR with ERR in original or enhanced acknowledgement, holds one
 * order per control id however often it is resent, answers a cancel CR or UC by the specimen's state, misbehaves
 * on request (faults), and sends results (ORU^R01) through their life to an MLLP listener.
 *
 * It uses the transport's framing (lib/labs/mllp/framing.ts) but its own HL7 parsing and checks (fake-lab-hl7.ts),
 * never the renderer's, so that a mistake in lib/labs/hl7/ is not repeated here.
 */

/**
 * Faults, each for one message (the next ones that arrive, resends included):
 * - 'drop-ack': the message is taken (held, counted) but nothing is answered;
 * - 'late-ack': the answer after `lateAckMs` (or `afterMs`); the connection's later messages wait behind it, as a
 *   lab's sequential interface does; in enhanced mode the accept ACK comes at once and the application ACK late;
 * - 'reset-mid-frame': half of the answer's frame, then a TCP reset;
 * - 'split': the answer written a byte at a time, in separate writes;
 * - 'merge': two answers in one write — enhanced: the accept and application ACKs; original: the answer is held
 *   and written together with the connection's next answer (so it arrives late, merged with another).
 */
export type FakeLabFault = 'drop-ack' | 'late-ack' | 'reset-mid-frame' | 'split' | 'merge' | { type: 'late-ack'; afterMs: number };

export interface FakeLabOptions {
  ackMode?: 'original' | 'enhanced';
  /** With `ca`, clients must present a certificate of that CA (mutual TLS). */
  tls?: { cert: string; key: string; ca?: string | string[] };
  /** The interfaces this lab takes (default both). */
  profiles?: LabProfile[];
  /** HL7 0211 name of the agreed character set, for messages with MSH-18 empty (default 'UNICODE UTF-8'). */
  charset?: string;
  /** The delay of a 'late-ack' fault (default 1500 ms). */
  lateAckMs?: number;
  /** The lab's own time to take each message before it answers (its engine storing it; default 0). */
  answerDelayMs?: number;
  /** Called once a message's answer is written (the bench times orders to the lab's ACK by it). */
  onAnswered?: (controlId: string) => void;
}

export interface FakeLabOrder {
  /** The order message's MSH-10. */
  controlId: string;
  /** Every distinct control id an order message for this placer number came with: more than one means the sender
   *  resent with fresh ids, and a real lab would hold the order twice. */
  controlIds: string[];
  text: string;
  /** How often an order message for this placer number arrived: resends are counted here, not held twice. */
  sends: number;
  cancelled: boolean;
  /** The lab's accession number (ORC-3 in its answers and results). */
  fillerNumber: string;
  placerField: string;
  patient: CheckedOrder['patient'];
  tests: CheckedOrder['tests'];
  type: CheckedOrder['type'];
}

export interface FakeLabReceived {
  controlId: string;
  text: string;
  bytes: Buffer;
  /** MSH-9 message code and trigger event, e.g. 'OML^O21'. */
  type: string;
}

export interface ResultTarget {
  host: string;
  port: number;
  tls?: { ca?: string | null; cert?: string | null; key?: string | null };
}

export interface SendOptions {
  /** Default 30 s: how long to wait for the ACK. */
  timeoutMs?: number;
  /** Write the frame in 7-byte pieces, in separate writes (framing split across reads at the receiver). */
  split?: boolean;
}

export interface FakeLab {
  port: number;
  /** Every frame received, decoded, with its control id (resends included). */
  received: FakeLabReceived[];
  /** The distinct orders held, by placer number (one per control id). */
  orders(): Map<string, FakeLabOrder>;
  /** Every distinct message answered, by control id: its answer's code and how often it arrived. */
  answers(): Map<string, { type: string; code: string; sends: number }>;
  /** Connections accepted so far. */
  connections(): number;
  inject(fault: FakeLabFault, times?: number): void;
  /** Answer the next orders AE/AR with this ERR text (invalid messages are refused anyway). */
  refuseNext(code: 'AE' | 'AR', text: string, times?: number): void;
  /** Specimen state decides a cancel's answer: 'received' → UC with a reason; otherwise CR. */
  setSpecimenState(placer: string, state: 'pending' | 'received'): void;
  /** Builds an ORU^R01 (LRI or 2.3) and sends it to our listener; resolves with our ACK. Defaults (filler number,
   *  patient, ORC-2 as written) come from the order the lab holds for that placer number. */
  sendResults(to: ResultTarget, result: FakeResult, options?: SendOptions): Promise<{ ack: string; code: string; controlId: string; text: string }>;
  /** Sends bytes as they are (one frame) and waits for the ACK whose MSA-2 is `controlId`. */
  sendMessage(to: ResultTarget, controlId: string, bytes: Buffer, options?: SendOptions): Promise<{ ack: string; code: string }>;
  close(): Promise<void>;
}

const RESULT_CHARSETS = ['UNICODE UTF-8', '8859/1', 'ASCII'] as const;

interface Answer {
  type: string;
  code: string;
  sends: number;
  /** Frames, in order: original mode one; enhanced mode the accept ACK then (unless refused at the door) the application ACK. */
  frames: Buffer[];
}

interface Connection {
  socket: net.Socket;
  /** 'merge' in original mode: answers written with the next one. */
  held: Buffer[];
}

export async function startFakeLab(options: FakeLabOptions = {}): Promise<FakeLab> {
  const ackMode = options.ackMode ?? 'original';
  const profiles = options.profiles ?? ['LOI_2.5.1', 'ORM_2.3'];
  const defaultCharset = options.charset ?? 'UNICODE UTF-8';
  const received: FakeLabReceived[] = [];
  const answers = new Map<string, Answer>();
  const orders = new Map<string, FakeLabOrder>();
  const specimenStates = new Map<string, 'pending' | 'received'>();
  const faults: { fault: FakeLabFault; remaining: number }[] = [];
  const refusals: { code: 'AE' | 'AR'; text: string; remaining: number }[] = [];
  const sockets = new Set<net.Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let connections = 0;
  let answerCount = 0;
  let closed = false;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        timers.delete(timer);
        resolve();
      }, ms);
      timers.add(timer);
    });
  const take = <T extends { remaining: number }>(queue: T[]): T | undefined => {
    const next = queue[0];
    if (next && --next.remaining <= 0) queue.shift();
    return next;
  };
  const nextAnswerId = () => `FL${Date.now().toString(36).toUpperCase()}${(++answerCount).toString().padStart(4, '0')}`;

  function answer(text: string, charset: string, decodingProblem: Hl7Problem | null): Answer {
    const header = answerHeaderOf(text, charset, new Date());
    const type = (() => {
      const message = parseMessage(text);
      return message ? `${componentOf(message, message.segments[0], 9, 1)}^${componentOf(message, message.segments[0], 9, 2)}` : '';
    })();
    const encode = (t: string) => frame(encodeMessage(t, charset));
    /** `atTheDoor`: the header cannot be taken (type, version, profile); in enhanced mode a CR accept ACK says so
     *  and no application ACK follows. Otherwise the message is committed (CA) and then refused (AE/AR). */
    const refusal = (level: 'AE' | 'AR', problems: Pick<Hl7Problem, 'code' | 'text' | 'location'>[], atTheDoor: boolean): Answer => {
      const frames =
        ackMode === 'original'
          ? [buildAck(header, level, nextAnswerId(), problems)]
          : atTheDoor
            ? [buildAck(header, 'CR', nextAnswerId(), problems)]
            : [buildAck(header, 'CA', nextAnswerId()), buildAck(header, level, nextAnswerId(), problems)];
      return { type, code: level, sends: 1, frames: frames.map(encode) };
    };
    const checked = decodingProblem?.level === 'AR' ? { order: null, problems: [decodingProblem] } : checkOrder(text, profiles);
    const problems = [...(decodingProblem ? [decodingProblem] : []), ...checked.problems.filter((p) => p !== decodingProblem)];
    if (problems.length || !checked.order) {
      const level = problems.some((p) => p.level === 'AR') ? 'AR' : 'AE';
      return refusal(level, problems, level === 'AR');
    }
    const order = checked.order;
    const accepted = (frames: string[]): Answer => ({
      type,
      code: 'AA',
      sends: 1,
      frames: (ackMode === 'enhanced' ? [buildAck(header, 'CA', nextAnswerId()), ...frames] : frames).map(encode),
    });

    if (order.orderControl === 'NW') {
      const refused = take(refusals);
      if (refused) return refusal(refused.code, [{ code: '207', text: refused.text, location: null }], false);
      const already = orders.get(order.placerNumber);
      if (already) {
        already.controlIds.push(order.controlId);
        already.sends++;
        return accepted([buildAck(header, 'AA', nextAnswerId())]);
      }
      orders.set(order.placerNumber, {
        controlId: order.controlId,
        controlIds: [order.controlId],
        text,
        sends: 1,
        cancelled: false,
        fillerNumber: `FL${randomBytes(4).toString('hex').toUpperCase()}`,
        placerField: order.placerField,
        patient: {
          id: unescapeValue(order.patient.id),
          family: unescapeValue(order.patient.family),
          given: unescapeValue(order.patient.given),
          birthDate: order.patient.birthDate,
          sex: order.patient.sex,
        },
        tests: order.tests,
        type: order.type,
      });
      return accepted([buildAck(header, 'AA', nextAnswerId())]);
    }
    // A cancel request (ORC-1 CA).
    const held = orders.get(order.placerNumber);
    if (!held) return refusal('AE', [new Hl7Problem('AE', '204', `No order with placer number ${order.placerNumber} is on file`, 'ORC^1^2')], false);
    const state = specimenStates.get(order.placerNumber) ?? 'pending';
    const outcome =
      state === 'received' ? ({ control: 'UC', reason: 'Specimen already received; testing is in process' } as const) : ({ control: 'CR' } as const);
    if (outcome.control === 'CR') held.cancelled = true;
    return accepted([
      buildCancelAnswer(
        header,
        nextAnswerId(),
        { placerField: held.placerField, fillerNumber: held.fillerNumber, patientId: order.patient.id, tests: held.tests },
        outcome,
      ),
    ]);
  }

  const write = (socket: net.Socket, bytes: Buffer) =>
    new Promise<void>((resolve) => {
      if (socket.destroyed) return resolve();
      socket.write(bytes, () => resolve());
    });

  async function deliver(connection: Connection, frames: Buffer[], fault: FakeLabFault | undefined): Promise<void> {
    const { socket } = connection;
    const kind = typeof fault === 'object' ? fault.type : fault;
    const flush = (more: Buffer[]) => {
      const all = [...connection.held, ...more];
      connection.held = [];
      return all;
    };
    switch (kind) {
      case 'drop-ack':
        return;
      case 'late-ack': {
        const afterMs = typeof fault === 'object' ? fault.afterMs : (options.lateAckMs ?? 1500);
        for (const f of flush(frames.slice(0, -1))) await write(socket, f);
        await sleep(afterMs);
        await write(socket, frames[frames.length - 1]);
        return;
      }
      case 'reset-mid-frame': {
        const all = Buffer.concat(flush(frames));
        await write(socket, all.subarray(0, Math.max(1, Math.floor(all.length / 2))));
        if (!socket.destroyed) socket.resetAndDestroy();
        return;
      }
      case 'split':
        for (const byte of Buffer.concat(flush(frames))) {
          await write(socket, Buffer.from([byte]));
          await new Promise((r) => setImmediate(r));
        }
        return;
      case 'merge':
        if (ackMode === 'enhanced' && frames.length > 1) await write(socket, Buffer.concat(flush(frames)));
        else connection.held.push(...frames);
        return;
      default:
        if (connection.held.length) await write(socket, Buffer.concat(flush(frames)));
        else for (const f of frames) await write(socket, f);
    }
  }

  async function handle(connection: Connection, bytes: Buffer): Promise<void> {
    const { text, charset, problem } = decodeMessage(bytes, defaultCharset);
    const controlId = answerHeaderOf(text, charset, new Date()).controlId;
    let entry = controlId ? answers.get(controlId) : undefined;
    if (entry) {
      entry.sends++;
      const order = [...orders.values()].find((o) => o.controlIds.includes(controlId));
      if (order) order.sends++;
    } else {
      entry = answer(text, charset, problem);
      if (controlId) answers.set(controlId, entry);
    }
    received.push({ controlId, text, bytes, type: entry.type });
    if (options.answerDelayMs) await sleep(options.answerDelayMs);
    await deliver(connection, entry.frames, take(faults)?.fault);
    if (controlId) options.onAnswered?.(controlId);
  }

  function accept(socket: net.Socket): void {
    connections++;
    sockets.add(socket);
    socket.setNoDelay(true);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    const connection: Connection = { socket, held: [] };
    const reader = new MllpFrameReader();
    let queue = Promise.resolve();
    socket.on('data', (chunk: Buffer) => {
      for (const message of reader.push(chunk)) {
        queue = queue.then(() => (closed ? undefined : handle(connection, message))).catch((err) => console.error('fake lab:', err));
      }
    });
  }

  const server = options.tls
    ? tls.createServer(
        {
          cert: options.tls.cert,
          key: options.tls.key,
          ca: options.tls.ca,
          requestCert: Boolean(options.tls.ca),
          rejectUnauthorized: Boolean(options.tls.ca),
        },
        accept,
      )
    : net.createServer(accept);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;

  async function sendMessage(to: ResultTarget, controlId: string, bytes: Buffer, sendOptions: SendOptions = {}): Promise<{ ack: string; code: string }> {
    const timeoutMs = sendOptions.timeoutMs ?? 30_000;
    const socket = to.tls
      ? tls.connect({
          host: to.host,
          port: to.port,
          ca: to.tls.ca ?? undefined,
          cert: to.tls.cert ?? undefined,
          key: to.tls.key ?? undefined,
          servername: net.isIP(to.host) ? undefined : to.host,
        })
      : net.connect({ host: to.host, port: to.port });
    sockets.add(socket);
    try {
      return await new Promise<{ ack: string; code: string }>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`fake lab: no ACK to ${controlId} from ${to.host}:${to.port} within ${timeoutMs} ms`)), timeoutMs);
        const fail = (err: Error) => {
          clearTimeout(timer);
          reject(err);
        };
        socket.once('error', fail);
        socket.once('close', () => fail(new Error(`fake lab: ${to.host}:${to.port} closed the connection before the ACK to ${controlId}`)));
        socket.once(to.tls ? 'secureConnect' : 'connect', async () => {
          const framed = frame(bytes);
          if (!sendOptions.split) socket.write(framed);
          else
            for (let i = 0; i < framed.length; i += 7) {
              await write(socket, framed.subarray(i, i + 7));
              await new Promise((r) => setImmediate(r));
            }
        });
        const reader = new MllpFrameReader();
        socket.on('data', (chunk: Buffer) => {
          for (const reply of reader.push(chunk)) {
            const ack = decodeMessage(reply, 'UNICODE UTF-8').text;
            const message = parseMessage(ack);
            const msa = message?.segments.find((s) => s.name === 'MSA');
            if (!message || !msa || componentOf(message, msa, 2) !== controlId) continue; // not ours (or a late one)
            clearTimeout(timer);
            resolve({ ack, code: componentOf(message, msa, 1) });
          }
        });
      });
    } finally {
      socket.removeAllListeners('close');
      socket.destroy();
      sockets.delete(socket);
    }
  }

  let resultCount = 0;
  return {
    port,
    received,
    orders: () => new Map([...orders].map(([placer, order]) => [placer, { ...order, controlIds: [...order.controlIds] }])),
    answers: () => new Map([...answers].map(([id, a]) => [id, { type: a.type, code: a.code, sends: a.sends }])),
    connections: () => connections,
    inject: (fault, times = 1) => {
      faults.push({ fault, remaining: times });
    },
    refuseNext: (code, text, times = 1) => {
      refusals.push({ code, text, remaining: times });
    },
    setSpecimenState: (placer, state) => {
      specimenStates.set(placer, state);
    },
    sendMessage,
    async sendResults(to, result, sendOptions) {
      const held = result.placerNumber === null ? undefined : orders.get(result.placerNumber);
      const built = buildResultMessage(
        {
          ...result,
          // As the order came: results of a 2.3 order in 2.3, in the lab's agreed character set.
          profile: result.profile ?? (held?.type === 'ORM^O01' ? 'ORU_2.3' : 'LRI_2.5.1'),
          charset: result.charset ?? (RESULT_CHARSETS.find((c) => c === defaultCharset) || undefined),
          patient: result.patient ?? held?.patient,
          placerField: result.placerField ?? held?.placerField,
        },
        {
          controlId: `FLR${Date.now().toString(36).toUpperCase()}${(++resultCount).toString().padStart(4, '0')}`,
          // Stable for a placer number (or a control id), so that a message built twice is the same bytes.
          fillerNumber:
            held?.fillerNumber ??
            `FL${createHash('sha256')
              .update(result.placerNumber ?? result.controlId ?? '')
              .digest('hex')
              .slice(0, 8)
              .toUpperCase()}`,
        },
      );
      const { ack, code } = await sendMessage(to, built.controlId, built.bytes, sendOptions);
      return { ack, code, controlId: built.controlId, text: built.text };
    },
    async close() {
      closed = true;
      for (const timer of timers) clearTimeout(timer);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
