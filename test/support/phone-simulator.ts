import { gzipSync } from 'node:zlib';

/**
 * A phone running an SDK as the references' SDKs behave (../shared/reference/phones.md §1): it signs in with the
 * sign-in token the customer's backend hands it, connects its provider, asks the server how to sync, uploads gzip
 * chunks in the SDKs' envelope (10,000 samples in the foreground), gives every request 15 seconds (iOS) and tries
 * it again after a timeout, and on a 401 refreshes once and retries. Each 401 refreshes on its own, as two uploads
 * running at once on a phone do.
 */

export interface PhoneReply<T = any> {
  status: number;
  body: T;
  /** How many times the call was sent (timeouts and a 401 send it again). */
  attempts: number;
}

export interface PhoneOptions {
  provider?: 'apple_health_kit' | 'health_connect' | 'samsung_health';
  timeZone?: string;
  /** Per request (iOS: 15 s). */
  timeoutMs?: number;
  /** Sends after a timeout before giving up. */
  retries?: number;
}

export const FOREGROUND_CHUNK = 10_000;

export class PhoneSimulator {
  readonly provider: 'apple_health_kit' | 'health_connect' | 'samsung_health';
  readonly timeZone: string;
  timeoutMs: number;
  private retries: number;
  private accessToken = '';
  private refreshToken = '';
  /** Set once the server said the sign-in has ended (the app must ask its backend again). */
  signedOut = false;
  refreshes = 0;

  private constructor(
    private readonly baseUrl: string,
    readonly userId: string,
    options: PhoneOptions,
  ) {
    this.provider = options.provider ?? 'apple_health_kit';
    this.timeZone = options.timeZone ?? 'Europe/Berlin';
    this.timeoutMs = options.timeoutMs ?? 15_000;
    this.retries = options.retries ?? 2;
  }

  /** The app's sign-in: its backend asks for a sign-in token (team key), the phone exchanges it. */
  static async signIn(baseUrl: string, teamKey: string, userId: string, options: PhoneOptions = {}): Promise<PhoneSimulator> {
    const res = await fetch(`${baseUrl}/v2/user/${userId}/sign_in_token`, { method: 'POST', headers: { 'x-service-api-key': teamKey } });
    if (res.status !== 200) throw new Error(`sign_in_token answered ${res.status}: ${await res.text()}`);
    const { sign_in_token } = (await res.json()) as { sign_in_token: string };
    const phone = new PhoneSimulator(baseUrl, userId, options);
    await phone.token({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token: sign_in_token,
      subject_token_type: 'urn:healthbridge:sign-in-token',
    });
    return phone;
  }

  get currentAccessToken(): string {
    return this.accessToken;
  }

