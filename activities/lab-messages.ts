import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Repositories } from '../lib/repositories';
import type { Logger } from '../lib/platform/logger';
import type { LabCatalogue } from '../lib/labs/catalogue';
import type { LabAccountDoc } from '../lib/labs/lab-accounts';
import type { LabOrderDoc } from '../lib/labs/model';
import type { LabOutboundMessageDoc, OutboundAnswer } from '../lib/labs/lab-outbound-store';
import { type LabConnections, readAnswer } from '../lib/labs/lab-connections';
import { placerNumberOf } from '../lib/labs/placer-number';
import { OrderNotRenderable, orderControlId, renderCancelMessage, renderOrderMessage, type OrderMessageInput } from '../lib/labs/hl7/order-message';
import { MllpConnectionError, MllpTimeout } from '../lib/labs/mllp/client';
import { crashPoint } from '../lib/platform/failpoints';
import { labMessageAnswers, labMessageResends, labMessageSends } from '../lib/platform/metrics';

export interface LabMessageActivityDeps {
  repos: Repositories;
  logger: Logger;
  labCatalogue: LabCatalogue;
  labConnections: LabConnections;
}

/** The lab's answer to an order: accepted (under its filler number, or our placer number), or refused with its reason. */
export type LabOrderAnswer = { accepted: true; labReference: string } | { accepted: false; reason: string };
/** The lab's answer to a cancel: CR cancelled it; UC (or an error) refused, with the lab's reason. */
export type LabCancelAnswer = { cancelled: true } | { cancelled: false; reason: string };

/** The failure type of an attempt the lab did not answer (no connection, no ACK in time): retried with backoff. */
export const LAB_UNANSWERED = 'LabUnanswered';

/** How often a waiting send tells Temporal it is alive (its heartbeat timeout is 10 s: workflows/lab-order.ts). */
const HEARTBEAT_MS = 2_000;
/** How often a committed message's store document is read while its application ACK is awaited. */
const ANSWER_POLL_MS = 250;

// Orders from before placer numbers were stored have the same one, derived from their id.
const placerOf = (doc: LabOrderDoc) => doc.placer_number ?? placerNumberOf(doc._id);
export const controlIdOf = (doc: LabOrderDoc, kind: 'order' | 'cancel') => orderControlId(placerOf(doc), kind);

/**
 * Orders and cancels to real laboratories over MLLP (contract C6). Each message is rendered once and stored before its
 * first send (unique by control id); every attempt sends those stored bytes, so a resend after a lost ACK, a retry on
 * another worker or after a crash is the same message with the same MSH-10, which the lab de-duplicates. An attempt
 * that gets no answer in the account's ack_timeout_ms (or no connection) fails naming the lab and the reason; Temporal
 * retries it with backoff (2 s doubling to 5 minutes, without limit: workflows/lab-order.ts), so a lab that is down
 * delays its orders and loses none.
 *
 * Head-of-line: one lab's client sends one message at a time, in the order asked, and waits at most ack_timeout_ms for
 * each. A message the lab leaves unanswered fails its attempt after that time, and its retry is a new send that joins
 * the back of the client's queue after the backoff, so the messages queued behind it go first; a message the lab
 * refuses (AE/AR) is a business answer and is never retried at all. So a message refused or unanswered again and
 * again costs the others at most one ack_timeout_ms per attempt of its, never their turn.
 */
