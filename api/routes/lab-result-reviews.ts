import { ApiError, notFound } from '../../lib/platform/errors';
import { isoWithOffset } from '../../lib/platform/time';
import { Hl7Refusal } from '../../lib/labs/hl7-oru';
import { applyReviewToOrder, OrderErased, publishReviewEvent, reviewEventData } from '../../lib/labs/lab-results-apply';
import type { LabResultReviewDoc } from '../../lib/labs/lab-reviews-store';
import { OrderRefusedUpdate } from '../../lib/labs/result-intake';
import { audited } from '../../lib/tenancy/audit';
import { LabResultReview, LabResultReviewMatchBody, LabResultReviewPage, LabResultReviewParams, LabResultReviewQuery } from '../../schemas/lab-result-reviews';
import { OrgEnvRegionParams } from '../../schemas/management';
import type { AppDeps } from '../deps';
import type { ManagementPrincipal } from '../middleware/auth';
import { defineRoute } from '../route';
import { assertThisDeployment, conflict, managementErrors as errors, otherDeployment } from '../management-scope';

/**
 * The review inbox (`/v1/org/{org_id}/lab_result_review/{environment}/{region}`): results a lab sent over MLLP that
 * match no order of the organisation, never dropped and never guessed onto an order. An operator matches one to an
 * order (its results then go to that order exactly as a matching message's would) or rejects it (nothing changes).
 * They hold patient data of any of the organisation's teams: org keys only. Matching and rejecting are audited.
 */
const tags = ['Management: lab result reviews'];
const path = '/v1/org/{org_id}/lab_result_review/{environment}/{region}';
const itemPath = `${path}/{review_id}`;

const reviewView = (r: LabResultReviewDoc) => ({
  ...reviewEventData(r),
  patient: r.patient,
  matched_team_id: r.matched_team_id,
  resolved_by: r.resolved_by,
  resolved_at: r.resolved_at && isoWithOffset(r.resolved_at),
});

async function reviewOf(deps: AppDeps, auth: ManagementPrincipal, params: { environment: string; region: string; review_id: string }) {
  const review = await deps.repos.labReviews.find(auth.orgId, params.review_id);
  if (!review || review.environment !== params.environment || review.region !== params.region)
    throw notFound(`Lab result review ${params.review_id} not found in this organisation.`);
  return review;
}

/** The review's new state to the organisation's teams (idempotent per review and change). */
const announce = (deps: AppDeps, review: LabResultReviewDoc, change: 'matched' | 'rejected') =>
  publishReviewEvent({ ...deps, logger: deps.logger }, review, change);

