import { ClientFacingOrder, OrderList, PatchOrderResponse, PostOrderResponse } from '../schemas/lab-order';
import { randomUUID } from 'node:crypto';
import { LAB_ORDER_INDEXES } from '../lib/labs/orders-store';
import { dataCipher } from '../lib/platform/config';
import { createIndexes } from '../lib/platform/database/indexes';
import { createRepositories } from '../lib/repositories';
import { walksIdIndex } from '../lib/platform/database/pages';
import { timeOrderedUuid } from '../lib/platform/keys';
import { indexBoundFields, indexesUsed, sortsInMemory } from './support/explain';
import { createTenant, expectSchema, ownDatabase, startTestApp, teamClient, uniqueId, type HttpClient, type TestApp } from './support/harness';
import { createUser, daysFromToday, labTestIds, lowOf, orderBody, orderReaches, orderWorkflowIdle, registrationBody, today } from './support/lab';

let app: TestApp;
let client: HttpClient;
let tests: Awaited<ReturnType<typeof labTestIds>>;
let userId: string;

beforeAll(async () => {
  app = await startTestApp();
  client = teamClient(app, await createTenant(app.deps, 'Lab orders'));
  tests = await labTestIds(client);
  userId = await createUser(client);
});
afterAll(() => app.close());

describe('POST /v3/order', () => {
  it('creates an order in ordered, then its workflow dispatches it to the lab', async () => {
    const res = await client.post('/v3/order', orderBody(userId, tests.walk_in_test));
    expect(res.status).toBe(200);
    expectSchema(PostOrderResponse, res.body);
    const { order } = res.body;
    expect(res.body).toMatchObject({ status: 'success', message: 'Order created successfully' });
    expect(order).toMatchObject({
      user_id: userId,
      status: 'received',
      origin: 'initial',
      activate_by: null,
      interpretation: null,
      has_abn: false,
      details: { type: 'walk_in_test' },
      lab_test: { id: tests.walk_in_test, method: 'walk_in_test' },
      patient_address: { country: 'United States', first_line: '123 Main St' },
    });
    expect(order.events).toEqual([expect.objectContaining({ id: 1, status: 'received.walk_in_test.ordered' })]);
    expect(order.last_event).toEqual(order.events[0]);
    expect(order.order_transaction).toMatchObject({ status: 'active', orders: [expect.objectContaining({ id: order.id, origin: 'initial' })] });

    const dispatched = await orderReaches(client, order.id, 'requisition_created');
    expect(dispatched.events.map((e: { id: number; status: string }) => [e.id, e.status])).toEqual([
      [1, 'received.walk_in_test.ordered'],
      [2, 'received.walk_in_test.requisition_created'],
    ]);
    expect(dispatched.requisition_form_url).toMatch(new RegExp(`/v3/order/${order.id}/requisition/pdf/signed\\?expires=\\d+&signature=`));
    expectSchema(ClientFacingOrder, dispatched);
  });

  it('still takes the deprecated lab_test_id', async () => {
    const { order_set, ...rest } = orderBody(userId, tests.testkit);
    const res = await client.post('/v3/order', { ...rest, lab_test_id: order_set.lab_test_ids[0] });
    expect(res.status).toBe(200);
    expect(res.body.order.lab_test.id).toBe(tests.testkit);
    expect(res.body.order.shipping_details).toMatchObject({ country: 'United States', receiver_name: 'Ana Smith' });
  });

  it('reports every invalid field with its location, and stores nothing', async () => {
    const before = await client.get(`/v3/orders?user_id=${userId}&size=100`);
    const res = await client.post('/v3/order', {
      user_id: '00000000-0000-4000-8000-000000000000',
      order_set: { lab_test_ids: ['no-such-test'] },
      patient_details: {
        first_name: 'R2-D2 <script>',
        last_name: 'x'.repeat(51),
        dob: '2023-02-30',
        gender: 'female',
        phone_number: '4155552671',
        email: 'not-an-email',
      },
      patient_address: { ...orderBody(userId, tests.testkit).patient_address, country: 'USA' },
      activate_by: '2001-01-01',
    });
    expect(res.status).toBe(422);
    const locs = res.body.detail.map((d: { loc: string[] }) => d.loc.join('.'));
    expect(locs).toEqual(
      expect.arrayContaining([
        'body.patient_details.first_name',
        'body.patient_details.last_name',
        'body.patient_details.dob',
        'body.patient_details.phone_number',
        'body.patient_details.email',
        'body.patient_address.country',
      ]),
    );
    // Rules beyond the schema, once the schema passes.
    const second = await client.post('/v3/order', {
      ...orderBody('00000000-0000-4000-8000-000000000000', 'no-such-test'),
      patient_details: { ...orderBody(userId, tests.testkit).patient_details, dob: daysFromToday(2) },
      patient_address: { ...orderBody(userId, tests.testkit).patient_address, country: 'XX' },
      activate_by: '2001-01-01',
    });
    expect(second.status).toBe(422);
    expect(second.body.detail.map((d: { loc: string[] }) => d.loc.join('.'))).toEqual(
      expect.arrayContaining(['body.user_id', 'body.order_set.lab_test_ids.0', 'body.patient_details.dob', 'body.patient_address.country', 'body.activate_by']),
    );
    const after = await client.get(`/v3/orders?user_id=${userId}&size=100`);
    expect(after.body.total).toBe(before.body.total);
  });

  it('refuses a user of another team as an unknown user', async () => {
    const other = teamClient(app, await createTenant(app.deps, 'Other lab team'));
    const theirUser = await createUser(other);
    const res = await client.post('/v3/order', orderBody(theirUser, tests.testkit));
    expect(res.status).toBe(422);
    expect(res.body.detail[0]).toMatchObject({ loc: ['body', 'user_id'], type: 'value_error.user_not_found' });
  });

  it('replays the first response for a repeated X-Idempotency-Key, and refuses it with another body', async () => {
    const key = uniqueId('idem');
    const first = await client.post('/v3/order', orderBody(userId, tests.walk_in_test), { 'X-Idempotency-Key': key });
    const again = await client.post('/v3/order', orderBody(userId, tests.walk_in_test), { 'X-Idempotency-Key': key });
    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    const other = await client.post('/v3/order', orderBody(userId, tests.testkit), { 'X-Idempotency-Key': key });
    expect(other.status).toBe(400);
    expect(other.body.detail).toMatch(/different request body/);
    // A validation failure does not consume a key.
    const badKey = uniqueId('idem');
    expect((await client.post('/v3/order', orderBody(userId, 'no-such-test'), { 'X-Idempotency-Key': badKey })).status).toBe(422);
    expect((await client.post('/v3/order', orderBody(userId, tests.testkit), { 'X-Idempotency-Key': badKey })).status).toBe(200);
  });

  it('gives concurrent duplicates of one key a clear 409 or the same order, never a second order', async () => {
    const key = uniqueId('idem');
    const responses = await Promise.all(
      Array.from({ length: 6 }, () => client.post('/v3/order', orderBody(userId, tests.walk_in_test), { 'X-Idempotency-Key': key })),
    );
    const ok = responses.filter((r) => r.status === 200);
    const busy = responses.filter((r) => r.status === 409);
    expect(ok.length + busy.length).toBe(responses.length);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    expect(new Set(ok.map((r) => r.body.order.id)).size).toBe(1);
    for (const r of busy) expect(r.body.detail).toMatch(/still in progress/);
    const replay = await client.post('/v3/order', orderBody(userId, tests.walk_in_test), { 'X-Idempotency-Key': key });
    expect(replay.body.order.id).toBe(ok[0].body.order.id);
  });
});

