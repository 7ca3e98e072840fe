import { Type, type TSchema } from '@sinclair/typebox';
import resources from '../lib/catalogue/resources.json';
import { Nullable, Timestamp } from './common';
import { ClientFacingOrder } from './lab-order';
import { LabResultReviewEvent } from './lab-result-reviews';

/**
 * The event types this service emits: name, description and JSON Schema of `data`. Event types are an open
 * set (receivers must tolerate unknown types); this catalogue lists what exists today and is served by
 * `GET /v1/org/{org_id}/team/{team_id}/{environment}/webhook/event_types`.
 */
export interface EventTypeEntry {
  name: string;
  description: string;
  schema: TSchema;
  /** Sample `data` sent by the test endpoint when this type is named. */
  sample: Record<string, unknown>;
}

const Source = Type.Object(
  { name: Type.String(), slug: Type.String(), logo: Type.String() },
  { additionalProperties: true, description: 'The provider the data came from.' },
);
const open = (props: Record<string, TSchema>, description: string) => Type.Object(props, { additionalProperties: true, description });
const sampleSource = { name: 'Demo', slug: 'demo', logo: 'https://example.com/demo.svg' };
const sampleUser = '00000000-0000-4000-8000-000000000000';

const Sample = Type.Object(
  {
    timestamp: Timestamp(),
    timezone_offset: Nullable(Type.Integer()),
    type: Nullable(Type.String()),
    unit: Type.String(),
    value: Type.Number(),
    start: Type.Optional(Timestamp()),
    end: Type.Optional(Timestamp()),
  },
  { additionalProperties: true },
);

/** Summary resources carry the summary's fields directly in `data`; the rest are timeseries. */
const SUMMARY = new Set(['profile', 'activity', 'sleep', 'body', 'workouts', 'meal', 'menstrual_cycle', 'electrocardiogram']);
/** Catalogue resources that are not wearable data (orders, connections, devices have their own events). */
export const NOT_DATA = new Set(['connection', 'order', 'result', 'match_review', 'appointment', 'device', 'device_legacy']);

/** What a `historical.data.<resource>.created` event carries: the pulled range, not the data. */
const historicalSchema = open(
  {
    user_id: Type.String(),
    start_date: Type.String({ format: 'date-time' }),
    end_date: Type.String({ format: 'date-time' }),
    is_final: Type.Boolean(),
    provider: Type.String(),
  },
  'The range of days the history pull covered; the data itself is read over the summary and timeseries endpoints.',
);

function dataEvents(): EventTypeEntry[] {
  const out: EventTypeEntry[] = [];
  for (const r of resources as string[]) {
    if (NOT_DATA.has(r)) continue;
    let schema: TSchema;
    let sample: Record<string, unknown>;
    if (r === 'workout_stream') {
      schema = open(
        {
          user_id: Type.String(),
          source: Source,
          workout_id: Type.String(),
          provider_id: Type.String(),
          sport: open({ id: Type.Integer(), name: Type.String(), slug: Type.String() }, 'Sport of the workout.'),
          message: Type.String(),
        },
        'Shallow: the stream itself is fetched over GET /v2/timeseries/workouts/{workout_id}/stream.',
      );
      sample = {
        user_id: sampleUser,
        source: sampleSource,
        workout_id: 'w1',
        provider_id: 'p1',
        sport: { id: 1, name: 'Running', slug: 'running' },
        message: 'The workout stream is available.',
      };
    } else if (SUMMARY.has(r)) {
      schema = open(
        { id: Type.String(), user_id: Type.String(), source: Source },
        `All fields of the ${r} summary; a later version with the same id replaces earlier ones.`,
      );
      sample = { id: 'summary-1', user_id: sampleUser, source: sampleSource, calendar_date: '2024-01-01' };
    } else {
      schema = open(
        { user_id: Type.String(), source: Source, source_id: Type.Integer(), data: Type.Array(Sample) },
        `${r} samples; a sample is identified by resource, source provider, source type and timestamp (later values replace earlier ones).`,
      );
      sample = {
        user_id: sampleUser,
        source: sampleSource,
        source_id: 1,
        data: [{ timestamp: '2024-01-01T00:00:00+00:00', timezone_offset: 0, type: null, unit: 'unit', value: 1 }],
      };
    }
    out.push(
      { name: `daily.data.${r}.created`, description: `New ${r} data for a user.`, schema, sample },
      { name: `daily.data.${r}.updated`, description: `Revised ${r} data for a user.`, schema, sample },
      {
        name: `historical.data.${r}.created`,
        description: `A connection's ${r} history has been pulled (GET /v2/summary or /v2/timeseries reads it); sent once per connection and resource.`,
        schema: historicalSchema,
        sample: { user_id: sampleUser, start_date: '2024-01-01T00:00:00.000Z', end_date: '2024-01-30T23:59:59.999Z', is_final: true, provider: 'fitbit' },
      },
    );
  }
  return out;
}

