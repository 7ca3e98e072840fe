import { ApiError } from '../platform/errors';
import type { LabCatalogue } from './catalogue';
import { Hl7Refusal, type Hl7ObservationRequest, type Hl7OruMessage } from './hl7-oru';
import { orderReport } from './hl7-results';
import { interpretReport } from './interpretation';
import type { LabReport } from './lab-adapter';
import type { LabOrderDoc } from './model';
import { isPlacerNumber } from './placer-number';
import { courseTo, lowLevelFromFinalStatus, STATUS_SETS } from './statuses';
import { feedLabResults, type LabOrderDeps } from './workflow-client';

/**
 * The one path from a parsed ORU^R01 to an order, shared by the HTTP intake (lib/labs/hl7-intake.ts) and the MLLP
 * listener's applier (activities/lab-results.ts): find the order each OBR names (matchOrders), decide what the
 * message means for it (planOrderUpdate), and hand that to the order's workflow (applyPlan) the way the sandbox
 * lab's results go (`feedLabResults`).
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface OrderRequests {
  order: LabOrderDoc;
  requests: Hl7ObservationRequest[];
}

export interface OrderMatches {
  matched: OrderRequests[];
  /** Requests naming no order the sender may report on (or an erased order's: answered as unknown). */
  unmatched: Hl7ObservationRequest[];
  /** Orders a request named whose patient data was erased (the caller audits them; they count as unmatched). */
  erased: LabOrderDoc[];
}

/** The references of a batch of messages that name some order (knownReferences): the rest need no lookup each. */
export interface KnownReferences {
  placerNumbers: Set<string>;
  ids: Set<string>;
  fillerNumbers: Set<string>;
}

/** Which references of these requests name an order at all: three queries for a whole batch of messages. */
export async function knownReferences(deps: Pick<LabOrderDeps, 'repos'>, requests: Hl7ObservationRequest[]): Promise<KnownReferences> {
  const placers = requests.map((r) => r.placerOrderNumber);
  const found = await deps.repos.labOrders.referencesKnown({
    placerNumbers: [...new Set(placers.filter(isPlacerNumber))],
    ids: [...new Set(placers.filter((p) => !isPlacerNumber(p) && UUID.test(p)))],
    fillerNumbers: [...new Set(requests.map((r) => r.fillerOrderNumber).filter((f): f is string => Boolean(f)))],
  });
  return { placerNumbers: new Set(found.placerNumbers), ids: new Set(found.ids), fillerNumbers: new Set(found.fillerNumbers) };
}

/**
 * The order of each request: by our placer number (ORC-2/OBR-2: `placer_number`), an older order by its id (what
 * its requisition carried), then by the lab's filler number (ORC-3/OBR-3: our `lab_reference`) when it names one
 * order exactly. `mayReport` says whose orders the sender may report on (a team's for the HTTP intake, the lab
 * account's organisation for the listener): another's order is not found, never touched. `known` (a batch's
 * prefetch): a reference it lacks names no order; one it has is read now (the order as it is, not as prefetched).
 */
export async function matchOrders(
  deps: Pick<LabOrderDeps, 'repos'>,
  requests: Hl7ObservationRequest[],
  mayReport: (order: LabOrderDoc) => boolean,
  known?: KnownReferences,
): Promise<OrderMatches> {
  const orders = deps.repos.labOrders;
  // A reference the batch's prefetch found no order for is not looked up again.
  const lookUp = <T>(kind: keyof KnownReferences, value: string, read: () => Promise<T>, none: T) =>
    !known || known[kind].has(value) ? read() : Promise.resolve(none);
  const byOrder = new Map<string, OrderRequests>();
  const unmatched: Hl7ObservationRequest[] = [];
  const erased = new Map<string, LabOrderDoc>();
  for (const request of requests) {
    const placer = request.placerOrderNumber;
    let order: LabOrderDoc | null = null;
    if (isPlacerNumber(placer)) order = await lookUp('placerNumbers', placer, () => orders.findByPlacerNumber(placer), null);
    else if (UUID.test(placer)) order = await lookUp('ids', placer, () => orders.findById(placer), null);
    if (order && !mayReport(order)) order = null;
    const filler = request.fillerOrderNumber;
    if (!order && filler) {
      const candidates = (await lookUp('fillerNumbers', filler, () => orders.findByFillerNumber(filler), [])).filter(mayReport);
      if (candidates.length === 1) order = candidates[0];
    }
    if (order?.patient_data_erased_at) {
      erased.set(order._id, order);
      order = null;
    }
    if (!order) {
      unmatched.push(request);
      continue;
    }
    const entry = byOrder.get(order._id) ?? { order, requests: [] };
    entry.requests.push(request);
    byOrder.set(order._id, entry);
  }
  return { matched: [...byOrder.values()], unmatched, erased: [...erased.values()] };
}

