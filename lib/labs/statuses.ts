/**
 * The lab order state model (pure data and functions: imported by the order workflow, the api and tests).
 * Status strings follow the reference API's `OrderStatus`: `<high>.<method>.<low>`; the spec's
 * `received.testkit.testkit_registered` wins over the reference's `registered`.
 */
export const COLLECTION_METHODS = ['testkit', 'walk_in_test', 'at_home_phlebotomy'] as const;
export type CollectionMethod = (typeof COLLECTION_METHODS)[number];

export type HighLevelStatus = 'received' | 'collecting_sample' | 'sample_with_lab' | 'completed' | 'cancelled' | 'failed';

/** Every low-level status of each method, with its high-level status. */
export const STATUS_SETS: Record<CollectionMethod, Record<string, HighLevelStatus>> = {
  testkit: {
    ordered: 'received',
    awaiting_registration: 'received',
    requisition_created: 'received',
    requisition_bypassed: 'received',
    testkit_registered: 'received',
    transit_customer: 'collecting_sample',
    out_for_delivery: 'collecting_sample',
    with_customer: 'collecting_sample',
    transit_lab: 'collecting_sample',
    problem_in_transit_customer: 'collecting_sample',
    problem_in_transit_lab: 'collecting_sample',
    delivered_to_lab: 'sample_with_lab',
    lab_processing_blocked: 'sample_with_lab',
    completed: 'completed',
    corrected: 'completed',
    failure_to_deliver_to_customer: 'failed',
    failure_to_deliver_to_lab: 'failed',
    sample_error: 'failed',
    lost: 'failed',
    cancelled: 'cancelled',
    do_not_process: 'cancelled',
  },
  walk_in_test: {
    ordered: 'received',
    requisition_created: 'received',
    requisition_bypassed: 'received',
    appointment_pending: 'collecting_sample',
    appointment_scheduled: 'collecting_sample',
    appointment_cancelled: 'collecting_sample',
    redraw_available: 'collecting_sample',
    partial_results: 'sample_with_lab',
    completed: 'completed',
    corrected: 'completed',
    sample_error: 'failed',
    cancelled: 'cancelled',
  },
  at_home_phlebotomy: {
    ordered: 'received',
    requisition_created: 'received',
    requisition_bypassed: 'received',
    appointment_pending: 'collecting_sample',
    appointment_scheduled: 'collecting_sample',
    draw_completed: 'collecting_sample',
    appointment_cancelled: 'collecting_sample',
    partial_results: 'sample_with_lab',
    completed: 'completed',
    corrected: 'completed',
    sample_error: 'failed',
    cancelled: 'cancelled',
  },
};

/** `<high>.<method>.<low>`. */
export function dottedStatus(method: CollectionMethod, low: string): string {
  const high = STATUS_SETS[method][low];
  if (!high) throw new Error(`'${low}' is not a ${method} status`);
  return `${high}.${method}.${low}`;
}

export function highLevelOf(method: CollectionMethod, low: string): HighLevelStatus {
  return STATUS_SETS[method][low];
}

/** Every dotted status (for the simulation's `final_status` enumeration). */
export const ALL_DOTTED_STATUSES: string[] = COLLECTION_METHODS.flatMap((m) => Object.keys(STATUS_SETS[m]).map((low) => dottedStatus(m, low)));

/** The reference's cancellable statuses ("Cancelling an order"); shipped kits and drawn samples are not. */
export const CANCELLABLE: Record<CollectionMethod, readonly string[]> = {
  testkit: ['ordered', 'requisition_created', 'requisition_bypassed', 'awaiting_registration', 'testkit_registered'],
  walk_in_test: ['ordered', 'requisition_created', 'requisition_bypassed', 'appointment_pending', 'appointment_scheduled', 'appointment_cancelled'],
  at_home_phlebotomy: [
    'ordered',
    'requisition_created',
    'requisition_bypassed',
    'appointment_pending',
    'appointment_scheduled',
    'appointment_cancelled',
    'draw_completed',
  ],
};

/** PATCH activate_by is allowed only here (spec, "Update order"). */
export const RESCHEDULABLE = ['ordered', 'awaiting_registration'] as const;

/** The order workflow ends in these; nothing moves an order out of them. */
export const TERMINAL = new Set([
  'completed',
  'corrected',
  'cancelled',
  'do_not_process',
  'failure_to_deliver_to_customer',
  'failure_to_deliver_to_lab',
  'sample_error',
  'lost',
  'redraw_available',
]);

