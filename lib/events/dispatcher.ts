import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DispatcherCommand } from '../../workflows/destination-dispatch';
import { nextAttemptDelay, parseRetryAfter } from './retry';
import type { Config } from '../platform/config';
import type { Logger } from '../platform/logger';
import type { Repositories } from '../repositories';
import { deliveryPolicyFrom, newDelivery } from './fan-out';
import {
  countOutcomes,
  DestinationView,
  dueFor,
  MAX_CONCURRENT_POSTS,
  rateLimitOf,
  recordHealth,
  sendBatchTo,
  type Senders,
  type SendOutcome,
} from './destinations/destination';
import type { DeliveryChange, SendFence, SendWindow } from './store';
import { routeOf } from './destinations/pipeline/model';
import type { EventPublisher } from './publisher';
import { attemptId, deliveryId, type AttemptDoc, type DeliveryDoc } from './model';

export interface DispatchResult {
  /** More deliveries are due now (batch full or rate-limited): run again after `waitMs`. */
  more: boolean;
  waitMs: number;
  /** Milliseconds until the soonest pending delivery is due, or null when there is none. */
  nextDueInMs: number | null;
  /** The endpoint is gone or disabled and its deliveries are drained: the dispatcher may end. */
  stop: boolean;
}

/** What the running activity provides: liveness towards Temporal and whether it has been superseded. */
export interface DispatchContext {
  heartbeat(): void;
  /** True once Temporal has given this delivery run up (heartbeat timeout, cancellation): it must stop writing. */
  superseded(): boolean;
}

/** How long one dispatcher activity keeps sending back-to-back batches before handing back to the workflow. */
const DISPATCH_BUDGET_MS = 5_000;
/** How long a dispatcher with nothing due keeps looking (every LINGER_POLL_MS) before it hands back to wait. */
const LINGER_MS = 200;
const LINGER_POLL_MS = 25;
/** How long an activity counts as delivering without renewing its mark (a dead worker's mark then lapses). */
const ACTIVE_LEASE_MS = 60_000;
/** A send window outlasts its batch's sending by this much (a slow machine). */
const SEND_WINDOW_MARGIN_MS = 30_000;
/** Deliveries changed per statement by drain. */
const DRAIN_PAGE = 500;

/** The previous batch's recording, overlapped with sending the next batch (at most one in flight). */
interface Recording {
  done: Promise<void>;
  /**
   * Its deliveries, still pending until it lands (so the next batch leaves them out), each true where the destination
   * took it: an ordered batch need not wait for their recording to go on with their users.
   */
  sent: ReadonlyMap<string, boolean>;
}

/** What the other runs' open send windows keep this run from sending now (one fence covering all of them). */
function fenceOf(windows: SendWindow[], now: number): SendFence | null {
  const open = windows.filter((w) => w.until.getTime() > now);
  if (!open.length) return null;
  return { after: new Date(Math.max(...open.map((w) => w.picked_at.getTime()))), until: new Date(Math.max(...open.map((w) => w.until.getTime()))) };
}

/** One delivery run: its id, the send windows other runs had open when it started, and whether it opened one. */
interface SendingRun {
  id: string;
  others: SendWindow[];
  windowOpen: boolean;
}

export class SupersededError extends Error {
  constructor(destinationId: string) {
    super(`The delivery run of endpoint ${destinationId} was superseded (Temporal gave it up); it stops without writing.`);
  }
}

export interface DispatcherDeps {
  repos: Repositories;
  config: Config;
  logger: Logger;
  /** Tells the team when one of its destinations is disabled (`webhook.disabled`, `pipeline.disabled`). */
  publisher: Pick<EventPublisher, 'publish'>;
}

/**
 * One destination's deliveries (a webhook endpoint's or a pipeline's, lib/events/destinations/destination.ts): sending due
 * batches, recording outcomes, and the commands the owner runs. "Endpoint" below is either.
 */
export class DestinationDispatcher {
  constructor(
    private readonly deps: DispatcherDeps,
    private readonly senders: Senders,
  ) {}

