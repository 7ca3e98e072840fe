import type { ProviderData } from '../model';

/**
 * What one real provider integration is (one folder each under lib/wearables/providers/<slug>/, exporting an
 * `integration` of this type). Everything provider-specific lives there: its OAuth settings, its client (which
 * requests, paging, windows), its mapping into our resources and its push verification. What all share is written
 * once beside this file: the OAuth client (oauth-client.ts), the HTTP client with rate-limit handling (http.ts),
 * the token store and the push intake.
 *
 * Every URL below is the provider's production URL. `PROVIDER_<SLUG>_BASE_URL` replaces the scheme, host and port
 * of all of them and keeps their paths (http.ts `rebase`), which is how the fakes (test/support/fakes/) and a
 * proxy in production are reached.
 */
export interface ProviderIntegration {
  /** The catalogue slug (lib/catalogue/providers.json), e.g. `oura`, `whoop_v2`, `dexcom_v3`. */
  slug: string;
  oauth: OAuthSettings;
  /** How far back a new connection's history pull goes, in days. */
  historyDays: number;
  /**
   * What the provider allows one OAuth app (provider + client id), from its documentation: every request to the
   * provider for that app (pages, push fetches, token requests, revocations, subscription calls, the sign-in's identity
   * call) draws from it first, across every worker and the api (budget.ts, settled in provider_budget_windows).
   */
  budget: RequestBudget;
  /**
   * The pull units, in order. Each is named after the main resource it produces (`sleep`, `activity`,
   * `workouts`, `heartrate`, `hrv`, `blood_oxygen`, `body`, `profile`, `glucose`, ...); a page of it may carry
   * other resources too (an Oura sleep carries `hypnogram` and `hrv` samples): ingest stores each under its own.
   */
  resources: string[];
  /**
   * The first page of a pull of `resource` over `window`, or null when there is nothing to ask for (e.g. older
   * than the provider keeps). Cursors are small JSON objects the workflow carries from page to page.
   */
  firstPage(resource: string, window: PullWindow): PageCursor | null;
  /** Fetches one page (exactly one HTTP request to the provider's API) and maps it. */
  fetchPage(ctx: ProviderCallContext, resource: string, cursor: PageCursor): Promise<ProviderPage>;
  /**
   * After the code exchange, before the connection is stored: the provider's id for the user (Oura
   * `personal_info.id`, WHOOP `user_id`, Polar `x_user_id` after registering the user, Strava `athlete.id`, Withings
   * `userid`, Dexcom none). Throw ProviderFetchError to refuse the connection.
   */
  afterConnect?(ctx: ProviderCallContext): Promise<{ externalUserId: string | null }>;
  /** Revokes our access at the provider (disconnect, user deletion). Absent: the provider has no API for it. */
  revoke?(ctx: ProviderCallContext): Promise<void>;
  /**
   * One object fetched by id after a push that names it (WHOOP sleep/workout/recovery `id`, Strava activity id, Oura
   * `object_id`): one request, mapped. Providers whose pushes name days instead are fetched through firstPage/fetchPage.
   */
  fetchObject?(ctx: ProviderCallContext, resource: string, objectId: string, timezoneOffsetSeconds: number): Promise<ProviderData>;
  /** Pushes from the provider (GET|HEAD|POST /v2/providers/{slug}/webhook). Absent: the provider has none (Dexcom). */
  push?: PushSpec;
  /**
   * Keeps one app's push subscriptions in place through the provider's API (Oura, Polar, Strava), for the
   * provider-subscriptions Schedule (subscriptions.ts): creates what is missing, renews what expires before
   * `renewBefore`, and says what to keep in `provider_apps` (secrets are sealed there). Absent: the provider's pushes
   * are set up elsewhere (WHOOP's dashboard, Withings per user) or it has none.
   */
  ensureAppSubscriptions?(ctx: ProviderCallContext, app: AppSubscriptionState): Promise<AppSubscriptionOutcome>;
  /** Subscribes one newly connected user to pushes, with the user's token (Withings subscribes per user). */
  subscribeUser?(ctx: ProviderCallContext, callbackUrl: string): Promise<void>;
  /**
   * One request with the user's token that succeeds while our grant is live, and fails with a revoked one (401 /
   * `invalid_token`, then a refused refresh): how an unsigned deauthorization (Withings, Strava) is confirmed before
   * the connection ends. Required of an integration whose unsigned pushes can say `deauthorized`.
   */
  confirmAccess?(ctx: ProviderCallContext): Promise<void>;
  /**
   * For providers whose consent page lets the user untick scopes (Strava): the scopes the callback says were granted
   * decide what the connection may read. Absent: whatever was asked for is taken as granted.
   */
  grantedScopes?: ScopeRules;
  /**
   * When a 429 lets us ask again, from the provider's headers, when it sends no `Retry-After` (which http.ts honours
   * first): WHOOP/Oura `X-RateLimit-Reset` (seconds), Polar `RateLimit-Reset`, Strava the next quarter hour.
   */
  rateLimitResetAt?(headers: Headers, now: Date): Date | null;
  /**
   * Whether a 2xx body says the access token was refused (Withings answers HTTP 200 with `{status: 401}`): http.ts
   * then takes the same path as for an HTTP 401 (refresh once, resend).
   */
  unauthorizedBody?(body: unknown): boolean;
  /**
   * A provider that keeps each user's account on the server of the user's region (Dexcom: the US; the EU and the rest
   * of the world outside the US; Japan). The link page asks where the user's account lives (default from the team's
   * region), the connection keeps the answer (`provider_region`), and every one of its requests (authorize, token,
   * API, revoke) goes to that region's host. Absent: one host serves every user.
   */
  regions?: ProviderRegions;
}

