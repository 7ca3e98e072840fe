import net from 'node:net';
import { readAcknowledgementHeader } from '../lib/labs/mllp/acknowledgement-header';
import { MllpClient, MllpConnectionError, type MllpEndpoint, MllpTimeout } from '../lib/labs/mllp/client';
import { CR, FS, frame, MllpFrameReader, VT } from '../lib/labs/mllp/framing';
import { type MllpPeer, MllpServer } from '../lib/labs/mllp/server';
import { createLogger } from '../lib/platform/logger';
import { makeTestAuthority } from './support/tls-certificates';

/** Real sockets on loopback; no database or Temporal (the transport has none). */
const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'mllp-test');

const message = (controlId: string, extra = '') =>
  Buffer.from(`MSH|^~\\&|HB|HBFAC|LAB|LABFAC|20261202101500||ORM^O01|${controlId}|P|2.3\rPID|1||P1||Müller^Zoë${extra}\r`, 'utf8');
const ack = (controlId: string, code = 'AA') =>
  Buffer.from(`MSH|^~\\&|LAB|LABFAC|HB|HBFAC|20261202101501||ACK|ACK-${controlId}-${code}|P|2.3\rMSA|${code}|${controlId}\r`);
const controlIdOf = (reply: Buffer) => readAcknowledgementHeader(reply)?.controlId;
const plain = (port: number): MllpEndpoint => ({ host: '127.0.0.1', port, tls: null });

