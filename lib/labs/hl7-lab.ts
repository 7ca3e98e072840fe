import type { LabAdapter } from './lab-adapter';
import type { Hl7IntakeRepository } from './hl7-intake-store';
import type { LabInboundRepository } from './lab-inbound-store';

/** A report id of a message the MLLP listener stored (lib/labs/result-intake.ts), as opposed to an HTTP intake's. */
export const INBOUND_REPORT_PREFIX = 'inbound:';

/**
 * The deployment's laboratory with HL7 intake: results a lab sent (stored by the HTTP intake, or by the MLLP
 * listener's applier, as `reportId`) are read back as they came; everything else (dispatch, cancel, the sandbox's
 * simulated results) is `lab`'s.
 */
export function withHl7Intake(lab: LabAdapter, intake: Hl7IntakeRepository, inbound: LabInboundRepository): LabAdapter {
  return {
    name: lab.name,
    dispatchOrder: (order) => lab.dispatchOrder(order),
    cancelOrder: (order) => lab.cancelOrder(order),
    async fetchResults(order, request) {
      if (!request.reportId) return lab.fetchResults(order, request);
      if (request.reportId.startsWith(INBOUND_REPORT_PREFIX)) {
        const report = await inbound.findReport(request.reportId.slice(INBOUND_REPORT_PREFIX.length));
        if (!report) throw new Error(`Lab result report ${request.reportId} of order ${order._id} is not stored`);
        return report;
      }
      const message = await intake.find(request.reportId);
      // Kept for a day (the intake's retention); an order's workflow reads it within moments.
      if (!message) throw new Error(`HL7 result message ${request.reportId} of order ${order._id} holds no report`);
      return message.report;
    },
  };
}
