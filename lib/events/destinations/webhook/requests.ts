import type { AuditTarget } from '../../../tenancy/audit';
import { ApiError, badRequest, notFound, ValidationError } from '../../../platform/errors';
import { queueDispatcherCommand } from '../../dispatcher-commands';
import type { EndpointDoc } from './endpoints-store';
import { isoWithOffset } from '../../../platform/time';
import { checkAndNormalizeWebhookUrl, urlPolicyFromConfig } from '../../../platform/url-safety';
import type { Webhook } from '../../../../schemas/webhook';
import type { Config } from '../../../platform/config';
import type { TemporalDeps } from '../../../platform/temporal';
import type { Repositories } from '../../../repositories';

export function toWebhook(d: EndpointDoc): Webhook {
  return {
    id: d._id,
    url: d.url,
    description: d.description,
    filter_types: d.filter_types,
    disabled: d.disabled,
    disabled_reason: d.disabled_reason,
    rate_limit: d.rate_limit,
    ordered_per_user: d.ordered_per_user ?? false,
    failing_since: d.failing_since && isoWithOffset(d.failing_since),
    created_at: isoWithOffset(d.created_at),
    updated_at: isoWithOffset(d.updated_at),
  };
}

/**
 * The URL as it will be stored, shown and called (normalised), or a 422 with the reason it may not receive
 * webhooks here (spelling, scheme, SSRF rules).
 */
export async function assertUrlAllowed(deps: { config: Config }, url: string): Promise<string> {
  const checked = await checkAndNormalizeWebhookUrl(url, urlPolicyFromConfig(deps.config));
  if ('reason' in checked) throw ValidationError.field(['body', 'url'], `Webhook URL refused: ${checked.reason}`, 'value_error.url_refused');
  return checked.url;
}

export function assertThisEnvironment(deps: { config: Config }, environment: string): void {
  const env = deps.config.DEPLOYMENT_ENVIRONMENT;
  if (environment !== env) throw badRequest(`This deployment serves the ${env} environment; manage ${environment} webhooks on that deployment.`);
}

export async function endpointInTeam(deps: { repos: Repositories }, teamId: string, id: string): Promise<EndpointDoc> {
  const endpoint = await deps.repos.webhooks.findEndpoint(teamId, id);
  if (!endpoint) throw notFound(`Webhook ${id} not found.`);
  return endpoint;
}

/** A destination of deliveries as resend and recover need it: a webhook endpoint or a pipeline. */
export interface DeliveryDestination {
  _id: string;
  team_id: string;
  disabled: boolean;
  /** How errors name it: 'Webhook' or 'Pipeline'. */
  noun?: string;
}

/**
 * Resends run inside the destination's dispatcher (which owns its delivery documents): one manual attempt
 * each, not rescheduled on failure, with the same id as before. Returns once the dispatcher has accepted the
 * command (durably), not after the batch it is sending.
 */
export async function resendEvent(deps: { repos: Repositories; temporal: TemporalDeps }, destination: DeliveryDestination, eventId: string): Promise<void> {
  const event = await deps.repos.webhookStore.getEvent(eventId, destination.team_id);
  if (!event) throw notFound(`Event ${eventId} not found.`);
  assertEnabled(destination);
  await queueDispatcherCommand(deps.temporal, destination._id, { kind: 'resend', teamId: destination.team_id, eventIds: [eventId] });
}

/** Resends every failed delivery of the destination created in [since, until); returns how many were failed when asked. */
export async function recoverFailed(
  deps: { repos: Repositories; temporal: TemporalDeps },
  destination: DeliveryDestination,
  since: Date,
  until?: Date,
): Promise<number> {
  assertEnabled(destination);
  const failed = await deps.repos.webhookStore.countFailed(destination.team_id, destination._id, { since, until });
  const command = { kind: 'recover' as const, teamId: destination.team_id, since: since.toISOString(), until: until?.toISOString() ?? null };
  if (failed) await queueDispatcherCommand(deps.temporal, destination._id, command);
  return failed;
}

function assertEnabled(destination: DeliveryDestination): void {
  if (destination.disabled) {
    throw new ApiError(409, `${destination.noun ?? 'Webhook'} ${destination._id} is disabled; enable it (PATCH disabled=false) before resending.`);
  }
}

/** The audit target of a change to one webhook endpoint (its team is the entry's team). */
export const webhookTarget = (action: AuditTarget['action'], teamId: string, webhookId: string): AuditTarget => ({
  action,
  type: 'webhook',
  id: webhookId,
  teamId,
});
