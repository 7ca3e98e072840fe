import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { EVENT_TYPE_PATTERN } from '../../schemas/event-catalogue';
import { workflowIds } from '../../workflows/ids';
import { destinationDispatchWorkflow, wakeDispatcherSignal } from '../../workflows/destination-dispatch';
import { groupBy } from '../platform/group-by';
import type { Config } from '../platform/config';
import { ApiError } from '../platform/errors';
import { timeOrderedUuid } from '../platform/keys';
import type { Logger } from '../platform/logger';
import type { Repositories } from '../repositories';
import { Coalescer } from '../platform/coalescer';
import { deliveryPolicyFrom, fanOut } from './fan-out';
import { envelopeOf, type DeliveryDoc, type EventDoc, type OutboxDoc } from './model';
import { batchesOf, type PipelineBatchDoc } from './destinations/pipeline/batches';
import type { EndpointDoc } from './destinations/webhook/endpoints-store';
import type { PipelineDoc } from './destinations/pipeline/model';
import { crashPoint } from '../platform/failpoints';

/**
 * The one internal entry point for events. `publish` stores the event, then queues one delivery per enabled
 * endpoint of the team whose filter matches, and, per enabled pipeline with a route for any of a flush's events, one
 * batch (destinations/pipeline/batches.ts), then wakes the dispatcher workflows of destinations not already
 * delivering. When it returns, the event is durable and its fan-out is either done or covered: an outbox entry,
 * stored before the event, names the span of time whose events this process was publishing, and stays until the
 * fan-out of every flush in that span is done (OUTBOX_SPAN_MS); after a crash the sweeper fans those events out again.
 *
 * Concurrent publishes in one process are group-committed (one insertMany of events and one of deliveries per
 * flush, one outbox entry per span of flushes), and wakes are coalesced per endpoint: thousands of events per
 * second cost a handful of writes and signals. A flush's deliveries are queued after its callers resume, in flush
 * order (so an event published after another one returned is queued after it, as ordered destinations need), and
 * a flush returns only once the previous flush's deliveries are queued (at most one fan-out behind).
 * One instance per process (api, worker), passed in as `deps.publisher`.
 */
export interface PublisherDeps {
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
  onlyDestinationId?: string;
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

/** `publisher.publish(input)`, for callers holding the process's dependencies. */
export function publishEvent(deps: { publisher: EventPublisher }, input: PublishEventInput): Promise<PublishedEvent> {
  return deps.publisher.publish(input);
}

/** Per team, its enabled endpoints and pipelines (what a fan-out reads). */
type TeamDestinations = Map<string, { endpoints: EndpointDoc[]; pipelines: PipelineDoc[] }>;

/** An event's producer key within its team (the unique index's key). */
const keyOf = (e: Pick<EventDoc, 'team_id' | 'idempotency_key'>) => `${e.team_id}\u0000${e.idempotency_key}`;

/** Events per publish flush at most; flushes in flight at once (the next gathers what arrives meanwhile). */
const MAX_BATCH = 500;
const CONCURRENT_FLUSHES = 4;
/**
 * How long one outbox entry covers this process's flushes: its insert and delete are paid once per span, not per
 * flush (two of a flush's four writes). After a crash the sweeper fans out again every event created in the span,
 * all processes' (deliveries that exist are left as they are).
 */
const OUTBOX_SPAN_MS = 1000;

/** The outbox entry the flushes of one span share. */
interface OutboxSpan {
  doc: OutboxDoc;
  stored: Promise<void>;
  /** Flushes using it whose fan-out is not done. */
  users: number;
  /** No flush starts under it any more: once `users` is 0 it is removed. */
  closed: boolean;
  /** Removed, or left to the sweeper (a flush under it failed, maybe after storing events): nothing more to do. */
  done: boolean;
  timer: NodeJS.Timeout;
}
const eventTypeRe = new RegExp(EVENT_TYPE_PATTERN);

export class EventPublisher {
  private readonly writer = new Coalescer<EventDoc, PublishedEvent>((docs) => this.flush(docs), MAX_BATCH, CONCURRENT_FLUSHES);
  private readonly wakes = new Map<string, { again: boolean; done: Promise<void> }>();
  /** Fan-outs, outbox clean-ups and wakes still running after their flush returned. */
  private readonly tails = new Set<Promise<void>>();
  private span: OutboxSpan | null = null;
  /** The latest flush's fan-out (settled either way): the next flush queues its deliveries after it. */
  private fanOuts: Promise<void> = Promise.resolve();

  constructor(private readonly deps: PublisherDeps) {}

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
    const id = timeOrderedUuid();
    const doc: EventDoc = {
      _id: id,
      team_id: envelope.team_id,
      idempotency_key: input.idempotencyKey ?? id,
      event_type: envelope.event_type,
      user_id: envelope.user_id,
      client_user_id: envelope.client_user_id,
      body: envelopeOf(envelope),
      created_at: new Date(),
      only_destination_id: input.onlyDestinationId ?? null,
    };
    const size = Buffer.byteLength(doc.body, 'utf8');
    if (size > config.WEBHOOK_MAX_EVENT_BYTES) return Promise.reject(new EventTooLargeError(size, config.WEBHOOK_MAX_EVENT_BYTES, input.eventType));
    return this.writer.add([doc]).then(([published]) => published);
  }

