import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { DateString, Nullable, StringEnum, SuccessResponse, Timestamp, Uuid } from './common';

/**
 * Wearable data (issue 9): summaries, timeseries, workout streams, connections, link, refresh and
 * introspection. Response schemas mirror the models of the official Python SDK (`vital` 2.1.569):
 * every field its model requires is required here; fields it treats as optional are `Optional(Nullable(...))`.
 * Response objects stay open (extra fields allowed) for forward compatibility. Enumerations the SDK marks
 * non-exhaustive are plain strings whose known values are listed in the description.
 */

// ---------- helpers ----------

/** Optional and nullable: the SDK accepts the key missing or null. */
const Opt = <T extends TSchema>(schema: T) => Type.Optional(Nullable(schema));
const OptNumber = (description?: string) => Opt(Type.Number({ description }));
const OptInteger = (description?: string) => Opt(Type.Integer({ description }));
const OptString = (description?: string) => Opt(Type.String({ description }));
const Open = { additionalProperties: true } as const;
/**
 * A copy without `$id`, for a schema nested more than once in one tree: ajv refuses a tree in which
 * one `$id` occurs twice ("resolves to more than one schema").
 */
const Unidentified = <T extends TSchema>(schema: T): T => strip$id(schema) as T;
function strip$id(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(strip$id);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string | symbol, unknown> = {};
  for (const key of Reflect.ownKeys(value)) {
    if (key !== '$id') out[key] = strip$id((value as Record<string | symbol, unknown>)[key]);
  }
  return out;
}

export const DemoProviders = ['apple_health_kit', 'fitbit', 'freestyle_libre', 'oura'] as const;
export const RetriableErrorTypes = ['provider_rate_limit_exceeded', 'provider_unavailable', 'transport_failure', 'resource_contention'] as const;
export const NonRetriableErrorTypes = ['non_retriable_error', 'unexpected_error', 'retry_quota_exhausted'] as const;
export const HistoricalPullStatuses = ['success', 'failure', 'in_progress', 'scheduled', 'retrying'] as const;
export const ConnectionErrorTypes = [
  'token_refresh_failed',
  'webhook_registration_failed',
  'user_not_found',
  'deregistered_per_provider',
  'required_scopes_not_granted',
  'provider_credential_error',
  'provider_password_expired',
  'unknown',
] as const;

/** A provider or resource slug (`oura`, `apple_health_kit`, `blood_oxygen`). */
const Slug = (description?: string) => Type.String({ pattern: '^[a-z0-9_]+$', maxLength: 64, description });

// ---------- source ----------

export const SummarySource = Type.Object(
  {
    provider: Type.String({ description: 'Provider slug, e.g. oura, fitbit, garmin.' }),
    type: OptString('App or device type that recorded the data; `unknown` when it cannot be inferred.'),
    app_id: OptString('Recording app (multi-source providers such as Apple Health, Health Connect).'),
    device_id: OptString('Recording device.'),
    sport: OptString('Workout-stream timeseries: sport slug of the workout; otherwise null.'),
    workout_id: OptString('Workout-stream timeseries: the workout id; otherwise null.'),
    name: OptString('Deprecated.'),
    slug: OptString('Deprecated: use provider.'),
    logo: OptString('Deprecated.'),
  },
  { ...Open, $id: 'ClientFacingSource', description: 'Where a summary or sample comes from (SDK ClientFacingSource). Only `provider` is required.' },
);
export type SummarySource = Static<typeof SummarySource>;

// ---------- summaries ----------

const HeartRateSummary = Type.Object(
  {
    avg_bpm: OptNumber(),
    min_bpm: OptNumber(),
    max_bpm: OptNumber(),
    resting_bpm: OptNumber(),
    avg_walking_bpm: OptNumber(),
  },
  Open,
);

const SummaryCommon = {
  id: Type.String({ description: 'Summary id; a later version with the same id replaces earlier ones.' }),
  user_id: Uuid('Service user id.'),
  source: SummarySource,
  created_at: Timestamp(),
  updated_at: Timestamp(),
};

