import net from 'node:net';
import type { Writable } from 'node:stream';
import tls from 'node:tls';
import { gzipSync } from 'node:zlib';
import amqp from 'amqplib';
import { Kafka, logLevel, type Message, type Producer } from 'kafkajs';
import { groupBy } from '../../../platform/group-by';
import { guardedLookup, refusedAddressReason, RefusedAddressError, type UrlPolicy } from '../../../platform/url-safety';
import type { AttemptResult } from '../webhook/sender';
import type { KafkaDestination, PipelineDoc, RabbitmqDestination } from './model';

/**
 * The pipeline sender: publishes a batch of events to a pipeline's broker and reports one outcome per message
 * (never throws), like the webhook sender does per POST. One instance per worker keeps a connection per pipeline
 * (reopened when the pipeline's `version` moves or the connection broke, closed after IDLE_CLOSE_MS unused).
 * Every socket resolves its host through the same address rules as webhooks (brokerPolicyFromConfig), Kafka's
 * advertised brokers included.
 */
export interface BrokerMessage {
  eventId: string;
  eventType: string;
  teamId: string;
  userId: string | null;
  /** The route's routing key (RabbitMQ) or topic (Kafka). */
  target: string;
  /** The envelope, exactly as a webhook carries it. */
  body: string;
  createdAt: Date;
}

/** Bodies larger than this are gzipped (with content-encoding: gzip), as the original API does. */
export const COMPRESS_ABOVE_BYTES = 1024;
const IDLE_CLOSE_MS = 5 * 60_000;
const CONNECT_TIMEOUT_MS = 5_000;
/** Room for a batch of WEBHOOK_BATCH_SIZE messages in the socket's buffer (amqplib's writer pauses above it). */
const SOCKET_BUFFER_BYTES = 4 * 1024 * 1024;

/** The bytes sent for an envelope, and their encoding. */
export function encodeBody(body: string): { content: Buffer; contentEncoding: 'gzip' | null } {
  const raw = Buffer.from(body, 'utf8');
  return raw.length > COMPRESS_ABOVE_BYTES ? { content: gzipSync(raw), contentEncoding: 'gzip' } : { content: raw, contentEncoding: null };
}

/** The message's properties as headers (AMQP table or Kafka headers): never the body's patient data. */
function headersOf(m: BrokerMessage): Record<string, string> {
  return { event_type: m.eventType, team_id: m.teamId, ...(m.userId ? { user_id: m.userId } : {}) };
}

/** A message as RabbitMQ gets it: its bytes and its AMQP properties (the bench's raw producer sends the same). */
export function amqpMessageOf(m: BrokerMessage): { content: Buffer; options: amqp.Options.Publish } {
  const { content, contentEncoding } = encodeBody(m.body);
  const options: amqp.Options.Publish = {
    persistent: true,
    mandatory: true,
    messageId: m.eventId,
    type: m.eventType,
    appId: 'healthbridge',
    timestamp: Math.floor(m.createdAt.getTime() / 1000),
    contentType: 'application/json',
    ...(contentEncoding ? { contentEncoding } : {}),
    headers: headersOf(m),
  };
  return { content, options };
}

/** A message as Kafka gets it: keyed by user (one user, one partition), with its headers (the bench's raw producer sends the same). */
export function kafkaMessageOf(m: BrokerMessage): Message {
  const { content, contentEncoding } = encodeBody(m.body);
  return {
    key: m.userId ?? m.eventId,
    value: content,
    timestamp: String(m.createdAt.getTime()),
    headers: {
      'message-id': m.eventId,
      ...headersOf(m),
      'content-type': 'application/json',
      ...(contentEncoding ? { 'content-encoding': contentEncoding } : {}),
    },
  };
}

interface Link {
  publish(messages: BrokerMessage[], timeoutMs: number): Promise<AttemptResult[]>;
  readonly broken: boolean;
  close(): Promise<void>;
}