/** The full order as returned by GET /v3/order/{order_id}. */
const Order = ClientFacingOrder;
const sampleAt = '2024-01-01T00:00:00+00:00';
const sampleEvent = { id: 1, created_at: sampleAt, status: 'received.testkit.ordered', status_detail: null };
const sampleAddress = {
  receiver_name: 'Ana Smith',
  first_line: '123 Main St',
  second_line: '',
  city: 'San Francisco',
  state: 'CA',
  zip: '94105',
  country: 'United States',
  phone_number: '+14155552671',
};
const sampleOrderId = '00000000-0000-4000-8000-0000000000a1';
const sampleOrder = {
  id: sampleOrderId,
  team_id: sampleUser,
  user_id: sampleUser,
  status: 'received',
  events: [sampleEvent],
  last_event: sampleEvent,
  patient_details: { first_name: 'Ana', last_name: 'Smith', dob: '1988-04-12', gender: 'female', phone_number: '+14155552671', email: 'ana@example.com' },
  patient_address: sampleAddress,
  shipping_details: sampleAddress,
  details: { type: 'testkit', data: { id: '00000000-0000-4000-8000-0000000000d1', shipment: null, created_at: sampleAt, updated_at: sampleAt } },
  lab_test: {
    id: '5b0f6c1e-2a41-4c8e-9d3b-7a1e0c2f4b11',
    name: 'Lipid Panel (at-home kit)',
    description: 'Lipid panel from a dried blood spot.',
    method: 'testkit',
  },
  sample_id: 'HB0000000001',
  health_insurance_id: null,
  notes: '',
  activate_by: null,
  has_abn: false,
  origin: 'initial',
  requisition_form_url: null,
  order_transaction: { id: '00000000-0000-4000-8000-0000000000e1', status: 'active', orders: [{ id: sampleOrderId, origin: 'initial' }] },
  interpretation: null,
  created_at: sampleAt,
  updated_at: sampleAt,
};

const sampleReview = {
  id: '01900000-0000-7000-8000-000000000001',
  org_id: sampleUser,
  lab_account_id: '01900000-0000-7000-8000-000000000002',
  lab_slug: 'quest',
  status: 'pending',
  reason: 'no_matching_order',
  detail: 'No order of this organisation has placer number HB0000000000AB.',
  control_id: 'MSG00001',
  placer_numbers: ['HB0000000000AB'],
  filler_numbers: ['ACC123'],
  services: ['57698-3 Lipid panel with direct LDL - Serum or Plasma'],
  matched_order_id: null,
  created_at: '2026-01-01T00:00:00.000Z',
  updated_at: '2026-01-01T00:00:00.000Z',
};