export const ActivitySummary = Type.Object(
  {
    ...SummaryCommon,
    date: Timestamp('Deprecated: the day at 00:00 UTC. Use calendar_date.'),
    calendar_date: DateString('Day of the summary, YYYY-mm-dd.'),
    calories_total: OptNumber('kcal, including basal metabolic rate.'),
    calories_active: OptNumber('kcal.'),
    steps: OptInteger(),
    daily_movement: OptNumber('Deprecated. Metres.'),
    distance: OptNumber('Metres.'),
    low: OptNumber('Minutes of low intensity activity.'),
    medium: OptNumber('Minutes of medium intensity activity.'),
    high: OptNumber('Minutes of high intensity activity.'),
    floors_climbed: OptInteger(),
    time_zone: OptString('IANA time zone.'),
    timezone_offset: OptInteger('Seconds east of UTC.'),
    heart_rate: Opt(HeartRateSummary),
    wheelchair_use: Opt(Type.Boolean()),
    wheelchair_push: OptInteger(),
  },
  { ...Open, $id: 'ClientFacingActivity', description: 'Daily activity summary.' },
);
export type ActivitySummary = Static<typeof ActivitySummary>;

// ---------- timeseries ----------

const SampleCommon = {
  id: OptInteger('Deprecated.'),
  timezone_offset: OptInteger('Seconds east of UTC.'),
  type: OptString(
    'Sample type, often null. Must be a non-null string for cholesterol, ige, igg, electrocardiogram_voltage, ' +
      'heart_rate_alert, insulin_injection and stand_hour (the SDK requires it there).',
  ),
  unit: Type.String({
    description:
      'Unit, e.g. bpm (heartrate), mmol/L (glucose). Fixed for some resources (the SDK rejects any other): ' +
      'count (steps, floors_climbed, ...), kcal (calories_active, calories_basal), m (distance), % (afib_burden), °C, kg, cm, L, L/min, min, index, unit.',
  }),
  timestamp: Timestamp('Sample time (for interval samples: deprecated, equals start).'),
};
const SampleValue = Type.Union([Type.Number(), Type.String()], {
  description: 'A number; a string only for note samples; an integer for heart_rate_alert.',
});

export const TimeseriesPointSample = Type.Object(
  { ...SampleCommon, value: SampleValue },
  { ...Open, $id: 'TimeseriesPointSample', description: 'A point sample, e.g. heartrate, glucose, hrv, blood_oxygen.' },
);
export type TimeseriesPointSample = Static<typeof TimeseriesPointSample>;

export const TimeseriesIntervalSample = Type.Object(
  { ...SampleCommon, start: Timestamp('Interval start.'), end: Timestamp('Interval end.'), value: SampleValue },
  { ...Open, $id: 'TimeseriesIntervalSample', description: 'An interval sample, e.g. steps, calories_active, distance, hypnogram.' },
);
export type TimeseriesIntervalSample = Static<typeof TimeseriesIntervalSample>;

export const BloodPressureSample = Type.Object(
  {
    ...SampleCommon,
    systolic: Type.Number(),
    diastolic: Type.Number(),
    grouping: Opt(Type.Array(Type.Unknown())),
  },
  { ...Open, $id: 'BloodPressureSample', description: 'A blood pressure sample: systolic/diastolic instead of value.' },
);
export type BloodPressureSample = Static<typeof BloodPressureSample>;

export const TimeseriesSample = Type.Union([TimeseriesIntervalSample, TimeseriesPointSample, BloodPressureSample], {
  $id: 'TimeseriesSample',
  description: 'One timeseries sample: point, interval (adds start/end) or blood pressure (systolic/diastolic, no value).',
});
export type TimeseriesSample = Static<typeof TimeseriesSample>;

export const TimeseriesList = Type.Array(TimeseriesSample, {
  $id: 'TimeseriesList',
  description: 'Flat timeseries response: a bare array of samples, no cursor.',
});
export type TimeseriesList = Static<typeof TimeseriesList>;

export const TimeseriesGroup = Type.Object(
  { source: SummarySource, data: Type.Array(TimeseriesSample) },
  { ...Open, $id: 'TimeseriesGroup', description: 'The samples of one source.' },
);
export type TimeseriesGroup = Static<typeof TimeseriesGroup>;

export const GroupedTimeseriesResponse = Type.Object(
  {
    groups: Type.Record(Type.String(), Type.Array(TimeseriesGroup), {
      description: 'Provider slug -> groups of samples, one per source. Every value must be an array of groups (the SDK parses a map).',
    }),
    next: Nullable(Type.String({ description: 'Deprecated cursor; use next_cursor.' })),
    next_cursor: Nullable(Type.String({ description: 'Cursor of the next page; null on the last page.' })),
  },
  { ...Open, $id: 'GroupedTimeseriesResponse', description: 'Grouped timeseries response (SDK Grouped<Resource>Response).' },
);
export type GroupedTimeseriesResponse = Static<typeof GroupedTimeseriesResponse>;

