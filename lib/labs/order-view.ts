import type { Config } from '../platform/config';
import { publicBaseUrl } from '../platform/config';
import type { LabCatalogue } from './catalogue';
import type { Repositories } from '../repositories';
import type { ListedOrder, TransactionMember } from './orders-store';
import type { AddressDoc, LabOrderDoc, OrderEventDoc } from './model';
import { isoWithOffset } from '../platform/time';
import { TERMINAL } from './statuses';
import { labTestView } from './catalogue-view';
import { DOCUMENT_URL_KEY, signedDocumentUrl } from './signed-urls';

/**
 * The one place an order document becomes the API's `ClientFacingOrder` (responses and webhook data alike).
 */
export interface OrderViewDeps {
  config: Config;
  repos: Repositories;
  labCatalogue: LabCatalogue;
}

const regionNames = new Intl.DisplayNames(['en'], { type: 'region' });

/** `US` → `United States` (responses show the long name; requests carry the code). */
export function countryName(code: string): string {
  try {
    return regionNames.of(code.toUpperCase()) ?? code;
  } catch {
    return code;
  }
}

const address = (a: AddressDoc | null) =>
  a && {
    receiver_name: a.receiver_name ?? '',
    first_line: a.first_line,
    second_line: a.second_line ?? '',
    city: a.city,
    state: a.state,
    zip: a.zip,
    country: countryName(a.country),
    phone_number: a.phone_number ?? '',
  };

const eventView = (e: OrderEventDoc) => ({
  id: e.id,
  created_at: isoWithOffset(e.created_at),
  status: e.status,
  status_detail: e.status_detail,
  ...(e.detail ? { detail: e.detail } : {}),
});

export const requisitionPath = (orderId: string) => `/v3/order/${orderId}/requisition/pdf/signed`;

/** `active` while any order of the transaction is still moving; else `cancelled` if all were, else `completed`. */
export function transactionStatus(orders: Pick<LabOrderDoc, 'low_level_status'>[]): 'active' | 'completed' | 'cancelled' {
  if (orders.some((o) => !TERMINAL.has(o.low_level_status))) return 'active';
  return orders.every((o) => o.low_level_status === 'cancelled') ? 'cancelled' : 'completed';
}

/** Only a redraw and its initial order share a transaction; every other order is alone in its own. */
const hasSiblings = (doc: ListedOrder) => doc.origin === 'redraw' || Boolean(doc.redraw_order_id);

export class OrderViews {
  constructor(private readonly deps: OrderViewDeps) {}

  /**
   * The order as the API shows it. `uptoEventId` renders the order as it was when that event happened
   * (webhooks of events the api recorded together, e.g. a registration's four statuses).
   */
  async present(doc: LabOrderDoc, opts: { uptoEventId?: number } = {}) {
    const siblings = hasSiblings(doc) ? await this.deps.repos.labOrders.transactionsOrders(doc.team_id, [doc.order_transaction_id]) : [];
    return this.render(doc, siblings, await this.deps.repos.secrets.key(DOCUMENT_URL_KEY), opts.uptoEventId);
  }

  /** A page of orders: their transactions are read in one query. */
  async presentAll(docs: ListedOrder[]) {
    if (!docs.length) return [];
    const teamId = docs[0].team_id;
    const shared = [...new Set(docs.filter(hasSiblings).map((d) => d.order_transaction_id))];
    const siblings = shared.length ? await this.deps.repos.labOrders.transactionsOrders(teamId, shared) : [];
    const key = await this.deps.repos.secrets.key(DOCUMENT_URL_KEY);
    return docs.map((d) =>
      this.render(
        d,
        siblings.filter((s) => s.order_transaction_id === d.order_transaction_id),
        key,
      ),
    );
  }