/** What a message means for one order: results, a status (specimen received, specimen rejected), or nothing to do. */
export type LabUpdatePlan =
  | {
      kind: 'results';
      /** The low-level status the results bring: partial_results, completed or corrected. */
      finalStatus: 'partial_results' | 'completed' | 'corrected';
      report: LabReport;
      interpretation: 'normal' | 'abnormal' | 'critical';
    }
  | { kind: 'status'; finalStatus: 'delivered_to_lab' | 'sample_error'; statusDetail: string | null; reason: string }
  | { kind: 'none'; reason: string };

/**
 * HL7 table 0490 (specimen reject reason, SPM-21) → the reference's `status_detail` of `failed.sample_error`.
 * Codes the table has no counterpart for fall back to the text the lab sent (hemolysed, clotted, quantity, …).
 */
const REJECT_REASONS: Record<string, string> = {
  RH: 'sample_hemolyzed',
  QS: 'sample_quantity_not_sufficient',
  RN: 'sample_contaminated',
  EX: 'sample_stability_exceeded',
  RR: 'sample_stability_exceeded',
  RB: 'sample_improper_collection',
  RC: 'sample_improper_collection',
  RM: 'sample_improper_collection',
  RA: 'sample_improper_collection',
  RD: 'date_of_collection_unspecified',
  RE: 'demographic_information_unspecified',
  RI: 'demographic_information_mismatch',
  RS: 'demographic_information_mismatch',
};

export function statusDetailOf(reason: { code: string; text: string } | null): string | null {
  if (!reason) return null;
  const known = REJECT_REASONS[reason.code.toUpperCase()];
  if (known) return known;
  const text = reason.text.toLowerCase();
  if (/haemoly|hemoly/.test(text)) return 'sample_hemolyzed';
  if (/quantity|insufficient|\bqns\b|volume/.test(text)) return 'sample_quantity_not_sufficient';
  if (/contamina/.test(text)) return 'sample_contaminated';
  if (/stability|expired|too old|temperature/.test(text)) return 'sample_stability_exceeded';
  return 'sample_improper_collection';
}

/** SPM-21 (LRI), else the reason a 2.3 lab writes in the OBR's NTE ("Specimen rejected: …"). */
function rejectReasonOf(request: Hl7ObservationRequest): { code: string; text: string } | null {
  if (request.specimenRejectReason) return request.specimenRejectReason;
  const note = request.notes.map((n) => /specimen (?:rejected|problem)\s*:?\s*(.*)/i.exec(n)).find(Boolean);
  return note ? { code: '', text: note[1].trim() } : null;
}

const reachable = (order: LabOrderDoc, low: string) => Boolean(STATUS_SETS[order.method][low]) && courseTo(order.method, order.low_level_status, low) !== null;

