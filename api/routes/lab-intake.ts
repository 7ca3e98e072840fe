import { defineRoute, type Reply } from '../route';
import { readTextBody } from '../middleware/body';
import { receiveHl7Results } from '../../lib/labs/hl7-intake';

const HL7 = 'application/hl7-v2';
const ack = (description: string) => ({ description, contentType: HL7 });

export const labIntakeRoutes = [
  defineRoute({
    operationId: 'receiveHl7Results',
    method: 'post',
    path: '/v3/lab/intake/hl7',
    summary: 'Receive lab results (HL7 v2 ORU^R01)',
    description:
      'For laboratories: one ORU^R01 message per order, as `application/hl7-v2` (or `text/plain`); MLLP framing and any line ' +
      'ending are tolerated. The order is the one whose id is OBR-2 (placer order number, printed on the requisition); an SPM-2 ' +
      "specimen id must be its sample id. OBX-3 is matched to the order's markers by LOINC (coding system LN) or the lab's own " +
      "code (the marker's provider_id); OBX-5/6/7/8/11/14 give value, units, reference range, abnormal flags (H, L, HH, LL, A, AA, N), " +
      "status (F final, C corrected, P preliminary, X not obtained) and time. The results reach the order as the sandbox lab's do: " +
      'completed (or partial_results, or corrected: a correction may follow a completed order), with labtest.result.critical for ' +
      "critical values. The answer is always an HL7 ACK: `MSA|AA` (200) once the order's workflow has the results; `MSA|AR` (400) " +
      'for a malformed message or one that is not ORU^R01; `MSA|AE` for an unknown order (404), a message the order cannot take ' +
      '(409: its status, a reused or in-progress control id) or results that do not fit its tests (422); MSA-3 and ERR-8 say why, ' +
      "and the org's audit log records each refusal (`lab_intake.hl7.refused`). A message resent with the same MSH-10 is applied " +
      'once and answered with the first ACK (for IDEMPOTENCY_KEY_RETENTION_SECONDS). Authenticate with a team API key minted for the lab.',
    tags: ['Lab intake'],
    auth: 'team',
    textBody: { contentTypes: [HL7, 'text/plain'], description: 'An HL7 v2 ORU^R01 message (ER7 encoding).' },
    responses: {
      200: ack('MSA|AA: the results were handed to the order (or the message was already, for a resend)'),
      400: ack('MSA|AR: a malformed message, or not ORU^R01'),
      404: ack('MSA|AE: no order of this team has the OBR-2 placer order number'),
      409: ack('MSA|AE: the order cannot take results in its status; the control id was used for another message, or is being applied'),
      413: { description: 'Request body too large' },
      422: ack('MSA|AE: the observations do not fit the order (unknown code, other units, a specimen id of another sample)'),
    },
    async handler({ deps, auth, ctx, requestId, log }) {
      const text = await readTextBody(ctx, deps.config.BODY_LIMIT_BYTES);
      const keyHeader = ctx.get('x-service-api-key') ? 'x-service-api-key' : 'x-vital-api-key';
      const outcome = await receiveHl7Results({ deps, auth, requestId, log, keyHeader }, text);
      const reply: Reply = { status: outcome.status, body: outcome.ack, contentType: HL7, headers: outcome.replayed ? { 'Idempotent-Replayed': 'true' } : {} };
      return reply;
    },
  }),
];
