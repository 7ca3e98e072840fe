import { createPrivateKey, X509Certificate } from 'node:crypto';
import { BlockList, isIP, isIPv4 } from 'node:net';
import type { FieldError } from '../../schemas/validator';
import type { LabCatalogue } from './catalogue';

/**
 * A lab account: an organisation's contract with one laboratory of the catalogue (`lab_accounts`, per environment
 * and region), and how this deployment talks to that lab over HL7 v2 / MLLP. Orders of a lab test that names an
 * account go to that lab (parts C/D); results are taken only from the addresses or client certificates it lists.
 * The TLS private key is sealed at rest (lab-accounts-store.ts) and never leaves through the API.
 */

export type LabProfile = 'LOI_2.5.1' | 'ORM_2.3';
export const LAB_PROFILES = ['LOI_2.5.1', 'ORM_2.3'] as const;
export const ACK_MODES = ['original', 'enhanced'] as const;
/** HL7 table 0211 names the renderer can encode (lib/labs/hl7/charsets.ts maps them to iconv-lite encodings). */
export const LAB_CHARSETS = ['ASCII', '8859/1', 'UNICODE UTF-8'] as const;
export const LABEL_PLACEMENTS = ['in_requisition', 'separate_sheet'] as const;

export const LAB_ACCOUNT_DEFAULTS = {
  ack_mode: 'original',
  charset: 'UNICODE UTF-8',
  labels: 'separate_sheet',
  ack_timeout_ms: 30_000,
  bill_types: ['client_bill'],
} as const;

export interface LabAccountTls {
  ca: string | null;
  cert: string | null;
  /** Sealed at rest; never returned (the API shows `has_key`). */
  key: string | null;
}

export interface LabAccountDoc {
  /** A time-ordered uuid (lists come back in creation order). */
  _id: string;
  org_id: string;
  environment: string;
  region: string;
  /** A lab of the catalogue (GET /v3/lab_tests/labs); fixed for the account's life (its tests and orders name it). */
  lab_slug: string;
  lab_id: number;
  name: string;
  /** The client account at the lab (printed on requisitions and labels). */
  account_number: string;
  mllp: { host: string; port: number; tls: LabAccountTls | null };
  msh: { sending_application: string; sending_facility: string; receiving_application: string; receiving_facility: string };
  profile: LabProfile;
  ack_mode: 'original' | 'enhanced';
  charset: string;
  /** Who may deliver results: IPv4/IPv6 addresses or CIDRs, or `sha256:<hex>` client-certificate fingerprints. */
  results_from: string[];
  /** Key: catalogue marker id (as a string); the lab's own order code for it, and its LOINC if the lab gives one. */
  order_codes: Record<string, { code: string; loinc?: string | null }>;
  /** Billing types the lab takes: client_bill | commercial_insurance | patient_bill | patient_bill_passthrough. */
  bill_types: string[];
  /** Where specimen labels print (Labcorp: inside the requisition). */
  labels: 'in_requisition' | 'separate_sheet';
  /** No ACK by then: the same message is sent again. */
  ack_timeout_ms: number;
  created_at: Date;
  updated_at: Date;
}

/** What an operator sets (POST and PATCH bodies after defaults): everything but ids, the lab's id and times. */
export type LabAccountSettings = Omit<LabAccountDoc, '_id' | 'org_id' | 'environment' | 'region' | 'lab_id' | 'created_at' | 'updated_at'>;

const FINGERPRINT = /^sha256:[0-9a-f]{64}$/;

/** A client-certificate fingerprint as accounts hold them (`sha256:` + 64 lowercase hex digits). */
export const isCertificateFingerprint = (value: string) => FINGERPRINT.test(value);

/** An IPv4/IPv6 address or CIDR block (`10.0.0.0/8`, `2001:db8::/32`), as `results_from` takes them. */
export function parseAddressOrCidr(value: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | null {
  const [address, prefixText, ...rest] = value.split('/');
  const version = isIP(address);
  if (!version || rest.length) return null;
  const max = version === 4 ? 32 : 128;
  if (prefixText === undefined) return { address, prefix: max, family: version === 4 ? 'ipv4' : 'ipv6' };
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > max) return null;
  return { address, prefix: Number(prefixText), family: version === 4 ? 'ipv4' : 'ipv6' };
}

