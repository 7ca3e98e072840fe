import { publishEvent } from '../lib/events/publisher';
import { labOrderStatusQuery } from '../workflows/lab-order';
import { userDeletionStateQuery } from '../workflows/user-deletion';
import { createTenant, eventually, managementClient, teamClient, uniqueId, type HttpClient, type Tenant } from './support/harness';
import { createUser, daysFromToday, labTestIds, lowOf, orderBody } from './support/lab';
import { startReceiver, type Receiver } from './support/receiver';
import { startTimeSkippingStack, type TimeSkippingStack } from './support/time-skipping';

/**
 * The multi-day timers at their real durations (7-day grace period, activate_by, the webhook retry schedule,
 * auto-disable after 5 days of failing) on Temporal's time-skipping test server: the real app, workflows and
 * activities, the suite's database and real HTTP receivers; only the clock jumps (test/support/time-skipping.ts).
 */
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

let stack: TimeSkippingStack;
let tenant: Tenant;
let api: HttpClient;
let mgmt: HttpClient;
const receivers: Receiver[] = [];

beforeAll(async () => {
  stack = await startTimeSkippingStack('time-skipping');
  tenant = await createTenant(stack.app.deps, 'Time skipping');
  api = teamClient(stack.app, tenant);
  mgmt = managementClient(stack.app, tenant);
}, 120_000);
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await stack?.close();
});

const workflow = (id: string) => stack.app.deps.temporal.client.workflow.getHandle(id);

describe('user deletion: the 7-day grace period', () => {
  const deleteUser = async () => {
    const user = (await api.post('/v2/user/', { client_user_id: uniqueId(), fallback_birth_date: '1970-01-01' })).body;
    expect((await api.del(`/v2/user/${user.user_id}`)).status).toBe(200);
    return user as { user_id: string; client_user_id: string };
  };

  it('a user is still restorable a minute before the 7 days are over, and undo then restores it', async () => {
    const user = await deleteUser();
    const deletion = workflow(`user-deletion:${user.user_id}`);
    const state = await deletion.query(userDeletionStateQuery);
    expect(state.phase).toBe('grace');
    const eraseAfter = Date.parse(state.eraseAfter!);
    expect(eraseAfter - (await stack.serverNow())).toBeGreaterThan(7 * DAY - MINUTE);

    await stack.skip(eraseAfter - (await stack.serverNow()) - MINUTE);
    expect((await deletion.query(userDeletionStateQuery)).phase).toBe('grace');
    expect(await stack.app.deps.repos.users.find(tenant.teamId, user.user_id)).toMatchObject({ status: 'pending_deletion' });
    expect((await api.post(`/v2/user/undo_delete?user_id=${user.user_id}`)).status).toBe(200);
    expect((await api.get(`/v2/user/${user.user_id}`)).status).toBe(200);
    // The restored run has nothing left to time: it ends (the undo is its last request), the user untouched.
    expect(await stack.result(deletion.workflowId)).toEqual({ outcome: 'restored' });
    expect(await stack.app.deps.repos.users.find(tenant.teamId, user.user_id)).toMatchObject({ status: 'active', client_user_id: user.client_user_id });
  });

  it("erases the user's data once the 7 days are over, not before, and undo then says so", async () => {
    const connectionId = uniqueId('conn');
    const user = (await api.post('/v2/user/', { client_user_id: uniqueId(), fallback_birth_date: '1970-01-01' })).body as {
      user_id: string;
      client_user_id: string;
    };
    const now = new Date();
    await stack.app.deps.repos.connections.connections.insertOne({
      _id: connectionId,
      team_id: tenant.teamId,
      user_id: user.user_id,
      provider: 'fitbit',
      connection_key: 'fitbit',
      adapter: 'demo',
      status: 'connected',
      created_on: now,
      updated_at: now,
    });
    const event = await publishEvent(stack.app.deps, {
      teamId: tenant.teamId,
      eventType: 'provider.connection.created',
      data: { user_id: user.user_id },
      userId: user.user_id,
      clientUserId: user.client_user_id,
    });
    const deletedAt = await stack.serverNow();
    expect((await api.del(`/v2/user/${user.user_id}`)).status).toBe(200);
    const deletion = workflow(`user-deletion:${user.user_id}`);

    await stack.skip(7 * DAY - 2 * MINUTE);
    expect((await deletion.query(userDeletionStateQuery)).phase).toBe('grace');
    expect(await stack.app.deps.repos.webhookStore.getEvent(event.id)).not.toBeNull();

    await stack.skip(3 * MINUTE);
    expect(await stack.result(deletion.workflowId)).toEqual({
      outcome: 'erased',
      erased: { connections: 1, wearable_data: 0, phone_sign_ins: 0, apple_health_imports: 0, lab_orders: 0, insurance: 0, events: 1 },
    });
    expect((await stack.serverNow()) - deletedAt).toBeGreaterThanOrEqual(7 * DAY);
    const doc = await stack.app.deps.repos.users.find(tenant.teamId, user.user_id);
    expect(doc).toMatchObject({ status: 'erased' });
    expect(doc).not.toHaveProperty('client_user_id');
    expect(doc).not.toHaveProperty('fallback_birth_date');
    expect(await stack.app.deps.repos.connections.listForUser(tenant.teamId, user.user_id)).toEqual([]);
    expect(await stack.app.deps.repos.webhookStore.getEvent(event.id)).toBeNull();
    expect((await api.get(`/v2/user/${user.user_id}`)).body).toEqual({ detail: 'User not found.' });
    for (const query of [`user_id=${user.user_id}`, `client_user_id=${encodeURIComponent(user.client_user_id)}`]) {
      const undo = await api.post(`/v2/user/undo_delete?${query}`);
      expect(undo.status).toBe(400);
      expect(undo.body.detail).toMatch(/grace period ended.*erased/);
    }
    // The client_user_id is free for a new user.
    expect((await api.post('/v2/user/', { client_user_id: user.client_user_id })).status).toBe(200);
  });
});

