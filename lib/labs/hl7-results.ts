import type { LabCatalogue } from './catalogue';
import type { LabOrderDoc } from './model';
import type { LabReport } from './lab-adapter';
import type { LabMarker } from '../../schemas/lab-catalogue';
import { isoWithOffset } from '../platform/time';
import { Hl7Refusal, type Hl7Observation, type Hl7ObservationRequest, type Hl7OruMessage } from './hl7-oru';

/** What a lab's ORU^R01 means for one order: the report (the sandbox lab's shape) and the status it brings. */
export interface Hl7OrderReport {
  report: LabReport;
  /** corrected (any OBX-11 or OBR-25 C), partial (any P), else final. */
  status: 'final' | 'partial' | 'corrected';
}

const unprocessable = (reason: string) => new Hl7Refusal('AE', 422, reason);

/** OBX-8 flags (HL7 table 0078) the lab rates critical or abnormal; N and the rest rate nothing. */
const CRITICAL_FLAGS = new Set(['HH', 'LL', 'AA', '>', '<']);
const ABNORMAL_FLAGS = new Set(['H', 'L', 'A', 'HU', 'LU', 'U', 'D']);

/** OBX-7 as the lab writes it: `70-99`, `>39`, `<200`, `>=60`. */
function parseRange(text: string | null): { low: number | null; high: number | null } | null {
  if (!text) return null;
  const between = /^\s*(-?\d+(?:\.\d+)?)\s*-\s*(-?\d+(?:\.\d+)?)\s*$/.exec(text);
  if (between) return { low: Number(between[1]), high: Number(between[2]) };
  const bound = /^\s*([<>])=?\s*(\d+(?:\.\d+)?)\s*$/.exec(text);
  if (!bound) return null;
  // `>39` means normal from 40 (integers), as the catalogue writes it; `>=` includes the bound.
  return bound[1] === '>'
    ? { low: Number(bound[2]) + (text.includes('=') ? 0 : 1), high: null }
    : { low: null, high: Number(bound[2]) - (text.includes('=') ? 0 : 1) };
}

const simplify = (s: string) => s.toLowerCase().replace(/[^a-z0-9]/g, '');

/** OBX-5 as our result: numeric (NM, or SN without comparator), range (SN with one, or a `>60` text), coded, or text. */
function resultOf(obx: Hl7Observation, marker: LabMarker): { type: 'numeric' | 'range' | 'comment' | 'coded_value'; value: number; result: string } {
  const where = `OBX ${obx.setId} (${marker.slug})`;
  const [first, second = '', third = '', fourth = ''] = obx.value;
  if (obx.valueType === 'NM' || (obx.valueType === 'SN' && !first && !third)) {
    const text = obx.valueType === 'NM' ? first : second;
    if (!/^-?\d+(\.\d+)?$/.test(text.trim())) throw new Hl7Refusal('AR', 400, `${where}: '${text}' is not a number (OBX-2 ${obx.valueType}).`);
    const value = Number(text);
    if (marker.result_type === 'numeric') return { type: 'numeric', value, result: String(value) };
    return { type: 'range', value: -1, result: String(value) };
  }
  if (obx.valueType === 'SN') return { type: 'range', value: -1, result: `${first}${second}${third}${fourth}` };
  if (obx.valueType === 'CE' || obx.valueType === 'CWE') {
    const text = second || first;
    const coded = marker.coded_values?.find((c) => simplify(c) === simplify(text) || simplify(c) === simplify(first));
    return { type: 'coded_value', value: -1, result: coded ?? text };
  }
  const text = obx.value.join(' ').trim();
  if (marker.result_type === 'numeric' && /^-?\d+(\.\d+)?$/.test(text)) return { type: 'numeric', value: Number(text), result: text };
  if (marker.result_type === 'range' || /^[<>]=?\d/.test(text)) return { type: 'range', value: -1, result: text };
  return { type: marker.result_type === 'coded_value' ? 'coded_value' : 'comment', value: -1, result: text };
}

/**
 * Maps the message's observations onto the order's markers (by LOINC, else by the lab's own code, the marker's
 * provider_id), as the sandbox lab reports them: values, units, reference ranges, the lab's flags, missing
 * results (OBX-11 X, or a marker a final report leaves out). An observation of no marker of the order, or of a
 * numeric marker in other units, is refused: it would be misfiled or misread.
 */
