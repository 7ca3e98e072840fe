import { setTimeout as sleep } from 'node:timers/promises';
import { publishEvent, type EventPublisher } from '../events/publisher';
import { nameBasedUuid } from '../platform/keys';
import { isDuplicateKeyError } from '../platform/database/store-errors';
import type { Logger } from '../platform/logger';
import { isoWithOffset } from '../platform/time';
import { INBOUND_REPORT_PREFIX } from './hl7-lab';
import { Hl7Refusal, parseOru, type Hl7ObservationRequest, type Hl7OruMessage } from './hl7-oru';
import { inboundReportId, type LabInboundMessageDoc } from './lab-inbound-store';
import type { LabResultReviewDoc } from './lab-reviews-store';
import type { LabOrderDoc } from './model';
import { TERMINAL } from './statuses';
import {
  applyPlan,
  knownReferences,
  matchOrders,
  OrderRefusedUpdate,
  planOrderUpdate,
  planTarget,
  type KnownReferences,
  type OrderRequests,
} from './result-intake';
import type { LabOrderDeps } from './workflow-client';

/**
 * Applying a result message the MLLP listener stored (lib/labs/lab-listener.ts): the recorded activity of the
 * account's applier workflow (workflows/lab-results.ts) runs `applyInboundMessages`, and an operator's match of a
 * review runs `applyReviewToOrder`; both go through lib/labs/result-intake.ts, the HTTP intake's path.
 */
export type LabResultsDeps = LabOrderDeps & { publisher: EventPublisher; logger: Logger };

/** How long one apply waits for the order's workflow to record what it was handed, before the activity retries. */
const RECORDED_WITHIN_MS = 60_000;

/** The review's event `data`: ids and numbers, no patient data (the management API's GET shows the patient as the lab sent it). */
export function reviewEventData(review: LabResultReviewDoc) {
  return {
    id: review._id,
    org_id: review.org_id,
    lab_account_id: review.account_id,
    lab_slug: review.lab_slug,
    status: review.status,
    reason: review.reason,
    detail: review.detail,
    control_id: review.control_id,
    placer_numbers: review.placer_numbers,
    filler_numbers: review.filler_numbers,
    services: review.services,
    matched_order_id: review.matched_order_id,
    created_at: isoWithOffset(review.created_at),
    updated_at: isoWithOffset(review.updated_at),
  };
}

/**
 * `labtest.match_review.created|updated` to every team of the lab account's organisation in this deployment: the
 * account is the organisation's, and a result no order claims belongs to no team yet. Keyed per review and change.
 */
export async function publishReviewEvent(
  deps: LabResultsDeps,
  review: LabResultReviewDoc,
  change: 'created' | 'matched' | 'rejected',
  teams?: string[],
): Promise<void> {
  for (const team of teams ?? (await deploymentTeams(deps, review.org_id))) {
    await publishEvent(deps, {
      teamId: team,
      eventType: change === 'created' ? 'labtest.match_review.created' : 'labtest.match_review.updated',
      data: reviewEventData(review),
      idempotencyKey: `lab-review:${review._id}:${change}`,
    });
  }
}

async function deploymentTeams(deps: LabOrderDeps, orgId: string): Promise<string[]> {
  const teams = await deps.repos.tenancy.listTeams(orgId);
  return teams
    .filter((t) => t.environment === deps.config.DEPLOYMENT_ENVIRONMENT && t.region === deps.config.DEPLOYMENT_REGION && !t.deletion_started_at)
    .map((t) => t._id);
}

/** The order's workflow has recorded `low` (the apply's effect is visible): the next message may go. */
async function recorded(deps: LabOrderDeps, orderId: string, low: string, heartbeat: () => void): Promise<void> {
  const until = Date.now() + RECORDED_WITHIN_MS;
  for (let pause = 50; Date.now() < until; pause = Math.min(pause * 2, 1000)) {
    const order = await deps.repos.labOrders.findById(orderId);
    // Recorded, or past it for good (a final status takes nothing more; an erased order takes nothing at all).
    if (!order || order.patient_data_erased_at || order.low_level_status === low || TERMINAL.has(order.low_level_status)) return;
    heartbeat();
    await sleep(pause);
  }
  throw new Error(`Order ${orderId} has not recorded ${low} within ${RECORDED_WITHIN_MS} ms; the apply is retried`);
}

type Outcome = LabInboundMessageDoc['applied_to'][number];

/** The order's patient data was erased between its match and its results: it is answered as an unknown one. */
export class OrderErased extends Error {
  constructor(readonly order: LabOrderDoc) {
    super(`Order ${order._id} was erased`);
  }
}

/** How a request names its order, for people: "placer number X, filler number Y". */
const numbersOf = (r: Hl7ObservationRequest) =>
  [r.placerOrderNumber && `placer number ${r.placerOrderNumber}`, r.fillerOrderNumber && `filler number ${r.fillerOrderNumber}`].filter(Boolean).join(', ');

/**
 * One order's share of a message: its plan handed to the order's workflow, once. A repeat (the activity retried, a
 * duplicate) is recognised by the results already carrying this report, or by the status no longer being reachable
 * (planOrderUpdate), and hands nothing again. Throws OrderRefusedUpdate or Hl7Refusal when the order cannot take it.
 */
