import { Type, type Static } from '@sinclair/typebox';
import { COLLECTION_METHODS } from '../lib/labs/statuses';
import { Nullable, StringEnum } from './common';

/** Entries of lib/catalogue/lab-catalogue.json (validated at start-up), shaped like the reference API's lab objects. */
export const SAMPLE_TYPES = ['dried_blood_spot', 'arm_collector', 'serum', 'saliva', 'urine', 'stool'] as const;
export const RESULT_TYPES = ['numeric', 'range', 'comment', 'coded_value'] as const;
/** A lab may list on-site collection (reference API vocabulary); lab tests use only the methods orders support. */
export const LAB_COLLECTION_METHODS = [...COLLECTION_METHODS, 'on_site_collection'] as const;

const Slug = Type.String({ pattern: '^[a-z0-9_-]+$' });
const Range = Type.Object({ low: Nullable(Type.Number()), high: Nullable(Type.Number()) }, { additionalProperties: false });

export const Lab = Type.Object(
  {
    id: Type.Integer({ minimum: 1 }),
    slug: Slug,
    name: Type.String({ minLength: 1 }),
    first_line_address: Type.String(),
    city: Type.String(),
    zipcode: Type.String(),
    collection_methods: Type.Array(StringEnum(LAB_COLLECTION_METHODS), { minItems: 1, uniqueItems: true }),
    sample_types: Type.Array(StringEnum(SAMPLE_TYPES), { minItems: 1, uniqueItems: true }),
    logo_url: Nullable(Type.String({ format: 'uri' })),
    clia_number: Type.String({ pattern: '^\\d{2}D\\d{7}$', description: 'CLIA certificate number of the performing laboratory.' }),
  },
  { additionalProperties: false },
);
export type Lab = Static<typeof Lab>;

export const LabMarker = Type.Object(
  {
    id: Type.Integer({ minimum: 1 }),
    slug: Slug,
    name: Type.String({ minLength: 1 }),
    description: Type.String(),
    lab_id: Type.Integer(),
    provider_id: Type.String({ description: "The lab's own order code." }),
    type: StringEnum(['biomarker', 'panel'] as const),
    unit: Nullable(Type.String()),
    result_type: Nullable(StringEnum(RESULT_TYPES)),
    loinc: Nullable(Type.String({ pattern: '^\\d{1,7}-\\d$' })),
    loinc_slug: Nullable(Type.String()),
    price: Type.String({ pattern: '^\\d+\\.\\d{2}$' }),
    a_la_carte_enabled: Type.Boolean(),
    common_tat_days: Type.Integer({ minimum: 0 }),
    worst_case_tat_days: Type.Integer({ minimum: 0 }),
    reference_range: Nullable(
      Type.Object({ low: Nullable(Type.Number()), high: Nullable(Type.Number()), text: Type.String() }, { additionalProperties: false }),
    ),
    /** At or beyond these limits a value is critical. */
    critical_range: Nullable(Range),
    /** coded_value markers: the possible results, the normal one first. */
    coded_values: Nullable(Type.Array(Type.String(), { minItems: 2 })),
    /** Panels: the biomarkers (slugs of the same lab) they report. */
    expected_results: Nullable(Type.Array(Slug, { minItems: 1 })),
  },
  { additionalProperties: false },
);
export type LabMarker = Static<typeof LabMarker>;

export const LabTestEntry = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    slug: Slug,
    name: Type.String({ minLength: 1 }),
    description: Type.String(),
    sample_type: StringEnum(SAMPLE_TYPES),
    method: StringEnum(COLLECTION_METHODS),
    status: StringEnum(['active', 'inactive'] as const),
    fasting: Type.Boolean(),
    lab_id: Type.Integer(),
    marker_ids: Type.Array(Type.Integer(), { minItems: 1, uniqueItems: true }),
    price: Type.Number({ minimum: 0 }),
    common_tat_days: Type.Integer({ minimum: 0 }),
    worst_case_tat_days: Type.Integer({ minimum: 0 }),
    has_collection_instructions: Type.Boolean(),
  },
  { additionalProperties: false },
);
export type LabTestEntry = Static<typeof LabTestEntry>;

export const LabCatalogueFile = Type.Object(
  {
    labs: Type.Array(Lab, { minItems: 1 }),
    markers: Type.Array(LabMarker, { minItems: 1 }),
    lab_tests: Type.Array(LabTestEntry, { minItems: 1 }),
  },
  { additionalProperties: false },
);
export type LabCatalogueFile = Static<typeof LabCatalogueFile>;