export const SleepStream = Type.Object(
  {
    hrv: Opt(Type.Array(Unidentified(TimeseriesPointSample))),
    heartrate: Opt(Type.Array(Unidentified(TimeseriesPointSample))),
    hypnogram: Opt(Type.Array(Unidentified(TimeseriesIntervalSample), { description: 'deep=1, light=2, rem=3, awake=4, manual=5, missing_data=-1.' })),
    respiratory_rate: Opt(Type.Array(Unidentified(TimeseriesPointSample))),
  },
  { ...Open, $id: 'ClientFacingSleepStream', description: 'Timeseries recorded during one sleep.' },
);
export type SleepStream = Static<typeof SleepStream>;

export const SleepSummary = Type.Object(
  {
    ...SummaryCommon,
    date: Timestamp('Deprecated: use calendar_date.'),
    calendar_date: DateString('Day of the summary, YYYY-mm-dd.'),
    bedtime_start: Timestamp(),
    bedtime_stop: Timestamp(),
    type: Type.String({ description: 'Non-exhaustive: long_sleep, short_sleep, acknowledged_nap, unknown.' }),
    timezone_offset: OptInteger('Seconds east of UTC.'),
    duration: Type.Integer({ description: 'Seconds from bedtime_start to bedtime_stop.' }),
    total: Type.Integer({ description: 'Seconds asleep.' }),
    awake: Type.Integer({ description: 'Seconds.' }),
    light: Type.Integer({ description: 'Seconds.' }),
    rem: Type.Integer({ description: 'Seconds.' }),
    deep: Type.Integer({ description: 'Seconds.' }),
    score: OptInteger(),
    recovery_readiness_score: OptNumber(),
    hr_lowest: OptInteger(),
    hr_average: OptInteger(),
    hr_resting: OptInteger(),
    efficiency: OptNumber(),
    latency: OptInteger('Seconds.'),
    temperature_delta: OptNumber(),
    skin_temperature: OptNumber(),
    hr_dip: OptNumber(),
    state: OptString('Non-exhaustive: tentative, confirmed.'),
    average_hrv: OptNumber(),
    respiratory_rate: OptNumber(),
    sleep_stream: Opt(SleepStream),
  },
  { ...Open, $id: 'ClientFacingSleep', description: 'Sleep summary.' },
);
export type SleepSummary = Static<typeof SleepSummary>;

export const WorkoutSport = Type.Object(
  { id: Type.Integer(), name: Type.String(), slug: Type.String() },
  { ...Open, $id: 'ClientFacingSport', description: 'Sport of a workout.' },
);

export const WorkoutSummary = Type.Object(
  {
    ...SummaryCommon,
    title: OptString(),
    timezone_offset: OptInteger('Seconds east of UTC.'),
    average_hr: OptInteger(),
    max_hr: OptInteger(),
    distance: OptNumber('Metres.'),
    calendar_date: DateString('Day of the workout, YYYY-mm-dd.'),
    time_start: Timestamp(),
    time_end: Timestamp(),
    calories: OptNumber('kcal.'),
    sport: Opt(WorkoutSport),
    hr_zones: Opt(Type.Array(Type.Integer(), { description: 'Seconds in each heart-rate zone.' })),
    moving_time: OptInteger('Seconds.'),
    total_elevation_gain: OptNumber(),
    elev_high: OptNumber(),
    elev_low: OptNumber(),
    average_speed: OptNumber(),
    max_speed: OptNumber(),
    average_watts: OptNumber(),
    device_watts: OptNumber(),
    max_watts: OptNumber(),
    weighted_average_watts: OptNumber(),
    steps: OptInteger(),
    map: Opt(Type.Object({ polyline: OptString(), summary_polyline: OptString() }, Open)),
    provider_id: Type.String({ description: "The workout's id at the provider." }),
  },
  { ...Open, $id: 'ClientFacingWorkout', description: 'Workout summary.' },
);
export type WorkoutSummary = Static<typeof WorkoutSummary>;

