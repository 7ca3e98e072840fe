import net from 'node:net';
import { Hl7Message } from '@medplum/core';
import { readAcknowledgementHeader } from '../lib/labs/mllp/acknowledgement-header';
import { MllpClient, MllpConnectionError, type MllpEndpoint, MllpTimeout } from '../lib/labs/mllp/client';
import { CR, FS, frame, MllpFrameReader, VT } from '../lib/labs/mllp/framing';
import { type MllpPeer, MllpServer } from '../lib/labs/mllp/server';
import { createLogger } from '../lib/platform/logger';
import { specimenProblem, specimenReceived, startFakeLab } from './support/fake-lab';
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

// ---------- the fake laboratory (test/support/fake-lab.ts) ----------

const NPI = '1234567893';
const OUR_OID = '2.16.840.1.113883.3.9999';
const LOI_PROFILES =
  'LOI_Common_Component^^2.16.840.1.113883.9.66^ISO~LOI_GU_Component^^2.16.840.1.113883.9.78^ISO~LAB_PRU_Component^^2.16.840.1.113883.9.82^ISO';

/** Hand-written orders as a lab's spec shows them (not our renderer's output). */
function orm23(controlId: string, placer: string, change: (segments: string[]) => void = () => undefined, orderControl = 'NW'): Buffer {
  const segments = [
    `MSH|^~\\&|HEALTHBRIDGE|HBFAC|FAKELAB|FAKELAB|20261202101500||ORM^O01|${controlId}|P|2.3`,
    "PID|1||PAT123^^^HB^MR||O'Brien^Zoe^Q||19800115|F|||1 Main St^^Springfield^IL^62701||5551234567",
    'PV1|1|O',
    'IN1|1|PLAN1|60054|Aetna',
    "GT1|1||O'Brien^Zoe",
    'DG1|1|I10|E11.9^Type 2 diabetes mellitus without complications^I10',
    `ORC|${orderControl}|${placer}^HB|||||||20261202101500|||${NPI}^Smith^Jane`,
    `OBR|1|${placer}^HB||322000^Comprehensive Metabolic Panel^L|||20261202100000||||||||${NPI}^Smith^Jane`,
    'NTE|1|P|Fasting \\T\\ morning draw',
  ];
  change(segments);
  return Buffer.from(`${segments.join('\r')}\r`, 'latin1');
}

function oml251(controlId: string, placer: string, change: (segments: string[]) => void = () => undefined, orderControl = 'NW'): Buffer {
  const placerField = `${placer}^HB^${OUR_OID}^ISO`;
  const provider = `${NPI}^Smith^Jane^^^^^^NPI&2.16.840.1.113883.4.6&ISO^L^^^NPI`;
  const segments = [
    `MSH|^~\\&|HEALTHBRIDGE^${OUR_OID}^ISO|HBFAC|FAKELAB|FAKELAB|20261202101500+0000||OML^O21^OML_O21|${controlId}|P|2.5.1|||AL|AL||UNICODE UTF-8|||${LOI_PROFILES}`,
    `PID|1||PAT123^^^HB&${OUR_OID}&ISO^MR||Müller^Zoë^Ł||19800115|F`,
    `ORC|${orderControl}|${placerField}|||||||20261202101500+0000|||${provider}`,
    `OBR|1|${placerField}||24323-8^Comprehensive metabolic panel^LN^322000^CMP^L|||20261202100000+0000||||||||${provider}`,
    `ORC|${orderControl}|${placerField}|||||||20261202101500+0000|||${provider}`,
    `OBR|2|${placerField}||58410-2^CBC panel^LN^005009^CBC^L|||20261202100000+0000||||||||${provider}`,
  ];
  change(segments);
  return Buffer.from(`${segments.join('\r')}\r`, 'utf8');
}

