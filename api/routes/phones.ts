import { Type } from '@sinclair/typebox';
import { exchangeSignInToken, mintSignInToken, refreshSdkTokens } from '../../lib/phones/sdk-auth';
import { ApiError, notFound, ValidationError } from '../../lib/platform/errors';
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import { mapRecord, type RawRecord } from '../../lib/phones/records';
import { type SleepSegment, sleepSummary, sleepsOf } from '../../lib/phones/sleep-and-workouts';
import type { SummaryInput } from '../../lib/wearables/model';
import { syncState } from '../../lib/phones/sync-state';
import type { AppDeps } from '../deps';
import { deleteProviderSamples } from '../../lib/wearables/ingest';
import { recordStage, storeUpload, type UploadSampleInput } from '../../lib/phones/uploads';
import { SUMMARY_UPLOAD_RESOURCES, type SummaryUploadItem, summariesOfUpload } from '../../lib/phones/summary-uploads';
import { historicalPullId } from '../../lib/wearables/historical-pulls-store';
import { timeseriesResourceAtPath } from '../../lib/wearables/resources';
import type { FieldError } from '../../schemas/validator';
import { canonicalTimeZone, datesBetween, parseInstant, zoneOffsetSeconds } from '../../lib/platform/time';
import { connectProvider } from '../../lib/wearables/workflow-client';
import { activeUser } from '../../lib/users/views';
import { ErrorDetail, HTTPValidationError } from '../../schemas/common';
import {
  ConnectSuccess,
  HistoricalStageBody,
  ManualConnectBody,
  ManualProviderParams,
  PhoneProviderParams,
  SdkAuthError,
  SdkTokenForm,
  SdkTokenResponse,
  SignInTokenResponse,
  SyncStateBody,
  SyncStateResponse,
  RecordsUploadBody,
  RecordsUploadResponse,
  TimeseriesUploadBody,
  SummaryUploadBody,
  SyncProgressBody,
  SyncProgressView,
  SummaryUploadResponse,
  UploadResponse,
} from '../../schemas/phones';
import { UserIdParams } from '../../schemas/user';
import { toFieldErrors, validatorFor } from '../../schemas/validator';
import type { ValidateFunction } from 'ajv';
import { jsonOfBytes, readBodyBytes, readTextBody } from '../middleware/body';
import { defineRoute } from '../route';

const tags = ['Phones'];
const gunzipAsync = promisify(gunzip);
const FORM = 'application/x-www-form-urlencoded';
const validForm = validatorFor(SdkTokenForm);

/** The token endpoint's fields: form-encoded as RFC 6749 has them (JSON taken too), checked as any body is. */
function tokenForm(text: string, contentType: string): SdkTokenForm {
  let fields: Record<string, unknown>;
  if (contentType.includes('json')) {
    try {
      fields = JSON.parse(text || '{}');
    } catch (err) {
      throw ValidationError.field(['body', 0], `JSON decode error: ${(err as Error).message}`, 'json_invalid');
    }
  } else fields = Object.fromEntries(new URLSearchParams(text));
  if (!validForm(fields)) throw new ValidationError(toFieldErrors('body', validForm.errors));
  const form = fields as SdkTokenForm;
  const need = (field: keyof SdkTokenForm, why: string) => {
    if (!form[field]) throw ValidationError.field(['body', field], `Field required: ${why}`, 'missing');
  };
  if (form.grant_type === 'refresh_token') need('refresh_token', 'a refresh sends the refresh token.');
  else {
    need('subject_token', 'the exchange sends the sign-in token as subject_token.');
    need('subject_token_type', 'the exchange names the sign-in token type, urn:healthbridge:sign-in-token.');
  }
  return form;
}

const validUpload = validatorFor(TimeseriesUploadBody);
const validRecords = validatorFor(RecordsUploadBody);
const validSummaryUpload = validatorFor(SummaryUploadBody);

/**
 * A phone's upload body: gzip when it says so (the SDKs always do; inflated off the event loop), JSON checked against
 * `validate`; with the digest of what was sent to where (the batches' content key: the same upload makes the same batches).
 */
