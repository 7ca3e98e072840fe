import net from 'node:net';
import tls from 'node:tls';
import type { Logger } from '../../platform/logger';
import { frame, MllpFrameReader } from './framing';

/** Who is connecting, as the allow-list of lab accounts (`results_from`) names them. */
export interface MllpPeer {
  /** IPv4 or IPv6, an IPv4-mapped IPv6 address given as plain IPv4. */
  remoteAddress: string;
  /** Over TLS, the client certificate's SHA-256 fingerprint as 'sha256:<lowercase hex>'; else null. */
  certificateFingerprint256: string | null;
}

export interface MllpServerOptions {
  port: number;
  host?: string;
  /** With `ca`, client certificates are required and must chain to it (mutual TLS); without, a client may present
   *  one (its fingerprint can be allowed) or none. */
  tls?: { cert: string; key: string; ca?: string[] } | null;
  log: Logger;
  /** Decides before anything is read; false: the socket is destroyed at once. */
  admit(peer: MllpPeer): Promise<boolean> | boolean;
  /** The reply's content (the server frames it), written only after this resolves: store, then acknowledge. A
   *  rejection is logged and answered by nothing (the sender times out and resends). */
  onMessage(message: Buffer, peer: MllpPeer): Promise<Buffer | null>;
}

/** Frames read but not yet handled, per connection, before the server stops reading from it. */
const MAX_QUEUED_FRAMES = 16;

/**
 * An MLLP listener on node:net or node:tls. Messages of one connection are handled one at a time, in the order
 * they came; connections are independent of each other.
 */
export class MllpServer {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();

  constructor(private readonly options: MllpServerOptions) {
    const secure = options.tls;
    if (secure) {
      const ca = secure.ca?.length ? secure.ca : undefined;
      const server = tls.createServer({ cert: secure.cert, key: secure.key, ca, requestCert: true, rejectUnauthorized: Boolean(ca) });
      server.on('secureConnection', (socket) => void this.accept(socket));
      server.on('tlsClientError', (err, socket) =>
        options.log.warn({ err, remoteAddress: normaliseAddress(socket.remoteAddress) }, 'mllp: TLS handshake refused'),
      );
      this.server = server;
    } else {
      this.server = net.createServer((socket) => void this.accept(socket));
    }
    this.server.on('error', (err) => options.log.error({ err }, 'mllp: listener error'));
  }

  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.options.port, this.options.host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as net.AddressInfo).port);
      });
    });
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    if (this.server.listening) await closed;
  }

  private async accept(socket: net.Socket): Promise<void> {
    const { log } = this.options;
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', (err) => log.debug({ err }, 'mllp: connection error'));
    const peer: MllpPeer = {
      remoteAddress: normaliseAddress(socket.remoteAddress),
      certificateFingerprint256: socket instanceof tls.TLSSocket ? fingerprintOf(socket) : null,
    };
    let admitted = false;
    try {
      admitted = await this.options.admit(peer);
    } catch (err) {
      log.error({ err, peer }, 'mllp: admission check failed; connection refused');
    }
    if (!admitted) {
      log.warn({ peer }, 'mllp: connection refused (not an allowed address or certificate)');
      socket.destroy();
      return;
    }
    if (socket.destroyed) return;
    log.info({ peer }, 'mllp: connection admitted');
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 30_000);
    const reader = new MllpFrameReader();
    const queued: Buffer[] = [];
    let handling = false;
    const handleQueued = async () => {
      if (handling) return;
      handling = true;
      while (queued.length && !socket.destroyed) {
        const message = queued.shift()!;
        if (socket.isPaused() && queued.length < MAX_QUEUED_FRAMES / 2) socket.resume();
        try {
          const reply = await this.options.onMessage(message, peer);
          if (reply && !socket.destroyed) socket.write(frame(reply));
        } catch (err) {
          log.error({ err, peer }, 'mllp: message not handled; no reply (the sender resends)');
        }
      }
      handling = false;
    };
    socket.on('data', (chunk: Buffer) => {
      try {
        queued.push(...reader.push(chunk));
      } catch (err) {
        log.warn({ err, peer }, 'mllp: unreadable stream; connection dropped');
        socket.destroy();
        return;
      }
      if (queued.length >= MAX_QUEUED_FRAMES) socket.pause();
      void handleQueued();
    });
  }
}

/** '::ffff:10.0.0.1' (an IPv4 peer of a dual-stack listener) → '10.0.0.1'. */
function normaliseAddress(address: string | undefined): string {
  if (!address) return '';
  return address.toLowerCase().startsWith('::ffff:') && net.isIPv4(address.slice(7)) ? address.slice(7) : address;
}

function fingerprintOf(socket: tls.TLSSocket): string | null {
  const certificate = socket.getPeerCertificate();
  if (!certificate?.fingerprint256) return null;
  return `sha256:${certificate.fingerprint256.replace(/:/g, '').toLowerCase()}`;
}
