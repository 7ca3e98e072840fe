import type { Logger } from '../platform/logger';
import type { LabAccountDoc } from './lab-accounts';
import type { LabOutboundRepository, OutboundAnswer } from './lab-outbound-store';
import { parseAcknowledgement } from './hl7/acknowledgement';
import { decodeHl7Message } from './hl7/charsets';
import { MllpClient } from './mllp/client';

/** A lab's reply as stored on the message: decoded by its MSH-18 (or the account's character set), escapes resolved. */
export function readAnswer(reply: Buffer, account: Pick<LabAccountDoc, 'charset'>): OutboundAnswer {
  const { text, encoding } = decodeHl7Message(reply, account.charset);
  const ack = parseAcknowledgement(text, encoding);
  return { controlId: ack.controlId, code: ack.code, text: ack.text, orderControl: ack.orderControl, fillerNumber: ack.fillerNumber };
}

/**
 * The worker's lab connections, with late replies (an ACK after its send gave up) stored on the message they answer:
 * the next attempt finds it answered and does not send again. An enhanced-mode accept ACK marks it committed.
 */
export function createLabConnections(options: { log: Logger; outbound: LabOutboundRepository }): LabConnections {
  const log = options.log.child({ component: 'lab-connections' });
  return new LabConnections({
    log,
    async onUnmatchedReply(account, controlId, reply) {
      let answer: OutboundAnswer;
      try {
        answer = readAnswer(reply, account);
      } catch (err) {
        log.warn({ err, lab_account: account._id, control_id: controlId }, 'lab connection: an unreadable reply matched no message');
        return;
      }
      const id = controlId ?? answer.controlId;
      // An accept ACK (enhanced mode) commits; CE/CR refuse, like an application AE/AR.
      if (answer.code === 'CA') {
        await options.outbound.markCommitted(id);
        return;
      }
      const stored = await options.outbound.recordAnswer(id, account._id, answer);
      log.info({ lab_account: account._id, lab: account.lab_slug, control_id: id, code: answer.code, stored }, 'lab connection: late reply');
    },
  });
}

/**
 * The worker's connections to laboratories: one MLLP client per lab account, made on the first send and kept, so
 * one lab's messages go out one at a time and in order (the client queues them). An account changed since its client
 * was made (a new host, port, certificate: `updated_at` moved) gets a new client; the old one is closed, and whatever
 * it still had queued fails and is retried by its activity on the new one. Closed at worker shutdown.
 */
export class LabConnections {
  private readonly clients = new Map<string, { updatedAt: number; client: MllpClient }>();

  constructor(
    private readonly options: {
      log: Logger;
      /** A reply that matched no send in flight (an ACK after its send timed out): stored as that message's answer. */
      onUnmatchedReply: (account: LabAccountDoc, controlId: string | null, reply: Buffer) => Promise<void>;
      connectTimeoutMs?: number;
    },
  ) {}

  clientFor(account: LabAccountDoc): MllpClient {
    const updatedAt = account.updated_at.getTime();
    const held = this.clients.get(account._id);
    if (held && held.updatedAt === updatedAt) return held.client;
    if (held) {
      held.client.close().catch((err) => this.options.log.warn({ err, account: account._id }, 'lab connection: closing the outdated client failed'));
    }
    const log = this.options.log.child({ lab_account: account._id, lab: account.lab_slug });
    const client = new MllpClient(
      { host: account.mllp.host, port: account.mllp.port, tls: account.mllp.tls },
      {
        log,
        connectTimeoutMs: this.options.connectTimeoutMs,
        onUnmatchedReply: (controlId, reply) => this.options.onUnmatchedReply(account, controlId, reply),
      },
    );
    this.clients.set(account._id, { updatedAt, client });
    return client;
  }

  async close(): Promise<void> {
    const held = [...this.clients.values()];
    this.clients.clear();
    await Promise.allSettled(held.map(({ client }) => client.close()));
  }
}
