import { timingSafeEqual } from 'node:crypto';
import type { MongoClient } from 'mongodb';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { WorkflowClientInterceptor } from '@temporalio/client';

/**
 * The process's Prometheus metrics (prom-client), served by `GET /metrics` on the api and on the worker's
 * metrics port. One registry per process, labelled `process` (api or worker). Labels are route templates,
 * status codes, workflow and activity types, event types' destinations and the like: never a user id, key,
 * team id or anything a patient wrote.
 */
export const registry = new Registry();
let defaultsCollected = false;

/**
 * The delivery queue, read from the database at each scrape of the worker (two index-served queries): pending
 * deliveries (queued, waiting to retry, or being sent), and how far behind the most overdue one is (0 when
 * nothing is due: a delivery waiting for its retry time is not late).
 */
export function registerDeliveryQueueMetrics(store: { pendingDeliveryCount(): Promise<number>; nextDueAt(): Promise<Date | null> }): void {
  if (registry.getSingleMetric('healthbridge_deliveries_pending')) return;
  new Gauge({
    name: 'healthbridge_deliveries_pending',
    help: 'Pending deliveries (webhooks and pipelines): queued, waiting to retry, or being sent; counted up to 100,000.',
    registers: [registry],
    async collect() {
      this.set(await store.pendingDeliveryCount());
    },
  });
  new Gauge({
    name: 'healthbridge_delivery_oldest_due_seconds',
    help: 'How long the most overdue pending delivery has been due (0: none is due). Alert when it grows: dispatchers are behind.',
    registers: [registry],
    async collect() {
      const at = await store.nextDueAt();
      this.set(at ? Math.max(0, (Date.now() - at.getTime()) / 1000) : 0);
    },
  });
}

