import net from 'node:net';

/**
 * A loopback TCP relay between the worker and a fake laboratory (test/support/fake-lab.ts), for faults the fake's
 * own (next-n-messages) faults cannot aim: it can go down and come back on the same port (the lab's connection
 * down, then back), and swallow the lab's replies to the messages that name a given text (one message the lab never
 * answers while the ones behind it are answered). Frames are read as MLLP (VT … FS CR), control ids (MSH-10 going,
 * MSA-2 coming back) from the bytes (ASCII in every character set the fake speaks); the bytes pass untouched.
 */
export interface LabProxy {
  port: number;
  /** Replies to every message whose bytes contain this text (UTF-8) are dropped (null: none): aimed before it is sent. */
  swallowRepliesToMessagesWith(text: string | null): void;
  /** Replies swallowed so far, by control id. */
  swallowed: Map<string, number>;
  /** Stops listening and cuts every connection: the lab is unreachable. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

const VT = 0x0b;
const FS = 0x1c;
const CR = 0x0d;

/** Complete frames' bodies from `pending`, and what is left of it. */
function takeFrames(pending: Buffer): { bodies: Buffer[]; wholes: Buffer[]; rest: Buffer } {
  const bodies: Buffer[] = [];
  const wholes: Buffer[] = [];
  for (;;) {
    const start = pending.indexOf(VT);
    if (start < 0) return { bodies, wholes, rest: Buffer.alloc(0) };
    let end = -1;
    for (let i = start + 1; i + 1 < pending.length; i++) {
      if (pending[i] === FS && pending[i + 1] === CR) {
        end = i;
        break;
      }
    }
    if (end < 0) return { bodies, wholes, rest: pending.subarray(start) };
    bodies.push(pending.subarray(start + 1, end));
    wholes.push(pending.subarray(start, end + 2));
    pending = pending.subarray(end + 2);
  }
}

/** MSH-10 of a message, read from its bytes (the header is ASCII). */
function msh10(body: Buffer): string | null {
  const header = body.toString('latin1').split(/\r|\n/)[0];
  return header.startsWith('MSH') ? (header.split(header[3])[9] ?? null) : null;
}

function msa2(frameBody: Buffer): string | null {
  const text = frameBody.toString('latin1');
  const msa = text.split(/\r|\n/).find((s) => s.startsWith('MSA'));
  return msa ? (msa.split(text[3])[2] ?? null) : null;
}

export async function startLabProxy(target: { host?: string; port: number }): Promise<LabProxy> {
  const sockets = new Set<net.Socket>();
  const swallowed = new Map<string, number>();
  let marker: Buffer | null = null;
  const marked = new Set<string>();
  let port = 0;

  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host ?? '127.0.0.1');
    sockets.add(client);
    sockets.add(upstream);
    let sent: Buffer = Buffer.alloc(0);
    let pending: Buffer = Buffer.alloc(0);
    client.on('data', (chunk) => {
      // Read what goes to the lab only to learn the control ids of marked messages; the bytes pass as they came.
      sent = Buffer.concat([sent, chunk]);
      const { bodies, rest } = takeFrames(sent);
      sent = rest;
      for (const body of bodies) {
        const id = msh10(body);
        if (marker && id && body.includes(marker)) marked.add(id);
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      const { bodies, wholes, rest } = takeFrames(pending);
      pending = rest;
      bodies.forEach((body, i) => {
        const controlId = msa2(body);
        if (controlId !== null && marked.has(controlId)) swallowed.set(controlId, (swallowed.get(controlId) ?? 0) + 1);
        else client.write(wholes[i]);
      });
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        port = (server.address() as net.AddressInfo).port;
        resolve();
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      sockets.clear();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });
  await listen();

  return {
    get port() {
      return port;
    },
    swallowRepliesToMessagesWith(text) {
      marker = text === null ? null : Buffer.from(text, 'utf8');
      if (text === null) marked.clear();
    },
    swallowed,
    down: stop,
    up: listen,
    close: stop,
  };
}
