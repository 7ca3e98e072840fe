import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  defineQuery,
  defineUpdate,
  isCancellation,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { LabOrderActivities } from '../activities/lab-orders';
import type { LabMessageActivities } from '../activities/lab-messages';
import {
  CANCELLABLE,
  courseTo,
  dottedStatus,
  lowLevelFromFinalStatus,
  RESCHEDULABLE,
  RESULT_STATUSES,
  TERMINAL,
  type CollectionMethod,
} from '../lib/labs/statuses';
import { LAB_ORDER_REFUSED, ORDER_NEVER_STORED, SEARCH_ATTRIBUTES } from '../lib/labs/order-workflow-terms';

/**
 * The order's state when its workflow starts (the api stores the same in the order document). Small and
 * free of patient data: the workflow needs it before its first activity, so Updates that arrive at once
 * find their handlers and validators ready.
 */
export interface OrderSnapshot {
  method: CollectionMethod;
  lowLevelStatus: string;
  eventIds: number[];
  activateBy: string | null;
  createdWithActivateBy: boolean;
  /** The order's lab account (contract C2: a real lab, messages over MLLP); null: the sandbox lab. Absent in runs started before lab accounts. */
  labAccountId: string | null;
}

export interface LabOrderInput {
  orderId: string;
  order: OrderSnapshot;
  /**
   * Scheduled activation waits are multiplied by this (1 in production). Tests shorten multi-day waits
   * with `LAB_ACTIVATION_TIME_SCALE` instead of waiting for the date.
   */
  activationTimeScale: number;
  /** Default STORE_GRACE_MS; tests shorten it to see a run whose order was never stored give up. */
  storeGraceMs?: number;
}

/**
 * The lab's updates up to `finalStatus`: the sandbox's simulation, or a real lab's results (HL7 intake), which
 * the api stored as `reportId` and rated (`interpretation`) by the same rules the results are stored with.
 */
export interface SimulationRequest {
  finalStatus: string;
  delaySeconds: number;
  interpretation: 'normal' | 'abnormal' | 'critical';
  hasMissingResults: boolean;
  reportId?: string;
  /** A real lab's reason for the status it reports (failed.sample_error: sample_hemolyzed, …), on that status's event. */
  statusDetail?: string | null;
}

const refuse = (message: string) => ApplicationFailure.create({ type: LAB_ORDER_REFUSED, message, nonRetryable: true });

/** PATCH /v3/order/{id}: `today` is the caller's date (UTC), so the rule "today or later" is the api's clock. */
export const rescheduleOrderUpdate = defineUpdate<{ activate_by: string | null }, [{ activateBy: string | null; today: string }]>('rescheduleOrder');
export const cancelOrderUpdate = defineUpdate<{ status: string }, []>('cancelOrder');
/** Sandbox lab: walk the order to `finalStatus` through the realistic intermediate statuses. */
export const simulateOrderUpdate = defineUpdate<{ course: string[] }, [SimulationRequest]>('simulateOrder');
/**
 * POST /v3/order/testkit/register of an unregistered kit: the api has bound the patient to the order (a conditional
 * write); the workflow accepts the registration once, while the kit awaits it, and moves the order on. Carries the
 * user id only: patient data stays out of workflow payloads.
 */
export const registerTestkitUpdate = defineUpdate<{ status: string }, [{ userId: string; registrationId: string }]>('registerTestkit');
/** User erasure: the order's owner removes the patient data and stops (no more events about the user). */
export const erasePatientDataUpdate = defineUpdate<{ erased: true }, []>('erasePatientData');
export const labOrderStatusQuery = defineQuery<string>('labOrderStatus');