export interface ProviderRegions {
  /**
   * The regions in the order the link page offers them. The first is the host every URL of `oauth` is written on, and
   * the region of a connection stored before regions were kept.
   */
  choices: { id: string; label: string }[];
  /** The region a new connection defaults to for a team of deployment region `teamRegion` (`us`, `eu`). */
  defaultFor(teamRegion: string): string;
  /** The origin of a region's server (scheme and host, e.g. `https://api.dexcom.eu`); null for an unknown region. */
  hostFor(region: string): string | null;
}

export interface AppSubscriptionState {
  /** Our push URL for the provider (`<PUBLIC_BASE_URL>/v2/providers/<slug>/webhook`). */
  callbackUrl: string;
  /** The token we give the provider to echo in its handshake. */
  verifyToken: string;
  /** What we keep for the app (provider_apps): a webhook id and secret from an earlier run. */
  stored: { webhook_id?: string | null; webhook_secret?: string | null } | null;
  renewBefore: Date;
}

export interface AppSubscriptionOutcome {
  created: number;
  renewed: number;
  /** Fields of provider_apps to set (webhook_secret is sealed); absent: nothing changed. */
  keep?: { webhook_id?: string | null; webhook_secret?: string | null; subscriptions?: { id: string; key: string; expires_at: Date | null }[] };
}

export interface ScopeRules {
  /** Reads the granted scopes from the authorization callback's query (Strava: `scope`, comma-separated). */
  fromCallback(query: Record<string, unknown>): string[] | null;
  /** Per pull unit: any one of these scopes lets it be read; `full` are those that let it read everything. */
  resources: Record<string, { anyOf: string[]; full: string[] }>;
  /** The connection is refused (`required_scopes_not_granted`) unless one of these was granted... */
  requireAnyOf: string[];
  /** ...with this advice on the outcome page: which box to tick on the provider's consent page. */
  consentAdvice: string;
}

/** An app's request budget at a provider: each window's limit holds at once (WHOOP: 100 a minute and 10,000 a day). */
export interface RequestBudget {
  /** The provider's name in what introspection and the logs say (`daily quota of the WHOOP app reached`). */
  provider: string;
  windows: BudgetWindow[];
}

/**
 * At most `limit` requests of the app per `ms`. A window of a day is counted per UTC day (Strava's resets at midnight
 * UTC; the others document no alignment); a shorter one is counted so that no span of its length, wherever the
 * provider's window falls, holds more than the limit (budget.ts `budgetSlots`).
 */