  private async token(fields: Record<string, string>): Promise<number> {
    const res = await fetch(`${this.baseUrl}/v2/sdk/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });
    if (res.status === 200) {
      const tokens = (await res.json()) as { access_token: string; refresh_token: string };
      this.accessToken = tokens.access_token;
      this.refreshToken = tokens.refresh_token;
    } else if (res.status === 400) {
      const { detail } = (await res.json()) as { detail: { error_type: string } };
      if (detail.error_type === 'reauthentication_required') this.signedOut = true;
    }
    return res.status;
  }

  /** A request as the SDK sends it: bearer token, gzip JSON, 15 s, again after a timeout, refresh on a 401. */
  async call<T = any>(
    method: string,
    path: string,
    body?: unknown,
    options: { gzip?: boolean; timeoutMs?: number; firstTimeoutMs?: number } = {},
  ): Promise<PhoneReply<T>> {
    let attempts = 0;
    let refreshed = false;
    for (;;) {
      attempts++;
      const json = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const gzip = options.gzip ?? true;
      let res: Response;
      try {
        res = await fetch(`${this.baseUrl}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${this.accessToken}`,
            ...(json ? { 'content-type': 'application/json', ...(gzip ? { 'content-encoding': 'gzip' } : {}) } : {}),
          },
          body: json ? (gzip ? gzipSync(json) : json) : undefined,
          signal: AbortSignal.timeout((attempts === 1 ? options.firstTimeoutMs : undefined) ?? options.timeoutMs ?? this.timeoutMs),
        });
      } catch (err) {
        if ((err as Error).name !== 'TimeoutError' || attempts > this.retries) throw err;
        // The SDKs send a timed-out request again: the server must store it once.
        continue;
      }
      const text = await res.text();
      const parsed = text ? JSON.parse(text) : undefined;
      if (res.status === 401 && !refreshed && !this.signedOut) {
        refreshed = true;
        this.refreshes++;
        const status = await this.token({ grant_type: 'refresh_token', refresh_token: this.refreshToken });
        if (status === 200) continue;
      }
      return { status: res.status, body: parsed as T, attempts };
    }
  }

  connect(): Promise<PhoneReply> {
    return this.call(
      'POST',
      `/v2/link/provider/manual/${this.provider}`,
      { user_id: this.userId, granted_permissions: ['steps', 'heartrate', 'sleep'] },
      { gzip: false },
    );
  }

  syncState(window: { start?: string; end?: string } = {}): Promise<PhoneReply> {
    return this.call(
      'POST',
      `/v2/user/${this.userId}/sdk_sync_state/${this.provider}`,
      { tzinfo: this.timeZone, request_start_date: window.start ?? null, request_end_date: window.end ?? null },
      { gzip: false },
    );
  }

  startHistorical(resource: string, rangeStart: string, rangeEnd: string): Promise<PhoneReply> {
    return this.call(
      'POST',
      `/v2/user/${this.userId}/sdk_start_historical_stage/${this.provider}`,
      { range_start: rangeStart, range_end: rangeEnd, backfill_type: resource },
      { gzip: false },
    );
  }

  uploadTimeseries(resource: string, envelope: Record<string, unknown>, options: { timeoutMs?: number; firstTimeoutMs?: number } = {}): Promise<PhoneReply> {
    return this.call('POST', `/v2/timeseries/${this.userId}/${resource}`, { provider: this.provider, time_zone: this.timeZone, ...envelope }, options);
  }

  uploadSummaries(resource: string, envelope: Record<string, unknown>): Promise<PhoneReply> {
    return this.call('POST', `/v2/summary/${resource}/${this.userId}`, { provider: this.provider, time_zone: this.timeZone, ...envelope });
  }

  records(records: Record<string, unknown>[]): Promise<PhoneReply> {
    return this.call('POST', `/v2/sdk/${this.userId}/records`, { provider: this.provider, time_zone: this.timeZone, records });
  }

  syncProgress(report: Record<string, unknown>): Promise<PhoneReply> {
    return this.call('POST', `/v2/user/${this.userId}/sdk_sync_progress/${this.provider}`, report, { gzip: false });
  }

  /**
   * The historical stage of a resource as the SDKs run it: say so, then the samples in chunks of `chunkSize`, every
   * chunk carrying the same window and the last one `is_final_chunk`.
   */
  async backfill(resource: string, window: { start: string; end: string }, data: Record<string, unknown>[], chunkSize = FOREGROUND_CHUNK) {
    const started = await this.startHistorical(resource, window.start, window.end);
    if (started.status !== 200) throw new Error(`sdk_start_historical_stage answered ${started.status}: ${JSON.stringify(started.body)}`);
    const replies: PhoneReply[] = [];
    for (let i = 0; i < Math.max(1, data.length); i += chunkSize) {
      replies.push(
        await this.uploadTimeseries(resource, {
          stage: 'historical',
          start_date: window.start,
          end_date: window.end,
          data: data.slice(i, i + chunkSize),
          is_final_chunk: i + chunkSize >= data.length,
        }),
      );
    }
    return replies;
  }
}
