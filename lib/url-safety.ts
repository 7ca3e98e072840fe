import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * SSRF protection for webhook targets. A URL is checked when an endpoint is created or changed, and every
 * delivery connects through `guardedLookup`, which re-resolves the host and refuses the connection if any
 * address is private, link-local, cloud metadata or otherwise not public (DNS can change after creation).
 */
export interface UrlPolicy {
  /** https only (production). */
  requireHttps: boolean;
  /** 127.0.0.0/8 and ::1 accepted (sandbox/dev default). */
  allowLoopback: boolean;
  /** `host:port` entries accepted whatever they resolve to. */
  allowlist: string[];
}

export function urlPolicyFromConfig(config: {
  DEPLOYMENT_ENVIRONMENT: string;
  WEBHOOK_ALLOW_LOOPBACK?: boolean;
  WEBHOOK_URL_ALLOWLIST: string;
}): UrlPolicy {
  const production = config.DEPLOYMENT_ENVIRONMENT === 'production';
  return {
    requireHttps: production,
    allowLoopback: config.WEBHOOK_ALLOW_LOOPBACK ?? !production,
    allowlist: config.WEBHOOK_URL_ALLOWLIST.split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  };
}

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

const metadata = new BlockList();
metadata.addAddress('169.254.169.254', 'ipv4'); // AWS, GCP, Azure, OpenStack
metadata.addAddress('169.254.170.2', 'ipv4'); // AWS ECS task metadata
metadata.addAddress('100.100.100.200', 'ipv4'); // Alibaba Cloud
metadata.addAddress('fd00:ec2::254', 'ipv6'); // AWS IPv6

const linkLocal = new BlockList();
linkLocal.addSubnet('169.254.0.0', 16, 'ipv4');
linkLocal.addSubnet('fe80::', 10, 'ipv6');

const privateNets = new BlockList();
for (const [net, bits] of [
  ['10.0.0.0', 8],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
  ['100.64.0.0', 10], // carrier-grade NAT
] as const) {
  privateNets.addSubnet(net, bits, 'ipv4');
}
privateNets.addSubnet('fc00::', 7, 'ipv6'); // unique local

const notRoutable = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved + broadcast
] as const) {
  notRoutable.addSubnet(net, bits, 'ipv4');
}
notRoutable.addAddress('::', 'ipv6');
notRoutable.addSubnet('ff00::', 8, 'ipv6');
notRoutable.addSubnet('2001:db8::', 32, 'ipv6');

/** Why this address may not be a webhook target, or null if it may. */
export function refusedAddressReason(address: string, policy: Pick<UrlPolicy, 'allowLoopback'>): string | null {
  let addr = address;
  let family: 'ipv4' | 'ipv6' = isIP(addr) === 6 ? 'ipv6' : 'ipv4';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(addr);
  if (mapped) {
    addr = mapped[1];
    family = 'ipv4';
  }
  if (metadata.check(addr, family)) return `${address} is a cloud metadata address`;
  if (loopback.check(addr, family)) return policy.allowLoopback ? null : `${address} is a loopback address`;
  if (linkLocal.check(addr, family)) return `${address} is a link-local address`;
  if (privateNets.check(addr, family)) return `${address} is a private network address`;
  if (notRoutable.check(addr, family)) return `${address} is not a public unicast address`;
  return null;
}

const defaultPort = (u: URL) => u.port || (u.protocol === 'https:' ? '443' : '80');
const bareHost = (u: URL) => u.hostname.replace(/^\[|\]$/g, '').toLowerCase();

export function isAllowlisted(url: URL, policy: UrlPolicy): boolean {
  return policy.allowlist.includes(`${bareHost(url)}:${defaultPort(url)}`);
}

function resolveAll(host: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) =>
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
  );
}

/** Checks scheme, credentials and every address the host resolves to. Returns a reason when refused. */
export async function checkWebhookUrl(raw: string, policy: UrlPolicy): Promise<string | null> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'The URL is not a valid absolute URL.';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return `The URL scheme must be https (got ${url.protocol.replace(':', '')}).`;
  if (policy.requireHttps && url.protocol !== 'https:') return 'Webhook URLs must use https in production.';
  if (url.username || url.password) return 'The URL must not carry credentials; use custom headers instead.';
  if (isAllowlisted(url, policy)) return null;
  const host = bareHost(url);
  let addresses: LookupAddress[];
  if (isIP(host)) {
    addresses = [{ address: host, family: isIP(host) }];
  } else {
    try {
      addresses = await resolveAll(host);
    } catch (err) {
      return `The host ${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? 'DNS error'}).`;
    }
  }
  for (const a of addresses) {
    const reason = refusedAddressReason(a.address, policy);
    if (reason) return `The host ${host} resolves to a refused address: ${reason}.`;
  }
  return null;
}

/** Thrown (as a connection error) when a delivery's host resolves to a refused address. */
export class RefusedAddressError extends Error {
  readonly code = 'EREFUSEDADDRESS';
}

/** A `lookup` for http(s).request that refuses private / link-local / metadata (and, by policy, loopback) targets. */
export function guardedLookup(policy: UrlPolicy): LookupFunction {
  return ((hostname: string, options: unknown, callback: (...args: unknown[]) => void) => {
    const opts = (typeof options === 'object' && options ? options : {}) as { all?: boolean };
    resolveAll(hostname).then(
      (addresses) => {
        for (const a of addresses) {
          const reason = refusedAddressReason(a.address, policy);
          if (reason) return callback(new RefusedAddressError(`Refused to connect to ${hostname}: ${reason}`));
        }
        if (opts.all) callback(null, addresses);
        else callback(null, addresses[0].address, addresses[0].family);
      },
      (err) => callback(err),
    );
  }) as LookupFunction;
}
