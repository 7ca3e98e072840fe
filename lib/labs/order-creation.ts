import { ApiError, badRequest, ValidationError } from '../platform/errors';
import { timeOrderedNameBasedUuid } from '../platform/keys';
import type { CreateOrderBody, RegisterTestkitBody, UnregisteredTestkitBody } from '../../schemas/lab-order';

import type { LabOrderDoc } from './model';
import { orderFromCreateRequest, orderFromRegistration, orderFromUnregisteredTestkit, redrawRequest } from './order-requests';
import { REDRAWABLE } from './statuses';
import { acceptKitRegistration, findOrder, newSampleId, orderViews, startAndStoreOrder, type LabOrderDeps } from './workflow-client';
import { crashPoint } from '../platform/failpoints';
import { withIdempotencyKey, type IdempotentOutcome } from '../platform/idempotency';

/**
 * New orders: `POST /v3/order`, `POST /v3/order/testkit` (a kit not yet registered), `POST /v3/order/testkit/register`
 * and a redraw. Each builds the order document from the request (order-requests.ts: the rules, 422s), starts its
 * workflow and stores it (workflow-client.ts), and answers with the order as the API shows it; all but the redraw
 * are idempotent by `X-Idempotency-Key`. Registering the kit of an unregistered order binds the patient to it.
 */

/** Stores a new order under its workflow; a clashing generated sample id (1 in 10^10) gets a new one. */
async function storeNewOrder(deps: LabOrderDeps, build: (sampleId: string) => Promise<LabOrderDoc>, requestId: string): Promise<LabOrderDoc> {
  for (let attempt = 0; ; attempt++) {
    const doc = await build(newSampleId());
    const stored = await startAndStoreOrder(deps, doc, requestId);
    if ('stored' in stored) return stored.stored;
    if (attempt >= 2) throw new ApiError(503, 'Could not allocate a sample id; retry the request.');
  }
}

export function createOrder(
  deps: LabOrderDeps,
  teamId: string,
  body: CreateOrderBody,
  idempotencyKey: string | undefined,
  requestId: string,
): Promise<IdempotentOutcome> {
  return withIdempotencyKey(deps, teamId, 'POST /v3/order', idempotencyKey, body, async (orderId) => {
    const doc = await storeNewOrder(deps, (sampleId) => orderFromCreateRequest(deps, teamId, body, orderId, sampleId), requestId);
    return { status: 200, body: { order: await orderViews(deps).present(doc), status: 'success', message: 'Order created successfully' } };
  });
}

export function orderUnregisteredTestkit(
  deps: LabOrderDeps,
  teamId: string,
  body: UnregisteredTestkitBody,
  idempotencyKey: string | undefined,
  requestId: string,
): Promise<IdempotentOutcome> {
  return withIdempotencyKey(deps, teamId, 'POST /v3/order/testkit', idempotencyKey, body, async (orderId) => {
    const doc = await storeNewOrder(deps, (sampleId) => orderFromUnregisteredTestkit(deps, teamId, body, orderId, sampleId), requestId);
    return { status: 200, body: { order: await orderViews(deps).present(doc), status: 'success', message: 'Order created successfully' } };
  });
}

export function registerTestkit(
  deps: LabOrderDeps,
  teamId: string,
  body: RegisterTestkitBody,
  idempotencyKey: string | undefined,
  requestId: string,
): Promise<IdempotentOutcome> {
  return withIdempotencyKey(deps, teamId, 'POST /v3/order/testkit/register', idempotencyKey, body, async (orderId) => {
    const doc = await orderFromRegistration(deps, teamId, body, orderId);
    // A kit ordered unregistered (POST /v3/order/testkit) has its order: the registration binds to it.
    const kit = await deps.repos.labOrders.findBySample(teamId, body.sample_id);
    if (kit && (kit.low_level_status === 'awaiting_registration' || kit.registration_id === orderId)) {
      const bound = await bindKitRegistration(deps, kit, doc, body.lab_test_id, orderId);
      return { status: 200, body: { order: await orderViews(deps).present(bound), status: 'success', message: 'Test kit registered successfully' } };
    }
    const stored = await startAndStoreOrder(deps, doc, requestId);
    if (!('stored' in stored)) {
      throw badRequest(
        `sample_id '${body.sample_id}' is already registered${stored.sample_taken ? ` (order ${stored.sample_taken._id})` : ''}; each kit can be registered once.`,
      );
    }
    return { status: 200, body: { order: await orderViews(deps).present(stored.stored), status: 'success', message: 'Test kit registered successfully' } };
  });
}

