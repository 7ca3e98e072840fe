import { Type, type Static } from '@sinclair/typebox';
import { Uuid } from './common';

/** POST /v2/user/{user_id}/sign_in_token (Junction's `UserSignInTokenResponse`). */
export const SignInTokenResponse = Type.Object(
  {
    user_id: Uuid('Service user id.'),
    sign_in_token: Type.String({ description: 'Hand it to the phone: it exchanges it once, within 10 minutes, at POST /v2/sdk/token.' }),
  },
  { $id: 'UserSignInTokenResponse' },
);

/** The token endpoint's form fields (RFC 8693 §2.1 for the exchange, RFC 6749 §6 for a refresh). */
export const SdkTokenForm = Type.Object(
  {
    grant_type: Type.Union([Type.Literal('urn:ietf:params:oauth:grant-type:token-exchange'), Type.Literal('refresh_token')], {
      description: 'The exchange of a sign-in token, or a refresh.',
    }),
    subject_token: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'The sign-in token (token exchange).' })),
    subject_token_type: Type.Optional(Type.Literal('urn:healthbridge:sign-in-token', { description: 'Token exchange: always this.' })),
    refresh_token: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'The refresh token (refresh).' })),
  },
  { additionalProperties: true, $id: 'SdkTokenForm' },
);
export type SdkTokenForm = Static<typeof SdkTokenForm>;

export const SdkTokenResponse = Type.Object(
  {
    access_token: Type.String({ description: 'Send it as `authorization: Bearer …` on the SDK calls of this user.' }),
    refresh_token: Type.String({ description: 'Single use: each refresh answers a new one.' }),
    token_type: Type.Literal('Bearer'),
    expires_in: Type.Integer({ description: 'Seconds the access token lasts.' }),
    issued_token_type: Type.Literal('urn:ietf:params:oauth:token-type:access_token'),
    user_id: Uuid('The user the tokens act for.'),
  },
  { $id: 'SdkTokenResponse' },
);

export const SdkAuthError = Type.Object(
  {
    detail: Type.Object({
      error_type: Type.Union([Type.Literal('invalid_token'), Type.Literal('reauthentication_required')]),
      message: Type.String(),
    }),
  },
  { $id: 'SdkAuthError', description: '`invalid_token`: refresh, or sign in again; `reauthentication_required`: sign in again.' },
);

/** POST /v2/link/provider/manual/{provider}: the SDK's connect (Junction's `ManualConnectionData`, plus its permissions). */
export const ManualConnectBody = Type.Object(
  {
    user_id: Uuid('Service user id.'),
    provider_id: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()], { description: "The device's or app's own id, if any." })),
    granted_permissions: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 200, description: 'The resources the user let the app read.' }),
    ),
  },
  { $id: 'ManualConnectBody' },
);
export const ManualProviderParams = Type.Object({
  provider: Type.String({ minLength: 1, maxLength: 64, description: 'An sdk or app provider (GET /v2/providers).' }),
});
export const ConnectSuccess = Type.Object({ success: Type.Boolean() }, { $id: 'ManualConnectResponse' });

export const PhoneProviderParams = Type.Object({
  user_id: Uuid('Service user id.'),
  provider: Type.Union([Type.Literal('apple_health_kit'), Type.Literal('health_connect'), Type.Literal('samsung_health')], {
    description: "A phone's provider.",
  }),
});

/** POST /v2/user/{user_id}/sdk_sync_state/{provider}: what the phone is about to read. */
export const SyncStateBody = Type.Object(
  {
    tzinfo: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 64 }), Type.Null()], { description: "The phone's IANA time zone." })),
    request_start_date: Type.Optional(Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'The window it would read from.' })),
    request_end_date: Type.Optional(Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'The window it would read to.' })),
    granted_permissions: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 200 })),
  },
  { $id: 'SyncStateBody' },
);

