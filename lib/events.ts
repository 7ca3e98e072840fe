import { randomUUID } from 'node:crypto';
import { nameBasedUuid } from './keys';
import type { Client } from '@temporalio/client';
import { EVENT_TYPE_PATTERN } from '../schemas/event-catalogue';
import { workflowIds } from '../workflows/ids';
import { webhookDispatchWorkflow, wakeDispatcherSignal } from '../workflows/webhook-dispatch';
import { matchesFilter } from '../workflows/webhook-retry';
import type { Config } from './config';
import { ApiError } from './errors';
import type { Logger } from './logger';
import type { Repositories } from './repositories';
import { Coalescer } from './coalescer';
import { groupBy } from './collections';
import { envelopeOf, type DeliveryPolicy, type EventDoc, type FanOutBundle, type QueueItem } from './repositories/webhooks';

/**
 * The one internal entry point for events: `publishEvent`. It stores the event, then fans it out to every
 * enabled endpoint of the team whose filter matches (one queued delivery per endpoint, delivery id
 * `<eventId>:<endpointId>`), then wakes the dispatcher workflows of endpoints not already delivering. When it
 * returns, the event and its deliveries are durable in MongoDB; a crash at any point before is repaired by
 * the sweeper (the flush's outbox entry, written first, stays until fan-out is done).
 *
 * Concurrent calls in one process are group-committed (`Coalescer`: one outbox entry, one insertMany of
 * events and one fan-out per flush), and wakes are coalesced per endpoint, so publishing thousands of events
 * per second costs a handful of writes and signals, not thousands.
 */
export interface EventDeps {
  config: Config;
  repos: Repositories;
  temporal: { client: Client; taskQueue: string };
  logger: Logger;
}

export interface PublishEventInput {
  teamId: string;
  eventType: string;
  data: Record<string, unknown>;
  userId?: string | null;
  clientUserId?: string | null;
  /** One domain change = one key: publishing the same key again returns the same event. */
  idempotencyKey?: string;
  /** Deliver to this endpoint only (test events). */
  onlyEndpointId?: string;
}

export interface PublishedEvent {
  id: string;
  createdAt: Date;
  /** True when the idempotency key had already been published. */
  duplicate: boolean;
}

export class EventTooLargeError extends ApiError {
  constructor(size: number, limit: number, eventType: string) {
    super(
      413,
      `Event ${eventType} is ${size} bytes serialized, over the limit of ${limit} bytes (WEBHOOK_MAX_EVENT_BYTES). ` +
        'Publish a shallow event (ids the receiver fetches over the API) or split the data into chunks.',
    );
  }
}

export class InvalidEventError extends Error {}

/** Deterministic id for an idempotency key (so a retried publish hits the same `_id`), random otherwise. */
export function eventIdFor(teamId: string, idempotencyKey?: string): string {
  return idempotencyKey ? nameBasedUuid(teamId, idempotencyKey) : randomUUID();
}

export function deliveryPolicyFrom(config: Config): DeliveryPolicy {
  return {
    schedule_ms: config.WEBHOOK_RETRY_SCHEDULE_MS.split(',').map((s) => Number(s.trim())),
    timeout_ms: config.WEBHOOK_ATTEMPT_TIMEOUT_MS,
    throttle_floor_ms: config.WEBHOOK_THROTTLE_FLOOR_MS,
    disable_after_ms: config.WEBHOOK_DISABLE_AFTER_MS,
  };
}

const eventTypeRe = new RegExp(EVENT_TYPE_PATTERN);

export async function publishEvent(deps: EventDeps, input: PublishEventInput): Promise<PublishedEvent> {
  return publisherFor(deps).publish(input);
}

/**
 * Queues deliveries of stored events to their matching endpoints, wakes the dispatchers and removes the
 * outbox entry `outboxId` (idempotent: the sweeper's repair of an unfinished publish).
 */
export async function fanOutEvents(deps: EventDeps, events: EventDoc[], outboxId: string): Promise<void> {
  await publisherFor(deps).fanOut(events, outboxId);
}

/** Best-effort wake of an endpoint's dispatcher (coalesced); the sweeper repairs a lost wake. */
export function wakeDispatcher(deps: EventDeps, endpointId: string): Promise<void> {
  return publisherFor(deps).wake(endpointId);
}

/** Waits for this process's publishes to finish their after-work (outbox clean-up, wakes): before shutting down. */
export async function settlePublishes(deps: EventDeps): Promise<void> {
  await publishers.get(deps)?.settle();
}

const publishers = new WeakMap<object, Publisher>();
function publisherFor(deps: EventDeps): Publisher {
  let p = publishers.get(deps);
  if (!p) {
    p = new Publisher(deps);
    publishers.set(deps, p);
  }
  return p;
}

