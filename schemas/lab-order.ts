import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { ALL_DOTTED_STATUSES, COLLECTION_METHODS } from '../lib/labs/statuses';
import { DateString, MAX_PAGE, Nullable, StringEnum, Timestamp, Uuid } from './common';

// ---------- Requests ----------

/** Letters (any script), spaces, hyphens, apostrophes and periods; what labs accept on requisitions. */
const NAME_PATTERN = "^[\\p{L}][\\p{L} '’.-]*$";
const PersonName = (description: string) => Type.String({ minLength: 1, maxLength: 50, pattern: NAME_PATTERN, description });
export const GENDERS = ['female', 'male', 'other', 'unknown'] as const;
export const CONSENT_TYPES = [
  'terms-of-use',
  'telehealth-informed-consent',
  'mobile-terms-and-conditions',
  'notice-of-privacy-practices',
  'privacy-policy',
  'hipaa-authorization',
] as const;
export const BILLING_TYPES = ['client_bill', 'commercial_insurance', 'patient_bill_passthrough', 'patient_bill'] as const;

export const PatientDetailsBody = Type.Object(
  {
    first_name: PersonName('Letters, spaces, hyphens and apostrophes; at most 50 characters.'),
    last_name: PersonName('Letters, spaces, hyphens and apostrophes; at most 50 characters.'),
    dob: DateString('Date of birth, YYYY-mm-dd; a real date in the past.'),
    gender: StringEnum(GENDERS),
    phone_number: Type.String({ pattern: '^\\+[1-9]\\d{6,14}$', description: 'E.164, e.g. +14155552671.' }),
    email: Type.String({ format: 'email', maxLength: 254 }),
  },
  { additionalProperties: false },
);

const addressFields = {
  receiver_name: Type.Optional(Type.String({ maxLength: 100 })),
  second_line: Type.Optional(Nullable(Type.String({ maxLength: 100 }))),
  city: Type.String({ minLength: 1, maxLength: 100 }),
  state: Type.String({ minLength: 1, maxLength: 50 }),
  zip: Type.String({ minLength: 3, maxLength: 12, pattern: '^[A-Za-z0-9 -]+$' }),
  country: Type.String({ pattern: '^[A-Za-z]{2}$', description: 'ISO 3166-1 alpha-2 code, e.g. US.' }),
  phone_number: Type.Optional(Type.String({ pattern: '^\\+[1-9]\\d{6,14}$' })),
  access_notes: Type.Optional(Nullable(Type.String({ maxLength: 1000 }))),
};
export const PatientAddressBody = Type.Object({ first_line: Type.String({ minLength: 1, maxLength: 100 }), ...addressFields }, { additionalProperties: false });
/**
 * Registration takes either form the spec shows: first_line / second_line, or `street` + `street_number`
 * (one schema, not a union: ajv would strip one form's fields while trying the other; the api requires one).
 */
export const RegistrationAddressBody = Type.Object(
  {
    first_line: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    street: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    street_number: Type.Optional(Type.String({ maxLength: 20 })),
    ...addressFields,
  },
  { additionalProperties: false },
);

export const PhysicianBody = Type.Object(
  {
    first_name: PersonName('Physician first name.'),
    last_name: PersonName('Physician last name.'),
    npi: Type.String({ pattern: '^\\d{10}$', description: 'National Provider Identifier: 10 digits.' }),
    email: Type.Optional(Nullable(Type.String({ format: 'email' }))),
    licensed_states: Type.Optional(Type.Array(Type.String({ pattern: '^[A-Z]{2}$' }))),
  },
  { additionalProperties: false },
);

export const ConsentBody = Type.Object(
  {
    consentType: StringEnum(CONSENT_TYPES),
    version: Type.Optional(Type.String({ default: '1.0' })),
    timeOfConsent: Type.Optional(Timestamp()),
  },
  { additionalProperties: false },
);