export const SyncStateResponse = Type.Object(
  {
    status: Type.Union([Type.Literal('active'), Type.Literal('paused')]),
    reason: Type.Union([Type.String(), Type.Null()], { description: 'Why it is paused.' }),
    ingestion_start: Type.Union([Type.String(), Type.Null()]),
    ingestion_end: Type.Union([Type.String(), Type.Null()]),
    request_start_date: Type.Union([Type.String(), Type.Null()], { description: 'Read from here (ISO 8601, UTC).' }),
    request_end_date: Type.Union([Type.String(), Type.Null()], { description: 'Read up to here.' }),
    expires_in: Type.Integer({ description: 'Seconds to follow this answer before asking again.' }),
    pull_preferences: Type.Object({
      historical_days_to_pull: Type.Integer(),
      backfill_type_overrides: Type.Record(Type.String(), Type.Unknown()),
    }),
    reporting_interval: Type.Integer({ description: 'Seconds between progress reports.' }),
    chunk_sizes: Type.Object({
      foreground: Type.Integer(),
      background: Type.Integer(),
      workouts_foreground: Type.Integer(),
      workouts_background: Type.Integer(),
    }),
  },
  { $id: 'SyncStateResponse' },
);

/** One sample of an upload, as the SDKs send it (Junction's `LocalQuantitySample`). */
const UploadSample = Type.Object({
  id: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 200,
      description: "The platform's id of the sample (Health Connect's record id, HealthKit's UUID): its key where sent.",
    }),
  ),
  value: Type.Number(),
  start_date: Type.String({ format: 'date-time' }),
  end_date: Type.String({ format: 'date-time' }),
  unit: Type.String({ minLength: 1, maxLength: 32 }),
  type: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()], { description: 'watch, phone, multiple_sources (an hourly bucket) …' })),
  source_bundle: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()])),
  product_type: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()])),
  metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

/** POST /v2/timeseries/{user_id}/{resource}: a chunk of a phone's samples (gzip or not), in the SDKs' envelope. */
export const TimeseriesUploadBody = Type.Object(
  {
    stage: Type.Union([Type.Literal('daily'), Type.Literal('historical')]),
    provider: Type.Union([Type.Literal('apple_health_kit'), Type.Literal('health_connect'), Type.Literal('samsung_health')]),
    start_date: Type.String({ format: 'date-time', description: 'The window this sync reads (historical: the same on every chunk).' }),
    end_date: Type.Optional(Type.Union([Type.String({ format: 'date-time' }), Type.Null()])),
    time_zone: Type.String({ minLength: 1, maxLength: 64, description: "The phone's IANA time zone." }),
    data: Type.Array(UploadSample, { maxItems: 10_000 }),
    is_final_chunk: Type.Optional(Type.Boolean({ description: "The historical stage's last chunk of this resource." })),
    deleted: Type.Optional(
      Type.Array(
        // One object with either a range or ids (ajv's removeAdditional would strip a union's second branch).
        Type.Object({
          start_date: Type.Optional(Type.String({ format: 'date-time' })),
          end_date: Type.Optional(Type.String({ format: 'date-time' })),
          type: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()], { description: 'The source type; absent: every one.' })),
          ids: Type.Optional(
            Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { minItems: 1, maxItems: 10_000, description: 'Platform ids of deleted samples.' }),
          ),
        }),
        {
          maxItems: 1000,
          description:
            "Ours: the resource's samples the phone deleted, as time ranges [start_date, end_date) of a source type, or by their platform ids (removed before `data` is stored).",
        },
      ),
    ),
  },
  { $id: 'TimeseriesUploadBody' },
);
export type TimeseriesUploadBody = Static<typeof TimeseriesUploadBody>;

const UploadCounts = Type.Object({ created: Type.Integer(), updated: Type.Integer(), unchanged: Type.Integer() });
export const UploadResponse = Type.Object(
  {
    samples: UploadCounts,
    dropped: Type.Integer({ description: "Samples outside the user's ingestion bounds (not stored)." }),
    events: Type.Integer({ description: 'daily.data events published.' }),
    historical_event: Type.Boolean({ description: 'historical.data.<resource>.created was published by this chunk.' }),
    deleted: Type.Integer({ description: 'Samples removed by `deleted`.' }),
  },
  { $id: 'PhoneUploadResponse', description: 'What the chunk stored: new, changed, and already there (a chunk sent again is all unchanged).' },
);

