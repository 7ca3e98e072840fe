import { isIP } from 'node:net';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Context } from '@temporalio/activity';
import { Agent, type Dispatcher } from 'undici';
import { fanOutEvents, wakeDispatcher, type EventDeps } from '../lib/events';
import { itemsIdOf, type AttemptDoc, type DeliveryDoc, type EndpointDoc, type QueueDoc, type QueueEntry, type QueueItem } from '../lib/repositories/webhooks';
import { SIGNATURE_HEADERS, signatureHeaders } from '../lib/webhook-signing';
import { guardedLookup, isAllowlisted, refusedAddressReason, urlPolicyFromConfig, type UrlPolicy } from '../lib/url-safety';
import { nextAttemptDelay, parseRetryAfter } from '../workflows/webhook-retry';

export interface DispatchResult {
  /** More deliveries are due now (batch full or rate-limited): run again after `waitMs`. */
  more: boolean;
  waitMs: number;
  /** Milliseconds until the soonest queued delivery is due, or null when the queue is empty. */
  nextDueInMs: number | null;
  /** The endpoint is gone or disabled and its queue is drained: the dispatcher may end. */
  stop: boolean;
}

export interface AttemptResult {
  statusCode: number | null;
  errorClass: string | null;
  error: string | null;
  responseBody: string | null;
  durationMs: number;
  retryAfter: string | undefined;
}

const RESPONSE_BODY_LIMIT = 4096;
/** How long one dispatcher activity keeps sending back-to-back batches before handing back to the workflow. */
const DISPATCH_BUDGET_MS = 5_000;
/** How long a dispatcher with nothing due keeps looking (every LINGER_POLL_MS) before it hands back to wait. */
const LINGER_MS = 200;
const LINGER_POLL_MS = 25;
/** How long an activity counts as delivering without renewing its mark (a dead worker's mark then lapses). */
const ACTIVE_LEASE_MS = 60_000;
/** Requests in flight to one endpoint at once (a batch may be larger: its database work is per batch). */
const MAX_CONCURRENT_POSTS = 100;

/** `fn` over `items` with at most `limit` calls pending; results in input order. */
async function mapWithConcurrency<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}
const USER_AGENT = 'Healthbridge-Webhooks/1.0';
/** A receiver that answers with more than this is cut off (the socket is not worth keeping). */
const RESPONSE_READ_LIMIT = 1024 * 1024;

/**
 * Connection pools (keep-alive) per URL policy: one whose connections resolve DNS through the SSRF guard,
 * one for allowlisted receivers. undici's handler API rather than node:http: ~3x less client CPU per request
 * (measured), and sending is most of a dispatcher batch. Redirects are never followed (3xx is a failure).
 */
const agents = new Map<string, Agent>();
function agentFor(policy: UrlPolicy, allowlisted: boolean): Agent {
  const key = allowlisted ? 'allowlisted' : JSON.stringify(policy);
  let agent = agents.get(key);
  if (!agent) {
    agent = new Agent({ connections: 256, keepAliveTimeout: 30_000, connect: allowlisted ? {} : { lookup: guardedLookup(policy) } });
    agents.set(key, agent);
  }
  return agent;
}

const errorClassOf = (code: string | undefined) =>
  code === 'EREFUSEDADDRESS' ? 'refused_address' : code === 'ENOTFOUND' || code === 'EAI_AGAIN' ? 'dns_error' : 'connection_error';

type Posted = Omit<AttemptResult, 'durationMs'>;
const failure = (errorClass: string, error: string): Posted => ({ statusCode: null, errorClass, error, responseBody: null, retryAfter: undefined });

/** Where a batch of POSTs goes, checked once per batch: the URL rules, then the pool to use. */
type PostTarget = { refused: Posted } | { refused: null; agent: Agent; origin: string; path: string };