/** Events per publish flush at most (one flush at a time: the next gathers what arrives meanwhile). */
const MAX_BATCH = 500;

class Publisher {
  private readonly writer = new Coalescer<EventDoc, PublishedEvent>((docs) => this.flush(docs), MAX_BATCH);
  private wakes = new Map<string, { again: boolean; done: Promise<void> }>();
  /** Outbox clean-ups and wakes still running after their flush returned. */
  private tails = new Set<Promise<void>>();

  constructor(private deps: EventDeps) {}

  publish(input: PublishEventInput): Promise<PublishedEvent> {
    const { config } = this.deps;
    if (!eventTypeRe.test(input.eventType)) {
      return Promise.reject(new InvalidEventError(`Invalid event type '${input.eventType}' (dot-separated [a-zA-Z0-9_] segments).`));
    }
    if (typeof input.data !== 'object' || input.data === null || Array.isArray(input.data)) {
      return Promise.reject(new InvalidEventError('Event data must be a JSON object.'));
    }
    const envelope = {
      event_type: input.eventType,
      data: input.data,
      team_id: input.teamId,
      user_id: input.userId ?? null,
      client_user_id: input.clientUserId ?? null,
    };
    const doc: EventDoc = {
      _id: eventIdFor(input.teamId, input.idempotencyKey),
      team_id: envelope.team_id,
      event_type: envelope.event_type,
      user_id: envelope.user_id,
      client_user_id: envelope.client_user_id,
      body: envelopeOf(envelope),
      created_at: new Date(),
      only_endpoint_id: input.onlyEndpointId ?? null,
    };
    const size = Buffer.byteLength(doc.body, 'utf8');
    if (size > config.WEBHOOK_MAX_EVENT_BYTES) {
      return Promise.reject(new EventTooLargeError(size, config.WEBHOOK_MAX_EVENT_BYTES, input.eventType));
    }
    return this.writer.add([doc]).then(([published]) => published);
  }

  /** One group commit: returns, per input event, what its publish returns. */
  private async flush(batch: EventDoc[]): Promise<PublishedEvent[]> {
    const w = this.deps.repos.webhooks;
    // Same key twice in one batch: one event.
    const byId = new Map<string, EventDoc>();
    for (const doc of batch) if (!byId.has(doc._id)) byId.set(doc._id, doc);
    const docs = [...byId.values()];
    const outboxId = randomUUID();
    await w.insertOutbox({ _id: outboxId, event_ids: docs.map((d) => d._id), created_at: new Date() });
    const eventDups = await w.insertEvents(docs);

    const existing = new Map<string, EventDoc>();
    const toFanOut: EventDoc[] = [];
    for (const doc of docs) {
      if (!eventDups.has(doc._id)) {
        toFanOut.push(doc);
        continue;
      }
      // A repeated idempotency key (rare): the stored event is the answer. If the earlier publish has not
      // confirmed its fan-out (crashed, or still running), finish it; repeated fan-out queues nothing twice.
      const stored = await w.getEvent(doc._id);
      if (!stored) throw new Error(`event ${doc._id} reported duplicate but not found`);
      existing.set(doc._id, stored);
      await Promise.all(this.tails); // this process's own earlier publishes confirm first
      if (await w.eventInOutbox(doc._id, outboxId)) toFanOut.push(stored);
    }
    const endpointIds = await this.queueDeliveries(toFanOut);

    // The deliveries are durable: publishing has done what it promises. Removing the outbox entry and waking
    // the dispatchers happen after the callers resume (a crash before is repaired by the sweeper), so the
    // next flush need not wait for them.
    const tail = this.afterQueued(outboxId, endpointIds)
      .catch((err) => this.deps.logger.warn({ err, outboxId }, 'publish: outbox clean-up failed; the sweeper will finish it'))
      .finally(() => this.tails.delete(tail));
    this.tails.add(tail);
    return batch.map((doc) => {
      const stored = existing.get(doc._id);
      return stored ? { id: stored._id, createdAt: stored.created_at, duplicate: true } : { id: doc._id, createdAt: doc.created_at, duplicate: false };
    });
  }

  async settle(): Promise<void> {
    await this.writer.settled();
    while (this.tails.size) await Promise.all(this.tails);
  }

  /** Queues the events' deliveries, then removes the outbox entry that guarded them (`outboxId`) and wakes the dispatchers. */
  async fanOut(events: EventDoc[], outboxId: string): Promise<void> {
    await this.afterQueued(outboxId, await this.queueDeliveries(events));
  }