/**
 * Binds a registration to an unregistered kit's order: writes the patient onto the order (one conditional write,
 * which settles racing registrations), then has the order's workflow accept it (an Update; it refuses when the
 * order was cancelled meanwhile, and then the patient is taken off again). `registrationId` is the request's
 * resource id, the same for a retry under one X-Idempotency-Key, which resumes where the first attempt stopped.
 */
async function bindKitRegistration(
  deps: LabOrderDeps,
  kit: LabOrderDoc,
  registration: LabOrderDoc,
  labTestId: string | undefined,
  registrationId: string,
): Promise<LabOrderDoc> {
  const orders = deps.repos.labOrders;
  if (kit.registration_id === registrationId && kit.low_level_status !== 'awaiting_registration') return kit; // done before
  if (labTestId && !kit.lab_test_ids.includes(labTestId)) {
    throw ValidationError.field(
      ['body', 'lab_test_id'],
      `Kit '${kit.sample_id}' is for lab test '${kit.lab_test.id}', not '${labTestId}'; leave lab_test_id out.`,
      'value_error.lab_test_id',
    );
  }
  const { user_id, patient_details, patient_address, physician, consents, health_insurance_id } = registration;
  if (!(await orders.bindRegistration(kit, registrationId, { user_id, patient_details, patient_address, physician, consents, health_insurance_id }))) {
    throw badRequest(`sample_id '${kit.sample_id}' is already registered (order ${kit._id}); each kit can be registered once.`);
  }
  // A crash here leaves the patient bound and the workflow not told: the sweeper finishes it (finishBoundRegistration).
  crashPoint('testkit.registration-bound');
  await finishBoundRegistration(deps, kit, user_id, registrationId);
  return (await orders.findById(kit._id))!;
}

/**
 * Has the kit's workflow take a registration already bound to its order (an Update; refused when the order was
 * cancelled meanwhile, and then the patient is taken off again), then clears the order's pending mark. Repeatable:
 * the request does it, and the sweeper for a request that crashed in between.
 */
export async function finishBoundRegistration(deps: LabOrderDeps, kit: LabOrderDoc, userId: string, registrationId: string): Promise<void> {
  const orders = deps.repos.labOrders;
  try {
    const { status } = await acceptKitRegistration(deps, kit, userId, registrationId);
    if (!status.endsWith('.testkit_registered')) throw badRequest(`The kit cannot be registered: its order is ${status}.`);
  } catch (err) {
    if (err instanceof ApiError && err.status === 400) await orders.releaseRegistration(kit, registrationId);
    throw err;
  }
  await orders.registrationSettled(kit._id, registrationId);
}

/** After a sample failure: a new order in the same order transaction (at most one per transaction). */
export async function orderRedraw(deps: LabOrderDeps, teamId: string, orderId: string, requestId: string) {
  const parent = await findOrder(deps, teamId, orderId);
  if (!REDRAWABLE.has(parent.low_level_status)) {
    throw badRequest(`A redraw can be ordered after a sample failure (sample_error, redraw_available); this order is ${parent.low_level_status}.`);
  }
  const siblings = await deps.repos.labOrders.transactionOrders(teamId, parent.order_transaction_id);
  const existing = siblings.find((o) => o.origin === 'redraw');
  if (existing) throw badRequest(`This order transaction already has its redraw (order ${existing._id}); at most one redraw per transaction.`);
  // One redraw id per transaction: racing redraw requests insert the same `_id` and get the same order. It is
  // time-ordered on the parent's failure (a moment the racers agree on), so lists place it there.
  const failedAt = parent.events[parent.events.length - 1].created_at;
  const redrawId = timeOrderedNameBasedUuid(new Date(failedAt).getTime(), ['redraw', parent.order_transaction_id]);
  // The parent's workflow has ended (a redrawable status is final), so the api is its only writer now.
  await deps.repos.labOrders.setFields(parent._id, { redraw_order_id: redrawId });
  const body = redrawRequest(parent);
  const doc = await storeNewOrder(deps, (sampleId) => orderFromCreateRequest(deps, teamId, body, redrawId, sampleId, parent), requestId);
  return { order: await orderViews(deps).present(doc), status: 'success', message: 'Redraw ordered' };
}