/** A peer scripted by the test, speaking raw MLLP through the framing module: it can misbehave on purpose. */
async function scriptedLab(onFrame: (frame: Buffer, socket: net.Socket, n: number) => void) {
  const frames: Buffer[] = [];
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    const reader = new MllpFrameReader();
    socket.on('data', (chunk) => {
      for (const f of reader.push(chunk)) {
        frames.push(f);
        onFrame(f, socket, frames.length);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    frames,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});
function client(endpoint: MllpEndpoint, onUnmatchedReply?: (controlId: string | null, reply: Buffer) => void) {
  const c = new MllpClient(endpoint, { log, onUnmatchedReply, connectTimeoutMs: 5000 });
  cleanups.push(() => c.close());
  return c;
}
async function server(options: Partial<ConstructorParameters<typeof MllpServer>[0]>) {
  const s = new MllpServer({ port: 0, log, admit: () => true, onMessage: async (m) => ack(controlIdOfMessage(m)), ...options });
  const port = await s.listen();
  cleanups.push(() => s.close());
  return { server: s, port };
}
const controlIdOfMessage = (m: Buffer) => m.toString('utf8').split('\r')[0].split('|')[9];

describe('MLLP framing', () => {
  const a = message('A1');
  const b = message('B2', '\rNTE|1||Ünïcödé ✓');

  it('reassembles a frame split byte by byte (FS and CR in different reads), without decoding it', () => {
    const reader = new MllpFrameReader();
    const out: Buffer[] = [];
    for (const byte of frame(b)) out.push(...reader.push(Buffer.from([byte])));
    expect(out).toHaveLength(1);
    expect(out[0].equals(b)).toBe(true);
  });

  it('separates frames merged into one read, drops junk before VT, and splits at any boundary', () => {
    const stream = Buffer.concat([Buffer.from('junk\r\n'), frame(a), frame(b), frame(a)]);
    for (let cut = 0; cut <= stream.length; cut++) {
      const reader = new MllpFrameReader();
      const out = [...reader.push(stream.subarray(0, cut)), ...reader.push(stream.subarray(cut))];
      expect(out.map((f) => f.toString('utf8'))).toEqual([a, b, a].map((m) => m.toString('utf8')));
    }
  });

  it('a VT inside an unfinished frame starts again; an FS not followed by CR is content', () => {
    const reader = new MllpFrameReader();
    const broken = Buffer.concat([Buffer.from([VT]), a.subarray(0, 20)]);
    const odd = Buffer.concat([Buffer.from('x'), Buffer.from([FS]), Buffer.from('y')]);
    const out = reader.push(Buffer.concat([broken, Buffer.from([VT]), odd, Buffer.from([FS, CR])]));
    expect(out).toEqual([odd]);
    expect(reader.midFrame).toBe(false);
    reader.push(Buffer.from([VT, 0x41]));
    expect(reader.midFrame).toBe(true);
  });

  it('reads MSA-1 and MSA-2 from raw bytes with any field separator and non-ASCII elsewhere', () => {
    expect(readAcknowledgementHeader(Buffer.from('MSH#^~\\&#LAB#Ünï\rMSA#AE#HB123O#oops\r', 'latin1'))).toEqual({ code: 'AE', controlId: 'HB123O' });
    expect(readAcknowledgementHeader(Buffer.from('MSH|^~\\&|X\nMSA|CA|C1\n'))).toEqual({ code: 'CA', controlId: 'C1' });
    expect(readAcknowledgementHeader(Buffer.from('MSH|^~\\&|X\rPID|1\r'))).toBeNull();
    expect(readAcknowledgementHeader(Buffer.from('PID|1\rMSA|AA|1\r'))).toBeNull();
  });
});

describe('MllpClient', () => {
  it('matches replies by MSA-2: a late ACK goes to onUnmatchedReply and never resolves the next message', async () => {
    // The lab holds A's ACK until B arrives, then writes A's and B's ACKs in one write (two frames in one read).
    let heldSocket: net.Socket | null = null;
    const lab = await scriptedLab((f, socket) => {
      const id = controlIdOfMessage(f);
      if (id === 'A') heldSocket = socket;
      else socket.write(Buffer.concat([frame(ack('A')), frame(ack(id))]));
    });
    cleanups.push(lab.close);
    const unmatched: (string | null)[] = [];
    const c = client(plain(lab.port), (id) => unmatched.push(id));
    await expect(c.send('A', message('A'), { timeoutMs: 300, enhanced: false })).rejects.toBeInstanceOf(MllpTimeout);
    expect(heldSocket).not.toBeNull();
    const { reply } = await c.send('B', message('B'), { timeoutMs: 10_000, enhanced: false });
    expect(controlIdOf(reply)).toBe('B');
    expect(unmatched).toEqual(['A']);
    expect(lab.connections()).toBe(1); // the connection was kept through the timeout
  });

  it('a late ACK alone does not settle the next message, which times out', async () => {
    const lab = await scriptedLab((f, socket) => {
      if (controlIdOfMessage(f) === 'B') socket.write(frame(ack('A')));
    });
    cleanups.push(lab.close);
    const unmatched: (string | null)[] = [];
    const c = client(plain(lab.port), (id) => unmatched.push(id));
    await expect(c.send('A', message('A'), { timeoutMs: 200, enhanced: false })).rejects.toBeInstanceOf(MllpTimeout);
    await expect(c.send('B', message('B'), { timeoutMs: 500, enhanced: false })).rejects.toBeInstanceOf(MllpTimeout);
    expect(unmatched).toEqual(['A']);
  });

  it('sends one message at a time, in call order, each with its own reply', async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    const lab = await scriptedLab((f, socket) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      setTimeout(() => {
        inFlight--;
        socket.write(frame(ack(controlIdOfMessage(f))));
      }, 20);
    });
    cleanups.push(lab.close);
    const c = client(plain(lab.port));
    const ids = ['M1', 'M2', 'M3', 'M4', 'M5'];
    const replies = await Promise.all(ids.map((id) => c.send(id, message(id), { timeoutMs: 10_000, enhanced: false })));
    expect(replies.map((r) => controlIdOf(r.reply))).toEqual(ids);
    expect(lab.frames.map(controlIdOfMessage)).toEqual(ids);
    expect(maxInFlight).toBe(1);
  });

  it('replies split byte by byte across writes are reassembled', async () => {
    const lab = await scriptedLab((f, socket) => {
      const bytes = frame(ack(controlIdOfMessage(f)));
      let i = 0;
      const next = () => {
        if (i < bytes.length && !socket.destroyed) socket.write(bytes.subarray(i, ++i), () => setImmediate(next));
      };
      next();
    });
    cleanups.push(lab.close);
    const { reply } = await client(plain(lab.port)).send('S1', message('S1'), { timeoutMs: 10_000, enhanced: false });
    expect(reply.equals(ack('S1'))).toBe(true);
  });

  it('a reset in the middle of a reply fails the send; the next send reconnects', async () => {
    const lab = await scriptedLab((f, socket) => {
      const bytes = frame(ack(controlIdOfMessage(f)));
      if (lab.frames.length === 1) socket.write(bytes.subarray(0, 25), () => socket.resetAndDestroy());
      else socket.write(bytes);
    });
    cleanups.push(lab.close);
    const c = client(plain(lab.port));
    await expect(c.send('R1', message('R1'), { timeoutMs: 10_000, enhanced: false })).rejects.toBeInstanceOf(MllpConnectionError);
    const { reply } = await c.send('R1', message('R1'), { timeoutMs: 10_000, enhanced: false });
    expect(controlIdOf(reply)).toBe('R1');
    expect(lab.connections()).toBe(2);
  });

  it('a peer that stops mid-reply and times out: the connection is dropped, the next send opens a new one', async () => {
    const lab = await scriptedLab((f, socket) => {
      const bytes = frame(ack(controlIdOfMessage(f)));
      socket.write(lab.frames.length === 1 ? bytes.subarray(0, 10) : bytes);
    });
    cleanups.push(lab.close);
    const c = client(plain(lab.port));
    await expect(c.send('T1', message('T1'), { timeoutMs: 300, enhanced: false })).rejects.toBeInstanceOf(MllpTimeout);
    expect(controlIdOf((await c.send('T1', message('T1'), { timeoutMs: 10_000, enhanced: false })).reply)).toBe('T1');
    expect(lab.connections()).toBe(2);
  });

  it('cannot connect: MllpConnectionError naming the lab', async () => {
    const lab = await scriptedLab(() => undefined);
    await lab.close();
    await expect(client(plain(lab.port)).send('X', message('X'), { timeoutMs: 1000, enhanced: false })).rejects.toThrow(
      new RegExp(`cannot connect to 127.0.0.1:${lab.port}`),
    );
  });

  it('enhanced mode: the CA accept ACK, then the application ACK, both matched by MSA-2 (merged or apart)', async () => {
    const lab = await scriptedLab((f, socket) => {
      const id = controlIdOfMessage(f);
      if (id === 'E1') {
        socket.write(frame(ack(id, 'CA')));
        setTimeout(() => socket.write(frame(ack(id, 'AA'))), 50);
      } else if (id === 'E2') socket.write(Buffer.concat([frame(ack('OTHER', 'AA')), frame(ack(id, 'CA')), frame(ack(id, 'AE'))]));
      else socket.write(frame(ack(id, 'CR')));
    });
    cleanups.push(lab.close);
    const unmatched: (string | null)[] = [];
    const c = client(plain(lab.port), (id) => unmatched.push(id));
    const commits: string[] = [];
    const first = await c.send('E1', message('E1'), { timeoutMs: 10_000, enhanced: true, onCommit: (r) => commits.push(readAcknowledgementHeader(r)!.code) });
    expect(commits).toEqual(['CA']);
    expect(readAcknowledgementHeader(first.reply)).toEqual({ code: 'AA', controlId: 'E1' });
    expect(readAcknowledgementHeader(first.commit!)).toEqual({ code: 'CA', controlId: 'E1' });
    const second = await c.send('E2', message('E2'), { timeoutMs: 10_000, enhanced: true });
    expect(readAcknowledgementHeader(second.reply)?.code).toBe('AE');
    expect(unmatched).toEqual(['OTHER']);
    // CR at the door is the answer: no application ACK follows.
    const third = await c.send('E3', message('E3'), { timeoutMs: 10_000, enhanced: true });
    expect(readAcknowledgementHeader(third.reply)?.code).toBe('CR');
  });

  it('enhanced mode: a timeout after the CA carries the commit', async () => {
    const lab = await scriptedLab((f, socket) => socket.write(frame(ack(controlIdOfMessage(f), 'CA'))));
    cleanups.push(lab.close);
    const failure = await client(plain(lab.port))
      .send('E9', message('E9'), { timeoutMs: 300, enhanced: true })
      .catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(MllpTimeout);
    expect(readAcknowledgementHeader((failure as MllpTimeout).commit!)?.code).toBe('CA');
  });
});