  /**
   * Removes the outbox entry, then wakes the dispatchers that are not delivering right now. A running
   * dispatcher looks at the queue again after it marks itself idle, and this reads the mark after queueing,
   * so one of the two always sees the new deliveries (webhook-delivery.ts, deliverDueWebhooks).
   */
  private async afterQueued(outboxId: string, endpointIds: string[]): Promise<void> {
    const w = this.deps.repos.webhooks;
    await w.deleteOutbox(outboxId);
    const active = await w.activeDispatchers(endpointIds);
    await Promise.all(endpointIds.filter((id) => !active.has(id)).map((id) => this.wake(id)));
  }

  /**
   * Queues one delivery per event and matching endpoint: per team, chunks of the events with their items
   * stored once and an entry per endpoint (deterministic ids, so a repeated fan-out queues nothing twice).
   * Returns the endpoints that got deliveries.
   */
  private async queueDeliveries(events: EventDoc[]): Promise<string[]> {
    if (!events.length) return [];
    const { repos, config } = this.deps;
    const w = repos.webhooks;
    const policy = deliveryPolicyFrom(config);
    const now = new Date();
    const bundles: FanOutBundle[] = [];
    for (const teamEvents of groupBy(events, (e) => e.team_id)) {
      const teamId = teamEvents[0].team_id;
      const endpoints = await w.listEnabledEndpoints(teamId);
      const receivers = (e: EventDoc) =>
        endpoints.filter((ep) => (e.only_endpoint_id ? ep._id === e.only_endpoint_id : matchesFilter(ep.filter_types, e.event_type)));
      const matched = teamEvents.map((e) => ({ e, to: receivers(e) })).filter((m) => m.to.length);
      const items = matched.map(({ e }): QueueItem => ({
        id: e._id, // per endpoint when read
        team_id: teamId,
        event_id: e._id,
        event_type: e.event_type,
        user_id: e.user_id,
        body: e.body,
        attempts: 0,
        pass_attempts: 0,
        trigger: 'scheduled',
        policy,
        last_status_code: null,
        last_error: null,
        created_at: now,
      }));
      const toOf = new Map(matched.map((m) => [m.e._id, m.to]));
      for (const chunk of chunkItems(items, config.WEBHOOK_BATCH_SIZE)) {
        const positions = new Map<string, number[]>();
        chunk.forEach((item, i) => {
          for (const ep of toOf.get(item.event_id)!) {
            const p = positions.get(ep._id);
            if (p) p.push(i);
            else positions.set(ep._id, [i]);
          }
        });
        bundles.push({
          _id: `${chunk[0].event_id}+${chunk.length}`,
          team_id: teamId,
          created_at: now,
          items: chunk,
          endpoints: [...positions].map(([endpoint_id, p]) => ({ endpoint_id, positions: p })),
        });
      }
    }
    await w.enqueueFanOut(bundles);
    return [...new Set(bundles.flatMap((b) => b.endpoints.map((e) => e.endpoint_id)))];
  }

  /**
   * Signal-with-start of `webhook-dispatch:<endpointId>`. At most one signal per endpoint is in flight per
   * process; wakes requested meanwhile collapse into one more signal after it.
   */
  wake(endpointId: string): Promise<void> {
    const current = this.wakes.get(endpointId);
    if (current) {
      current.again = true;
      return current.done;
    }
    const state = { again: true, done: Promise.resolve() };
    this.wakes.set(endpointId, state);
    state.done = (async () => {
      try {
        while (state.again) {
          state.again = false;
          await this.signal(endpointId);
        }
      } catch (err) {
        this.deps.logger.warn({ err, endpointId }, 'webhook dispatcher wake failed; the sweeper will retry');
      } finally {
        this.wakes.delete(endpointId);
      }
    })();
    return state.done;
  }

  private async signal(endpointId: string): Promise<void> {
    const { temporal } = this.deps;
    await temporal.client.workflow.signalWithStart(webhookDispatchWorkflow, {
      workflowId: workflowIds.webhookDispatch(endpointId),
      taskQueue: temporal.taskQueue,
      args: [{ endpointId }],
      signal: wakeDispatcherSignal,
      signalArgs: [],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
  }
}

/** Bundles of at most `maxItems` deliveries (the batch size, so a batch takes whole bundles) or ~1 MB of bodies. */
export function chunkItems(items: QueueItem[], maxItems = 500, maxBytes = 1_000_000): QueueItem[][] {
  const out: QueueItem[][] = [];
  let cur: QueueItem[] = [];
  let bytes = 0;
  for (const item of items) {
    if (cur.length && (cur.length >= maxItems || bytes + item.body.length > maxBytes)) {
      out.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(item);
    bytes += item.body.length;
  }
  if (cur.length) out.push(cur);
  return out;
}