const replace = (from: string | RegExp, to: string) => (segments: string[]) => {
  for (let i = 0; i < segments.length; i++) segments[i] = segments[i].replace(from, to);
};
const ackText = (r: { reply: Buffer }) => r.reply.toString('utf8');
/** Field n of the first segment named `name` in an answer (MSH counted as HL7 does). */
function fieldOf(text: string, name: string, n: number): string {
  const segment = text.split('\r').find((s) => s.startsWith(`${name}|`));
  if (!segment) return '';
  const fields = segment.split('|');
  return (name === 'MSH' ? ['MSH', '|', ...fields.slice(1)] : fields)[n] ?? '';
}
const unescaped = (value: string) => value.replace(/\\([FSTRE])\\/g, (_, e: string) => ({ F: '|', S: '^', T: '&', R: '~', E: '\\' })[e]!);
const segmentsOf = (text: string, name: string) => text.split('\r').filter((s) => s.startsWith(`${name}|`));

async function fakeLab(options?: Parameters<typeof startFakeLab>[0]) {
  const lab = await startFakeLab(options);
  cleanups.push(() => lab.close());
  return lab;
}
const send = (c: MllpClient, bytes: Buffer, options: { timeoutMs?: number; enhanced?: boolean } = {}) =>
  c.send(controlIdOfMessage(bytes), bytes, { timeoutMs: options.timeoutMs ?? 10_000, enhanced: options.enhanced ?? false });