  /**
   * One group commit: stores the events and returns, per input event, what its publish returns; their deliveries are
   * queued after the previous flush's (`fanOuts`), which this flush waits for before returning.
   */
  private async flush(batch: EventDoc[]): Promise<PublishedEvent[]> {
    const firsts = new Map<string, EventDoc>(); // same key twice in one batch: one event
    for (const doc of batch) if (!firsts.has(keyOf(doc))) firsts.set(keyOf(doc), doc);
    const docs = [...firsts.values()];
    // The destinations are read while the outbox entry is stored and the events are written (they need neither).
    const destinations = this.destinationsOf(docs);
    destinations.catch(() => undefined); // awaited by the fan-out; no unhandled rejection if a write fails first
    const span = this.spanFor(docs);
    span.users++;
    const previous = this.fanOuts;
    const stored = this.storeEvents(span, docs);
    const fanOut = Promise.all([stored, previous]).then(async ([{ events, earlier }]) => {
      // Earlier events are of the same teams (keys are per team). A failure here comes after the callers were answered
      // (the events are stored): said here, as nobody else will.
      const destinationIds = await destinations
        .then((found) => this.queueDeliveries(events, found, { again: earlier.size > 0 }))
        .catch((err) => {
          this.deps.logger.warn({ err, outboxId: span.doc._id }, 'publish: queueing deliveries failed; the sweeper will fan the span out again');
          throw err;
        });
      crashPoint('webhook.deliveries-queued');
      // Waking the dispatchers waits for nothing here (a lost wake is repaired by the sweeper).
      this.inTail(
        this.wakeDestinations(destinationIds).catch((err) => this.deps.logger.warn({ err }, 'publish: waking dispatchers failed; the sweeper will wake them')),
      );
    });
    this.fanOuts = fanOut.catch(() => undefined);
    this.inTail(
      fanOut.then(
        () => {
          span.users--;
          this.release(span);
        },
        () => {
          span.users--;
          // Events stored or not, the span's entry stays for the sweeper (its callers get the storing error, if any).
          this.close(span, { failed: true });
        },
      ),
    );
    const { earlier } = await stored;
    await previous;
    return batch.map((doc) => {
      const found = earlier.get(keyOf(doc));
      if (found) return { id: found._id, createdAt: found.created_at, duplicate: true };
      const first = firsts.get(keyOf(doc))!;
      return { id: first._id, createdAt: first.created_at, duplicate: first !== doc };
    });
  }

  /**
   * Inserts a flush's events once their span's outbox entry is stored. The unique (team, key) index refuses a key
   * published before: the stored event is the answer (`earlier`), and its fan-out runs again (another process may
   * have crashed before finishing it; deliveries that exist are left as they are). `events`: what to fan out.
   */
  private async storeEvents(span: OutboxSpan, docs: EventDoc[]): Promise<{ events: EventDoc[]; earlier: Map<string, EventDoc> }> {
    const store = this.deps.repos.webhookStore;
    await span.stored;
    const refused = await store.insertEvents(docs);
    crashPoint('webhook.events-stored');
    const repeated = docs.filter((d) => refused.has(d._id));
    const earlier = new Map<string, EventDoc>();
    for (const group of groupBy(repeated, (d) => d.team_id)) {
      for (const e of await store.findEventsByKeys(
        group[0].team_id,
        group.map((d) => d.idempotency_key),
      ))
        earlier.set(keyOf(e), e);
    }
    return { events: docs.flatMap((d) => (refused.has(d._id) ? (earlier.get(keyOf(d)) ?? []) : [d])), earlier };
  }

  /** Waits for this process's publishes to finish their after-work (fan-outs, outbox clean-up, wakes): before shutting down. */
  async settle(): Promise<void> {
    await this.writer.settled();
    if (this.span) this.close(this.span);
    while (this.tails.size) await Promise.all(this.tails);
  }

  /** The sweeper's repair of an unfinished publish span: queues the events' deliveries again (idempotent), then removes its entry. */
  async fanOutAgain(events: EventDoc[], outboxId: string): Promise<void> {
    const destinationIds = await this.queueDeliveries(events, await this.destinationsOf(events), { again: true });
    await this.deps.repos.webhookStore.deleteOutbox(outboxId);
    await this.wakeDestinations(destinationIds);
  }

