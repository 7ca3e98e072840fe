import { createHash, createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The common part of the provider fakes (one file each beside this one): a real HTTP server on loopback that a
 * provider fake fills with its routes, its consent page, its codes and tokens and its users' data, recording every
 * request it receives. Each fake follows its provider's public API (../shared/reference/providers.md); what they all
 * do the same way lives here: the consent page (approve and deny), one-use authorization codes with PKCE, access and
 * refresh tokens, injected faults (429 with headers, 5xx), a request log and signed pushes.
 */
export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
  body: string;
  /** Date.now() when it arrived (a time-skipping test's Date follows the server's clock). */
  at: number;
  /** The fake user the bearer token named, when there was one. */
  userId?: string;
  status?: number;
}

export interface FakeRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
  rawBody: Buffer;
  /** The form fields of a urlencoded body, or the parsed JSON of a JSON body. */
  form: Record<string, string>;
  json: unknown;
  record: RecordedRequest;
}

export interface FakeReply {
  status?: number;
  headers?: Record<string, string>;
  /** An object is sent as JSON; a string as it is (set content-type in headers for HTML). */
  body?: unknown;
}

export type FakeHandler = (req: FakeRequest) => FakeReply | Promise<FakeReply>;

export interface Fault {
  method?: string;
  /** A path, or a pattern the path must match. */
  path?: string | RegExp;
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
  /** How many matching requests it answers (default 1). */
  times?: number;
}

export interface FakeUser {
  /** The provider's id of the user (a string, whatever the provider's type). */
  id: string;
  /** Seeds the user's generated data. */
  seed: string;
  /** Seconds east of UTC the user's device records in. */
  zoneOffsetSeconds: number;
  /** Set by the fake when the user removes our access (revoke, deregistration). */
  revoked?: boolean;
  [extra: string]: unknown;
}

export interface CodeGrant {
  code: string;
  userId: string;
  clientId: string;
  redirectUri: string;
  scope: string;
  codeChallenge?: string;
  expiresAt: number;
  used: boolean;
  /** The tokens issued for this code (a reused code revokes them, RFC 6749 §4.1.2). */
  issued: string[];
}

export interface AccessToken {
  token: string;
  userId: string;
  expiresAt: number;
  revoked: boolean;
  scope: string;
}

export interface RefreshToken {
  token: string;
  userId: string;
  /** Refused after this instant (WHOOP: at once when a new one is issued; Withings: 8 h later). */
  validUntil: number;
  revoked: boolean;
}

export interface FakeProviderOptions {
  slug: string;
  /** Name shown on the consent page. */
  name: string;
  /** The client the fake was "registered" with. */
  clientId: string;
  clientSecret: string;
  /** Path of the authorize page (GET shows consent, POST approves or denies). */
  authorizePath: string;
  port?: number;
}

/**
 * `v` rounded to `digits` decimals, never -0: JSON has no negative zero, so what a client parses from a served -0 is 0,
 * and a test comparing it with the fake's own record must find the same number.
 */
export const round = (v: number, digits = 0): number => Math.round(v * 10 ** digits) / 10 ** digits || 0;