/** ICD-10-CM: a letter, two characters, then up to four after an optional dot (E11.9, Z0000, R73.03). */
const IcdCode = Type.String({
  pattern: '^[A-Z][0-9][0-9A-Z](\\.?[0-9A-Z]{1,4})?$',
  description: 'ICD-10-CM diagnosis code (e.g. E11.9), sent to the lab as a DG1 segment.',
  'x-messages': { pattern: 'Input should be an ICD-10-CM code, e.g. E11.9.' },
});
export const AoeAnswerBody = Type.Object(
  {
    marker_id: Type.Integer({ minimum: 1, maximum: 2147483647, description: 'A marker of the ordered tests.' }),
    // The SDK's AoEAnswer sends an integer; the reference's API an id string: both are taken, and kept as a string.
    question_id: Type.Union([Type.String({ minLength: 1, maxLength: 100 }), Type.Integer({ minimum: 0 })], { description: "The lab's question id." }),
    answer: Type.String({ minLength: 1, maxLength: 1000 }),
  },
  { additionalProperties: false, description: 'An ask-at-order-entry answer (sent to the lab as an OBX under its test).' },
);
const LabAccountId = (description: string) => Type.Optional(Nullable(Uuid(description)));

export const CreateOrderBody = Type.Object(
  {
    user_id: Uuid('The patient: a user of your team.'),
    lab_test_id: Type.Optional(Type.String({ description: 'Deprecated: use order_set.lab_test_ids.' })),
    order_set: Type.Optional(
      Type.Object(
        {
          lab_test_ids: Type.Array(Type.String({ minLength: 1 }), { minItems: 1, maxItems: 10, uniqueItems: true }),
          lab_account_id: LabAccountId('Same as the top-level lab_account_id.'),
        },
        { additionalProperties: true },
      ),
    ),
    collection_method: Type.Optional(StringEnum(COLLECTION_METHODS)),
    patient_details: PatientDetailsBody,
    patient_address: PatientAddressBody,
    physician: Type.Optional(Nullable(PhysicianBody)),
    consents: Type.Optional(Type.Array(ConsentBody)),
    activate_by: Type.Optional(Nullable(DateString('Dispatch to the lab on this date (00:00 UTC); today or later.'))),
    health_insurance_id: Type.Optional(Nullable(Uuid())),
    priority: Type.Optional(Type.Boolean({ default: false })),
    billing_type: Type.Optional(StringEnum(BILLING_TYPES, { default: 'client_bill' })),
    clinical_notes: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
    notes: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
    icd_codes: Type.Optional(Type.Array(IcdCode, { maxItems: 12, uniqueItems: true })),
    aoe_answers: Type.Optional(Type.Array(AoeAnswerBody, { maxItems: 100 })),
    lab_account_id: LabAccountId(
      "The organisation's lab account to send the order through, for tests that name none (the account's lab must be the tests' and " +
        "cover all their markers); a test that names an account uses it (this may only repeat it). Absent: the test's account, or the sandbox lab.",
    ),
  },
  { additionalProperties: false },
);
export type CreateOrderBody = Static<typeof CreateOrderBody>;