export interface BudgetWindow {
  /** `minute`, `15 minutes`, `day`...: the words after "a" / "per" in messages, and the window's key in the store. */
  per: string;
  ms: number;
  /** Requests allowed per window; Polar's grow by `perUser` for each of the app's live connections. */
  limit: number;
  perUser?: number;
  /** Only GET requests count (Strava's "non-upload" limit). */
  readsOnly?: boolean;
}

export interface OAuthSettings {
  authorizeUrl: string;
  tokenUrl: string;
  scopes: string[];
  /** How scopes are joined in the authorize URL: ' ' (RFC 6749) or ',' (Strava, Withings). */
  scopeSeparator: ' ' | ',';
  /** Client authentication at the token endpoint: form body (client_id, client_secret) or HTTP Basic. */
  clientAuth: 'body' | 'basic';
  /** PKCE S256 (code_challenge on authorize, code_verifier on exchange). */
  pkce: boolean;
  /** Extra authorize-URL parameters (e.g. Strava `approval_prompt=auto`). */
  authorizeParams?: Record<string, string>;
  /** Extra form fields on every token request (Withings: `action=requesttoken`). */
  tokenParams?: Record<string, string>;
  /**
   * The token endpoint's JSON turned into the standard token response; default: the body as it is. Withings wraps it
   * in `{status, body}` (a non-zero status is an error even on HTTP 200: throw OAuthError('invalid_grant') for a
   * refused code or refresh token, ProviderFetchError('provider_unavailable') for a temporary one).
   */
  unwrapTokenResponse?(json: unknown): TokenResponse;
  /** Whether the provider issues refresh tokens at all (Polar: no; its access token lasts a year). */
  refreshable: boolean;
}

/** The standard OAuth 2 token response (RFC 6749 §5.1), plus provider extras. */
export interface TokenResponse {
  access_token: string;
  token_type?: string;
  refresh_token?: string;
  expires_in?: number;
  scope?: string;
  /** Polar `x_user_id`, Withings `userid`, Strava `athlete.id`, WHOOP none: the provider's user id when the token names it. */
  [extra: string]: unknown;
}

/** The user's tokens as the token store keeps them (sealed at rest). */
export interface TokenSet {
  access_token: string;
  refresh_token: string | null;
  expires_at: Date | null;
  scope: string | null;
  /** The token response's extras (e.g. `x_user_id`, `userid`, `athlete`), for afterConnect. */
  extras: Record<string, unknown>;
}

export interface PullWindow {
  /** Local calendar dates, inclusive (the user's time zone). */
  startDate: string;
  endDate: string;
  /** The same window as instants: start of startDate, end of endDate (exclusive), in the user's offset. */
  start: Date;
  end: Date;
  /** Seconds east of UTC of the user's fallback time zone (for providers whose records carry none). */
  timezoneOffsetSeconds: number;
}

/** A small JSON object (strings, numbers, null): where a pull goes next. */
export type PageCursor = Record<string, string | number | null>;

export interface ProviderPage {
  data: ProviderData;
  /** The next page, or null when the pull of this window is done. */
  next: PageCursor | null;
}

export interface ProviderCallContext {
  http: ProviderHttp;
  /** The provider's id of the connected user (from afterConnect), when known. */
  externalUserId: string | null;
  /** The token response extras of the connection (x_user_id, userid, athlete...). */
  tokenExtras: Record<string, unknown>;
  /** The app's OAuth client (for calls that authenticate as the app: Polar's Basic auth, Oura's subscriptions). */
  client: { clientId: string; clientSecret: string };
  /** The user's current access token, for the calls that take it elsewhere than in a bearer header (Oura's revoke query). */
  accessToken?(): Promise<string>;
  /** The connection's region at a provider with `regions` (null or absent: the first region). */
  region?: string | null;
}

export interface ProviderRequest {
  method?: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** The provider's production URL (http.ts rebases it onto PROVIDER_<SLUG>_BASE_URL when set). */
  url: string;
  query?: Record<string, string | number | boolean | undefined>;
  /** Sent as application/x-www-form-urlencoded. */
  form?: Record<string, string | number | undefined>;
  json?: unknown;
  /** `bearer`: the user's access token (default); `client-basic`: the app's client id and secret; `none`. */
  auth?: 'bearer' | 'client-basic' | 'none';
  headers?: Record<string, string>;
  /** Statuses answered as a normal response instead of an error (e.g. Polar's 409 "already registered", 204). */
  accept?: number[];
}