export function orderReport(
  message: Hl7OruMessage,
  order: LabOrderDoc,
  catalogue: LabCatalogue,
  requests: Hl7ObservationRequest[] = message.requests,
): Hl7OrderReport {
  const markers = catalogue.resultMarkersFor(order);
  const lab = catalogue.labById(order.lab_test.lab_id);
  // An ED observation is the lab's own report (its PDF), not a result of a marker.
  const documents = requests.flatMap((r) => r.observations).filter((o) => o.document);
  const observations = requests.flatMap((r) => r.observations).filter((o) => !o.document);
  const statuses = new Set([...observations.map((o) => o.status), ...requests.map((r) => r.resultStatus)]);
  const status = statuses.has('C') ? 'corrected' : statuses.has('P') || statuses.has('I') ? 'partial' : 'final';
  const request = requests[0];
  const collectedAt = request.collectedAt ?? order.dispatched_at ?? order.created_at;
  const receivedAt = request.receivedAt ?? message.messageTime ?? new Date();
  const reportedAt = requests.map((r) => r.reportedAt).find(Boolean) ?? message.messageTime ?? new Date();
  const sampleId = request.specimenId ?? order.sample_id;
  const sourceMarkers = (m: LabMarker) => [{ marker_id: m.id, name: m.name, slug: m.slug, provider_id: m.provider_id ?? null }];

  const labFlags: LabReport['labFlags'] = {};
  const seen = new Map<number, Hl7Observation>();
  const results: LabReport['results'] = [];
  const missing: LabReport['missing'] = [];
  for (const obx of observations) {
    const marker = markers.find((m) => (obx.loinc && m.loinc === obx.loinc) || (obx.localCode && m.provider_id === obx.localCode));
    if (!marker) {
      throw unprocessable(
        `OBX ${obx.setId}: ${obx.loinc ? `LOINC ${obx.loinc}` : `code ${obx.localCode}`} (${obx.name}) is not a result of the tests of order ${order._id}.`,
      );
    }
    if (seen.has(marker.id)) throw unprocessable(`OBX ${obx.setId}: ${marker.slug} is reported twice (also OBX ${seen.get(marker.id)!.setId}).`);
    seen.set(marker.id, obx);
    const base = {
      name: marker.name,
      slug: marker.slug,
      loinc: marker.loinc ?? null,
      loinc_slug: marker.loinc_slug ?? null,
      provider_id: marker.provider_id ?? null,
      source_markers: sourceMarkers(marker),
    };
    if (obx.status === 'X') {
      missing.push({ ...base, inferred_failure_type: 'unknown_failure', note: obx.notes.join('\n') || 'The laboratory could not obtain this result.' });
      continue;
    }
    const result = resultOf(obx, marker);
    if (result.type === 'numeric' && obx.units && marker.unit && obx.units !== marker.unit) {
      throw unprocessable(`OBX ${obx.setId} (${marker.slug}): units '${obx.units}' are not the catalogue's '${marker.unit}'.`);
    }
    const range = parseRange(obx.referenceRange) ?? marker.reference_range;
    const flags = obx.abnormalFlags;
    if (flags.some((f) => CRITICAL_FLAGS.has(f))) labFlags[marker.slug] = 'critical';
    else if (flags.some((f) => ABNORMAL_FLAGS.has(f))) labFlags[marker.slug] = 'abnormal';
    results.push({
      ...base,
      ...result,
      unit: obx.units ?? marker.unit ?? null,
      timestamp: obx.observedAt ?? collectedAt,
      notes: obx.notes.join('\n') || null,
      reference_range: obx.referenceRange ?? marker.reference_range?.text ?? null,
      min_range_value: range?.low ?? null,
      max_range_value: range?.high ?? null,
      is_above_max_range: result.type === 'numeric' && range?.high != null ? result.value > range.high : null,
      is_below_min_range: result.type === 'numeric' && range?.low != null ? result.value < range.low : null,
      performing_laboratory: obx.performingLab ?? (message.sendingFacility || lab?.name) ?? null,
      source_sample_id: sampleId,
    });
  }
  // A final report that leaves out a marker of the order did not produce it; a partial one has yet to. A test the
  // lab could not do (OBR-25 X) says why in its NTE or its specimen's reject reason (SPM-21).
  const cannotBeDone = requests.find((r) => r.resultStatus === 'X');
  const notDoneReason = cannotBeDone
    ? [cannotBeDone.specimenRejectReason?.text, ...cannotBeDone.notes].filter(Boolean).join('\n') || 'The laboratory could not perform this test.'
    : null;
  if (status !== 'partial') {
    for (const m of markers.filter((m) => !seen.has(m.id))) {
      missing.push({
        name: m.name,
        slug: m.slug,
        inferred_failure_type: cannotBeDone?.specimenRejectReason ? 'collection_process_failure' : 'unknown_failure',
        note: notDoneReason ?? 'Not reported by the laboratory.',
        loinc: m.loinc ?? null,
        loinc_slug: m.loinc_slug ?? null,
        provider_id: m.provider_id ?? null,
        source_markers: sourceMarkers(m),
      });
    }
  }
  const pdf = documents.find((d) => d.document!.type === 'application/pdf')?.document ?? null;
  return {
    status,
    report: {
      labPdf: pdf ? pdf.data.toString('base64') : null,
      results,
      labFlags,
      missing,
      dateCollected: collectedAt,
      dateReceived: receivedAt,
      sampleInformation: {
        [sampleId]: {
          sample_id: sampleId,
          control_number: request.fillerOrderNumber ?? order.lab_reference,
          date_collected: isoWithOffset(collectedAt),
          date_received: isoWithOffset(receivedAt),
          date_reported: isoWithOffset(reportedAt),
          performing_laboratories: lab ? { [lab.slug]: { name: message.sendingFacility || lab.name } } : {},
          clinical_information: {
            fasting: order.lab_test.fasting,
            notes: null,
            information: `Specimen: ${order.lab_test.sample_type.replace(/_/g, ' ')}`,
            total_volume: null,
          },
        },
      },
    },
  };
}
