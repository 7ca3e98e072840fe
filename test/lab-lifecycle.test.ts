import { Webhook as StandardWebhook } from 'standardwebhooks';
import { LabResultsRaw } from '../schemas/lab-order';
import { courseTo, STATUS_SETS, type CollectionMethod } from '../lib/labs/statuses';
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
import { createUser, daysFromToday, labTestIds, lowOf, orderBody, orderReaches, orderWorkflowIdle, registrationBody } from './support/lab';
import { pdfText } from './support/pdf';
import type { Receiver } from './support/receiver';

let app: TestApp;
let tenant: Tenant;
let client: HttpClient;
let tests: Awaited<ReturnType<typeof labTestIds>>;
let userId: string;
let rx: Receiver;
let secret: string;

beforeAll(async () => {
  app = await startTestApp();
  tenant = await createTenant(app.deps, 'Lab lifecycle');
  client = teamClient(app, tenant);
  tests = await labTestIds(client);
  userId = await createUser(client);
  ({ rx, secret } = await subscribeReceiver(app, tenant, ['labtest.*']));
});
afterAll(async () => {
  await rx.close();
  await app.close();
});

/** Every webhook about one order, verified, in arrival order. */
function orderEvents(orderId: string) {
  const verifier = new StandardWebhook(secret);
  return rx.requests
    .map((r) => ({ id: String(r.headers['webhook-id']), body: verifier.verify(r.body, r.headers as Record<string, string>) as any }))
    .filter((e) => e.body.data?.id === orderId || e.body.data?.order_id === orderId);
}

async function dispatchedOrder(method: CollectionMethod, extra: Record<string, unknown> = {}) {
  const order = (await client.post('/v3/order', orderBody(userId, tests[method], extra))).body.order;
  await orderReaches(client, order.id, 'requisition_created');
  return order;
}

const trySimulate = (orderId: string, finalStatus: string, body: Record<string, unknown> = {}, delay = 0) =>
  client.post(`/v3/order/${orderId}/test?final_status=${finalStatus}&delay=${delay}`, body);

/** A simulation that must be accepted (a refusal fails here, naming why, rather than as a later timeout). */
async function simulate(orderId: string, finalStatus: string, body: Record<string, unknown> = {}, delay = 0) {
  const res = await trySimulate(orderId, finalStatus, body, delay);
  if (res.status !== 200) throw new Error(`simulate ${finalStatus} on order ${orderId}: HTTP ${res.status} ${JSON.stringify(res.body)}`);
  return res;
}

describe('sandbox simulation', () => {
  const finals = (method: CollectionMethod) =>
    Object.keys(STATUS_SETS[method]).filter((low) => low !== 'cancelled' && courseTo(method, 'requisition_created', low) !== null);

  for (const method of ['testkit', 'walk_in_test', 'at_home_phlebotomy'] as const) {
    it(`walks a ${method} order to every reachable final status through the realistic intermediate ones`, async () => {
      const targets = finals(method);
      expect(targets.length).toBeGreaterThanOrEqual(5);
      await Promise.all(
        targets.map(async (low) => {
          const order = await dispatchedOrder(method);
          const dotted = `${STATUS_SETS[method][low]}.${method}.${low}`;
          const res = await simulate(order.id, dotted);
          expect(res.status).toBe(200);
          expect(res.body).toEqual({
            success: true,
            order_id: order.id,
            final_status: dotted,
            delay: expect.any(Number),
            detail: expect.stringContaining(dotted),
          });
          const done = await orderReaches(client, order.id, low, 60000);
          const lows = done.events.map((e: { status: string }) => lowOf(e.status));
          expect(lows).toEqual(['ordered', 'requisition_created', ...courseTo(method, 'requisition_created', low)!]);
          expect(done.events.map((e: { id: number }) => e.id)).toEqual(lows.map((_: string, i: number) => i + 1));
          expect(done.status).toBe(STATUS_SETS[method][low]);
        }),
      );
    }, 120000);
  }

  it('refuses statuses of another method, unreachable ones and orders not yet dispatched', async () => {
    const order = await dispatchedOrder('walk_in_test');
    const other = await trySimulate(order.id, 'completed.testkit.completed');
    expect(other.status).toBe(400);
    expect(other.body.detail).toMatch(/not a status of a walk_in_test order/);
    expect((await trySimulate(order.id, 'no.such.status')).status).toBe(422);
    await simulate(order.id, 'completed.walk_in_test.completed');
    await orderReaches(client, order.id, 'completed');
    const after = await trySimulate(order.id, 'completed.walk_in_test.corrected');
    expect(after.status).toBe(400);
    expect(after.body.detail).toMatch(/final status completed\.walk_in_test\.completed/);
    const scheduled = (await client.post('/v3/order', orderBody(userId, tests.walk_in_test, { activate_by: daysFromToday(30) }))).body.order;
    const early = await trySimulate(scheduled.id, 'completed.walk_in_test.completed');
    expect(early.status).toBe(400);
    expect(early.body.detail).toMatch(/simulate once it has been dispatched/);
  });

  it('is refused (404) by a production deployment', async () => {
    const prod = await startTestApp({ DEPLOYMENT_ENVIRONMENT: 'production', METRICS_TOKEN: 'lab-lifecycle-metrics' });
    try {
      const prodTenant = await createTenant(prod.deps, 'Production lab');
      const prodClient = teamClient(prod, prodTenant);
      const prodUser = await createUser(prodClient);
      const prodOrder = (await prodClient.post('/v3/order', orderBody(prodUser, tests.walk_in_test))).body.order;
      const refused = await prodClient.post(`/v3/order/${prodOrder.id}/test?final_status=completed.walk_in_test.completed`, {});
      expect(refused.status).toBe(404);
    } finally {
      await prod.close();
    }
  });
});