export const BodySummary = Type.Object(
  {
    ...SummaryCommon,
    date: Timestamp('Deprecated: use calendar_date.'),
    calendar_date: DateString('Day of the measurement, YYYY-mm-dd.'),
    weight: OptNumber('kg.'),
    fat: OptNumber('Percent.'),
    water_percentage: OptNumber(),
    muscle_mass_percentage: OptNumber(),
    visceral_fat_index: OptNumber(),
    bone_mass_percentage: OptNumber(),
    body_mass_index: OptNumber(),
    lean_body_mass_kilogram: OptNumber(),
    waist_circumference_centimeter: OptNumber(),
  },
  { ...Open, $id: 'ClientFacingBody', description: 'Body measurement summary.' },
);
export type BodySummary = Static<typeof BodySummary>;

export const ProfileSummary = Type.Object(
  {
    ...SummaryCommon,
    height: OptInteger('Centimetres (an integer: the SDK rejects fractions).'),
    birth_date: OptString('YYYY-mm-dd.'),
    wheelchair_use: Opt(Type.Boolean()),
    gender: OptString('Non-exhaustive: female, male, other, unknown.'),
    sex: OptString('Non-exhaustive: female, male, other.'),
  },
  { ...Open, $id: 'ClientFacingProfile', description: 'Profile of the user as reported by a provider.' },
);
export type ProfileSummary = Static<typeof ProfileSummary>;

const Energy = Type.Object({ unit: Type.Optional(Type.Literal('kcal')), value: Type.Number() }, { ...Open, description: 'Energy; unit is always kcal.' });
const Macros = Type.Object(
  {
    carbs: OptNumber(),
    protein: OptNumber(),
    fats: Opt(
      Type.Object(
        {
          saturated: OptNumber(),
          monounsaturated: OptNumber(),
          polyunsaturated: OptNumber(),
          omega3: OptNumber(),
          omega6: OptNumber(),
          total: OptNumber(),
        },
        Open,
      ),
    ),
    alcohol: OptNumber(),
    water: OptNumber(),
    fibre: OptNumber(),
    sugar: OptNumber(),
    cholesterol: OptNumber(),
  },
  Open,
);
const NutrientMap = Opt(Type.Record(Type.String(), Nullable(Type.Number())));
const Micros = Type.Object({ minerals: NutrientMap, trace_elements: NutrientMap, vitamins: NutrientMap }, Open);
const Food = Type.Object({ energy: Opt(Energy), macros: Opt(Macros), micros: Opt(Micros) }, Open);

export const MealSummary = Type.Object(
  {
    ...SummaryCommon,
    priority_id: Type.Integer(),
    source_id: Type.Integer(),
    provider_id: Type.String({ description: "The meal's id at the provider." }),
    timestamp: Timestamp(),
    calendar_date: Type.Optional(DateString('Day of the meal, YYYY-mm-dd.')),
    name: Type.String(),
    energy: Opt(Energy),
    macros: Opt(Macros),
    micros: Opt(Micros),
    data: Opt(Type.Record(Type.String(), Food, { description: 'Food name -> nutrients.' })),
    source_app_id: OptString(),
    source_device_id: OptString(),
  },
  { ...Open, $id: 'MealInDBBase_ClientFacingSource_', description: 'A meal (SDK MealInDbBaseClientFacingSource).' },
);
export type MealSummary = Static<typeof MealSummary>;

export const ActivityResponse = Type.Object(
  { activity: Type.Array(ActivitySummary) },
  { ...Open, $id: 'ClientActivityResponse', description: 'Activity summaries.' },
);
export type ActivityResponse = Static<typeof ActivityResponse>;
export const SleepResponse = Type.Object({ sleep: Type.Array(SleepSummary) }, { ...Open, $id: 'ClientSleepResponse', description: 'Sleep summaries.' });
export type SleepResponse = Static<typeof SleepResponse>;
export const WorkoutsResponse = Type.Object(
  { workouts: Type.Array(WorkoutSummary) },
  { ...Open, $id: 'ClientWorkoutResponse', description: 'Workout summaries.' },
);
export type WorkoutsResponse = Static<typeof WorkoutsResponse>;
export const BodyResponse = Type.Object({ body: Type.Array(BodySummary) }, { ...Open, $id: 'ClientBodyResponse', description: 'Body summaries.' });
export type BodyResponse = Static<typeof BodyResponse>;
export const MealResponse = Type.Object({ meals: Type.Array(MealSummary) }, { ...Open, $id: 'ClientFacingMealResponse', description: 'Meals.' });
export type MealResponse = Static<typeof MealResponse>;

