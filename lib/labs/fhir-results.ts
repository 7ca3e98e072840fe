import type { LabCatalogue } from './catalogue';
import type { BiomarkerResultDoc, LabOrderDoc, LabResultsDoc, MissingResultDoc } from './model';
import { isoWithOffset } from '../platform/time';

/**
 * An order's results as a FHIR R4 DiagnosticReport with its Observations contained (one self-contained
 * resource an EHR can take as it is): LOINC codes, UCUM quantities, reference ranges, v3 interpretation codes.
 */

const LOINC = 'http://loinc.org';
const UCUM = 'http://unitsofmeasure.org';
const INTERPRETATION = 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation';
/** Identifier and code systems of this service (URNs: they name, they do not resolve). */
export const FHIR_SYSTEMS = {
  order: 'urn:healthbridge:lab-order-id',
  sample: 'urn:healthbridge:sample-id',
  user: 'urn:healthbridge:user-id',
  labTest: 'urn:healthbridge:lab-test',
  marker: 'urn:healthbridge:marker',
};

/** Catalogue units as UCUM codes; a unit not here is sent as text only (no system, no code). */
const UCUM_CODES: Record<string, string> = {
  'mg/dL': 'mg/dL',
  'g/dL': 'g/dL',
  'ng/dL': 'ng/dL',
  'ng/mL': 'ng/mL',
  'pg/mL': 'pg/mL',
  pg: 'pg',
  fL: 'fL',
  'mmol/L': 'mmol/L',
  'IU/L': '[IU]/L',
  'uIU/mL': 'u[IU]/mL',
  'x10E3/uL': '10*3/uL',
  'x10E6/uL': '10*6/uL',
  '%': '%',
  'mL/min/1.73m2': 'mL/min/{1.73_m2}',
  ratio: '{ratio}',
};

const quantity = (value: number, unit: string | null) => {
  const code = unit ? UCUM_CODES[unit] : undefined;
  return { value, ...(unit ? { unit } : {}), ...(code ? { system: UCUM, code } : {}) };
};

/** H/L (HH/LL when critical) where the value is off one end, else A/AA, N when normal. */
function interpretationCode(r: BiomarkerResultDoc): string {
  const critical = r.interpretation === 'critical';
  if (r.interpretation === 'normal') return 'N';
  if (r.is_above_max_range) return critical ? 'HH' : 'H';
  if (r.is_below_min_range) return critical ? 'LL' : 'L';
  return critical ? 'AA' : 'A';
}
const INTERPRETATION_DISPLAY: Record<string, string> = {
  N: 'Normal',
  H: 'High',
  L: 'Low',
  HH: 'Critical high',
  LL: 'Critical low',
  A: 'Abnormal',
  AA: 'Critical abnormal',
};

const codeOf = (r: Pick<BiomarkerResultDoc, 'loinc' | 'name' | 'slug'>) => ({
  coding: [r.loinc ? { system: LOINC, code: r.loinc, display: r.name } : { system: FHIR_SYSTEMS.marker, code: r.slug, display: r.name }],
  text: r.name,
});

const OBSERVATION_STATUS = { final: 'final', corrected: 'corrected', partial: 'preliminary' } as const;
const REPORT_STATUS = { final: 'final', corrected: 'corrected', partial: 'partial' } as const;

function observation(r: BiomarkerResultDoc, id: string, status: LabResultsDoc['status'], subject: object) {
  const range =
    r.min_range_value !== null || r.max_range_value !== null || r.reference_range
      ? [
          {
            ...(r.min_range_value !== null ? { low: quantity(r.min_range_value, r.unit) } : {}),
            ...(r.max_range_value !== null ? { high: quantity(r.max_range_value, r.unit) } : {}),
            ...(r.reference_range ? { text: r.reference_range } : {}),
          },
        ]
      : [];
  const code = interpretationCode(r);
  return {
    resourceType: 'Observation',
    id,
    status: OBSERVATION_STATUS[status],
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory', display: 'Laboratory' }] }],
    code: codeOf(r),
    subject,
    effectiveDateTime: isoWithOffset(r.timestamp),
    ...(r.type === 'numeric'
      ? { valueQuantity: quantity(r.value, r.unit) }
      : r.type === 'coded_value'
        ? { valueCodeableConcept: { text: r.result } }
        : { valueString: r.result }),
    interpretation: [{ coding: [{ system: INTERPRETATION, code, display: INTERPRETATION_DISPLAY[code] }] }],
    ...(range.length ? { referenceRange: range } : {}),
    ...(r.notes ? { note: [{ text: r.notes }] } : {}),
    ...(r.performing_laboratory ? { performer: [{ display: r.performing_laboratory }] } : {}),
  };
}

/** A result the lab did not produce: cancelled, with the reason it is absent. */
function missingObservation(m: MissingResultDoc, id: string, subject: object) {
  return {
    resourceType: 'Observation',
    id,
    status: 'cancelled',
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory', display: 'Laboratory' }] }],
    code: codeOf(m),
    subject,
    dataAbsentReason: {
      coding: [{ system: 'http://terminology.hl7.org/CodeSystem/data-absent-reason', code: 'error', display: 'Error' }],
      text: m.inferred_failure_type,
    },
    ...(m.note ? { note: [{ text: m.note }] } : {}),
  };
}

/** The DiagnosticReport of an order's stored results. */
export function fhirDiagnosticReport(order: LabOrderDoc, stored: LabResultsDoc, catalogue: LabCatalogue) {
  const p = order.patient_details;
  const subject = {
    reference: `Patient/${order.user_id}`,
    identifier: { system: FHIR_SYSTEMS.user, value: order.user_id },
    ...(p ? { display: `${p.first_name} ${p.last_name}` } : {}),
  };
  const observations = [
    ...stored.results.map((r, i) => observation(r, `result-${i + 1}`, stored.status, subject)),
    ...stored.missing_results.map((m, i) => missingObservation(m, `missing-${i + 1}`, subject)),
  ];
  const lab = catalogue.labById(order.lab_test.lab_id);
  return {
    resourceType: 'DiagnosticReport',
    id: order._id,
    meta: { lastUpdated: isoWithOffset(stored.updated_at) },
    identifier: [
      { system: FHIR_SYSTEMS.order, value: order._id },
      { system: FHIR_SYSTEMS.sample, value: order.sample_id },
    ],
    status: REPORT_STATUS[stored.status],
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0074', code: 'LAB', display: 'Laboratory' }] }],
    code: { coding: [{ system: FHIR_SYSTEMS.labTest, code: order.lab_test.slug, display: order.lab_test.name }], text: order.lab_test.name },
    subject,
    effectiveDateTime: isoWithOffset(stored.date_collected),
    issued: isoWithOffset(stored.date_reported),
    ...(lab ? { performer: [{ display: lab.name }] } : {}),
    contained: observations,
    result: observations.map((o) => ({ reference: `#${o.id}` })),
    ...(stored.missing_results.length ? { conclusion: `Not reported: ${stored.missing_results.map((m) => m.name).join(', ')}.` } : {}),
  };
}