describe('lab orders: activate_by', () => {
  it('waits for 00:00 UTC of its activate_by date, then dispatches the order to the lab', async () => {
    const userId = await createUser(api);
    const tests = await labTestIds(api);
    const activateBy = daysFromToday(3); // today is the server's date: this process's clock follows it
    const created = await api.post('/v3/order', orderBody(userId, tests.walk_in_test, { activate_by: activateBy }));
    expect(created.status).toBe(200);
    const order = created.body.order;
    const orderWorkflow = workflow(`lab-order:${order.id}`);
    const due = Date.parse(`${activateBy}T00:00:00Z`);
    expect(due - (await stack.serverNow())).toBeGreaterThan(2 * DAY);

    await stack.skip(due - (await stack.serverNow()) - MINUTE);
    expect(lowOf(await orderWorkflow.query(labOrderStatusQuery))).toBe('ordered');
    expect((await api.get(`/v3/order/${order.id}`)).body.events.map((e: { status: string }) => lowOf(e.status))).toEqual(['ordered']);

    await stack.skip(2 * MINUTE);
    const dispatched = await eventually(
      async () => {
        const res = await api.get(`/v3/order/${order.id}`);
        return lowOf(res.body.last_event.status) === 'requisition_created' && res.body;
      },
      30_000,
      `order ${order.id} dispatched`,
    );
    expect(dispatched.events.map((e: { status: string }) => lowOf(e.status))).toEqual(['ordered', 'requisition_created']);
    expect(Date.parse(dispatched.last_event.created_at)).toBeGreaterThanOrEqual(due);
    expect(lowOf(await orderWorkflow.query(labOrderStatusQuery))).toBe('requisition_created');
  });
});

