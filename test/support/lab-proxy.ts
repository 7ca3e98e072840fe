import net from 'node:net';

/**
 * A loopback TCP relay between the worker and a fake laboratory (test/support/fake-lab.ts), for faults the fake's
 * own (next-n-messages) faults cannot aim: it can go down and come back on the same port (the lab's connection
 * down, then back), and swallow the lab's replies to one control id only (one message the lab never answers while
 * the ones behind it are answered). Replies are read as MLLP frames (VT … FS CR) and their MSA-2 taken from the bytes
 * (ASCII in every character set the fake speaks); everything else passes through untouched.
 */
export interface LabProxy {
  port: number;
  /** Replies acknowledging this control id are dropped (null: none). */
  swallowRepliesTo(controlId: string | null): void;
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

function msa2(frameBody: Buffer): string | null {
  const text = frameBody.toString('latin1');
  const msa = text.split(/\r|\n/).find((s) => s.startsWith('MSA'));
  return msa ? (msa.split(text[3])[2] ?? null) : null;
}

export async function startLabProxy(target: { host?: string; port: number }): Promise<LabProxy> {
  const sockets = new Set<net.Socket>();
  const swallowed = new Map<string, number>();
  let aimed: string | null = null;
  let port = 0;

  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host ?? '127.0.0.1');
    sockets.add(client);
    sockets.add(upstream);
    let pending = Buffer.alloc(0);
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const start = pending.indexOf(VT);
        if (start < 0) {
          pending = Buffer.alloc(0);
          return;
        }
        let end = -1;
        for (let i = start + 1; i + 1 < pending.length; i++) {
          if (pending[i] === FS && pending[i + 1] === CR) {
            end = i;
            break;
          }
        }
        if (end < 0) {
          pending = pending.subarray(start);
          return;
        }
        const whole = pending.subarray(start, end + 2);
        const controlId = msa2(pending.subarray(start + 1, end));
        if (aimed !== null && controlId === aimed) swallowed.set(controlId, (swallowed.get(controlId) ?? 0) + 1);
        else client.write(whole);
        pending = pending.subarray(end + 2);
      }
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
    swallowRepliesTo(controlId) {
      aimed = controlId;
    },
    swallowed,
    down: stop,
    up: listen,
    close: stop,
  };
}
