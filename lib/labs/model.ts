import type { CollectionMethod, HighLevelStatus } from './statuses';

/** Lab orders, their results and idempotency keys as the code sees them (plaintext; orders-store.ts seals and opens them). */

export interface OrderEventDoc {
  /** 1, 2, 3… in the order they happened (assigned by the workflow). */
  id: number;
  created_at: Date;
  /** `<high>.<method>.<low>`. */
  status: string;
  status_detail: string | null;
  /** A real lab's own words on this change, when it gave any (its ERR text when it refused the order). */
  detail?: string;
}

export interface PatientDetailsDoc {
  first_name: string;
  last_name: string;
  dob: string;
  gender: string;
  phone_number: string;
  email: string;
}

/** Country is stored as the ISO 3166-1 alpha-2 code received; responses show the long name. */
export interface AddressDoc {
  receiver_name: string | null;
  first_line: string;
  second_line: string | null;
  city: string;
  state: string;
  zip: string;
  country: string;
  phone_number: string | null;
  access_notes?: string | null;
}

export interface PhysicianDoc {
  first_name: string;
  last_name: string;
  npi: string;
  email?: string | null;
  licensed_states?: string[];
}

export interface ShipmentDoc {
  id: string;
  outbound_tracking_number: string | null;
  outbound_tracking_url: string | null;
  inbound_tracking_number: string | null;
  inbound_tracking_url: string | null;
  outbound_courier: string | null;
  inbound_courier: string | null;
  notes: string | null;
  created_at: Date;
  updated_at: Date;
}

/** What was ordered, copied from the catalogue (or the team's own test) at order time: history does not change. */
export interface OrderedLabTestDoc {
  id: string;
  slug: string;
  name: string;
  description: string;
  method: CollectionMethod;
  sample_type: string;
  fasting: boolean;
  lab_id: number;
  marker_ids: number[];
  status: 'active' | 'inactive';
  price: number;
  common_tat_days: number;
  worst_case_tat_days: number;
  has_collection_instructions: boolean;
  team_owned: boolean;
  /** A team's test may name the organisation's lab account its orders go to; null/absent: none (catalogue tests). */
  lab_account_id?: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface AoeAnswerDoc {
  marker_id: number;
  question_id: string;
  answer: string;
}

export type Interpretation = 'normal' | 'abnormal' | 'critical';

export interface LabOrderDoc {
  _id: string;
  team_id: string;
  user_id: string;
  method: CollectionMethod;
  status: HighLevelStatus;
  low_level_status: string;
  low_level_status_created_at: Date;
  events: OrderEventDoc[];
  lab_test: OrderedLabTestDoc;
  /** Every test of the order set (the first is `lab_test`). */
  lab_test_ids: string[];
  /** The markers of every test of the order set (what the lab reports on). */
  marker_ids: number[];
  patient_details: PatientDetailsDoc | null;
  patient_address: AddressDoc | null;
  shipping_details: AddressDoc | null;
  physician: PhysicianDoc | null;
  consents: { consentType: string; version?: string; timeOfConsent?: string }[];
  /** Unique per team: the kit barcode on registration, otherwise assigned at creation. */
  sample_id: string;
  health_insurance_id: string | null;
  notes: string | null;
  clinical_notes: string | null;
  /** YYYY-MM-DD: dispatch to the lab waits until this date (00:00 UTC). */
  activate_by: string | null;
  /** Only orders created with activate_by can be rescheduled (spec). */
  created_with_activate_by: boolean;
  priority: boolean;
  billing_type: string;
  has_abn: boolean;
  origin: 'initial' | 'redraw';
  parent_id: string | null;
  /** On an initial order whose redraw was requested (set after its workflow ended: no other writer). */
  redraw_order_id?: string | null;
  order_transaction_id: string;
  interpretation: Interpretation | null;
  has_missing_results: boolean;
  /** details.data.id: the test-kit / appointment record of the order. */
  details_id: string;
  shipment: ShipmentDoc | null;
  /** The lab account the order goes through (its test's, or the one the request named); null: the sandbox lab. */
  lab_account_id: string | null;
  /** Our placer order number (placer-number.ts: ORC-2/OBR-2, the requisition barcode); unique. */
  placer_number: string;
  /** ICD-10 diagnosis codes for the lab (DG1). Patient data: sealed, and erased with it. */
  icd_codes: string[];
  /** Ask-at-order-entry answers (OBX under their test). Patient data: sealed, and erased with it. */
  aoe_answers: AoeAnswerDoc[];
  /** The lab's reference once dispatched (requisition number). */
  lab_reference: string | null;
  dispatched_at: Date | null;
  created_at: Date;
  updated_at: Date;
  /** Set when the user's patient data was erased (user deletion). */
  patient_data_erased_at?: Date;
  /** The customer's own string, returned as given (`POST /v3/order/testkit`). */
  passthrough?: string | null;
  /** An unregistered kit's order: the registration bound to it (lib/labs/orders-store.ts `bindRegistration`). */
  registration_id?: string | null;
  /**
   * Set when a registration is bound to an unregistered kit, cleared once the order's workflow has taken it (or refused
   * it): a kit still marked a while later was cut off between the two (a crash), and the sweeper finishes it.
   */
  registration_pending_since?: Date;
}

/** Lab results of one order (`_id` = order id), written by the order workflow. */
export interface LabResultsDoc {
  _id: string;
  team_id: string;
  user_id: string;
  status: 'final' | 'partial' | 'corrected';
  interpretation: Interpretation;
  date_collected: Date;
  date_received: Date;
  date_reported: Date;
  results: BiomarkerResultDoc[];
  missing_results: MissingResultDoc[];
  sample_information: Record<string, unknown>;
  /** The lab's own report PDF (Base64, sealed), when its message carried one: GET …/result/pdf serves it instead of ours. */
  lab_pdf?: string | null;
  /** The lab's message these results came from (`reportId` of the order's update), when a lab sent them. */
  report_id?: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface BiomarkerResultDoc {
  name: string;
  slug: string;
  value: number;
  result: string;
  type: 'numeric' | 'range' | 'comment' | 'coded_value';
  unit: string | null;
  timestamp: Date;
  notes: string | null;
  reference_range: string | null;
  min_range_value: number | null;
  max_range_value: number | null;
  is_above_max_range: boolean | null;
  is_below_min_range: boolean | null;
  interpretation: Interpretation;
  loinc: string | null;
  loinc_slug: string | null;
  provider_id: string | null;
  source_markers: { marker_id: number; name: string; slug: string; provider_id: string | null }[];
  performing_laboratory: string | null;
  source_sample_id: string | null;
}

export interface MissingResultDoc {
  name: string;
  slug: string;
  inferred_failure_type: string;
  note: string | null;
  loinc: string | null;
  loinc_slug: string | null;
  provider_id: string | null;
  source_markers: BiomarkerResultDoc['source_markers'];
}