async function applyToOrder(deps: LabOrderDeps, message: Hl7OruMessage, messageId: string, target: OrderRequests, heartbeat: () => void): Promise<Outcome> {
  const { order } = target;
  const reportId = inboundReportId(messageId, order._id);
  const results = await deps.repos.labOrders.findResults(order.team_id, order._id);
  if (results?.report_id === `${INBOUND_REPORT_PREFIX}${reportId}`) return { order_id: order._id, outcome: `already applied (${results.status})` };
  const plan = planOrderUpdate(message, target, deps.labCatalogue);
  if (plan.kind === 'none') return { order_id: order._id, outcome: `nothing to change: ${plan.reason}` };
  if (plan.kind === 'results') {
    await deps.repos.labInbound.saveReport({ _id: reportId, message_id: messageId, order_id: order._id, report: plan.report, created_at: new Date() });
    // Erased since it was matched: the report (patient data) goes again, and the order is treated as unknown. Erasure
    // marks the order before it removes reports, so whichever of the two writes comes second sees the other.
    if ((await deps.repos.labOrders.findById(order._id))?.patient_data_erased_at) {
      await deps.repos.labInbound.eraseForOrder(order._id);
      throw new OrderErased(order);
    }
  }
  const low = planTarget(order, plan);
  await applyPlan(deps, order, plan, plan.kind === 'results' ? `${INBOUND_REPORT_PREFIX}${reportId}` : undefined, `lab-inbound:${messageId}`);
  await recorded(deps, order._id, low, heartbeat);
  return { order_id: order._id, outcome: low };
}

/** What applying one message came to: how it is settled, and the review it files (when some of it matched nothing). */
interface MessageOutcome {
  settlement: { id: string; from: 'received'; to: 'applied' | 'in_review'; detail: string | null; appliedTo: Outcome[] };
  review: LabResultReviewDoc | null;
}

/**
 * Applies stored messages (state `received`), one after another in the order given, to the orders they name, then
 * settles them: `applied`, or `in_review` when some of one matched no order of the account's organisation (or an
 * order that cannot take it): those requests are filed in the review inbox and announced. Beyond its orders' own
 * work a batch costs a few round trips, however many messages it has: one read of the messages, three of the
 * references they name (knownReferences), one of each organisation's teams, one insert of its reviews, one write
 * settling them. A result for an erased order is treated as unknown, and audited. Safe to run again: a settled
 * message is left as it is, an order that took its share is not handed it twice, a review is filed once.
 */
export async function applyInboundMessages(deps: LabResultsDeps, messageIds: string[], heartbeat: () => void = () => undefined): Promise<{ states: string[] }> {
  const stored = new Map((await deps.repos.labInbound.findMany(messageIds)).map((m) => [m._id, m]));
  const received = messageIds.flatMap((id) => {
    const m = stored.get(id);
    return m?.state === 'received' ? [{ stored: m, message: parseOru(m.text, { encoding: m.charset }) }] : [];
  });
  const known = await knownReferences(
    deps,
    received.flatMap((r) => r.message.requests),
  );
  const teamsOf = new Map<string, Promise<string[]>>();
  const outcomes = new Map<string, MessageOutcome>();
  for (const { stored: m, message } of received) {
    if (!teamsOf.has(m.org_id)) teamsOf.set(m.org_id, deploymentTeams(deps, m.org_id));
    outcomes.set(m._id, await applyMessage(deps, m, message, new Set(await teamsOf.get(m.org_id)), known, heartbeat));
    heartbeat();
  }
  const reviews = [...outcomes.values()].flatMap((o) => (o.review ? [o.review] : []));
  // Filed and announced before their messages are settled: a crash between leaves them `received`, and the retry
  // finds them filed (and announces them under the same keys).
  const filedBefore = await deps.repos.labReviews.fileMany(reviews);
  const filed = await Promise.all(reviews.map(async (r) => (filedBefore.has(r._id) ? ((await deps.repos.labReviews.find(r.org_id, r._id)) ?? r) : r)));
  await Promise.all(filed.map(async (review) => publishReviewEvent(deps, review, 'created', await teamsOf.get(review.org_id))));
  await deps.repos.labInbound.settleMany([...outcomes.values()].map((o) => o.settlement));
  // One line a batch: a lab sending results for orders we do not know sends many, and a line each would flood the log.
  if (reviews.length) {
    const countOf = (values: string[]) => Object.fromEntries([...new Set(values)].map((v) => [v, values.filter((x) => x === v).length]));
    deps.logger.warn(
      {
        message_ids: reviews.map((r) => r.message_id),
        account_ids: [...new Set(reviews.map((r) => r.account_id))],
        reasons: countOf(reviews.map((r) => r.reason)),
      },
      reviews.length === 1 ? 'lab result filed for review' : `${reviews.length} lab results filed for review`,
    );
  }
  return { states: messageIds.map((id) => outcomes.get(id)?.settlement.to ?? stored.get(id)?.state ?? 'gone') };
}

