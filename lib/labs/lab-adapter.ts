import type { BiomarkerResultDoc, LabOrderDoc, MissingResultDoc, ShipmentDoc } from './model';

/** What the order's workflow asks for when the lab reports results (sandbox: the simulation's flags). */
export interface ResultRequest {
  interpretation: 'normal' | 'abnormal' | 'critical';
  hasMissingResults: boolean;
  /** final, partial (partial_results) or corrected. */
  status: 'final' | 'partial' | 'corrected';
  /** A report a lab sent us (HL7 intake, lib/labs/hl7-lab.ts) rather than one to fetch or make up. */
  reportId?: string;
}

export interface LabReport {
  results: Omit<BiomarkerResultDoc, 'interpretation'>[];
  /** The lab's own flag per result slug, where it sends one (our interpretation never rates it lower). */
  labFlags: Record<string, 'critical' | 'abnormal'>;
  missing: MissingResultDoc[];
  dateCollected: Date;
  dateReceived: Date;
  /** Per sample id, what the lab reports about the specimen (the reference's SampleData). */
  sampleInformation: Record<string, unknown>;
  /** The lab's own report (an ED OBX's PDF, Base64): served as the result PDF instead of ours. */
  labPdf?: string | null;
}

/**
 * A laboratory integration. The order workflow calls it through activities: dispatch an order (the
 * requisition), cancel it, and collect its results. Status updates from the lab reach the workflow as
 * lab updates (the sandbox lab produces them through `POST /v3/order/{order_id}/test`).
 * Every call is idempotent by order id: activities may run twice.
 */
export interface LabAdapter {
  readonly name: string;
  dispatchOrder(order: LabOrderDoc): Promise<{ labReference: string; shipment: ShipmentDoc | null }>;
  cancelOrder(order: LabOrderDoc): Promise<void>;
  fetchResults(order: LabOrderDoc, request: ResultRequest): Promise<LabReport>;
}
