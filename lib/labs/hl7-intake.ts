import { createHash, randomUUID } from 'node:crypto';
import { ApiError } from '../platform/errors';
import { timeOrderedUuid } from '../platform/keys';
import type { Logger } from '../platform/logger';
import { acknowledgement, controlIdOf, Hl7Refusal, parseOru, unframe } from './hl7-oru';
import { intakeMessageId } from './hl7-intake-store';
import { applyPlan, matchOrders, OrderRefusedUpdate, planOrderUpdate } from './result-intake';
import type { LabOrderDeps } from './workflow-client';
import type { TeamPrincipal } from '../tenancy/principals';

/** The lab's answer: an HL7 ACK, with the HTTP status that says the same (200 AA; 400 AR; 404, 409, 422 AE). */
export interface Hl7IntakeOutcome {
  status: number;
  ackCode: 'AA' | 'AE' | 'AR';
  ack: string;
  replayed: boolean;
}

export interface IntakeContext {
  deps: LabOrderDeps;
  auth: TeamPrincipal;
  requestId: string;
  log: Logger;
  /** The header the key came in (the audit entry names it). */
  keyHeader: string;
}

/**
 * Receives one ORU^R01 from a team's lab: matches it to the order by OBR-2 (our placer number, printed on the
 * requisition; an older order's id), then OBR-3 (the lab's filler number), maps its OBX segments onto the order's markers, and feeds the results to the
 * order's workflow exactly as the sandbox lab's are fed (lib/labs/workflow-client.ts `feedLabResults`). Applied
 * once per MSH-10: a resend gets the first ACK again. Every refusal answers an ACK AE/AR naming the reason and
 * leaves an entry in the org's audit log (`lab_intake.hl7.refused`: the key, the control id, the reason).
 */
export async function receiveHl7Results(context: IntakeContext, raw: string): Promise<Hl7IntakeOutcome> {
  const { deps, auth } = context;
  const text = unframe(raw);
  let controlId = controlIdOf(text);
  try {
    const message = parseOru(text);
    controlId = message.controlId;
    const placers = [...new Set(message.requests.map((r) => r.placerOrderNumber))];
    if (placers.length > 1) throw new Hl7Refusal('AR', 400, `The message reports on several orders (${placers.join(', ')}); send one ORU^R01 per order.`);
    // The same path as the MLLP listener's (lib/labs/result-intake.ts): placer number (or an older order's id), then filler number.
    const { matched, erased } = await matchOrders(deps, message.requests, (o) => o.team_id === auth.teamId);
    // An order whose patient data was erased is answered as an unknown one (the refusal is audited like any other).
    for (const o of erased) context.log.info({ order_id: o._id }, 'HL7 results for an order whose patient data was erased: refused as unknown');
    const target = matched.length === 1 && matched[0].requests.length === message.requests.length ? matched[0] : null;
    if (!target) throw new Hl7Refusal('AE', 404, `Order '${placers[0]}' (OBR-2 placer order number) is not an order of this team.`);
    const order = target.order;
    const specimen = message.requests.map((r) => r.specimenId).find(Boolean);
    if (specimen && specimen !== order.sample_id) {
      throw new Hl7Refusal('AE', 422, `Specimen id '${specimen}' (SPM-2) is not the sample id of order ${order._id}.`);
    }
    const plan = planOrderUpdate(message, target, deps.labCatalogue);
    if (plan.kind !== 'results') {
      if (message.requests.some((r) => r.resultStatus === 'P' || r.observations.some((o) => o.status === 'P')))
        throw new Hl7Refusal('AE', 422, `A ${order.method} order takes no partial results; send them when final.`);
      throw new Hl7Refusal('AE', 422, 'This endpoint takes results; status messages (OBR-25 I or X without observations) come through the MLLP listener.');
    }
    const { report } = plan;

    const id = intakeMessageId(auth.teamId, controlId);
    const sha = createHash('sha256').update(text).digest('hex');
    const token = randomUUID();
    const now = new Date();
    const claim = await deps.repos.hl7Intake.claim({
      _id: id,
      team_id: auth.teamId,
      control_id: controlId,
      message_sha256: sha,
      order_id: order._id,
      state: 'pending',
      claim: token,
      claimed_at: now,
      report,
      ack: null,
      created_at: now,
      applied_at: null,
    });
    if ('existing' in claim) {
      const existing = claim.existing;
      if (existing.message_sha256 !== sha)
        throw new Hl7Refusal('AE', 409, `MSH-10 '${controlId}' was already used for a different message; a new message needs a new control id.`);
      if (existing.state === 'applied') return { status: 200, ackCode: 'AA', ack: existing.ack!, replayed: true };
      const inProgress = () => new Hl7Refusal('AE', 409, `Message '${controlId}' is still being applied; send it again shortly.`);
      // Unless the first delivery is still applying it (its lease is live), it stopped part-way: one resend takes it
      // over and applies it (the workflow takes the same message once, by its id).
      if (!(await deps.repos.hl7Intake.takeOver(id, token))) throw inProgress();
    }
    try {
      await applyPlan(deps, order, plan, id, `hl7:${id}`);
    } catch (err) {
      if (err instanceof OrderRefusedUpdate) throw new Hl7Refusal('AE', 409, `Order ${order._id} cannot take these results: ${err.message}`);
      if (err instanceof ApiError && err.status < 500) throw new Hl7Refusal('AE', 409, `Order ${order._id} cannot take these results: ${err.detail}`);
      throw err;
    }
    const ack = acknowledgement(text, 'AA');
    await deps.repos.hl7Intake.markApplied(id, token, ack);
    return { status: 200, ackCode: 'AA', ack, replayed: false };
  } catch (err) {
    if (!(err instanceof Hl7Refusal)) throw err;
    await recordRefusal(context, controlId, err);
    return { status: err.httpStatus, ackCode: err.ackCode, ack: acknowledgement(text, err.ackCode, err.reason), replayed: false };
  }
}

/** The refusal in the org's audit log: which key sent which message, and why it was refused. */
async function recordRefusal({ deps, auth, requestId, log, keyHeader }: IntakeContext, controlId: string, refusal: Hl7Refusal): Promise<void> {
  const now = new Date();
  await deps.repos.auditLog.begin([
    {
      _id: timeOrderedUuid(),
      org_id: auth.orgId,
      team_id: auth.teamId,
      action: 'lab_intake.hl7.refused',
      target: { type: 'hl7_message', id: controlId || '(no MSH-10)' },
      actor: { management_key_id: null, team_api_key_id: auth.keyId, header: keyHeader },
      request_id: requestId,
      status: 'failed',
      error: { status: refusal.httpStatus, detail: `${refusal.ackCode}: ${refusal.reason}` },
      changes: [],
      created_at: now,
      completed_at: now,
    },
  ]);
  log.warn({ control_id: controlId, ack_code: refusal.ackCode, reason: refusal.reason }, 'HL7 result message refused');
}
