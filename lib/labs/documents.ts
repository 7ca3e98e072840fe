import { notFound } from '../platform/errors';
import { renderRequisitionPdf, type RequisitionLabAccount } from './pdf/requisition';
import { placerNumberOf } from './placer-number';
import { renderResultsPdf } from './pdf/results';
import type { Repositories } from '../repositories';
import type { LabOrderDoc } from './model';
import { isoWithOffset } from '../platform/time';
import type { LabCatalogue } from './catalogue';
import { countryName, OrderViews, type OrderViewDeps } from './order-view';

/** The sandbox lab's ordering account (the reference's sandbox shows the same number). */
const ACCOUNT_NUMBER = '1234567890';
const ERASED = '—';

type DocumentDeps = OrderViewDeps & { repos: Repositories; labCatalogue: LabCatalogue };

function labOf(catalogue: LabCatalogue, order: LabOrderDoc) {
  const lab = catalogue.labById(order.lab_test.lab_id);
  return {
    name: lab?.name ?? 'Laboratory',
    address: lab ? `${lab.first_line_address}, ${lab.city} ${lab.zipcode}` : '',
    clia: lab?.clia_number ?? '',
  };
}

/** Whole years between a YYYY-MM-DD birth date and `at`. */
function ageAt(dob: string, at: Date): number {
  const [y, m, d] = dob.split('-').map(Number);
  let age = at.getUTCFullYear() - y;
  if (at.getUTCMonth() + 1 < m || (at.getUTCMonth() + 1 === m && at.getUTCDate() < d)) age -= 1;
  return age;
}

/** GET /v3/order/{id}/result: `{metadata, results, missing_results, sample_information, order_transaction}`. */
export async function resultsView(deps: DocumentDeps, order: LabOrderDoc) {
  const stored = await deps.repos.labOrders.findResults(order.team_id, order._id);
  if (!stored) throw notFound(`Order ${order._id} has no results yet (status ${order.low_level_status}).`);
  const lab = labOf(deps.labCatalogue, order);
  const p = order.patient_details;
  const view = await new OrderViews(deps).present(order);
  return {
    metadata: {
      age: p ? String(ageAt(p.dob, stored.date_collected)) : '',
      dob: p?.dob ?? '',
      'clia_#': lab.clia,
      patient: p ? `${p.first_name} ${p.last_name}` : ERASED,
      provider: order.physician ? `${order.physician.first_name} ${order.physician.last_name}` : null,
      laboratory: lab.name,
      date_reported: isoWithOffset(stored.date_reported),
      date_collected: isoWithOffset(stored.date_collected),
      specimen_number: order.sample_id,
      date_received: isoWithOffset(stored.date_received),
      status: stored.status === 'partial' ? 'partial' : 'final',
      interpretation: stored.interpretation,
      patient_id: order.user_id,
      account_id: ACCOUNT_NUMBER,
    },
    results: stored.results.map((r) => ({ ...r, timestamp: isoWithOffset(r.timestamp) })),
    missing_results: stored.missing_results,
    sample_information: stored.sample_information,
    order_transaction: { id: view.order_transaction.id, status: view.order_transaction.status, orders: view.order_transaction.orders },
  };
}

