// Contract C2's model, as part B codes against it; part A's lib/labs/lab-accounts.ts replaces this file at merge.

export type LabProfile = 'LOI_2.5.1' | 'ORM_2.3';
export interface LabAccountDoc {
  _id: string; // uuid
  org_id: string;
  environment: string;
  region: string;
  lab_slug: string; // a lab of the catalogue (GET /v3/lab_tests/labs)
  lab_id: number;
  name: string;
  account_number: string; // the client account at the lab (printed on requisitions and labels)
  mllp: { host: string; port: number; tls: { ca: string | null; cert: string | null; key: string | null } | null };
  // key: sealed at rest, never returned (API shows `has_key: true`)
  msh: { sending_application: string; sending_facility: string; receiving_application: string; receiving_facility: string };
  profile: LabProfile;
  ack_mode: 'original' | 'enhanced';
  charset: string; // HL7 table 0211 name: 'ASCII' | '8859/1' | 'UNICODE UTF-8' (default 'UNICODE UTF-8')
  results_from: string[]; // who may deliver results: IPv4/IPv6 addresses or CIDRs, or 'sha256:<hex>' client-certificate fingerprints
  order_codes: Record<string, { code: string; loinc?: string | null }>; // key: catalogue marker id (as string)
  bill_types: string[]; // billing types the lab takes: client_bill | commercial_insurance | patient_bill | patient_bill_passthrough
  labels: 'in_requisition' | 'separate_sheet'; // where specimen labels print (Labcorp: inside the requisition)
  ack_timeout_ms: number; // default 30000: no ACK by then → resend the same message
  created_at: Date;
  updated_at: Date;
}
