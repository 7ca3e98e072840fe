import { Type, type Static } from '@sinclair/typebox';
import { ACK_MODES, LAB_ACCOUNT_DEFAULTS, LAB_CHARSETS, LAB_PROFILES, LABEL_PLACEMENTS } from '../lib/labs/lab-accounts';
import { Nullable, StringEnum, Timestamp, Uuid } from './common';
import { BILLING_TYPES } from './lab-order';
import { Environment, Region } from './management';

/** Lab accounts in the management API (`/v1/org/{org_id}/lab_account/{environment}/{region}`; api/routes/lab-accounts.ts). */

export const LabAccountParams = Type.Object({ org_id: Uuid(), environment: Environment, region: Region, lab_account_id: Uuid() });

/** Text that goes into an HL7 field as it is: none of the field, repetition, escape or subcomponent separators. */
const Hl7Value = (description: string, maxLength = 180) =>
  Type.String({
    minLength: 1,
    maxLength,
    pattern: '^[^|~\\\\&\\r\\n]+$',
    description,
    'x-messages': { pattern: 'Must not contain HL7 separators (| ~ \\ &) or line breaks.' },
  });
const Pem = (description: string) => Type.String({ minLength: 1, maxLength: 32_000, description });

const TlsBody = Type.Object(
  {
    ca: Type.Optional(Nullable(Pem("PEM certificate(s) of the CA that signed the lab's server certificate (default: the system's CAs)."))),
    cert: Type.Optional(Nullable(Pem('PEM client certificate we present to the lab (mutual TLS); needs `key`.'))),
    key: Type.Optional(
      Nullable(Pem('PEM private key of `cert`. Stored encrypted and never shown again. In a PATCH, leaving it out keeps the stored key; null removes it.')),
    ),
  },
  { additionalProperties: false, description: 'TLS to the lab (null or absent: plain TCP, e.g. inside a VPN).' },
);
const mllpFields = {
  host: Type.String({ minLength: 1, maxLength: 253, pattern: '^[A-Za-z0-9.:_-]+$', description: "The lab's MLLP host name or IP address." }),
  port: Type.Integer({ minimum: 1, maximum: 65535, description: "The lab's MLLP port." }),
};
const MllpBody = Type.Object({ ...mllpFields, tls: Type.Optional(Nullable(TlsBody)) }, { additionalProperties: false });
const MllpPatch = Type.Object(
  { host: Type.Optional(mllpFields.host), port: Type.Optional(mllpFields.port), tls: Type.Optional(Nullable(TlsBody)) },
  { additionalProperties: false, description: 'Fields given change; `tls` given replaces the TLS settings (its `key` left out keeps the stored key).' },
);
const MshBody = Type.Object(
  {
    sending_application: Hl7Value('MSH-3: our application as the lab knows it (HD: namespace, or namespace^OID^ISO).'),
    sending_facility: Hl7Value('MSH-4: our facility id at the lab (HD).'),
    receiving_application: Hl7Value("MSH-5: the lab's application (HD)."),
    receiving_facility: Hl7Value("MSH-6: the lab's facility (HD)."),
  },
  { additionalProperties: false, description: "MSH header identifiers from the lab's interface specification." },
);
const OrderCode = Type.Object(
  {
    code: Hl7Value("The lab's order code for this marker (its compendium).", 50),
    loinc: Type.Optional(Nullable(Type.String({ pattern: '^\\d{1,7}-\\d$', description: 'LOINC of the orderable, if the lab gives one.' }))),
  },
  { additionalProperties: false },
);
const OrderCodes = Type.Record(Type.String({ maxLength: 10 }), OrderCode, {
  minProperties: 1,
  maxProperties: 5000,
  description: "Key: a marker id of the account's lab (GET /v3/lab_tests/markers). A lab test can use the account only if every marker it has is here.",
});
const ResultsFrom = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), {
  maxItems: 100,
  uniqueItems: true,
  description: 'Who may deliver results for this account: IPv4/IPv6 addresses or CIDR blocks, or client-certificate fingerprints `sha256:<64 lowercase hex>`.',
});
const BillTypes = Type.Array(StringEnum(BILLING_TYPES), { minItems: 1, uniqueItems: true, description: 'Billing types the lab takes.' });