/** Statuses that come with results (partial or final). */
export const RESULT_STATUSES = new Set(['completed', 'corrected', 'partial_results']);

/** A redraw may be ordered after these (reference: "Redraws"). */
export const REDRAWABLE = new Set(['sample_error', 'redraw_available']);

/**
 * The realistic course of an order with its lab: a main line, and branches that leave it after a given
 * status. Simulation walks these; a real lab's updates follow the same statuses.
 */
interface Course {
  main: string[];
  branches: { after: string; tail: string[] }[];
  /** Where a status off the main line sits on it (e.g. a registered kit is with the customer). */
  sameAs: Record<string, string>;
}

const COURSES: Record<CollectionMethod, Course> = {
  testkit: {
    main: [
      'ordered',
      'requisition_created',
      'transit_customer',
      'out_for_delivery',
      'with_customer',
      'transit_lab',
      'delivered_to_lab',
      'completed',
      'corrected',
    ],
    branches: [
      { after: 'transit_customer', tail: ['problem_in_transit_customer', 'failure_to_deliver_to_customer'] },
      { after: 'transit_lab', tail: ['problem_in_transit_lab', 'failure_to_deliver_to_lab'] },
      { after: 'transit_lab', tail: ['lost'] },
      { after: 'delivered_to_lab', tail: ['sample_error'] },
      { after: 'delivered_to_lab', tail: ['lab_processing_blocked'] },
      { after: 'delivered_to_lab', tail: ['do_not_process'] },
    ],
    sameAs: {
      awaiting_registration: 'ordered',
      requisition_bypassed: 'requisition_created',
      testkit_registered: 'with_customer',
      problem_in_transit_customer: 'transit_customer',
      problem_in_transit_lab: 'transit_lab',
      lab_processing_blocked: 'delivered_to_lab',
    },
  },
  walk_in_test: {
    main: ['ordered', 'requisition_created', 'appointment_pending', 'appointment_scheduled', 'completed', 'corrected'],
    branches: [
      { after: 'appointment_scheduled', tail: ['appointment_cancelled'] },
      { after: 'appointment_scheduled', tail: ['partial_results'] },
      { after: 'appointment_scheduled', tail: ['sample_error'] },
      { after: 'appointment_scheduled', tail: ['redraw_available'] },
    ],
    sameAs: { requisition_bypassed: 'requisition_created', appointment_cancelled: 'requisition_created', partial_results: 'appointment_scheduled' },
  },
  at_home_phlebotomy: {
    main: ['ordered', 'requisition_created', 'appointment_pending', 'appointment_scheduled', 'draw_completed', 'completed', 'corrected'],
    branches: [
      { after: 'appointment_scheduled', tail: ['appointment_cancelled'] },
      { after: 'draw_completed', tail: ['partial_results'] },
      { after: 'draw_completed', tail: ['sample_error'] },
    ],
    sameAs: { requisition_bypassed: 'requisition_created', appointment_cancelled: 'requisition_created', partial_results: 'draw_completed' },
  },
};

/**
 * The statuses an order passes through from `current` (exclusive) to `final` (inclusive), or null when
 * `final` cannot be reached from `current`. Cancellation is not a course: it is the cancel operation.
 */
export function courseTo(method: CollectionMethod, current: string, final: string): string[] | null {
  if (TERMINAL.has(current) || current === final) return null;
  const course = COURSES[method];
  const at = course.main.indexOf(course.sameAs[current] ?? current);
  if (at < 0) return null;
  const target = course.main.indexOf(final);
  if (target > at) return course.main.slice(at + 1, target + 1);
  for (const branch of course.branches) {
    const end = branch.tail.indexOf(final);
    const from = course.main.indexOf(branch.after);
    if (end < 0 || from < at) continue;
    // Already part-way down this branch (e.g. at problem_in_transit_lab): continue along it.
    const start = branch.tail.indexOf(current);
    if (start >= 0) return start < end ? branch.tail.slice(start + 1, end + 1) : null;
    return [...course.main.slice(at + 1, from + 1), ...branch.tail.slice(0, end + 1)];
  }
  return null;
}

/** Parses `final_status` given dotted (`completed.testkit.completed`) or as a bare low-level status. */
export function lowLevelFromFinalStatus(method: CollectionMethod, finalStatus: string): string | null {
  const parts = finalStatus.split('.');
  if (parts.length === 1) return STATUS_SETS[method][parts[0]] ? parts[0] : null;
  if (parts.length !== 3 || parts[1] !== method) return null;
  return STATUS_SETS[method][parts[2]] === parts[0] ? parts[2] : null;
}