const OptNumber = Type.Optional(Type.Union([Type.Number(), Type.Null()]));
/** One item of a summary upload: the fields its resource uses (sleep, workouts: a span; activity: a day; body: an instant). */
const SummaryUploadItem = Type.Object(
  {
    id: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 200 }), Type.Null()], { description: "The platform's id (a replacement key)." })),
    start_date: Type.Optional(Type.String({ format: 'date-time' })),
    end_date: Type.Optional(Type.String({ format: 'date-time' })),
    date: Type.Optional(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: 'activity: the local day.' })),
    timestamp: Type.Optional(Type.String({ format: 'date-time', description: 'body: when measured.' })),
    type: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()], { description: 'The source type (watch, phone …).' })),
    product_type: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()])),
    source_bundle: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()])),
    stages: Type.Optional(
      Type.Array(Type.Object({ start_date: Type.String({ format: 'date-time' }), end_date: Type.String({ format: 'date-time' }), stage: Type.Integer() }), {
        maxItems: 5000,
        description:
          "sleep: iOS sends HealthKit's HKCategoryValueSleepAnalysis (inBed 0, asleepUnspecified 1, awake 2, core 3, deep 4, REM 5); Android the SDK's ids (deep 1, light 2, rem 3, awake 4, out of bed 5).",
      }),
    ),
    sport: Type.Optional(
      Type.Union([Type.Integer(), Type.String({ maxLength: 100 })], {
        description: "workouts: HKWorkoutActivityType's raw value or name (iOS); Health Connect's ExerciseSessionRecord exercise type (Android).",
      }),
    ),
    calories: OptNumber,
    distance: OptNumber,
    average_hr: OptNumber,
    max_hr: OptNumber,
    steps: OptNumber,
    calories_active: OptNumber,
    calories_total: OptNumber,
    floors_climbed: OptNumber,
    weight: OptNumber,
    fat: OptNumber,
  },
  { additionalProperties: true },
);

/** POST /v2/summary/{resource}/{user_id}: a chunk of a phone's summaries, in the SDKs' envelope. */
export const SummaryUploadBody = Type.Object(
  {
    stage: Type.Union([Type.Literal('daily'), Type.Literal('historical')]),
    provider: Type.Union([Type.Literal('apple_health_kit'), Type.Literal('health_connect'), Type.Literal('samsung_health')]),
    start_date: Type.String({ format: 'date-time' }),
    end_date: Type.Optional(Type.Union([Type.String({ format: 'date-time' }), Type.Null()])),
    time_zone: Type.String({ minLength: 1, maxLength: 64 }),
    data: Type.Array(SummaryUploadItem, { maxItems: 10_000 }),
    is_final_chunk: Type.Optional(Type.Boolean()),
  },
  { $id: 'SummaryUploadBody' },
);
export type SummaryUploadBody = Static<typeof SummaryUploadBody>;

export const SummaryUploadResponse = Type.Object(
  {
    summaries: UploadCounts,
    dropped: Type.Integer({ description: "Summaries outside the user's ingestion bounds (not stored)." }),
    events: Type.Integer({ description: 'daily.data events published.' }),
    historical_event: Type.Boolean({ description: 'historical.data.<resource>.created was published by this chunk.' }),
  },
  { $id: 'PhoneSummaryUploadResponse' },
);

/** POST /v2/user/{user_id}/sdk_start_historical_stage/{provider}: the phone begins reading a resource's history. */
export const HistoricalStageBody = Type.Object(
  {
    range_start: Type.String({ format: 'date-time' }),
    range_end: Type.String({ format: 'date-time' }),
    backfill_type: Type.String({ minLength: 1, maxLength: 64, description: 'The resource, as the timeseries paths name it (steps, heartrate …).' }),
  },
  { $id: 'HistoricalStageBody' },
);

