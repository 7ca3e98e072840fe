import {
  allHandlersFinished,
  condition,
  continueAsNew,
  defineSignal,
  defineUpdate,
  proxyActivities,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { WebhookDeliveryActivities } from '../activities/webhook-delivery';

export interface DestinationDispatchInput {
  destinationId: string;
}

/**
 * Changes to an endpoint's deliveries made on someone else's behalf: they run inside the dispatcher, between
 * its batches, because the dispatcher owns those documents (no batch in flight can overwrite them).
 */
export type DispatcherCommand =
  /** A deleted user's deliveries and attempts to this endpoint (erasure). */
  | { kind: 'erase_user'; teamId: string; userId: string }
  /** One manual attempt of each event (resend). */
  | { kind: 'resend'; teamId: string; eventIds: string[] }
  /** One manual attempt of every failed delivery created in [since, until) (recover). */
  | { kind: 'recover'; teamId: string; since: string; until: string | null }
  /**
   * The destination changed (URL, headers, secrets, broker, disabled): answered once no delivery run is in flight,
   * so every delivery sent after the API answers is sent with the change (each run reads its destination afresh).
   */
  | { kind: 'destination_changed' };

/** Sent (signal-with-start) by the publisher, the sweeper and replay: "this endpoint may have due deliveries". */
export const wakeDispatcherSignal = defineSignal<[]>('wakeDispatcher');
/** Runs a command between batches (update-with-start); returns how many deliveries it changed. */
export const runDispatcherCommandUpdate = defineUpdate<number, [DispatcherCommand]>('runDispatcherCommand');

const { deliverDueWebhooks } = proxyActivities<WebhookDeliveryActivities>({
  startToCloseTimeout: '10 minutes',
  // A worker that dies mid-batch is noticed within this time and the batch is retried elsewhere; the same
  // deliveries are then sent again with the same webhook-id (at-least-once). Not shorter: the SDK sends
  // heartbeats at most every 80% of it, and a busy 2-core machine measured false timeouts at 5 s.
  heartbeatTimeout: '20 seconds',
  // Our own transient faults only (database, Temporal); receiver failures are business outcomes handled
  // by the delivery schedule.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

const { applyDispatcherCommand } = proxyActivities<WebhookDeliveryActivities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

const MAX_ITERATIONS = 500;

/**
 * The delivery loop of one endpoint (id `webhook-dispatch:<destinationId>`), the single owner of its delivery
 * documents. Each iteration runs one activity that sends batches of due deliveries and records the
 * outcomes; between iterations it runs queued commands (erasure, resend, recover), then waits for a wake
 * signal, a command or the next due time (a Temporal timer), honouring the endpoint's rate limit by pacing
 * batches. Payloads stay in MongoDB: this workflow carries only the endpoint id. It continues-as-new to bound
 * its history and ends when the endpoint is gone or disabled (a later publish starts it again).
 */
export async function destinationDispatchWorkflow(input: DestinationDispatchInput): Promise<void> {
  let woken = false;
  const commands: { command: DispatcherCommand; changed: number | null }[] = [];
  setHandler(wakeDispatcherSignal, () => {
    woken = true;
  });
  setHandler(runDispatcherCommandUpdate, async (command) => {
    const entry = { command, changed: null as number | null };
    commands.push(entry);
    await condition(() => entry.changed !== null);
    return entry.changed as number;
  });
  const runCommands = async () => {
    while (commands.length) {
      const entry = commands[0];
      entry.changed =
        entry.command.kind === 'destination_changed' ? 0 : await applyDispatcherCommand({ destinationId: input.destinationId, command: entry.command });
      commands.shift();
      woken = true; // a resend or recover queued deliveries: look at once
    }
  };

  let stopped = false;
  for (let i = 0; i < MAX_ITERATIONS && !workflowInfo().continueAsNewSuggested; i++) {
    await runCommands();
    woken = false;
    const r = await deliverDueWebhooks({ destinationId: input.destinationId });
    if (r.stop) {
      stopped = true;
      break;
    }
    if (r.more) {
      if (r.waitMs > 0) await sleep(r.waitMs);
      continue;
    }
    const wakeUp = () => woken || commands.length > 0;
    if (r.nextDueInMs === null) await condition(wakeUp);
    else await condition(wakeUp, Math.max(1, r.nextDueInMs));
  }
  // Commands accepted meanwhile still run here: an update is never left unanswered by the ending run.
  while (commands.length || !allHandlersFinished()) {
    await runCommands();
    await condition(() => commands.length > 0 || allHandlersFinished());
  }
  if (!stopped) await continueAsNew<typeof destinationDispatchWorkflow>(input);
}
