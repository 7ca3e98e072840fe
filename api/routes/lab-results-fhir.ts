import { notFound } from '../../lib/platform/errors';
import { fhirDiagnosticReport } from '../../lib/labs/fhir-results';
import { findOrder } from '../../lib/labs/workflow-client';
import { ErrorDetail } from '../../schemas/common';
import { OrderIdParams } from '../../schemas/lab-order';
import { FhirDiagnosticReport } from '../../schemas/lab-fhir';
import { defineRoute } from '../route';

export const labResultsFhirRoutes = [
  defineRoute({
    operationId: 'getOrderResultFhir',
    method: 'get',
    path: '/v3/order/{order_id}/result/fhir',
    summary: 'Get results as FHIR R4',
    description:
      'The results of `GET /v3/order/{order_id}/result` as one FHIR R4 DiagnosticReport (`application/fhir+json`) with its Observations ' +
      'contained, for feeding an EHR: LOINC codes, UCUM quantities, reference ranges, interpretation codes (N, H, L, HH, LL, A, AA), ' +
      'status final, corrected or partial (Observations: preliminary), the subject `Patient/{user_id}`, missing results as cancelled Observations.',
    tags: ['Lab orders'],
    auth: 'team',
    params: OrderIdParams,
    responses: {
      200: { description: 'The DiagnosticReport', schema: FhirDiagnosticReport, contentType: 'application/fhir+json' },
      404: { description: 'Unknown order, or no results yet', schema: ErrorDetail },
    },
    async handler({ params, auth, deps }) {
      const order = await findOrder(deps, auth.teamId, params.order_id);
      const stored = await deps.repos.labOrders.findResults(order.team_id, order._id);
      if (!stored) throw notFound(`Order ${order._id} has no results yet (status ${order.low_level_status}).`);
      return { body: fhirDiagnosticReport(order, stored, deps.labCatalogue), contentType: 'application/fhir+json' };
    },
  }),
];