export const EVENT_CATALOGUE: EventTypeEntry[] = [
  {
    name: 'webhook.test',
    description: 'Sent by POST .../webhook/{webhook_id}/test to exercise a receiver; carries no user data.',
    schema: open({ message: Type.String(), webhook_id: Type.String() }, 'Test event.'),
    sample: { message: 'This is a test event from Healthbridge.' },
  },
  {
    name: 'pipeline.test',
    description: 'Sent by POST .../pipeline/{pipeline_id}/test to exercise a pipeline (by its first route); carries no user data.',
    schema: open({ message: Type.String(), pipeline_id: Type.String() }, 'Test event.'),
    sample: { message: 'This is a test event from Healthbridge.' },
  },
  {
    name: 'webhook.disabled',
    description:
      'A webhook endpoint of the team was disabled: it answered 410 Gone, or failed for longer than WEBHOOK_DISABLE_AFTER_MS. Enable it with PATCH disabled=false, then recover.',
    schema: open(
      { webhook_id: Type.String(), reason: Type.String({ description: 'gone or failing' }), failing_since: Nullable(Timestamp()), disabled_at: Timestamp() },
      'The disabled endpoint.',
    ),
    sample: { webhook_id: sampleUser, reason: 'failing', failing_since: '2026-01-01T00:00:00.000Z', disabled_at: '2026-01-06T00:00:00.000Z' },
  },
  {
    name: 'pipeline.disabled',
    description: 'A pipeline of the team was disabled: its broker failed for longer than WEBHOOK_DISABLE_AFTER_MS. Enable it (POST …/enable), then recover.',
    schema: open(
      { pipeline_id: Type.String(), reason: Type.String({ description: 'failing' }), failing_since: Nullable(Timestamp()), disabled_at: Timestamp() },
      'The disabled pipeline.',
    ),
    sample: { pipeline_id: sampleUser, reason: 'failing', failing_since: '2026-01-01T00:00:00.000Z', disabled_at: '2026-01-06T00:00:00.000Z' },
  },
  {
    name: 'provider.connection.created',
    description: 'A user connected a provider.',
    schema: open(
      { user_id: Type.String(), provider: Source, source: Type.Optional(Source), resource_availability: Type.Optional(Type.Unknown()) },
      'The new connection.',
    ),
    sample: { user_id: sampleUser, provider: sampleSource, source: sampleSource },
  },
  {
    name: 'provider.connection.error',
    description: 'A connection needs attention (e.g. the user revoked access).',
    schema: open({ user_id: Type.String(), provider: Source, message: Type.String(), error_type: Type.String() }, 'What went wrong.'),
    sample: { user_id: sampleUser, provider: sampleSource, message: 'Access revoked', error_type: 'token_revoked' },
  },
  { name: 'labtest.order.created', description: 'A lab order was created (status ordered).', schema: Order, sample: sampleOrder },
  { name: 'labtest.order.updated', description: 'Every later status change of a lab order.', schema: Order, sample: sampleOrder },
  {
    name: 'labtest.result.critical',
    description: 'A result has a critical value.',
    schema: open(
      { order_id: Type.String(), sample_id: Type.String(), status: Type.String(), interpretation: Type.String(), user_id: Type.String() },
      'The critical result.',
    ),
    sample: { order_id: 'order-1', sample_id: 's1', status: 'final', interpretation: 'critical', user_id: sampleUser },
  },
  {
    name: 'labtest.match_review.created',
    description:
      "A lab's result matched no order of the organisation (or one that cannot take it) and waits in the review inbox (GET /v1/org/{org_id}/lab_result_review/{environment}/{region}). Sent to every team of the organisation.",
    schema: LabResultReviewEvent,
    sample: sampleReview,
  },
  {
    name: 'labtest.match_review.updated',
    description: 'A review was settled: matched to an order (whose own events follow) or rejected.',
    schema: LabResultReviewEvent,
    sample: { ...sampleReview, status: 'matched', matched_order_id: sampleUser },
  },
  ...dataEvents(),
];

const byName = new Map(EVENT_CATALOGUE.map((e) => [e.name, e]));
export const findEventType = (name: string): EventTypeEntry | undefined => byName.get(name);

/** Event type names are dot-hierarchical `[a-zA-Z0-9_]` segments (Standard Webhooks). */
export const EVENT_TYPE_PATTERN = '^[a-zA-Z0-9_]+(\\.[a-zA-Z0-9_]+)*$';