const failed = (errorClass: string, error: string, durationMs: number): AttemptResult => ({
  ok: false,
  statusCode: null,
  errorClass,
  error,
  responseBody: null,
  durationMs,
  retryAfter: undefined,
});
const accepted = (durationMs: number, note: string | null = null): AttemptResult => ({
  ok: true,
  statusCode: null,
  errorClass: null,
  error: null,
  responseBody: note,
  durationMs,
  retryAfter: undefined,
});

function errorClassOf(err: unknown): string {
  const e = err as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException; type?: string };
  const code = e.code ?? e.cause?.code;
  if (code === 'EREFUSEDADDRESS' || err instanceof RefusedAddressError) return 'refused_address';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'dns_error';
  if (/SASL|authenticat|ACCESS_REFUSED|403/i.test(String(e.message))) return 'auth_error';
  return 'broker_error';
}

/** Why a host:port may not be connected to now (an IP literal outside the rules), or null. */
function refusedLiteral(host: string, port: number, policy: UrlPolicy): string | null {
  if (policy.allowlist.includes(`${host.toLowerCase()}:${port}`) || !net.isIP(host)) return null;
  return refusedAddressReason(host, policy);
}

/** Socket options that resolve names through the address rules (allow-listed host:port entries bypass them). */
function guardedSocketOptions(host: string, port: number, policy: UrlPolicy): { lookup?: net.LookupFunction } {
  return policy.allowlist.includes(`${host.toLowerCase()}:${port}`) ? {} : { lookup: guardedLookup(policy) };
}

class RabbitmqLink implements Link {
  broken = false;
  private readonly returned = new Set<string>();

  private constructor(
    private readonly connection: amqp.ChannelModel,
    private readonly channel: amqp.ConfirmChannel,
    private readonly destination: RabbitmqDestination,
  ) {
    const breaks = () => (this.broken = true);
    connection.on('error', breaks);
    connection.on('close', breaks);
    channel.on('error', breaks);
    channel.on('close', breaks);
    // A mandatory message no queue is bound for comes back (before its confirm): it counts as not delivered.
    channel.on('return', (m: amqp.Message) => this.returned.add(String(m.properties.messageId)));
  }

  static async open(pipeline: PipelineDoc, destination: RabbitmqDestination, policy: UrlPolicy): Promise<RabbitmqLink> {
    const url = new URL(destination.url);
    const port = Number(url.port || (url.protocol === 'amqps:' ? 5671 : 5672));
    const refused = refusedLiteral(url.hostname, port, policy);
    if (refused) throw new RefusedAddressError(`Refused to connect to ${url.hostname}: ${refused}`);
    if (destination.username) url.username = encodeURIComponent(destination.username);
    if (pipeline.credentials) url.password = encodeURIComponent(pipeline.credentials.password);
    const socketOptions = {
      ...guardedSocketOptions(url.hostname, port, policy),
      timeout: CONNECT_TIMEOUT_MS,
      clientProperties: { connection_name: `healthbridge pipeline ${pipeline._id}` },
      // Given to the socket (amqplib passes its options on): a whole batch fits in its buffer while it is corked
      // (publish), where amqplib's writer would otherwise pause at the default 16 KB.
      writableHighWaterMark: SOCKET_BUFFER_BYTES,
    };
    const connection = await amqp.connect(url.href, socketOptions);
    connection.on('error', () => undefined); // the link is marked broken; the next batch reconnects
    try {
      const channel = await connection.createConfirmChannel();
      channel.on('error', () => undefined);
      if (destination.exchange) await channel.assertExchange(destination.exchange, destination.exchange_type, { durable: true });
      return new RabbitmqLink(connection, channel, destination);
    } catch (err) {
      await connection.close().catch(() => undefined);
      throw err;
    }
  }

