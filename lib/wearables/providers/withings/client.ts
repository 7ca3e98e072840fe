import { ProviderFetchError } from '../../provider-errors';
import { OAuthError, RateLimitedError, type ProviderCallContext, type ProviderHttp } from '../contract';
import { hmacSha256 } from '../push-kit';

/**
 * The Withings RPC envelope. Every service is a POST of form fields with an `action`, answered HTTP 200 with
 * `{status, body, error?}`: a non-zero `status` is an error even on HTTP 200 (developer.withings.com api-reference
 * "Response Status"; the-momentum/open-wearables PR #1177). An expired or revoked access token is `status: 401`
 * in a 200 (`"XRequestID: Not provided invalid_token: The access token provided is invalid"`, observed in
 * git.skyforest.net/jlobbes/ba-thesis app/withings/README.md).
 */
export const WITHINGS_API = 'https://wbsapi.withings.net';
export const URLS = {
  measure: `${WITHINGS_API}/measure`,
  measureV2: `${WITHINGS_API}/v2/measure`,
  sleepV2: `${WITHINGS_API}/v2/sleep`,
  notify: `${WITHINGS_API}/notify`,
  oauth2: `${WITHINGS_API}/v2/oauth2`,
  signature: `${WITHINGS_API}/v2/signature`,
} as const;

export interface WithingsEnvelope<T> {
  status: number;
  body?: T;
  error?: string;
}

/** The per-app limit is 120 requests a minute (developer.withings.com data-update-notifications); a 601 waits one window. */
export const RATE_LIMIT_WINDOW_MS = 60_000;

/**
 * The status families of the api-reference "Response Status" table (api-evangelist/withings
 * openapi/_original/withings-data-api-openapi.yml, tag response_status), range by range. Withings shares only the
 * family, never the exact meaning of a code.
 */
export type StatusFamily =
  | 'authentication_failed'
  | 'invalid_params'
  | 'unauthorized'
  | 'an_error_occurred'
  | 'timeout'
  | 'bad_state'
  | 'not_implemented'
  | 'too_many_requests';
const STATUS_TABLE: [number, number, StatusFamily][] = [
  [100, 102, 'authentication_failed'],
  [200, 200, 'authentication_failed'],
  [201, 213, 'invalid_params'],
  [214, 214, 'unauthorized'],
  [215, 215, 'an_error_occurred'],
  [216, 218, 'invalid_params'],
  [219, 219, 'an_error_occurred'],
  [220, 221, 'invalid_params'],
  [222, 222, 'an_error_occurred'],
  [223, 223, 'invalid_params'],
  [224, 224, 'an_error_occurred'],
  [225, 225, 'invalid_params'],
  [226, 226, 'an_error_occurred'],
  [227, 230, 'invalid_params'],
  [231, 233, 'an_error_occurred'],
  [234, 236, 'invalid_params'],
  [237, 237, 'an_error_occurred'],
  [238, 238, 'invalid_params'],
  [240, 252, 'invalid_params'],
  [253, 253, 'an_error_occurred'],
  [254, 254, 'invalid_params'],
  [255, 259, 'an_error_occurred'],
  [260, 267, 'invalid_params'],
  [268, 270, 'an_error_occurred'],
  [271, 272, 'invalid_params'],
  [273, 274, 'an_error_occurred'],
  [275, 276, 'invalid_params'],
  [277, 277, 'unauthorized'],
  [278, 282, 'an_error_occurred'],
  [283, 288, 'invalid_params'],
  [289, 289, 'an_error_occurred'],
  [290, 290, 'invalid_params'],
  [291, 292, 'an_error_occurred'],
  [293, 295, 'invalid_params'],
  [296, 296, 'an_error_occurred'],
  [297, 297, 'invalid_params'],
  [298, 298, 'an_error_occurred'],
  [300, 304, 'invalid_params'],
  [305, 320, 'an_error_occurred'],
  [321, 321, 'invalid_params'],
  [322, 322, 'an_error_occurred'],
  [323, 353, 'invalid_params'],
  [370, 375, 'an_error_occurred'],
  [380, 382, 'invalid_params'],
  [383, 383, 'an_error_occurred'],
  [391, 391, 'an_error_occurred'],
  [400, 400, 'invalid_params'],
  [401, 401, 'authentication_failed'],
  [402, 402, 'an_error_occurred'],
  [501, 511, 'invalid_params'],
  [516, 521, 'an_error_occurred'],
  [522, 522, 'timeout'],
  [523, 523, 'invalid_params'],
  [524, 524, 'bad_state'],
  [525, 531, 'an_error_occurred'],
  [532, 532, 'invalid_params'],
  [533, 533, 'an_error_occurred'],
  [601, 601, 'too_many_requests'],
  [602, 602, 'an_error_occurred'],
  [700, 700, 'an_error_occurred'],
  [1051, 1054, 'an_error_occurred'],
  [2551, 2552, 'an_error_occurred'],
  [2553, 2553, 'unauthorized'],
  [2554, 2554, 'not_implemented'],
  [2555, 2555, 'unauthorized'],
  [2556, 2559, 'an_error_occurred'],
  [3000, 3016, 'an_error_occurred'],
  [3017, 3019, 'invalid_params'],
  [3020, 3024, 'an_error_occurred'],
  [5000, 5006, 'an_error_occurred'],
  [6000, 6000, 'an_error_occurred'],
  [6010, 6011, 'an_error_occurred'],
  [9000, 9000, 'an_error_occurred'],
  [10000, 10000, 'an_error_occurred'],
];

