import net from 'node:net';
import tls from 'node:tls';
import type { Logger } from '../../platform/logger';
import { readAcknowledgementHeader } from './acknowledgement-header';
import { frame, MllpFrameReader } from './framing';

export interface MllpEndpoint {
  host: string;
  port: number;
  tls: { ca: string | null; cert: string | null; key: string | null } | null;
}

export interface MllpClientOptions {
  log: Logger;
  connectTimeoutMs?: number;
  /** A reply whose MSA-2 names no message in flight: typically an ACK that came after its send timed out. */
  onUnmatchedReply?: (controlId: string | null, reply: Buffer) => void | Promise<void>;
}

export interface MllpSendOptions {
  timeoutMs: number;
  /** Enhanced acknowledgement: an accept ACK (CA/CE/CR) first, then the application ACK (AA/AE/AR). */
  enhanced: boolean;
  /** The accept ACK CA, as it comes (the message is in the lab's safe storage). */
  onCommit?: (reply: Buffer) => void;
}

export interface MllpExchangeResult {
  /** The reply that settles the message: the application ACK, or (enhanced) a CE/CR accept ACK, which refuses it. */
  reply: Buffer;
  /** Enhanced mode: the accept ACK if one came (CA; or the CE/CR that is also `reply`). */
  commit: Buffer | null;
}

/** No reply in time. The message may or may not have reached the lab; resending the same bytes is safe. */
export class MllpTimeout extends Error {
  constructor(
    message: string,
    /** The CA accept ACK, when the lab committed the message but its application ACK did not come in time. */
    readonly commit: Buffer | null,
  ) {
    super(message);
    this.name = 'MllpTimeout';
  }
}

/** The connection could not be opened, or was lost before the reply came. */
export class MllpConnectionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MllpConnectionError';
  }
}