describe('results', () => {
  it('produces results on completion; abnormal and critical interpretations; a critical result event', async () => {
    const normal = await dispatchedOrder('walk_in_test');
    expect((await client.get(`/v3/order/${normal.id}/result`)).status).toBe(404);
    await simulate(normal.id, 'completed.walk_in_test.completed');
    const done = await orderReaches(client, normal.id, 'completed');
    expect(done.interpretation).toBe('normal');
    const results = await client.get(`/v3/order/${normal.id}/result`);
    expect(results.status).toBe(200);
    expectSchema(LabResultsRaw, results.body);
    expect(results.body.metadata).toMatchObject({
      status: 'final',
      interpretation: 'normal',
      specimen_number: done.sample_id,
      patient: "Ana-María O'Neil Smith",
      dob: '1988-04-12',
    });
    expect(results.body.results.length).toBeGreaterThan(0);
    for (const r of results.body.results) {
      expect(['numeric', 'range', 'comment', 'coded_value']).toContain(r.type);
      expect(typeof r.result).toBe('string');
      expect(r.interpretation).toBe('normal');
      if (r.type === 'numeric') expect(r.value).toBe(Number(r.result));
      else expect(r.value).toBe(-1);
    }
    expect((await client.get(`/v3/order/${normal.id}/result/metadata`)).body).toEqual(results.body.metadata);
    expect(await await orderEventually(normal.id, 'labtest.order.updated', 'completed')).toBeTruthy();

    const abnormal = await dispatchedOrder('walk_in_test');
    await simulate(abnormal.id, 'completed.walk_in_test.completed', { interpretation: 'abnormal', has_missing_results: true });
    expect((await orderReaches(client, abnormal.id, 'completed')).interpretation).toBe('abnormal');
    const abnormalResults = (await client.get(`/v3/order/${abnormal.id}/result`)).body;
    const flagged = abnormalResults.results.filter((r: { interpretation: string }) => r.interpretation === 'abnormal');
    expect(flagged.length).toBeGreaterThanOrEqual(1);
    expect(flagged[0].is_above_max_range || flagged[0].is_below_min_range).toBe(true);
    expect(abnormalResults.missing_results).toHaveLength(1);
    expect(abnormalResults.missing_results[0].inferred_failure_type).toBe('quantity_not_sufficient_failure');
    expect((await client.get(`/v3/order/${abnormal.id}`)).body.has_missing_results).toBe(true);

    const critical = await dispatchedOrder('at_home_phlebotomy');
    await simulate(critical.id, 'completed.at_home_phlebotomy.completed', { interpretation: 'critical' });
    expect((await orderReaches(client, critical.id, 'completed')).interpretation).toBe('critical');
    const criticalEvent = await eventually(
      () => Promise.resolve(orderEvents(critical.id).find((e) => e.body.event_type === 'labtest.result.critical')),
      20000,
      'critical event',
    );
    expect(criticalEvent.body.data).toMatchObject({
      order_id: critical.id,
      interpretation: 'critical',
      status: 'final',
      user_id: userId,
      team_id: tenant.teamId,
    });
    expect((await client.get(`/v3/orders?user_id=${userId}&interpretation=critical`)).body.orders.map((o: { id: string }) => o.id)).toContain(critical.id);
    expect(orderEvents(abnormal.id).some((e) => e.body.event_type === 'labtest.result.critical')).toBe(false);
  }, 90000);

  const orderEventually = (orderId: string, type: string, low: string) =>
    eventually(
      () => Promise.resolve(orderEvents(orderId).find((e) => e.body.event_type === type && lowOf(e.body.data.last_event.status) === low)),
      20000,
      `${type} ${low}`,
    );
});