describe('POST /v3/order/testkit/register', () => {
  it('registers a kit: events run up to received.testkit.testkit_registered', async () => {
    const body = registrationBody(userId);
    const res = await client.post('/v3/order/testkit/register', body);
    expect(res.status).toBe(200);
    expectSchema(PostOrderResponse, res.body);
    expect(res.body.order.sample_id).toBe(body.sample_id);
    expect(res.body.order.status).toBe('received');
    expect(res.body.order.events.map((e: { id: number; status: string }) => [e.id, e.status])).toEqual([
      [1, 'received.testkit.ordered'],
      [2, 'received.testkit.awaiting_registration'],
      [3, 'received.testkit.requisition_created'],
      [4, 'received.testkit.testkit_registered'],
    ]);
    const dup = await client.post('/v3/order/testkit/register', registrationBody(userId, body.sample_id));
    expect(dup.status).toBe(400);
    expect(dup.body.detail).toContain(`sample_id '${body.sample_id}' is already registered`);
  });

  it('takes the street / street_number address form', async () => {
    const { patient_address, ...rest } = registrationBody(userId);
    const { first_line, second_line, ...address } = patient_address;
    const res = await client.post('/v3/order/testkit/register', { ...rest, patient_address: { ...address, street: 'Main St', street_number: '123' } });
    expect(res.status).toBe(200);
    expect(res.body.order.patient_address).toMatchObject({ first_line: '123 Main St', country: 'United States' });
  });

  it('lets exactly one of two racing registrations of one kit win', async () => {
    const body = registrationBody(userId);
    const results = await Promise.all([1, 2, 3].map(() => client.post('/v3/order/testkit/register', body)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 400, 400]);
    const list = await client.get(`/v3/orders?user_id=${userId}&size=100`);
    expect(list.body.orders.filter((o: { sample_id: string }) => o.sample_id === body.sample_id)).toHaveLength(1);
  });
});

