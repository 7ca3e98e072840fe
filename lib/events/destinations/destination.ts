import { groupBy } from '../../platform/group-by';
import { deliveriesFinished, deliveryAttempts, destinationsDisabled } from '../../platform/metrics';
import type { Logger } from '../../platform/logger';
import type { Repositories } from '../../repositories';
import type { PipelineDoc } from './pipeline/model';
import type { PipelineSender } from './pipeline/brokers';
import type { EndpointDoc } from './webhook/endpoints-store';
import type { DeliveryDoc, EventDoc } from '../model';
import type { EventPublisher } from '../publisher';
import type { SendFence } from '../store';
import { mapWithConcurrency, USER_AGENT, type AttemptResult, type WebhookSender } from './webhook/sender';
import { SIGNATURE_HEADERS, signatureHeaders } from './webhook/signing';

/**
 * Where a dispatcher delivers: a webhook endpoint (HTTP POSTs, signed) or a pipeline (a team's broker). The
 * dispatcher's loop, send windows, retries and delivery log are the same for both (a pipeline's deliveries are
 * recorded per batch until the broker refuses one: pipeline/batches.ts); what differs is here: how a batch is sent,
 * and where the destination's health is written.
 */
export type Destination = { kind: 'webhook'; doc: EndpointDoc } | { kind: 'pipeline'; doc: PipelineDoc };

/** What a batch's send reports per delivery: its attempt's outcome, or null when it was held back unsent. */
export type SendOutcome = AttemptResult | null;

/** Requests in flight to one endpoint at once. */
export const MAX_CONCURRENT_POSTS = 100;

const orderedPerUser = (d: Destination) => d.doc.ordered_per_user === true;

/** Messages per second the destination takes (webhook endpoints may set one; pipelines take what comes). */
export const rateLimitOf = (d: Destination): number | null => (d.kind === 'webhook' ? d.doc.rate_limit : null);

/**
 * A destination as one delivery run sees it: read when the run starts, and again after the run's own change (health,
 * disabling). A change by the API waits for the run in flight to end (commands.ts, destinationChanged), so a run
 * never needs to look for one.
 */
export class DestinationView {
  private cached: { destination: Destination | null } | null = null;
  constructor(
    private readonly repos: Repositories,
    private readonly id: string,
  ) {}
  async get(): Promise<Destination | null> {
    if (!this.cached) this.cached = { destination: await this.read() };
    return this.cached.destination;
  }
  private async read(): Promise<Destination | null> {
    const endpoint = await this.repos.webhooks.getEndpoint(this.id);
    if (endpoint) return { kind: 'webhook', doc: endpoint };
    const pipeline = await this.repos.pipelines.getPipeline(this.id);
    return pipeline && { kind: 'pipeline', doc: pipeline };
  }
  invalidate(): void {
    this.cached = null;
  }
}

/**
 * A destination's due deliveries for one batch: soonest first, or, for one that keeps each user's order, each
 * user's oldest pending deliveries while they are due (WebhookStore.dueInUserOrder). Never those of the previous
 * batch (`inFlight`: still pending until its recording lands; true where the destination took it), nor those
 * behind a `fence` (an earlier run may be sending them).
 */
export function dueFor(
  repos: Repositories,
  destination: Destination,
  at: Date,
  limit: number,
  inFlight: ReadonlyMap<string, boolean>,
  fence: SendFence | null,
): Promise<DeliveryDoc[]> {
  const store = repos.webhookStore;
  const { team_id: teamId, _id: id } = destination.doc;
  return orderedPerUser(destination) ? store.dueInUserOrder(teamId, id, at, limit, inFlight, fence) : store.dueDeliveries(id, at, limit, inFlight, fence);
}

export interface Senders {
  webhook: WebhookSender;
  pipeline: PipelineSender;
}

