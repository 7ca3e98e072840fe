import { randomUUID } from 'node:crypto';
import { contentHashOf } from '../../lib/labs/lab-inbound-store';
import type { TestApp } from './harness';

/**
 * A result message stored as the MLLP listener stores it (lib/labs/lab-listener.ts), without the signal that follows:
 * for a test of the applier on its own, or of the stranded-work sweep that finds such a message. Returns its id.
 */
export async function storeReceivedMessage(
  app: TestApp,
  message: { accountId: string; orgId: string; labSlug: string; text: string; receivedAt?: Date },
): Promise<string> {
  const id = randomUUID();
  const hash = contentHashOf(message.text);
  const controlId = `STORED-${id}`;
  await app.deps.repos.labInbound.store({
    _id: id,
    account_id: message.accountId,
    org_id: message.orgId,
    lab_slug: message.labSlug,
    control_id: controlId,
    content_sha256: hash,
    control_key: `${message.accountId}\u0000${controlId}`,
    content_key: `${message.accountId}\u0000${hash}`,
    peer: { address: '127.0.0.1', certificate: null },
    charset: 'utf8',
    raw: Buffer.from(message.text).toString('base64'),
    text: message.text,
    state: 'received',
    ack_code: 'AA',
    detail: null,
    applied_to: [],
    duplicates: 0,
    received_at: message.receivedAt ?? new Date(),
    settled_at: null,
  });
  return id;
}