describe('GET /v3/order/{id} and /v3/orders', () => {
  it("404s an unknown order and another team's order", async () => {
    const mine = (await client.post('/v3/order', orderBody(userId, tests.walk_in_test))).body.order;
    const other = teamClient(app, await createTenant(app.deps, 'Nosy team'));
    expect((await other.get(`/v3/order/${mine.id}`)).status).toBe(404);
    expect((await client.get('/v3/order/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await client.get('/v3/order/not-a-uuid')).status).toBe(422);
  });

  it('lists with page/size and filters by user, status, activation and created date', async () => {
    const user = await createUser(client);
    const now = (await client.post('/v3/order', orderBody(user, tests.walk_in_test))).body.order;
    const later = (await client.post('/v3/order', orderBody(user, tests.walk_in_test, { activate_by: daysFromToday(40) }))).body.order;
    await orderReaches(client, now.id, 'requisition_created');

    const all = await client.get(`/v3/orders?user_id=${user}`);
    expect(all.status).toBe(200);
    expectSchema(OrderList, all.body);
    expect(all.body).toMatchObject({ total: 2, page: 1, size: 50 });
    expect(all.body.orders.map((o: { id: string }) => o.id)).toEqual([later.id, now.id]); // newest first

    const paged = await client.get(`/v3/orders?user_id=${user}&size=1&page=2`);
    expect(paged.body.orders.map((o: { id: string }) => o.id)).toEqual([now.id]);
    const scheduled = await client.get(`/v3/orders?user_id=${user}&order_activation_types=scheduled`);
    expect(scheduled.body.orders.map((o: { id: string }) => o.id)).toEqual([later.id]);
    const current = await client.get(`/v3/orders?user_id=${user}&order_activation_types=current`);
    expect(current.body.orders.map((o: { id: string }) => o.id)).toEqual([now.id]);
    // Stored as a Date (its UTC midnight), so the activation filters compare dates; the API shows the calendar day.
    expect((await app.inspect.collection('lab_orders').findOne({ _id: later.id as never }))?.activate_by).toEqual(
      new Date(`${daysFromToday(40)}T00:00:00.000Z`),
    );
    expect(later.activate_by).toBe(daysFromToday(40));
    const byStatus = await client.get(`/v3/orders?user_id=${user}&status=requisition_created`);
    expect(byStatus.body.orders.map((o: { id: string }) => o.id)).toEqual([now.id]);
    const ordered = await client.get(`/v3/orders?user_id=${user}&status=ordered&status=awaiting_registration`);
    expect(ordered.body.orders.map((o: { id: string }) => o.id)).toEqual([later.id]);
    expect((await client.get(`/v3/orders?user_id=${user}&start_date=${daysFromToday(1)}`)).body.total).toBe(0);
    expect((await client.get(`/v3/orders?user_id=${user}&end_date=${today()}`)).body.total).toBe(2);
    expect((await client.get(`/v3/orders?user_id=${user}&interpretation=normal`)).body.total).toBe(0);
    expect((await client.get(`/v3/orders?user_id=${user}&order_direction=asc`)).body.orders[0].id).toBe(now.id);
    const bad = await client.get('/v3/orders?size=500&interpretation=bad');
    expect(bad.status).toBe(422);
    expect(bad.body.detail.map((d: { loc: string[] }) => d.loc.join('.'))).toEqual(expect.arrayContaining(['query.size', 'query.interpretation']));
  });
});

describe('GET /v3/orders pages', () => {
  it('by next_cursor: the same orders as by page, newest first, none twice or missed, the first count kept', async () => {
    const tenant = await createTenant(app.deps, 'Order pages');
    const team = teamClient(app, tenant);
    const user = await createUser(team);
    const created: string[] = [];
    for (let i = 0; i < 7; i++) created.push((await team.post('/v3/order', orderBody(user, tests.walk_in_test))).body.order.id);
    const newestFirst = [...created].reverse();
    // Ids are time-ordered UUIDs (v7), so id order is creation order.
    expect([...created].sort()).toEqual(created);
    expect(created.every((id) => id[14] === '7')).toBe(true);

    const byPage: string[] = [];
    for (let page = 1; page <= 3; page++) byPage.push(...(await team.get(`/v3/orders?size=3&page=${page}`)).body.orders.map((o: { id: string }) => o.id));
    expect(byPage).toEqual(newestFirst);

    const walked: string[] = [];
    let res = await team.get('/v3/orders?size=3');
    const pages = [res.body];
    while (res.body.next_cursor) {
      res = await team.get(`/v3/orders?size=3&next_cursor=${res.body.next_cursor}`);
      expect(res.status).toBe(200);
      pages.push(res.body);
    }
    for (const body of pages) {
      expectSchema(OrderList, body);
      walked.push(...body.orders.map((o: { id: string }) => o.id));
    }
    expect(walked).toEqual(newestFirst);
    expect(pages.map((p) => [p.page, p.total, p.orders.length])).toEqual([
      [1, 7, 3],
      [2, 7, 3],
      [3, 7, 1],
    ]);
    expect(pages[2].next_cursor).toBeNull();

    // Oldest first, by cursor too.
    const first = (await team.get('/v3/orders?size=4&order_direction=asc')).body;
    const second = (await team.get(`/v3/orders?size=4&order_direction=asc&next_cursor=${first.next_cursor}`)).body;
    expect([...first.orders, ...second.orders].map((o: { id: string }) => o.id)).toEqual(created);

    for (const cursor of ['nonsense', Buffer.from('{"after":1}').toString('base64url')]) {
      const bad = await team.get(`/v3/orders?next_cursor=${cursor}`);
      expect(bad.status).toBe(422);
      expect(bad.body.detail[0]).toMatchObject({ loc: ['query', 'next_cursor'], type: 'value_error.cursor' });
    }
  });

  // The plans the store chooses for the queries the product sends: a sparse list's page (no hint) is read from its
  // declared index bounded on team and `_id`, and the `_id` walk the code takes for dense lists returns it unsorted.
  it('reads each page through an index bounded on team and _id, or walks _id without sorting (explain on the real store)', async () => {
    const tenant = await createTenant(app.deps, 'Order plans');
    const team = teamClient(app, tenant);
    const user = await createUser(team);
    const created = (await team.post('/v3/order', orderBody(user, tests.walk_in_test))).body.order.id;
    const template = (await app.deps.repos.labOrders.findById(created))!;
    // The planner's choice follows the collection's make-up, which the suite's other files change as they run (a few
    // hundred orders are read whole; one busy team tips it to other plans). So the plans are asked of a database of
    // this test's own, always the same: 2,000 orders of another team, 20 of this one, stored as the api stores them.
    const own = await ownDatabase(app, 'plans');
    try {
      const repo = createRepositories(own.db, dataCipher(app.deps.config)).labOrders;
      await createIndexes(own.db.collection('lab_orders'), LAB_ORDER_INDEXES.lab_orders);
      const clone = (teamId: string, i: number) => ({
        ...template,
        _id: timeOrderedUuid(),
        team_id: teamId,
        sample_id: `PLAN${String(i).padStart(10, '0')}`,
        order_transaction_id: randomUUID(),
        details_id: randomUUID(),
      });
      const crowd = Array.from({ length: 2000 }, (_, i) => clone('another-team', i));
      const ours = Array.from({ length: 20 }, (_, i) => clone(tenant.teamId, i));
      for (const docs of [crowd, ours]) for (let i = 0; i < docs.length; i += 200) await Promise.all(docs.slice(i, i + 200).map((doc) => repo.insert(doc)));
      const last = ours[ours.length - 1]._id;
      const base = { teamId: tenant.teamId, today: today(), direction: -1 as const };
      const cases = [
        { filter: base, page: { skip: 0, size: 50 }, index: 'team_id_1__id_-1' },
        { filter: base, page: { after: last, skip: 0, size: 50 }, index: 'team_id_1__id_-1' },
        { filter: { ...base, direction: 1 as const }, page: { skip: 0, size: 50 }, index: 'team_id_1__id_-1' },
        { filter: { ...base, userId: user }, page: { skip: 0, size: 50 }, index: 'team_id_1_user_id_1__id_-1' },
        { filter: { ...base, lowLevelStatuses: ['ordered'] }, page: { after: last, skip: 0, size: 50 }, index: 'team_id_1_low_level_status_1__id_-1' },
      ];
      for (const c of cases) {
        const plan = await repo.listQuery(c.filter, c.page).explain('queryPlanner');
        expect({ case: c, used: indexesUsed(plan), bounded: indexBoundFields(plan) }).toEqual({
          case: c,
          used: [c.index],
          bounded: expect.arrayContaining(['team_id', '_id']),
        });
        const walk = await repo.listQuery(c.filter, c.page, true).explain('queryPlanner');
        expect({ case: c, used: indexesUsed(walk), sorted: sortsInMemory(walk) }).toEqual({ case: c, used: ['_id_'], sorted: false });
      }
    } finally {
      await own.drop();
    }
  });

  it('takes the _id walk only for dense lists: a page whose matches are a large share of the collection', async () => {
    const orders = app.deps.repos.labOrders.orders;
    const all = await orders.estimatedDocumentCount();
    expect(await walksIdIndex(orders, all)).toBe(true);
    expect(await walksIdIndex(orders, Math.ceil(all * 0.05))).toBe(true);
    expect(await walksIdIndex(orders, Math.floor(all * 0.04))).toBe(false);
    expect(await walksIdIndex(orders, undefined)).toBe(false);
  });
});

describe('PATCH /v3/order/{id} (activate_by)', () => {
  it("follows the spec's rules, each refusal a 400 naming the rule", async () => {
    const immediate = (await client.post('/v3/order', orderBody(userId, tests.walk_in_test))).body.order;
    const res1 = await client.patch(`/v3/order/${immediate.id}`, { activate_by: daysFromToday(30) });
    expect(res1.status).toBe(400);
    expect(res1.body.detail).toMatch(/created without activate_by/);

    const scheduled = (await client.post('/v3/order', orderBody(userId, tests.walk_in_test, { activate_by: daysFromToday(60) }))).body.order;
    expect(scheduled.activate_by).toBe(daysFromToday(60));
    const past = await client.patch(`/v3/order/${scheduled.id}`, { activate_by: '2020-01-01' });
    expect(past.status).toBe(400);
    expect(past.body.detail).toMatch(/today .* or later/);

    const moved = await client.patch(`/v3/order/${scheduled.id}`, { activate_by: daysFromToday(90) });
    expect(moved.status).toBe(200);
    expectSchema(PatchOrderResponse, moved.body);
    expect(moved.body).toEqual({
      order: { id: scheduled.id, team_id: scheduled.team_id, user_id: userId, activate_by: daysFromToday(90), status: 'received' },
      status: 'success',
      message: 'order updated',
    });
    expect((await client.get(`/v3/order/${scheduled.id}`)).body.activate_by).toBe(daysFromToday(90));
    expect((await app.inspect.collection('lab_orders').findOne({ _id: scheduled.id as never }))?.activate_by).toBeInstanceOf(Date);

    // null clears the date and dispatches at once.
    const cleared = await client.patch(`/v3/order/${scheduled.id}`, { activate_by: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body.order.activate_by).toBeNull();
    const dispatched = await orderReaches(client, scheduled.id, 'requisition_created');
    expect(dispatched.events.filter((e: { status: string }) => lowOf(e.status) === 'requisition_created')).toHaveLength(1);

    const late = await client.patch(`/v3/order/${scheduled.id}`, { activate_by: daysFromToday(10) });
    expect(late.status).toBe(400);
    expect(late.body.detail).toMatch(/only be changed while the order's status is ordered or awaiting_registration; it is in status requisition_created/);
    expect((await client.patch(`/v3/order/${scheduled.id}`, { activate_by: 'tomorrow' })).status).toBe(422);
    expect((await client.patch(`/v3/order/${scheduled.id}`, {})).status).toBe(422);
  });

  it('never dispatches twice under concurrent PATCHes', async () => {
    const order = (await client.post('/v3/order', orderBody(userId, tests.walk_in_test, { activate_by: daysFromToday(50) }))).body.order;
    const patches = await Promise.all([
      client.patch(`/v3/order/${order.id}`, { activate_by: null }),
      client.patch(`/v3/order/${order.id}`, { activate_by: daysFromToday(70) }),
      client.patch(`/v3/order/${order.id}`, { activate_by: null }),
      client.patch(`/v3/order/${order.id}`, { activate_by: daysFromToday(80) }),
    ]);
    for (const p of patches) expect([200, 400]).toContain(p.status);
    expect(patches.some((p) => p.status === 200)).toBe(true);
    // Whatever won, the order is dispatched at most once, and only if the accepted changes ended in null. Once its
    // workflow is idle it has acted on every accepted PATCH; a date still set leaves only its activation timer running.
    const { openTimers } = await orderWorkflowIdle(app, order.id);
    const settled = (await client.get(`/v3/order/${order.id}`)).body;
    expect(openTimers).toBe(settled.activate_by === null ? 0 : 1);
    const dispatches = settled.events.filter((e: { status: string }) => lowOf(e.status) === 'requisition_created');
    expect(dispatches.length).toBeLessThanOrEqual(1);
    if (settled.activate_by === null) expect(dispatches).toHaveLength(1);
    else expect(dispatches).toHaveLength(0);
  });
});

describe('POST /v3/order/{id}/cancel', () => {
  it('cancels in cancellable statuses and refuses others naming the current status', async () => {
    const scheduled = (await client.post('/v3/order', orderBody(userId, tests.walk_in_test, { activate_by: daysFromToday(45) }))).body.order;
    const res = await client.post(`/v3/order/${scheduled.id}/cancel`);
    expect(res.status).toBe(200);
    expectSchema(PostOrderResponse, res.body);
    expect(res.body.order.status).toBe('cancelled');
    expect(res.body.order.last_event.status).toBe('cancelled.walk_in_test.cancelled');
    expect(res.body.order.order_transaction.status).toBe('cancelled');
    // A second cancel: the order has ended.
    const again = await client.post(`/v3/order/${scheduled.id}/cancel`);
    expect(again.status).toBe(400);
    expect(again.body.detail).toMatch(/cancelled\.walk_in_test\.cancelled/);

    const registered = (await client.post('/v3/order/testkit/register', registrationBody(userId))).body.order;
    expect((await client.post(`/v3/order/${registered.id}/cancel`)).status).toBe(200);

    const shipped = (await client.post('/v3/order', orderBody(userId, tests.testkit))).body.order;
    await orderReaches(client, shipped.id, 'requisition_created');
    expect((await client.post(`/v3/order/${shipped.id}/test?final_status=collecting_sample.testkit.transit_customer`, {})).status).toBe(200);
    await orderReaches(client, shipped.id, 'transit_customer');
    const refused = await client.post(`/v3/order/${shipped.id}/cancel`);
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toBe('The order cannot be cancelled in its current status collecting_sample.testkit.transit_customer.');
    expect((await client.post('/v3/order/00000000-0000-4000-8000-000000000000/cancel')).status).toBe(404);
  });
});

describe('crash repair', () => {
  it('a run whose order was never stored (the api died between start and insert) fails as OrderNeverStored', async () => {
    const { workflowIds } = await import('../workflows/ids');
    const { labOrderWorkflow } = await import('../workflows/lab-order');
    const { WorkflowFailedError } = await import('@temporalio/client');
    const orderId = (await import('node:crypto')).randomUUID();
    const temporal = app.deps.temporal;
    const start = () =>
      temporal.client.workflow.start(labOrderWorkflow, {
        workflowId: workflowIds.labOrder(orderId),
        taskQueue: temporal.taskQueue,
        args: [
          {
            orderId,
            order: { method: 'walk_in_test', lowLevelStatus: 'ordered', eventIds: [1], activateBy: null, createdWithActivateBy: false, labAccountId: null },
            activationTimeScale: 1,
            storeGraceMs: 300,
          },
        ],
        workflowIdConflictPolicy: 'USE_EXISTING',
        workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      });
    // As if the api crashed between starting the workflow and storing the order.
    const first = await start();
    const failure = await first.result().catch((err) => err);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect(failure.cause?.type).toBe('OrderNeverStored');
  }, 60000);

  /** A key whose first request claimed it and died before answering (its claim is older than the lease). */
  async function crashedClaim(key: string, body: unknown) {
    const { createHash, randomUUID } = await import('node:crypto');
    const route = 'POST /v3/order';
    const teamId = (await client.get(`/v2/user/${userId}`)).body.team_id;
    const long = new Date(Date.now() - 60_000);
    const doc = {
      _id: createHash('sha256').update(`${teamId}\u0000${route}\u0000${key}`).digest('hex'),
      team_id: teamId,
      route,
      request_sha256: createHash('sha256').update(JSON.stringify(body)).digest('hex'),
      resource_id: randomUUID(),
      state: 'pending' as const,
      claim: randomUUID(),
      claimed_at: long,
      response_status: null,
      response_body: null,
      created_at: long,
      completed_at: null,
    };
    await app.deps.repos.idempotencyKeys.claim(doc);
    return doc;
  }
  // Every defaulted field given, so the validated body (what the key's hash covers) is the body sent.
  const fullBody = () => ({
    ...orderBody(userId, tests.walk_in_test),
    consents: [{ consentType: 'terms-of-use', version: '1.0' }],
    priority: false,
    billing_type: 'client_bill',
  });

  it('a retried request whose first attempt died mid-way finishes under the same order id', async () => {
    const key = uniqueId('idem-crashed');
    const body = fullBody();
    const crashed = await crashedClaim(key, body);
    const retried = await client.post('/v3/order', body, { 'X-Idempotency-Key': key });
    expect(retried.status).toBe(200);
    expect(retried.body.order.id).toBe(crashed.resource_id);
    await orderReaches(client, crashed.resource_id, 'requisition_created');
  });

  it('after the lease, exactly one of several concurrent retries takes the claim over; the others are told it is in progress', async () => {
    const key = uniqueId('idem-takeover');
    const body = fullBody();
    const crashed = await crashedClaim(key, body);
    const answers = await Promise.all([1, 2, 3].map(() => client.post('/v3/order', body, { 'X-Idempotency-Key': key })));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409, 409]);
    expect(answers.find((a) => a.status === 200)!.body.order.id).toBe(crashed.resource_id);
    // Afterwards the key replays the one outcome.
    const replay = await client.post('/v3/order', body, { 'X-Idempotency-Key': key });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body.order.id).toBe(crashed.resource_id);
  });

  it("a stalled request whose claim was taken over can neither release, let go of nor complete its successor's claim", async () => {
    const repo = app.deps.repos.idempotencyKeys;
    const crashed = await crashedClaim(uniqueId('idem-stale'), fullBody());
    expect(await repo.takeOver(crashed._id, 'successor')).toBe(true);
    expect(await repo.takeOver(crashed._id, 'another')).toBe(false); // the successor's claim is live
    expect(await repo.release(crashed._id, crashed.claim)).toBe(false);
    expect(await repo.letGo(crashed._id, crashed.claim)).toBe(false);
    expect(await repo.complete(crashed._id, crashed.claim, 500, { detail: 'stale' })).toBe(false);
    const stored = await app.inspect.collection('idempotency_keys').findOne({ _id: crashed._id as never });
    expect(stored).toMatchObject({ claim: 'successor', state: 'pending' });
    expect(await repo.complete(crashed._id, 'successor', 200, { ok: true })).toBe(true);
  });
});