// ---------- workout stream ----------

const StreamNumbers = (description: string) => Opt(Type.Array(Nullable(Type.Number()), { description }));
export const WorkoutStream = Type.Object(
  {
    cadence: StreamNumbers('rpm.'),
    time: Opt(Type.Array(Type.Integer(), { description: 'Unix seconds (integers: no nulls).' })),
    altitude: StreamNumbers('Metres.'),
    velocity_smooth: StreamNumbers('m/s.'),
    heartrate: Opt(Type.Array(Nullable(Type.Integer()), { description: 'bpm (integers).' })),
    lat: StreamNumbers('Degrees.'),
    lng: StreamNumbers('Degrees.'),
    distance: StreamNumbers('Metres.'),
    power: StreamNumbers('Watts.'),
    resistance: StreamNumbers(''),
    temperature: StreamNumbers('°C.'),
  },
  { ...Open, $id: 'ClientFacingStream', description: 'Workout stream: parallel arrays indexed like `time`.' },
);
export type WorkoutStream = Static<typeof WorkoutStream>;

// ---------- connections ----------

const ScopeRequirementsStr = Type.Object({ required: Type.Array(Type.String()), optional: Type.Array(Type.String()) }, Open);

export const ResourceAvailability = Type.Object(
  {
    status: Type.String({ description: 'Non-exhaustive: available, unavailable.' }),
    scope_requirements: Opt(Type.Object({ user_granted: ScopeRequirementsStr, user_denied: ScopeRequirementsStr }, Open)),
  },
  { ...Open, $id: 'ResourceAvailability', description: 'Whether a resource can be read through a connection.' },
);

export const ConnectionErrorDetails = Type.Object(
  {
    error_type: Type.String({ description: `Non-exhaustive: ${ConnectionErrorTypes.join(', ')}.` }),
    error_message: Type.String(),
    errored_at: Timestamp(),
  },
  { ...Open, $id: 'ClientFacingConnectionErrorDetails', description: 'Why a connection is in error.' },
);

export const ConnectedProvider = Type.Object(
  {
    name: Type.String(),
    slug: Type.String(),
    logo: Type.String(),
    created_on: Timestamp(),
    status: Type.String({ description: 'Non-exhaustive: connected, error, paused.' }),
    external_user_id: OptString("The user's id at the provider."),
    error_details: Opt(ConnectionErrorDetails),
    resource_availability: Type.Record(Type.String(), ResourceAvailability, { description: 'Resource -> availability.' }),
  },
  { ...Open, $id: 'ClientFacingProviderWithStatus', description: 'A connection of a user to a provider.' },
);
export type ConnectedProvider = Static<typeof ConnectedProvider>;

export const UserProvidersResponse = Type.Object(
  { providers: Type.Array(ConnectedProvider) },
  {
    // The SDK parses this body as Dict[str, List[ClientFacingProviderWithStatus]]: any extra key must be such a list.
    additionalProperties: Type.Array(Unidentified(ConnectedProvider)),
    $id: 'UserProvidersResponse',
    description: "A user's connections.",
  },
);
export type UserProvidersResponse = Static<typeof UserProvidersResponse>;

// ---------- link ----------

export const LinkTokenBody = Type.Object(
  {
    user_id: Uuid('Service user id.'),
    provider: Type.Optional(Nullable(Slug('Open the widget directly on this provider.'))),
    redirect_url: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 2048, description: 'Where the widget sends the user when done.' }))),
    filter_on_providers: Type.Optional(Nullable(Type.Array(Slug(), { maxItems: 100, description: 'Only offer these providers.' }))),
    on_error: Type.Optional(Nullable(Type.Literal('redirect'))),
    on_close: Type.Optional(Nullable(Type.Literal('redirect'))),
  },
  { additionalProperties: false, $id: 'LinkTokenExchange', description: 'Request a one-time link token (valid 10 minutes).' },
);
export type LinkTokenBody = Static<typeof LinkTokenBody>;

export const LinkTokenResponse = Type.Object(
  { link_token: Type.String(), link_web_url: Type.String() },
  { ...Open, $id: 'LinkTokenExchangeResponse', description: 'A one-time link token and the widget URL that uses it.' },
);
export type LinkTokenResponse = Static<typeof LinkTokenResponse>;