function postTarget(url: string, policy: UrlPolicy): PostTarget {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return { refused: failure('invalid_url', 'The endpoint URL is not valid') };
  }
  const host = target.hostname.replace(/^\[|\]$/g, '');
  const allowlisted = isAllowlisted(target, policy);
  if (!allowlisted && isIP(host)) {
    const reason = refusedAddressReason(host, policy);
    if (reason) return { refused: failure('refused_address', reason) };
  }
  if (policy.requireHttps && target.protocol !== 'https:' && !allowlisted) return { refused: failure('refused_address', 'https is required') };
  return { refused: null, agent: agentFor(policy, allowlisted), origin: target.origin, path: `${target.pathname}${target.search}` };
}

/** One POST; no redirects are followed (3xx is a failure); the response body is kept up to 4 KB. */
export function postWebhook(url: string, body: string, headers: Record<string, string>, timeoutMs: number, policy: UrlPolicy): Promise<AttemptResult> {
  return post(postTarget(url, policy), body, headers, timeoutMs);
}

/**
 * The POST itself, on undici's handler API (no response stream or promise per chunk: about half the CPU of
 * `request()`, measured). Resolves once, with the outcome; never rejects.
 */
function post(target: PostTarget, body: string, headers: Record<string, string>, timeoutMs: number): Promise<AttemptResult> {
  const started = Date.now();
  if (target.refused) return Promise.resolve({ ...target.refused, durationMs: 0 });
  return new Promise((resolve) => {
    let settled = false;
    let controller: Dispatcher.DispatchController | null = null;
    let statusCode: number | null = null;
    let retryAfter: string | undefined;
    const chunks: Buffer[] = [];
    let kept = 0;
    let seen = 0;
    const finish = (r: Posted) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...r, durationMs: Date.now() - started });
    };
    const answered = () => finish({ statusCode, errorClass: null, error: null, responseBody: Buffer.concat(chunks).toString('utf8'), retryAfter });
    const timer = setTimeout(() => {
      finish(failure('timeout', `No response within ${timeoutMs} ms`));
      controller?.abort(new Error('attempt timed out'));
    }, timeoutMs);
    try {
      target.agent.dispatch(
        { origin: target.origin, path: target.path, method: 'POST', headers, body },
        {
          onRequestStart(c) {
            controller = c;
            if (settled) c.abort(new Error('attempt timed out'));
          },
          onResponseStart(_c, status, responseHeaders) {
            statusCode = status;
            const ra = responseHeaders['retry-after'];
            retryAfter = Array.isArray(ra) ? ra[0] : ra;
          },
          onResponseData(c, chunk) {
            seen += chunk.length;
            if (kept < RESPONSE_BODY_LIMIT) {
              chunks.push(chunk.subarray(0, RESPONSE_BODY_LIMIT - kept));
              kept += Math.min(chunk.length, RESPONSE_BODY_LIMIT - kept);
            }
            if (seen > RESPONSE_READ_LIMIT) {
              answered(); // do not read a huge answer just to keep the socket
              c.abort(new Error('response too large'));
            }
          },
          onResponseEnd: answered,
          onResponseError(_c, err) {
            // A body cut short after the status arrived keeps what came (the status is what counts).
            if (statusCode !== null) return answered();
            const e = err as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
            const code = e.code ?? e.cause?.code;
            finish(failure(errorClassOf(code), `${code ?? 'error'}: ${e.message}`));
          },
        },
      );
    } catch (err) {
      finish(failure('connection_error', (err as Error).message));
    }
  });
}

/** State of one dispatcher activity across its batches. */
interface DispatchRun {
  /** Items documents of finished entries, deleted in one statement at the end (a crash leaves them to the sweeper). */
  consumed: string[];
  /** The previous batch's recording, still running (it rejects if recording failed). */
  writing: Promise<void> | null;
  /** Bundles that recording will remove or rewrite: not taken again until it is done. */
  writingBundles: Set<string>;
}

function startWrite(run: DispatchRun, bundleIds: string[], write: Promise<void>): void {
  run.writingBundles = new Set(bundleIds);
  run.writing = write;
  write.catch(() => undefined); // observed by finishWrite; no unhandled rejection meanwhile
}

