import { earliestOf } from '../platform/time';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DispatcherCommand } from '../../workflows/destination-dispatch';
import type { Config } from '../platform/config';
import type { Logger } from '../platform/logger';
import type { Repositories } from '../repositories';
import { deliveryPolicyFrom, newDelivery } from './fan-out';
import {
  countOutcomes,
  type Destination,
  DestinationView,
  dueFor,
  MAX_CONCURRENT_POSTS,
  rateLimitOf,
  recordHealth,
  sendBatchTo,
  type Senders,
} from './destinations/destination';
import type { SendFence, SendWindow } from './store';
import { routeOf } from './destinations/pipeline/model';
import type { EventPublisher } from './publisher';
import { deliveryId, type DeliveryDoc } from './model';
import { afterAttempt, outcomesOf } from './outcomes';
import { batchedDeliveries, eventOfBatched, logOf, type BatchedEvent, type PipelineBatchDoc } from './destinations/pipeline/batches';

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
  /** A pipeline's batches it sent, still queued until it lands, and their events. */
  batches: ReadonlySet<string>;
  events: ReadonlySet<string>;
}

/** What one batch of a run did, and what the run does next. */
interface BatchSent {
  stop?: 'failed' | 'cancelled';
  sent: number;
  more: boolean;
  waitMs: number;
  /** The batch's recording must land before the next batch is read (an endpoint's 410; a pipeline batch's refusals). */
  settle: boolean;
  recording: Recording | null;
}