/** The family of a non-zero status; a code outside the table is treated as "An error occurred". */
export function statusFamily(status: number): StatusFamily {
  for (const [from, to, family] of STATUS_TABLE) if (status >= from && status <= to) return family;
  return 'an_error_occurred';
}

/**
 * The error a non-zero status of a data call is. The doc's advice per family: Timeout → retry; Authentication failed →
 * check the tokens; Invalid params / Not implemented / Unauthorized → a fault of ours that a retry cannot mend;
 * "An error occurred" → retry, contact Withings if it persists. 601 "Too many request" is the rate limit.
 * Authentication failed is a credential error: http.ts refreshes only on an HTTP 401, and Withings answers an invalid
 * token with HTTP 200 + status 401, so the refresh must be triggered from here (see the report: an envelope hook).
 */
export function envelopeError(status: number, message: string | undefined, what: string, now: Date = new Date()): Error {
  const detail = `withings: ${what} answered status ${status}${message ? ` (${message.slice(0, 200)})` : ''}`;
  switch (statusFamily(status)) {
    case 'too_many_requests':
      return new RateLimitedError(new Date(now.getTime() + RATE_LIMIT_WINDOW_MS), `${detail}; next request in one rate-limit window`);
    case 'authentication_failed':
      return new ProviderFetchError('provider_credential_error', detail);
    case 'timeout':
    case 'an_error_occurred':
      return new ProviderFetchError('provider_unavailable', detail);
    default:
      return new ProviderFetchError('non_retriable_error', detail);
  }
}

/**
 * Whether a 2xx answer is really Withings refusing the access token ("Authentication failed" family: 100-102, 200,
 * 401). For http.ts to refresh on it as on an HTTP 401 (see the report's proposed `unauthorizedBody` hook); until
 * then callWithings turns it into ProviderFetchError('provider_credential_error').
 */
export function isUnauthorizedEnvelope(body: unknown): boolean {
  const status = (body as { status?: unknown } | null)?.status;
  return typeof status === 'number' && status !== 0 && statusFamily(status) === 'authentication_failed';
}

