import { ProviderFetchError } from '../provider-errors';
import { RateLimitedError, type ProviderHttp, type ProviderIntegration, type ProviderRequest, type ProviderResponse } from './contract';

/**
 * `url` with its scheme, host and port replaced by `base` (PROVIDER_<SLUG>_BASE_URL), its path and query kept; `url`
 * itself without a base. A base with a path prefixes it (a proxy mounted under a path).
 */
export function rebase(url: string, base: string | undefined): string {
  if (!base) return url;
  const from = new URL(url);
  const to = new URL(base);
  const prefix = to.pathname.replace(/\/$/, '');
  return `${to.protocol}//${to.host}${prefix}${from.pathname}${from.search}`;
}

/**
 * A rebased request names the provider host it was meant for in `X-Forwarded-Host`: a proxy or fake standing in for
 * several hosts of one provider (Dexcom's regions) tells them apart by it. The authorize page, opened by the user's
 * browser, cannot carry it.
 */
export const forwardedHost = (url: string, base: string | undefined): Record<string, string> => (base ? { 'x-forwarded-host': new URL(url).host } : {});

export interface ProviderHttpOptions {
  integration: Pick<ProviderIntegration, 'slug' | 'rateLimitResetAt' | 'unauthorizedBody'>;
  baseUrl?: string;
  client: { clientId: string; clientSecret: string };
  /** The user's current access token (the token store refreshes it ahead of expiry). */
  accessToken?(): Promise<string>;
  /** After a 401: a fresh access token (a refresh, or the one another worker just got), or null when none can be had. */
  refreshAfterUnauthorized?(rejected: string): Promise<string | null>;
  /** The app's shared rate-limit gate (in MongoDB): its budget drawn from before every request, its 429 block checked before and set after a 429. */
  gate?: RateLimitGate;
  timeoutMs?: number;
  /** Injected clock (tests on a time-skipping server). */
  now?(): Date;
}

/** No request to a provider for an app before the instant its last 429 named, and none beyond its budget, across every worker. */
export interface RateLimitGate {
  /** The instant requests may go again, or null when they may now. */
  blockedUntil(): Promise<Date | null>;
  block(until: Date, reason: string): Promise<void>;
  /** Draws `requests` requests (one by default) of `method` from the app's budget (budget.ts): null when drawn, else when to ask again and why. */
  take?(method: string, now: Date, requests?: number): Promise<BudgetRefusal | null>;
}

export interface BudgetRefusal {
  retryAt: Date;
  reason: string;
  /** Drawn from a later slot (a sign-in's booking, budget.ts): send at `retryAt` without drawing again. */
  booked?: boolean;
}

/**
 * How long a request the app's budget has no room for waits here for room (a slot of WHOOP's minute is ~1.6 s); a
 * longer wait (a spent day, Strava's 24-second slots) is not made here: the request is not sent, and RateLimitedError
 * hands the wait to the caller (a page activity returns `rate_limited`, its workflow waits on a timer).
 */
const MAX_BUDGET_WAIT_MS = 20_000;

/** Draws `requests` requests from the app's budget before they are sent, waiting for room up to MAX_BUDGET_WAIT_MS; throws RateLimitedError beyond. */
export async function drawFromBudget(
  gate: Pick<RateLimitGate, 'take'> | undefined,
  method: string,
  now: () => Date = () => new Date(),
  requests = 1,
): Promise<void> {
  if (!gate?.take) return;
  const started = now().getTime();
  for (let refused = 1; ; refused++) {
    const refusal = await gate.take(method, now(), requests);
    if (!refusal) return;
    const untilRetry = Math.max(0, refusal.retryAt.getTime() - now().getTime());
    if (refusal.booked) return void (await sleep(untilRetry));
    if (refusal.retryAt.getTime() - started > MAX_BUDGET_WAIT_MS) throw new RateLimitedError(refusal.retryAt, refusal.reason);
    // Many requests waiting for one app come back spread out, the more so the longer they waited: a slot admits a
    // few, and the rest asking again all at once would load the store for nothing.
    await sleep(Math.max(untilRetry, 50) * (1 + Math.random() * Math.min(refused, 8)));
  }
}

const DEFAULT_TIMEOUT_MS = 30_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** A 429 without any hint of when to come back waits this long. */
const DEFAULT_RATE_LIMIT_WAIT_MS = 60_000;