  render(doc: ListedOrder, siblings: TransactionMember[], urlKey: Buffer, uptoEventId?: number) {
    const { config, labCatalogue } = this.deps;
    const events = uptoEventId === undefined ? doc.events : doc.events.filter((e) => e.id <= uptoEventId);
    const last = events[events.length - 1];
    const [, , lowAtEvent] = last.status.split('.');
    const transactionOrders = (siblings.some((o) => o._id === doc._id) ? siblings : [...siblings, doc]).map((o) =>
      o._id === doc._id ? { ...o, low_level_status: lowAtEvent } : o,
    );
    const dispatched = events.some((e) => !e.status.endsWith('.ordered') && !e.status.endsWith('.awaiting_registration'));
    return {
      id: doc._id,
      team_id: doc.team_id,
      user_id: doc.user_id,
      patient_details: doc.patient_details ? { ...doc.patient_details } : null,
      patient_address: address(doc.patient_address),
      lab_test: labTestView(doc.lab_test, labCatalogue),
      details: {
        type: doc.method,
        data: {
          id: doc.details_id,
          shipment: doc.shipment && {
            ...doc.shipment,
            created_at: isoWithOffset(doc.shipment.created_at),
            updated_at: isoWithOffset(doc.shipment.updated_at),
          },
          appointment_id: null,
          created_at: isoWithOffset(doc.created_at),
          updated_at: isoWithOffset(doc.updated_at),
        },
      },
      sample_id: doc.sample_id,
      notes: doc.notes ?? '',
      clinical_notes: doc.clinical_notes,
      created_at: isoWithOffset(doc.created_at),
      updated_at: isoWithOffset(uptoEventId === undefined ? doc.updated_at : last.created_at),
      events: events.map(eventView),
      status: last.status.split('.')[0],
      last_event: eventView(last),
      physician: doc.physician,
      health_insurance_id: doc.health_insurance_id,
      requisition_form_url: dispatched ? signedDocumentUrl(publicBaseUrl(config), requisitionPath(doc._id), urlKey, config.REQUISITION_URL_TTL_SECONDS) : null,
      priority: doc.priority,
      shipping_details: address(doc.shipping_details),
      activate_by: doc.activate_by,
      passthrough: doc.passthrough ?? null,
      billing_type: doc.billing_type,
      icd_codes: doc.icd_codes,
      aoe_answers: doc.aoe_answers,
      lab_account_id: doc.lab_account_id,
      placer_number: doc.placer_number,
      has_abn: doc.has_abn,
      interpretation: doc.interpretation,
      has_missing_results: doc.has_missing_results,
      origin: doc.origin,
      order_transaction: {
        id: doc.order_transaction_id,
        status: transactionStatus(transactionOrders),
        orders: transactionOrders.map((o) => ({
          id: o._id,
          created_at: isoWithOffset(o.created_at),
          updated_at: isoWithOffset(o.updated_at),
          low_level_status: o.low_level_status,
          low_level_status_created_at: isoWithOffset(o.low_level_status_created_at),
          origin: o.origin,
          parent_id: o.parent_id,
        })),
      },
    };
  }
}

export type ClientFacingOrder = ReturnType<OrderViews['render']>;

/** Each marker view's JSON, made once: the views themselves are made once and frozen (catalogue-view.ts `markerView`). */
const markerJson = new WeakMap<object, string>();
function jsonOfMarker(marker: object): string {
  let json = markerJson.get(marker);
  if (json === undefined) markerJson.set(marker, (json = JSON.stringify(marker)));
  return json;
}

/**
 * A list page's JSON: what `JSON.stringify({ orders, ...page })` writes, but for key order (each order's `lab_test`
 * last, and its `markers` last in it). A test's markers with their expected results are three quarters of an
 * order's bytes and the same for every order of that test: written from their JSON made once, where stringifying
 * them for every order was a sixth of a page's CPU.
 */
export function orderListJson(orders: ClientFacingOrder[], page: Record<string, unknown>): string {
  const items = orders.map(({ lab_test, ...order }) => {
    const { markers, ...test } = lab_test;
    const testJson = `${JSON.stringify(test).slice(0, -1)},"markers":[${markers.map(jsonOfMarker).join(',')}]}`;
    return `${JSON.stringify(order).slice(0, -1)},"lab_test":${testJson}}`;
  });
  const rest = JSON.stringify(page);
  return `{"orders":[${items.join(',')}]${rest === '{}' ? '' : `,${rest.slice(1, -1)}`}}`;
}
