import { Context } from '@temporalio/activity';
import type { Config } from '../lib/platform/config';
import type { Logger } from '../lib/platform/logger';
import type { Repositories } from '../lib/repositories';
import type { Senders } from '../lib/events/destinations/destination';
import { brokerPolicyFromConfig, urlPolicyFromConfig } from '../lib/platform/url-safety';
import { PipelineSender } from '../lib/events/destinations/pipeline/brokers';
import { DestinationDispatcher, type DispatchResult } from '../lib/events/dispatcher';
import type { EventPublisher } from '../lib/events/publisher';
import { WebhookSender } from '../lib/events/destinations/webhook/sender';
import type { DispatcherCommand } from '../workflows/destination-dispatch';

export interface WebhookDeliveryActivityDeps {
  repos: Repositories;
  config: Config;
  logger: Logger;
  publisher: EventPublisher;
  /** Connection pools to endpoints and brokers (createSenders), closed by the worker when it stops. */
  senders: Senders;
}

/** One webhook sender and one pipeline sender per worker: `close` ends their connections (the worker's shutdown). */
export function createSenders(config: Config): Senders & { close(): Promise<void> } {
  const webhook = new WebhookSender(urlPolicyFromConfig(config));
  const pipeline = new PipelineSender(brokerPolicyFromConfig(config));
  return { webhook, pipeline, close: async () => void (await Promise.all([webhook.close(), pipeline.close()])) };
}

/**
 * The webhook activities: a dispatcher's delivery run and its commands (lib/events/dispatcher.ts), to a webhook
 * endpoint or a pipeline, and the sweeper's repair of what a crash left behind.
 */
export function createWebhookDeliveryActivities(deps: WebhookDeliveryActivityDeps) {
  const { repos, logger, publisher } = deps;
  const dispatcher = new DestinationDispatcher(deps, deps.senders);
  const store = repos.webhookStore;

  return {
    deliverDueWebhooks(input: { destinationId: string }): Promise<DispatchResult> {
      const ctx = Context.current();
      return dispatcher.deliverDue(input.destinationId, {
        heartbeat: () => ctx.heartbeat(),
        superseded: () => ctx.cancellationSignal.aborted,
      });
    },

    applyDispatcherCommand(input: { destinationId: string; command: DispatcherCommand }): Promise<number> {
      return dispatcher.applyCommand(input.destinationId, input.command);
    },

    /**
     * Repairs stranded work: unfinished fan-outs (publish spans left in the outbox) and overdue deliveries whose
     * dispatcher missed its wake, WEBHOOK_SWEEP_GRACE_MS old.
     */
    async sweepWebhooks(): Promise<{ fannedOut: number; woken: number }> {
      const cutoff = new Date(Date.now() - deps.config.WEBHOOK_SWEEP_GRACE_MS);
      let fannedOut = 0;
      for (const o of await store.staleOutbox(cutoff, 100)) {
        // Events of the span that were never stored belong to publishes that failed before returning: nothing is owed.
        const events = await store.eventsCreatedWithin(o.events_from, o.events_until);
        await publisher.fanOutAgain(events, o._id);
        fannedOut += events.length;
      }
      const endpoints = [
        ...new Set([...(await store.endpointsWithOverdue(cutoff, 10000)), ...(await deps.repos.pipelineBatches.destinationsWithOverdue(cutoff, 10000))]),
      ];
      await Promise.all(endpoints.map((id) => publisher.wake(id)));
      if (fannedOut || endpoints.length) logger.info({ fannedOut, woken: endpoints.length }, 'webhook sweeper repaired stranded work');
      return { fannedOut, woken: endpoints.length };
    },
  };
}

export type WebhookDeliveryActivities = ReturnType<typeof createWebhookDeliveryActivities>;