async function uploadBody<T>(ctx: Parameters<typeof readBodyBytes>[0], limit: number, validate: ValidateFunction<T>): Promise<{ body: T; contentKey: string }> {
  let bytes = await readBodyBytes(ctx, limit);
  if (/gzip/i.test(ctx.get('content-encoding'))) {
    try {
      bytes = await gunzipAsync(bytes, { maxOutputLength: limit * 10 });
    } catch (err) {
      throw ValidationError.field(['body'], `The body says content-encoding gzip but does not gunzip: ${(err as Error).message}`, 'value_error');
    }
  }
  const parsed = jsonOfBytes(bytes);
  if (!validate(parsed)) throw new ValidationError(toFieldErrors('body', validate.errors));
  return { body: parsed, contentKey: createHash('sha256').update(ctx.path).update('\n').update(bytes).digest('hex') };
}

/** The answers every call about a connected phone may give besides its own. */
const phoneErrors = {
  404: { description: 'Unknown user, or the provider not connected', schema: ErrorDetail },
  422: { description: 'Validation error (nothing stored)', schema: HTTPValidationError },
};

/** The phone's IANA time zone as given (`europe/berlin` → `Europe/Berlin`), or a 422 at `loc`. */
function phoneTimeZone(value: string, loc: (string | number)[]): string {
  const zone = canonicalTimeZone(value);
  if (!zone) throw ValidationError.field(loc, `'${value}' is not an IANA time zone identifier (e.g. Europe/Berlin).`);
  return zone;
}

/** The user's live connection to the phone's provider, or a 404 that says to connect. */
async function phoneConnection(deps: AppDeps, teamId: string, userId: string, provider: string) {
  const connection = await deps.repos.connections.findLive(teamId, userId, provider);
  if (!connection) throw notFound(`The user has no ${provider} connection: connect it first (POST /v2/link/provider/manual/${provider}).`);
  return connection;
}