  /**
   * Publishes the batch on the confirm channel; one timer for the batch. amqplib writes each message to the socket
   * on its own (a syscall and a TCP segment each); the socket is corked while the batch is handed over, so the
   * batch leaves in a few large writes (amqplib's writer runs in the next check phase: uncorked one after).
   */
  publish(messages: BrokerMessage[], timeoutMs: number): Promise<AttemptResult[]> {
    if (!messages.length) return Promise.resolve([]);
    const started = Date.now();
    const results = new Array<AttemptResult | undefined>(messages.length);
    let unsettled = messages.length;
    return new Promise<AttemptResult[]>((resolve) => {
      const settle = (i: number, result: AttemptResult) => {
        if (results[i]) return;
        results[i] = result;
        if (--unsettled > 0) return;
        clearTimeout(timer);
        resolve(results as AttemptResult[]);
      };
      const timer = setTimeout(() => {
        this.broken = true; // an unanswered channel is not trusted with the next batch
        const late = failed('timeout', `No confirm from RabbitMQ within ${timeoutMs} ms`, Date.now() - started);
        messages.forEach((_, i) => settle(i, late));
      }, timeoutMs);
      const socket = this.socket;
      socket?.cork();
      setImmediate(() => setImmediate(() => socket?.uncork()));
      messages.forEach((m, i) => {
        const { content, options } = amqpMessageOf(m);
        try {
          this.channel.publish(this.destination.exchange, m.target, content, options, (err) => {
            const ms = Date.now() - started;
            if (err) return settle(i, failed('broker_nack', `RabbitMQ refused the message: ${String((err as Error)?.message ?? err)}`, ms));
            if (this.returned.delete(m.eventId)) {
              return settle(
                i,
                failed(
                  'unroutable',
                  `No queue is bound to exchange '${this.destination.exchange}' with routing key '${m.target}'; bind one, the message is retried`,
                  ms,
                ),
              );
            }
            settle(i, accepted(ms));
          });
        } catch (err) {
          this.broken = true;
          settle(i, failed(errorClassOf(err), `RabbitMQ: ${(err as Error).message}`, Date.now() - started));
        }
      });
    });
  }

  /** The connection's socket (amqplib keeps it as the connection's `stream`). */
  private get socket(): Writable | undefined {
    return (this.connection as unknown as { connection?: { stream?: Writable } }).connection?.stream;
  }

  async close(): Promise<void> {
    this.broken = true;
    await this.connection.close().catch(() => undefined);
  }
}

class KafkaLink implements Link {
  broken = false;

  private constructor(private readonly producer: Producer) {
    producer.on(producer.events.DISCONNECT, () => (this.broken = true));
  }

  static async open(pipeline: PipelineDoc, destination: KafkaDestination, policy: UrlPolicy, timeoutMs: number): Promise<KafkaLink> {
    const kafka = new Kafka({
      clientId: `healthbridge-${pipeline._id}`,
      brokers: destination.bootstrap_servers,
      ssl: destination.tls,
      sasl: destination.sasl
        ? ({ mechanism: destination.sasl.mechanism, username: destination.sasl.username, password: pipeline.credentials?.password ?? '' } as never)
        : undefined,
      logLevel: logLevel.NOTHING,
      connectionTimeout: CONNECT_TIMEOUT_MS,
      requestTimeout: timeoutMs,
      retry: { retries: 1, initialRetryTime: 200, maxRetryTime: 2_000 },
      // Every broker connection (the bootstrap servers and the brokers the cluster advertises) under the address rules.
      socketFactory: ({ host, port, ssl, onConnect }) => {
        const refused = refusedLiteral(host, port, policy);
        if (refused) {
          const socket = new net.Socket();
          process.nextTick(() => socket.destroy(new RefusedAddressError(`Refused to connect to ${host}: ${refused}`)));
          return socket;
        }
        const options = { host, port, ...guardedSocketOptions(host, port, policy) };
        const socket = ssl
          ? tls.connect({ ...options, ...(!net.isIP(host) ? { servername: host } : {}), ...(ssl as tls.ConnectionOptions) }, onConnect)
          : net.connect(options, onConnect);
        socket.setKeepAlive(true, 60_000);
        return socket;
      },
    });
    // Idempotent (the broker drops a retried produce it already has) with one request in flight, so one
    // partition's messages, hence one user's, are written in the order sent.
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false, retry: { retries: 2, maxRetryTime: 2_000 } });
    try {
      await producer.connect();
    } catch (err) {
      await producer.disconnect().catch(() => undefined); // no half-open connections left behind
      throw err;
    }
    return new KafkaLink(producer);
  }

  async publish(messages: BrokerMessage[], timeoutMs: number): Promise<AttemptResult[]> {
    const started = Date.now();
    const topicMessages = groupBy(messages, (m) => m.target).map((group) => ({
      topic: group[0].target,
      messages: group.map(kafkaMessageOf),
    }));
    try {
      const written = await this.producer.sendBatch({ acks: -1, timeout: timeoutMs, topicMessages });
      const ms = Date.now() - started;
      // Where the batch landed: each partition's first offset (the batch's log keeps it as the broker's answer).
      const offsets = written.map((r) => `${r.topicName}/${r.partition}@${r.baseOffset ?? '?'}`).join(' ');
      return messages.map(() => accepted(ms, offsets || null));
    } catch (err) {
      // The produce is all or nothing to the caller: every message is retried (the idempotent producer, and
      // the same message-id, cover one that did land). The producer is replaced: its sequence state is unsure.
      this.broken = true;
      const ms = Date.now() - started;
      const message = `Kafka: ${(err as Error).message}`;
      return messages.map(() => failed(errorClassOf(err), message, ms));
    }
  }

  async close(): Promise<void> {
    this.broken = true;
    await this.producer.disconnect().catch(() => undefined);
  }
}

