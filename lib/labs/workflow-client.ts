import { randomInt } from 'node:crypto';
import { WorkflowExecutionAlreadyStartedError, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { ApiError, badRequest, notFound } from '../platform/errors';
import { isWorkflowGone } from '../platform/temporal';
import { crashPoint } from '../platform/failpoints';
import { OrderViews } from './order-view';
import type { LabOrderDoc } from './model';
import { todayUtc } from '../platform/time';
import { workflowIds } from '../../workflows/ids';
import {
  cancelOrderUpdate,
  labOrderCorrectionWorkflow,
  labOrderWorkflow,
  registerTestkitUpdate,
  rescheduleOrderUpdate,
  simulateOrderUpdate,
  type SimulationRequest,
} from '../../workflows/lab-order';
import { LAB_ORDER_REFUSED, SEARCH_ATTRIBUTES } from './order-workflow-terms';
import { dottedStatus, TERMINAL } from './statuses';
import type { TemporalDeps } from '../platform/temporal';
import type { OrderViewDeps } from './order-view';

/** What the order requests use: the stores, the catalogue and configuration (views), and Temporal (the order's workflow). */
export interface LabOrderDeps extends OrderViewDeps {
  temporal: TemporalDeps;
}

/**
 * Everything that changes a lab order goes through its workflow (`lab-order:<id>`), the single owner of
 * the order document: the api inserts a new order once, and asks the workflow (Temporal Updates, which it
 * validates against its own state) for every later change.
 */

/**
 * Starts the order's workflow, then stores the order: a crash between leaves a workflow without an order, which
 * gives up (fails) after LAB_ORDER_STORE_GRACE_MS, and no order anyone can see. A retry with the same idempotency
 * key stores the order under the same id, joining that run or, once it has failed, starting a new one.
 */
export async function startAndStoreOrder(
  deps: LabOrderDeps,
  doc: LabOrderDoc,
  requestId: string,
): Promise<{ stored: LabOrderDoc } | { sample_taken: LabOrderDoc | null }> {
  const { temporal, repos, config } = deps;
  const workflowId = workflowIds.labOrder(doc._id);
  try {
    await temporal.client.workflow.start(labOrderWorkflow, {
      workflowId,
      taskQueue: temporal.taskQueue,
      args: [
        {
          orderId: doc._id,
          order: {
            method: doc.method,
            lowLevelStatus: doc.low_level_status,
            eventIds: doc.events.map((e) => e.id),
            activateBy: doc.activate_by,
            createdWithActivateBy: doc.created_with_activate_by,
            labAccountId: doc.lab_account_id,
          },
          activationTimeScale: config.LAB_ACTIVATION_TIME_SCALE,
          storeGraceMs: config.LAB_ORDER_STORE_GRACE_MS,
        },
      ],
      // A request resumed after a crash (same idempotency key) finds the first run still waiting for the document.
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.teamId, value: doc.team_id },
        { key: SEARCH_ATTRIBUTES.userId, value: doc.user_id },
        { key: SEARCH_ATTRIBUTES.orderStatus, value: doc.low_level_status },
      ],
      memo: { request_id: requestId, team_id: doc.team_id },
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
  crashPoint('lab-order.workflow-started');
  const inserted = await repos.labOrders.insert(doc);
  // Stored, not yet answered: a failure here must not let the retry (same idempotency key) make a second order.
  crashPoint('lab-order.stored');
  if ('sample_taken' in inserted) {
    // This run will never see its order: end it now rather than let it wait for the document.
    await temporal.client.workflow
      .getHandle(workflowId)
      .terminate('sample_id already registered')
      .catch(() => undefined);
    return inserted;
  }
  return { stored: 'inserted' in inserted ? inserted.inserted : inserted.exists };
}

/** A new sample id (`HB` + 10 digits), unique per team by index; the caller retries on the rare clash. */
export const newSampleId = () => `HB${String(randomInt(0, 1e10)).padStart(10, '0')}`;

export function orderViews(deps: LabOrderDeps): OrderViews {
  return new OrderViews(deps);
}

export async function findOrder(deps: LabOrderDeps, teamId: string, orderId: string): Promise<LabOrderDoc> {
  const doc = await deps.repos.labOrders.find(teamId, orderId);
  if (!doc) throw notFound(`Order ${orderId} not found.`);
  return doc;
}

const finalStatusRefusal = (doc: LabOrderDoc) =>
  badRequest(`The order is in its final status ${dottedStatus(doc.method, doc.low_level_status)}; it can no longer be changed.`);

/** Runs a Temporal Update on the order's workflow and renders its refusals as the spec's 400s. */
async function updateOrder<R>(
  deps: LabOrderDeps,
  doc: LabOrderDoc,
  run: (handle: ReturnType<TemporalDeps['client']['workflow']['getHandle']>) => Promise<R>,
): Promise<R> {
  // A final status: the run has ended, or is closing (its writes are recorded activities, so its last workflow task
  // comes after the write the document shows). Either way nothing changes it any more: answered as for an ended run.
  if (TERMINAL.has(doc.low_level_status)) throw finalStatusRefusal(doc);
  const handle = deps.temporal.client.workflow.getHandle(workflowIds.labOrder(doc._id));
  try {
    return await run(handle);
  } catch (err) {
    const cause = err instanceof WorkflowUpdateFailedError ? err.cause : err;
    if (cause instanceof ApplicationFailure && cause.type === LAB_ORDER_REFUSED) throw badRequest(cause.message);
    if (isWorkflowGone(err)) {
      // The workflow has ended: the order is in a final status, which the document shows.
      throw finalStatusRefusal((await deps.repos.labOrders.findById(doc._id)) ?? doc);
    }
    if (err instanceof WorkflowUpdateRPCTimeoutOrCancelledError) throw new ApiError(503, 'The order did not answer in time; it is safe to retry.');
    throw err;
  }
}

export async function rescheduleOrder(deps: LabOrderDeps, doc: LabOrderDoc, activateBy: string | null) {
  if (!doc.created_with_activate_by) {
    throw badRequest('This order was created without activate_by (for immediate processing) and cannot be rescheduled.');
  }
  await updateOrder(deps, doc, (h) => h.executeUpdate(rescheduleOrderUpdate, { args: [{ activateBy, today: todayUtc() }] }));
  return (await deps.repos.labOrders.findById(doc._id))!;
}

export async function cancelOrder(deps: LabOrderDeps, doc: LabOrderDoc) {
  await updateOrder(deps, doc, (h) => h.executeUpdate(cancelOrderUpdate));
  return (await deps.repos.labOrders.findById(doc._id))!;
}

/** An unregistered kit's registration, once its patient is bound to the order (orders-store `bindRegistration`). */
export async function acceptKitRegistration(deps: LabOrderDeps, doc: LabOrderDoc, userId: string, registrationId: string) {
  return updateOrder(deps, doc, (h) => h.executeUpdate(registerTestkitUpdate, { args: [{ userId, registrationId }] }));
}

export async function simulateOrder(deps: LabOrderDeps, doc: LabOrderDoc, request: SimulationRequest) {
  return updateOrder(deps, doc, (h) => h.executeUpdate(simulateOrderUpdate, { args: [request] }));
}

/** How long a correction waits for the order's run to close once it has recorded its final status. */
const CLOSING_RUN_WAIT_MS = 10_000;

/**
 * Whether the order's run has closed within `ms`, asked with short describe calls: a long-poll for its result would
 * outlive a wait that gave up (and the client, at shutdown).
 */
async function runClosesWithin(deps: LabOrderDeps, orderId: string, ms: number): Promise<boolean> {
  const handle = deps.temporal.client.workflow.getHandle(workflowIds.labOrder(orderId));
  const deadline = Date.now() + ms;
  for (;;) {
    if ((await handle.describe()).status.name !== 'RUNNING') return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * A real lab's results (HL7 intake) to the order's workflow, the way the sandbox's simulation goes (`updateId`
 * makes a repeat of the same message one update). An order whose workflow has ended (completed or corrected)
 * takes a correction in a short run under the same workflow id; a second identical start then fails instead of
 * recording it twice while the first runs.
 */
export async function feedLabResults(
  deps: LabOrderDeps,
  doc: LabOrderDoc,
  request: SimulationRequest,
  updateId: string,
  waitedForClose = false,
): Promise<{ course: string[] }> {
  // An erased order is answered as an unknown one: nothing of it, results included, is taken again.
  if (doc.patient_data_erased_at) throw notFound(`Order ${doc._id} not found.`);
  if (!TERMINAL.has(doc.low_level_status)) {
    return updateOrder(deps, doc, (h) => h.executeUpdate(simulateOrderUpdate, { args: [request], updateId }));
  }
  if (request.finalStatus !== 'corrected' || !['completed', 'corrected'].includes(doc.low_level_status)) {
    throw badRequest(`The order is in its final status ${dottedStatus(doc.method, doc.low_level_status)}; only a correction of its results can follow.`);
  }
  const lastEventId = doc.events[doc.events.length - 1]?.id ?? 0;
  const correction = deps.temporal.client.workflow.execute(labOrderCorrectionWorkflow, {
    workflowId: workflowIds.labOrder(doc._id),
    taskQueue: deps.temporal.taskQueue,
    args: [{ orderId: doc._id, method: doc.method, lastEventId, results: request }],
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    workflowIdConflictPolicy: 'FAIL',
    typedSearchAttributes: [
      { key: SEARCH_ATTRIBUTES.teamId, value: doc.team_id },
      { key: SEARCH_ATTRIBUTES.userId, value: doc.user_id },
      { key: SEARCH_ATTRIBUTES.orderStatus, value: 'corrected' },
    ],
  });
  try {
    await correction;
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    // The order's run has recorded its final status and is closing (its writes are recorded activities: its last
    // workflow task comes after the write), or another correction runs: wait for it, briefly, then take the order as
    // it is then (its last event id may have moved). Still busy: the lab sends again.
    const closed = !waitedForClose && (await runClosesWithin(deps, doc._id, CLOSING_RUN_WAIT_MS));
    const current = closed ? await deps.repos.labOrders.findById(doc._id) : null;
    if (!current) throw new ApiError(409, 'The order is being updated by the lab right now; send the message again shortly.');
    return feedLabResults(deps, current, request, updateId, true);
  }
  return { course: [dottedStatus(doc.method, 'corrected')] };
}