/**
 * What `requests` (the OBRs of one order) mean for it. Results: P → partial_results (with the partial results), F →
 * completed, C → corrected (results replaced; the order's store keeps the earlier version), OBX-11 X → that marker
 * missing with the lab's reason, OBR-25 X beside results → the test's markers missing with the reason. Status only:
 * every OBR X with a specimen reject reason (SPM-21) → failed.sample_error with the matching status_detail; every OBR
 * I (specimen received) → a kit's delivered_to_lab. A walk-in or phlebotomy order has no status for "at the lab"
 * without results (the reference's status sets), so I changes nothing there; nor does P for a kit, which has no
 * partial_results status: it moves the kit to delivered_to_lab and its results wait for the final report.
 * A content problem (an unknown code, a number that is not one) throws an Hl7Refusal naming it.
 */
export function planOrderUpdate(message: Hl7OruMessage, { order, requests }: OrderRequests, catalogue: LabCatalogue): LabUpdatePlan {
  const statusOnly = requests.every((r) => r.observations.length === 0);
  if (statusOnly) {
    const rejected = requests.find((r) => r.resultStatus === 'X' && rejectReasonOf(r));
    if (rejected) {
      const reason = rejectReasonOf(rejected)!;
      const statusDetail = statusDetailOf(reason);
      if (!reachable(order, 'sample_error'))
        return { kind: 'none', reason: `specimen rejected (${reason.code} ${reason.text}), but the order is ${order.low_level_status}` };
      return { kind: 'status', finalStatus: 'sample_error', statusDetail, reason: `specimen rejected: ${reason.code} ${reason.text}`.trim() };
    }
    if (requests.every((r) => r.resultStatus === 'I')) return received(order);
    // X without a specimen problem: the tests cannot be done; a final report with every marker missing says so.
  }
  const { report, status } = orderReport(message, order, catalogue, requests);
  if (status === 'partial' && !STATUS_SETS[order.method].partial_results) return received(order);
  const { interpretation } = interpretReport(report, (markerId) => catalogue.markerById(markerId));
  const finalStatus = status === 'partial' ? 'partial_results' : status === 'corrected' ? 'corrected' : 'completed';
  return { kind: 'results', finalStatus, report, interpretation };
}

function received(order: LabOrderDoc): LabUpdatePlan {
  if (order.method !== 'testkit') return { kind: 'none', reason: `specimen received: a ${order.method} order has no status for it before results` };
  if (!reachable(order, 'delivered_to_lab')) return { kind: 'none', reason: `specimen received; the kit is already ${order.low_level_status}` };
  return { kind: 'status', finalStatus: 'delivered_to_lab', statusDetail: null, reason: 'specimen received' };
}

/** A plan the order cannot take (its workflow refused it): the message goes to review with this reason. */
export class OrderRefusedUpdate extends Error {}

/**
 * Hands a plan to the order's workflow (a Temporal Update, `updateId` making a repeat one update) and answers the
 * statuses it will walk through. `reportId` names the stored report the workflow's activity reads.
 */
export async function applyPlan(
  deps: LabOrderDeps,
  order: LabOrderDoc,
  plan: Exclude<LabUpdatePlan, { kind: 'none' }>,
  reportId: string | undefined,
  updateId: string,
): Promise<{ course: string[] }> {
  const request =
    plan.kind === 'results'
      ? { finalStatus: plan.finalStatus, delaySeconds: 0, interpretation: plan.interpretation, hasMissingResults: plan.report.missing.length > 0, reportId }
      : // statusDetail: the order's workflow records it with the status it walks to (failed.sample_error's reason).
        { finalStatus: plan.finalStatus, delaySeconds: 0, interpretation: 'normal' as const, hasMissingResults: false, statusDetail: plan.statusDetail };
  try {
    return await feedLabResults(deps, order, request, updateId);
  } catch (err) {
    if (err instanceof ApiError && err.status < 500 && err.status !== 409) {
      throw new OrderRefusedUpdate(typeof err.detail === 'string' ? err.detail : err.message);
    }
    throw err;
  }
}

/** The final low-level status a plan walks the order to. */
export const planTarget = (order: LabOrderDoc, plan: Exclude<LabUpdatePlan, { kind: 'none' }>) =>
  lowLevelFromFinalStatus(order.method, plan.finalStatus) ?? plan.finalStatus;

export { Hl7Refusal };