/** Names the process (api or worker) on every series, and adds Node's own metrics (CPU, memory, event loop). */
export function initProcessMetrics(processName: 'api' | 'worker', { nodeMetrics = true } = {}): void {
  registry.setDefaultLabels({ process: processName });
  if (nodeMetrics && !defaultsCollected) collectDefaultMetrics({ register: registry, prefix: 'healthbridge_' });
  defaultsCollected ||= nodeMetrics;
}

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export const httpRequests = new Counter({
  name: 'healthbridge_http_requests_total',
  help: 'API requests by method, route template (unmatched: no route) and status.',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [registry],
});
export const httpRequestDuration = new Histogram({
  name: 'healthbridge_http_request_duration_seconds',
  help: 'API request latency by method, route template and status.',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

export const deliveryAttempts = new Counter({
  name: 'healthbridge_delivery_attempts_total',
  help: 'Delivery attempts by destination kind (webhook, pipeline) and result (ok, or the error class).',
  labelNames: ['destination', 'result'] as const,
  registers: [registry],
});
export const deliveriesFinished = new Counter({
  name: 'healthbridge_deliveries_total',
  help: 'Deliveries that reached an outcome, by destination kind and outcome (succeeded, failed after its schedule).',
  labelNames: ['destination', 'outcome'] as const,
  registers: [registry],
});
export const destinationsDisabled = new Counter({
  name: 'healthbridge_destinations_disabled_total',
  help: 'Webhook endpoints and pipelines disabled by the dispatcher, by kind and reason (gone, failing).',
  labelNames: ['destination', 'reason'] as const,
  registers: [registry],
});

export const temporalCalls = new Counter({
  name: 'healthbridge_temporal_calls_total',
  help: 'Calls to Temporal by call (start, signalWithStart, startUpdateWithStart, …), workflow type and outcome: workflow starts by type.',
  labelNames: ['call', 'workflow', 'outcome'] as const,
  registers: [registry],
});
export const temporalCallDuration = new Histogram({
  name: 'healthbridge_temporal_call_duration_seconds',
  help: 'Latency of calls to Temporal by call.',
  labelNames: ['call'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

export const activityExecutions = new Counter({
  name: 'healthbridge_activity_executions_total',
  help: 'Activity executions by activity type and outcome (completed, failed): failures by type.',
  labelNames: ['activity', 'outcome'] as const,
  registers: [registry],
});
export const activityDuration = new Histogram({
  name: 'healthbridge_activity_duration_seconds',
  help: 'Activity execution time by activity type.',
  labelNames: ['activity'] as const,
  buckets: [...LATENCY_BUCKETS, 60, 300],
  registers: [registry],
});

export const labOrderTransitions = new Counter({
  name: 'healthbridge_lab_order_transitions_total',
  help: 'Lab order status changes by new status.',
  labelNames: ['status'] as const,
  registers: [registry],
});
/** Messages to laboratories (activities/lab-messages.ts): a lab that is down shows as timeouts and resends here. */
export const labMessageSends = new Counter({
  name: 'healthbridge_lab_messages_sent_total',
  help: 'HL7 messages sent to laboratories (every send, resends too), by lab slug, kind (order, cancel) and outcome (answered, timeout, connection_error).',
  labelNames: ['lab', 'kind', 'outcome'] as const,
  registers: [registry],
});
export const labMessageResends = new Counter({
  name: 'healthbridge_lab_message_resends_total',
  help: 'Sends of a lab message that had been sent before (same bytes, same control id), by lab slug and kind.',
  labelNames: ['lab', 'kind'] as const,
  registers: [registry],
});
export const labMessageAnswers = new Counter({
  name: 'healthbridge_lab_message_answers_total',
  help: "Laboratories' answers to our messages, by lab slug, kind and MSA-1 code (AA, AE, AR; CE/CR in enhanced mode).",
  labelNames: ['lab', 'kind', 'code'] as const,
  registers: [registry],
});

/** Lab messages stored and not yet answered, read from the database at each scrape of the worker (one index-served count). */
export function registerLabOutboundMetrics(store: { unansweredCount(): Promise<number> }): void {
  if (registry.getSingleMetric('healthbridge_lab_messages_unanswered')) return;
  new Gauge({
    name: 'healthbridge_lab_messages_unanswered',
    help: 'Messages to laboratories stored and not yet answered (pending or committed); counted up to 100,000. Alert when it grows: a lab is not answering.',
    registers: [registry],
    async collect() {
      this.set(await store.unansweredCount());
    },
  });
}

export const samplesIngested = new Counter({
  name: 'healthbridge_wearable_samples_ingested_total',
  help: 'Wearable timeseries samples stored, by resource (heartrate, steps, …).',
  labelNames: ['resource'] as const,
  registers: [registry],
});

export const databaseCommandDuration = new Histogram({
  name: 'healthbridge_database_command_duration_seconds',
  help: 'Latency of database commands by command (find, insert, update, …) and outcome.',
  labelNames: ['command', 'outcome'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

/** Times every command of this client (the driver's command monitoring; a client must be created with monitorCommands). */
export function observeDatabaseCommands(client: MongoClient): void {
  const observe = (outcome: string) => (e: { commandName: string; duration: number }) =>
    databaseCommandDuration.observe({ command: e.commandName, outcome }, e.duration / 1000);
  client.on('commandSucceeded', observe('ok'));
  client.on('commandFailed', observe('error'));
}

/** Counts and times this process's calls to Temporal (a client interceptor), by call and workflow type. */
export function temporalCallMetrics(): WorkflowClientInterceptor {
  const timed =
    (call: string) =>
    async <I extends object, O>(input: I, next: (input: I) => Promise<O>): Promise<O> => {
      const end = temporalCallDuration.startTimer({ call });
      const workflow = 'workflowType' in input && typeof input.workflowType === 'string' ? input.workflowType : 'n/a';
      try {
        const out = await next(input);
        temporalCalls.inc({ call, workflow, outcome: 'ok' });
        return out;
      } catch (err) {
        temporalCalls.inc({ call, workflow, outcome: 'error' });
        throw err;
      } finally {
        end();
      }
    };
  // `startWithDetails` is what client.workflow.start goes through (a `start` interceptor is adapted to it).
  const calls = ['startWithDetails', 'signalWithStart', 'startUpdateWithStart', 'startUpdate', 'signal', 'query', 'terminate', 'cancel', 'describe'];
  return Object.fromEntries(calls.map((c) => [c, timed(c === 'startWithDetails' ? 'start' : c)])) as WorkflowClientInterceptor;
}

/** The registry in the Prometheus text format, and its content type. */
export async function metricsText(): Promise<{ body: string; contentType: string }> {
  return { body: await registry.metrics(), contentType: registry.contentType };
}

/** Whether an Authorization header carries `Bearer <token>` (compared in constant time). */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const given = Buffer.from(/^Bearer (.+)$/i.exec(header ?? '')?.[1] ?? '');
  const wanted = Buffer.from(token);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}