  /**
   * Sends the endpoint's due deliveries, batch after batch, for up to DISPATCH_BUDGET_MS, then says when the
   * dispatcher should run again. Batches run back to back inside one activity because each return to the
   * workflow costs a Temporal round trip (~80 ms measured on the dev server).
   *
   * Publishers skip the wake signal while this run is marked active. Before handing back to wait for a
   * wake, it marks itself idle and then looks once more: deliveries queued before the mark are found by that
   * look, and the publisher of any queued after it sees the mark and signals.
   *
   * Fencing without a write per delivery: the run takes the endpoint over when it starts (`startRun`), and records
   * before each batch which deliveries it may be sending until when (`openSendWindow`, refused once a later run
   * has taken over). A run Temporal gave up on while it was sending thus keeps its batch: the run that replaced it
   * sends neither those nor anything else due at that batch's pick until the window ends, and outcomes are written
   * only over the attempt count their run read.
   */
  async deliverDue(destinationId: string, ctx: DispatchContext): Promise<DispatchResult> {
    const store = this.deps.repos.webhookStore;
    const deadline = Date.now() + DISPATCH_BUDGET_MS;
    const activeUntil = () => new Date(Date.now() + ACTIVE_LEASE_MS);
    const run: SendingRun = { id: randomUUID(), others: [], windowOpen: false };
    const fence = () => fenceOf(run.others, Date.now());
    const endpoint = new DestinationView(this.deps.repos, destinationId);
    let recording: Recording | null = null;
    const finishRecording = async () => {
      const r = recording;
      recording = null;
      if (r) await r.done;
    };
    let markedIdle = false;
    let lingered = 0;
    let result: DispatchResult | null = null;
    const heartbeat = setInterval(() => ctx.heartbeat(), 1000);
    try {
      run.others = await store.startRun(destinationId, run.id, activeUntil());
      for (;;) {
        // Fencing: a run Temporal gave up on (its retry may already be sending) writes nothing more.
        if (ctx.superseded()) throw new SupersededError(destinationId);
        const batch = await this.sendBatch(destinationId, endpoint, run, ctx, recording?.sent ?? new Map());
        if (batch.stop) {
          await finishRecording();
          return (result = { more: false, waitMs: 0, nextDueInMs: null, stop: !(await this.drain(destinationId, batch.stop)) });
        }
        if (batch.recording) {
          await finishRecording(); // the previous batch's, before this one's starts
          recording = batch.recording;
        }
        if (batch.sent || batch.more) {
          lingered = 0;
          if (batch.gone) await finishRecording();
          if (batch.waitMs > 0 || Date.now() >= deadline) return (result = { more: true, waitMs: batch.waitMs, nextDueInMs: 0, stop: false });
          if (markedIdle) {
            if (!(await store.resumeRun(destinationId, run.id, activeUntil()))) throw new SupersededError(destinationId);
            markedIdle = false;
          }
          continue;
        }
        // Nothing due: look again once the recording in flight is done (its retries become due then).
        if (recording) {
          await finishRecording();
          continue;
        }
        // Under steady load the next publish is usually milliseconds away: wait for it here, still marked
        // active, instead of ending the activity and being woken through Temporal.
        const canLinger = () => lingered < LINGER_MS && Date.now() + LINGER_POLL_MS < deadline;
        if (!markedIdle && canLinger()) {
          do {
            await sleep(LINGER_POLL_MS);
            lingered += LINGER_POLL_MS;
          } while (canLinger() && !(await store.dueDeliveries(destinationId, new Date(), 1, new Map(), fence())).length);
          continue;
        }
        if (!markedIdle) {
          await store.markDispatcherIdle(destinationId);
          markedIdle = true;
          continue;
        }
        // Behind a fence, the fenced deliveries are due again when it lapses.
        const fenced = fence();
        const soonest = await store.nextDueAt(destinationId, fenced);
        const next = fenced && (soonest === null || fenced.until < soonest) ? fenced.until : soonest;
        return (result = { more: false, waitMs: 0, nextDueInMs: next === null ? null : Math.max(0, next.getTime() - Date.now()), stop: false });
      }
    } finally {
      clearInterval(heartbeat);
      await finishRecording();
      // Nothing of this run is in flight now. Stopping or failing (Temporal retries the activity): later publishes
      // must signal again.
      const idle = !markedIdle && !result?.more;
      if (run.windowOpen || idle) await store.endRun(destinationId, run.id, { idle }).catch(() => undefined);
    }
  }