describe('MllpServer', () => {
  it('writes the reply only after onMessage resolves, and handles one connection’s messages one at a time, in order', async () => {
    const events: string[] = [];
    let active = 0;
    let maxActive = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { port } = await server({
      onMessage: async (m) => {
        const id = controlIdOfMessage(m);
        active++;
        maxActive = Math.max(maxActive, active);
        events.push(`start ${id}`);
        if (id === 'G1') await gate;
        await new Promise((r) => setTimeout(r, 5));
        events.push(`stored ${id}`);
        active--;
        return ack(id);
      },
    });
    // Three frames in one write, through a raw socket.
    const socket = net.connect(port, '127.0.0.1');
    cleanups.push(async () => socket.destroy());
    const reader = new MllpFrameReader();
    const replies: string[] = [];
    socket.on('data', (chunk) => {
      for (const r of reader.push(chunk)) {
        replies.push(controlIdOf(r)!);
        events.push(`ack ${controlIdOf(r)}`);
      }
    });
    socket.write(Buffer.concat(['G1', 'G2', 'G3'].map((id) => frame(message(id)))));
    while (!events.includes('start G1')) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 100));
    expect(replies).toEqual([]); // held while the first message is being stored
    release();
    while (replies.length < 3) await new Promise((r) => setTimeout(r, 10));
    // Handled in order, one after the other; each acknowledged only once stored (the next may start meanwhile).
    expect(events.filter((e) => !e.startsWith('ack'))).toEqual(['start G1', 'stored G1', 'start G2', 'stored G2', 'start G3', 'stored G3']);
    for (const id of ['G1', 'G2', 'G3']) expect(events.indexOf(`ack ${id}`)).toBeGreaterThan(events.indexOf(`stored ${id}`));
    expect(replies).toEqual(['G1', 'G2', 'G3']);
    expect(maxActive).toBe(1);
  });

  it('a handler error is answered by nothing (the sender resends) and the next message is still handled', async () => {
    const { port } = await server({
      onMessage: async (m) => {
        if (controlIdOfMessage(m) === 'F1') throw new Error('database down');
        return ack(controlIdOfMessage(m));
      },
    });
    const c = client(plain(port));
    await expect(c.send('F1', message('F1'), { timeoutMs: 300, enhanced: false })).rejects.toBeInstanceOf(MllpTimeout);
    expect(controlIdOf((await c.send('F2', message('F2'), { timeoutMs: 10_000, enhanced: false })).reply)).toBe('F2');
  });

  it('admits by address (IPv4-mapped addresses normalised) and refuses others before reading anything', async () => {
    const peers: MllpPeer[] = [];
    const handled: string[] = [];
    let allowed = '10.9.8.7';
    const { port } = await server({
      admit: (peer) => {
        peers.push(peer);
        return peer.remoteAddress === allowed;
      },
      onMessage: async (m) => {
        handled.push(controlIdOfMessage(m));
        return ack(controlIdOfMessage(m));
      },
    });
    // The server listens on every interface (dual stack): an IPv4 client shows as ::ffff:127.0.0.1 to node.
    await expect(client(plain(port)).send('N1', message('N1'), { timeoutMs: 5000, enhanced: false })).rejects.toBeInstanceOf(MllpConnectionError);
    expect(peers).toEqual([{ remoteAddress: '127.0.0.1', certificateFingerprint256: null }]);
    expect(handled).toEqual([]);
    allowed = '127.0.0.1';
    expect(controlIdOf((await client(plain(port)).send('N2', message('N2'), { timeoutMs: 5000, enhanced: false })).reply)).toBe('N2');
    expect(handled).toEqual(['N2']);
  });

  it('close() stops listening and drops open connections', async () => {
    const s = new MllpServer({ port: 0, log, admit: () => true, onMessage: async (m) => ack(controlIdOfMessage(m)) });
    const port = await s.listen();
    const c = client(plain(port));
    await c.send('C1', message('C1'), { timeoutMs: 5000, enhanced: false });
    await s.close();
    await expect(c.send('C2', message('C2'), { timeoutMs: 5000, enhanced: false })).rejects.toBeInstanceOf(MllpConnectionError);
  });
});

