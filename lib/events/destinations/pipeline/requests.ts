import type { Config } from '../../../platform/config';
import type { Repositories } from '../../../repositories';
import type { DestinationInput, Pipeline } from '../../../../schemas/pipeline';
import { notFound, ValidationError } from '../../../platform/errors';
import { isoWithOffset } from '../../../platform/time';
import { brokerPolicyFromConfig, checkBrokerAddress } from '../../../platform/url-safety';
import type { AuditTarget } from '../../../tenancy/audit';
import type { PipelineCredentials, PipelineDestination, PipelineDoc, PipelineRoute } from './model';

/** What the pipeline routes share: the request's destination made a stored one (checked), the view, the lookup. */

export const DEFAULT_EXCHANGE = 'healthbridge.events';
const KAFKA_TOPIC = /^[a-zA-Z0-9._-]{1,249}$/;

const at = (...loc: (string | number)[]) => ['body', 'destination', ...loc];
const refuse = (loc: (string | number)[], msg: string, type = 'value_error') => ValidationError.field(loc, msg, type);

/** Fields of the other destination type, refused so a typo is not silently ignored. */
const FIELDS_OF = { rabbitmq: ['url', 'username', 'password', 'exchange', 'exchange_type'], kafka: ['bootstrap_servers', 'tls', 'sasl'] } as const;

/**
 * The destination and its credentials as stored, from a request's destination: fields checked per type (422
 * with their location), the password taken out of a RabbitMQ URL, and every broker address checked against
 * the address rules (brokerPolicyFromConfig). `kept` is the stored password a PATCH may leave out (same type).
 */
export async function destinationFromRequest(
  deps: { config: Config },
  input: DestinationInput,
  kept: PipelineCredentials | null = null,
): Promise<{ destination: PipelineDestination; credentials: PipelineCredentials | null }> {
  const production = deps.config.DEPLOYMENT_ENVIRONMENT === 'production';
  const policy = brokerPolicyFromConfig(deps.config);
  const other = input.type === 'rabbitmq' ? FIELDS_OF.kafka : FIELDS_OF.rabbitmq;
  for (const field of other)
    if (input[field] !== undefined) throw refuse(at(field), `${field} is not a field of a ${input.type} destination.`, 'value_error.extra');
  const assertAddress = async (loc: (string | number)[], host: string, port: number) => {
    const reason = await checkBrokerAddress(host, port, policy);
    if (reason) throw refuse(loc, `Broker address refused: ${reason} (PIPELINE_BROKER_ALLOWLIST admits private brokers).`, 'value_error.address_refused');
  };

  if (input.type === 'rabbitmq') {
    if (!input.url) throw refuse(at('url'), 'A rabbitmq destination needs its url (amqp:// or amqps://).', 'value_error.missing');
    let url: URL;
    try {
      url = new URL(input.url);
    } catch {
      throw refuse(at('url'), 'The url is not a valid amqp:// or amqps:// URL.');
    }
    if (url.protocol !== 'amqp:' && url.protocol !== 'amqps:')
      throw refuse(at('url'), `The url scheme must be amqp or amqps (got ${url.protocol.replace(':', '')}).`);
    if (production && url.protocol !== 'amqps:') throw refuse(at('url'), 'Production brokers are reached over TLS: use amqps://.');
    if (url.search || url.hash) throw refuse(at('url'), 'The url takes no query or fragment; set exchange and exchange_type as fields.');
    const userInUrl = decodeURIComponent(url.username);
    const passwordInUrl = decodeURIComponent(url.password);
    if (userInUrl && input.username && userInUrl !== input.username) throw refuse(at('username'), 'The user differs from the one in the url; give one.');
    if (passwordInUrl && input.password) throw refuse(at('password'), 'A password is given in the url and as password; give one.');
    await assertAddress(at('url'), url.hostname.replace(/^\[|\]$/g, ''), Number(url.port || (url.protocol === 'amqps:' ? 5671 : 5672)));
    const password = input.password ?? (passwordInUrl || null);
    url.username = '';
    url.password = '';
    return {
      destination: {
        type: 'rabbitmq',
        url: url.href,
        username: input.username ?? (userInUrl || null),
        exchange: input.exchange ?? DEFAULT_EXCHANGE,
        exchange_type: input.exchange_type ?? 'topic',
      },
      credentials: password ? { password } : kept,
    };
  }

  if (!input.bootstrap_servers) throw refuse(at('bootstrap_servers'), 'A kafka destination needs its bootstrap_servers (host:port).', 'value_error.missing');
  const tls = input.tls ?? false;
  if (production && !tls) throw refuse(at('tls'), 'Production brokers are reached over TLS: set tls to true.');
  for (const [i, server] of input.bootstrap_servers.entries()) {
    const cut = server.lastIndexOf(':');
    const port = Number(server.slice(cut + 1));
    if (!(port >= 1 && port <= 65535)) throw refuse(at('bootstrap_servers', i), `${server}: the port must be 1 to 65535.`);
    await assertAddress(at('bootstrap_servers', i), server.slice(0, cut).replace(/^\[|\]$/g, ''), port);
  }
  const sasl = input.sasl ?? null;
  if (sasl && !sasl.password && !kept) throw refuse(at('sasl', 'password'), 'SASL needs a password.', 'value_error.missing');
  return {
    destination: { type: 'kafka', bootstrap_servers: input.bootstrap_servers, tls, sasl: sasl && { mechanism: sasl.mechanism, username: sasl.username } },
    credentials: sasl ? (sasl.password ? { password: sasl.password } : kept) : null,
  };
}

/** Routes checked against the destination: Kafka topics have a narrower alphabet than routing keys. */
export function assertRoutes(routes: PipelineRoute[], destination: PipelineDestination, loc: (string | number)[] = ['body', 'routes']): void {
  if (destination.type !== 'kafka') return;
  routes.forEach((r, i) => {
    if (!KAFKA_TOPIC.test(r.target))
      throw refuse([...loc, i, 'target'], `'${r.target}' is not a Kafka topic name (letters, digits, '.', '_', '-'; at most 249).`);
  });
}

export function toPipeline(d: PipelineDoc): Pipeline {
  const { destination: dest } = d;
  const destination =
    dest.type === 'rabbitmq'
      ? {
          type: dest.type,
          url: dest.url,
          username: dest.username,
          exchange: dest.exchange,
          exchange_type: dest.exchange_type,
          has_password: d.credentials !== null,
        }
      : { type: dest.type, bootstrap_servers: dest.bootstrap_servers, tls: dest.tls, sasl: dest.sasl, has_password: d.credentials !== null };
  return {
    id: d._id,
    description: d.description,
    destination,
    routes: d.routes,
    ordered_per_user: d.ordered_per_user,
    disabled: d.disabled,
    disabled_reason: d.disabled_reason,
    failing_since: d.failing_since && isoWithOffset(d.failing_since),
    created_at: isoWithOffset(d.created_at),
    updated_at: isoWithOffset(d.updated_at),
  };
}

export async function pipelineInTeam(deps: { repos: Repositories }, teamId: string, id: string): Promise<PipelineDoc> {
  const pipeline = await deps.repos.pipelines.findPipeline(teamId, id);
  if (!pipeline) throw notFound(`Pipeline ${id} not found.`);
  return pipeline;
}

/** The audit target of a change to one pipeline. */
export const pipelineTarget = (action: AuditTarget['action'], teamId: string, pipelineId: string): AuditTarget => ({
  action,
  type: 'pipeline',
  id: pipelineId,
  teamId,
});
