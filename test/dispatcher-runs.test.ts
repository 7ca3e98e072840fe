import { randomUUID } from 'node:crypto';
import { publisherOverStore, startTestApp, type TestApp } from './support/harness';

/**
 * The store's side of a dispatcher run's fencing (lib/events/dispatcher.ts, README "How races are settled"), on the
 * real store: which run holds an endpoint, whose send windows a later run must respect, and when an older run is
 * refused. test/webhooks-claims.test.ts drives the same through stalled and replaced worker processes.
 */
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

const later = (ms: number) => new Date(Date.now() + ms);

describe('dispatcher runs and their send windows', () => {
  test('a run that took the endpoint over sees the open window of the run before it, and that run is refused from then on', async () => {
    const store = app.deps.repos.webhookStore;
    const endpoint = `endpoint-${randomUUID()}`;
    const [first, second] = [randomUUID(), randomUUID()];
    expect(await store.startRun(endpoint, first, later(60_000))).toEqual([]);
    const window = { picked_at: new Date(Date.now() - 1_000), until: later(30_000) };
    expect(await store.openSendWindow(endpoint, first, window)).toBe(true);

    // Temporal retried the activity: the new run holds the endpoint and keeps off the first run's batch.
    expect(await store.startRun(endpoint, second, later(60_000))).toEqual([window]);
    expect(await store.openSendWindow(endpoint, first, { picked_at: new Date(), until: later(30_000) })).toBe(false);
    expect(await store.resumeRun(endpoint, first, later(60_000))).toBe(false);
    expect(await store.openSendWindow(endpoint, second, { picked_at: new Date(), until: later(30_000) })).toBe(true);
    expect(await store.resumeRun(endpoint, second, later(60_000))).toBe(true);

    // The first run ends (its sends are done): a later run no longer sees its window.
    await store.endRun(endpoint, first, { idle: false });
    await store.endRun(endpoint, second, { idle: true });
    expect(await store.startRun(endpoint, randomUUID(), later(60_000))).toEqual([]);
  });

  test('a window that lapsed is not returned, and is dropped from the document', async () => {
    const store = app.deps.repos.webhookStore;
    const endpoint = `endpoint-${randomUUID()}`;
    const dead = randomUUID();
    await store.startRun(endpoint, dead, later(60_000));
    await store.openSendWindow(endpoint, dead, { picked_at: new Date(Date.now() - 60_000), until: new Date(Date.now() - 1) });
    expect(await store.startRun(endpoint, randomUUID(), later(60_000))).toEqual([]);
    const doc = await app.inspect.collection<{ _id: string; sending?: Record<string, unknown> }>('webhook_dispatchers').findOne({ _id: endpoint });
    expect(doc?.sending ?? {}).toEqual({});
  });

  test('a run resuming after its idle document expired writes it again and holds the endpoint', async () => {
    const store = app.deps.repos.webhookStore;
    const endpoint = `endpoint-${randomUUID()}`;
    const run = randomUUID();
    await store.startRun(endpoint, run, later(60_000));
    await store.markDispatcherIdle(endpoint);
    await app.inspect.collection('webhook_dispatchers').deleteOne({ _id: endpoint as never }); // the TTL's doing
    expect(await store.resumeRun(endpoint, run, later(60_000))).toBe(true);
    expect(await store.openSendWindow(endpoint, run, { picked_at: new Date(), until: later(30_000) })).toBe(true);
    expect(await store.activeDispatchers([endpoint])).toEqual(new Set([endpoint]));
  });

  test('an outcome is written only over the attempt count its run read', async () => {
    const store = app.deps.repos.webhookStore;
    const id = `${randomUUID()}:endpoint`;
    const now = new Date();
    await store.deliveries.insertOne({
      _id: id,
      team_id: 't',
      destination_id: 'endpoint',
      event_id: id.split(':')[0],
      event_type: 'x',
      user_id: null,
      status: 'pending',
      trigger: 'scheduled',
      next_attempt_at: now,
      attempts: 1,
      pass_attempts: 1,
      policy: { schedule_ms: [0, 1000], timeout_ms: 1000, throttle_floor_ms: 100, disable_after_ms: 60_000 },
      last_status_code: 500,
      last_error: 'HTTP 500',
      created_at: now,
      updated_at: now,
      finished_at: null,
    });
    // A run that read the delivery before its first attempt was recorded comes late: nothing changes.
    await store.changeDeliveries([{ ids: [id], attempts: 0, set: { status: 'succeeded', attempts: 1, next_attempt_at: null, finished_at: now } }]);
    expect(await store.deliveries.findOne({ _id: id })).toMatchObject({ status: 'pending', attempts: 1 });
    await store.changeDeliveries([{ ids: [id], attempts: 1, set: { status: 'succeeded', attempts: 2, next_attempt_at: null, finished_at: now } }]);
    expect(await store.deliveries.findOne({ _id: id })).toMatchObject({ status: 'succeeded', attempts: 2 });
  });
});

describe('publish spans in the outbox', () => {
  test('one outbox entry covers a second of publishing, and is removed once every flush under it is done', async () => {
    // The real store, watched: which outbox entries this publisher writes.
    const spans: string[] = [];
    const publisher = publisherOverStore(app, { insertOutbox: (real, doc) => (spans.push(doc._id), real.insertOutbox(doc)) });
    const outbox = app.inspect.collection<{ _id: string; events_from: Date; events_until: Date }>('webhook_outbox');
    const teamId = `team-${randomUUID()}`;
    const started = Date.now();
    const published = await Promise.all(Array.from({ length: 40 }, (_, i) => publisher.publish({ teamId, eventType: 'labtest.order.updated', data: { i } })));
    // Entries are per second of publishing, not per flush (40 publishes, up to four flushes at a time).
    expect(spans.length).toBeGreaterThanOrEqual(1);
    expect(spans.length).toBeLessThanOrEqual(Math.ceil((Date.now() - started) / 1000) + 1);
    const open = await outbox.find({ _id: { $in: spans } }).toArray();
    expect(open.length).toBeGreaterThanOrEqual(1); // the last span lasts up to a second after it began
    const created = (
      await app.inspect
        .collection('webhook_events')
        .find({ _id: { $in: published.map((p) => p.id) as never[] } })
        .toArray()
    ).map((e) => (e.created_at as Date).getTime());
    expect(created).toHaveLength(40);
    const last = open.at(-1)!;
    expect(created.some((t) => t >= last.events_from.getTime() && t < last.events_until.getTime())).toBe(true);
    await publisher.settle(); // closes the span: every flush under it is done
    expect(await outbox.countDocuments({ _id: { $in: spans } })).toBe(0);
  });
});