/** Whether a results sender may deliver for this account: its address in a listed block, or its certificate listed. */
export function allowsResultsFrom(
  account: Pick<LabAccountDoc, 'results_from'>,
  peer: { remoteAddress: string; certificateFingerprint256: string | null },
): boolean {
  const blocks = new BlockList();
  for (const entry of account.results_from) {
    if (peer.certificateFingerprint256 && entry === peer.certificateFingerprint256.toLowerCase()) return true;
    const parsed = parseAddressOrCidr(entry);
    if (parsed) blocks.addSubnet(parsed.address, parsed.prefix, parsed.family);
  }
  // An IPv4 peer on a dual-stack socket shows as ::ffff:a.b.c.d.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(peer.remoteAddress)?.[1];
  const address = mapped ?? peer.remoteAddress;
  if (!isIP(address)) return false;
  return blocks.check(address, isIPv4(address) ? 'ipv4' : 'ipv6');
}

/** The markers of `markerIds` the account has no order code for (a test needing them cannot be ordered through it). */
export const uncoveredMarkers = (account: Pick<LabAccountDoc, 'order_codes'>, markerIds: number[]) =>
  markerIds.filter((id) => !account.order_codes[String(id)]);

/**
 * Rules of a lab account beyond its JSON Schema, as field-located errors (`at`: where the settings sit in the
 * request, e.g. ['body']): the lab exists, order codes are that lab's markers, result senders are addresses,
 * blocks or fingerprints, and the TLS material parses (the key belongs to the certificate).
 */
export function labAccountProblems(settings: LabAccountSettings, catalogue: LabCatalogue, at: (string | number)[] = ['body']): FieldError[] {
  const errors: FieldError[] = [];
  const lab = catalogue.labBySlug(settings.lab_slug);
  if (!lab) {
    errors.push({
      loc: [...at, 'lab_slug'],
      msg: `Unknown lab '${settings.lab_slug}'. List labs with GET /v3/lab_tests/labs (${catalogue.labs.map((l) => l.slug).join(', ')}).`,
      type: 'value_error.lab',
    });
  }
  for (const key of Object.keys(settings.order_codes)) {
    const marker = /^\d{1,10}$/.test(key) ? catalogue.markerById(Number(key)) : undefined;
    if (!marker) {
      errors.push({ loc: [...at, 'order_codes', key], msg: `'${key}' is not a marker id (GET /v3/lab_tests/markers).`, type: 'value_error.marker' });
    } else if (lab && marker.lab_id !== lab.id) {
      errors.push({
        loc: [...at, 'order_codes', key],
        msg: `Marker ${key} (${marker.slug}) belongs to lab ${marker.lab_id}, not ${lab.name} (lab ${lab.id}).`,
        type: 'value_error.marker_lab',
      });
    }
  }
  settings.results_from.forEach((entry, i) => {
    if (!isCertificateFingerprint(entry) && !parseAddressOrCidr(entry)) {
      errors.push({
        loc: [...at, 'results_from', i],
        msg: `'${entry}' is neither an IP address, a CIDR block (e.g. 203.0.113.0/24) nor a certificate fingerprint (sha256:<64 lowercase hex digits>).`,
        type: 'value_error.results_from',
      });
    }
  });
  const tls = settings.mllp.tls;
  if (tls) errors.push(...tlsProblems(tls, [...at, 'mllp', 'tls']));
  return errors;
}

function tlsProblems(tls: LabAccountTls, at: (string | number)[]): FieldError[] {
  const errors: FieldError[] = [];
  const parse = <T>(field: 'ca' | 'cert' | 'key', value: string, read: (pem: string) => T): T | null => {
    try {
      return read(value);
    } catch (err) {
      errors.push({
        loc: [...at, field],
        msg: `Not a PEM ${field === 'key' ? 'private key' : 'certificate'}: ${(err as Error).message}`,
        type: 'value_error.pem',
      });
      return null;
    }
  };
  if (tls.ca) parse('ca', tls.ca, (pem) => new X509Certificate(pem));
  const cert = tls.cert ? parse('cert', tls.cert, (pem) => new X509Certificate(pem)) : null;
  const key = tls.key ? parse('key', tls.key, (pem) => createPrivateKey(pem)) : null;
  if (Boolean(tls.cert) !== Boolean(tls.key)) {
    errors.push({
      loc: [...at, tls.cert ? 'key' : 'cert'],
      msg: 'A client certificate needs its private key, and a key its certificate (give both, or neither for server-only TLS).',
      type: 'value_error.tls_pair',
    });
  } else if (cert && key && !cert.checkPrivateKey(key)) {
    errors.push({ loc: [...at, 'key'], msg: 'The private key does not belong to the certificate.', type: 'value_error.tls_pair' });
  }
  return errors;
}
