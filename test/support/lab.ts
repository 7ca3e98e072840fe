import { workflowIds } from '../../workflows/ids';
import { eventually, uniqueId, type HttpClient, type TestApp } from './harness';

/** Test data for lab orders: a user of the team and valid order / registration bodies. */

export const today = () => new Date().toISOString().slice(0, 10);
export const daysFromToday = (n: number) => new Date(Date.now() + n * 86_400_000).toISOString().slice(0, 10);

export async function createUser(client: HttpClient): Promise<string> {
  const res = await client.post('/v2/user/', { client_user_id: uniqueId('patient') });
  if (res.status !== 200) throw new Error(`user creation failed: ${res.status} ${res.text}`);
  return res.body.user_id;
}

export const patientDetails = {
  first_name: "Ana-María O'Neil",
  last_name: 'Smith',
  dob: '1988-04-12',
  gender: 'female',
  phone_number: '+14155552671',
  email: 'ana.smith@example.com',
};
export const patientAddress = {
  receiver_name: 'Ana Smith',
  first_line: '123 Main St',
  second_line: 'Apt 4',
  city: 'San Francisco',
  state: 'CA',
  zip: '94105',
  country: 'US',
};
export const physician = { first_name: 'Gregory', last_name: 'House', npi: '1234567893' };
export const consents = [{ consentType: 'terms-of-use' }, { consentType: 'hipaa-authorization' }];

export function orderBody(userId: string, labTestId: string, extra: Record<string, unknown> = {}) {
  return {
    user_id: userId,
    order_set: { lab_test_ids: [labTestId] },
    patient_details: patientDetails,
    patient_address: patientAddress,
    physician,
    consents,
    ...extra,
  };
}

export function registrationBody(userId: string, sampleId = uniqueId('KIT').replace(/[^A-Za-z0-9_-]/g, '')) {
  return { user_id: userId, sample_id: sampleId, patient_details: patientDetails, patient_address: patientAddress, physician, consents };
}

/** Test ids of the shipped catalogue, by collection method. */
export async function labTestIds(client: HttpClient): Promise<Record<'testkit' | 'walk_in_test' | 'at_home_phlebotomy', string>> {
  const res = await client.get('/v3/lab_tests?status=active');
  const pick = (method: string) => res.body.find((t: { method: string; id: string }) => t.method === method)?.id;
  return { testkit: pick('testkit'), walk_in_test: pick('walk_in_test'), at_home_phlebotomy: pick('at_home_phlebotomy') };
}

export const lowOf = (status: string) => status.split('.')[2];

/** Waits until the order's last low-level status is `low`. */
export function orderReaches(client: HttpClient, orderId: string, low: string, timeoutMs = 30000) {
  // The label names where the order stood when the wait gave up, so a timeout says which step stalled.
  let seen = 'no answer yet';
  return eventually(
    async () => {
      const res = await client.get(`/v3/order/${orderId}`);
      seen = res.status === 200 ? `events ${res.body.events.map((e: { status: string }) => lowOf(e.status)).join(' > ')}` : `HTTP ${res.status}`;
      return res.status === 200 && lowOf(res.body.last_event.status) === low ? res.body : null;
    },
    timeoutMs,
    `order ${orderId} to reach ${low}`,
  ).catch((err: Error) => {
    throw new Error(`${err.message} (last seen: ${seen})`);
  });
}

/**
 * Waits until the order's workflow is idle: no workflow task and no activity pending, so it has acted on every update
 * and signal it got and now waits on a condition or a timer. Returns the timers still running (started, neither
 * fired nor cancelled): with none, nothing can happen to the order until a request or the lab moves it.
 */
export async function orderWorkflowIdle(app: TestApp, orderId: string): Promise<{ openTimers: number }> {
  const handle = app.deps.temporal.client.workflow.getHandle(workflowIds.labOrder(orderId));
  await eventually(
    async () => {
      const { raw } = await handle.describe();
      return !raw.pendingWorkflowTask && (raw.pendingActivities ?? []).length === 0;
    },
    30000,
    `order ${orderId}'s workflow to be idle`,
  );
  const started = new Set<string>();
  const closed = new Set<string>();
  for (const e of (await handle.fetchHistory()).events ?? []) {
    if (e.timerStartedEventAttributes?.timerId) started.add(e.timerStartedEventAttributes.timerId);
    for (const id of [e.timerFiredEventAttributes?.timerId, e.timerCanceledEventAttributes?.timerId]) if (id) closed.add(id);
  }
  return { openTimers: [...started].filter((id) => !closed.has(id)).length };
}