/** The ids of `batch`'s events among `skip` (of the queued events read). */
function skippedIn<E extends { event: BatchedEvent; batch: PipelineBatchDoc }>(batch: PipelineBatchDoc, queued: E[], skip: ReadonlySet<E>): Set<string> {
  return new Set(queued.filter((e) => e.batch === batch && skip.has(e)).map((e) => e.event.id));
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
        const batch = await this.sendBatch(destinationId, endpoint, run, ctx, recording);
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
          if (batch.settle) await finishRecording();
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
          } while (canLinger() && !(await this.anyDue(endpoint, fence())));
          continue;
        }
        if (!markedIdle) {
          await store.markDispatcherIdle(destinationId);
          markedIdle = true;
          continue;
        }
        // Behind a fence, the fenced deliveries are due again when it lapses.
        const fenced = fence();
        const soonest = await this.soonestDue(endpoint, fenced);
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
   * that write sends the batch again once the window lapses (same webhook-id: at-least-once). A pipeline with no
   * delivery document due sends its queued batches (sendQueuedBatches).
   */
  private async sendBatch(
    destinationId: string,
    view: DestinationView,
    run: SendingRun,
    ctx: DispatchContext,
    /** The previous batch's, whose recording may still be running. */
    previous: Recording | null,
  ): Promise<BatchSent> {
    const { repos, config } = this.deps;
    const store = repos.webhookStore;
    const destination = await view.get();
    if (!destination || destination.doc.disabled)
      return { stop: destination ? 'failed' : 'cancelled', sent: 0, more: false, waitMs: 0, settle: false, recording: null };
    const rateLimit = rateLimitOf(destination);

    const startedAt = Date.now();
    const limit = Math.max(1, Math.min(config.WEBHOOK_BATCH_SIZE, rateLimit ?? Infinity));
    const pickedAt = new Date(startedAt);
    const candidates = await dueFor(repos, destination, pickedAt, limit + 1, previous?.sent ?? new Map(), fenceOf(run.others, startedAt));
    const more = candidates.length > limit;
    const picked = candidates.slice(0, limit);
    if (!picked.length) {
      if (destination.kind === 'pipeline') return this.sendQueuedBatches(destination, view, run, ctx, previous, pickedAt, limit);
      return { sent: 0, more: false, waitMs: 0, settle: false, recording: null };
    }

    // The window and the events' bodies are written and read at once (neither needs the other): one round trip less.
    const [, eventList] = await Promise.all([
      this.openWindow(destinationId, run, ctx, pickedAt, picked.length, Math.max(0, ...picked.map((d) => d.policy.timeout_ms))),
      store.getEvents(picked.map((d) => d.event_id)),
    ]);
    const events = new Map(eventList.map((e) => [e._id, e]));
    // A missing event was erased: its delivery goes too, unsent.
    const erased = picked.filter((d) => !events.has(d.event_id));
    await store.deleteDeliveries(erased.map((d) => d._id));
    const due = picked.filter((d) => events.has(d.event_id));
    if (!due.length) return { sent: erased.length, more, waitMs: 0, settle: false, recording: null };

    const results = await sendBatchTo(this.senders, destination, due, events);
    countOutcomes(destination, due, results);
    const outcome = outcomesOf(due, results, new Date());
    const done = this.inBackground(async () => {
      // Attempts before state: a delivery never shows as done without its attempt record.
      await store.insertAttempts(outcome.attempts);
      await store.changeDeliveries(outcome.changes);
      if (outcome.attempts.length && (await recordHealth(this.deps, destination, outcome))) view.invalidate();
    });
    const rateWait = rateLimit ? Math.max(0, startedAt + (1000 * due.length) / rateLimit - Date.now()) : 0;
    const sent = new Map(due.map((d, i) => [d._id, results[i]?.ok === true]));
    return {
      sent: due.length + erased.length,
      more: more || rateWait > 0,
      waitMs: Math.ceil(rateWait),
      settle: outcome.gone,
      recording: { done, sent, batches: new Set(), events: new Set() },
    };
  }

  /**
   * A pipeline's queued batches (destinations/pipeline/batches.ts), up to WEBHOOK_BATCH_SIZE events: sent as one
   * broker batch; the outcome is one write per batch document. Events the broker refused (and, ordered per user, the
   * user's later ones in the batch) go on as delivery documents after their first attempt. A pipeline that keeps each
   * user's order sends batches only while no delivery document of it is pending (else it hands them on, as it does
   * batches that overlap the next one's events), in event order.
   */
  private async sendQueuedBatches(
    destination: Destination & { kind: 'pipeline' },
    view: DestinationView,
    run: SendingRun,
    ctx: DispatchContext,
    previous: Recording | null,
    pickedAt: Date,
    limit: number,
  ): Promise<BatchSent> {
    const { repos } = this.deps;
    const id = destination.doc._id;
    const inFlight = previous?.batches ?? new Set<string>();
    const fence = fenceOf(run.others, pickedAt.getTime());
    let batches: PipelineBatchDoc[];
    if (destination.doc.ordered_per_user) {
      if ((await repos.webhookStore.nextDueAt(id)) !== null) return this.handOnBatches(id, previous, fence);
      const read = await repos.pipelineBatches.pendingInOrder(id, limit, inFlight, fence);
      if (read.overlaps) return this.handOnBatches(id, previous, fence);
      batches = read.batches;
    } else {
      batches = await repos.pipelineBatches.dueBatches(id, pickedAt, limit, inFlight, fence);
    }
    if (!batches.length) return { sent: 0, more: false, waitMs: 0, settle: false, recording: null };

    // The batch documents hold their events' bodies: only the send window is written before sending. Events delivered
    // already (a fan-out repeated with other neighbours, or handed on) are left out.
    const queued = batchedDeliveries(batches);
    const skip = await this.deliveredAlready(id, queued, previous);
    const due = queued.filter((e) => !skip.has(e));
    await this.openWindow(id, run, ctx, pickedAt, due.length, batches[0].policy.timeout_ms);
    const events = new Map(due.map((e) => [e.event.id, eventOfBatched(e.batch, e.event)]));
    const results = due.length
      ? await sendBatchTo(
          this.senders,
          destination,
          due.map((e) => e.delivery),
          events,
        )
      : [];
    const now = new Date();
    countOutcomes(
      destination,
      due.map((e) => e.delivery),
      results,
    );
    // Events the broker refused are handed on as delivery documents (after this first attempt).
    const refusedAt = due.flatMap((_, i) => (results[i]?.ok ? [] : [i]));
    const refused = refusedAt.map((i) => due[i]);
    const handedOn = refused.length
      ? outcomesOf(
          refused.map((e) => e.delivery),
          refusedAt.map((i) => results[i]),
          now,
        )
      : null;
    const sent = results.find((r) => r) ?? null;
    const attempt = sent && { timestamp: new Date(now.getTime() - sent.durationMs), duration_ms: sent.durationMs, broker: sent.responseBody };
    const logs = batches.map((b) =>
      logOf(
        b,
        attempt,
        refused.filter((e) => e.batch === b).map((e) => e.event.id),
        skippedIn(b, queued, skip),
        now,
      ),
    );
    const done = this.inBackground(async () => {
      if (handedOn) {
        await repos.webhookStore.insertAttempts(handedOn.attempts);
        await repos.webhookStore.insertDeliveries(refused.map((e) => afterAttempt(e.delivery, handedOn.changes)));
      }
      await repos.pipelineBatches.finish(
        batches.map((b) => b._id),
        logs,
      );
      const health = { gone: false, anySuccess: refused.length < due.length, at: now, disableAfterMs: batches[0].policy.disable_after_ms };
      if (due.length && (await recordHealth(this.deps, destination, health))) view.invalidate();
    });
    const recording = { done, sent: new Map(), batches: new Set(batches.map((b) => b._id)), events: new Set(due.map((e) => e.event.id)) };
    return { sent: queued.length, more: false, waitMs: 0, settle: refused.length > 0, recording };
  }

  /**
   * Of a pipeline's queued events (as read: an event may be in two batches read together), those not to send: a
   * second copy of one read, one in the batch whose recording is still landing, or, in a batch queued again
   * (`recheck`), one logged by an earlier batch or queued as a delivery document.
   */
  private async deliveredAlready<E extends { event: BatchedEvent; batch: PipelineBatchDoc }>(
    destinationId: string,
    queued: E[],
    previous: Recording | null,
  ): Promise<Set<E>> {
    const { repos } = this.deps;
    const inFlight = previous?.events ?? new Set<string>();
    const seen = new Set<string>();
    const skip = new Set<E>();
    for (const e of queued) {
      if (seen.has(e.event.id) || inFlight.has(e.event.id)) skip.add(e);
      seen.add(e.event.id);
    }
    const recheck = queued.filter((e) => e.batch.recheck && !skip.has(e));
    if (!recheck.length) return skip;
    const ids = recheck.map((e) => e.event.id);
    const [logged, documents] = await Promise.all([
      repos.pipelineBatches.logged(destinationId, ids),
      repos.webhookStore.existingDeliveries(ids.map((e) => deliveryId(e, destinationId))),
    ]);
    for (const e of recheck) if (logged.has(e.event.id) || documents.has(deliveryId(e.event.id, destinationId))) skip.add(e);
    return skip;
  }

  /**
   * Hands a pipeline's queued batches (a page of them) on to per-event delivery documents, as the fan-out would have
   * queued them: an ordered pipeline with deliveries pending, batches whose events interleave, or a pipeline being
   * drained. Deliveries first, then the batch is logged as handed on: a crash between leaves it to hand on again
   * (the deliveries' ids are fixed).
   */
  private async handOnBatches(destinationId: string, previous: Recording | null, fence: SendFence | null): Promise<BatchSent> {
    const { repos } = this.deps;
    // Not past a fence (an earlier run may be sending those), in event order.
    const { batches } = await repos.pipelineBatches.pendingInOrder(destinationId, DRAIN_PAGE, previous?.batches ?? new Set(), fence);
    if (!batches.length) return { sent: 0, more: false, waitMs: 0, settle: false, recording: null };
    const queued = batchedDeliveries(batches);
    const skip = await this.deliveredAlready(destinationId, queued, previous);
    await repos.webhookStore.insertDeliveries(queued.filter((e) => !skip.has(e)).map((e) => e.delivery));
    const now = new Date();
    const split = (b: PipelineBatchDoc, skipped = skippedIn(b, queued, skip)) => b.events.filter((e) => !skipped.has(e.id)).map((e) => e.id);
    await repos.pipelineBatches.finish(
      batches.map((b) => b._id),
      batches.map((b) => logOf(b, null, split(b), skippedIn(b, queued, skip), now)),
    );
    return { sent: queued.length, more: true, waitMs: 0, settle: false, recording: null };
  }

  /**
   * Before sending `count` deliveries due at `pickedAt`: records this run's send window for them. Throws when a later
   * run took over (or Temporal gave this one up).
   */
  private async openWindow(destinationId: string, run: SendingRun, ctx: DispatchContext, pickedAt: Date, count: number, timeoutMs: number): Promise<void> {
    // Fencing: a run Temporal gave up on sends nothing more.
    if (ctx.superseded()) throw new SupersededError(destinationId);
    const until = new Date(Date.now() + Math.ceil(count / MAX_CONCURRENT_POSTS) * timeoutMs + SEND_WINDOW_MARGIN_MS);
    if (!(await this.deps.repos.webhookStore.openSendWindow(destinationId, run.id, { picked_at: pickedAt, until }))) throw new SupersededError(destinationId);
    run.windowOpen = true;
  }

  /** A batch's recording, run while the caller goes on (awaited by it; no unhandled rejection meanwhile). */
  private inBackground(write: () => Promise<void>): Promise<void> {
    const done = write();
    done.catch(() => undefined);
    return done;
  }

  /** Whether anything of the destination is due now (its delivery documents, or a pipeline's batches). */
  private async anyDue(view: DestinationView, fence: SendFence | null): Promise<boolean> {
    const { repos } = this.deps;
    const destination = await view.get();
    if (!destination) return false;
    const id = destination.doc._id;
    if ((await repos.webhookStore.dueDeliveries(id, new Date(), 1, new Map(), fence)).length) return true;
    return destination.kind === 'pipeline' && (await repos.pipelineBatches.anyDue(id, new Date(), fence));
  }

  /** When the destination's soonest pending delivery or batch is due (past a `fence`), or null. */
  private async soonestDue(view: DestinationView, fence: SendFence | null): Promise<Date | null> {
    const { repos } = this.deps;
    const destination = await view.get();
    const id = destination?.doc._id;
    if (!id) return null;
    const [deliveries, batches] = await Promise.all([
      repos.webhookStore.nextDueAt(id, fence),
      destination.kind === 'pipeline' ? repos.pipelineBatches.nextDueAt(id, fence) : null,
    ]);
    return earliestOf(deliveries, batches);
  }

  /**
   * Ends the pending deliveries of a gone/disabled endpoint, a page at a time (a pipeline's batches handed on to
   * deliveries first); true while more remain.
   */
  private async drain(destinationId: string, status: 'failed' | 'cancelled'): Promise<boolean> {
    if ((await this.handOnBatches(destinationId, null, null)).sent) return true;
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
        return (
          (await store.eraseUserAtEndpoint(command.teamId, command.userId, destinationId)) +
          (await this.deps.repos.pipelineBatches.eraseUser(command.teamId, command.userId, destinationId))
        );
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