describe('webhooks of an order', () => {
  it('delivers every status event exactly once per webhook-id, with increasing event ids', async () => {
    const order = (await client.post('/v3/order/testkit/register', registrationBody(userId))).body.order;
    await simulate(order.id, 'completed.testkit.completed');
    // A liveness bound, not a speed check: once under CI load this order took over 30 s (the local activity timeout).
    await orderReaches(client, order.id, 'completed', 90000);
    const expected = ['ordered', 'awaiting_registration', 'requisition_created', 'testkit_registered', 'transit_lab', 'delivered_to_lab', 'completed'];
    const events = await eventually(
      async () => {
        const got = orderEvents(order.id).filter((e) => e.body.event_type.startsWith('labtest.order.'));
        return new Set(got.map((e) => e.id)).size >= expected.length ? got : null;
      },
      30000,
      'all status webhooks',
    );
    const unique = [...new Map(events.map((e) => [e.id, e])).values()];
    expect(unique.map((e) => e.body.event_type)).toEqual(['labtest.order.created', ...expected.slice(1).map(() => 'labtest.order.updated')]);
    expect(unique.map((e) => lowOf(e.body.data.last_event.status))).toEqual(expected);
    expect(unique.map((e) => e.body.data.last_event.id)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    for (const e of unique) {
      expect(e.body).toMatchObject({ team_id: tenant.teamId, user_id: userId, client_user_id: expect.any(String) });
      expect(e.body.data.events).toHaveLength(e.body.data.last_event.id);
    }
    // Duplicates, if any, only as retries of the same webhook-id with the same body.
    const byId = new Map<string, string>();
    for (const e of events) {
      const body = JSON.stringify(e.body);
      if (byId.has(e.id)) expect(byId.get(e.id)).toBe(body);
      byId.set(e.id, body);
    }
  }, 150000);
});

describe('scheduled orders', () => {
  // Dispatch on the activate_by date itself: test/time-skipping.test.ts, at the real duration.
  it('dispatches an order created for today at once', async () => {
    const order = (await client.post('/v3/order', orderBody(userId, tests.walk_in_test, { activate_by: daysFromToday(0) }))).body.order;
    await orderReaches(client, order.id, 'requisition_created', 15000);
  });

  it('a PATCH racing the timer never dispatches twice', async () => {
    const order = (await client.post('/v3/order', orderBody(userId, tests.walk_in_test, { activate_by: daysFromToday(1) }))).body.order;
    // Keep moving the date while the timer is about to fire; some PATCHes land after the dispatch (400).
    const outcomes: number[] = [];
    const deadline = Date.now() + 12000;
    while (Date.now() < deadline) {
      const res = await client.patch(`/v3/order/${order.id}`, { activate_by: daysFromToday(1) });
      outcomes.push(res.status);
      if (res.status === 400) break;
      await new Promise((r) => setTimeout(r, 150));
    }
    const final = await orderReaches(client, order.id, 'requisition_created', 30000);
    // Dispatched, and no activation timer left running: no second dispatch can come.
    expect(await orderWorkflowIdle(app, order.id)).toEqual({ openTimers: 0 });
    const settled = (await client.get(`/v3/order/${order.id}`)).body;
    expect(settled.events.filter((e: { status: string }) => lowOf(e.status) === 'requisition_created')).toHaveLength(1);
    expect(final.id).toBe(order.id);
    expect(outcomes.every((s) => s === 200 || s === 400)).toBe(true);
  }, 60000);
});

describe('documents', () => {
  it("serves a requisition PDF with the order's data, by API key and by signed link", async () => {
    const order = await dispatchedOrder('walk_in_test');
    const res = await fetch(`${app.url}/v3/order/${order.id}/requisition/pdf`, { headers: { 'x-service-api-key': tenant.teamKey } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/pdf');
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes.subarray(0, 5).toString()).toBe('%PDF-');
    const text = await pdfText(bytes);
    for (const needle of ['Smith', order.sample_id, '1234567893', 'House', '1988-04-12', order.lab_test.name]) expect(text).toContain(needle);

    const fresh = (await client.get(`/v3/order/${order.id}`)).body;
    const signed = await fetch(fresh.requisition_form_url);
    expect(signed.status).toBe(200);
    expect(await pdfText(Buffer.from(await signed.arrayBuffer()))).toContain(order.sample_id);
    const tampered = fresh.requisition_form_url.replace(/signature=./, (m: string) => m.slice(0, -1) + (m.endsWith('A') ? 'B' : 'A'));
    expect((await fetch(tampered)).status).toBe(403);
    const otherOrder = fresh.requisition_form_url.replace(order.id, (await dispatchedOrder('walk_in_test')).id);
    expect((await fetch(otherOrder)).status).toBe(403);
    const longer = fresh.requisition_form_url.replace(/expires=(\d+)/, (_: string, e: string) => `expires=${Number(e) + 86400}`);
    expect((await fetch(longer)).status).toBe(403);
  });

  it('refuses an expired signed link', async () => {
    // Expiry is to the second: a 1-second link minted late in a second had as little as a millisecond (a flaky first fetch).
    const shortLived = await startTestApp({ REQUISITION_URL_TTL_SECONDS: 3 });
    try {
      const c = teamClient(shortLived, tenant);
      const order = await dispatchedOrder('walk_in_test');
      const url = (await c.get(`/v3/order/${order.id}`)).body.requisition_form_url;
      expect((await fetch(url)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 4100));
      const expired = await fetch(url);
      expect(expired.status).toBe(403);
      expect(((await expired.json()) as { detail: string }).detail).toMatch(/expired/);
    } finally {
      await shortLived.close();
    }
  });

  it('serves the results as a PDF once there are results', async () => {
    const order = await dispatchedOrder('at_home_phlebotomy');
    expect((await fetch(`${app.url}/v3/order/${order.id}/result/pdf`, { headers: { 'x-service-api-key': tenant.teamKey } })).status).toBe(404);
    await simulate(order.id, 'completed.at_home_phlebotomy.completed', { interpretation: 'abnormal' });
    await orderReaches(client, order.id, 'completed');
    const res = await fetch(`${app.url}/v3/order/${order.id}/result/pdf`, { headers: { 'x-service-api-key': tenant.teamKey } });
    expect(res.status).toBe(200);
    const text = await pdfText(Buffer.from(await res.arrayBuffer()));
    const results = (await client.get(`/v3/order/${order.id}/result`)).body.results;
    for (const needle of ['Smith', order.sample_id, results[0].name, results[0].result]) expect(text).toContain(needle);
  });
});

describe('order transactions and redraws', () => {
  it('orders one redraw after a sample failure, in the same transaction', async () => {
    const order = await dispatchedOrder('walk_in_test');
    expect((await client.post(`/v3/order/${order.id}/redraw`)).status).toBe(400);
    await simulate(order.id, 'collecting_sample.walk_in_test.redraw_available');
    await orderReaches(client, order.id, 'redraw_available');
    const [a, b] = await Promise.all([client.post(`/v3/order/${order.id}/redraw`), client.post(`/v3/order/${order.id}/redraw`)]);
    const ok = [a, b].filter((r) => r.status === 200);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    const redraw = ok[0].body.order;
    for (const r of ok) expect(r.body.order.id).toBe(redraw.id);
    expect(redraw).toMatchObject({ origin: 'redraw', order_transaction: { id: order.order_transaction.id, status: 'active' } });
    expect(redraw.order_transaction.orders.map((o: { id: string; origin: string }) => [o.id, o.origin])).toEqual([
      [order.id, 'initial'],
      [redraw.id, 'redraw'],
    ]);
    const third = await client.post(`/v3/order/${order.id}/redraw`);
    expect(third.status).toBe(400);
    expect(third.body.detail).toMatch(/at most one redraw/);
    const tx = await client.get(`/v3/order_transaction/${order.order_transaction.id}`);
    expect(tx.body.orders.map((o: { id: string }) => o.id)).toEqual([order.id, redraw.id]);
    await orderReaches(client, redraw.id, 'requisition_created');
  });
});

describe('user deletion', () => {
  it("erases the patient data of the user's orders and keeps the order record", async () => {
    const doomed = await createUser(client);
    const done = (await client.post('/v3/order', orderBody(doomed, tests.walk_in_test))).body.order;
    await orderReaches(client, done.id, 'requisition_created');
    await simulate(done.id, 'completed.walk_in_test.completed');
    await orderReaches(client, done.id, 'completed');
    const waiting = (await client.post('/v3/order', orderBody(doomed, tests.walk_in_test, { activate_by: daysFromToday(20) }))).body.order;
    const erasing = await startTestApp({ USER_DELETION_GRACE_SECONDS: 1 });
    try {
      expect((await teamClient(erasing, tenant).del(`/v2/user/${doomed}`)).status).toBe(200);
      for (const id of [done.id, waiting.id]) {
        const doc = await eventually(
          async () => {
            const d = await app.deps.repos.labOrders.findById(id);
            return d?.patient_data_erased_at ? d : null;
          },
          30000,
          'erasure',
        );
        expect(doc).toMatchObject({ patient_details: null, patient_address: null, shipping_details: null, health_insurance_id: null, consents: [] });
        expect(doc.sample_id).toBeTruthy();
        expect(doc.events.length).toBeGreaterThan(0);
      }
      expect(await app.deps.repos.labOrders.findResults(tenant.teamId, done.id)).toBeNull();
      const stopped = (await app.deps.repos.labOrders.findById(waiting.id))!;
      expect(stopped.low_level_status).toBe('ordered'); // stopped without a further event about an erased user
    } finally {
      await erasing.close();
    }
  }, 60000);
});