/** A seeded PRNG (mulberry32): the same seed, the same data. */
export function seededRandom(seed: string): () => number {
  let a = createHash('sha256').update(seed).digest().readUInt32LE(0);
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class FakeProvider {
  readonly requests: RecordedRequest[] = [];
  readonly users = new Map<string, FakeUser>();
  readonly codes = new Map<string, CodeGrant>();
  readonly accessTokens = new Map<string, AccessToken>();
  readonly refreshTokens = new Map<string, RefreshToken>();
  /** The user the next consent approves as; unset: a new user is created. */
  nextConsentUser: string | null = null;
  /** The scopes the next consenting user leaves ticked (a consent page that lets them untick some: Strava's); null: all asked. */
  nextConsentScope: string | null = null;
  /** Whether the redirect back carries the granted `scope` (Strava's does: the app must check it). */
  protected callbackCarriesScope = false;
  private readonly routes = new Map<string, FakeHandler>();
  private readonly faults: Fault[] = [];
  private readonly lateAnswers: (Omit<Fault, 'status' | 'headers' | 'body'> & { delayMs: number })[] = [];
  private server: Server | null = null;
  url = '';

  constructor(readonly options: FakeProviderOptions) {
    this.route('GET', options.authorizePath, (req) => this.consentPage(req));
    this.route('POST', options.authorizePath, (req) => this.consentAnswer(req));
    // Browsers ask every host for one; the real providers have theirs.
    this.route('GET', '/favicon.ico', () => ({ status: 204 }));
  }

  route(method: string, path: string, handler: FakeHandler): void {
    this.routes.set(`${method} ${path}`, handler);
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    // A client in the same process whose event loop was busy for seconds must not find its kept-alive socket closed.
    this.server.keepAliveTimeout = 65_000;
    await new Promise<void>((resolve) => this.server!.listen(this.options.port ?? 0, '127.0.0.1', () => resolve()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    if (!this.server) return;
    const closed = new Promise<void>((resolve) => this.server!.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
    this.server = null;
  }

  /** Answers the next `times` matching requests with this status (429 with its headers, 500...). */
  fail(fault: Fault): void {
    this.faults.push({ times: 1, ...fault });
  }

  /**
   * Handles the next `times` matching requests as usual (a refresh token rotates, data is served) but holds each
   * answer for `delayMs`, past the caller's timeout: the work is done at the provider and its answer is lost.
   */
  answerLate(rule: Omit<Fault, 'status' | 'headers' | 'body'> & { delayMs: number }): void {
    this.lateAnswers.push({ times: 1, ...rule });
  }

  /** Requests to paths matching `path` (optionally of one user), in arrival order. */
  requestsTo(path: string | RegExp, userId?: string): RecordedRequest[] {
    return this.requests.filter((r) => (typeof path === 'string' ? r.path === path : path.test(r.path)) && (!userId || r.userId === userId));
  }

  addUser(user: Partial<FakeUser> = {}): FakeUser {
    const id = user.id ?? String(this.newUserId());
    const full: FakeUser = { seed: `${this.options.slug}:${id}`, zoneOffsetSeconds: 0, ...user, id };
    this.users.set(id, full);
    return full;
  }

  /** A provider-shaped user id for a new user; fakes whose ids are numbers or UUIDs override it. */
  protected newUserId(): string | number {
    return randomBytes(6).toString('hex');
  }

  // ---- OAuth helpers the provider fakes' token endpoints use ------------------------------------------------

  /** Issues an access token (and a refresh token unless `refresh` is false) for `userId`. */
  issueTokens(userId: string, opts: { accessTtlSeconds: number; refresh?: boolean; scope?: string }): { access: AccessToken; refresh: RefreshToken | null } {
    const access: AccessToken = {
      token: `at_${randomBytes(16).toString('hex')}`,
      userId,
      expiresAt: Date.now() + opts.accessTtlSeconds * 1000,
      revoked: false,
      scope: opts.scope ?? '',
    };
    this.accessTokens.set(access.token, access);
    let refresh: RefreshToken | null = null;
    if (opts.refresh !== false) {
      refresh = { token: `rt_${randomBytes(16).toString('hex')}`, userId, validUntil: Number.POSITIVE_INFINITY, revoked: false };
      this.refreshTokens.set(refresh.token, refresh);
    }
    return { access, refresh };
  }

  /** The code of an authorization-code grant, checked: one use, unexpired, same client and redirect, PKCE. */
  redeemCode(form: Record<string, string>, clientId: string): { grant: CodeGrant } | { error: string; description: string } {
    const grant = this.codes.get(form.code ?? '');
    if (!grant) return { error: 'invalid_grant', description: 'Unknown authorization code.' };
    if (grant.used) {
      // RFC 6749 §4.1.2: a code used twice revokes every token issued for it.
      for (const t of grant.issued) {
        const a = this.accessTokens.get(t);
        if (a) a.revoked = true;
        const r = this.refreshTokens.get(t);
        if (r) r.revoked = true;
      }
      return { error: 'invalid_grant', description: 'Authorization code already used; its tokens are revoked.' };
    }
    if (grant.expiresAt < Date.now()) return { error: 'invalid_grant', description: 'Authorization code expired.' };
    if (grant.clientId !== clientId) return { error: 'invalid_client', description: 'Code issued to another client.' };
    if (form.redirect_uri !== undefined && form.redirect_uri !== grant.redirectUri)
      return { error: 'invalid_grant', description: 'redirect_uri does not match the authorization request.' };
    if (grant.codeChallenge) {
      const verifier = form.code_verifier ?? '';
      const challenge = createHash('sha256').update(verifier).digest('base64url');
      if (challenge !== grant.codeChallenge) return { error: 'invalid_grant', description: 'code_verifier does not match the code_challenge.' };
    }
    grant.used = true;
    return { grant };
  }

  /** The client of a token request: HTTP Basic or the form's client_id/client_secret; null when wrong. */
  tokenClient(req: FakeRequest, how: 'basic' | 'body'): string | null {
    let id: string | undefined;
    let secret: string | undefined;
    if (how === 'basic') {
      const m = /^Basic (.+)$/.exec(req.headers.authorization ?? '');
      if (m) [id, secret] = Buffer.from(m[1], 'base64').toString().split(':').map(decodeURIComponent);
    } else {
      id = req.form.client_id;
      secret = req.form.client_secret;
    }
    return id === this.options.clientId && secret === this.options.clientSecret ? id : null;
  }

  /** The user of a request's bearer token, or a 401 reply. */
  bearer(req: FakeRequest): { user: FakeUser } | { reply: FakeReply } {
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    const token = m ? this.accessTokens.get(m[1]) : undefined;
    const unauthorized = { reply: { status: 401, body: { error: 'invalid_token', message: 'Missing, unknown, expired or revoked access token.' } } };
    if (!token || token.revoked || token.expiresAt < Date.now()) return unauthorized;
    const user = this.users.get(token.userId);
    if (!user || user.revoked) return unauthorized;
    req.record.userId = user.id;
    return { user };
  }

  /** Revokes every token of a user (the user removed our access, or we revoked it). */
  revokeUser(userId: string): void {
    for (const t of this.accessTokens.values()) if (t.userId === userId) t.revoked = true;
    for (const t of this.refreshTokens.values()) if (t.userId === userId) t.revoked = true;
  }

  /** Expires a user's current access tokens now (the next API call gets a 401 and must refresh). */
  expireAccessTokens(userId: string): void {
    for (const t of this.accessTokens.values()) if (t.userId === userId) t.expiresAt = Date.now() - 1;
  }

  // ---- Pushes ---------------------------------------------------------------------------------------------

  /** POSTs a push to `url` as the provider sends it; answers the receiver's status. */
  async push(url: string, body: string | Buffer, headers: Record<string, string>): Promise<{ status: number; text: string }> {
    const res = await fetch(url, { method: 'POST', headers, body });
    return { status: res.status, text: await res.text() };
  }

  static hmacHex(secret: string, data: string | Buffer): string {
    return createHmac('sha256', secret).update(data).digest('hex');
  }

  static hmacBase64(secret: string, data: string | Buffer): string {
    return createHmac('sha256', secret).update(data).digest('base64');
  }

  // ---- The consent page -----------------------------------------------------------------------------------

  protected consentPage(req: FakeRequest): FakeReply {
    const q = req.query;
    if (q.client_id !== this.options.clientId)
      return { status: 400, body: { error: 'invalid_client', message: `Unknown client_id ${q.client_id ?? '(none)'}` } };
    if (!q.redirect_uri) return { status: 400, body: { error: 'invalid_request', message: 'redirect_uri is required' } };
    const hidden = Object.entries(q)
      .map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v)}">`)
      .join('');
    const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(this.options.name)} — authorize</title>
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}button{font-size:1rem;padding:.5rem 1rem;margin-right:.5rem}</style></head>
<body><h1>${escapeHtml(this.options.name)} (local fake)</h1>
<p>An application wants to read your ${escapeHtml(this.options.name)} data: <code>${escapeHtml(q.scope ?? '')}</code></p>
<form method="post" action="${escapeHtml(this.options.authorizePath)}">${hidden}
<button type="submit" name="decision" value="approve" id="approve">Allow</button>
<button type="submit" name="decision" value="deny" id="deny">Deny</button></form></body></html>`;
    return { status: 200, headers: { 'content-type': 'text/html; charset=utf-8' }, body: html };
  }

  private consentAnswer(req: FakeRequest): FakeReply {
    const f = req.form;
    const target = new URL(f.redirect_uri);
    if (f.state) target.searchParams.set('state', f.state);
    if (f.decision !== 'approve') {
      target.searchParams.set('error', 'access_denied');
      return { status: 302, headers: { location: target.toString() } };
    }
    const user = this.nextConsentUser ? this.users.get(this.nextConsentUser) : undefined;
    this.nextConsentUser = null;
    const scope = this.nextConsentScope ?? f.scope ?? '';
    this.nextConsentScope = null;
    const consenting = user ?? this.addUser();
    const code = `code_${randomBytes(12).toString('hex')}`;
    this.codes.set(code, {
      code,
      userId: consenting.id,
      clientId: f.client_id,
      redirectUri: f.redirect_uri,
      scope,
      codeChallenge: f.code_challenge,
      expiresAt: Date.now() + 10 * 60_000,
      used: false,
      issued: [],
    });
    target.searchParams.set('code', code);
    if (this.callbackCarriesScope) target.searchParams.set('scope', scope);
    return { status: 302, headers: { location: target.toString() } };
  }

  // ---- Plumbing -------------------------------------------------------------------------------------------

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const rawBody = Buffer.concat(chunks);
    const url = new URL(req.url ?? '/', 'http://fake');
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]));
    const record: RecordedRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers,
      body: rawBody.toString(),
      at: Date.now(),
    };
    this.requests.push(record);
    const type = headers['content-type'] ?? '';
    let form: Record<string, string> = {};
    let json: unknown;
    if (type.includes('application/x-www-form-urlencoded')) form = Object.fromEntries(new URLSearchParams(rawBody.toString()));
    else if (type.includes('json') && rawBody.length) {
      try {
        json = JSON.parse(rawBody.toString());
      } catch {
        json = undefined;
      }
    }
    const fake: FakeRequest = { method: record.method, path: record.path, query: record.query, headers, rawBody, form, json, record };
    let reply: FakeReply;
    const matches = (f: { method?: string; path?: string | RegExp }) =>
      (!f.method || f.method === record.method) && (!f.path || (typeof f.path === 'string' ? f.path === record.path : f.path.test(record.path)));
    const fault = this.faults.find(matches);
    if (fault) {
      fault.times = (fault.times ?? 1) - 1;
      if (fault.times <= 0) this.faults.splice(this.faults.indexOf(fault), 1);
      reply = { status: fault.status, headers: fault.headers, body: fault.body ?? { error: `injected ${fault.status}` } };
    } else {
      const handler = this.routes.get(`${record.method} ${record.path}`) ?? this.matchPattern(record.method, record.path, fake);
      try {
        reply = handler
          ? await handler(fake)
          : { status: 404, body: { error: 'not_found', message: `${this.options.name} fake has no ${record.method} ${record.path}` } };
      } catch (err) {
        reply = { status: 500, body: { error: 'fake_error', message: (err as Error).message } };
      }
    }
    const late = this.lateAnswers.find(matches);
    if (late) {
      late.times = (late.times ?? 1) - 1;
      if (late.times <= 0) this.lateAnswers.splice(this.lateAnswers.indexOf(late), 1);
      await new Promise((resolve) => setTimeout(resolve, late.delayMs));
      if (res.destroyed) return;
    }
    record.status = reply.status ?? 200;
    const outHeaders: Record<string, string> = { ...reply.headers };
    let out: string | undefined;
    if (reply.body !== undefined) {
      if (typeof reply.body === 'string') out = reply.body;
      else {
        out = JSON.stringify(reply.body);
        outHeaders['content-type'] ??= 'application/json';
      }
    }
    res.writeHead(record.status, outHeaders);
    res.end(record.method === 'HEAD' ? undefined : out);
  }

  /** Routes declared with `{param}` segments: the params land in `req.query` under their names. */
  private matchPattern(method: string, path: string, req: FakeRequest): FakeHandler | undefined {
    for (const [key, handler] of this.routes) {
      const [m, pattern] = key.split(' ');
      if (m !== method || !pattern.includes('{')) continue;
      const names: string[] = [];
      const re = new RegExp(`^${pattern.replace(/\{(\w+)\}/g, (_, n) => (names.push(n), '([^/]+)'))}$`);
      const hit = re.exec(path);
      if (hit) {
        names.forEach((n, i) => (req.query[n] = decodeURIComponent(hit[i + 1])));
        return handler;
      }
    }
    return undefined;
  }
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