export interface ProviderResponse<T = unknown> {
  status: number;
  headers: Headers;
  /** Parsed JSON (undefined for an empty body). */
  body: T;
}

/**
 * One HTTP request to the provider's API. Throws:
 * - RateLimitedError on 429 (with the instant the provider named: Retry-After or its reset header);
 * - ProviderFetchError('provider_unavailable') on 5xx, timeouts and network errors (retried with backoff);
 * - ProviderFetchError('provider_credential_error') on a 401 that a token refresh did not cure;
 * - ProviderFetchError('non_retriable_error') on any other 4xx.
 */
export interface ProviderHttp {
  request<T = unknown>(req: ProviderRequest): Promise<ProviderResponse<T>>;
  /**
   * Draws the next `requests` GETs from the app's budget at once, for a call whose first answer is worth nothing
   * without the rest (Strava's streams after a push need the activity first): a budget with no room for all of them
   * refuses before any is sent, rather than after the first, whose retry would send it again. Those requests then
   * draw nothing; one not made (the first answered 404) stays drawn.
   */
  reserve(requests: number): Promise<void>;
}

/** How one provider pushes notifications to us. */
export interface PushSpec {
  /**
   * Whether `verify` proves who sent a POST (an HMAC over the body with a secret: WHOOP, Oura, Polar). False (Withings
   * signs nothing; Strava's subscription id is no secret): every notification is only a hint. A hint that fails
   * `verify` is answered like one that passes (the answer tells a forger nothing), its fetches are coalesced per
   * connection (a flood cannot spend the app's budget), and a deauthorization is confirmed with the provider
   * (`ProviderIntegration.confirmAccess`) before it ends anything.
   */
  signed: boolean;
  /**
   * A GET (or HEAD) from the provider: a subscription handshake (Oura `challenge`, Strava `hub.challenge`,
   * Withings' HEAD check). Answers the reply, or null for "not a handshake" (404).
   */
  handshake?(req: PushRequest, secrets: PushSecrets): { status: number; body?: unknown } | null;
  /**
   * Checks a POST's authenticity: signature (HMAC with the app's secret), timestamp no older than 5 minutes.
   * Returns false for a bad or missing signature or a stale timestamp (401, nothing stored). Withings signs nothing:
   * it returns true and the notification is only a hint that makes us fetch.
   */
  verify(req: PushRequest, secrets: PushSecrets, now: Date): boolean;
  /** What the POST says happened: each item names the user and what to fetch (never trusted as data). */
  parse(req: PushRequest): PushNotification[];
}

export interface PushRequest {
  method: string;
  query: Record<string, string>;
  headers: Record<string, string>;
  /** The exact bytes received (signatures are over them). */
  rawBody: Buffer;
  /** The sender's address (logged with a refused or unconfirmed notification). */
  remoteAddress?: string;
}

export interface PushSecrets {
  clientSecret: string;
  /** A secret the provider gave us for its pushes (Polar's `signature_secret_key`), or a verify token we chose. */
  webhookSecret?: string;
  verifyToken?: string;
}

export type PushNotification =
  | {
      kind: 'data';
      /** The provider's id of the user (matched to connections.external_user_id). */
      externalUserId: string;
      /** The pull unit (one of `resources`) to fetch. */
      resource: string;
      /** Either a window of local dates to fetch, or one object by the provider's id (WHOOP, Strava, Oura object_id). */
      window?: { startDate: string; endDate: string };
      objectId?: string;
      /** A stable id of this notification (dedupe: the same notification twice fetches once). */
      dedupeKey: string;
    }
  | { kind: 'deauthorized'; externalUserId: string; dedupeKey: string }
  | { kind: 'ping' };

export class RateLimitedError extends Error {
  constructor(
    /** No request to this provider for this app before this instant. */
    readonly retryAt: Date,
    message: string,
  ) {
    super(message);
  }
}

/** An OAuth error from the token endpoint (RFC 6749 §5.2), e.g. `invalid_grant` for a revoked refresh token or a reused code. */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    message: string,
  ) {
    super(message);
  }
}