/** The result PDF: the lab's own report when its message carried one (an ED OBX), else ours, rendered from the results. */
export async function renderResultsReport(deps: DocumentDeps, order: LabOrderDoc): Promise<Buffer> {
  const stored = await deps.repos.labOrders.findResults(order.team_id, order._id);
  if (!stored) throw notFound(`Order ${order._id} has no results yet (status ${order.low_level_status}).`);
  if (stored.lab_pdf) return Buffer.from(stored.lab_pdf, 'base64');
  const team = await deps.repos.tenancy.findTeamById(order.team_id);
  const p = order.patient_details;
  return renderResultsPdf({
    orderId: order._id,
    specimenNumber: order.sample_id,
    lab: labOf(deps.labCatalogue, order),
    orderingOrganisation: team?.name ?? '',
    patient: { name: p ? `${p.last_name}, ${p.first_name}` : ERASED, dob: p?.dob ?? ERASED, gender: p?.gender ?? ERASED },
    physician: order.physician ? { name: `${order.physician.first_name} ${order.physician.last_name}`, npi: order.physician.npi } : null,
    dateCollected: stored.date_collected,
    dateReceived: stored.date_received,
    dateReported: stored.date_reported,
    status: stored.status === 'partial' ? 'partial' : 'final',
    interpretation: stored.interpretation,
    results: stored.results.map((r) => ({
      name: r.name,
      loinc: r.loinc,
      result: r.result,
      unit: r.unit,
      referenceRange: r.reference_range,
      flag: r.interpretation,
      isAboveMax: r.is_above_max_range,
      isBelowMin: r.is_below_min_range,
      notes: r.notes,
    })),
    missingResults: stored.missing_results.map((m) => ({ name: m.name, reason: m.note ?? m.inferred_failure_type })),
    generatedAt: new Date(),
  });
}

/**
 * The order's requisition, with its lab account's number and label placement (an order of the sandbox lab has no
 * account; nor has one whose account was deleted since, which prints as the sandbox's). The placer number is the
 * order's stored one, or derived for orders older than the field.
 */
export async function renderRequisition(deps: DocumentDeps, order: LabOrderDoc): Promise<Buffer> {
  const { labCatalogue, repos } = deps;
  const team = await repos.tenancy.findTeamById(order.team_id);
  // Without its TLS key (findById opens it for the worker's connection; a PDF has no use for it), of the order's org.
  const account =
    team && order.lab_account_id
      ? await repos.labAccounts.findInScope({ orgId: team.org_id, environment: team.environment, region: team.region }, order.lab_account_id)
      : null;
  const labAccount: RequisitionLabAccount | null = account && { name: account.name, account_number: account.account_number, labels: account.labels };
  const p = order.patient_details;
  const a = order.patient_address;
  const tests = order.lab_test_ids.map((id, i) => {
    const t = labCatalogue.labTestById(id);
    const markerIds = t?.marker_ids ?? (i === 0 ? order.lab_test.marker_ids : []);
    return {
      code: t?.slug ?? (i === 0 ? order.lab_test.slug : id),
      name: t?.name ?? (i === 0 ? order.lab_test.name : id),
      sample_type: t?.sample_type ?? order.lab_test.sample_type,
      markers: labCatalogue.resultMarkersFor({ marker_ids: markerIds }).map((m) => ({ code: m.provider_id ?? m.slug, name: m.name, loinc: m.loinc ?? null })),
    };
  });
  return renderRequisitionPdf({
    orderId: order._id,
    placerNumber: order.placer_number ?? placerNumberOf(order._id),
    labAccount,
    sampleId: order.sample_id,
    orderedAt: order.created_at,
    activateBy: order.activate_by,
    priority: order.priority,
    billingType: order.billing_type,
    collectionMethod: order.method,
    fasting: order.lab_test.fasting,
    lab: labOf(labCatalogue, order),
    orderingOrganisation: team?.name ?? '',
    patient: {
      first_name: p?.first_name ?? ERASED,
      last_name: p?.last_name ?? ERASED,
      dob: p?.dob ?? ERASED,
      gender: p?.gender ?? ERASED,
      phone_number: p?.phone_number ?? ERASED,
      email: p?.email ?? ERASED,
      address: a
        ? { first_line: a.first_line, second_line: a.second_line, city: a.city, state: a.state, zip: a.zip, country: countryName(a.country) }
        : { first_line: ERASED, second_line: null, city: '', state: '', zip: '', country: '' },
    },
    physician: order.physician ? { first_name: order.physician.first_name, last_name: order.physician.last_name, npi: order.physician.npi } : null,
    tests,
    healthInsuranceId: order.health_insurance_id,
    generatedAt: new Date(),
  });
}