// Recorded activities, not local ones: Temporal schedules each write from a command it has recorded, so no write can
// come from a workflow task that was then lost. A local activity's can (workflows/user-deletion.ts learned it): its
// worker may write and die before the task completes, and the next worker replays the history and runs the step again
// over what the lost task wrote, which matters now that a step sends a message to a laboratory. Idempotent.
const writes = proxyActivities<LabOrderActivities>({
  startToCloseTimeout: '30 seconds',
  // Our own transient faults only (database, event store); every activity is idempotent.
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});
// Messages to a real laboratory (activities/lab-messages.ts): stored before the first send, every send the same bytes
// and control id. No ACK in the account's time, or no connection: the attempt fails naming the lab and why (the
// Temporal UI shows it on the pending activity) and is retried with backoff for as long as it takes; the order waits
// in `ordered`. The activity heartbeats while it waits for its turn on the connection and for the ACK, so a worker
// that dies mid-wait is noticed in seconds, not at the start-to-close timeout.
const labMessages = proxyActivities<LabMessageActivities>({
  startToCloseTimeout: '15 minutes',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

const DAY_MS = 86_400_000;
/** How long after its start a run waits for the api to store its order before giving up. */
export const STORE_GRACE_MS = 120_000;

/**
 * One lab order's lifecycle (id `lab-order:<orderId>`), the single owner of its order document: it announces
 * the order, waits for `activate_by` on a durable timer, dispatches it to the lab (the sandbox lab, or a real lab
 * over HL7 v2 / MLLP: activities/lab-messages.ts), then applies the lab's status updates (the sandbox simulation, or
 * a lab's results) until a terminal status. Every status change appends an
 * event (ids ascending) and publishes `labtest.order.created|updated`. Writes run one at a time.
 */
export async function labOrderWorkflow(input: LabOrderInput): Promise<{ final: string }> {
  const { orderId, order } = input;
  const method: CollectionMethod = order.method;
  /** A real laboratory's account (messages over MLLP); null: the sandbox lab. */
  const labAccountId = order.labAccountId ?? null;
  /** The real lab has accepted the order (its ACK was AA): a cancel must ask it. */
  let acceptedByLab = false;
  /** While a message is being sent to a real lab: an erasure cancels the send. */
  let labScope: CancellationScope | null = null;
  let low = order.lowLevelStatus;
  let lastEventId = order.eventIds[order.eventIds.length - 1] ?? 0;
  let activateBy = order.activateBy;
  let scheduleVersion = 0;
  let dispatchDecided = !RESCHEDULABLE.includes(low as (typeof RESCHEDULABLE)[number]);
  let cancelRequested = false;
  let erasureRequested = false;
  let erased = false;
  let cancelRecorded = false;
  let registrationRequested: string | null = null;
  let registrationRecorded = false;
  const labUpdates: { status: string; delayMs: number; simulation: SimulationRequest }[] = [];

  // One write at a time, in the order the workflow decided them: each appends the next event id to the order's
  // events, so two writes in flight could land out of order.
  let writeChain: Promise<unknown> = Promise.resolve();
  const serialized = <T>(write: () => Promise<T>): Promise<T> => {
    const next = writeChain.then(write);
    writeChain = next.catch(() => undefined);
    return next;
  };
  type RecordOptions = {
    simulation?: SimulationRequest;
    statusDetail?: string | null;
    detail?: string;
    dispatch?: boolean;
    labReference?: string;
    announce?: number[];
    storedBy?: number;
  };
  // Unserialized: for steps that run inside serialized() (a real lab's answer and its event are one step).
  const recordNow = async (status: string, extra: RecordOptions = {}) => {
    lastEventId += 1;
    low = status;
    await writes.recordOrderEvent({
      orderId,
      eventId: lastEventId,
      status: dottedStatus(method, status),
      statusDetail: extra.statusDetail ?? null,
      detail: extra.detail,
      results: RESULT_STATUSES.has(status) && extra.simulation ? extra.simulation : undefined,
      dispatch: extra.dispatch,
      labReference: extra.labReference,
      announce: extra.announce,
      storedBy: extra.storedBy,
    });
    upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.orderStatus, value: status }]);
  };
  const record = (status: string, extra: RecordOptions = {}) => serialized(() => recordNow(status, extra));
  /**
   * A real lab: sends the order (retried until the lab answers) and records its answer, in one step so that no
   * other write (a cancel) comes between. AA: `then` (requisition_created, with the lab's filler number or our
   * placer number as the reference); AE/AR, or an order the lab's message cannot carry: failed, with the lab's reason.
   */
  /**
   * A message to a real lab, cancellable: an erasure does not wait for a lab that is down (its Update handler cancels
   * the send, which then resolves null; the run erases the order, its stored messages included).
   */
  const toLab = async <T>(send: () => Promise<T>): Promise<T | null> => {
    const scope = new CancellationScope();
    labScope = scope;
    try {
      return await scope.run(send);
    } catch (err) {
      if (erasureRequested && isCancellation(err)) return null;
      throw err;
    } finally {
      labScope = null;
    }
  };
  const dispatchToRealLab = (then: (labReference: string) => Promise<void>) =>
    serialized(async () => {
      const answer = await toLab(() => labMessages.sendOrderToLab({ orderId }));
      if (!answer) return; // erased meanwhile
      if (answer.accepted) {
        acceptedByLab = true;
        await then(answer.labReference);
      } else {
        await recordNow('sample_error', { statusDetail: 'fulfillment_error', detail: answer.reason });
      }
    });
  const waitingOnSomething = () => cancelRequested || erasureRequested;

  const plannedCourse = (request: SimulationRequest) => {
    const final = lowLevelFromFinalStatus(method, request.finalStatus);
    // A course starts where the last planned update leaves the order (none are queued when accepted). Defined before
    // the handlers: an Update that arrived with the run's start is validated inside setHandler, before the lines after it.
    return final ? courseTo(method, low === 'ordered' ? 'requisition_created' : low, final) : null;
  };

  setHandler(labOrderStatusQuery, () => dottedStatus(method, low));
  setHandler(
    rescheduleOrderUpdate,
    async ({ activateBy: next }) => {
      activateBy = next;
      scheduleVersion += 1;
      if (next === null) dispatchDecided = true; // null dispatches at once: later PATCHes are refused
      await serialized(() => writes.setOrderActivateBy({ orderId, activateBy: next }));
      return { activate_by: next };
    },
    {
      validator: ({ activateBy: next, today }) => {
        if (!order.createdWithActivateBy) {
          throw refuse('This order was created without activate_by (for immediate processing) and cannot be rescheduled.');
        }
        if (dispatchDecided || cancelRequested || !RESCHEDULABLE.includes(low as (typeof RESCHEDULABLE)[number])) {
          const now = dispatchDecided && RESCHEDULABLE.includes(low as never) ? 'being dispatched to the lab' : `in status ${low}`;
          throw refuse(`activate_by can only be changed while the order's status is ordered or awaiting_registration; it is ${now}.`);
        }
        if (next !== null && next < today) throw refuse(`activate_by must be today (${today}) or later; got ${next}.`);
      },
    },
  );
  setHandler(
    cancelOrderUpdate,
    async () => {
      if (labAccountId && !cancelRequested) {
        // A real lab decides: CR cancels, UC (the specimen is being processed) refuses the cancel and the order carries
        // on. After the writes before it, so a cancel that arrives while the order is being sent waits for the lab's
        // answer to the order first. A second cancel meanwhile sends the same message (same control id): one answer.
        await serialized(async () => {
          if (!acceptedByLab || TERMINAL.has(low) || cancelRequested) return; // never reached the lab, or already decided
          const answer = await toLab(() => labMessages.sendCancelToLab({ orderId }));
          if (!answer) throw refuse("The order's patient data was erased while the lab was being asked to cancel it.");
          if (!answer.cancelled) throw refuse(`The lab could not cancel the order: ${answer.reason}`);
        });
        if (TERMINAL.has(low)) throw refuse(`The order cannot be cancelled in its current status ${dottedStatus(method, low)}.`);
      }
      cancelRequested = true;
      await condition(() => cancelRecorded); // the caller reads the cancelled order next
      return { status: dottedStatus(method, low) };
    },
    {
      validator: () => {
        if (cancelRequested) return; // a repeated cancel joins the first
        if (!CANCELLABLE[method].includes(low) || TERMINAL.has(low)) {
          throw refuse(`The order cannot be cancelled in its current status ${dottedStatus(method, low)}.`);
        }
      },
    },
  );
  setHandler(
    simulateOrderUpdate,
    (request) => {
      const course = plannedCourse(request);
      for (const status of course!) labUpdates.push({ status, delayMs: request.delaySeconds * 1000, simulation: request });
      return { course: course!.map((s) => dottedStatus(method, s)) };
    },
    {
      validator: (request) => {
        const final = lowLevelFromFinalStatus(method, request.finalStatus);
        if (!final) throw refuse(`'${request.finalStatus}' is not a status of a ${method} order.`);
        if (final === 'cancelled') throw refuse('Use POST /v3/order/{order_id}/cancel to cancel an order.');
        if (labUpdates.length) throw refuse('A simulation of this order is still running; wait for it to finish.');
        if (cancelRequested || !dispatchDecided) throw refuse(`The order is ${low}: simulate once it has been dispatched to the lab.`);
        if (!plannedCourse(request)) throw refuse(`The order cannot move from ${dottedStatus(method, low)} to ${request.finalStatus}.`);
      },
    },
  );
  setHandler(erasePatientDataUpdate, async () => {
    erasureRequested = true;
    labScope?.cancel();
    await condition(() => erased);
    return { erased: true as const };
  });
  setHandler(
    registerTestkitUpdate,
    async ({ userId, registrationId }) => {
      registrationRequested = registrationId;
      upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.userId, value: userId }]);
      await condition(() => registrationRecorded || waitingOnSomething()); // the caller reads the registered order next
      return { status: dottedStatus(method, low) };
    },
    {
      validator: ({ registrationId }) => {
        if (registrationRequested === registrationId) return; // a retried registration joins the first
        if (registrationRequested) throw refuse('This kit is already registered.');
        if (low !== 'awaiting_registration' || cancelRequested || erasureRequested) {
          throw refuse(`The kit cannot be registered: its order is ${dottedStatus(method, cancelRequested ? 'cancelled' : low)}.`);
        }
      },
    },
  );

  // new Date() is workflow time here (deterministic on replay).
  const msUntilActivation = (date: string) => (Date.parse(`${date}T00:00:00Z`) - new Date().getTime()) * input.activationTimeScale;

  // Announce what the api stored (created, then any registration events); publishing is idempotent by event.
  // An order due now is announced, sent to the lab and recorded as requisition_created in one step.
  const [firstEvent, ...laterEvents] = order.eventIds;
  const dueNow = !dispatchDecided && laterEvents.length === 0 && (activateBy === null || msUntilActivation(activateBy) <= 0);
  // The api starts the workflow, then stores the order: if it is not stored within this, the request failed.
  const storedBy = workflowInfo().startTime.getTime() + (input.storeGraceMs ?? STORE_GRACE_MS);
  try {
    if (dueNow && labAccountId) {
      dispatchDecided = true;
      await serialized(() => writes.publishOrderEvent({ orderId, eventId: firstEvent, storedBy }));
      await dispatchToRealLab((labReference) => recordNow('requisition_created', { labReference }));
    } else if (dueNow) {
      dispatchDecided = true;
      await record('requisition_created', { dispatch: true, announce: [firstEvent], storedBy });
    } else {
      await serialized(() => writes.publishOrderEvent({ orderId, eventId: firstEvent, storedBy }));
    }
  } catch (err) {
    if (!(err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.type === ORDER_NEVER_STORED)) throw err;
    // Failed (not completed), so a resumed request may start this id again (ALLOW_DUPLICATE_FAILED_ONLY).
    throw ApplicationFailure.create({
      type: ORDER_NEVER_STORED,
      message: `Order ${orderId} was never stored; the request that started this run failed`,
      nonRetryable: true,
    });
  }
  for (const eventId of laterEvents) {
    await serialized(() => writes.publishOrderEvent({ orderId, eventId }));
  }

  // An unregistered kit (POST /v3/order/testkit) ships now and waits in awaiting_registration, without a requisition,
  // until it is registered (then requisition_created and testkit_registered, as a kit registered at once), cancelled
  // or erased.
  if (low === 'awaiting_registration') {
    // A real lab gets the order once the kit is registered (its patient is known then).
    if (!labAccountId) await serialized(() => writes.dispatchOrderToLab({ orderId }));
    await condition(() => registrationRequested !== null || waitingOnSomething());
    if (!waitingOnSomething() && labAccountId) {
      await dispatchToRealLab(async (labReference) => {
        await recordNow('requisition_created', { labReference });
        await recordNow('testkit_registered');
      });
    } else if (!waitingOnSomething()) {
      await record('requisition_created');
      await record('testkit_registered');
    }
    registrationRecorded = true;
  }

  // Scheduled activation: wait for activate_by (00:00 UTC of that date) unless rescheduled, cleared or cancelled.
  while (!dispatchDecided && !waitingOnSomething() && activateBy !== null) {
    const waitMs = msUntilActivation(activateBy);
    if (waitMs <= 0) break;
    const seen = scheduleVersion;
    const cappedMs = Math.min(waitMs, 30 * DAY_MS);
    const interrupted = await condition(() => scheduleVersion !== seen || waitingOnSomething() || dispatchDecided, cappedMs);
    // The date has arrived, unless a PATCH landed in the same instant (then its new date decides).
    if (!interrupted && cappedMs === waitMs && scheduleVersion === seen) break;
  }
  if (!dueNow && !waitingOnSomething() && !TERMINAL.has(low)) {
    if (RESCHEDULABLE.includes(low as never) && labAccountId) {
      dispatchDecided = true;
      await dispatchToRealLab((labReference) => recordNow('requisition_created', { labReference }));
    } else if (RESCHEDULABLE.includes(low as never)) {
      dispatchDecided = true;
      await record('requisition_created', { dispatch: true }); // sent to the lab and recorded in one write
    } else if (labAccountId) {
      // A registered kit: the api recorded its requisition with the registration; the lab still needs it.
      await dispatchToRealLab((labReference) => writes.dispatchOrderToLab({ orderId, labReference }));
    } else {
      await serialized(() => writes.dispatchOrderToLab({ orderId }));
    }
  }
  dispatchDecided = true;

  // With the lab: apply its status updates (sandbox: the simulation's course) until a terminal status.
  while (!TERMINAL.has(low) || labUpdates.length > 0) {
    await condition(() => labUpdates.length > 0 || waitingOnSomething());
    if (waitingOnSomething()) break;
    const next = labUpdates[0];
    if (next.delayMs > 0 && (await condition(waitingOnSomething, next.delayMs))) break;
    labUpdates.shift();
    const reached = next.status === lowLevelFromFinalStatus(method, next.simulation.finalStatus);
    await record(next.status, { simulation: next.simulation, statusDetail: reached ? (next.simulation.statusDetail ?? null) : null });
    if (RESULT_STATUSES.has(next.status) && next.simulation.interpretation === 'critical') {
      await serialized(() => writes.publishCriticalResult({ orderId }));
    }
  }
  labUpdates.length = 0;

  if (erasureRequested) {
    await serialized(() => writes.eraseOrderPatientData({ orderId }));
    erased = true;
    return { final: 'erased' };
  }
  if (cancelRequested && !TERMINAL.has(low)) {
    // A real lab has answered the cancel already (the Update's handler); the sandbox lab is told here.
    if (!labAccountId) await serialized(() => writes.cancelOrderAtLab({ orderId }));
    await record('cancelled');
    cancelRecorded = true;
  }
  // Let update handlers that are waiting on this outcome return before the run closes.
  await condition(() => true);
  return { final: dottedStatus(method, low) };
}

export interface LabOrderCorrectionInput {
  orderId: string;
  method: CollectionMethod;
  /** The order's last event id (its workflow has ended: nothing else appends). */
  lastEventId: number;
  results: SimulationRequest;
}

/**
 * A lab's correction of an order whose workflow has ended (completed or corrected): a short run under the same
 * workflow id (so still one owner at a time) that records `corrected` with the corrected results through the
 * same activity as the main run, and raises labtest.result.critical when they are critical.
 */
export async function labOrderCorrectionWorkflow(input: LabOrderCorrectionInput): Promise<{ final: string }> {
  const status = dottedStatus(input.method, 'corrected');
  await writes.recordOrderEvent({ orderId: input.orderId, eventId: input.lastEventId + 1, status, statusDetail: null, results: input.results });
  upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.orderStatus, value: 'corrected' }]);
  if (input.results.interpretation === 'critical') await writes.publishCriticalResult({ orderId: input.orderId });
  return { final: status };
}