export const phoneRoutes = [
  defineRoute({
    operationId: 'createSignInToken',
    method: 'post',
    path: '/v2/user/{user_id}/sign_in_token',
    summary: "A phone's sign-in token for the user",
    description:
      "For your app on the user's phone: a single-use token, good for 10 minutes, that the phone exchanges at POST /v2/sdk/token for tokens of its own (RFC 8693). Your team key never leaves your backend; the phone's tokens reach only this user's SDK calls.",
    tags,
    auth: 'team',
    params: UserIdParams,
    responses: { 200: { description: 'The sign-in token', schema: SignInTokenResponse }, 404: { description: 'No such user', schema: ErrorDetail } },
    async handler({ params, auth, deps }) {
      await activeUser(deps, auth.teamId, params.user_id);
      const deployment = { environment: deps.config.DEPLOYMENT_ENVIRONMENT, region: deps.config.DEPLOYMENT_REGION };
      return { body: { user_id: params.user_id, sign_in_token: await mintSignInToken(deps.repos, deployment, auth.teamId, params.user_id) } };
    },
  }),
  defineRoute({
    operationId: 'sdkToken',
    method: 'post',
    path: '/v2/sdk/token',
    summary: "The phone's token endpoint: sign-in token exchange, and refresh",
    description:
      '`grant_type=urn:ietf:params:oauth:grant-type:token-exchange` with `subject_token` (the sign-in token) and `subject_token_type=urn:healthbridge:sign-in-token`: once per sign-in token. `grant_type=refresh_token` with `refresh_token`: a new access token and a new refresh token (the old one is spent; presented again after a minute, it ends the sign-in).',
    tags,
    auth: 'none',
    textBody: { contentTypes: [FORM, 'application/json'], description: 'The form fields (RFC 6749 §4.1.3 encoding).' },
    responses: {
      200: { description: 'Tokens', schema: SdkTokenResponse },
      400: { description: '`invalid_token` or `reauthentication_required`', schema: SdkAuthError },
      422: { description: 'A field missing or not understood', schema: HTTPValidationError },
    },
    async handler({ deps, ctx }) {
      const form = tokenForm(await readTextBody(ctx, deps.config.BODY_LIMIT_BYTES), ctx.get('content-type'));
      const deployment = { environment: deps.config.DEPLOYMENT_ENVIRONMENT, region: deps.config.DEPLOYMENT_REGION };
      const tokens =
        form.grant_type === 'refresh_token'
          ? await refreshSdkTokens(deps.repos, deployment, form.refresh_token!)
          : await exchangeSignInToken(deps.repos, deployment, form.subject_token!);
      // RFC 6749 §5.1: token responses are not cached.
      return { body: tokens, headers: { 'cache-control': 'no-store', pragma: 'no-cache' } };
    },
  }),
  defineRoute({
    operationId: 'connectManualProvider',
    method: 'post',
    path: '/v2/link/provider/manual/{provider}',
    summary: "Connect a phone's (or device's) provider",
    description:
      "The SDK's first call for a user: connects an sdk or app provider (apple_health_kit, health_connect, samsung_health, a BLE device, manual), announced by `provider.connection.created`. A second connect is a 409 that changes nothing (the SDK expects it). With a phone's SDK token, only for its own user.",
    tags,
    auth: 'user',
    params: ManualProviderParams,
    body: ManualConnectBody,
    responses: {
      200: { description: 'Connected', schema: ConnectSuccess },
      400: { description: 'Not an sdk or app provider', schema: ErrorDetail },
      409: { description: 'Already connected', schema: ErrorDetail },
      422: { description: 'Validation error', schema: HTTPValidationError },
    },
    async handler({ params, body, auth, deps }) {
      const entry = deps.providers.find(params.provider);
      if (entry?.auth_type !== 'sdk' && entry?.auth_type !== 'app') {
        throw ValidationError.field(
          ['path', 'provider'],
          `'${params.provider}' is not a provider a phone or device connects (sdk or app providers: apple_health_kit, health_connect, samsung_health, manual, the BLE devices).`,
          'enum',
        );
      }
      await activeUser(deps, auth.teamId, body.user_id);
      const result = await connectProvider(deps, { teamId: auth.teamId, userId: body.user_id, provider: params.provider, adapter: 'sdk' });
      if ('conflict' in result) throw new ApiError(409, `The user is already connected to ${params.provider}; nothing changed.`);
      return { body: { success: true } };
    },
  }),
  defineRoute({
    operationId: 'sdkSyncState',
    method: 'post',
    path: '/v2/user/{user_id}/sdk_sync_state/{provider}',
    summary: "The server's steer of a phone's sync",
    description:
      "Asked by the phone before it syncs: `active` with the window to read (what it asked for, else the last 90 days, clamped to the user's ingestion bounds in the phone's time zone), the history to pull, its chunk sizes and how often to report; or `paused` with the reason. Follow it for `expires_in` seconds. The provider must be connected first.",
    tags,
    auth: 'user',
    params: PhoneProviderParams,
    body: SyncStateBody,
    responses: {
      200: { description: 'The steer', schema: SyncStateResponse },
      ...phoneErrors,
    },
    async handler({ params, body, auth, deps }) {
      const user = await activeUser(deps, auth.teamId, params.user_id);
      const tzinfo = body.tzinfo ? phoneTimeZone(body.tzinfo, ['body', 'tzinfo']) : null;
      await phoneConnection(deps, auth.teamId, user._id, params.provider);
      return { body: syncState(user, { ...body, tzinfo }) };
    },
  }),
  defineRoute({
    operationId: 'uploadPhoneTimeseries',
    method: 'post',
    path: '/v2/timeseries/{user_id}/{resource}',
    summary: "A chunk of a phone's samples of one resource",
    description:
      "The SDKs' upload (gzip, their envelope): stored before the answer and idempotent (a sample is keyed by user, provider, source type, resource and start, so a chunk sent again stores nothing and answers success, and an hourly `multiple_sources` bucket sent again with a new value replaces it). The answer counts what was new, changed and already there. `daily` stage: `daily.data.<resource>.*` events for what changed; `historical`: stored silently, and the chunk with `is_final_chunk` publishes `historical.data.<resource>.created` once. Samples outside the user's ingestion bounds are dropped (counted).",
    tags,
    auth: 'user',
    params: Type.Object({ user_id: UserIdParams.properties.user_id, resource: Type.String({ minLength: 1, maxLength: 64 }) }),
    textBody: { contentTypes: ['application/json'], description: 'The envelope, as JSON; `content-encoding: gzip` as the SDKs send it.' },
    responses: {
      200: { description: 'What the chunk stored', schema: UploadResponse },
      ...phoneErrors,
    },
    async handler({ params, auth, deps, ctx }) {
      const { body, contentKey } = await uploadBody(ctx, deps.config.BODY_LIMIT_BYTES, validUpload);
      const resource = timeseriesResourceAtPath(params.resource);
      if (!resource) throw ValidationError.field(['path', 'resource'], `'${params.resource}' is not a timeseries resource.`, 'enum');
      // HealthKit's HRV is SDNN (the original iOS SDK labels it RMSSD): stored as `sdnn`, whatever unit the phone says.
      const sdnn = body.provider === 'apple_health_kit' && resource.name === 'hrv';
      const timeZone = phoneTimeZone(body.time_zone, ['body', 'time_zone']);
      const user = await activeUser(deps, auth.teamId, params.user_id);
      const connection = await phoneConnection(deps, auth.teamId, user._id, body.provider);
      const deletions = (body.deleted ?? []).map((d, i) => {
        if (d.ids) {
          if (d.start_date || d.end_date) throw ValidationError.field(['body', 'deleted', i, 'ids'], 'A deletion names ids or a time range, not both.');
          return { ids: d.ids };
        }
        if (!d.start_date || !d.end_date) {
          throw ValidationError.field(
            ['body', 'deleted', i, d.start_date ? 'end_date' : 'start_date'],
            'A deletion names ids, or start_date and end_date.',
            'missing',
          );
        }
        if (Date.parse(d.end_date) < Date.parse(d.start_date))
          throw ValidationError.field(['body', 'deleted', i, 'end_date'], 'end_date must not be before start_date.');
        return { sourceType: d.type ?? null, from: new Date(d.start_date), to: new Date(d.end_date) };
      });
      // Deletions first: a chunk that deletes a range and sends what is there now ends with what it sent.
      let deleted = 0;
      for (const which of deletions) {
        deleted += await deleteProviderSamples(deps, { teamId: auth.teamId, user, provider: body.provider, resource: resource.name, which });
      }
      const stored = await storeUpload(
        deps,
        { teamId: auth.teamId, user, provider: body.provider, announce: body.stage === 'daily', contentKey },
        body.data.map((s, i) => {
          const sample: UploadSampleInput = {
            resource: resource.name,
            timestamp: s.start_date,
            value: s.value,
            unit: sdnn ? 'sdnn' : s.unit,
            timezone_offset: zoneOffsetSeconds(timeZone, parseInstant(s.start_date)),
            platform_id: s.id ?? null,
          };
          if (resource.interval) {
            sample.start = s.start_date;
            sample.end = s.end_date;
          }
          return { sourceType: s.type || 'phone', at: i, sample };
        }),
      );
      const counts = stored.counts;
      const historicalEvent = await recordStage(deps, { teamId: auth.teamId, user, connectionId: connection._id, resource: resource.name }, body, {
        sent: counts.created + counts.updated,
        ...stored,
      });
      return { body: { samples: counts, dropped: stored.dropped, events: stored.events, historical_event: historicalEvent, deleted } };
    },
  }),
  defineRoute({
    operationId: 'uploadPhoneSummaries',
    method: 'post',
    path: '/v2/summary/{resource}/{user_id}',
    summary: "A chunk of a phone's summaries of one resource",
    description:
      "The SDKs' summary upload (gzip, the envelope of the timeseries uploads): `sleep` with its stages in the platform's ids, `workouts` with the platform's activity type, `activity` days, `body` measurements; mapped here (README \"Data from phones\" has the tables) and stored before the answer, idempotent by the item's `id` (else its source type and start). The answer counts what was new, changed and already there; `daily` publishes `daily.data.<resource>.*` for what changed, `historical` is silent until its final chunk publishes `historical.data.<resource>.created` once.",
    tags,
    auth: 'user',
    params: Type.Object({
      resource: Type.Union(
        SUMMARY_UPLOAD_RESOURCES.map((r) => Type.Literal(r)),
        { description: 'sleep, workouts, activity or body.' },
      ),
      user_id: UserIdParams.properties.user_id,
    }),
    textBody: { contentTypes: ['application/json'], description: 'The envelope, as JSON; `content-encoding: gzip` as the SDKs send it.' },
    responses: {
      200: { description: 'What the chunk stored', schema: SummaryUploadResponse },
      ...phoneErrors,
    },
    async handler({ params, auth, deps, ctx }) {
      const { body, contentKey } = await uploadBody(ctx, deps.config.BODY_LIMIT_BYTES, validSummaryUpload);
      const timeZone = phoneTimeZone(body.time_zone, ['body', 'time_zone']);
      const user = await activeUser(deps, auth.teamId, params.user_id);
      const connection = await phoneConnection(deps, auth.teamId, user._id, body.provider);
      const mapped = summariesOfUpload(body.provider, params.resource, body.data as SummaryUploadItem[], timeZone);
      if (mapped.problems.length) throw new ValidationError(mapped.problems);
      const stored = await storeUpload(
        deps,
        { teamId: auth.teamId, user, provider: body.provider, announce: body.stage === 'daily', contentKey },
        [],
        mapped.summaries,
      );
      const counts = stored.summaryCounts;
      const historicalEvent = await recordStage(deps, { teamId: auth.teamId, user, connectionId: connection._id, resource: params.resource }, body, {
        sent: counts.created + counts.updated,
        ...stored,
      });
      return { body: { summaries: counts, dropped: stored.dropped, events: stored.events, historical_event: historicalEvent } };
    },
  }),
  defineRoute({
    operationId: 'sdkSyncProgress',
    method: 'post',
    path: '/v2/user/{user_id}/sdk_sync_progress/{provider}',
    summary: "A phone's report of its sync",
    description:
      'Sent by the phone about hourly (`reporting_interval` of the sync state): per resource its status, last sync and what it sent, and the device. The last report is kept (GET of the same path shows it to your backend).',
    tags,
    auth: 'user',
    params: PhoneProviderParams,
    body: SyncProgressBody,
    responses: { 200: { description: 'Kept', schema: ConnectSuccess }, ...phoneErrors },
    async handler({ params, body, auth, deps }) {
      const user = await activeUser(deps, auth.teamId, params.user_id);
      const connection = await phoneConnection(deps, auth.teamId, user._id, params.provider);
      await deps.repos.connections.recordSyncProgress(connection._id, body as Record<string, unknown>, new Date());
      return { body: { success: true } };
    },
  }),
  defineRoute({
    operationId: 'getSdkSyncProgress',
    method: 'get',
    path: '/v2/user/{user_id}/sdk_sync_progress/{provider}',
    summary: "A phone's last report of its sync",
    description: 'What the phone last reported (POST of the same path), and when; 404 before its first report.',
    tags,
    auth: 'user',
    params: PhoneProviderParams,
    responses: { 200: { description: 'The last report', schema: SyncProgressView }, 404: phoneErrors[404] },
    async handler({ params, auth, deps }) {
      const user = await activeUser(deps, auth.teamId, params.user_id);
      const connection = await phoneConnection(deps, auth.teamId, user._id, params.provider);
      if (!connection.sdk_sync_progress) throw notFound('The phone has not reported its sync yet.');
      const { report, reported_at } = connection.sdk_sync_progress;
      return { body: { provider: params.provider, reported_at: reported_at.toISOString(), report } };
    },
  }),
  defineRoute({
    operationId: 'sdkStartHistoricalStage',
    method: 'post',
    path: '/v2/user/{user_id}/sdk_start_historical_stage/{provider}',
    summary: "A phone begins reading a resource's history",
    description:
      "The resource's history shows `in_progress` over the window in GET /v2/introspect/historical_pull; its historical chunks count there as they come, and its final chunk makes it `success` (and publishes `historical.data.<resource>.created`).",
    tags,
    auth: 'user',
    params: PhoneProviderParams,
    body: HistoricalStageBody,
    responses: {
      200: { description: 'Begun', schema: ConnectSuccess },
      ...phoneErrors,
    },
    async handler({ params, body, auth, deps }) {
      const summaryResource = (SUMMARY_UPLOAD_RESOURCES as readonly string[]).includes(body.backfill_type) ? { name: body.backfill_type } : null;
      const resource = summaryResource ?? timeseriesResourceAtPath(body.backfill_type);
      if (!resource)
        throw ValidationError.field(
          ['body', 'backfill_type'],
          `'${body.backfill_type}' is neither a timeseries resource nor sleep, workouts, activity or body.`,
          'enum',
        );
      if (Date.parse(body.range_end) < Date.parse(body.range_start))
        throw ValidationError.field(['body', 'range_end'], 'range_end must not be before range_start.');
      const user = await activeUser(deps, auth.teamId, params.user_id);
      const connection = await phoneConnection(deps, auth.teamId, user._id, params.provider);
      await deps.repos.historicalPulls.startPhoneStage(
        {
          _id: historicalPullId(auth.teamId, user._id, params.provider, resource.name),
          team_id: auth.teamId,
          user_id: user._id,
          provider: params.provider,
          resource: resource.name,
          connection_id: connection._id,
          range_start: new Date(body.range_start),
          range_end: new Date(body.range_end),
          // The window's days (UTC): what `days_with_data` is counted against.
          days_requested: datesBetween(new Date(body.range_start).toISOString().slice(0, 10), new Date(body.range_end).toISOString().slice(0, 10)),
        },
        new Date(),
      );
      // Erased stays erased: asked after the write (erasure marks the user before it removes pull states).
      if (!(await deps.repos.users.takesData(auth.teamId, user._id))) await deps.repos.historicalPulls.eraseAllForUser(auth.teamId, user._id);
      return { body: { success: true } };
    },
  }),
  defineRoute({
    operationId: 'uploadPhoneRecords',
    method: 'post',
    path: '/v2/sdk/{user_id}/records',
    summary: "A phone's raw records, mapped here",
    description:
      'HealthKit quantity samples (`HKQuantityTypeIdentifierHeartRate` with HealthKit\'s unit …) or Health Connect records (`HeartRateRecord` with its samples, `StepsRecord` …) as the platforms name them; the server maps them (README "Data from phones" has the table), so a mapping fix needs no app release. Stored like an upload\'s samples (idempotent; `daily.data.*` for what changed). A type not mapped is counted in `skipped` with why; a record that cannot be read refuses the upload with its index.',
    tags,
    auth: 'user',
    params: UserIdParams,
    textBody: { contentTypes: ['application/json'], description: 'The records, as JSON; `content-encoding: gzip` as the SDKs send it.' },
    responses: {
      200: { description: 'What the records stored', schema: RecordsUploadResponse },
      ...phoneErrors,
    },
    async handler({ params, auth, deps, ctx }) {
      const { body, contentKey } = await uploadBody(ctx, deps.config.BODY_LIMIT_BYTES, validRecords);
      const timeZone = phoneTimeZone(body.time_zone, ['body', 'time_zone']);
      const user = await activeUser(deps, auth.teamId, params.user_id);
      await phoneConnection(deps, auth.teamId, user._id, body.provider);
      const problems: FieldError[] = [];
      const skipped: Record<string, { count: number; reason: string }> = {};
      const summaries: { sourceType: string; summary: SummaryInput }[] = [];
      const sleepStages = new Map<string, { segments: SleepSegment[]; offset: number }>();
      const items = body.records.flatMap((record, i) => {
        const outcome = mapRecord(body.provider, record as RawRecord, timeZone);
        if ('problem' in outcome) {
          problems.push({ loc: ['body', 'records', i, outcome.problem.field], msg: outcome.problem.message, type: 'value_error' });
          return [];
        }
        if ('skipped' in outcome) {
          skipped[record.type] = { count: (skipped[record.type]?.count ?? 0) + 1, reason: outcome.skipped };
          return [];
        }
        if ('summary' in outcome) {
          summaries.push({ sourceType: outcome.sourceType, summary: outcome.summary });
          return [];
        }
        if ('sleepSegment' in outcome) {
          const source = sleepStages.get(outcome.sourceType) ?? { segments: [], offset: outcome.offset };
          source.segments.push(outcome.sleepSegment);
          sleepStages.set(outcome.sourceType, source);
          return [];
        }
        return outcome.samples.map((m) => ({
          sourceType: m.sourceType,
          at: i,
          sample: {
            resource: m.resource,
            timestamp: m.start,
            ...(m.end ? { start: m.start, end: m.end } : {}),
            value: m.value,
            unit: m.unit,
            timezone_offset: m.timezoneOffset,
            platform_id: m.platformId,
          },
        }));
      });
      if (problems.length) throw new ValidationError(problems);
      // HealthKit's sleep-analysis samples of one source, a night's worth together, become its sleeps.
      for (const [sourceType, { segments, offset }] of sleepStages) {
        for (const night of sleepsOf(segments)) summaries.push({ sourceType, summary: sleepSummary(night, offset, { sourceType }) });
      }
      const stored = await storeUpload(
        deps,
        { teamId: auth.teamId, user, provider: body.provider, announce: true, contentKey, itemsAt: 'records' },
        items,
        summaries,
      );
      return { body: { samples: stored.counts, summaries: stored.summaryCounts, skipped, dropped: stored.dropped, events: stored.events } };
    },
  }),
];