/** One Withings RPC call (one HTTP request): the unwrapped `body`, or the envelope's error thrown. */
export async function callWithings<T>(
  http: ProviderHttp,
  url: string,
  form: Record<string, string | number | undefined>,
  auth: 'bearer' | 'none' = 'bearer',
): Promise<T> {
  const res = await http.request<WithingsEnvelope<T>>({ method: 'POST', url, form, auth });
  const envelope = res.body;
  const what = `${new URL(url).pathname} action=${form.action}`;
  if (!envelope || typeof envelope !== 'object' || typeof envelope.status !== 'number') {
    throw new ProviderFetchError('provider_unavailable', `withings: ${what} answered without a {status, body} envelope`);
  }
  if (envelope.status !== 0) throw envelopeError(envelope.status, envelope.error, what);
  return (envelope.body ?? {}) as T;
}

/**
 * The token endpoint's envelope unwrapped (OAuthSettings.unwrapTokenResponse). A refused code or refresh token is
 * answered HTTP 200 `{"status":503,"body":{},"error":"Invalid Params: invalid code"}` (or `invalid refresh_token`),
 * observed by many clients (find_string "Invalid Params: invalid refresh_token"; developer.withings.com FAQ: "Invalid
 * Params: invalid code — the code may have expired (expires after 30 seconds)"). On this endpoint every "Invalid params"
 * and "Authentication failed" status means the grant (or our client) was refused: invalid_grant. 601 and the retriable
 * families are temporary.
 */
export function unwrapTokenEnvelope(json: unknown): { access_token: string; [k: string]: unknown } {
  const envelope = (json ?? {}) as WithingsEnvelope<Record<string, unknown>>;
  if (typeof envelope.status !== 'number')
    throw new ProviderFetchError('provider_unavailable', 'withings: the token endpoint answered without a {status, body} envelope');
  if (envelope.status !== 0) {
    const family = statusFamily(envelope.status);
    const detail = `withings token endpoint: status ${envelope.status}${envelope.error ? ` (${envelope.error})` : ''}`;
    if (family === 'invalid_params' || family === 'authentication_failed' || family === 'unauthorized') throw new OAuthError('invalid_grant', detail);
    throw new ProviderFetchError('provider_unavailable', detail);
  }
  const body = { ...(envelope.body ?? {}) };
  // The reference types userid as an integer (example 363), the AE example as a string: keep one form, a string.
  if (body.userid !== undefined && body.userid !== null) body.userid = String(body.userid);
  return body as { access_token: string };
}

// ---- Signed calls ------------------------------------------------------------------------------------------------

/**
 * The signature hash protocol (developer.withings.com …/get-access/sign-your-requests): the values of the signed
 * parameters sorted by key name, joined with commas, HMAC-SHA256 with the client secret, lowercase hex. Service calls
 * sign `action, client_id, nonce`; Signature v2 - Getnonce signs `action, client_id, timestamp`.
 */
export function withingsSignature(clientSecret: string, params: Record<string, string | number>): string {
  const data = Object.keys(params)
    .sort()
    .map((k) => String(params[k]))
    .join(',');
  return hmacSha256(clientSecret, [data], 'hex');
}

/** A fresh nonce (valid 30 minutes, single use) from Signature v2 - Getnonce. */
export async function getNonce(ctx: ProviderCallContext, now: Date = new Date()): Promise<string> {
  const signed = { action: 'getnonce', client_id: ctx.client.clientId, timestamp: Math.floor(now.getTime() / 1000) };
  const body = await callWithings<{ nonce?: string }>(
    ctx.http,
    URLS.signature,
    { ...signed, signature: withingsSignature(ctx.client.clientSecret, signed) },
    'none',
  );
  if (!body.nonce) throw new ProviderFetchError('provider_unavailable', 'withings: getnonce answered without a nonce');
  return body.nonce;
}

/** A signed call: getnonce, then `action` with client_id, nonce and signature (two HTTP requests). */
export async function callSigned<T>(ctx: ProviderCallContext, url: string, action: string, params: Record<string, string | number | undefined>): Promise<T> {
  const nonce = await getNonce(ctx);
  const signed = { action, client_id: ctx.client.clientId, nonce };
  return callWithings<T>(ctx.http, url, { ...params, ...signed, signature: withingsSignature(ctx.client.clientSecret, signed) }, 'none');
}