async function finishWrite(run: DispatchRun): Promise<void> {
  const write = run.writing;
  if (!write) return;
  try {
    await write;
  } finally {
    run.writing = null;
    run.writingBundles = new Set();
  }
}

export function createWebhookDeliveryActivities(deps: EventDeps) {
  const { repos, config, logger } = deps;
  const w = repos.webhooks;
  const urlPolicy = urlPolicyFromConfig(config);

  /** Moves every queued delivery of a gone/disabled endpoint to its terminal record. */
  async function drain(endpointId: string, status: 'failed' | 'cancelled', reason: string): Promise<DispatchResult> {
    const bundles = await w.queuedForEndpoint(endpointId, 100);
    const now = new Date();
    const items = (await Promise.all(bundles.map((b) => w.bundleItems(b)))).flat();
    await w.recordDeliveries(items.map((q) => terminal(endpointId, q, status, { last_status_code: q.last_status_code, last_error: reason, attempts: q.attempts }, now)));
    await w.dequeue(bundles);
    return { more: bundles.length === 100, waitMs: 0, nextDueInMs: null, stop: bundles.length < 100 };
  }

  /** Header builder for one batch to `endpoint`: custom headers and live secrets resolved once per batch. */
  function headersFor(endpoint: EndpointDoc, at: Date): (q: QueueItem) => Record<string, string> {
    const reserved = new Set<string>([...SIGNATURE_HEADERS, 'content-type', 'content-length', 'host']);
    const fixed: Record<string, string> = { 'user-agent': USER_AGENT };
    for (const [k, v] of Object.entries(endpoint.headers ?? {})) if (!reserved.has(k.toLowerCase())) fixed[k] = v;
    fixed['content-type'] = 'application/json';
    const secrets = endpoint.secrets.filter((s) => s.expires_at === null || s.expires_at > at).map((s) => s.key);
    return (q) => ({ ...fixed, ...signatureHeaders(secrets, q.event_id, Math.floor(Date.now() / 1000), q.body) });
  }

  /**
   * One batch: sends up to WEBHOOK_BATCH_SIZE of the endpoint's due deliveries concurrently, then starts
   * recording every attempt, each delivery's new state and the endpoint's health — without waiting for that
   * write, so the next batch is sent while this one is recorded (`run.writing`; at most one write in flight,
   * and bundles being written are not taken again). Says what is left. Idempotent in effect: a batch whose
   * write is cut short by a crash is sent again (same webhook-id).
   */
  async function deliverOneBatch(endpointId: string, run: DispatchRun): Promise<DispatchResult> {
    const endpoint = await w.getEndpoint(endpointId);
    if (!endpoint || endpoint.disabled) {
      await finishWrite(run);
      return endpoint ? drain(endpointId, 'failed', 'endpoint_disabled') : drain(endpointId, 'cancelled', 'endpoint_deleted');
    }

    const startedAt = Date.now();
    const limit = Math.max(1, Math.min(config.WEBHOOK_BATCH_SIZE, endpoint.rate_limit ?? Infinity));
    const bundles = (await w.queuedForEndpoint(endpointId, 100)).filter((b) => !run.writingBundles.has(b._id));
    const tScan = Date.now();
    // Take due items, soonest bundle first, up to the batch limit.
    const due: QueueItem[] = [];
    const emptied: QueueEntry[] = [];
    let partial: { entry: QueueEntry; rest: QueueItem[] } | null = null;
    let moreDue = false;
    let soonest: number | null = null;
    // Plan from the entries' sizes, then load the chosen bundles' items in parallel.
    const taken: { entry: QueueEntry; take: number }[] = [];
    let planned = 0;
    for (const b of bundles) {
      const at = b.next_attempt_at.getTime();
      if (at > startedAt) {
        soonest = soonest === null ? at : Math.min(soonest, at);
        continue;
      }
      if (planned >= limit) {
        moreDue = true;
        continue;
      }
      const size = typeof b.size === 'number' ? b.size : limit;
      const take = Math.min(size, limit - planned);
      taken.push({ entry: b, take });
      planned += take;
    }
    const loaded = await Promise.all(taken.map((t) => w.bundleItems(t.entry)));
    taken.forEach(({ entry, take }, i) => {
      const items = loaded[i];
      due.push(...items.slice(0, take));
      if (items.length > take) {
        partial = { entry, rest: items.slice(take) };
        moreDue = true;
      } else emptied.push(entry);
    });
    if (bundles.length === 100 && !moreDue) moreDue = bundles.every((b) => b.next_attempt_at.getTime() <= startedAt);
    const tLoaded = Date.now();
    if (!due.length) {
      await w.dequeueEntries(emptied.map((e) => e._id));
      run.consumed.push(...emptied.map(itemsIdOf));
      return { more: false, waitMs: 0, nextDueInMs: soonest === null ? null : Math.max(0, soonest - startedAt), stop: false };
    }

    const headers = headersFor(endpoint, new Date());
    const target = postTarget(endpoint.url, urlPolicy);
    const results = await mapWithConcurrency(due, MAX_CONCURRENT_POSTS, (q) => post(target, q.body, headers(q), q.policy.timeout_ms));

    const now = new Date();
    const attempts: AttemptDoc[] = [];
    const finished: DeliveryDoc[] = [];
    const retryGroups = new Map<string, { delay: number; items: QueueItem[] }>();
    let anySuccess = false;
    let gone = false;
    due.forEach((q, i) => {
      const r = results[i];
      const attempt = q.attempts + 1;
      const passAttempts = q.pass_attempts + 1;
      const httpError = r.statusCode !== null && (r.statusCode < 200 || r.statusCode > 299);
      attempts.push({
        _id: randomUUID(),
        team_id: q.team_id,
        event_id: q.event_id,
        endpoint_id: endpointId,
        user_id: q.user_id,
        attempt,
        trigger: q.trigger,
        timestamp: new Date(now.getTime() - r.durationMs),
        duration_ms: r.durationMs,
        status_code: r.statusCode,
        error_class: r.errorClass ?? (httpError ? `http_${r.statusCode}` : null),
        response_body: r.responseBody,
      });
      const state = { last_status_code: r.statusCode, last_error: r.error ?? (httpError ? `HTTP ${r.statusCode}` : null), attempts: attempt };
      if (r.statusCode !== null && r.statusCode >= 200 && r.statusCode <= 299) {
        anySuccess = true;
        finished.push(terminal(endpointId, q, 'succeeded', state, now));
        return;
      }
      if (r.statusCode === 410) {
        gone = true;
        finished.push(terminal(endpointId, q, 'failed', state, now));
        return;
      }
      const throttled = r.errorClass === 'timeout' || r.statusCode === 429 || r.statusCode === 502 || r.statusCode === 504;
      const retryAfterMs = parseRetryAfter(r.retryAfter, now.getTime());
      // One jittered delay per group of like failures: they travel as one bundle.
      const key = `${passAttempts}|${throttled}|${retryAfterMs}`;
      let group = retryGroups.get(key);
      if (!group) {
        const delay = nextAttemptDelay(q.policy, passAttempts, { throttled, retryAfterMs }, Math.random());
        group = { delay: delay ?? -1, items: [] };
        retryGroups.set(key, group);
      }
      if (group.delay < 0) finished.push(terminal(endpointId, q, 'failed', state, now));
      else group.items.push({ ...q, ...state, pass_attempts: passAttempts });
    });
    const retries: QueueDoc[] = [];
    for (const g of retryGroups.values()) {
      if (!g.items.length) continue;
      const at = new Date(now.getTime() + g.delay);
      soonest = soonest === null ? at.getTime() : Math.min(soonest, at.getTime());
      retries.push({ _id: `${g.items[0].id}#${g.items[0].attempts}`, team_id: endpoint.team_id, endpoint_id: endpointId, next_attempt_at: at, created_at: now, items: g.items });
    }

    // Attempts, terminal records and retries first, then the claimed bundles leave the queue: a crash in
    // between sends the batch again (duplicates allowed, same webhook-id).
    const rest = partial as { entry: QueueEntry; rest: QueueItem[] } | null;
    const record = async () => {
      const t0 = Date.now();
      await Promise.all([
        w.insertAttempts(attempts),
        w.recordDeliveries(finished, new Set(due.filter((q) => q.trigger === 'manual').map((q) => q.id))),
        w.enqueue(retries),
        rest ? w.replaceQueuedItems(rest.entry, rest.rest) : undefined,
      ]);
      const t1 = Date.now();
      await w.dequeueEntries(emptied.map((e) => e._id));
      // Items documents these entries read (a shared one goes once no other endpoint's entry reads it).
      run.consumed.push(...[...emptied, ...(rest ? [rest.entry] : [])].map(itemsIdOf));
      const t2 = Date.now();
      await recordHealth(endpoint, { gone, anySuccess, at: now, disableAfterMs: due[0].policy.disable_after_ms });
      logger.debug(
        { endpointId, n: due.length, bundles: bundles.length, scanMs: tScan - startedAt, loadMs: tLoaded - tScan, sendMs: now.getTime() - tLoaded, writeMs: Date.now() - t0, recordMs: t1 - t0, dequeueMs: t2 - t1 },
        'webhook batch',
      );
    };
    await finishWrite(run); // the previous batch's
    startWrite(run, [...emptied, ...(rest ? [rest.entry] : [])].map((e) => e._id), record());
    if (gone) await finishWrite(run); // the endpoint is being disabled: nothing more goes out

    const endedAt = Date.now();
    const rateWait = endpoint.rate_limit ? Math.max(0, startedAt + (1000 * due.length) / endpoint.rate_limit - endedAt) : 0;
    return {
      // After a rate-limit wait the dispatcher always looks again (it stays marked active meanwhile).
      more: moreDue || gone || rateWait > 0,
      waitMs: Math.ceil(rateWait),
      nextDueInMs: soonest === null ? null : Math.max(0, soonest - endedAt),
      stop: false,
    };
  }

  /** After a batch: a success resets the endpoint's failure clock; 410 or failing too long disables it. */
  async function recordHealth(endpoint: EndpointDoc, o: { gone: boolean; anySuccess: boolean; at: Date; disableAfterMs: number }): Promise<void> {
    const endpointId = endpoint._id;
    if (o.gone) {
      await w.disableEndpoint(endpointId, 'gone');
      logger.warn({ endpointId }, 'webhook endpoint answered 410 Gone: disabled');
    } else if (o.anySuccess) {
      if (endpoint.failing_since) await w.recordEndpointHealth(endpointId, { succeeded: true, at: o.at });
    } else if (!endpoint.failing_since) {
      await w.recordEndpointHealth(endpointId, { succeeded: false, at: o.at });
    } else {
      const failingTooLong = (e: EndpointDoc) => e.failing_since !== null && o.at.getTime() - e.failing_since.getTime() >= o.disableAfterMs;
      if (failingTooLong(endpoint) && (await w.disableEndpoint(endpointId, 'failing', failingTooLong))) {
        logger.warn({ endpointId, failingSince: endpoint.failing_since }, 'webhook endpoint failing for too long: disabled');
      }
    }
  }

  return {
    /**
     * Sends the endpoint's due deliveries, batch after batch, for up to DISPATCH_BUDGET_MS, then says when the
     * dispatcher should run again. Batches run back to back inside one activity because each return to the
     * workflow costs a Temporal round trip (~80 ms measured on the dev server), which would cap throughput.
     */
    async deliverDueWebhooks(input: { endpointId: string }): Promise<DispatchResult> {
      const { endpointId } = input;
      const deadline = Date.now() + DISPATCH_BUDGET_MS;
      const heartbeat = setInterval(() => Context.current().heartbeat(), 1000);
      const run: DispatchRun = { consumed: [], writing: null, writingBundles: new Set() };
      const markActive = () => w.markDispatcherActive(endpointId, new Date(Date.now() + ACTIVE_LEASE_MS));
      // Publishers skip the wake signal while this activity is marked active. Before handing back to wait for
      // a wake, it marks itself idle and then looks at the queue once more: deliveries queued before the mark
      // are found by that look, and the publisher of any queued after it sees the mark and signals.
      let markedIdle = false;
      let lingered = 0;
      let result: DispatchResult | null = null;
      try {
        await markActive();
        for (;;) {
          const r = await deliverOneBatch(endpointId, run);
          if (r.stop) return (result = r);
          if (r.more) {
            // The workflow runs the next activity at once (or after the rate-limit wait): stay marked active.
            if (r.waitMs > 0 || Date.now() >= deadline) return (result = r);
            if (markedIdle) {
              await markActive();
              markedIdle = false;
            }
            continue;
          }
          // A batch just went out: the bundles it is recording were not looked at (a partly sent one keeps a
          // due rest), so look again once that is done — as an active dispatcher, new deliveries having come.
          if (run.writing) {
            await finishWrite(run);
            if (Date.now() >= deadline) return (result = { ...r, more: true }); // the next activity looks
            lingered = 0;
            if (markedIdle) {
              await markActive();
              markedIdle = false;
            }
            continue;
          }
          // Under steady load the next publish is usually milliseconds away: wait for it here, still marked
          // active, instead of ending the activity and being woken through Temporal (~100 ms, and a signal,
          // a workflow task and an activity task per publish).
          const canLinger = () => lingered < LINGER_MS && Date.now() + LINGER_POLL_MS < deadline;
          if (!markedIdle && canLinger()) {
            do {
              await sleep(LINGER_POLL_MS);
              lingered += LINGER_POLL_MS;
            } while (canLinger() && !(await w.hasDueDeliveries(endpointId))); // one small query a poll
            continue;
          }
          if (!markedIdle) {
            await w.markDispatcherIdle(endpointId);
            markedIdle = true;
            continue;
          }
          return (result = r);
        }
      } finally {
        clearInterval(heartbeat);
        await finishWrite(run);
        await w.deleteItems(run.consumed);
        // Stopping, or failing (Temporal retries the activity): later publishes must signal again.
        if (!markedIdle && !result?.more) await w.markDispatcherIdle(endpointId).catch(() => undefined);
      }
    },

    /** Repairs stranded work: unfinished fan-outs (outbox) and overdue deliveries whose dispatcher missed its wake. */
    async sweepWebhooks(input: { graceMs: number }): Promise<{ fannedOut: number; woken: number }> {
      const cutoff = new Date(Date.now() - input.graceMs);
      const stale = await w.staleOutbox(cutoff, 100);
      let fannedOut = 0;
      for (const o of stale) {
        // Events missing here were never stored: that publish failed before returning, so nothing is owed.
        const byId = new Map((await w.getEvents(o.event_ids)).map((e) => [e._id, e]));
        const events = o.event_ids.flatMap((id) => byId.get(id) ?? []); // publish order: the same bundle ids
        await fanOutEvents(deps, events, o._id);
        fannedOut += events.length;
      }
      await w.deleteOrphanItems(new Date(Date.now() - 10 * 60_000));
      const endpoints = await w.endpointsWithOverdue(cutoff, 10000);
      await Promise.all(endpoints.map((id) => wakeDispatcher(deps, id)));
      if (fannedOut || endpoints.length) logger.info({ fannedOut, woken: endpoints.length }, 'webhook sweeper repaired stranded work');
      return { fannedOut, woken: endpoints.length };
    },
  };
}

function terminal(
  endpointId: string,
  q: QueueItem,
  status: DeliveryDoc['status'],
  state: Pick<DeliveryDoc, 'last_status_code' | 'last_error' | 'attempts'>,
  now: Date,
): DeliveryDoc {
  return {
    _id: q.id,
    team_id: q.team_id,
    event_id: q.event_id,
    endpoint_id: endpointId,
    event_type: q.event_type,
    user_id: q.user_id,
    status,
    ...state,
    created_at: q.created_at,
    finished_at: now,
  };
}

export type WebhookDeliveryActivities = ReturnType<typeof createWebhookDeliveryActivities>;