export const labResultReviewRoutes = [
  defineRoute({
    operationId: 'listLabResultReviews',
    method: 'get',
    path,
    summary: 'List lab result reviews',
    description: 'Results labs sent that matched no order, newest first; filter by `status`, page with `next_cursor`. Needs an org management key.',
    tags,
    auth: 'management',
    params: OrgEnvRegionParams,
    query: LabResultReviewQuery,
    responses: { 200: { description: 'A page of reviews', schema: LabResultReviewPage }, ...otherDeployment, ...errors },
    async handler({ auth, params, query, deps }) {
      auth.assertOrgAdmin('Reading lab result reviews');
      assertThisDeployment(deps, params.environment, params.region);
      const page = await deps.repos.labReviews.list(
        auth.orgId,
        { environment: params.environment, region: params.region, status: query.status },
        { after: query.next_cursor, size: query.limit + 1 },
      );
      const data = page.slice(0, query.limit);
      return { body: { data: data.map(reviewView), next_cursor: page.length > query.limit ? data[data.length - 1]._id : null } };
    },
  }),
  defineRoute({
    operationId: 'getLabResultReview',
    method: 'get',
    path: itemPath,
    summary: 'Get a lab result review',
    tags,
    auth: 'management',
    params: LabResultReviewParams,
    responses: { 200: { description: 'The review', schema: LabResultReview }, ...otherDeployment, ...errors },
    async handler({ auth, params, deps }) {
      auth.assertOrgAdmin('Reading lab result reviews');
      assertThisDeployment(deps, params.environment, params.region);
      return { body: reviewView(await reviewOf(deps, auth, params)) };
    },
  }),
  defineRoute({
    operationId: 'matchLabResultReview',
    method: 'post',
    path: `${itemPath}/match`,
    summary: 'Match a lab result to an order',
    description:
      "Applies the results under review to `order_id` (an order of one of the organisation's teams) exactly as a message naming it would: its " +
      'status and results follow them and its events go out. Refused (409) if the review is already settled otherwise, or if the order cannot take them ' +
      '(the review stays pending). Repeating the same match is safe. Needs an org management key; audited.',
    tags,
    auth: 'management',
    params: LabResultReviewParams,
    body: LabResultReviewMatchBody,
    responses: {
      200: { description: 'The matched review', schema: LabResultReview },
      ...otherDeployment,
      ...conflict('The review is settled otherwise, or the order cannot take these results'),
      ...errors,
    },
    async handler({ auth, params, body, deps, requestId, log }) {
      auth.assertOrgAdmin('Matching lab result reviews');
      assertThisDeployment(deps, params.environment, params.region);
      const review = await reviewOf(deps, auth, params);
      const matched = await audited(
        { deps, auth, requestId, log },
        { action: 'lab_result_review.match', type: 'lab_result_review', id: review._id, teamId: null },
        async () => {
          const order = await deps.repos.labOrders.findById(body.order_id);
          const team = order && (await deps.repos.tenancy.findTeam(auth.orgId, order.team_id));
          // Another organisation's order, or an erased one, is not found (an erased order takes nothing again).
          if (!order || !team || team.environment !== params.environment || team.region !== params.region || order.patient_data_erased_at)
            throw notFound(`Order ${body.order_id} not found in this organisation.`);
          const outcome = await deps.repos.labReviews.resolve(
            auth.orgId,
            review._id,
            { status: 'matched', orderId: order._id, teamId: order.team_id },
            { management_key_id: auth.keyId },
          );
          if (!outcome) throw notFound(`Lab result review ${review._id} not found in this organisation.`);
          if ('conflict' in outcome)
            throw new ApiError(
              409,
              `The review is already ${outcome.conflict.status}${outcome.conflict.matched_order_id ? ` (order ${outcome.conflict.matched_order_id})` : ''}.`,
            );
          try {
            await applyReviewToOrder({ ...deps, logger: log }, outcome.resolved, order);
          } catch (err) {
            if (!(err instanceof OrderRefusedUpdate || err instanceof Hl7Refusal || err instanceof OrderErased)) throw err;
            await deps.repos.labReviews.reopen(auth.orgId, review._id, order._id);
            if (err instanceof OrderErased) throw notFound(`Order ${body.order_id} not found in this organisation.`);
            const why = err instanceof Hl7Refusal ? err.reason : err.message;
            throw new ApiError(409, `Order ${order._id} cannot take these results: ${why}`);
          }
          return outcome.resolved;
        },
        ['order_id'],
      );
      await announce(deps, matched, 'matched');
      return { body: reviewView(matched) };
    },
  }),
  defineRoute({
    operationId: 'rejectLabResultReview',
    method: 'post',
    path: `${itemPath}/reject`,
    summary: 'Reject a lab result',
    description: 'Closes the review without applying anything (e.g. a result for a patient of another provider). Needs an org management key; audited.',
    tags,
    auth: 'management',
    params: LabResultReviewParams,
    responses: {
      200: { description: 'The rejected review', schema: LabResultReview },
      ...otherDeployment,
      ...conflict('The review is already matched'),
      ...errors,
    },
    async handler({ auth, params, deps, requestId, log }) {
      auth.assertOrgAdmin('Rejecting lab result reviews');
      assertThisDeployment(deps, params.environment, params.region);
      const review = await reviewOf(deps, auth, params);
      const rejected = await audited(
        { deps, auth, requestId, log },
        { action: 'lab_result_review.reject', type: 'lab_result_review', id: review._id, teamId: null },
        async () => {
          const outcome = await deps.repos.labReviews.resolve(auth.orgId, review._id, { status: 'rejected' }, { management_key_id: auth.keyId });
          if (!outcome) throw notFound(`Lab result review ${review._id} not found in this organisation.`);
          if ('conflict' in outcome) throw new ApiError(409, `The review is already ${outcome.conflict.status}.`);
          await deps.repos.labInbound.settle(review.message_id, 'in_review', 'rejected', { detail: 'rejected by an operator', appliedTo: [] });
          return outcome.resolved;
        },
      );
      await announce(deps, rejected, 'rejected');
      return { body: reviewView(rejected) };
    },
  }),
];
