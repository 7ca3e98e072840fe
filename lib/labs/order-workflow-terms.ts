import type { SearchAttributeKey } from '@temporalio/common/lib/search-attributes';

/**
 * What the lab order workflow and the code around it (its client, its activities, the dev stack) agree on:
 * the search attributes operators find orders by, and the failure types that cross between them. Pure, so the
 * workflow bundle imports it as it is.
 */

/**
 * Search attributes of order workflows, so operators find orders in the Temporal UI
 * (e.g. `LabOrderStatus = "transit_lab"`, `HealthbridgeUserId = "<user id>"`). Registered by the dev stack
 * (scripts/stack.mjs) and, on a cluster, with `temporal operator search-attribute create` (README).
 */
const keyword = (name: string): SearchAttributeKey<'KEYWORD'> => ({ name, type: 'KEYWORD' });
export const SEARCH_ATTRIBUTES = {
  teamId: keyword('HealthbridgeTeamId'),
  userId: keyword('HealthbridgeUserId'),
  orderStatus: keyword('LabOrderStatus'),
} as const;

/** A refusal the api renders as a 400 with this message (the workflow's Update validators throw it). */
export const LAB_ORDER_REFUSED = 'LabOrderRefused';

/** The order's first activity gave up: the request that started the run failed before it stored the order. */
export const ORDER_NEVER_STORED = 'OrderNeverStored';