describe('MLLP over TLS', () => {
  const authority = makeTestAuthority();
  const stranger = makeTestAuthority('Unknown CA');

  it('TLS: the client checks the server against the CA it was given', async () => {
    const { port } = await server({ tls: { cert: authority.server.cert, key: authority.server.key } });
    const ok = await client({ host: '127.0.0.1', port, tls: { ca: authority.ca, cert: null, key: null } }).send('T1', message('T1'), {
      timeoutMs: 10_000,
      enhanced: false,
    });
    expect(controlIdOf(ok.reply)).toBe('T1');
    await expect(
      client({ host: '127.0.0.1', port, tls: { ca: stranger.ca, cert: null, key: null } }).send('T2', message('T2'), { timeoutMs: 10_000, enhanced: false }),
    ).rejects.toBeInstanceOf(MllpConnectionError);
  });

  it('mutual TLS: a client certificate of the CA is admitted by its fingerprint; one of another CA is refused by TLS', async () => {
    const peers: MllpPeer[] = [];
    const { port } = await server({
      tls: { cert: authority.server.cert, key: authority.server.key, ca: [authority.ca] },
      admit: (peer) => {
        peers.push(peer);
        return peer.certificateFingerprint256 === authority.client.fingerprint256;
      },
    });
    const lab = { host: '127.0.0.1', port };
    const ok = await client({ ...lab, tls: { ca: authority.ca, cert: authority.client.cert, key: authority.client.key } }).send('M1', message('M1'), {
      timeoutMs: 10_000,
      enhanced: false,
    });
    expect(controlIdOf(ok.reply)).toBe('M1');
    expect(peers).toEqual([{ remoteAddress: '127.0.0.1', certificateFingerprint256: authority.client.fingerprint256 }]);
    await expect(
      client({ ...lab, tls: { ca: authority.ca, cert: stranger.client.cert, key: stranger.client.key } }).send('M2', message('M2'), {
        timeoutMs: 10_000,
        enhanced: false,
      }),
    ).rejects.toBeInstanceOf(MllpConnectionError);
    await expect(
      client({ ...lab, tls: { ca: authority.ca, cert: null, key: null } }).send('M3', message('M3'), { timeoutMs: 10_000, enhanced: false }),
    ).rejects.toBeInstanceOf(MllpConnectionError);
    expect(peers).toHaveLength(1); // neither reached admit: TLS refused them
  });

  it('TLS without a CA: a client certificate is pinned by fingerprint; an unknown one is refused by admit', async () => {
    const peers: MllpPeer[] = [];
    const { port } = await server({
      tls: { cert: authority.server.cert, key: authority.server.key },
      admit: (peer) => {
        peers.push(peer);
        return peer.certificateFingerprint256 === authority.client.fingerprint256;
      },
    });
    const lab = { host: '127.0.0.1', port };
    await expect(
      client({ ...lab, tls: { ca: authority.ca, cert: stranger.client.cert, key: stranger.client.key } }).send('P1', message('P1'), {
        timeoutMs: 10_000,
        enhanced: false,
      }),
    ).rejects.toBeInstanceOf(MllpConnectionError);
    expect(peers.map((p) => p.certificateFingerprint256)).toEqual([stranger.client.fingerprint256]);
    const ok = await client({ ...lab, tls: { ca: authority.ca, cert: authority.client.cert, key: authority.client.key } }).send('P2', message('P2'), {
      timeoutMs: 10_000,
      enhanced: false,
    });
    expect(controlIdOf(ok.reply)).toBe('P2');
  });
});