/** Marks, per user, the deliveries after one that failed: held back (null) or failed with it (`heldBack`). */
function holdBackAfterFailure(due: DeliveryDoc[], results: SendOutcome[], heldBack: (failedOne: DeliveryDoc) => SendOutcome): SendOutcome[] {
  const failedUsers = new Map<string, DeliveryDoc>();
  return due.map((d, i) => {
    const first = d.user_id !== null ? failedUsers.get(d.user_id) : undefined;
    if (first) return heldBack(first);
    const r = results[i];
    if (d.user_id !== null && !r?.ok) failedUsers.set(d.user_id, d);
    return r;
  });
}

/**
 * Sends a batch to its destination; one outcome per delivery, in order. A destination ordered per user sends
 * each user's deliveries in `due` order, and nothing of that user after a failure gets through as delivered:
 * webhooks POST one user's events one at a time and stop at a failure (the rest are released unsent); a broker
 * takes the batch in order and, if one message failed, the user's later ones count as failed too (sent again
 * after it, same id).
 */
export async function sendBatchTo(senders: Senders, destination: Destination, due: DeliveryDoc[], events: Map<string, EventDoc>): Promise<SendOutcome[]> {
  if (destination.kind === 'pipeline') {
    const p = destination.doc;
    const messages = due.map((d) => {
      const e = events.get(d.event_id)!;
      return { eventId: e._id, eventType: e.event_type, teamId: e.team_id, userId: e.user_id, target: d.target ?? '', body: e.body, createdAt: e.created_at };
    });
    const results = await senders.pipeline.send(p, messages, Math.max(...due.map((d) => d.policy.timeout_ms)));
    if (!orderedPerUser(destination)) return results;
    return holdBackAfterFailure(due, results, (first) => ({
      ok: false,
      statusCode: null,
      errorClass: 'held_back',
      error: `Held back behind event ${first.event_id} of the same user, which failed (the pipeline keeps each user's order)`,
      responseBody: null,
      durationMs: 0,
      retryAfter: undefined,
    }));
  }
  const endpoint = destination.doc;
  const headers = headersFor(endpoint, new Date());
  const target = senders.webhook.target(endpoint.url);
  const post = (d: DeliveryDoc) => {
    const body = events.get(d.event_id)!.body;
    return senders.webhook.post(target, body, headers(d.event_id, body), d.policy.timeout_ms);
  };
  if (!orderedPerUser(destination)) return mapWithConcurrency(due, MAX_CONCURRENT_POSTS, post);
  // One lane per user (events without a user each their own), one POST at a time within it.
  const lanes = groupBy(
    due.map((d, i) => ({ d, i })),
    ({ d, i }) => (d.user_id === null ? `#${i}` : d.user_id),
  );
  const outcomes = new Array<SendOutcome>(due.length).fill(null);
  await mapWithConcurrency(lanes, MAX_CONCURRENT_POSTS, async (lane) => {
    for (const { d, i } of lane) {
      outcomes[i] = await post(d);
      if (!outcomes[i]!.ok) return;
    }
  });
  return outcomes;
}

/** A batch's attempts and finished deliveries in the metrics (by destination kind: never an id). */
export function countOutcomes(destination: Destination, due: DeliveryDoc[], results: SendOutcome[]): void {
  due.forEach((d, i) => {
    const r = results[i];
    if (!r) return;
    deliveryAttempts.inc({ destination: destination.kind, result: r.ok ? 'ok' : (r.errorClass ?? (r.statusCode !== null ? `http_${r.statusCode}` : 'error')) });
    const exhausted = r.statusCode === 410 || d.pass_attempts + 1 >= d.policy.schedule_ms.length;
    if (r.ok || exhausted) deliveriesFinished.inc({ destination: destination.kind, outcome: r.ok ? 'succeeded' : 'failed' });
  });
}