const settings = {
  name: Type.String({ minLength: 1, maxLength: 200, description: 'Your name for the account.' }),
  account_number: Hl7Value('The client account number at the lab (on requisitions and labels).', 50),
  profile: StringEnum(LAB_PROFILES, { description: 'LOI_2.5.1: HL7 v2.5.1 LOI (OML^O21); ORM_2.3: the legacy ORM^O01 in HL7 2.3.' }),
  ack_mode: StringEnum(ACK_MODES, { description: 'original: one application ACK; enhanced: an accept ACK, then the application ACK.' }),
  charset: StringEnum(LAB_CHARSETS, { description: "The lab's character set (HL7 table 0211, MSH-18)." }),
  labels: StringEnum(LABEL_PLACEMENTS, { description: 'Where specimen labels print: inside the requisition (Labcorp) or on a sheet of their own.' }),
  ack_timeout_ms: Type.Integer({ minimum: 1000, maximum: 600_000, description: 'No ACK by then: the same message is sent again.' }),
};

export const LabAccountCreateBody = Type.Object(
  {
    lab_slug: Type.String({ minLength: 1, maxLength: 100, description: 'A lab of GET /v3/lab_tests/labs; fixed for the life of the account.' }),
    name: settings.name,
    account_number: settings.account_number,
    mllp: MllpBody,
    msh: MshBody,
    profile: settings.profile,
    ack_mode: Type.Optional({ ...settings.ack_mode, default: LAB_ACCOUNT_DEFAULTS.ack_mode }),
    charset: Type.Optional({ ...settings.charset, default: LAB_ACCOUNT_DEFAULTS.charset }),
    results_from: ResultsFrom,
    order_codes: OrderCodes,
    bill_types: Type.Optional({ ...BillTypes, default: [...LAB_ACCOUNT_DEFAULTS.bill_types] }),
    labels: Type.Optional({ ...settings.labels, default: LAB_ACCOUNT_DEFAULTS.labels }),
    ack_timeout_ms: Type.Optional({ ...settings.ack_timeout_ms, default: LAB_ACCOUNT_DEFAULTS.ack_timeout_ms }),
  },
  { additionalProperties: false, $id: 'LabAccountCreateBody' },
);
export type LabAccountCreateBody = Static<typeof LabAccountCreateBody>;

export const LabAccountPatchBody = Type.Object(
  {
    lab_slug: Type.Optional(Type.String({ maxLength: 100, description: 'Cannot change (only the same value is accepted).' })),
    name: Type.Optional(settings.name),
    account_number: Type.Optional(settings.account_number),
    mllp: Type.Optional(MllpPatch),
    msh: Type.Optional(MshBody),
    profile: Type.Optional(settings.profile),
    ack_mode: Type.Optional(settings.ack_mode),
    charset: Type.Optional(settings.charset),
    results_from: Type.Optional(ResultsFrom),
    order_codes: Type.Optional(OrderCodes),
    bill_types: Type.Optional(BillTypes),
    labels: Type.Optional(settings.labels),
    ack_timeout_ms: Type.Optional(settings.ack_timeout_ms),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    $id: 'LabAccountPatchBody',
    description: 'Only the fields given change; each replaces the stored value as a whole, except `mllp`, whose fields given change.',
  },
);
export type LabAccountPatchBody = Static<typeof LabAccountPatchBody>;

export const LabAccount = Type.Object(
  {
    id: Uuid(),
    org_id: Uuid(),
    environment: Type.String(),
    region: Type.String(),
    lab_slug: Type.String(),
    lab_id: Type.Integer(),
    name: Type.String(),
    account_number: Type.String(),
    mllp: Type.Object({
      host: Type.String(),
      port: Type.Integer(),
      tls: Nullable(
        Type.Object({
          ca: Nullable(Type.String()),
          cert: Nullable(Type.String()),
          has_key: Type.Boolean({ description: 'Whether a private key is stored (it is never shown).' }),
        }),
      ),
    }),
    msh: Type.Object({
      sending_application: Type.String(),
      sending_facility: Type.String(),
      receiving_application: Type.String(),
      receiving_facility: Type.String(),
    }),
    profile: Type.String({ description: `Non-exhaustive: ${LAB_PROFILES.join(', ')}.` }),
    ack_mode: Type.String(),
    charset: Type.String(),
    results_from: Type.Array(Type.String()),
    order_codes: Type.Record(Type.String(), Type.Object({ code: Type.String(), loinc: Nullable(Type.String()) })),
    bill_types: Type.Array(Type.String()),
    labels: Type.String(),
    ack_timeout_ms: Type.Integer(),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { $id: 'LabAccount' },
);
export type LabAccount = Static<typeof LabAccount>;
export const LabAccountList = Type.Object({ data: Type.Array(LabAccount) }, { $id: 'LabAccountList' });