export const SandboxFault = Type.Object(
  {
    resource: Slug('Resource whose pulls fail, e.g. sleep, heartrate.'),
    transient_failures: Type.Optional(Type.Integer({ minimum: 0, maximum: 20, description: 'Retriable failures before it succeeds.' })),
    permanent: Type.Optional(Type.Boolean({ description: 'Fail without retrying.' })),
    stall_seconds: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 600,
        description:
          'Every pull of it hangs this long, then fails on our side (no provider error): shows a pull that cannot make progress being given up (WEARABLE_PULL_GIVE_UP_SECONDS) and recorded as unexpected_error.',
      }),
    ),
    error_type: Type.Optional(
      StringEnum([...RetriableErrorTypes, 'non_retriable_error', 'unexpected_error', 'token_refresh_failed', 'provider_credential_error'], {
        description:
          'Retriable types fail transiently; token_refresh_failed / provider_credential_error also break the connection (provider.connection.error).',
      }),
    ),
  },
  { additionalProperties: false },
);

export const DemoConnectBody = Type.Object(
  {
    user_id: Uuid('Service user id.'),
    provider: StringEnum(DemoProviders),
    sandbox_faults: Type.Optional(Type.Array(SandboxFault, { maxItems: 50, description: 'Test hook (ours): make the demo adapter fail on demand.' })),
  },
  { additionalProperties: false, $id: 'DemoConnectBody', description: 'Connect a demo provider (sandbox only).' },
);
export type DemoConnectBody = Static<typeof DemoConnectBody>;

export const DemoConnectResponse = Type.Object(
  { success: Type.Boolean(), detail: Type.String() },
  { ...Open, $id: 'DemoConnectionStatus', description: 'Outcome of a demo connection.' },
);
export type DemoConnectResponse = Static<typeof DemoConnectResponse>;

/** `{success}`: the schema in common.ts (its $id is UserSuccessResponse). */
export const UserSuccessResponse = SuccessResponse;
export type UserSuccessResponse = Static<typeof UserSuccessResponse>;

// ---------- refresh ----------

export const UserRefreshResponse = Type.Object(
  {
    success: Type.Boolean(),
    user_id: Uuid(),
    refreshed_sources: Type.Array(Type.String()),
    in_progress_sources: Type.Array(Type.String()),
    failed_sources: Type.Array(Type.String()),
  },
  { ...Open, $id: 'UserRefreshSuccessResponse', description: 'Refresh outcome per source (`<provider>/<resource>`).' },
);
export type UserRefreshResponse = Static<typeof UserRefreshResponse>;

// ---------- introspection ----------

export const HistoricalPullStats = Type.Object(
  {
    status: Type.String({ description: `Non-exhaustive: ${HistoricalPullStatuses.join(', ')}.` }),
    range_start: Opt(Timestamp()),
    range_end: Opt(Timestamp()),
    timeline: Type.Object({ scheduled_at: Timestamp(), started_at: Opt(Timestamp()), ended_at: Opt(Timestamp()) }, Open),
    days_with_data: Type.Optional(Nullable(Type.Integer({ minimum: 0, default: 0 }))),
    release: Type.String({ description: 'Release of the service that ran the pull.' }),
    trace_id: OptString(),
    error_details: OptString(`A string, non-exhaustive. Retriable: ${RetriableErrorTypes.join(', ')}; non-retriable: ${NonRetriableErrorTypes.join(', ')}.`),
  },
  { ...Open, $id: 'SingleHistoricalPullStatistics', description: 'One historical pull of one resource.' },
);
export type HistoricalPullStats = Static<typeof HistoricalPullStats>;

const Paging = {
  next: Nullable(Type.String({ description: 'Deprecated cursor; use next_cursor.' })),
  next_cursor: Nullable(Type.String({ description: 'Cursor of the next page of users; null on the last page.' })),
};

export const HistoricalPullIntrospection = Type.Object(
  {
    data: Type.Array(
      Type.Object(
        {
          user_id: Uuid(),
          provider: Type.Record(
            Type.String(),
            Type.Object(
              {
                pulled: Type.Record(Type.String(), HistoricalPullStats, { description: 'Resource -> statistics.' }),
                not_pulled: Type.Array(Type.String(), { description: 'Resources not pulled.' }),
              },
              Open,
            ),
            { description: 'Provider slug -> pulls.' },
          ),
        },
        Open,
      ),
    ),
    ...Paging,
  },
  { ...Open, $id: 'UserHistoricalPullsResponse', description: 'Historical pulls per user, provider and resource.' },
);
export type HistoricalPullIntrospection = Static<typeof HistoricalPullIntrospection>;

