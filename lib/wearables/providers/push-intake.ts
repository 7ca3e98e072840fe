import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { workflowIds } from '../../../workflows/ids';
import { providerPushWorkflow } from '../../../workflows/wearable-connection';
import { providerTaskQueue } from '../../../activities/wearables';
import type { Logger } from '../../platform/logger';
import type { EventPublisher } from '../../events/publisher';
import { deregisterConnection, providerSummary, type ConnectionDeps } from '../workflow-client';
import type { PushRequest, PushSecrets } from './contract';
import { integrationFor } from './registry';
import { appsOf } from './runtime';

export type PushDeps = ConnectionDeps & { publisher: EventPublisher; logger: Logger };

/**
 * The push intake (GET|HEAD|POST /v2/providers/{provider}/webhook): a provider's handshake is answered; a
 * notification is verified (a bad or missing signature, or a stale timestamp, is a 401 and stores nothing), never
 * trusted as data: each names a user and an object or days, and a fetch of exactly that is started as its own
 * workflow whose id is the notification's, so the same notification twice fetches (and publishes) once.
 * Deauthorizations end the user's connections with `provider.connection.error` (`deregistered_per_provider`).
 */
export async function receivePush(deps: PushDeps, slug: string, req: PushRequest): Promise<{ status: number; body: unknown }> {
  const integration = integrationFor(slug);
  if (!integration?.push) return { status: 404, body: { detail: `No push intake for ${slug}.` } };
  const push = integration.push;
  const secrets = await appSecrets(deps, slug);
  if (req.method === 'GET' || req.method === 'HEAD') {
    for (const s of secrets) {
      const reply = push.handshake?.(req, s);
      if (reply) return { status: reply.status, body: reply.body ?? {} };
    }
    return { status: secrets.length ? 404 : 503, body: { detail: secrets.length ? 'Not a handshake this deployment recognises.' : `No ${slug} app is configured on this deployment.` } };
  }
  const now = new Date();
  if (!secrets.some((s) => push.verify(req, s, now))) {
    deps.logger.warn({ provider: slug }, 'provider push refused: bad or missing signature, or stale timestamp');
    return { status: 401, body: { detail: `The ${slug} push signature or timestamp did not verify; nothing was stored.` } };
  }
  for (const note of push.parse(req)) {
    if (note.kind === 'ping') continue;
    const connections = await deps.repos.connections.liveByExternalUser(slug, note.externalUserId);
    for (const connection of connections) {
      if (note.kind === 'deauthorized') {
        await endDeauthorized(deps, connection._id, slug);
        continue;
      }
      try {
        await deps.temporal.client.workflow.start(providerPushWorkflow, {
          workflowId: workflowIds.providerPush(slug, `${connection._id}:${note.dedupeKey}`),
          taskQueue: deps.temporal.taskQueue,
          args: [{ connectionId: connection._id, taskQueue: providerTaskQueue(deps.config.TEMPORAL_TASK_QUEUE, slug), resource: note.resource, objectId: note.objectId, window: note.window }],
          // The notification's fetch happens once, however often the provider delivers it.
          workflowIdReusePolicy: 'REJECT_DUPLICATE',
          memo: { team_id: connection.team_id, user_id: connection.user_id, provider: slug },
        });
      } catch (err) {
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      }
    }
  }
  return { status: 200, body: {} };
}

/** The user removed our access at the provider: the connection breaks (its event) and ends. */
async function endDeauthorized(deps: PushDeps, connectionId: string, slug: string): Promise<void> {
  const connection = await deps.repos.connections.find(connectionId);
  if (!connection || connection.status === 'deregistered') return;
  const user = await deps.repos.users.find(connection.team_id, connection.user_id);
  const details = { error_type: 'deregistered_per_provider', error_message: `The user removed access at ${slug}.`, errored_at: new Date() };
  await deps.repos.connections.recordError(connection, details);
  if (user) {
    await deps.publisher.publish({
      teamId: connection.team_id,
      userId: user._id,
      clientUserId: user.client_user_id,
      eventType: 'provider.connection.error',
      data: {
        user_id: user._id,
        provider: providerSummary(deps, slug),
        source: providerSummary(deps, slug),
        message: details.error_message,
        error_type: details.error_type,
        error_details: { ...details, errored_at: details.errored_at.toISOString() },
      },
      idempotencyKey: `connection-error:${connection._id}:deregistered_per_provider`,
    });
  }
  await deregisterConnection(deps, connection);
}

/** The secrets of every app this deployment has at the provider: its own, and teams' own credentials. */
async function appSecrets(deps: PushDeps, slug: string): Promise<PushSecrets[]> {
  return Promise.all(
    (await appsOf(deps, slug)).map(async (app) => {
      const stored = await deps.repos.providerAuth.getApp(slug, app.clientId);
      return { clientSecret: app.clientSecret, webhookSecret: stored?.webhook_secret ?? undefined, verifyToken: stored?.verify_token ?? undefined };
    }),
  );
}
