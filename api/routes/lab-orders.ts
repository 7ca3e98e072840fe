import { Type } from '@sinclair/typebox';
import { ApiError, notFound, ValidationError } from '../../lib/platform/errors';
import { renderRequisition, renderResultsReport, resultsView } from '../../lib/labs/documents';
import { checkSignedDocumentUrl, DOCUMENT_URL_KEY } from '../../lib/labs/signed-urls';
import { orderListJson, requisitionPath, transactionStatus } from '../../lib/labs/order-view';
import { decodeCursor, encodeCursor } from '../cursors';
import { isoWithOffset, todayUtc } from '../../lib/platform/time';
import { ErrorDetail, HTTPValidationError, Uuid } from '../../schemas/common';
import {
  ClientFacingOrder,
  CreateOrderBody,
  LabResultsRaw,
  ListOrdersQuery,
  OrderIdParams,
  OrderList,
  PatchOrderBody,
  PatchOrderResponse,
  PostOrderResponse,
  RegisterTestkitBody,
  ResultMetadata,
  SignedDocumentQuery,
  SimulateOrderBody,
  SimulateOrderQuery,
  SimulationResponse,
  UnregisteredTestkitBody,
} from '../../schemas/lab-order';
import { dottedStatus } from '../../lib/labs/statuses';
import { defineRoute, type Reply } from '../route';
import type { AppDeps } from '../deps';
import { createOrder, orderRedraw, orderUnregisteredTestkit, registerTestkit } from '../../lib/labs/order-creation';
import { cancelOrder, findOrder, orderViews, rescheduleOrder, simulateOrder } from '../../lib/labs/workflow-client';
import type { IdempotentOutcome } from '../../lib/platform/idempotency';

const tags = ['Lab orders'];
const errors = {
  400: { description: "Not allowed in the order's current status (the message names the rule)", schema: ErrorDetail },
  404: { description: 'Unknown order', schema: ErrorDetail },
  422: { description: 'Validation error', schema: HTTPValidationError },
};
const pdf = (description: string) => ({ description, contentType: 'application/pdf' });

/** The answers of a request creating an order under an optional X-Idempotency-Key. */
const newOrderResponses = {
  200: { description: 'The new order', schema: PostOrderResponse },
  400: { description: 'The idempotency key was used with another body', schema: ErrorDetail },
  409: { description: 'A request with the same idempotency key is in progress', schema: ErrorDetail },
  422: errors[422],
};

const idempotentReply = (o: IdempotentOutcome): Reply => ({ status: o.status, body: o.body, headers: o.replayed ? { 'Idempotent-Replayed': 'true' } : {} });

const dateBound = (value: string | undefined, endOfDay: boolean, field: string): Date | undefined => {
  if (!value) return undefined;
  const d = new Date(/^\d{4}-\d{2}-\d{2}$/.test(value) ? `${value}T${endOfDay ? '23:59:59.999' : '00:00:00'}Z` : value);
  if (Number.isNaN(d.getTime()))
    throw ValidationError.field(['query', field], `'${value}' is not a date (YYYY-mm-dd) or ISO 8601 date-time.`, 'datetime_parsing');
  return d;
};

/** `patient_name` as the blind index's tokens (blind-index.ts); a name without letters is a 422. */
async function patientNameTokens(deps: AppDeps, teamId: string, name: string | undefined): Promise<string[] | undefined> {
  if (name === undefined) return undefined;
  const tokens = await deps.repos.labOrders.names.searchTokens(teamId, name);
  if (!tokens.length) throw ValidationError.field(['query', 'patient_name'], `'${name}' holds no name (letters).`, 'value_error.patient_name');
  return tokens;
}

/** Where the next page of `GET /v3/orders` starts, and the count the first page made. */
type OrderListCursor = { after: string; total: number; page: number };