  /**
   * One batch: up to WEBHOOK_BATCH_SIZE (or the rate limit) due deliveries, sent concurrently once this run's send
   * window for them is recorded (refused if a later run took over: this one stops); their outcomes are recorded in
   * the background (`recording`) while the caller goes on, written only over the attempt count read. A crash before
   * that write sends the batch again once the window lapses (same webhook-id: at-least-once).
   */
  private async sendBatch(
    destinationId: string,
    view: DestinationView,
    run: SendingRun,
    ctx: DispatchContext,
    /** The previous batch's deliveries, whose recording may still be running (true: delivered). */
    inFlight: ReadonlyMap<string, boolean>,
  ): Promise<{ stop?: 'failed' | 'cancelled'; sent: number; more: boolean; waitMs: number; gone: boolean; recording: Recording | null }> {
    const { repos, config } = this.deps;
    const store = repos.webhookStore;
    const destination = await view.get();
    if (!destination || destination.doc.disabled)
      return { stop: destination ? 'failed' : 'cancelled', sent: 0, more: false, waitMs: 0, gone: false, recording: null };
    const rateLimit = rateLimitOf(destination);

    const startedAt = Date.now();
    const limit = Math.max(1, Math.min(config.WEBHOOK_BATCH_SIZE, rateLimit ?? Infinity));
    const pickedAt = new Date(startedAt);
    const candidates = await dueFor(repos, destination, pickedAt, limit + 1, inFlight, fenceOf(run.others, startedAt));
    const more = candidates.length > limit;
    const picked = candidates.slice(0, limit);
    if (!picked.length) return { sent: 0, more: false, waitMs: 0, gone: false, recording: null };

    // Fencing: a run Temporal gave up on sends nothing more.
    if (ctx.superseded()) throw new SupersededError(destinationId);
    // The window and the events' bodies are written and read at once (neither needs the other): one round trip less.
    const longestTimeout = Math.max(0, ...picked.map((d) => d.policy.timeout_ms));
    const until = new Date(Date.now() + Math.ceil(picked.length / MAX_CONCURRENT_POSTS) * longestTimeout + SEND_WINDOW_MARGIN_MS);
    const [holds, eventList] = await Promise.all([
      store.openSendWindow(destinationId, run.id, { picked_at: pickedAt, until }),
      store.getEvents(picked.map((d) => d.event_id)),
    ]);
    if (!holds) throw new SupersededError(destinationId);
    run.windowOpen = true;
    // A missing event was erased: its delivery goes too, unsent.
    const events = new Map(eventList.map((e) => [e._id, e]));
    const erased = picked.filter((d) => !events.has(d.event_id));
    await store.deleteDeliveries(erased.map((d) => d._id));
    const due = picked.filter((d) => events.has(d.event_id));
    if (!due.length) return { sent: erased.length, more, waitMs: 0, gone: false, recording: null };

    const results = await sendBatchTo(this.senders, destination, due, events);
    countOutcomes(destination, due, results);
    const outcome = outcomesOf(due, results, new Date());
    const done = (async () => {
      // Attempts before state: a delivery never shows as done without its attempt record.
      await store.insertAttempts(outcome.attempts);
      await store.changeDeliveries(outcome.changes);
      if (outcome.attempts.length && (await recordHealth(this.deps, destination, outcome))) view.invalidate();
    })();
    done.catch(() => undefined); // awaited by the caller; no unhandled rejection meanwhile

    const rateWait = rateLimit ? Math.max(0, startedAt + (1000 * due.length) / rateLimit - Date.now()) : 0;
    const sent = new Map(due.map((d, i) => [d._id, results[i]?.ok === true]));
    return { sent: due.length + erased.length, more: more || rateWait > 0, waitMs: Math.ceil(rateWait), gone: outcome.gone, recording: { done, sent } };
  }

  /** Ends the pending deliveries of a gone/disabled endpoint, a page at a time; true while more remain. */
  private async drain(destinationId: string, status: 'failed' | 'cancelled'): Promise<boolean> {
    const store = this.deps.repos.webhookStore;
    const ids = await store.pendingIds(destinationId, DRAIN_PAGE);
    const now = new Date();
    const reason = status === 'failed' ? 'endpoint_disabled' : 'endpoint_deleted';
    await store.changeDeliveries([{ ids, set: { status, next_attempt_at: null, finished_at: now, updated_at: now, last_error: reason } }]);
    return ids.length === DRAIN_PAGE;
  }

