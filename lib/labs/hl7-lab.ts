import type { LabAdapter } from './lab-adapter';
import type { Hl7IntakeRepository } from './hl7-intake-store';

/**
 * The deployment's laboratory with HL7 intake: results a lab sent (stored by the intake as `reportId`) are
 * read back as they came; everything else (dispatch, cancel, the sandbox's simulated results) is `lab`'s.
 */
export function withHl7Intake(lab: LabAdapter, intake: Hl7IntakeRepository): LabAdapter {
  return {
    name: lab.name,
    dispatchOrder: (order) => lab.dispatchOrder(order),
    cancelOrder: (order) => lab.cancelOrder(order),
    async fetchResults(order, request) {
      if (!request.reportId) return lab.fetchResults(order, request);
      const message = await intake.find(request.reportId);
      // Kept for a day (the intake's retention); an order's workflow reads it within moments.
      if (!message) throw new Error(`HL7 result message ${request.reportId} of order ${order._id} holds no report`);
      return message.report;
    },
  };
}