describe('webhooks: the retry schedule and auto-disable', () => {
  const base = () => `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${stack.app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`;
  const receiver = async (status: number) => {
    const r = await startReceiver(() => ({ status, body: status === 200 ? 'ok' : 'boom' }));
    receivers.push(r);
    return r;
  };
  const createWebhook = async (url: string, extra: Record<string, unknown> = {}): Promise<string> => {
    const res = await mgmt.post(base(), { url, ...extra });
    expect(res.status).toBe(200);
    return res.body.id;
  };
  /** Publishes an event and waits (clock stopped) until its first attempt reaches `rx`: fan-out and wake-up happen after the publish returns. */
  const publishTo = async (rx: Receiver) => {
    const event = await publishEvent(stack.app.deps, { teamId: tenant.teamId, eventType: 'labtest.order.updated', data: { n: 1 } });
    await eventually(async () => rx.requests.some((r) => r.headers['webhook-id'] === event.id), 30_000, `the first attempt of ${event.id}`);
    return event;
  };
  const delivery = (endpointId: string, eventId: string) =>
    stack.app.inspect.collection('webhook_deliveries').findOne({ destination_id: endpointId, event_id: eventId });

  it('a failing event is attempted on the configured schedule (0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; ±20%), then fails', async () => {
    const schedule = stack.app.deps.config.WEBHOOK_RETRY_SCHEDULE_MS.split(',').map(Number);
    const rx = await receiver(500);
    const endpointId = await createWebhook(rx.url, { filter_types: ['labtest.order.updated'] });
    const event = await publishTo(rx);

    // The whole schedule at its longest (+20% jitter), and an hour: every attempt has been made and recorded.
    await stack.skip(schedule.reduce((sum, ms) => sum + ms * 1.2, HOUR));
    const failed = await eventually(
      async () => {
        const d = await delivery(endpointId, event.id);
        return d?.status === 'failed' && d;
      },
      30_000,
      `delivery of ${event.id} to fail`,
    );
    expect(failed.attempts).toBe(schedule.length);
    expect(rx.requests).toHaveLength(schedule.length);
    expect(new Set(rx.requests.map((r) => r.headers['webhook-id']))).toEqual(new Set([event.id]));
    // Each gap is the schedule's delay with its jitter, plus the time the attempt itself took.
    for (let i = 1; i < schedule.length; i++) {
      const gap = rx.requests[i].at - rx.requests[i - 1].at;
      expect(gap).toBeGreaterThanOrEqual(Math.floor(schedule[i] * 0.8));
      expect(gap).toBeLessThanOrEqual(Math.ceil(schedule[i] * 1.2) + 5000);
    }
    const attempts = await mgmt.get(`${base()}/events/${event.id}/attempts`);
    expect(attempts.body.data).toHaveLength(schedule.length);
    expect((await mgmt.get(`${base()}/${endpointId}`)).body.disabled).toBe(false); // ~28 h of failing: not 5 days
    await mgmt.del(`${base()}/${endpointId}`);
  });

  it('an endpoint failing for 5 days is disabled (not after 4 days 23 h), the team is told, and its dispatcher stops', async () => {
    const rx = await receiver(500);
    const watcher = await receiver(200);
    const endpointId = await createWebhook(rx.url, { filter_types: ['labtest.order.updated'] });
    await createWebhook(watcher.url, { filter_types: ['webhook.disabled'] });

    // Day 0: the first failure starts the clock; the event runs through its schedule (~28 h, up to 33 h with its
    // +20% jitter) and fails.
    const schedule = stack.app.deps.config.WEBHOOK_RETRY_SCHEDULE_MS.split(',').map(Number);
    const first = await publishTo(rx);
    await stack.skip(schedule.reduce((sum, ms) => sum + ms * 1.2, HOUR));
    await eventually(async () => (await delivery(endpointId, first.id))?.status === 'failed', 30_000, `delivery of ${first.id} to fail`);
    const stored = await stack.app.inspect.collection('webhook_endpoints').findOne({ _id: endpointId as never });
    const failingSince: number = stored?.failing_since?.getTime();
    expect(failingSince - rx.requests[0].at).toBeGreaterThanOrEqual(0); // recorded when the first attempt's answer came
    expect(failingSince - rx.requests[0].at).toBeLessThan(MINUTE);

    // 4 days 23 h in: another failure, still inside the 5 days.
    await stack.skip(failingSince + 5 * DAY - HOUR - (await stack.serverNow()));
    const second = await publishTo(rx);
    await eventually(async () => (await delivery(endpointId, second.id))?.attempts >= 1, 30_000, 'the second attempt recorded');
    expect((await mgmt.get(`${base()}/${endpointId}`)).body.disabled).toBe(false);

    // Its retries (5 s, 5 min, 30 min, 2 h) carry on past the 5 days: the first failing attempt after them disables the endpoint.
    // At their longest (+20% jitter) they take 3 h 6 min; an hour more, then wait for the answer to be recorded.
    await stack.skip(schedule.slice(1, 5).reduce((sum, ms) => sum + ms * 1.2, HOUR));
    const disabled = await eventually(
      async () => {
        const body = (await mgmt.get(`${base()}/${endpointId}`)).body;
        return body.disabled_reason === 'failing' && body;
      },
      30_000,
      'the endpoint to be disabled',
    );
    expect(disabled.disabled_reason).toBe('failing');
    const lastAttempt = rx.requests[rx.requests.length - 1].at;
    expect(lastAttempt - failingSince).toBeGreaterThanOrEqual(5 * DAY);

    const body = await eventually(
      async () => watcher.requests.map((r) => JSON.parse(r.body)).find((b) => b.data.webhook_id === endpointId),
      30_000,
      "webhook.disabled at the team's other endpoint",
    );
    expect(body).toMatchObject({
      event_type: 'webhook.disabled',
      data: { webhook_id: endpointId, reason: 'failing', failing_since: new Date(failingSince).toISOString() },
    });

    // The dispatcher ends once the endpoint's pending deliveries are drained: no attempt after that.
    const sent = rx.requests.length;
    await stack.result(`destination-dispatch:${endpointId}`);
    expect(rx.requests).toHaveLength(sent);
    expect((await delivery(endpointId, second.id))?.status).toBe('failed');
  });
});
