import { createHash } from 'node:crypto';
import type { LabCatalogue } from './catalogue';
import type { LabOrderDoc } from './model';
import { isoWithOffset } from '../platform/time';
import type { LabMarker } from '../../schemas/lab-catalogue';
import type { LabAdapter, LabReport, ResultRequest } from './lab-adapter';

/** Deterministic per order, so a retried activity reports the same values. */
function seededRandom(seed: string): () => number {
  let state = createHash('sha256').update(seed).digest().readUInt32LE(0);
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const round = (v: number) => Math.round(v * 100) / 100;

/** A value inside the reference range (or plausibly near a one-sided limit). */
function normalValue(m: LabMarker, rnd: () => number): number {
  const r = m.reference_range;
  if (r?.low != null && r?.high != null) return round(r.low + (r.high - r.low) * (0.25 + 0.5 * rnd()));
  if (r?.high != null) return round(r.high * (0.5 + 0.3 * rnd()));
  if (r?.low != null) return round(r.low * (1.2 + 0.3 * rnd()));
  return round(10 + 90 * rnd());
}

/** Outside the reference range but short of any critical limit. */
function abnormalValue(m: LabMarker): number {
  const r = m.reference_range!;
  const c = m.critical_range;
  if (r.high != null) {
    const v = r.high * 1.2;
    return round(c?.high != null && v >= c.high ? (r.high + c.high) / 2 : v);
  }
  const v = r.low! * 0.8;
  return round(c?.low != null && v <= c.low ? (r.low! + c.low) / 2 : v);
}

function criticalValue(m: LabMarker): number {
  const c = m.critical_range!;
  return round(c.high != null ? c.high * 1.1 : c.low! * 0.8);
}

/**
 * The sandbox laboratory: accepts every order, ships kits with tracking numbers, and reports results
 * synthesised from the ordered tests' markers, shaped by the simulation's requested interpretation.
 */
export function createSandboxLab(catalogue: LabCatalogue): LabAdapter {
  return {
    name: 'sandbox',

    async dispatchOrder(order) {
      const labReference = `SBX-${order._id.slice(0, 8).toUpperCase()}`;
      if (order.method !== 'testkit') return { labReference, shipment: null };
      const now = new Date();
      const digits = createHash('sha256').update(order._id).digest('hex').replace(/\D/g, '').padEnd(24, '0');
      return {
        labReference,
        shipment: order.shipment ?? {
          id: `shp_${order._id.slice(0, 8)}`,
          outbound_tracking_number: `9400${digits.slice(0, 18)}`,
          outbound_tracking_url: `https://tools.usps.com/go/TrackConfirmAction?tLabels=9400${digits.slice(0, 18)}`,
          inbound_tracking_number: `9207${digits.slice(6, 24)}`,
          inbound_tracking_url: `https://tools.usps.com/go/TrackConfirmAction?tLabels=9207${digits.slice(6, 24)}`,
          outbound_courier: 'usps',
          inbound_courier: 'usps',
          notes: null,
          created_at: now,
          updated_at: now,
        },
      };
    },

    async cancelOrder() {
      // The sandbox lab keeps no state of its own.
    },

    async fetchResults(order: LabOrderDoc, request: ResultRequest): Promise<LabReport> {
      const rnd = seededRandom(order._id);
      const lab = catalogue.labById(order.lab_test.lab_id);
      const unique = catalogue.resultMarkersFor(order);
      const missing = request.hasMissingResults && unique.length > 1 ? unique.slice(-1) : [];
      const reported = unique.slice(0, unique.length - missing.length);
      // The marker the requested interpretation shows on: one with a critical range for critical results.
      const numeric = reported.filter((m) => m.result_type === 'numeric' && m.reference_range);
      const flagged =
        request.interpretation === 'critical'
          ? (numeric.find((m) => m.critical_range) ?? numeric[0])
          : request.interpretation === 'abnormal'
            ? numeric[0]
            : undefined;
      const labFlags: LabReport['labFlags'] = {};
      const now = new Date();
      const dateCollected = order.dispatched_at ?? order.created_at;
      const sourceMarker = (m: LabMarker) => [{ marker_id: m.id, name: m.name, slug: m.slug, provider_id: m.provider_id ?? null }];
      const results = reported.map((m) => {
        const base = {
          name: m.name,
          slug: m.slug,
          unit: m.unit ?? null,
          timestamp: now,
          notes: null as string | null,
          reference_range: m.reference_range?.text ?? null,
          min_range_value: m.reference_range?.low ?? null,
          max_range_value: m.reference_range?.high ?? null,
          loinc: m.loinc ?? null,
          loinc_slug: m.loinc_slug ?? null,
          provider_id: m.provider_id ?? null,
          source_markers: sourceMarker(m),
          performing_laboratory: lab?.name ?? null,
          source_sample_id: order.sample_id,
        };
        if (m.result_type === 'numeric') {
          let value = normalValue(m, rnd);
          if (m === flagged) {
            value = request.interpretation === 'critical' && m.critical_range ? criticalValue(m) : abnormalValue(m);
            // Without a critical range the lab itself calls the value critical (labs flag by their own rules).
            if (request.interpretation === 'critical' && !m.critical_range) labFlags[m.slug] = 'critical';
          }
          const r = m.reference_range;
          return {
            ...base,
            type: 'numeric' as const,
            value,
            result: String(value),
            is_above_max_range: r?.high != null ? value > r.high : null,
            is_below_min_range: r?.low != null ? value < r.low : null,
          };
        }
        const coded = m.coded_values ?? [];
        const result =
          m.result_type === 'coded_value'
            ? (coded[0] ?? 'negative')
            : m.result_type === 'range'
              ? (m.reference_range?.text ?? '>60')
              : 'No abnormal findings. Specimen adequate for evaluation.';
        return {
          ...base,
          type: m.result_type as 'range' | 'comment' | 'coded_value',
          value: -1,
          result,
          is_above_max_range: null,
          is_below_min_range: null,
        };
      });
      return {
        results,
        labFlags,
        missing: missing.map((m) => ({
          name: m.name,
          slug: m.slug,
          inferred_failure_type: 'quantity_not_sufficient_failure',
          note: 'Insufficient specimen volume to complete this test.',
          loinc: m.loinc ?? null,
          loinc_slug: m.loinc_slug ?? null,
          provider_id: m.provider_id ?? null,
          source_markers: sourceMarker(m),
        })),
        dateCollected,
        dateReceived: now,
        sampleInformation: {
          [order.sample_id]: {
            sample_id: order.sample_id,
            control_number: order.lab_reference,
            date_collected: isoWithOffset(dateCollected),
            date_received: isoWithOffset(now),
            date_reported: isoWithOffset(now),
            performing_laboratories: lab ? { [lab.slug]: { name: lab.name } } : {},
            clinical_information: {
              fasting: order.lab_test.fasting,
              notes: null,
              information: `Specimen: ${order.lab_test.sample_type.replace(/_/g, ' ')}`,
              total_volume: null,
            },
          },
        },
      };
    },
  };
}