describe('fake laboratory: orders', () => {
  it('accepts a valid ORM^O01 2.3 and a valid OML^O21 2.5.1 LOI (AA) and holds each order once', async () => {
    const lab = await fakeLab();
    const c = client(plain(lab.port));
    const orm = await send(c, orm23('HB0000000001AO', 'HB0000000001A'));
    expect(readAcknowledgementHeader(orm.reply)).toEqual({ code: 'AA', controlId: 'HB0000000001AO' });
    expect(fieldOf(ackText(orm), 'MSH', 12)).toBe('2.3');
    const oml = await send(c, oml251('HB0000000002BO', 'HB0000000002B'));
    expect(readAcknowledgementHeader(oml.reply)).toEqual({ code: 'AA', controlId: 'HB0000000002BO' });
    expect(fieldOf(ackText(oml), 'MSH', 9)).toBe('ACK^O21^ACK');
    expect([...lab.orders().keys()]).toEqual(['HB0000000001A', 'HB0000000002B']);
    const held = lab.orders().get('HB0000000002B')!;
    expect(held).toMatchObject({ controlId: 'HB0000000002BO', sends: 1, cancelled: false, type: 'OML^O21' });
    expect(held.patient).toEqual({ id: 'PAT123', family: 'Müller', given: 'Zoë', birthDate: '19800115', sex: 'F' });
    expect(held.tests.map((t) => t.code)).toEqual(['24323-8', '58410-2']);
    expect(lab.received.map((r) => [r.controlId, r.type])).toEqual([
      ['HB0000000001AO', 'ORM^O01'],
      ['HB0000000002BO', 'OML^O21'],
    ]);
  });

  it.each([
    [
      'OML without the LOI profile ids in MSH-21',
      oml251('X1', 'HBX1', replace(LOI_PROFILES, '')),
      'AR',
      '203',
      /MSH-21 does not declare the LOI common profile/,
    ],
    ['OML in version 2.3', oml251('X2', 'HBX2', replace('|P|2.5.1|', '|P|2.3|')), 'AR', '203', /must be HL7 2\.5\.1/],
    ['an ADT^A01', oml251('X3', 'HBX3', replace('OML^O21^OML_O21', 'ADT^A01^ADT_A01')), 'AR', '200', /'ADT\^A01' \(MSH-9\) is not taken/],
    ['a lone backslash in PID-5', oml251('X4', 'HBX4', replace('Müller^', 'Mül\\ler^')), 'AE', '102', /PID-5 has a malformed escape sequence/],
    ['no date of birth', oml251('X5', 'HBX5', replace('||19800115|F', '|||F')), 'AE', '101', /PID-7 \(date of birth\) is empty/],
    ['OBR-2 different from ORC-2', oml251('X6', 'HBX6', replace(/^OBR\|1\|HBX6/, 'OBR|1|HBX7')), 'AE', '102', /OBR-2 'HBX7' differs from ORC-2 'HBX6'/],
    ['no NPI', oml251('X7', 'HBX7', replace(new RegExp(NPI, 'g'), 'SMITH')), 'AE', '101', /No ordering provider with an NPI/],
    ['ORC-2 without its assigning authority (GU)', oml251('X8', 'HBX8', replace(`^HB^${OUR_OID}^ISO`, '')), 'AE', '102', /ISO assigning authority/],
    ['a raw line feed in a value', oml251('X9', 'HBX9', replace('Zoë', 'Zo\në')), 'AE', '102', /raw line feed/],
  ])('refuses %s with ERR (code and text)', async (_, bytes, code, errorCode, text) => {
    const lab = await fakeLab();
    const { reply } = await send(client(plain(lab.port)), bytes);
    const answer = reply.toString('utf8');
    expect(readAcknowledgementHeader(reply)?.code).toBe(code);
    const errors = segmentsOf(answer, 'ERR');
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.map((e) => e.split('|')[3].split('^')[0])).toContain(errorCode); // ERR-3
    expect(errors.map((e) => unescaped(e.split('|')[8])).join('\n')).toMatch(text); // ERR-8
    expect(lab.orders().size).toBe(0);
  });

  it('refuses an ORM 2.3 with errors in MSA-3 and ERR-1 (2.3 has no ERR-3/ERR-8), and bytes not in the declared charset', async () => {
    const lab = await fakeLab();
    const c = client(plain(lab.port));
    const noPid3 = await send(c, orm23('Y1', 'HBY1', replace('PAT123^^^HB^MR', '')));
    expect(readAcknowledgementHeader(noPid3.reply)?.code).toBe('AE');
    expect(fieldOf(ackText(noPid3), 'MSA', 3)).toBe('PID-3 (patient identifier) is empty');
    expect(fieldOf(ackText(noPid3), 'ERR', 1)).toBe('PID^1^3^101&Required field missing&HL70357');
    const noGuarantor = await send(
      c,
      orm23('Y2', 'HBY2', (s) => s.splice(4, 1)),
    );
    expect(fieldOf(ackText(noGuarantor), 'MSA', 3)).toBe('IN1 is sent without a GT1 (guarantor)');
    // Latin-1 bytes in a message that says UTF-8.
    const latin1 = Buffer.from(oml251('Y3', 'HBY3').toString('utf8'), 'latin1');
    const wrongBytes = await send(c, latin1);
    expect(readAcknowledgementHeader(wrongBytes.reply)?.code).toBe('AE');
    expect(fieldOf(ackText(wrongBytes), 'ERR', 8)).toMatch(/not valid UTF-8/);
    // The same text declared as 8859/1 is fine.
    const declared = await send(c, Buffer.from(oml251('Y4', 'HBY4', replace('|UNICODE UTF-8|', '|8859/1|')).toString('utf8'), 'latin1'));
    expect(readAcknowledgementHeader(declared.reply)?.code).toBe('AA');
    expect(lab.orders().get('HBY4')!.patient.family).toBe('Müller');
  });

  it('a resend (same control id) gets the same answer and is counted, not held twice', async () => {
    const lab = await fakeLab();
    const c = client(plain(lab.port));
    const bytes = oml251('HB0000000003CO', 'HB0000000003C');
    const answers = [await send(c, bytes), await send(c, bytes), await send(c, bytes)];
    expect(new Set(answers.map((a) => a.reply.toString('hex'))).size).toBe(1);
    expect(lab.orders().size).toBe(1);
    expect(lab.orders().get('HB0000000003C')).toMatchObject({ sends: 3, controlIds: ['HB0000000003CO'] });
    expect(lab.received).toHaveLength(3);
    expect(lab.answers().get('HB0000000003CO')).toEqual({ type: 'OML^O21', code: 'AA', sends: 3 });
    // A resend under a fresh control id (the flood a lab must not get) shows as a second id for the same placer.
    await send(c, oml251('HB0000000003CX', 'HB0000000003C'));
    expect(lab.orders().get('HB0000000003C')).toMatchObject({ sends: 4, controlIds: ['HB0000000003CO', 'HB0000000003CX'] });
  });

  it('refuseNext answers the next order AE with the given text; later orders are accepted', async () => {
    const lab = await fakeLab();
    lab.refuseNext('AE', 'Client account 12345 is on credit hold | call us');
    const c = client(plain(lab.port));
    const refused = await send(c, oml251('R1O', 'HBR1'));
    expect(readAcknowledgementHeader(refused.reply)?.code).toBe('AE');
    expect(fieldOf(ackText(refused), 'ERR', 8)).toBe('Client account 12345 is on credit hold \\F\\ call us');
    expect(readAcknowledgementHeader((await send(c, oml251('R2O', 'HBR2'))).reply)?.code).toBe('AA');
    expect([...lab.orders().keys()]).toEqual(['HBR2']);
  });

  it('cancel: CR while the specimen is pending; UC with a reason once it is received; AE for an unknown order', async () => {
    const lab = await fakeLab();
    const c = client(plain(lab.port));
    await send(c, oml251('HBC1O', 'HBC1'));
    await send(c, orm23('HBC2O', 'HBC2'));
    lab.setSpecimenState('HBC2', 'received');
    const cancelled = ackText(await send(c, oml251('HBC1C', 'HBC1', undefined, 'CA')));
    expect(fieldOf(cancelled, 'MSH', 9)).toBe('ORL^O22^ORL_O22');
    expect(fieldOf(cancelled, 'MSA', 1)).toBe('AA');
    expect(segmentsOf(cancelled, 'ORC').map((s) => s.split('|')[1])).toEqual(['CR', 'CR']);
    expect(fieldOf(cancelled, 'ORC', 3)).toBe(lab.orders().get('HBC1')!.fillerNumber);
    expect(lab.orders().get('HBC1')!.cancelled).toBe(true);
    const refused = ackText(await send(c, orm23('HBC2C', 'HBC2', undefined, 'CA')));
    expect(fieldOf(refused, 'MSH', 9)).toBe('ORR^O02');
    expect(fieldOf(refused, 'ORC', 1)).toBe('UC');
    expect(fieldOf(refused, 'ORC', 16)).toBe('SIP^Specimen already received; testing is in process^L');
    expect(fieldOf(refused, 'MSA', 3)).toBe('Specimen already received; testing is in process');
    expect(lab.orders().get('HBC2')!.cancelled).toBe(false);
    const unknown = await send(c, oml251('HBC9C', 'HBC9', undefined, 'CA'));
    expect(readAcknowledgementHeader(unknown.reply)?.code).toBe('AE');
    expect(fieldOf(ackText(unknown), 'ERR', 8)).toBe('No order with placer number HBC9 is on file');
  });

  it('enhanced mode: CA then the application ACK; a message it cannot take is refused CR at the door', async () => {
    const lab = await fakeLab({ ackMode: 'enhanced' });
    const c = client(plain(lab.port));
    const commits: string[] = [];
    const ok = await c.send('E1O', oml251('E1O', 'HBE1'), {
      timeoutMs: 10_000,
      enhanced: true,
      onCommit: (r) => commits.push(readAcknowledgementHeader(r)!.code),
    });
    expect(commits).toEqual(['CA']);
    expect(readAcknowledgementHeader(ok.reply)?.code).toBe('AA');
    const door = await c.send('E2O', oml251('E2O', 'HBE2', replace('|P|2.5.1|', '|P|2.4|')), { timeoutMs: 10_000, enhanced: true });
    expect(readAcknowledgementHeader(door.reply)?.code).toBe('CR');
    expect(fieldOf(ackText(door), 'ERR', 8)).toMatch(/must be HL7 2\.5\.1/);
    const invalid = await c.send('E3O', oml251('E3O', 'HBE3', replace('||19800115|F', '||19800115|')), { timeoutMs: 10_000, enhanced: true });
    expect(readAcknowledgementHeader(invalid.commit!)?.code).toBe('CA');
    expect(readAcknowledgementHeader(invalid.reply)?.code).toBe('AE');
  });
});