export const ResourceStats = Type.Object(
  {
    last_attempt: Opt(Type.Object({ timestamp: Timestamp(), status: Type.String({ description: 'Non-exhaustive: success, failure.' }) }, Open)),
    oldest_data: Opt(Timestamp()),
    newest_data: Opt(Timestamp()),
    sent_count: OptInteger('Items sent.'),
  },
  { ...Open, $id: 'SingleResourceStatistics', description: 'Ingestion statistics of one resource.' },
);
export type ResourceStats = Static<typeof ResourceStats>;

export const ResourcesIntrospection = Type.Object(
  {
    data: Type.Array(
      Type.Object(
        {
          user_id: Uuid(),
          provider: Type.Record(Type.String(), Type.Record(Type.String(), ResourceStats), {
            description: 'Provider slug -> resource -> statistics.',
          }),
        },
        Open,
      ),
    ),
    ...Paging,
  },
  { ...Open, $id: 'UserResourcesResponse', description: 'Ingestion statistics per user, provider and resource.' },
);
export type ResourcesIntrospection = Static<typeof ResourcesIntrospection>;

// ---------- queries and path parameters ----------

/** YYYY-MM-DD, or an ISO 8601 date-time (offset optional). */
export const DATE_OR_DATETIME_PATTERN =
  '^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])' + '([Tt ]([01]\\d|2[0-3]):[0-5]\\d(:[0-5]\\d(\\.\\d{1,9})?)?([Zz]|[+-]([01]\\d|2[0-3]):?[0-5]\\d)?)?$';
const DateOrDateTime = (description: string) =>
  Type.String({
    pattern: DATE_OR_DATETIME_PATTERN,
    description,
    'x-messages': { pattern: 'Input should be a valid date (YYYY-mm-dd) or ISO 8601 date-time' },
  });
const ProviderFilter = Type.Optional(Type.String({ pattern: '^[a-z0-9_]*$', maxLength: 64, description: 'Only this provider (slug); empty for all.' }));
const StartDate = DateOrDateTime('Inclusive; a date means 00:00:00.');
const EndDate = Type.Optional(DateOrDateTime('Inclusive; a date means 23:59:59.'));
const Cursor = (description: string) => Type.Optional(Type.String({ minLength: 1, maxLength: 2048, description }));

export const SummaryQuery = Type.Object(
  { start_date: StartDate, end_date: EndDate, provider: ProviderFilter },
  { additionalProperties: true, $id: 'SummaryQuery', description: 'Query of the summary endpoints.' },
);
export type SummaryQuery = Static<typeof SummaryQuery>;

export const ProfileQuery = Type.Object(
  { provider: ProviderFilter },
  { additionalProperties: true, $id: 'ProfileQuery', description: 'Query of the profile endpoint.' },
);
export type ProfileQuery = Static<typeof ProfileQuery>;

const GlucoseUnit = Type.Optional(
  StringEnum(['mg/dL', 'mmol/L'], {
    description: 'Ours, glucose only: the unit samples are returned in (default: as the source reported them, e.g. mg/dL from Dexcom, mmol/L from Libre).',
  }),
);

export const TimeseriesQuery = Type.Object(
  { start_date: StartDate, end_date: EndDate, provider: ProviderFilter, unit: GlucoseUnit },
  { additionalProperties: true, $id: 'TimeseriesQuery', description: 'Query of the flat timeseries endpoints.' },
);
export type TimeseriesQuery = Static<typeof TimeseriesQuery>;

export const GroupedTimeseriesQuery = Type.Object(
  {
    start_date: StartDate,
    end_date: EndDate,
    provider: ProviderFilter,
    unit: GlucoseUnit,
    cursor: Cursor('Deprecated: use next_cursor.'),
    next_cursor: Cursor('Cursor from the previous page.'),
  },
  { additionalProperties: true, $id: 'GroupedTimeseriesQuery', description: 'Query of the grouped timeseries endpoints.' },
);
export type GroupedTimeseriesQuery = Static<typeof GroupedTimeseriesQuery>;