export function createLabMessageActivities(deps: LabMessageActivityDeps) {
  const outbound = deps.repos.labOutbound;
  const log = deps.logger.child({ component: 'lab-messages' });

  async function orderAndAccount(orderId: string): Promise<{ doc: LabOrderDoc; account: LabAccountDoc }> {
    const doc = await deps.repos.labOrders.findById(orderId);
    if (!doc) throw ApplicationFailure.retryable(`Order ${orderId} is not stored (yet)`, 'OrderNotFound');
    const accountId = doc.lab_account_id;
    if (!accountId) throw ApplicationFailure.nonRetryable(`Order ${orderId} has no lab account`, 'NoLabAccount');
    const account = await deps.repos.labAccounts.findById(accountId);
    // Deleted under a waiting order: say so where the order waits (an operator may restore it); keep trying.
    if (!account) throw ApplicationFailure.retryable(`Lab account ${accountId} of order ${orderId} does not exist`, 'LabAccountMissing');
    return { doc, account };
  }

  /** What the renderer reads besides the order: the order's codes and answers, and its insurance record. */
  async function renderInput(doc: LabOrderDoc, account: LabAccountDoc, controlId: string): Promise<OrderMessageInput> {
    const insurance = doc.health_insurance_id ? await deps.repos.insurance.findById(doc.team_id, doc.health_insurance_id) : null;
    return {
      order: doc,
      account,
      catalogue: deps.labCatalogue,
      controlId,
      now: new Date(),
      icdCodes: doc.icd_codes ?? [],
      aoeAnswers: doc.aoe_answers ?? [],
      insurance,
    };
  }

  /** The stored message (rendered and stored now if it is the first attempt), or why the lab's message cannot carry the order. */
  async function storedMessage(
    kind: 'order' | 'cancel',
    doc: LabOrderDoc,
    account: LabAccountDoc,
  ): Promise<{ message: LabOutboundMessageDoc } | { unrenderable: string }> {
    const controlId = controlIdOf(doc, kind);
    const existing = await outbound.find(controlId);
    if (existing) return { message: existing };
    let bytes: Buffer;
    try {
      const input = await renderInput(doc, account, controlId);
      bytes = (kind === 'order' ? renderOrderMessage(input) : renderCancelMessage(input)).bytes;
    } catch (err) {
      if (!(err instanceof OrderNotRenderable)) throw err;
      return { unrenderable: `The order cannot be sent to ${account.name}: ${err.message} (field ${err.field})` };
    }
    const message = await outbound.store({
      _id: controlId,
      order_id: doc._id,
      account_id: account._id,
      kind,
      message: bytes.toString('base64'),
      charset: account.charset,
      state: 'pending',
      answer: null,
      sends: 0,
      last_sent_at: null,
      answered_at: null,
      created_at: new Date(),
    });
    // Erasure deletes an order's messages after marking the order: whichever comes second sees the other (a message
    // stored after the erasure's delete is deleted here).
    if ((await deps.repos.labOrders.findById(doc._id))?.patient_data_erased_at) {
      await outbound.eraseForOrder(doc._id);
      return { unrenderable: `The order's patient data was erased; nothing is sent to ${account.name}` };
    }
    return { message };
  }

  /** A committed message (enhanced mode): its application ACK comes on the connection (onUnmatchedReply stores it). */
  async function awaitStoredAnswer(controlId: string, timeoutMs: number): Promise<OutboundAnswer | null> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const current = await outbound.find(controlId);
      if (current?.state === 'answered' && current.answer) return current.answer;
      if (Date.now() >= until) return null;
      await sleep(ANSWER_POLL_MS);
    }
  }

  /** Sends the stored message until the lab answers it (this attempt: once), or finds the answer already stored. */
  async function exchange(message: LabOutboundMessageDoc, account: LabAccountDoc): Promise<OutboundAnswer> {
    const context = Context.current();
    const controlId = message._id;
    const labels = { lab: account.lab_slug, kind: message.kind };
    const about = { order_id: message.order_id, lab_account: account._id, lab: account.lab_slug, control_id: controlId, attempt: context.info.attempt };
    const unanswered = (reason: string, sends: number) =>
      ApplicationFailure.retryable(
        `${account.name} (${account.lab_slug}, ${account.mllp.host}:${account.mllp.port}) did not answer ${message.kind} message ${controlId}: ${reason} (send ${sends}); retrying with backoff`,
        LAB_UNANSWERED,
      );
    const beat = setInterval(() => context.heartbeat(), HEARTBEAT_MS);
    try {
      if (message.state === 'answered' && message.answer) return message.answer;
      if (message.state === 'committed') {
        // The lab holds it (its accept ACK came): wait for the application ACK rather than send it again.
        const answer = await awaitStoredAnswer(controlId, account.ack_timeout_ms);
        if (answer) return answer;
        throw unanswered(`committed by the lab, no application ACK within ${account.ack_timeout_ms} ms`, message.sends);
      }
      const counted = await outbound.recordSend(controlId);
      if (!counted) {
        // Answered meanwhile (a late ACK of an earlier send): nothing to send.
        const answered = await outbound.find(controlId);
        if (answered?.answer) return answered.answer;
        throw ApplicationFailure.retryable(`Lab message ${controlId} vanished (erased?)`, 'LabMessageMissing');
      }
      const resend = counted.sends > 1;
      if (resend) labMessageResends.inc(labels);
      log.info({ ...about, sends: counted.sends }, resend ? 'lab message resent' : 'lab message sent');
      try {
        const client = deps.labConnections.clientFor(account);
        const { reply } = await client.send(controlId, Buffer.from(message.message, 'base64'), {
          timeoutMs: account.ack_timeout_ms,
          enhanced: account.ack_mode === 'enhanced',
          onCommit: () => {
            outbound.markCommitted(controlId).catch((err) => log.warn({ ...about, err }, 'lab message: storing the commit ACK failed'));
          },
        });
        // Answered, not yet stored: test/lab-orders-mllp.test.ts kills the worker here (the next attempt resends).
        crashPoint('lab-message.reply-received');
        const answer = readAnswer(reply, account);
        labMessageSends.inc({ ...labels, outcome: 'answered' });
        await outbound.recordAnswer(controlId, account._id, answer);
        // The first answer stored wins (a late ACK of an earlier send may have come first; it is the same message).
        const stored = (await outbound.find(controlId))?.answer ?? answer;
        labMessageAnswers.inc({ ...labels, code: stored.code });
        log.info({ ...about, code: stored.code, order_control: stored.orderControl }, 'lab message answered');
        return stored;
      } catch (err) {
        if (!(err instanceof MllpTimeout || err instanceof MllpConnectionError)) throw err;
        const timedOut = err instanceof MllpTimeout;
        if (timedOut && err.commit) await outbound.markCommitted(controlId);
        labMessageSends.inc({ ...labels, outcome: timedOut ? 'timeout' : 'connection_error' });
        // A late ACK may have landed while this send gave up.
        const late = await outbound.find(controlId);
        if (late?.state === 'answered' && late.answer) return late.answer;
        log.warn({ ...about, sends: counted.sends, reason: err.message }, 'lab message unanswered; retrying with backoff');
        throw unanswered(timedOut ? `no ACK within ${account.ack_timeout_ms} ms` : `no connection (${err.message})`, counted.sends);
      }
    } finally {
      clearInterval(beat);
    }
  }

  return {
    /** Sends the order to its lab (ORM^O01 or OML^O21, by the account's profile) and returns the lab's answer. */
    async sendOrderToLab({ orderId }: { orderId: string }): Promise<LabOrderAnswer> {
      const { doc, account } = await orderAndAccount(orderId);
      const stored = await storedMessage('order', doc, account);
      if ('unrenderable' in stored) {
        log.warn({ order_id: orderId, lab_account: account._id, reason: stored.unrenderable }, 'lab order not renderable');
        return { accepted: false, reason: stored.unrenderable };
      }
      const answer = await exchange(stored.message, account);
      if (answer.code === 'AA' || answer.code === 'CA') return { accepted: true, labReference: answer.fillerNumber ?? placerOf(doc) };
      return { accepted: false, reason: answer.text ?? `${account.name} refused the order (${answer.code}) without a reason` };
    },

    /** Asks the lab to cancel the order (ORC-1 = CA): its CR cancels, its UC refuses with its reason. */
    async sendCancelToLab({ orderId }: { orderId: string }): Promise<LabCancelAnswer> {
      const { doc, account } = await orderAndAccount(orderId);
      const stored = await storedMessage('cancel', doc, account);
      if ('unrenderable' in stored) return { cancelled: false, reason: stored.unrenderable };
      const answer = await exchange(stored.message, account);
      const accepted = answer.code === 'AA' || answer.code === 'CA';
      if (accepted && answer.orderControl !== 'UC') return { cancelled: true };
      return { cancelled: false, reason: answer.text ?? `${account.name} is unable to cancel the order (${answer.orderControl ?? answer.code})` };
    },
  };
}

export type LabMessageActivities = ReturnType<typeof createLabMessageActivities>;