export const RegisterTestkitBody = Type.Object(
  {
    user_id: Uuid('The patient: a user of your team.'),
    sample_id: Type.String({ minLength: 4, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$', description: 'The barcode of the kit.' }),
    lab_test_id: Type.Optional(Type.String({ minLength: 1, description: "The kit's test; defaults to the first active test-kit test." })),
    patient_details: PatientDetailsBody,
    patient_address: RegistrationAddressBody,
    physician: Type.Optional(Nullable(PhysicianBody)),
    health_insurance_id: Type.Optional(Nullable(Uuid())),
    consents: Type.Array(ConsentBody, { minItems: 1 }),
  },
  { additionalProperties: false },
);
export type RegisterTestkitBody = Static<typeof RegisterTestkitBody>;

/** Where an unregistered kit ships (the reference's ShippingAddressWithValidation). */
export const ShippingAddressBody = Type.Object(
  {
    receiver_name: Type.String({ minLength: 1, maxLength: 100 }),
    first_line: Type.String({ minLength: 1, maxLength: 100 }),
    second_line: Type.Optional(Nullable(Type.String({ maxLength: 100 }))),
    city: addressFields.city,
    state: addressFields.state,
    zip: addressFields.zip,
    country: addressFields.country,
    phone_number: Type.String({ pattern: '^\\+[1-9]\\d{6,14}$', description: 'E.164, e.g. +14155552671.' }),
  },
  { additionalProperties: false },
);

export const UnregisteredTestkitBody = Type.Object(
  {
    user_id: Uuid('A user of your team: who the kit is ordered for. Registration may bind it to another user of the team.'),
    lab_test_id: Type.String({ minLength: 1, description: 'An active test-kit test.' }),
    shipping_details: ShippingAddressBody,
    passthrough: Type.Optional(Nullable(Type.String({ maxLength: 2000, description: 'Your own string, returned on the order as given.' }))),
    lab_account_id: LabAccountId("As in POST /v3/order: the organisation's lab account, for a test that names none."),
  },
  { additionalProperties: false },
);
export type UnregisteredTestkitBody = Static<typeof UnregisteredTestkitBody>;

export const PatchOrderBody = Type.Object(
  { activate_by: Nullable(DateString('New activation date (today or later), or null to dispatch at once.')) },
  { additionalProperties: false },
);

export const OrderIdParams = Type.Object({ order_id: Uuid() });

export const SimulateOrderQuery = Type.Object(
  {
    final_status: Type.Optional(StringEnum(ALL_DOTTED_STATUSES, { description: 'Where the simulation ends (dotted OrderStatus); default: completed.' })),
    delay: Type.Integer({ minimum: 0, maximum: 3600, default: 0, description: 'Seconds between simulated status updates.' }),
  },
  { additionalProperties: true },
);
export const SimulateOrderBody = Type.Object(
  {
    interpretation: Type.Optional(StringEnum(['normal', 'abnormal', 'critical'] as const, { default: 'normal' })),
    has_missing_results: Type.Optional(Type.Boolean({ default: false })),
    result_types: Type.Optional(Type.Array(Type.String())),
  },
  { additionalProperties: false },
);

export const ListOrdersQuery = Type.Object(
  {
    page: Type.Integer({ minimum: 1, maximum: MAX_PAGE, default: 1 }),
    size: Type.Integer({ minimum: 1, maximum: 100, default: 50 }),
    next_cursor: Type.Optional(
      Type.String({
        description: "The previous page's `next_cursor` (same filters): the page after it, without counting again (`total` is the first page's).",
      }),
    ),
    user_id: Type.Optional(Uuid()),
    status: Type.Optional(Type.Array(Type.String({ pattern: '^[a-z_]+$' }), { description: 'Low-level statuses.' })),
    interpretation: Type.Optional(StringEnum(['normal', 'abnormal', 'critical', 'unknown'] as const)),
    order_activation_types: Type.Optional(Type.Array(StringEnum(['current', 'scheduled'] as const))),
    start_date: Type.Optional(Type.Union([DateString(), Timestamp()], { description: 'Created at or after (date or date-time).' })),
    end_date: Type.Optional(
      Type.Union([DateString(), Timestamp()], { description: 'Created at or before (date or date-time; a date includes the whole day).' }),
    ),
    order_ids: Type.Optional(Type.Array(Uuid())),
    order_transaction_id: Type.Optional(Uuid()),
    order_direction: StringEnum(['asc', 'desc'] as const, { default: 'desc' }),
    order_type: Type.Optional(Type.Array(StringEnum(COLLECTION_METHODS), { description: 'Collection methods.' })),
    is_critical: Type.Optional(Type.Boolean({ description: 'true: only orders with a critical interpretation.' })),
    search_input: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: "An order id, sample id or user id (exact), or the patient's name: orders whose name has every word of it (case and accents aside).",
      }),
    ),
    patient_name: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: "Orders whose patient's first and last names hold every word of this (case and accents aside; whole words).",
      }),
    ),
  },
  { additionalProperties: true },
);

// ---------- Responses ----------

const open = (props: Record<string, TSchema>, options: Record<string, unknown> = {}) => Type.Object(props, { additionalProperties: true, ...options });

export const OrderEvent = open({
  id: Type.Integer(),
  created_at: Timestamp(),
  status: Type.String(),
  status_detail: Nullable(Type.String()),
  /** A real lab's own words on the change (its ERR text when it refused the order); absent when it gave none. */
  detail: Type.Optional(Type.String()),
});
const AddressView = open({
  receiver_name: Type.String(),
  first_line: Type.String(),
  second_line: Type.String(),
  city: Type.String(),
  state: Type.String(),
  zip: Type.String(),
  country: Type.String({ description: 'Long country name, e.g. United States.' }),
  phone_number: Type.String(),
});