describe('fake laboratory: faults', () => {
  it('drop-ack: nothing comes back, the resend is answered and the lab holds one order', async () => {
    const lab = await fakeLab();
    lab.inject('drop-ack');
    const c = client(plain(lab.port));
    const bytes = oml251('D1O', 'HBD1');
    await expect(send(c, bytes, { timeoutMs: 300 })).rejects.toBeInstanceOf(MllpTimeout);
    expect(readAcknowledgementHeader((await send(c, bytes)).reply)?.code).toBe('AA');
    expect(lab.orders().size).toBe(1);
    expect(lab.orders().get('HBD1')!.sends).toBe(2);
  });

  it('late-ack: the ACK after our timeout goes to onUnmatchedReply, the next message gets its own', async () => {
    const lab = await fakeLab();
    lab.inject({ type: 'late-ack', afterMs: 500 });
    const unmatched: (string | null)[] = [];
    const c = client(plain(lab.port), (id) => unmatched.push(id));
    await expect(send(c, oml251('L1O', 'HBL1'), { timeoutMs: 150 })).rejects.toBeInstanceOf(MllpTimeout);
    const next = await send(c, oml251('L2O', 'HBL2'));
    expect(readAcknowledgementHeader(next.reply)).toEqual({ code: 'AA', controlId: 'L2O' });
    expect(unmatched).toEqual(['L1O']);
  });

  it('reset-mid-frame: half an ACK then a reset; the resend on a new connection is answered, one order held', async () => {
    const lab = await fakeLab();
    lab.inject('reset-mid-frame');
    const c = client(plain(lab.port));
    const bytes = orm23('M1O', 'HBM1');
    await expect(send(c, bytes)).rejects.toBeInstanceOf(MllpConnectionError);
    expect(readAcknowledgementHeader((await send(c, bytes)).reply)?.code).toBe('AA');
    expect(lab.connections()).toBe(2);
    expect(lab.orders().get('HBM1')!.sends).toBe(2);
  });

  it('split: the ACK a byte per write is reassembled', async () => {
    const lab = await fakeLab();
    lab.inject('split');
    expect(readAcknowledgementHeader((await send(client(plain(lab.port)), oml251('S1O', 'HBS1'))).reply)).toEqual({ code: 'AA', controlId: 'S1O' });
  });

  it('merge (original): an answer held and written with the next one; each goes where its MSA-2 says', async () => {
    const lab = await fakeLab();
    lab.inject('merge');
    const unmatched: (string | null)[] = [];
    const c = client(plain(lab.port), (id) => unmatched.push(id));
    await expect(send(c, oml251('G1O', 'HBG1'), { timeoutMs: 200 })).rejects.toBeInstanceOf(MllpTimeout);
    expect(readAcknowledgementHeader((await send(c, oml251('G2O', 'HBG2'))).reply)).toEqual({ code: 'AA', controlId: 'G2O' });
    expect(unmatched).toEqual(['G1O']);
  });

  it('merge (enhanced): the accept and application ACKs in one write', async () => {
    const lab = await fakeLab({ ackMode: 'enhanced' });
    lab.inject('merge');
    const result = await client(plain(lab.port)).send('G3O', oml251('G3O', 'HBG3'), { timeoutMs: 10_000, enhanced: true });
    expect(readAcknowledgementHeader(result.commit!)?.code).toBe('CA');
    expect(readAcknowledgementHeader(result.reply)?.code).toBe('AA');
  });

  it('over mutual TLS, a client without the lab’s CA certificate is refused', async () => {
    const authority = makeTestAuthority();
    const lab = await fakeLab({ tls: { cert: authority.server.cert, key: authority.server.key, ca: authority.ca } });
    const ok = await send(
      client({ host: '127.0.0.1', port: lab.port, tls: { ca: authority.ca, cert: authority.client.cert, key: authority.client.key } }),
      oml251('T1O', 'HBT1'),
    );
    expect(readAcknowledgementHeader(ok.reply)?.code).toBe('AA');
    await expect(
      send(client({ host: '127.0.0.1', port: lab.port, tls: { ca: authority.ca, cert: null, key: null } }), oml251('T2O', 'HBT2')),
    ).rejects.toBeInstanceOf(MllpConnectionError);
  });
});