  /** A command the dispatcher workflow runs between batches; returns how many deliveries it changed. */
  async applyCommand(destinationId: string, command: DispatcherCommand): Promise<number> {
    const store = this.deps.repos.webhookStore;
    const now = new Date();
    const manual = { ...deliveryPolicyFrom(this.deps.config), schedule_ms: [0] };
    const again: Partial<DeliveryDoc> = {
      status: 'pending',
      trigger: 'manual',
      next_attempt_at: now,
      pass_attempts: 0,
      policy: manual,
      finished_at: null,
      updated_at: now,
    };
    switch (command.kind) {
      case 'destination_changed':
        return 0; // the workflow answers it between runs; no delivery changes
      case 'erase_user':
        return store.eraseUserAtEndpoint(command.teamId, command.userId, destinationId);
      case 'resend': {
        const pipeline = await this.deps.repos.pipelines.getPipeline(destinationId);
        // A pipeline resends only what one of its routes takes (with that route's target).
        const events = (await store.getEvents(command.eventIds)).filter((e) => e.team_id === command.teamId && (!pipeline || routeOf(pipeline, e)));
        const ids = events.map((e) => deliveryId(e._id, destinationId));
        // A delivery that never existed (the filter did not match then) is created; the others start a new pass.
        await store.insertDeliveries(
          events.map((e) => newDelivery(e, destinationId, manual, now, 'manual', pipeline ? routeOf(pipeline, e)!.target : undefined)),
        );
        await store.changeDeliveries([{ ids, set: again }]);
        return ids.length;
      }
      case 'recover': {
        const window = { since: new Date(command.since), until: command.until ? new Date(command.until) : undefined };
        let changed = 0;
        for (
          let page = await store.failedDeliveryIds(command.teamId, destinationId, window, DRAIN_PAGE);
          page.length;
          page = await store.failedDeliveryIds(command.teamId, destinationId, window, DRAIN_PAGE)
        ) {
          await store.changeDeliveries([{ ids: page, set: again }]);
          changed += page.length;
        }
        return changed;
      }
    }
  }
}

/**
 * The attempts of a batch and the changes to its deliveries. Deliveries with the same outcome share one
 * change (one statement for a batch of first-attempt successes), and like failures share one jittered
 * retry time.
 */
function outcomesOf(due: DeliveryDoc[], results: SendOutcome[], now: Date) {
  const attempts: AttemptDoc[] = [];
  const groups = new Map<string, DeliveryChange>();
  let anySuccess = false;
  let gone = false;
  // Every change of a group is written over the attempt count its deliveries had when picked.
  const change = (key: string, d: DeliveryDoc, make: () => Omit<DeliveryChange, 'ids' | 'attempts'>) => {
    let c = groups.get(`${key}|${d.attempts}`);
    if (!c) groups.set(`${key}|${d.attempts}`, (c = { ids: [], attempts: d.attempts, ...make() }));
    c.ids.push(d._id);
  };
  due.forEach((d, i) => {
    const r = results[i];
    // Held back unsent (behind a failed event of the same user): released, due again once that one is through.
    if (!r) return change('release', d, () => ({ set: { next_attempt_at: now, updated_at: now } }));
    const attempt = d.attempts + 1;
    const passAttempts = d.pass_attempts + 1;
    const ok = r.ok;
    const httpError = r.statusCode !== null && !ok;
    attempts.push({
      _id: attemptId(d._id, attempt),
      team_id: d.team_id,
      event_id: d.event_id,
      destination_id: d.destination_id,
      user_id: d.user_id,
      attempt,
      trigger: d.trigger,
      timestamp: new Date(now.getTime() - r.durationMs),
      duration_ms: r.durationMs,
      status_code: r.statusCode,
      error_class: r.errorClass ?? (httpError ? `http_${r.statusCode}` : null),
      error: r.error,
      response_body: r.responseBody,
    });
    const lastError = r.error ?? (httpError ? `HTTP ${r.statusCode}` : null);
    // Absolute values, not $inc: writing the same outcome again (a retried write) changes nothing.
    const counts = { attempts: attempt, pass_attempts: passAttempts };
    const finished = (status: 'succeeded' | 'failed') => ({
      set: { status, next_attempt_at: null, finished_at: now, updated_at: now, last_status_code: r.statusCode, last_error: lastError, ...counts },
    });
    const same = `${attempt}|${passAttempts}`;
    if (ok) {
      anySuccess = true;
      return change(`ok|${r.statusCode}|${same}`, d, () => finished('succeeded'));
    }
    if (r.statusCode === 410) {
      gone = true;
      return change(`gone|${same}`, d, () => finished('failed'));
    }
    const throttled = r.errorClass === 'timeout' || r.statusCode === 429 || r.statusCode === 502 || r.statusCode === 504;
    const retryAfterMs = parseRetryAfter(r.retryAfter, now.getTime());
    change(`retry|${same}|${throttled}|${retryAfterMs}|${r.statusCode}|${lastError}|${d.policy.schedule_ms.join(',')}`, d, () => {
      const delay = nextAttemptDelay(d.policy, passAttempts, { throttled, retryAfterMs }, Math.random());
      if (delay === null) return finished('failed');
      return { set: { next_attempt_at: new Date(now.getTime() + delay), updated_at: now, last_status_code: r.statusCode, last_error: lastError, ...counts } };
    });
  });
  return { attempts, changes: [...groups.values()], anySuccess, gone, at: now, disableAfterMs: due[0].policy.disable_after_ms };
}
