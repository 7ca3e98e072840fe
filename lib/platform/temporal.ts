import {
  Client,
  Connection,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  defaultGrpcRetryOptions,
  isGrpcServiceError,
  makeGrpcRetryInterceptor,
} from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { temporalCallMetrics } from './metrics';

export interface TemporalDeps {
  client: Client;
  connection: Connection;
  taskQueue: string;
  namespace: string;
}

/**
 * Retries of a call that meets an unavailable Temporal, for a process answering requests: 4 attempts, about
 * 0.9 s in all, so a request answers 503 within a second instead of after the SDK's 10 attempts (~20 s).
 */
const FAIL_FAST_ATTEMPTS = 4;

/**
 * `failFast` (the api): calls give up on an unavailable server within about a second. Without it (the worker,
 * scripts) they keep the SDK's default retries.
 */
export async function connectTemporal(address: string, namespace: string, taskQueue: string, { failFast = false } = {}): Promise<TemporalDeps> {
  let connection: Connection;
  try {
    const interceptors = failFast ? [makeGrpcRetryInterceptor(defaultGrpcRetryOptions({ maxAttempts: FAIL_FAST_ATTEMPTS }))] : undefined;
    connection = await Connection.connect({ address, connectTimeout: '10s', ...(interceptors ? { interceptors } : {}) });
  } catch (err) {
    throw new Error(`Cannot reach Temporal at ${address} (${(err as Error).message}). Start the dev stack (npm run dev) or set TEMPORAL_ADDRESS.`);
  }
  // Every call counted and timed by call and workflow type (lib/platform/metrics.ts).
  return { client: new Client({ connection, namespace, interceptors: { workflow: [temporalCallMetrics()] } }), connection, taskQueue, namespace };
}

/**
 * True when the server answers and at least one worker polls the task queue. A killed worker stays listed
 * for minutes (its last long poll), so GET /ready also asks for a fresh worker heartbeat (lib/platform/worker-heartbeats-store.ts).
 */
export async function temporalReadiness(t: TemporalDeps): Promise<{ server: boolean; worker: boolean }> {
  try {
    const res = await t.connection.workflowService.describeTaskQueue({
      namespace: t.namespace,
      taskQueue: { name: t.taskQueue },
      taskQueueType: 1, // TASK_QUEUE_TYPE_WORKFLOW
    });
    return { server: true, worker: (res.pollers ?? []).length > 0 };
  } catch {
    return { server: false, worker: false };
  }
}

const registeredAttributes = new WeakMap<TemporalDeps, true>();

/**
 * Whether the namespace has the custom search attributes the workflows set (a workflow that sets an unknown
 * one fails its task). Remembered once true, so GET /ready asks Temporal once per process.
 */
export async function searchAttributesRegistered(t: TemporalDeps, names: string[]): Promise<boolean> {
  if (registeredAttributes.has(t)) return true;
  try {
    const res = await t.connection.operatorService.listSearchAttributes({ namespace: t.namespace });
    const known = new Set(Object.keys(res.customAttributes ?? {}));
    if (!names.every((n) => known.has(n))) return false;
    registeredAttributes.set(t, true);
    return true;
  } catch {
    return false;
  }
}

/**
 * True when Temporal says the workflow is not running: never started or already closed (NOT_FOUND, which the client
 * raises as WorkflowNotFoundError), or closed while an Update it had accepted was still running (the server fails
 * that Update with its AcceptedUpdateCompletedWorkflow failure).
 */
export function isWorkflowGone(err: unknown): boolean {
  if (err instanceof WorkflowNotFoundError) return true;
  return err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure && err.cause.type === 'AcceptedUpdateCompletedWorkflow';
}

/** gRPC status codes (grpc-js `status`), as Temporal's client raises them. */
const GRPC_UNAVAILABLE = 14;
const GRPC_DEADLINE_EXCEEDED = 4;

/** Temporal is unreachable or not answering in time right now (gRPC UNAVAILABLE or DEADLINE_EXCEEDED). */
export function isTemporalUnavailable(err: unknown): boolean {
  return isGrpcServiceError(err) && (err.code === GRPC_UNAVAILABLE || err.code === GRPC_DEADLINE_EXCEEDED);
}