  /**
   * The open outbox span if it covers these events (created since it began, and it has not ended), or a new one,
   * whose entry is stored before any flush under it writes.
   */
  private spanFor(docs: EventDoc[]): OutboxSpan {
    const earliest = Math.min(...docs.map((d) => d.created_at.getTime()));
    const now = Date.now();
    const open = this.span;
    if (open && !open.closed && now < open.doc.events_until.getTime() && earliest >= open.doc.events_from.getTime()) return open;
    if (open) this.close(open);
    const doc: OutboxDoc = { _id: randomUUID(), events_from: new Date(earliest), events_until: new Date(now + OUTBOX_SPAN_MS), created_at: new Date(now) };
    const span: OutboxSpan = {
      doc,
      stored: this.deps.repos.webhookStore.insertOutbox(doc),
      users: 0,
      closed: false,
      done: false,
      timer: setTimeout(() => this.close(span), OUTBOX_SPAN_MS),
    };
    span.timer.unref();
    span.stored.catch(() => this.close(span, { failed: true }));
    this.span = span;
    return span;
  }

  private close(span: OutboxSpan, { failed = false } = {}): void {
    span.closed = true;
    span.done ||= failed; // kept for the sweeper
    clearTimeout(span.timer);
    if (this.span === span) this.span = null;
    this.release(span);
  }

  /** Removes a closed span's entry once every flush under it is done, unless one failed (the sweeper repairs that span). */
  private release(span: OutboxSpan): void {
    if (!span.closed || span.users > 0 || span.done) return;
    span.done = true;
    const { _id } = span.doc;
    this.inTail(
      this.deps.repos.webhookStore
        .deleteOutbox(_id)
        .catch((err) => this.deps.logger.warn({ err, outboxId: _id }, 'publish: outbox clean-up failed; the sweeper will finish it')),
    );
  }

  private inTail(work: Promise<void>): void {
    const tail: Promise<void> = work.finally(() => this.tails.delete(tail));
    this.tails.add(tail);
  }

  /**
   * Wakes the dispatchers that are not delivering right now. A running dispatcher looks at its deliveries again
   * after it marks itself idle, and this reads the mark after queueing, so one of the two always sees the new
   * deliveries (activities/webhook-delivery.ts).
   */
  private async wakeDestinations(destinationIds: string[]): Promise<void> {
    const active = await this.deps.repos.webhookStore.activeDispatchers(destinationIds);
    await Promise.all(destinationIds.filter((id) => !active.has(id)).map((id) => this.wake(id)));
  }

  /** The enabled endpoints and pipelines of the events' teams. */
  private async destinationsOf(events: Pick<EventDoc, 'team_id'>[]): Promise<TeamDestinations> {
    const { repos } = this.deps;
    const teams = [...new Set(events.map((e) => e.team_id))];
    const read = await Promise.all(teams.map((t) => Promise.all([repos.webhooks.listEnabledEndpoints(t), repos.pipelines.listEnabledPipelines(t)])));
    return new Map(teams.map((t, i) => [t, { endpoints: read[i][0], pipelines: read[i][1] }]));
  }

  /**
   * Inserts one delivery per event and matching endpoint, and one batch per pipeline with a route for any of the
   * events; returns the destinations that got something to send. `again`: some events may have been fanned out
   * before (a repeated key, the sweeper's repair): their batches are marked for the dispatcher to leave out what it
   * delivered already (deliveries are idempotent by id).
   */
  private async queueDeliveries(events: EventDoc[], destinations: TeamDestinations, { again }: { again: boolean }): Promise<string[]> {
    const { repos, config } = this.deps;
    const policy = deliveryPolicyFrom(config);
    const now = new Date();
    const deliveries: DeliveryDoc[] = [];
    const batches: PipelineBatchDoc[] = [];
    for (const teamEvents of groupBy(events, (e) => e.team_id)) {
      const { endpoints, pipelines } = destinations.get(teamEvents[0].team_id)!;
      deliveries.push(...fanOut(teamEvents, endpoints, policy, now));
      batches.push(...batchesOf(teamEvents, pipelines, policy, now, again));
    }
    await Promise.all([repos.webhookStore.insertDeliveries(deliveries), repos.pipelineBatches.insertBatches(batches)]);
    return [...new Set([...deliveries, ...batches].map((d) => d.destination_id))];
  }

  /**
   * Signal-with-start of `webhook-dispatch:<destinationId>`, best effort (the sweeper repairs a lost wake). At
   * most one signal per endpoint is in flight per process; wakes requested meanwhile collapse into one more.
   */
  wake(destinationId: string): Promise<void> {
    const current = this.wakes.get(destinationId);
    if (current) {
      current.again = true;
      return current.done;
    }
    const state = { again: true, done: Promise.resolve() };
    this.wakes.set(destinationId, state);
    state.done = (async () => {
      try {
        while (state.again) {
          state.again = false;
          await this.signal(destinationId);
        }
      } catch (err) {
        this.deps.logger.warn({ err, destinationId }, 'webhook dispatcher wake failed; the sweeper will retry');
      } finally {
        this.wakes.delete(destinationId);
      }
    })();
    return state.done;
  }

  private async signal(destinationId: string): Promise<void> {
    const { temporal } = this.deps;
    await temporal.client.workflow.signalWithStart(destinationDispatchWorkflow, {
      workflowId: workflowIds.destinationDispatch(destinationId),
      taskQueue: temporal.taskQueue,
      args: [{ destinationId }],
      signal: wakeDispatcherSignal,
      signalArgs: [],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
  }
}
