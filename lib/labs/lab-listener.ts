import { readFileSync } from 'node:fs';
import type { Config } from '../platform/config';
import { timeOrderedUuid } from '../platform/keys';
import type { Logger } from '../platform/logger';
import type { TemporalDeps } from '../platform/temporal';
import type { Repositories } from '../repositories';
import iconv from 'iconv-lite';
import { decodeHl7Message, UnsupportedCharset } from './hl7/charsets';
import { acknowledgement, controlIdOf, Hl7Refusal, parseOru, unframe } from './hl7-oru';
import { buildAcknowledgement } from './hl7/acknowledgement';
import { allowsResultsFrom, type LabAccountDoc } from './lab-accounts';
import { contentHashOf, type LabInboundMessageDoc } from './lab-inbound-store';
import { labResultsSignaller } from './lab-results-client';
import { MllpServer, type MllpPeer } from './mllp/server';

/**
 * The api process's MLLP listener for lab results (LAB_MLLP_PORT): it admits only peers a lab account of this
 * deployment allows (`results_from`: an address, a CIDR, or a client certificate's `sha256:` fingerprint over TLS),
 * decodes each message by its MSH-18 or the account's character set, stores it (lib/labs/lab-inbound-store.ts), and
 * only then answers its ACK: AA once stored (a resend or a re-sent copy: AA again, applied once), AR for a message
 * that cannot be parsed at all (stored too, for the record). Applying it is the account's applier workflow's job
 * (workflows/lab-results.ts), told after the ACK; a worker that is down only delays it.
 */
export interface LabListenerDeps {
  config: Config;
  repos: Repositories;
  temporal: TemporalDeps;
  logger: Logger;
}

export interface LabListenerOptions {
  port: number;
  host?: string;
  /** PEM texts of the listener's certificate and key: TLS, with client certificates requested. */
  tls?: { cert: string; key: string } | null;
  /** How long the allow-list is kept (default ACCOUNT_CACHE_MS; tests that change an account's results_from use 0). */
  accountCacheMs?: number;
}

export interface LabListener {
  port: number;
  close(): Promise<void>;
}

/** How long the allow-list (every lab account's `results_from`) is kept before it is read again. */
export const ACCOUNT_CACHE_MS = 5_000;

/** `::ffff:10.0.0.1` (an IPv4 peer on a dual-stack socket) is 10.0.0.1. */
const plainAddress = (address: string) => address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');

/**
 * Of the accounts that allow the peer (several organisations may have accounts with the same lab, which sends from
 * the same addresses), the one the message names: its MSH-3/4 are the account's receiving application and facility
 * (the lab), its MSH-5/6 the account's sending ones (us). The best match wins; a tie goes to the oldest account.
 */
function accountOf(candidates: LabAccountDoc[], text: string): LabAccountDoc {
  // MSH-1 is the separator itself: MSH-n is fields[n - 1].
  const fields = text.split('\r')[0]?.split('|') ?? [];
  const component = (n: number) => (fields[n - 1] ?? '').split('^')[0];
  const score = (a: LabAccountDoc) =>
    Number(component(3) === a.msh.receiving_application) +
    Number(component(4) === a.msh.receiving_facility) +
    Number(component(5) === a.msh.sending_application) +
    Number(component(6) === a.msh.sending_facility);
  return [...candidates].sort((a, b) => score(b) - score(a) || a.created_at.getTime() - b.created_at.getTime())[0];
}

/**
 * The ACK of a message we stored (accepted) or could not parse (refused), in the message's encoding (it echoes the
 * message's MSH fields, in that character set). Original mode (MSH-15 empty, or NE as many LRI senders put it and
 * still wait for an answer): AA / AR. Enhanced mode (MSH-15 AL, SU or ER): the accept acknowledgement, CA / CR, which
 * says exactly what storing it means ("committed to safe storage"); an application acknowledgement a lab asks for in
 * MSH-16 is not sent (the lab's interface specifications ask results receivers for the accept one).
 */
function ackBytes(text: string, accepted: boolean, encoding: string, reason?: string): Buffer {
  const msh15 = (text.split('\r')[0]?.split('|')[14] ?? '').trim().toUpperCase();
  const enhanced = ['AL', 'SU', 'ER'].includes(msh15);
  const code = accepted ? (enhanced ? 'CA' : 'AA') : enhanced ? 'CR' : 'AR';
  return iconv.encode(buildAcknowledgement(text, code, accepted ? undefined : reason), encoding);
}

