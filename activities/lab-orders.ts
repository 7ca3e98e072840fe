import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure } from '@temporalio/activity';
import { publishEvent, type EventPublisher, type PublisherDeps } from '../lib/events/publisher';
import { interpretReport } from '../lib/labs/interpretation';
import { OrderViews, type OrderViewDeps } from '../lib/labs/order-view';
import type { LabOrderDoc, LabResultsDoc, OrderEventDoc } from '../lib/labs/model';
import { isoWithOffset } from '../lib/platform/time';
import { crashPoint } from '../lib/platform/failpoints';
import { highLevelOf } from '../lib/labs/statuses';
import type { SimulationRequest } from '../workflows/lab-order';
import { ORDER_NEVER_STORED } from '../lib/labs/order-workflow-terms';
import type { LabAdapter } from '../lib/labs/lab-adapter';
import { Coalescer } from '../lib/platform/coalescer';

export type LabOrderActivityDeps = PublisherDeps & { publisher: EventPublisher } & OrderViewDeps & { lab: LabAdapter };

/** Orders (or users) read in one query at most. */
const READ_BATCH = 200;

/** Idempotency key of an order's status event: one publish per event id, whatever retries happen. */
const eventKey = (orderId: string, eventId: number) => `lab-order:${orderId}:event:${eventId}`;

/**
 * Side effects of the lab order workflow. Each writes the order only on behalf of its workflow (the single
 * owner, which runs them one at a time) and is safe to repeat: events are keyed by id, publishes by
 * idempotency key, results by order id.
 */
