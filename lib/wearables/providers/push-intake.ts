import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { workflowIds } from '../../../workflows/ids';
import { providerHintsWorkflow, providerPushWorkflow, pushHintSignal, type PushHint } from '../../../workflows/wearable-connection';
import type { Logger } from '../../platform/logger';
import type { ConnectionDeps } from '../workflow-client';
import type { PushRequest, PushSecrets } from './contract';
import { integrationFor } from './registry';
import { appsOf, providerTaskQueue } from './runtime';

export type PushDeps = ConnectionDeps & { logger: Logger };

/**
 * The push intake (GET|HEAD|POST /v2/providers/{provider}/webhook). A provider's handshake is answered for whichever of
 * its apps it names. A notification is never trusted as data: each names a user and an object or days, and we fetch
 * exactly that with the user's own token.
 * - Signed pushes (WHOOP, Oura, Polar): a bad or missing signature, or a stale timestamp, is a 401 and stores nothing;
 *   each notification's fetch is its own workflow whose id is the notification's, so the same one twice fetches once.
 * - Unsigned pushes (Withings; Strava, whose subscription id is no secret) are hints: one that fails `verify` is
 *   answered 200 like the rest (so the answer is no oracle for a subscription id) and dropped; the others go to the
 *   connection's hints workflow, which coalesces them and confirms a deauthorization with the provider before it ends
 *   the connection (workflows/wearable-connection.ts providerHintsWorkflow).
 */
export async function receivePush(deps: PushDeps, slug: string, req: PushRequest): Promise<{ status: number; body: unknown }> {
  const integration = integrationFor(slug);
  if (!integration?.push) return { status: 404, body: { detail: `No push intake for ${slug}.` } };
  const push = integration.push;
  const secrets = await appSecrets(deps, slug);
  if (req.method === 'GET' || req.method === 'HEAD') {
    // Every app has its own verify token: the one whose token the handshake carries answers it.
    const replies = secrets.map((s) => push.handshake?.(req, s) ?? null).filter((r) => r !== null);
    const reply = replies.find((r) => r.status < 300) ?? replies[0];
    if (reply) return { status: reply.status, body: reply.body ?? {} };
    return {
      status: secrets.length ? 404 : 503,
      body: { detail: secrets.length ? 'Not a handshake this deployment recognises.' : `No ${slug} app is configured on this deployment.` },
    };
  }
  const now = new Date();
  if (!secrets.some((s) => push.verify(req, s, now))) {
    deps.logger.warn(
      { provider: slug, from: req.remoteAddress },
      push.signed
        ? 'provider push refused: bad or missing signature, or stale timestamp'
        : 'provider push ignored: not a notification of ours (unsigned; answered 200 all the same)',
    );
    if (!push.signed) return { status: 200, body: {} };
    return { status: 401, body: { detail: `The ${slug} push signature or timestamp did not verify; nothing was stored.` } };
  }
  const taskQueue = providerTaskQueue(deps.config.TEMPORAL_TASK_QUEUE, slug);
  for (const note of push.parse(req)) {
    if (note.kind === 'ping') continue;
    const connections = await deps.repos.connections.liveByExternalUser(slug, note.externalUserId);
    for (const connection of connections) {
      const memo = { team_id: connection.team_id, user_id: connection.user_id, provider: slug };
      if (!push.signed || note.kind === 'deauthorized') {
        if (note.kind === 'deauthorized')
          deps.logger.info(
            { provider: slug, connectionId: connection._id, from: req.remoteAddress },
            'provider push says the user removed our access; confirming with the provider',
          );
        const hint: PushHint =
          note.kind === 'deauthorized'
            ? { kind: 'deauthorized', from: req.remoteAddress, dedupeKey: note.dedupeKey }
            : { kind: 'data', resource: note.resource, objectId: note.objectId, window: note.window, dedupeKey: note.dedupeKey };
        await deps.temporal.client.workflow.signalWithStart(providerHintsWorkflow, {
          workflowId: workflowIds.providerHints(connection._id),
          taskQueue: deps.temporal.taskQueue,
          args: [{ connectionId: connection._id, taskQueue }],
          signal: pushHintSignal,
          signalArgs: [hint],
          memo,
        });
        continue;
      }
      try {
        await deps.temporal.client.workflow.start(providerPushWorkflow, {
          workflowId: workflowIds.providerPush(slug, `${connection._id}:${note.dedupeKey}`),
          taskQueue: deps.temporal.taskQueue,
          args: [{ connectionId: connection._id, taskQueue, resource: note.resource, objectId: note.objectId, window: note.window }],
          // The notification's fetch happens once, however often the provider delivers it.
          workflowIdReusePolicy: 'REJECT_DUPLICATE',
          memo,
        });
      } catch (err) {
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      }
    }
  }
  return { status: 200, body: {} };
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