export async function startLabListener(deps: LabListenerDeps, options: LabListenerOptions): Promise<LabListener> {
  const { config, repos, logger } = deps;
  const log = logger.child({ component: 'lab-mllp-listener' });
  let cache: { at: number; accounts: Promise<LabAccountDoc[]> } | null = null;
  const accounts = (): Promise<LabAccountDoc[]> => {
    if (!cache || Date.now() - cache.at >= (options.accountCacheMs ?? ACCOUNT_CACHE_MS)) {
      const read = repos.labAccounts
        .listAll()
        .then((all) => all.filter((a) => a.environment === config.DEPLOYMENT_ENVIRONMENT && a.region === config.DEPLOYMENT_REGION));
      cache = { at: Date.now(), accounts: read };
      read.catch(() => {
        cache = null; // a failed read is not kept
      });
    }
    return cache.accounts;
  };
  const accountsFor = async (peer: MllpPeer) => (await accounts()).filter((a) => allowsResultsFrom(a, peer));

  const applierSignals = labResultsSignaller(deps.temporal, (err, accountId, messageIds) =>
    log.warn({ err, account_id: accountId, message_ids: messageIds }, 'could not tell the lab results applier; the stranded-work sweep will'),
  );

  async function receive(bytes: Buffer, peer: MllpPeer): Promise<Buffer | null> {
    const candidates = await accountsFor(peer);
    if (!candidates.length) {
      // Admitted, but its account was deleted (or changed) since: not taken.
      log.warn({ peer: peer.remoteAddress }, 'lab result from a peer no lab account allows any more: refused');
      return Buffer.from(acknowledgement(unframe(bytes.toString('latin1')), 'AR', 'No lab account takes results from this sender.'), 'latin1');
    }
    // Decoded by MSH-18, else by the account's character set (the first candidate's until the message names its account).
    const decode = (charset: string) => {
      try {
        const decoded = decodeHl7Message(bytes, charset);
        return { text: unframe(decoded.text), encoding: decoded.encoding, refusal: null };
      } catch (err) {
        if (!(err instanceof UnsupportedCharset)) throw err;
        return { text: unframe(bytes.toString('latin1')), encoding: 'latin1', refusal: new Hl7Refusal('AR', 400, err.message) };
      }
    };
    let decoded = decode(candidates[0].charset);
    let account = accountOf(candidates, decoded.text);
    if (account.charset !== candidates[0].charset) decoded = decode(account.charset);
    const { text, encoding } = decoded;

    let refusal: Hl7Refusal | null = decoded.refusal;
    let controlId: string | null = null;
    try {
      if (refusal) throw refusal;
      controlId = parseOru(text, { encoding }).controlId;
    } catch (err) {
      if (!(err instanceof Hl7Refusal)) throw err;
      refusal = err;
      controlId = controlIdOf(text) || null;
    }
    account = accountOf(candidates, text);
    const hash = contentHashOf(text);
    const now = new Date();
    const doc: LabInboundMessageDoc = {
      _id: timeOrderedUuid(now.getTime()),
      account_id: account._id,
      org_id: account.org_id,
      lab_slug: account.lab_slug,
      control_id: controlId,
      content_sha256: hash,
      control_key: `${account._id}\u0000${controlId ?? `sha:${hash}`}`,
      content_key: `${account._id}\u0000${hash}`,
      peer: { address: plainAddress(peer.remoteAddress), certificate: peer.certificateFingerprint256 },
      charset: encoding,
      raw: bytes.toString('base64'),
      text,
      state: refusal ? 'refused' : 'received',
      ack_code: refusal ? 'AR' : 'AA',
      detail: refusal?.reason ?? null,
      applied_to: [],
      duplicates: 0,
      received_at: now,
      settled_at: refusal ? now : null,
    };
    // Commit, then ACK: nothing is answered before the message is stored.
    const stored = await repos.labInbound.store(doc);
    const fields = { account_id: account._id, control_id: controlId, peer: doc.peer.address };
    if ('duplicate' in stored) {
      const first = stored.duplicate;
      log.info({ ...fields, first_message_id: first._id, state: first.state }, 'lab result resent: acknowledged again, applied once');
      // The ACK echoes this copy's control id; a copy of a refused message is refused again.
      return ackBytes(text, first.ack_code === 'AA', encoding, first.detail ?? undefined);
    }
    if (refusal) {
      log.warn({ ...fields, message_id: doc._id, reason: refusal.reason }, 'lab result message cannot be parsed: stored and answered AR');
      return ackBytes(text, false, encoding, refusal.reason);
    }
    log.info({ ...fields, message_id: doc._id }, 'lab result message stored');
    // After the ACK is on its way: a failure here leaves the message `received`, for the stranded-work sweep.
    setImmediate(() => applierSignals.tell(account._id, doc._id));
    return ackBytes(text, true, encoding);
  }

  const server = new MllpServer({
    port: options.port,
    host: options.host,
    tls: options.tls ?? null,
    log,
    async admit(peer) {
      const admitted = (await accountsFor(peer)).length > 0;
      if (!admitted)
        log.warn({ peer: peer.remoteAddress, certificate: peer.certificateFingerprint256 }, 'MLLP connection from a sender no lab account allows: refused');
      return admitted;
    },
    onMessage: receive,
  });
  const port = await server.listen();
  return {
    port,
    async close() {
      await server.close();
      // The signals of the messages just stored go before the Temporal connection closes (else the sweep sends them).
      await applierSignals.settled();
    },
  };
}

/** The listener's TLS material from LAB_MLLP_TLS_CERT / LAB_MLLP_TLS_KEY (file paths), or null without them. */
export function listenerTlsFrom(config: Pick<Config, 'LAB_MLLP_TLS_CERT' | 'LAB_MLLP_TLS_KEY'>): { cert: string; key: string } | null {
  if (!config.LAB_MLLP_TLS_CERT || !config.LAB_MLLP_TLS_KEY) return null;
  return { cert: readFileSync(config.LAB_MLLP_TLS_CERT, 'utf8'), key: readFileSync(config.LAB_MLLP_TLS_KEY, 'utf8') };
}