export function createProviderHttp(options: ProviderHttpOptions): ProviderHttp {
  const slug = options.integration.slug;
  const now = options.now ?? (() => new Date());
  /** GETs already drawn by `reserve`. */
  let reservedGets = 0;

  async function send(req: ProviderRequest, bearer: string | null): Promise<Response> {
    const method = req.method ?? 'GET';
    if (method === 'GET' && reservedGets > 0) reservedGets--;
    else await drawFromBudget(options.gate, method, now);
    const url = new URL(rebase(req.url, options.baseUrl));
    for (const [k, v] of Object.entries(req.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { accept: 'application/json', ...forwardedHost(req.url, options.baseUrl), ...req.headers };
    let body: string | undefined;
    if (req.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(Object.entries(req.form).flatMap(([k, v]): [string, string][] => (v === undefined ? [] : [[k, String(v)]]))).toString();
    } else if (req.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(req.json);
    }
    const auth = req.auth ?? 'bearer';
    if (auth === 'bearer' && bearer) headers.authorization = `Bearer ${bearer}`;
    if (auth === 'client-basic') headers.authorization = basicAuth(options.client.clientId, options.client.clientSecret);
    try {
      return await fetch(url, {
        method: req.method ?? 'GET',
        headers,
        body,
        signal: AbortSignal.timeout(options.timeoutMs ?? DEFAULT_TIMEOUT_MS),
        redirect: 'manual',
      });
    } catch (err) {
      const what = (err as Error).name === 'TimeoutError' ? 'timed out' : `failed (${(err as Error).message})`;
      throw new ProviderFetchError('provider_unavailable', `${slug}: ${req.method ?? 'GET'} ${url.pathname} ${what}`);
    }
  }

  function retryAt(res: Response): Date {
    const at = now();
    const header = res.headers.get('retry-after');
    if (header) {
      const seconds = Number(header);
      if (Number.isFinite(seconds)) return new Date(at.getTime() + Math.max(0, seconds) * 1000);
      const date = Date.parse(header);
      if (Number.isFinite(date)) return new Date(Math.max(date, at.getTime()));
    }
    return options.integration.rateLimitResetAt?.(res.headers, at) ?? new Date(at.getTime() + DEFAULT_RATE_LIMIT_WAIT_MS);
  }

  return {
    async reserve(requests: number): Promise<void> {
      await drawFromBudget(options.gate, 'GET', now, requests);
      reservedGets += requests;
    },
    async request<T>(req: ProviderRequest): Promise<ProviderResponse<T>> {
      const path = new URL(req.url).pathname;
      const blocked = await options.gate?.blockedUntil();
      if (blocked && blocked > now()) throw new RateLimitedError(blocked, `${slug}: rate limited until ${blocked.toISOString()} (no request sent)`);
      const needsToken = (req.auth ?? 'bearer') === 'bearer';
      let token = needsToken && options.accessToken ? await options.accessToken() : null;
      let res = await send(req, token);
      let text: string | null = null;
      const refused = async () => {
        if (res.status === 401) return true;
        if (!res.ok || !options.integration.unauthorizedBody) return false;
        text = await res.text();
        return options.integration.unauthorizedBody(parseOrUndefined(text));
      };
      if (needsToken && token && options.refreshAfterUnauthorized && (await refused())) {
        // 401 → refresh once → retry; a second 401 is a connection error.
        if (text === null) await res.body?.cancel();
        token = await options.refreshAfterUnauthorized(token);
        if (!token) throw new ProviderFetchError('token_refresh_failed', `${slug} refused the access token and no new one could be had.`);
        res = await send(req, token);
        text = null;
      }
      if (res.status === 429) {
        const until = retryAt(res);
        await res.body?.cancel();
        await options.gate?.block(until, `${slug} answered 429 on ${path}`);
        throw new RateLimitedError(until, `${slug}: 429 on ${path}; next request at ${until.toISOString()}`);
      }
      text ??= await res.text();
      const accepted = res.ok || req.accept?.includes(res.status);
      if (!accepted) {
        const detail = text.slice(0, 300);
        if (res.status >= 500) throw new ProviderFetchError('provider_unavailable', `${slug}: HTTP ${res.status} on ${path}: ${detail}`);
        if (res.status === 401) throw new ProviderFetchError('provider_credential_error', `${slug} refused the access token twice on ${path}: ${detail}`);
        throw new ProviderFetchError('non_retriable_error', `${slug}: HTTP ${res.status} on ${path}: ${detail}`);
      }
      let body: unknown;
      if (text) {
        try {
          body = JSON.parse(text);
        } catch {
          throw new ProviderFetchError('provider_unavailable', `${slug}: ${path} answered ${res.status} with a body that is not JSON: ${text.slice(0, 120)}`);
        }
      }
      return { status: res.status, headers: res.headers, body: body as T };
    },
  };
}

function parseOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export const basicAuth = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