export const ClientFacingOrder = open(
  {
    id: Uuid(),
    team_id: Uuid(),
    user_id: Uuid(),
    status: Type.String({ description: 'High-level status (non-exhaustive).' }),
    events: Type.Array(OrderEvent),
    last_event: OrderEvent,
    patient_details: Nullable(open({ dob: Type.String(), gender: Type.String() })),
    patient_address: Nullable(AddressView),
    shipping_details: Nullable(AddressView),
    details: open({ type: Type.String(), data: open({ id: Type.String(), created_at: Timestamp(), updated_at: Timestamp() }) }),
    lab_test: open({ name: Type.String(), description: Type.String(), method: Type.String() }),
    sample_id: Type.String(),
    health_insurance_id: Nullable(Type.String()),
    notes: Type.String(),
    activate_by: Nullable(DateString()),
    has_abn: Type.Boolean(),
    origin: Type.String(),
    requisition_form_url: Nullable(Type.String({ format: 'uri' })),
    order_transaction: open({ id: Uuid(), status: Type.String(), orders: Type.Array(open({ id: Uuid(), origin: Type.String() })) }),
    interpretation: Nullable(Type.String()),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { $id: 'ClientFacingOrder' },
);

export const PostOrderResponse = Type.Object({ order: ClientFacingOrder, status: Type.String(), message: Type.String() }, { $id: 'PostOrderResponse' });
export const PatchOrderResponse = Type.Object(
  {
    order: Type.Object({ id: Uuid(), team_id: Uuid(), user_id: Uuid(), activate_by: Nullable(DateString()), status: Type.String() }),
    status: Type.String(),
    message: Type.String(),
  },
  { $id: 'PatchOrderResponse' },
);
export const OrderList = Type.Object(
  {
    orders: Type.Array(ClientFacingOrder),
    total: Type.Integer(),
    page: Type.Integer(),
    size: Type.Integer(),
    next_cursor: Nullable(
      Type.String({ description: 'Pass as `next_cursor` for the next page (faster than `page` deep into a list); null on the last page.' }),
    ),
  },
  { $id: 'GetOrdersResponse' },
);
export const SimulationResponse = Type.Object(
  {
    success: Type.Literal(true),
    order_id: Type.String(),
    final_status: Type.String({ description: 'Where the simulation ends (dotted OrderStatus).' }),
    delay: Type.Integer({ description: 'Seconds between the simulated status updates.' }),
    detail: Type.String(),
  },
  { $id: 'SimulationResponse', description: 'The simulation was accepted; the order moves on as its status events (labtest.order.updated) say.' },
);

const BiomarkerResult = open({
  name: Type.String(),
  slug: Type.String(),
  value: Type.Number({ description: 'Deprecated: read `result` according to `type`; -1 for non-numeric results.' }),
  result: Type.String(),
  type: StringEnum(['numeric', 'range', 'comment', 'coded_value'] as const),
  unit: Nullable(Type.String()),
  timestamp: Nullable(Timestamp()),
  reference_range: Nullable(Type.String()),
  min_range_value: Nullable(Type.Number()),
  max_range_value: Nullable(Type.Number()),
  is_above_max_range: Nullable(Type.Boolean()),
  is_below_min_range: Nullable(Type.Boolean()),
  interpretation: Type.String(),
  loinc: Nullable(Type.String()),
});
export const ResultMetadata = open(
  {
    age: Type.String({ description: 'Age in years at collection (a string, as the reference API sends it).' }),
    dob: Type.String(),
    patient: Type.String(),
    laboratory: Nullable(Type.String()),
    date_reported: Type.String(),
    date_collected: Nullable(Type.String()),
    specimen_number: Type.String(),
    status: Type.String(),
    interpretation: Type.String(),
  },
  { $id: 'LabResultsMetadata' },
);
export const LabResultsRaw = Type.Object(
  {
    metadata: ResultMetadata,
    results: Type.Array(BiomarkerResult),
    missing_results: Type.Array(open({ name: Type.String(), slug: Type.String(), inferred_failure_type: Type.String() })),
    sample_information: Type.Record(Type.String(), Type.Unknown()),
    order_transaction: Nullable(open({ id: Uuid(), status: Type.String() })),
  },
  { $id: 'LabResultsRaw' },
);

export const SignedDocumentQuery = Type.Object(
  {
    expires: Type.Integer({ minimum: 0, maximum: 99999999999, description: 'Expiry, Unix seconds.' }),
    signature: Type.String({ minLength: 1, maxLength: 128 }),
  },
  { additionalProperties: true },
);
