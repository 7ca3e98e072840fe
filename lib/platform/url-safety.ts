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
  /** 127.0.0.0/8 and ::1 accepted: only with WEBHOOK_ALLOW_LOOPBACK (the dev and test stacks set it). */
  allowLoopback: boolean;
  /** `host:port` entries accepted whatever they resolve to. */
  allowlist: string[];
  /** Private subnets accepted (pipelines' brokers inside the customer's network); cloud metadata stays refused. */
  allowedSubnets?: BlockList;
}

export function urlPolicyFromConfig(config: { DEPLOYMENT_ENVIRONMENT: string; WEBHOOK_ALLOW_LOOPBACK?: boolean; WEBHOOK_URL_ALLOWLIST: string }): UrlPolicy {
  const production = config.DEPLOYMENT_ENVIRONMENT === 'production';
  return {
    requireHttps: production,
    // Never by environment alone: a sandbox reachable from outside would let anyone make the service call its own host.
    allowLoopback: config.WEBHOOK_ALLOW_LOOPBACK ?? false,
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

/** Local-use NAT64 (RFC 8215): translated by a network's own gateway, never public. */
const localNat64 = new BlockList();
localNat64.addSubnet('64:ff9b:1::', 48, 'ipv6');

/** The eight 16-bit groups of an IPv6 address (with or without a dotted IPv4 tail), or null. */
export function ipv6Groups(address: string): number[] | null {
  if (isIP(address) !== 6) return null;
  let text = address.toLowerCase().replace(/%.*$/, '');
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number);
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, null];
  const parse = (part: string) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  const right = tail === null ? [] : parse(tail);
  const groups = tail === null ? left : [...left, ...Array(8 - left.length - right.length).fill(0), ...right];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

const ipv4Of = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;

/**
 * IPv4 addresses an IPv6 address carries, by its prefix: IPv4-mapped `::ffff:0:0/96`, IPv4-translated
 * `::ffff:0:0:0/96`, IPv4-compatible `::/96`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16` and Teredo
 * `2001::/32` (server, and the client address stored inverted). A NAT64 gateway, a 6to4 relay or a Teredo
 * relay would take a connection to such an address to the IPv4 address inside it, so that is the one checked.
 */
export function embeddedIpv4(address: string): string[] {
  const g = ipv6Groups(address);
  if (!g) return [];
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && g[5] === 0xffff) return [ipv4Of(g[6], g[7])];
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return [ipv4Of(g[6], g[7])];
  if (zeros(0, 6)) return [ipv4Of(g[6], g[7])];
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return [ipv4Of(g[6], g[7])];
  if (g[0] === 0x2002) return [ipv4Of(g[1], g[2])];
  if (g[0] === 0x2001 && g[1] === 0) return [ipv4Of(g[2], g[3]), ipv4Of(g[6] ^ 0xffff, g[7] ^ 0xffff)];
  return [];
}

/** Why this address may not be a webhook target (or broker), or null if it may. */
export function refusedAddressReason(address: string, policy: Pick<UrlPolicy, 'allowLoopback' | 'allowedSubnets'>): string | null {
  const family: 'ipv4' | 'ipv6' = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  if (policy.allowedSubnets?.check(address, family) && !metadata.check(address, family)) return null;
  if (family === 'ipv6') {
    // `::` and `::1` first: inside ::/96 they would read as 0.0.0.0 and 0.0.0.1.
    if (ipv6Groups(address)?.every((x) => x === 0)) return `${address} is not a public unicast address`;
    if (loopback.check(address, 'ipv6')) return policy.allowLoopback ? null : `${address} is a loopback address`;
    if (localNat64.check(address, 'ipv6')) return `${address} is a local-use NAT64 address, not a public unicast address`;
    for (const v4 of embeddedIpv4(address)) {
      const reason = refusedAddressReason(v4, policy);
      if (reason) return `${address} embeds ${v4}: ${reason}`;
    }
  }
  if (metadata.check(address, family)) return `${address} is a cloud metadata address`;
  if (loopback.check(address, family)) return policy.allowLoopback ? null : `${address} is a loopback address`;
  if (linkLocal.check(address, family)) return `${address} is a link-local address`;
  if (privateNets.check(address, family)) return `${address} is a private network address`;
  if (notRoutable.check(address, family)) return `${address} is not a public unicast address`;
  return null;
}

const defaultPort = (u: URL) => u.port || (u.protocol === 'https:' ? '443' : '80');
const bareHost = (u: URL) => u.hostname.replace(/^\[|\]$/g, '').toLowerCase();