export const labOrderRoutes = [
  defineRoute({
    operationId: 'createOrder',
    method: 'post',
    path: '/v3/order',
    summary: 'Create a lab order',
    description:
      'Orders the tests of `order_set.lab_test_ids` (deprecated `lab_test_id` still accepted) for a user of your team. ' +
      'With `activate_by` the order waits in `ordered` until that date (00:00 UTC), then goes to the lab. ' +
      'Send `X-Idempotency-Key` to make retries safe: the same key replays the first response for 24 h; a concurrent duplicate is a 409.',
    tags,
    auth: 'team',
    body: CreateOrderBody,
    responses: newOrderResponses,
    async handler({ body, auth, deps, ctx, requestId }) {
      return idempotentReply(await createOrder(deps, auth.teamId, body, ctx.get('x-idempotency-key') || undefined, requestId));
    },
  }),
  defineRoute({
    operationId: 'createUnregisteredTestkitOrder',
    method: 'post',
    path: '/v3/order/testkit',
    summary: 'Order an unregistered test kit',
    description:
      'Ships a test kit to `shipping_details` without a patient: the order waits in `received.testkit.awaiting_registration` (no requisition, ' +
      "no results) until `POST /v3/order/testkit/register` names its `sample_id` (the kit's barcode, on the order), which binds the patient " +
      '(and its `user_id`) to this order; it then moves on to `received.testkit.testkit_registered` as any registered kit. ' +
      'Webhooks as for other orders. `X-Idempotency-Key` as on POST /v3/order.',
    tags,
    auth: 'team',
    body: UnregisteredTestkitBody,
    responses: newOrderResponses,
    async handler({ body, auth, deps, ctx, requestId }) {
      return idempotentReply(await orderUnregisteredTestkit(deps, auth.teamId, body, ctx.get('x-idempotency-key') || undefined, requestId));
    },
  }),
  defineRoute({
    operationId: 'registerTestkit',
    method: 'post',
    path: '/v3/order/testkit/register',
    summary: 'Register a test kit',
    description:
      "Registers the kit with barcode `sample_id` to a user: the new order's events run up to `received.testkit.testkit_registered`. " +
      'A kit ordered with POST /v3/order/testkit (awaiting registration) gets this patient on its own order instead. ' +
      'A sample_id can be registered once (also when two registrations race). The street / street_number address form is accepted.',
    tags,
    auth: 'team',
    body: RegisterTestkitBody,
    responses: {
      200: { description: 'The registered order', schema: PostOrderResponse },
      400: { description: 'sample_id already registered', schema: ErrorDetail },
      422: errors[422],
    },
    async handler({ body, auth, deps, ctx, requestId }) {
      return idempotentReply(await registerTestkit(deps, auth.teamId, body, ctx.get('x-idempotency-key') || undefined, requestId));
    },
  }),
  defineRoute({
    operationId: 'listOrders',
    method: 'get',
    path: '/v3/orders',
    summary: 'List orders',
    description:
      "Your team's orders, newest first, from the order store (not Temporal). Filters: user_id, status (low-level, repeatable), " +
      'interpretation, order_activation_types (current | scheduled), start_date / end_date (created), order_ids, order_transaction_id, ' +
      "patient_name (every word of it, whole words, case and accents aside), search_input (an order, sample or user id, or the patient's name). " +
      'Names are encrypted at rest: they are matched through a keyed blind index of their words (README "Lab testing"). ' +
      'Pages by `page`/`size`, or follow `next_cursor`. Orders are listed in id order, which is creation order: ids are time-ordered ' +
      'UUIDs (v7); orders that earlier versions stored with random (v4) ids keep them and sort among the others by id.',
    tags,
    auth: 'team',
    query: ListOrdersQuery,
    responses: { 200: { description: 'A page of orders', schema: OrderList }, 422: errors[422] },
    async handler({ query, auth, deps }) {
      const activation = query.order_activation_types?.length === 1 ? query.order_activation_types[0] : undefined;
      const cursor = decodeCursor<OrderListCursor>(query.next_cursor, { after: 'string', total: 'number', page: 'number' });
      const page = cursor?.page ?? query.page;
      const {
        orders,
        more,
        total: counted,
      } = await deps.repos.labOrders.list(
        {
          teamId: auth.teamId,
          userId: query.user_id,
          lowLevelStatuses: query.status,
          interpretation: query.is_critical ? 'critical' : query.interpretation,
          methods: query.order_type,
          activation,
          today: todayUtc(),
          createdFrom: dateBound(query.start_date, false, 'start_date'),
          createdTo: dateBound(query.end_date, true, 'end_date'),
          orderIds: query.order_ids,
          orderTransactionId: query.order_transaction_id,
          patientNameTokens: await patientNameTokens(deps, auth.teamId, query.patient_name),
          search:
            query.search_input === undefined
              ? undefined
              : { text: query.search_input, nameTokens: await deps.repos.labOrders.names.searchTokens(auth.teamId, query.search_input) },
          direction: query.order_direction === 'asc' ? 1 : -1,
        },
        // The spec's `page` skips along the index; a cursor starts right after its order and reuses the first count.
        // A search_input list (few matches, sorted in memory) pages by skip, its cursor too.
        cursor && query.search_input !== undefined
          ? { skip: (page - 1) * query.size, size: query.size, countTotal: false, knownTotal: cursor.total }
          : cursor
            ? { after: cursor.after, skip: 0, size: query.size, countTotal: false, knownTotal: cursor.total }
            : { skip: (query.page - 1) * query.size, size: query.size, countTotal: true },
      );
      const total = counted ?? cursor!.total;
      const last = orders[orders.length - 1];
      const next_cursor = more ? encodeCursor({ after: last._id, total, page: page + 1 } satisfies OrderListCursor) : null;
      // Written as JSON here (lib/labs/order-view.ts orderListJson: each test's markers serialised once).
      const body = orderListJson(await orderViews(deps).presentAll(orders), { total, page, size: query.size, next_cursor });
      return { body, contentType: 'application/json' };
    },
  }),
  defineRoute({
    operationId: 'getOrder',
    method: 'get',
    path: '/v3/order/{order_id}',
    summary: 'Get an order',
    tags,
    auth: 'team',
    params: OrderIdParams,
    responses: { 200: { description: 'The order', schema: ClientFacingOrder }, 404: errors[404], 422: errors[422] },
    async handler({ params, auth, deps }) {
      return { body: await orderViews(deps).present(await findOrder(deps, auth.teamId, params.order_id)) };
    },
  }),
  defineRoute({
    operationId: 'updateOrder',
    method: 'patch',
    path: '/v3/order/{order_id}',
    summary: 'Reschedule or release an order',
    description:
      'Changes `activate_by` of an order created with one: a date must be today or later; null clears it and dispatches the order at once. ' +
      'Only while the low-level status is ordered or awaiting_registration; each refusal is a 400 naming the rule.',
    tags,
    auth: 'team',
    params: OrderIdParams,
    body: PatchOrderBody,
    responses: { 200: { description: 'Updated', schema: PatchOrderResponse }, 400: errors[400], 404: errors[404], 422: errors[422] },
    async handler({ params, body, auth, deps }) {
      const doc = await rescheduleOrder(deps, await findOrder(deps, auth.teamId, params.order_id), body.activate_by);
      return {
        body: {
          order: { id: doc._id, team_id: doc.team_id, user_id: doc.user_id, activate_by: doc.activate_by, status: doc.status },
          status: 'success',
          message: 'order updated',
        },
      };
    },
  }),
  defineRoute({
    operationId: 'cancelOrder',
    method: 'post',
    path: '/v3/order/{order_id}/cancel',
    summary: 'Cancel an order',
    description: "Allowed before a kit ships or a sample is processed (the reference's cancellable statuses); otherwise a 400 naming the current status.",
    tags,
    auth: 'team',
    params: OrderIdParams,
    responses: { 200: { description: 'Cancelled', schema: PostOrderResponse }, 400: errors[400], 404: errors[404] },
    async handler({ params, auth, deps }) {
      const doc = await cancelOrder(deps, await findOrder(deps, auth.teamId, params.order_id));
      return { body: { order: await orderViews(deps).present(doc), status: 'success', message: 'Order cancelled' } };
    },
  }),
  defineRoute({
    operationId: 'simulateOrder',
    method: 'post',
    path: '/v3/order/{order_id}/test',
    summary: 'Simulate lab updates (sandbox)',
    description:
      'Sandbox only (404 in production): walks the order through the realistic intermediate statuses to `final_status`, `delay` seconds apart, ' +
      'including failure branches; reaching completion produces results shaped by `interpretation` and `has_missing_results`.',
    tags,
    auth: 'team',
    params: OrderIdParams,
    query: SimulateOrderQuery,
    body: SimulateOrderBody,
    responses: { 200: { description: 'Accepted', schema: SimulationResponse }, 400: errors[400], 404: errors[404], 422: errors[422] },
    async handler({ params, query, body, auth, deps }) {
      if (deps.config.DEPLOYMENT_ENVIRONMENT === 'production') throw notFound('Not found.');
      const doc = await findOrder(deps, auth.teamId, params.order_id);
      const finalStatus = query.final_status ?? `completed.${doc.method}.completed`;
      await simulateOrder(deps, doc, {
        finalStatus,
        delaySeconds: query.delay,
        interpretation: body.interpretation ?? 'normal',
        hasMissingResults: body.has_missing_results ?? false,
      });
      // The reference answers a bare JSON string ("Success"); its SDK types the body as Any, so an object that says
      // what was accepted parses as well.
      const detail = `Simulating order ${doc._id} to ${finalStatus}, one status every ${query.delay} s; follow its labtest.order.updated events.`;
      return { body: { success: true as const, order_id: doc._id, final_status: finalStatus, delay: query.delay, detail } };
    },
  }),
  defineRoute({
    operationId: 'requestRedraw',
    method: 'post',
    path: '/v3/order/{order_id}/redraw',
    summary: 'Order a redraw',
    description:
      'After a sample failure (sample_error, redraw_available): a new order with origin `redraw` in the same order transaction; at most one per transaction.',
    tags,
    auth: 'team',
    params: OrderIdParams,
    responses: { 200: { description: 'The redraw order', schema: PostOrderResponse }, 400: errors[400], 404: errors[404] },
    async handler({ params, auth, deps, requestId }) {
      return { body: await orderRedraw(deps, auth.teamId, params.order_id, requestId) };
    },
  }),
  defineRoute({
    operationId: 'getOrderResult',
    method: 'get',
    path: '/v3/order/{order_id}/result',
    summary: 'Get results',
    tags,
    auth: 'team',
    params: OrderIdParams,
    responses: { 200: { description: 'Results', schema: LabResultsRaw }, 404: { description: 'Unknown order, or no results yet', schema: ErrorDetail } },
    async handler({ params, auth, deps }) {
      return { body: await resultsView(deps, await findOrder(deps, auth.teamId, params.order_id)) };
    },
  }),
  defineRoute({
    operationId: 'getOrderResultMetadata',
    method: 'get',
    path: '/v3/order/{order_id}/result/metadata',
    summary: 'Get result metadata',
    tags,
    auth: 'team',
    params: OrderIdParams,
    responses: { 200: { description: 'Metadata', schema: ResultMetadata }, 404: { description: 'Unknown order, or no results yet', schema: ErrorDetail } },
    async handler({ params, auth, deps }) {
      return { body: (await resultsView(deps, await findOrder(deps, auth.teamId, params.order_id))).metadata };
    },
  }),
  defineRoute({
    operationId: 'getOrderResultPdf',
    method: 'get',
    path: '/v3/order/{order_id}/result/pdf',
    summary: 'Get results as PDF',
    tags,
    auth: 'team',
    params: OrderIdParams,
    responses: { 200: pdf('The laboratory report'), 404: { description: 'Unknown order, or no results yet', schema: ErrorDetail } },
    async handler({ params, auth, deps }) {
      const doc = await findOrder(deps, auth.teamId, params.order_id);
      return {
        body: await renderResultsReport(deps, doc),
        contentType: 'application/pdf',
        headers: { 'Content-Disposition': `inline; filename="results-${doc._id}.pdf"` },
      };
    },
  }),
  defineRoute({
    operationId: 'getOrderRequisitionPdf',
    method: 'get',
    path: '/v3/order/{order_id}/requisition/pdf',
    summary: 'Get the requisition PDF',
    tags,
    auth: 'team',
    params: OrderIdParams,
    responses: { 200: pdf('The requisition form'), 404: errors[404] },
    async handler({ params, auth, deps }) {
      const doc = await findOrder(deps, auth.teamId, params.order_id);
      return {
        body: await renderRequisition(deps, doc),
        contentType: 'application/pdf',
        headers: { 'Content-Disposition': `inline; filename="requisition-${doc._id}.pdf"` },
      };
    },
  }),
  defineRoute({
    operationId: 'getSignedRequisitionPdf',
    method: 'get',
    path: '/v3/order/{order_id}/requisition/pdf/signed',
    summary: 'Requisition PDF by signed link',
    description: 'The target of `requisition_form_url` (deprecated): no API key; the link is valid 7 days and refused if altered or expired.',
    tags,
    auth: 'none',
    params: OrderIdParams,
    query: SignedDocumentQuery,
    responses: { 200: pdf('The requisition form'), 403: { description: 'Altered or expired link', schema: ErrorDetail }, 404: errors[404] },
    async handler({ params, query, deps }) {
      const key = await deps.repos.secrets.key(DOCUMENT_URL_KEY);
      const check = checkSignedDocumentUrl(requisitionPath(params.order_id), query.expires, query.signature, key);
      if (check === 'invalid') throw new ApiError(403, 'This link is not valid (it was altered). Ask for a new requisition_form_url.');
      if (check === 'expired') throw new ApiError(403, 'This link has expired. GET the order again for a fresh requisition_form_url.');
      const doc = await deps.repos.labOrders.findById(params.order_id);
      if (!doc) throw notFound(`Order ${params.order_id} not found.`);
      return { body: await renderRequisition(deps, doc), contentType: 'application/pdf', headers: { 'Cache-Control': 'private, no-store' } };
    },
  }),
  defineRoute({
    operationId: 'getOrderTransaction',
    method: 'get',
    path: '/v3/order_transaction/{transaction_id}',
    summary: 'Get an order transaction',
    description: 'An initial order and its redraw, if any.',
    tags,
    auth: 'team',
    params: Type.Object({ transaction_id: Uuid() }),
    responses: { 200: { description: 'The transaction' }, 404: errors[404] },
    async handler({ params, auth, deps }) {
      const orders = await deps.repos.labOrders.transactionOrders(auth.teamId, params.transaction_id);
      if (!orders.length) throw notFound(`Order transaction ${params.transaction_id} not found.`);
      return {
        body: {
          id: params.transaction_id,
          team_id: auth.teamId,
          status: transactionStatus(orders),
          orders: orders.map((o) => ({
            id: o._id,
            origin: o.origin,
            parent_id: o.parent_id,
            last_status: dottedStatus(o.method, o.low_level_status),
            last_status_created_at: isoWithOffset(o.low_level_status_created_at),
            created_at: isoWithOffset(o.created_at),
            updated_at: isoWithOffset(o.updated_at),
          })),
        },
      };
    },
  }),
];
