import { workflowIds } from '../../workflows/ids';
import { eventually, managementClient, uniqueId, type HttpClient, type Tenant, type TestApp } from './harness';

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

/** The order code lab 3 (Labcorp) has for its thyroid panel in the lab accounts tests make. */
export const THYROID_ORDER_CODE = '001453';

/**
 * A lab account of `tenant` with lab 3 (its thyroid panel coded) at a lab listening on `port`, made through the
 * management API, and a walk-in test of the team that names it. `settings` override the account's fields.
 */
export async function createLabAccount(
  app: TestApp,
  tenant: Tenant,
  client: HttpClient,
  port: number,
  settings: Record<string, unknown> = {},
): Promise<{ accountId: string; labTestId: string; name: string }> {
  const lab = app.deps.labCatalogue.labById(3)!;
  const panel = app.deps.labCatalogue.markers.find((m) => m.type === 'panel' && m.slug === 'thyroid_panel' && m.lab_id === 3)!;
  const name = `${lab.name} ${uniqueId('account')}`;
  const { DEPLOYMENT_ENVIRONMENT: env, DEPLOYMENT_REGION: region } = app.deps.config;
  const created = await managementClient(app, tenant).post(`/v1/org/${tenant.orgId}/lab_account/${env}/${region}`, {
    lab_slug: lab.slug,
    name,
    account_number: '70012345',
    mllp: { host: '127.0.0.1', port },
    msh: { sending_application: 'HEALTHBRIDGE', sending_facility: 'HB-TEST', receiving_application: 'LAB', receiving_facility: 'FAKE-LAB' },
    profile: 'LOI_2.5.1',
    ack_mode: 'original',
    charset: 'UNICODE UTF-8',
    results_from: ['127.0.0.1'],
    order_codes: { [panel.id]: { code: THYROID_ORDER_CODE, loinc: '24348-5' } },
    ...settings,
  });
  expect([200, 201]).toContain(created.status);
  const test = await client.post('/v3/lab_tests', {
    name: `Thyroid via ${name}`,
    method: 'walk_in_test',
    description: 'Sent over MLLP',
    marker_ids: [panel.id],
    lab_account_id: created.body.id,
  });
  expect(test.status).toBe(200);
  return { accountId: created.body.id, labTestId: test.body.id, name };
}
