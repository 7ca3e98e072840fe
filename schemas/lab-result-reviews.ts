import { Type } from '@sinclair/typebox';
import { Nullable, StringEnum, Timestamp, Uuid } from './common';
import { Environment, Region } from './management';

/** The review inbox of lab results that matched no order (`/v1/org/{org_id}/lab_result_review/{environment}/{region}`). */

export const LAB_REVIEW_STATUSES = ['pending', 'matched', 'rejected'] as const;
export const LAB_REVIEW_REASONS = ['no_matching_order', 'not_applicable'] as const;

export const LabResultReviewParams = Type.Object({ org_id: Uuid(), environment: Environment, region: Region, review_id: Uuid() });

/** What `labtest.match_review.created|updated` carries: no patient data. */
export const LabResultReviewEvent = Type.Object(
  {
    id: Uuid(),
    org_id: Uuid(),
    lab_account_id: Uuid(),
    lab_slug: Type.String(),
    status: StringEnum([...LAB_REVIEW_STATUSES], { description: 'pending, matched (to `matched_order_id`) or rejected. Non-exhaustive.' }),
    reason: StringEnum([...LAB_REVIEW_REASONS], {
      description: 'no_matching_order: no order of the organisation has its numbers (also an erased order); not_applicable: its order cannot take it.',
    }),
    detail: Type.String(),
    control_id: Nullable(Type.String({ description: "The lab's MSH-10." })),
    placer_numbers: Type.Array(Type.String(), { description: 'OBR-2 / ORC-2 of the results under review.' }),
    filler_numbers: Type.Array(Type.String(), { description: "OBR-3 / ORC-3: the lab's own accession numbers." }),
    services: Type.Array(Type.String(), { description: 'OBR-4: the tests, as the lab names them.' }),
    matched_order_id: Nullable(Uuid()),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { additionalProperties: true },
);

export const LabResultReview = Type.Object(
  {
    ...LabResultReviewEvent.properties,
    patient: Nullable(
      Type.Object(
        { id: Type.String({ description: 'PID-3' }), name: Type.String({ description: 'PID-5' }), dob: Type.String({ description: 'PID-7' }) },
        { description: 'The patient as the lab names them: what to match by.' },
      ),
    ),
    matched_team_id: Nullable(Uuid()),
    resolved_by: Nullable(Type.Object({ management_key_id: Uuid() })),
    resolved_at: Nullable(Timestamp()),
  },
  { $id: 'LabResultReview' },
);

export const LabResultReviewPage = Type.Object(
  {
    data: Type.Array(LabResultReview),
    next_cursor: Nullable(Type.String({ description: 'Pass as next_cursor for the next page; null on the last.' })),
  },
  { $id: 'LabResultReviewPage' },
);

export const LabResultReviewQuery = Type.Object(
  {
    status: Type.Optional(StringEnum([...LAB_REVIEW_STATUSES])),
    next_cursor: Type.Optional(Uuid()),
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 50 }),
  },
  { additionalProperties: true },
);

export const LabResultReviewMatchBody = Type.Object(
  { order_id: Uuid("An order of one of the organisation's teams, in this environment and region.") },
  { additionalProperties: false },
);
