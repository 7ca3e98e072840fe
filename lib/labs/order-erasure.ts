import type { Repositories } from '../repositories';
import { isWorkflowGone, type TemporalDeps } from '../platform/temporal';
import { workflowIds } from '../../workflows/ids';
import { erasePatientDataUpdate } from '../../workflows/lab-order';

/**
 * Erases the patient data of a user's orders (user deletion). A running order's workflow owns its document,
 * so it erases its own order and stops (no more events about an erased user); an ended order has no other
 * writer and is erased here.
 */
export async function eraseUserOrders(deps: { repos: Repositories; temporal: TemporalDeps }, teamId: string, userId: string): Promise<number> {
  const orders = await deps.repos.labOrders.ordersOfUser(teamId, userId);
  for (const order of orders) {
    try {
      await deps.temporal.client.workflow.getHandle(workflowIds.labOrder(order._id)).executeUpdate(erasePatientDataUpdate);
    } catch (err) {
      if (!isWorkflowGone(err)) throw err;
      await deps.repos.labOrders.erasePatientData(order._id);
      await deps.repos.labOutbound.eraseForOrder(order._id);
    }
    // The lab's result messages about it (lib/labs/lab-inbound-store.ts), whichever way the order was erased.
    await deps.repos.labInbound.eraseForOrder(order._id);
  }
  return orders.length;
}
