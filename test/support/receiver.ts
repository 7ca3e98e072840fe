import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

export interface Reply {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /** Answer after this long (for timeouts). */
  delayMs?: number;
}

export type ReceiverBehaviour = (req: ReceivedRequest, index: number) => Reply;

/** A real HTTP receiver on 127.0.0.1 that records every request and answers as told. */
export interface Receiver {
  url: string;
  requests: ReceivedRequest[];
  behave(fn: ReceiverBehaviour): void;
  /** Resolves when at least `n` requests arrived (optionally matching). */
  waitFor(n: number, timeoutMs?: number, match?: (r: ReceivedRequest) => boolean): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

export async function startReceiver(behaviour: ReceiverBehaviour = () => ({ status: 200 })): Promise<Receiver> {
  let behave = behaviour;
  const requests: ReceivedRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: ReceivedRequest = { path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      const index = requests.length;
      requests.push(r);
      const reply = behave(r, index);
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(reply.status ?? 200, { 'content-type': 'text/plain', ...(reply.headers ?? {}) });
        res.end(reply.body ?? 'ok');
      };
      if (reply.delayMs) setTimeout(send, reply.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    requests,
    behave: (fn) => (behave = fn),
    async waitFor(n, timeoutMs = 20000, match = () => true) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const got = requests.filter(match);
        if (got.length >= n) return got;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`receiver got ${requests.filter(match).length} of ${n} expected requests within ${timeoutMs} ms`);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