/** One message of a batch: its matched orders handed their share; what matched nothing made into a review (not filed yet). */
async function applyMessage(
  deps: LabResultsDeps,
  stored: Omit<LabInboundMessageDoc, 'raw'>,
  message: Hl7OruMessage,
  teams: Set<string>,
  known: KnownReferences,
  heartbeat: () => void,
): Promise<MessageOutcome> {
  const messageId = stored._id;
  // The account's organisation's orders, sent to this account (or to none: orders made before lab accounts).
  const mayReport = (o: LabOrderDoc) => teams.has(o.team_id) && (!o.lab_account_id || o.lab_account_id === stored.account_id);
  const { matched, unmatched, erased } = await matchOrders(deps, message.requests, mayReport, known);
  for (const order of erased) await auditErasedOrder(deps, stored, order);

  const appliedTo: Outcome[] = [];
  const refused: { requests: Hl7ObservationRequest[]; reason: string }[] = [];
  for (const target of matched) {
    try {
      appliedTo.push(await applyToOrder(deps, message, messageId, target, heartbeat));
    } catch (err) {
      if (err instanceof OrderErased) {
        await auditErasedOrder(deps, stored, err.order);
        unmatched.push(...target.requests);
        continue;
      }
      if (!(err instanceof OrderRefusedUpdate || err instanceof Hl7Refusal)) throw err;
      const reason = err instanceof Hl7Refusal ? err.reason : `Order ${target.order._id} cannot take these results: ${err.message}`;
      refused.push({ requests: target.requests, reason });
    }
  }
  if (!unmatched.length && !refused.length) {
    return { settlement: { id: messageId, from: 'received', to: 'applied', detail: null, appliedTo }, review: null };
  }
  const underReview = [...unmatched, ...refused.flatMap((r) => r.requests)];
  const detail = [
    ...(unmatched.length ? [`No order of this organisation matches ${unmatched.map(numbersOf).join('; ')}.`] : []),
    ...refused.map((r) => r.reason),
  ].join(' ');
  const now = new Date();
  const review: LabResultReviewDoc = {
    _id: messageId,
    org_id: stored.org_id,
    environment: deps.config.DEPLOYMENT_ENVIRONMENT,
    region: deps.config.DEPLOYMENT_REGION,
    account_id: stored.account_id,
    lab_slug: stored.lab_slug,
    message_id: messageId,
    control_id: stored.control_id,
    reason: unmatched.length ? 'no_matching_order' : 'not_applicable',
    detail,
    request_indexes: underReview.map((r) => message.requests.indexOf(r)),
    placer_numbers: [...new Set(underReview.map((r) => r.placerOrderNumber).filter(Boolean))],
    filler_numbers: [...new Set(underReview.map((r) => r.fillerOrderNumber).filter((f): f is string => Boolean(f)))],
    services: underReview.map((r) => r.service),
    patient: message.patient,
    status: 'pending',
    matched_order_id: null,
    matched_team_id: null,
    resolved_by: null,
    resolved_at: null,
    created_at: now,
    updated_at: now,
  };
  return { settlement: { id: messageId, from: 'received', to: 'in_review', detail, appliedTo }, review };
}

/** An erased order's result is answered as an unknown one; the organisation's audit log says it came. */
async function auditErasedOrder(deps: LabOrderDeps, stored: Omit<LabInboundMessageDoc, 'raw'>, order: LabOrderDoc): Promise<void> {
  const now = new Date();
  try {
    await deps.repos.auditLog.begin([
      {
        // One entry per message and order, whatever retries of the apply happen.
        _id: nameBasedUuid('lab-results.erased-order', stored._id, order._id),
        org_id: stored.org_id,
        team_id: order.team_id,
        action: 'lab_results.erased_order',
        target: { type: 'hl7_message', id: stored.control_id ?? stored._id },
        actor: { management_key_id: null, header: `mllp:${stored.account_id}` },
        request_id: stored._id,
        status: 'failed',
        error: { status: 404, detail: `A result for order ${order._id}, whose patient data was erased: filed for review as an unknown order's.` },
        changes: [],
        created_at: now,
        completed_at: now,
      },
    ]);
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
  }
}

/**
 * An operator matched a review to `order`: the requests under review go to it through the same path, as if they had
 * named it. Throws OrderRefusedUpdate / Hl7Refusal when the order cannot take them (the caller reopens the review).
 */
export async function applyReviewToOrder(deps: LabResultsDeps, review: LabResultReviewDoc, order: LabOrderDoc): Promise<Outcome> {
  const stored = await deps.repos.labInbound.find(review.message_id);
  if (!stored) throw new OrderRefusedUpdate(`the lab's message ${review.message_id} is no longer stored`);
  const message = parseOru(stored.text, { encoding: stored.charset });
  const requests = review.request_indexes.map((i) => message.requests[i]).filter(Boolean);
  const outcome = await applyToOrder(deps, message, stored._id, { order, requests }, () => undefined);
  await deps.repos.labInbound.settle(stored._id, 'in_review', 'applied', {
    detail: `matched by an operator to order ${order._id}`,
    appliedTo: [...stored.applied_to, outcome],
  });
  return outcome;
}
