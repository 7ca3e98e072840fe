import { Webhook as StandardWebhook } from 'standardwebhooks';
import { PostOrderResponse } from '../schemas/lab-order';
import {
  createTenant,
  eventually,
  expectSchema,
  startTestApp,
  teamClient,
  type HttpClient,
  type Tenant,
  type TestApp,
  subscribeReceiver,
} from './support/harness';
import { createUser, labTestIds, lowOf, orderReaches, registrationBody } from './support/lab';
import type { Receiver } from './support/receiver';

/**
 * `POST /v3/order/testkit`: a kit ordered without a patient ships at once and waits in
 * `received.testkit.awaiting_registration` (no requisition, no results); `POST /v3/order/testkit/register` with its
 * sample id binds the patient to that order, which then runs as any registered kit. Real app, worker, database,
 * Temporal and webhook receiver.
 */

let app: TestApp;
let tenant: Tenant;
let client: HttpClient;
let tests: Awaited<ReturnType<typeof labTestIds>>;
let rx: Receiver;
let secret: string;

beforeAll(async () => {
  app = await startTestApp();
  tenant = await createTenant(app.deps, 'Unregistered kits');
  client = teamClient(app, tenant);
  tests = await labTestIds(client);
  ({ rx, secret } = await subscribeReceiver(app, tenant, ['labtest.*']));
});
afterAll(async () => {
  await rx.close();
  await app.close();
});

const shipping = {
  receiver_name: 'Front Desk',
  first_line: '500 Market St',
  second_line: 'Floor 2',
  city: 'San Francisco',
  state: 'CA',
  zip: '94105',
  country: 'US',
  phone_number: '+14155550100',
};
const kitBody = (userId: string, extra: Record<string, unknown> = {}) => ({
  user_id: userId,
  lab_test_id: tests.testkit,
  shipping_details: shipping,
  ...extra,
});

/** The order's status webhooks, verified, one per webhook-id, in event order. */
function statusEvents(orderId: string) {
  const verifier = new StandardWebhook(secret);
  const all = rx.requests
    .map((r) => ({ id: String(r.headers['webhook-id']), body: verifier.verify(r.body, r.headers as Record<string, string>) as any }))
    .filter((e) => e.body.data?.id === orderId && e.body.event_type.startsWith('labtest.order.'));
  return [...new Map(all.map((e) => [e.id, e])).values()].sort((a, b) => a.body.data.last_event.id - b.body.data.last_event.id);
}

async function shippedKit(userId: string) {
  const res = await client.post('/v3/order/testkit', kitBody(userId, { passthrough: 'crm-42' }));
  expect(res.status).toBe(200);
  expectSchema(PostOrderResponse, res.body);
  const order = res.body.order;
  // The kit ships at once: the lab's shipment (tracking numbers) appears while the order awaits registration.
  return eventually(
    async () => {
      const now = (await client.get(`/v3/order/${order.id}`)).body;
      return now.details.data.shipment ? now : null;
    },
    30000,
    'the kit shipped',
  );
}