describe('fake laboratory: results (ORU^R01) to an MLLP listener', () => {
  const pdf = Buffer.from('%PDF-1.4\n% fake report\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n', 'latin1');

  async function listener() {
    const messages: Buffer[] = [];
    const { port } = await server({
      onMessage: async (m) => {
        messages.push(m);
        const id = m.toString('latin1').split('\r')[0].split('|')[9];
        return Buffer.from(`MSH|^~\\&|HEALTHBRIDGE|HB|FAKELAB|FAKELAB|20261202||ACK^R01^ACK|A${id}|P|2.5.1\rMSA|AA|${id}\r`);
      },
    });
    return { port, messages };
  }

  it('LRI 2.5.1: several OBRs through P, F, C and X, OBX statuses, escapes, and a PDF in an ED OBX', async () => {
    const lab = await fakeLab();
    await send(client(plain(lab.port)), oml251('HBZ1O', 'HBZ1'));
    const { port, messages } = await listener();
    const sent = await lab.sendResults(
      { host: '127.0.0.1', port },
      {
        placerNumber: 'HBZ1',
        tests: [
          {
            code: '322000',
            name: 'CMP',
            loinc: '24323-8',
            status: 'C',
            observations: [
              { loinc: '2345-7', code: '001818', name: 'Glucose', value: '105', units: 'mg/dL', range: '70-99', flags: 'H', status: 'C' },
              { code: '001820', name: 'Comment', value: 'Line one\nA | B ^ C & D ~ E \\ F', valueType: 'TX' },
              { code: '001821', name: 'Raw', rawValue: '\\X41\\\\.br\\x', valueType: 'ST', status: 'F' },
            ],
          },
          { code: '005009', name: 'CBC', loinc: '58410-2', status: 'X', specimenRejectReason: { code: 'RH', text: 'Hemolysis' } },
        ],
        pdf,
      },
      { split: true },
    );
    expect(sent.code).toBe('AA');
    expect(sent.ack).toContain(`MSA|AA|${sent.controlId}`);
    expect(messages).toHaveLength(1);
    const text = messages[0].toString('utf8');
    expect(text).toBe(sent.text);
    // Read back with @medplum/core (fields raw), not with the fake's own code.
    const message = Hl7Message.parse(text);
    expect(message.header.getField(9).toString()).toBe('ORU^R01^ORU_R01');
    expect(message.header.getField(12).toString()).toBe('2.5.1');
    expect(message.header.getField(21).toString()).toContain('2.16.840.1.113883.9.16');
    expect(message.header.getField(18).toString()).toBe('UNICODE UTF-8');
    const held = lab.orders().get('HBZ1')!;
    const obrs = message.getAllSegments('OBR');
    expect(obrs.map((o) => [o.getComponent(2, 1), o.getComponent(3, 1), o.getComponent(25, 1)])).toEqual([
      ['HBZ1', held.fillerNumber, 'C'],
      ['HBZ1', held.fillerNumber, 'X'],
    ]);
    expect(message.getSegment('ORC')!.getComponent(2, 3)).toBe(OUR_OID); // ORC-2 as the order wrote it
    expect(message.getSegment('PID')!.getComponent(5, 1)).toBe('Müller');
    const obx = message.getAllSegments('OBX');
    expect(obx.map((o) => [o.getComponent(2, 1), o.getComponent(3, 1), o.getComponent(11, 1)])).toEqual([
      ['NM', '2345-7', 'C'],
      ['TX', '001820', 'C'],
      ['ST', '001821', 'F'],
      ['ED', 'PDF', 'C'],
    ]);
    expect(obx[0].getField(5).toString()).toBe('105');
    expect(obx[0].getComponent(6, 1)).toBe('mg/dL');
    expect(obx[1].getField(5).toString()).toBe('Line one\\.br\\A \\F\\ B \\S\\ C \\T\\ D \\R\\ E \\E\\ F');
    expect(obx[2].getField(5).toString()).toBe('\\X41\\\\.br\\x');
    expect(Buffer.from(obx[3].getComponent(5, 5), 'base64').equals(pdf)).toBe(true);
    // The X test has no OBX: the PDF sits under the first OBR; the second OBR is followed only by its SPM.
    const names = text.split('\r').map((s) => s.slice(0, 3));
    expect(names.slice(names.lastIndexOf('OBR'))).toEqual(['OBR', 'SPM', '']);
    expect(message.getAllSegments('SPM')[1].getComponent(21, 1)).toBe('RH');
  });

  it('legacy 2.3, Latin-1 without MSH-18, unsolicited (no placer number), and the status messages', async () => {
    const lab = await fakeLab();
    const { port, messages } = await listener();
    const to = { host: '127.0.0.1', port };
    await lab.sendResults(to, {
      profile: 'ORU_2.3',
      charset: '8859/1',
      declareCharset: false,
      placerNumber: null,
      fillerNumber: 'ACC-77',
      patient: { family: 'Gómez', given: 'Iñés', birthDate: '1975-03-09', sex: 'F' },
      tests: [
        { code: '001453', name: 'Hemoglobin A1c', status: 'F', observations: [{ loinc: '4548-4', code: '001453', name: 'HbA1c', value: '5.4', units: '%' }] },
      ],
    });
    const legacy = messages[0];
    expect(legacy.includes(Buffer.from('Gómez', 'latin1'))).toBe(true); // one byte per letter, no UTF-8
    expect(legacy.includes(Buffer.from('Gómez', 'utf8'))).toBe(false);
    const text = legacy.toString('latin1');
    const message = Hl7Message.parse(text);
    expect(message.header.getField(12).toString()).toBe('2.3');
    expect(message.header.getField(18)?.toString() ?? '').toBe('');
    expect(message.header.getField(21)?.toString() ?? '').toBe('');
    expect(message.getSegment('OBR')!.getComponent(2, 1)).toBe('');
    expect(message.getSegment('OBR')!.getComponent(3, 1)).toBe('ACC-77');
    expect(message.getSegment('PID')!.getComponent(7, 1)).toBe('19750309');
    expect(message.getAllSegments('SPM')).toHaveLength(0);

    await lab.sendResults(to, specimenReceived('HBQ1', [{ code: '322000', name: 'CMP' }]));
    await lab.sendResults(to, specimenProblem('HBQ1', [{ code: '322000', name: 'CMP' }], { code: 'QS', text: 'Quantity not sufficient' }));
    const [received, problem] = messages.slice(1).map((m) => Hl7Message.parse(m.toString('utf8')));
    expect(received.getSegment('OBR')!.getComponent(25, 1)).toBe('I');
    expect(received.getAllSegments('OBX')).toHaveLength(0);
    expect(problem.getSegment('OBR')!.getComponent(25, 1)).toBe('X');
    expect(problem.getAllSegments('OBX')).toHaveLength(0);
    expect(problem.getSegment('SPM')!.getComponent(21, 2)).toBe('Quantity not sufficient');
  });

  it('results of an order the lab holds default to its interface (2.3 for an ORM), patient and ORC-2 as ordered', async () => {
    const lab = await fakeLab({ charset: '8859/1' });
    await send(client(plain(lab.port)), orm23('HBV1O', 'HBV1', replace('|P|2.3', '|P|2.3|||||||8859/1')));
    const { port, messages } = await listener();
    await lab.sendResults({ host: '127.0.0.1', port }, { placerNumber: 'HBV1', tests: [{ code: '322000', name: 'CMP', status: 'P', observations: [] }] });
    const text = messages[0].toString('latin1');
    expect(fieldOf(text, 'MSH', 12)).toBe('2.3');
    expect(fieldOf(text, 'MSH', 18)).toBe('8859/1');
    expect(fieldOf(text, 'ORC', 2)).toBe('HBV1^HB');
    expect(fieldOf(text, 'ORC', 3)).toBe(lab.orders().get('HBV1')!.fillerNumber);
    expect(fieldOf(text, 'PID', 5)).toBe("O'Brien^Zoe");
    expect(fieldOf(text, 'PID', 7)).toBe('19800115');
  });

  it('the same result twice (same control id and time) is the same bytes; no ACK in time rejects', async () => {
    const lab = await fakeLab();
    const { port, messages } = await listener();
    const result = {
      controlId: 'FIXED1',
      at: new Date('2026-12-01T10:00:00Z'),
      placerNumber: 'HBW1',
      tests: [{ code: '1', name: 'T', status: 'F' as const, observations: [] }],
    };
    await lab.sendResults({ host: '127.0.0.1', port }, result);
    await lab.sendResults({ host: '127.0.0.1', port }, result);
    expect(messages[0].equals(messages[1])).toBe(true);
    const silent = await server({ onMessage: async () => null });
    await expect(lab.sendResults({ host: '127.0.0.1', port: silent.port }, result, { timeoutMs: 300 })).rejects.toThrow(/no ACK to FIXED1/);
  });
});