/** POST /v2/sdk/{user_id}/records: raw HealthKit samples or Health Connect records, as the platforms name them. */
export const RecordsUploadBody = Type.Object(
  {
    provider: Type.Union([Type.Literal('apple_health_kit'), Type.Literal('health_connect'), Type.Literal('samsung_health')]),
    time_zone: Type.String({ minLength: 1, maxLength: 64, description: "The phone's IANA time zone (a HealthKit sample's HKTimeZone wins)." }),
    records: Type.Array(Type.Object({ type: Type.String({ minLength: 1, maxLength: 120 }) }, { additionalProperties: true }), { maxItems: 10_000 }),
  },
  { $id: 'RecordsUploadBody' },
);
export type RecordsUploadBody = Static<typeof RecordsUploadBody>;

export const RecordsUploadResponse = Type.Object(
  {
    samples: UploadCounts,
    summaries: UploadCounts,
    skipped: Type.Record(Type.String(), Type.Object({ count: Type.Integer(), reason: Type.String() }), {
      description: 'Record types not taken, with why (a type not mapped yet is no error).',
    }),
    dropped: Type.Integer(),
    events: Type.Integer(),
  },
  { $id: 'PhoneRecordsResponse' },
);

const ImportCounts = Type.Object({ created: Type.Integer(), updated: Type.Integer(), unchanged: Type.Integer() });
/** An Apple Health export's import (POST /v2/user/{user_id}/import/apple_health). */
export const AppleHealthImport = Type.Object(
  {
    id: Uuid('The import.'),
    user_id: Uuid('Service user id.'),
    format: Type.Union([Type.Literal('zip'), Type.Literal('xml')]),
    status: Type.Union([Type.Literal('uploading'), Type.Literal('importing'), Type.Literal('completed'), Type.Literal('failed')], {
      description: '`uploading`: bytes missing (resume with PATCH); `importing`: whole, its workflow reading it; `failed`: `error` says why.',
    }),
    upload_length: Type.Union([Type.Integer(), Type.Null()], { description: "The file's size, when announced." }),
    received_bytes: Type.Integer({ description: 'Bytes stored: where a resumed upload continues.' }),
    progress: Type.Object({
      xml_bytes_read: Type.Integer({ description: 'Bytes of export.xml read (unzipped).' }),
      records_read: Type.Integer({ description: 'Elements read (Record, Correlation, Workout, ActivitySummary …).' }),
      samples: ImportCounts,
      summaries: ImportCounts,
      dropped: Type.Integer({ description: "Outside the user's ingestion bounds." }),
      skipped: Type.Record(Type.String(), Type.Integer(), { description: 'Types not imported, by type: how many.' }),
    }),
    error: Type.Union([Type.String(), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    uploaded_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    completed_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { $id: 'AppleHealthImport' },
);
export const AppleHealthImportList = Type.Object({ imports: Type.Array(AppleHealthImport) }, { $id: 'AppleHealthImportList' });

/** POST /v2/user/{user_id}/sdk_sync_progress/{provider}: what the phone has synced (about hourly), as it reports it. */
export const SyncProgressBody = Type.Object(
  {
    resources: Type.Optional(
      Type.Record(
        Type.String({ maxLength: 64 }),
        Type.Object(
          {
            status: Type.Optional(Type.String({ maxLength: 64 })),
            last_synced_at: Type.Optional(Type.Union([Type.String({ format: 'date-time' }), Type.Null()])),
            sent: Type.Optional(Type.Integer({ minimum: 0 })),
          },
          { additionalProperties: true },
        ),
        { description: 'Per resource: its sync status, last sync and what it sent.' },
      ),
    ),
    device: Type.Optional(Type.Record(Type.String({ maxLength: 64 }), Type.Unknown(), { description: 'Model, OS version, SDK version …' })),
  },
  { additionalProperties: true, $id: 'SyncProgressBody' },
);
export const SyncProgressView = Type.Object(
  {
    provider: Type.String(),
    reported_at: Type.String({ format: 'date-time' }),
    report: Type.Record(Type.String(), Type.Unknown()),
  },
  { $id: 'SyncProgressView' },
);