export function isAllowlisted(url: URL, policy: UrlPolicy): boolean {
  return policy.allowlist.includes(`${bareHost(url)}:${defaultPort(url)}`);
}

function resolveAll(host: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))));
}

/**
 * The URL as deliveries will call it (WHATWG URL serialisation: lower-case scheme and host, IPv4 in dotted
 * form, default port dropped, dot segments resolved, characters percent-encoded), or why it is refused.
 * Spellings that different URL parsers read differently are refused rather than silently rewritten:
 * whitespace or control characters (WHATWG drops tabs and newlines), backslashes (WHATWG reads them as
 * `/`), any `@` before the path (credentials, even empty: `http://a@b` goes to b), and fragments (never sent).
 */
export function normalizeWebhookUrl(raw: string): { url: string } | { reason: string } {
  if (/[\u0000-\u0020\u007f]/.test(raw))
    return { reason: 'The URL contains whitespace or control characters (a space, tab or newline); percent-encode or remove them.' };
  if (raw.includes('\\')) return { reason: 'The URL contains a backslash, which URL parsers read differently; use / or %5C.' };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { reason: 'The URL is not a valid absolute URL.' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { reason: `The URL scheme must be https (got ${url.protocol.replace(':', '')}).` };
  const authority = /^[a-z][a-z0-9+.-]*:\/*([^/?#]*)/i.exec(raw)?.[1] ?? '';
  if (url.username || url.password || authority.includes('@')) {
    return { reason: "The URL must not carry credentials (an '@' before the path); send them in custom headers instead." };
  }
  if (raw.includes('#')) return { reason: 'The URL has a fragment (#...), which is never sent in a request; remove it.' };
  if (url.href.length > 2048) return { reason: 'The URL is longer than 2048 characters once normalised.' };
  return { url: url.href };
}

/**
 * Checks scheme, credentials and every address the host resolves to. Returns the normalised URL (what is
 * stored and called), or the reason it is refused.
 */
export async function checkAndNormalizeWebhookUrl(raw: string, policy: UrlPolicy): Promise<{ url: string } | { reason: string }> {
  const normalized = normalizeWebhookUrl(raw);
  if ('reason' in normalized) return normalized;
  const reason = await checkAddresses(new URL(normalized.url), policy);
  return reason ? { reason } : normalized;
}

/** Checks scheme, credentials and every address the host resolves to. Returns a reason when refused. */
export async function checkWebhookUrl(raw: string, policy: UrlPolicy): Promise<string | null> {
  const checked = await checkAndNormalizeWebhookUrl(raw, policy);
  return 'reason' in checked ? checked.reason : null;
}

async function checkAddresses(url: URL, policy: UrlPolicy): Promise<string | null> {
  if (policy.requireHttps && url.protocol !== 'https:') return 'Webhook URLs must use https in production.';
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

/**
 * The address rules for a pipeline's brokers: the webhook rules (loopback by WEBHOOK_ALLOW_LOOPBACK; private,
 * link-local, metadata and reserved addresses refused), TLS instead of https in production, and
 * PIPELINE_BROKER_ALLOWLIST: `host:port` entries and CIDR subnets (brokers usually live inside the customer's
 * network) accepted whatever they are. Cloud metadata addresses are refused even inside an allowed subnet.
 */
export function brokerPolicyFromConfig(config: Parameters<typeof urlPolicyFromConfig>[0] & { PIPELINE_BROKER_ALLOWLIST: string }): UrlPolicy {
  const allowedSubnets = new BlockList();
  const allowlist: string[] = [];
  for (const entry of config.PIPELINE_BROKER_ALLOWLIST.split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean)) {
    const cidr = /^(.+)\/(\d{1,3})$/.exec(entry);
    if (cidr && isIP(cidr[1])) allowedSubnets.addSubnet(cidr[1], Number(cidr[2]), isIP(cidr[1]) === 6 ? 'ipv6' : 'ipv4');
    else allowlist.push(entry);
  }
  return { ...urlPolicyFromConfig({ ...config, WEBHOOK_URL_ALLOWLIST: '' }), allowlist, allowedSubnets };
}

/** Whether a broker at `host:port` may be used (its addresses as resolved now), or why not. */
export async function checkBrokerAddress(host: string, port: number, policy: UrlPolicy): Promise<string | null> {
  const bare = host.replace(/^\[|\]$/g, '');
  let url: URL;
  try {
    url = new URL(`http://${isIP(bare) === 6 ? `[${bare}]` : bare}:${port}/`);
  } catch {
    return `${host}:${port} is not a valid host and port.`;
  }
  return checkAddresses(url, { ...policy, requireHttps: false });
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