export class PipelineSender {
  private readonly links = new Map<string, { version: number; link: Promise<Link>; usedAt: number }>();
  private readonly idleSweep: NodeJS.Timeout;

  constructor(private readonly policy: UrlPolicy) {
    this.idleSweep = setInterval(() => this.closeIdle(), 60_000);
    this.idleSweep.unref();
  }

  /** Publishes `messages` (in order) to the pipeline's broker; one outcome per message, in order. */
  async send(pipeline: PipelineDoc, messages: BrokerMessage[], timeoutMs: number): Promise<AttemptResult[]> {
    const started = Date.now();
    let link: Link;
    try {
      link = await this.linkFor(pipeline, timeoutMs);
    } catch (err) {
      this.drop(pipeline._id);
      const name = pipeline.destination.type === 'rabbitmq' ? 'RabbitMQ' : 'Kafka';
      return messages.map(() => failed(errorClassOf(err), `${name}: could not connect: ${(err as Error).message}`, Date.now() - started));
    }
    return link.publish(messages, timeoutMs);
  }

  private linkFor(pipeline: PipelineDoc, timeoutMs: number): Promise<Link> {
    const held = this.links.get(pipeline._id);
    if (held && held.version === pipeline.version) {
      held.usedAt = Date.now();
      return held.link.then((l) => {
        if (!l.broken) return l;
        this.drop(pipeline._id);
        return this.linkFor(pipeline, timeoutMs);
      });
    }
    if (held) this.drop(pipeline._id);
    const d = pipeline.destination;
    const link: Promise<Link> = d.type === 'rabbitmq' ? RabbitmqLink.open(pipeline, d, this.policy) : KafkaLink.open(pipeline, d, this.policy, timeoutMs);
    link.catch(() => undefined);
    this.links.set(pipeline._id, { version: pipeline.version, link, usedAt: Date.now() });
    return link;
  }

  private drop(pipelineId: string): void {
    const held = this.links.get(pipelineId);
    this.links.delete(pipelineId);
    held?.link.then((l) => l.close()).catch(() => undefined);
  }

  private closeIdle(): void {
    for (const [id, held] of this.links) if (Date.now() - held.usedAt > IDLE_CLOSE_MS) this.drop(id);
  }

  async close(): Promise<void> {
    clearInterval(this.idleSweep);
    const held = [...this.links.values()];
    this.links.clear();
    await Promise.all(held.map((h) => h.link.then((l) => l.close()).catch(() => undefined)));
  }
}