/** Header builder for one batch to `endpoint`: custom headers and live secrets resolved once per batch. */
function headersFor(endpoint: EndpointDoc, at: Date): (eventId: string, body: string) => Record<string, string> {
  const reserved = new Set<string>([...SIGNATURE_HEADERS, 'content-type', 'content-length', 'host']);
  const fixed: Record<string, string> = { 'user-agent': USER_AGENT };
  for (const [k, v] of Object.entries(endpoint.headers ?? {})) if (!reserved.has(k.toLowerCase())) fixed[k] = v;
  fixed['content-type'] = 'application/json';
  const secrets = endpoint.secrets.filter((s) => s.expires_at === null || s.expires_at > at).map((s) => s.key);
  return (eventId, body) => ({ ...fixed, ...signatureHeaders(secrets, eventId, Math.floor(Date.now() / 1000), body) });
}

/**
 * After a batch: a success resets the destination's failure clock; a webhook's 410, or failing for longer than
 * `disableAfterMs`, disables it. Decided on the destination the batch was sent with; each write is conditional
 * on its own precondition. True when it wrote (the run then reads the destination again).
 */
export async function recordHealth(
  deps: { repos: Repositories; logger: Logger; publisher: Pick<EventPublisher, 'publish'> },
  destination: Destination,
  o: { gone: boolean; anySuccess: boolean; at: Date; disableAfterMs: number },
): Promise<boolean> {
  const { repos, logger } = deps;
  const id = destination.doc._id;
  const failingSince = destination.doc.failing_since;
  const health = destination.kind === 'webhook' ? repos.webhooks.recordEndpointHealth.bind(repos.webhooks) : repos.pipelines.recordHealth.bind(repos.pipelines);
  if (o.gone && destination.kind === 'webhook') {
    if (await repos.webhooks.disableEndpoint(id, 'gone')) await announceDisabled(deps, destination, 'gone', o.at);
    logger.warn({ destinationId: id }, 'webhook endpoint answered 410 Gone: disabled');
    return true;
  }
  if (o.anySuccess) {
    if (!failingSince) return false;
    await health(id, { succeeded: true, at: o.at });
    return true;
  }
  if (!failingSince) {
    await health(id, { succeeded: false, at: o.at });
    return true;
  }
  if (o.at.getTime() - failingSince.getTime() < o.disableAfterMs) return false;
  const disabled =
    destination.kind === 'webhook'
      ? await repos.webhooks.disableEndpoint(id, 'failing', (e) => e.failing_since !== null && o.at.getTime() - e.failing_since.getTime() >= o.disableAfterMs)
      : await repos.pipelines.disableFailing(id, failingSince);
  if (disabled) {
    logger.warn(
      { [destination.kind === 'webhook' ? 'destinationId' : 'pipelineId']: id, failingSince },
      `${destination.kind === 'webhook' ? 'webhook endpoint' : 'pipeline'} failing for too long: disabled`,
    );
    await announceDisabled(deps, destination, 'failing', failingSince);
  }
  return disabled;
}

/**
 * Tells the team (its other endpoints and pipelines, and the event list) that a destination was disabled. One
 * event per disabling: keyed by the destination and the failure run (or the 410), so a retried write publishes
 * nothing twice. Best effort: the destination is disabled whether or not this lands.
 */
async function announceDisabled(
  deps: { publisher: Pick<EventPublisher, 'publish'>; logger: Logger },
  destination: Destination,
  reason: 'gone' | 'failing',
  since: Date,
): Promise<void> {
  const { doc } = destination;
  destinationsDisabled.inc({ destination: destination.kind, reason });
  const idField = destination.kind === 'webhook' ? 'webhook_id' : 'pipeline_id';
  await deps.publisher
    .publish({
      teamId: doc.team_id,
      eventType: `${destination.kind}.disabled`,
      data: { [idField]: doc._id, reason, failing_since: reason === 'failing' ? since.toISOString() : null, disabled_at: new Date().toISOString() },
      idempotencyKey: `${destination.kind}.disabled:${doc._id}:${since.toISOString()}`,
    })
    .catch((err) => deps.logger.warn({ err, [idField]: doc._id }, 'could not publish the disabled event'));
}