interface Exchange {
  controlId: string;
  options: MllpSendOptions;
  commit: Buffer | null;
  timer: NodeJS.Timeout;
  resolve(result: MllpExchangeResult): void;
  reject(err: Error): void;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * One MLLP connection to a lab, opened on the first send and again on the send after it was lost. One message is in
 * flight at a time (sends queue in call order); replies are matched to it by MSA-2, never by arrival order, and a
 * reply that matches nothing goes to `onUnmatchedReply`. It never resends: the caller decides (same bytes, same
 * control id).
 *
 * After a timeout the connection is kept, so that the late reply still arrives, as an unmatched one, and can be
 * recorded; it is dropped instead when its state is unclear: our frame is not fully written (the peer stopped
 * reading), the peer stopped in the middle of a reply frame, or a second timeout in a row came with nothing at all
 * received since the first (a half-open connection: the lab's side is gone).
 */
export class MllpClient {
  private socket: net.Socket | null = null;
  private reader = new MllpFrameReader();
  private current: Exchange | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  private silentTimeouts = 0;
  private receivedSinceWrite = false;
  private readonly where: string;

  constructor(
    private readonly endpoint: MllpEndpoint,
    private readonly options: MllpClientOptions,
  ) {
    this.where = `${endpoint.host}:${endpoint.port}`;
  }

  send(controlId: string, message: Buffer, options: MllpSendOptions): Promise<MllpExchangeResult> {
    const exchange = this.queue.then(() => this.exchange(controlId, message, options));
    this.queue = exchange.catch(() => undefined);
    return exchange;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.current?.reject(new MllpConnectionError(`the client of ${this.where} was closed`));
    const socket = this.socket;
    if (!socket || socket.destroyed) return;
    await new Promise<void>((resolve) => {
      socket.once('close', () => resolve());
      socket.destroy();
    });
  }

  private async exchange(controlId: string, message: Buffer, options: MllpSendOptions): Promise<MllpExchangeResult> {
    if (this.closed) throw new MllpConnectionError(`the client of ${this.where} is closed`);
    const socket = await this.connection();
    if (this.closed) {
      socket.destroy();
      throw new MllpConnectionError(`the client of ${this.where} is closed`);
    }
    return new Promise<MllpExchangeResult>((resolve, reject) => {
      const exchange: Exchange = {
        controlId,
        options,
        commit: null,
        timer: setTimeout(() => this.timeOut(exchange), options.timeoutMs),
        resolve: (result) => this.settle(exchange, () => resolve(result)),
        reject: (err) => this.settle(exchange, () => reject(err)),
      };
      this.current = exchange;
      this.receivedSinceWrite = false;
      socket.write(frame(message)); // a failed write surfaces as the socket's error, then close
    });
  }

  private settle(exchange: Exchange, done: () => void): void {
    if (this.current !== exchange) return;
    clearTimeout(exchange.timer);
    this.current = null;
    done();
  }

  private timeOut(exchange: Exchange): void {
    if (this.current !== exchange) return;
    const socket = this.socket;
    const silent = !this.receivedSinceWrite;
    const unclear = socket !== null && (socket.writableLength > 0 || this.reader.midFrame || (silent && this.silentTimeouts > 0));
    this.silentTimeouts = silent ? this.silentTimeouts + 1 : 0;
    exchange.reject(new MllpTimeout(`no reply to ${exchange.controlId} from ${this.where} within ${exchange.options.timeoutMs} ms`, exchange.commit));
    if (unclear) {
      this.options.log.warn({ lab: this.where, controlId: exchange.controlId }, 'mllp: dropping the connection after a timeout (its state is unclear)');
      socket.destroy();
    }
  }

  private onReply(reply: Buffer): void {
    const header = readAcknowledgementHeader(reply);
    const exchange = this.current;
    if (!exchange || !header || header.controlId !== exchange.controlId) {
      this.unmatched(header?.controlId ?? null, reply);
      return;
    }
    this.silentTimeouts = 0;
    if (exchange.options.enhanced && header.code.startsWith('C')) {
      exchange.commit = reply;
      if (header.code !== 'CA') {
        exchange.resolve({ reply, commit: reply }); // CE/CR: refused at the door
        return;
      }
      try {
        exchange.options.onCommit?.(reply);
      } catch (err) {
        this.options.log.error({ err, controlId: exchange.controlId }, 'mllp: onCommit failed');
      }
      return;
    }
    exchange.resolve({ reply, commit: exchange.commit });
  }

  private unmatched(controlId: string | null, reply: Buffer): void {
    this.options.log.warn({ lab: this.where, controlId }, 'mllp: a reply that matches no message in flight (late, or not an ACK)');
    const report = async () => this.options.onUnmatchedReply?.(controlId, reply);
    report().catch((err) => this.options.log.error({ err, controlId }, 'mllp: onUnmatchedReply failed'));
  }

  private connection(): Promise<net.Socket> {
    if (this.socket && !this.socket.destroyed) return Promise.resolve(this.socket);
    const { host, port } = this.endpoint;
    const timeoutMs = this.options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    return new Promise((resolve, reject) => {
      const secure = this.endpoint.tls;
      const socket = secure
        ? tls.connect({
            host,
            port,
            ca: secure.ca ?? undefined,
            cert: secure.cert ?? undefined,
            key: secure.key ?? undefined,
            servername: net.isIP(host) ? undefined : host,
          })
        : net.connect({ host, port });
      let lastError: Error | null = null;
      let connected = false;
      const timer = setTimeout(() => socket.destroy(new Error(`no connection within ${timeoutMs} ms`)), timeoutMs);
      socket.once(secure ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer);
        connected = true;
        socket.setNoDelay(true);
        socket.setKeepAlive(true, 30_000);
        this.socket = socket;
        this.reader = new MllpFrameReader();
        this.options.log.info({ lab: this.where, tls: Boolean(secure) }, 'mllp: connected');
        resolve(socket);
      });
      socket.on('data', (chunk: Buffer) => {
        if (this.socket !== socket) return;
        this.receivedSinceWrite = true;
        let replies: Buffer[];
        try {
          replies = this.reader.push(chunk);
        } catch (err) {
          socket.destroy(err as Error);
          return;
        }
        for (const reply of replies) this.onReply(reply);
      });
      socket.on('error', (err) => {
        lastError = err;
      });
      socket.once('close', () => {
        clearTimeout(timer);
        const reason = lastError?.message ?? 'closed by the peer';
        if (!connected) {
          reject(new MllpConnectionError(`cannot connect to ${this.where}: ${reason}`));
          return;
        }
        if (this.socket !== socket) return;
        this.socket = null;
        this.options.log.warn({ lab: this.where, reason }, 'mllp: connection lost');
        this.current?.reject(new MllpConnectionError(`connection to ${this.where} lost: ${reason}`));
      });
    });
  }
}
