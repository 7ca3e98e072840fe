import { Type, type Static } from '@sinclair/typebox';
import { DateString, Nullable, StringEnum } from './common';

/** The spec's "Insurance record" types (the schema is the contract, not the original's sample response). */

// Nested types carry no `$id`: ajv refuses one `$id` met twice in a schema (an address appears several times).
const Text = (maxLength = 200) => Type.String({ minLength: 1, maxLength });

export const InsuranceAddress = Type.Object(
  {
    first_line: Text(),
    second_line: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()], { default: '' })),
    country: Text(100),
    zip: Text(20),
    city: Text(),
    state: Text(100),
    access_notes: Type.Optional(Nullable(Type.String({ maxLength: 1000, description: 'At most 1000 characters.' }))),
  },
  { additionalProperties: false },
);

export const InsuranceGender = StringEnum(['female', 'male', 'other', 'unknown'], {
  description: 'Requests take these values; the enumeration is non-exhaustive, so clients reading records tolerate values added later.',
});

export const PersonDetails = Type.Object(
  {
    first_name: Text(),
    last_name: Text(),
    gender: InsuranceGender,
    address: InsuranceAddress,
    dob: DateString(),
    email: Type.String({ format: 'email', maxLength: 320 }),
    phone_number: Text(40),
  },
  { additionalProperties: false },
);

export const CompanyDetails = Type.Object({ name: Text(), address: InsuranceAddress }, { additionalProperties: false });

export const GuarantorDetails = Type.Object(
  {
    first_name: Text(),
    last_name: Text(),
    address: InsuranceAddress,
    phone_number: Text(40),
    household_income: Type.Optional(Nullable(Type.Integer({ minimum: 0 }))),
    household_size: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 100 }))),
    email: Type.Optional(Nullable(Type.String({ format: 'email', maxLength: 320 }))),
  },
  { additionalProperties: false },
);

export const Relationship = Type.String({
  minLength: 1,
  maxLength: 50,
  description: 'Self, Spouse or Other (non-exhaustive). A guarantor is required unless it is Self.',
  examples: ['Self', 'Spouse', 'Other'],
});

export const CreateInsuranceBody = Type.Object(
  {
    payor_code: Type.String({
      minLength: 1,
      maxLength: 50,
      description: 'A code of the payor catalogue (GET /v3/insurance/search/payor), e.g. MEDFED; or any code with `company`.',
    }),
    member_id: Text(100),
    group_id: Type.Optional(Nullable(Type.String({ maxLength: 100 }))),
    relationship: Relationship,
    insured: PersonDetails,
    guarantor: Type.Optional(Nullable(GuarantorDetails)),
    is_primary: Type.Boolean({ default: true }),
    company: Type.Optional(CompanyDetails),
  },
  {
    additionalProperties: false,
    $id: 'CreateInsuranceBody',
    // The guarantor is the insured themself for Self; anyone else needs one.
    if: { properties: { relationship: { const: 'Self' } }, required: ['relationship'] },
    else: { properties: { guarantor: { type: 'object' } }, required: ['guarantor'] },
  },
);
export type CreateInsuranceBody = Static<typeof CreateInsuranceBody>;

export const InsuranceRecord = Type.Object(
  {
    member_id: Type.String(),
    payor_code: Type.String(),
    relationship: Type.String(),
    insured: PersonDetails,
    company: CompanyDetails,
    group_id: Nullable(Type.String()),
    guarantor: Nullable(GuarantorDetails),
    is_primary: Type.Boolean(),
  },
  { $id: 'ClientFacingInsurance' },
);
export type InsuranceRecord = Static<typeof InsuranceRecord>;

export const LatestInsuranceQuery = Type.Object(
  { is_primary: Type.Boolean({ default: true, description: 'The latest primary (true) or secondary (false) record.' }) },
  { additionalProperties: true },
);

export const PayorEntry = Type.Object(
  {
    payor_code: Type.String({ pattern: '^[A-Z0-9_]+$' }),
    name: Type.String({ minLength: 1 }),
    aliases: Type.Array(Type.String()),
    org_address: InsuranceAddress,
    external_ids: Type.Record(Type.String(), Type.String(), { description: 'Clearing-house payor ids, by provider.' }),
  },
  { additionalProperties: false },
);
export type PayorEntry = Static<typeof PayorEntry>;

const PayorProvider = Type.String({ description: 'Clearing house: change_healthcare, availity, stedi, waystar, claim_md.' });
export const PayorSearchQuery = Type.Object(
  {
    insurance_name: Type.Optional(Type.String({ maxLength: 200, description: 'Part of the payor name or an alias, any case.' })),
    provider: Type.Optional(PayorProvider),
    provider_payor_id: Type.Optional(Type.String({ maxLength: 100, description: "The payor's id at `provider`." })),
  },
  { additionalProperties: true },
);
export const PayorSearchBody = Type.Object(
  {
    insurance_name: Type.Optional(Nullable(Type.String({ maxLength: 200 }))),
    provider: Type.Optional(Nullable(PayorProvider)),
    provider_id: Type.Optional(Nullable(Type.String({ maxLength: 100 }))),
  },
  { additionalProperties: false, $id: 'PayorSearchBody' },
);

const payorFields = {
  name: Type.String(),
  aliases: Type.Array(Type.String()),
  org_address: InsuranceAddress,
  source: Type.String({ description: 'platform (the shipped catalogue).' }),
};
export const PayorSearchResults = Type.Array(Type.Object({ payor_code: Type.String(), ...payorFields }), { $id: 'PayorSearchResults' });
export const PayorSearchResultsDeprecated = Type.Array(Type.Object({ code: Type.String(), ...payorFields }), { $id: 'PayorSearchResultsDeprecated' });