export const IntrospectQuery = Type.Object(
  {
    user_id: Type.Optional(Uuid('Only this user.')),
    provider: ProviderFilter,
    user_limit: Type.Integer({ minimum: 1, maximum: 1000, default: 50, description: 'Users per page.' }),
    cursor: Cursor('Deprecated: use next_cursor.'),
    next_cursor: Cursor('Cursor from the previous page.'),
  },
  { additionalProperties: true, $id: 'IntrospectQuery', description: 'Query of the introspection endpoints.' },
);
export type IntrospectQuery = Static<typeof IntrospectQuery>;

export const RefreshQuery = Type.Object(
  {
    timeout: Type.Number({ minimum: 0, maximum: 300, default: 10, description: 'Seconds to wait for the refresh before answering 202.' }),
  },
  { additionalProperties: true, $id: 'RefreshQuery', description: 'Query of the refresh endpoint.' },
);
export type RefreshQuery = Static<typeof RefreshQuery>;

export const WorkoutIdParams = Type.Object({ workout_id: Type.String({ minLength: 1, maxLength: 255 }) });
export const UserProviderParams = Type.Object({ user_id: Uuid('Service user id.'), provider: Slug('Provider slug.') });

// ---------- SDK ingestion (ours: POST /v2/ingest/{user_id}) ----------

const IngestTimestamp = (description: string) => Type.String({ format: 'date-time', description });

export const IngestSample = Type.Object(
  {
    resource: Slug('Timeseries resource, e.g. heartrate, steps, glucose, blood_pressure.'),
    timestamp: IngestTimestamp('Sample time; for interval samples the start.'),
    start: Type.Optional(IngestTimestamp('Interval start (interval resources: steps, calories_active, distance ...).')),
    end: Type.Optional(IngestTimestamp('Interval end.')),
    value: Type.Optional(Type.Number()),
    systolic: Type.Optional(Type.Number()),
    diastolic: Type.Optional(Type.Number()),
    unit: Type.Optional(Type.String({ maxLength: 32, description: "Defaults to the resource's unit; another unit is refused." })),
    type: Type.Optional(Nullable(Type.String({ maxLength: 64 }))),
    timezone_offset: Type.Optional(
      Nullable(Type.Integer({ minimum: -86400, maximum: 86400, description: 'Seconds east of UTC; null uses the user fallback time zone.' })),
    ),
  },
  { additionalProperties: false },
);

export const IngestSummary = Type.Object(
  {
    resource: StringEnum(['activity', 'sleep', 'workouts', 'body', 'profile', 'meal'] as const),
    id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: "Your app's id for it; a later item with the same id replaces it. Defaults to calendar_date (activity, body) or the start time.",
      }),
    ),
    calendar_date: DateString('Local day of the summary, YYYY-mm-dd.'),
  },
  { additionalProperties: true, description: 'The summary fields of GET /v2/summary/{resource} (id, user_id, source and timestamps are added).' },
);

export const IngestBody = Type.Object(
  {
    provider: Slug('An sdk or app provider, e.g. apple_health_kit, health_connect, manual.'),
    source_type: Type.Optional(
      Type.String({ pattern: '^[a-z0-9_]+$', maxLength: 32, description: 'Device type (watch, phone, ring, app, manual_scan ...); part of the sample key.' }),
    ),
    samples: Type.Optional(Type.Array(IngestSample, { maxItems: 5000 })),
    summaries: Type.Optional(Type.Array(IngestSummary, { maxItems: 1000 })),
    workout_streams: Type.Optional(
      Type.Array(
        Type.Object(
          {
            workout_id: Type.String({ minLength: 1, maxLength: 200 }),
            stream: Type.Record(Type.String(), Type.Array(Nullable(Type.Number()), { maxItems: 100000 })),
          },
          { additionalProperties: false },
        ),
        { maxItems: 20 },
      ),
    ),
  },
  { additionalProperties: false, $id: 'IngestBody', description: 'Data pushed by an app for one user. Nothing is stored when any item is invalid.' },
);
export type IngestBody = Static<typeof IngestBody>;

const Counts = Type.Object({ created: Type.Integer(), updated: Type.Integer(), unchanged: Type.Integer() });
export const IngestResponse = Type.Object(
  {
    summaries: Counts,
    samples: Counts,
    workout_streams: Counts,
    dropped: Type.Integer({ description: 'Items outside the user ingestion bounds.' }),
    events: Type.Integer(),
  },
  { ...Open, $id: 'IngestResponse', description: 'What the batch changed.' },
);