describe('POST /v3/order/testkit', () => {
  it('ships a kit without a patient, waiting in awaiting_registration; registration binds the patient and the order runs to completion', async () => {
    const buyer = await createUser(client);
    const patient = await createUser(client);
    const kit = await shippedKit(buyer);
    expect(kit).toMatchObject({
      user_id: buyer,
      status: 'received',
      patient_details: null,
      patient_address: null,
      requisition_form_url: null,
      passthrough: 'crm-42',
      details: { type: 'testkit', data: { shipment: { outbound_tracking_number: expect.stringMatching(/^9400\d+$/), outbound_courier: 'usps' } } },
      shipping_details: {
        receiver_name: 'Front Desk',
        first_line: '500 Market St',
        second_line: 'Floor 2',
        country: 'United States',
        phone_number: '+14155550100',
      },
    });
    expect(kit.events.map((e: { status: string }) => e.status)).toEqual(['received.testkit.ordered', 'received.testkit.awaiting_registration']);
    expect(kit.sample_id).toMatch(/^HB\d{10}$/);

    // Not before registration: no simulation (no results) and no reschedule.
    const early = await client.post(`/v3/order/${kit.id}/test?final_status=completed.testkit.completed&delay=0`, {});
    expect(early.status).toBe(400);

    const registered = await client.post('/v3/order/testkit/register', registrationBody(patient, kit.sample_id));
    expect(registered.status).toBe(200);
    expectSchema(PostOrderResponse, registered.body);
    expect(registered.body.order).toMatchObject({
      id: kit.id,
      user_id: patient,
      sample_id: kit.sample_id,
      patient_details: { first_name: "Ana-María O'Neil", last_name: 'Smith' },
    });
    expect(lowOf(registered.body.order.last_event.status)).toBe('testkit_registered');
    expect(registered.body.order.requisition_form_url).toEqual(expect.stringContaining('/requisition/pdf/signed'));
    // The kit is registered once; its patient is found by name now.
    expect((await client.post('/v3/order/testkit/register', registrationBody(patient, kit.sample_id))).status).toBe(400);
    expect((await client.get(`/v3/orders?patient_name=ana-maria%20smith&user_id=${patient}`)).body.orders.map((o: { id: string }) => o.id)).toEqual([kit.id]);

    expect((await client.post(`/v3/order/${kit.id}/test?final_status=completed.testkit.completed&delay=0`, {})).status).toBe(200);
    const done = await orderReaches(client, kit.id, 'completed', 60000);
    expect(done.events.map((e: { status: string }) => lowOf(e.status))).toEqual([
      'ordered',
      'awaiting_registration',
      'requisition_created',
      'testkit_registered',
      'transit_lab',
      'delivered_to_lab',
      'completed',
    ]);
    expect((await client.get(`/v3/order/${kit.id}/result`)).status).toBe(200);

    // Every status once, as webhooks: created at `ordered`, then updated; the ones after registration name the patient.
    const events = await eventually(
      async () => {
        const got = statusEvents(kit.id);
        return got.length >= 7 ? got : null;
      },
      30000,
      'all status webhooks',
    );
    expect(events.map((e) => e.body.event_type)).toEqual(['labtest.order.created', ...Array(6).fill('labtest.order.updated')]);
    expect(events.map((e) => lowOf(e.body.data.last_event.status))).toEqual(done.events.map((e: { status: string }) => lowOf(e.status)));
    expect(events.map((e) => e.body.user_id)).toEqual([buyer, buyer, patient, patient, patient, patient, patient]);
  }, 120000);

  it('replays the first response under the same X-Idempotency-Key', async () => {
    const user = await createUser(client);
    const key = `kit-${Date.now()}`;
    const first = await client.post('/v3/order/testkit', kitBody(user), { 'X-Idempotency-Key': key });
    const again = await client.post('/v3/order/testkit', kitBody(user), { 'X-Idempotency-Key': key });
    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.order.id).toBe(first.body.order.id);
  });

  it('cancels a kit awaiting registration; a registration then is refused', async () => {
    const user = await createUser(client);
    const kit = await shippedKit(user);
    const cancelled = await client.post(`/v3/order/${kit.id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(lowOf(cancelled.body.order.last_event.status)).toBe('cancelled');
    const late = await client.post('/v3/order/testkit/register', registrationBody(user, kit.sample_id));
    expect(late.status).toBe(400);
    expect((await client.get(`/v3/order/${kit.id}`)).body.patient_details).toBeNull();
  });

  it('answers 422 naming each bad field', async () => {
    const user = await createUser(client);
    const cases: [Record<string, unknown>, (string | number)[]][] = [
      [{ lab_test_id: tests.testkit, shipping_details: shipping }, ['body', 'user_id']],
      [kitBody(user, { lab_test_id: undefined }), ['body', 'lab_test_id']],
      [kitBody(user, { lab_test_id: tests.walk_in_test }), ['body', 'lab_test_id']],
      [kitBody(user, { lab_test_id: 'no-such-test' }), ['body', 'lab_test_id']],
      [kitBody(user, { shipping_details: { ...shipping, country: 'ZZ' } }), ['body', 'shipping_details', 'country']],
      [kitBody(user, { shipping_details: { ...shipping, phone_number: '555' } }), ['body', 'shipping_details', 'phone_number']],
      [kitBody(user, { shipping_details: { ...shipping, receiver_name: undefined } }), ['body', 'shipping_details', 'receiver_name']],
      [kitBody('7f1c1d9e-0000-4000-8000-000000000000'), ['body', 'user_id']],
    ];
    for (const [body, loc] of cases) {
      const res = await client.post('/v3/order/testkit', JSON.parse(JSON.stringify(body)));
      expect({ loc, status: res.status, locs: res.body.detail?.map?.((d: { loc: unknown }) => d.loc) }).toEqual({
        loc,
        status: 422,
        locs: expect.arrayContaining([loc]),
      });
    }
  });
});