export function createLabOrderActivities(deps: LabOrderActivityDeps) {
  const orders = deps.repos.labOrders;
  const views = new OrderViews(deps);
  // Under load the first steps of many orders run at once in this worker (a local activity per workflow): their reads
  // of the order and of its user go out as one query per flush instead of a round trip each.
  const orderReads = new Coalescer<string, LabOrderDoc | null>(
    async (ids) => {
      const found = new Map((await orders.findByIds([...new Set(ids)])).map((d) => [d._id, d]));
      return ids.map((id) => found.get(id) ?? null);
    },
    READ_BATCH,
    2,
  );
  const clientUserIds = new Coalescer<{ teamId: string; userId: string }, string | null>(
    async (keys) => {
      const found = new Map((await deps.repos.users.findByIds([...new Set(keys.map((k) => k.userId))])).map((u) => [u._id, u]));
      return keys.map(({ teamId, userId }) => {
        const user = found.get(userId);
        return user && user.team_id === teamId ? (user.client_user_id ?? null) : null;
      });
    },
    READ_BATCH,
    2,
  );

  /**
   * The order's document. The api inserts it right after starting the workflow, so the first look may come
   * too early: look again briefly, then fail the attempt (Temporal retries). Past `storedBy` (epoch ms) the
   * request that started the workflow evidently failed before storing it: give up for good.
   */
  async function load(orderId: string, storedBy?: number): Promise<LabOrderDoc> {
    for (const pauseMs of [25, 50, 100, 200, 400, 800]) {
      const [doc] = await orderReads.add([orderId]);
      if (doc) return doc;
      await sleep(pauseMs);
    }
    if (storedBy !== undefined && Date.now() > storedBy) {
      throw ApplicationFailure.nonRetryable(`Order ${orderId} was never stored`, ORDER_NEVER_STORED);
    }
    throw ApplicationFailure.retryable(`Order ${orderId} is not stored (yet)`, 'OrderNotFound');
  }

  /** The envelope's client_user_id: the user's current one (read once per activity). */
  async function clientUserIdOf(doc: LabOrderDoc): Promise<string | null> {
    const [clientUserId] = await clientUserIds.add([{ teamId: doc.team_id, userId: doc.user_id }]);
    return clientUserId;
  }

  async function publishStatus(doc: LabOrderDoc, eventId: number, clientUserId: string | null): Promise<void> {
    await publishEvent(deps, {
      teamId: doc.team_id,
      eventType: eventId === 1 ? 'labtest.order.created' : 'labtest.order.updated',
      data: await views.present(doc, { uptoEventId: eventId }),
      userId: doc.user_id,
      clientUserId,
      idempotencyKey: eventKey(doc._id, eventId),
    });
  }

  /** Results as the lab reports them, interpreted by our rules (and never rated below the lab's own flag). */
  async function storeResults(doc: LabOrderDoc, simulation: SimulationRequest, status: LabResultsDoc['status']) {
    const report = await deps.lab.fetchResults(doc, {
      interpretation: simulation.interpretation,
      hasMissingResults: simulation.hasMissingResults,
      status,
      reportId: simulation.reportId,
    });
    const { results, interpretation } = interpretReport(report, (id) => deps.labCatalogue.markerById(id));
    const now = new Date();
    const kept = await orders.saveResults({
      _id: doc._id,
      team_id: doc.team_id,
      user_id: doc.user_id,
      status,
      interpretation,
      date_collected: report.dateCollected,
      date_received: report.dateReceived,
      date_reported: now,
      results,
      missing_results: report.missing,
      sample_information: report.sampleInformation,
      lab_pdf: report.labPdf ?? null,
      report_id: simulation.reportId ?? null,
      created_at: now,
      updated_at: now,
    });
    // Null: the order's patient data was erased meanwhile (the results are not kept).
    return kept ? { interpretation, has_missing_results: report.missing.length > 0 } : null;
  }

  /** The lab's answer to a dispatch, as order fields (the adapter is idempotent by order id). */
  async function sendToLab(doc: LabOrderDoc): Promise<Partial<LabOrderDoc>> {
    const { labReference, shipment } = await deps.lab.dispatchOrder(doc);
    return { lab_reference: labReference, shipment, dispatched_at: new Date() };
  }

  return {
    /** Publishes the webhook of an event already stored (the api stores an order with its first events). */
    async publishOrderEvent({ orderId, eventId, storedBy }: { orderId: string; eventId: number; storedBy?: number }): Promise<void> {
      const doc = await load(orderId, storedBy);
      if (doc.patient_data_erased_at) return; // nothing more is said about an erased order
      await publishStatus(doc, eventId, await clientUserIdOf(doc));
    },

    /** Appends status event `eventId` (once) with the results that come with it, then publishes it. */
    async recordOrderEvent(input: {
      orderId: string;
      eventId: number;
      status: string;
      statusDetail: string | null;
      /** A real lab's own words on the event (e.g. its ERR text when it refused the order). */
      detail?: string;
      results?: SimulationRequest;
      /** Send the order to the lab first (its reference is stored with the event). */
      dispatch?: boolean;
      /** A real lab accepted the order (activities/lab-messages.ts) under this reference: stored with the event. */
      labReference?: string;
      /** Events already stored whose webhooks go out first (an order announced and dispatched in one step). */
      announce?: number[];
      /** The first write of a run: give up if the order is still not stored by then (epoch ms). */
      storedBy?: number;
    }): Promise<void> {
      let doc = await load(input.orderId, input.storedBy);
      // An erased order takes no results, events or publishes again (a late result, a correction after erasure).
      if (doc.patient_data_erased_at) return;
      const clientUserId = await clientUserIdOf(doc);
      for (const eventId of input.announce ?? []) await publishStatus(doc, eventId, clientUserId);
      const [, , low] = input.status.split('.');
      if (!doc.events.some((e) => e.id === input.eventId)) {
        let changes: Partial<LabOrderDoc> = {};
        if (input.dispatch) changes = await sendToLab(doc);
        if (input.labReference) changes = { lab_reference: input.labReference, dispatched_at: new Date() };
        if (input.results) {
          const status = low === 'partial_results' ? 'partial' : low === 'corrected' ? 'corrected' : 'final';
          const stored = await storeResults(doc, input.results, status);
          if (!stored) return;
          changes = stored;
        }
        const event: OrderEventDoc = { id: input.eventId, created_at: new Date(), status: input.status, status_detail: input.statusDetail };
        if (input.detail) event.detail = input.detail;
        const appended = await orders.appendEvent(doc, event, highLevelOf(doc.method, low), low, changes);
        if (!appended) return;
        doc = appended;
        // Stored, not yet reported to the workflow: test/lab-orders-crash.test.ts kills the worker here.
        crashPoint('lab-order.event-recorded');
      }
      await publishStatus(doc, input.eventId, clientUserId);
    },

    async setOrderActivateBy({ orderId, activateBy }: { orderId: string; activateBy: string | null }): Promise<void> {
      await orders.setFields(orderId, { activate_by: activateBy });
    },

    /**
     * Sends a registered kit's order to the lab (once: a dispatched order keeps its lab reference). A real lab has
     * been sent it already (activities/lab-messages.ts): its reference is stored.
     */
    async dispatchOrderToLab({ orderId, labReference }: { orderId: string; labReference?: string }): Promise<void> {
      const doc = await load(orderId);
      if (doc.lab_reference) return;
      await orders.setFields(orderId, labReference ? { lab_reference: labReference, dispatched_at: new Date() } : await sendToLab(doc));
    },

    async cancelOrderAtLab({ orderId }: { orderId: string }): Promise<void> {
      const doc = await load(orderId);
      if (doc.lab_reference) await deps.lab.cancelOrder(doc);
    },

    async publishCriticalResult({ orderId }: { orderId: string }): Promise<void> {
      const doc = await load(orderId);
      if (doc.patient_data_erased_at) return;
      const results = await orders.findResults(doc.team_id, orderId);
      if (results?.interpretation !== 'critical') return;
      await publishEvent(deps, {
        teamId: doc.team_id,
        eventType: 'labtest.result.critical',
        data: {
          order_id: doc._id,
          sample_id: doc.sample_id,
          status: results.status,
          interpretation: results.interpretation,
          team_id: doc.team_id,
          user_id: doc.user_id,
          created_at: isoWithOffset(results.created_at),
          updated_at: isoWithOffset(results.updated_at),
        },
        userId: doc.user_id,
        clientUserId: await clientUserIdOf(doc),
        idempotencyKey: `lab-order:${orderId}:critical:${results.status}`,
      });
    },

    async eraseOrderPatientData({ orderId }: { orderId: string }): Promise<void> {
      await orders.erasePatientData(orderId);
      await deps.repos.labOutbound.eraseForOrder(orderId); // the messages sent to a lab carried the patient data
    },
  };
}

export type LabOrderActivities = ReturnType<typeof createLabOrderActivities>;
