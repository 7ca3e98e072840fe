// Baseline of the webhook suite (scripts/bench/webhooks.mjs): the database work a delivery needs, done with the
// plain MongoDB driver against the same database, for the same number of events and endpoints, batched the way
// the dispatcher batches (WEBHOOK_BATCH_SIZE). Per batch of B events, one after another:
//
//   insertMany of B event documents                 (what a publish flush stores)
//   insertMany of B x k delivery documents          (the fan-out)
//   then for each of the k endpoints, one after another (one dispatcher batch each):
//     find its pending deliveries due now, sorted by next_attempt_at, limit B
//     updateOne of the endpoint's dispatcher document      (the run's send window for the batch)
//     find their events by _id $in                  (the bodies to send)
//     insertMany of the B attempt documents
//     updateMany of those deliveries to succeeded, over the attempt count read
//
// Documents have the store's shapes (the same helpers build them: envelopeOf, newDelivery, attemptId) and the
// scratch collections the store's indexes (WEBHOOK_STORE_INDEXES); they are dropped before and after. Left out,
// as the pipeline's own cost: the publish outbox entry, the endpoint read and the dispatcher's activity mark,
// the HTTP requests, Temporal. The event/s figure of this baseline is what the database allows for this work
// done one step after another; the delivered events/s of the real pipeline is reported as a ratio to it.
// Not like for like in one respect: the pipeline's clock stops at the receiver's last first-arrival, before
// that batch is recorded, and it records each batch while the next is read and sent, and publishes while it
// delivers; so with few batches, or a database that is slow to update, the ratio can exceed 1.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { distModule } from './environment.mjs';

const SCRATCH_PREFIX = 'bench_raw_webhook_';
const round = (x, digits = 2) => (x === null || x === undefined || !Number.isFinite(x) ? null : Math.round(x * 10 ** digits) / 10 ** digits);

/** Time summed per operation kind: `timed(op, fn)` runs fn and adds its duration to `opMs[op]`. */
export function opTimer(ops) {
  const opMs = Object.fromEntries(ops.map((op) => [op, 0]));
  const timed = async (op, fn) => {
    const t = performance.now();
    try {
      return await fn();
    } finally {
      opMs[op] += performance.now() - t;
    }
  };
  return { opMs, timed };
}

/**
 * The event documents of sequence numbers [from, to), as the publisher stores them (no producer key: the id is the
 * key); `envelopeOf` and `timeOrderedUuid` from dist/.
 */
export function eventDocsOf({ from, to, at, teamId, eventType, userOf, clientUserId, makeData }, { envelopeOf, timeOrderedUuid }) {
  const docs = [];
  for (let seq = from; seq < to; seq++) {
    const userId = userOf(seq);
    const envelope = { event_type: eventType, data: makeData(seq), team_id: teamId, user_id: userId, client_user_id: clientUserId };
    const id = timeOrderedUuid();
    docs.push({
      _id: id,
      team_id: teamId,
      idempotency_key: id,
      event_type: eventType,
      user_id: userId,
      client_user_id: clientUserId,
      body: envelopeOf(envelope),
      created_at: at,
      only_destination_id: null,
    });
  }
  return docs;
}

/**
 * Runs the baseline: `events` events to `endpoints` endpoints in batches of `batchSize`. `makeData(seq)` gives an
 * event's data; `config` the loaded configuration (the delivery policy snapshot). Returns
 * { seconds, eventsPerSec, deliveriesPerSec, delivered, batches, opMs } (opMs: time per operation kind, summed
 * over batches).
 */
export async function rawDeliveryWork(env, { events, endpoints, batchSize, teamId, eventType, userId, clientUserId, makeData, config }) {
  const [{ createIndexes }, { WEBHOOK_STORE_INDEXES }, { envelopeOf, attemptId }, { newDelivery, deliveryPolicyFrom }, { timeOrderedUuid }] = await Promise.all(
    [
      distModule('lib/platform/database/indexes.js'),
      distModule('lib/events/store.js'),
      distModule('lib/events/model.js'),
      distModule('lib/events/fan-out.js'),
      distModule('lib/platform/keys.js'),
    ],
  );
  const db = env.db;
  const names = { events: 'webhook_events', deliveries: 'webhook_deliveries', attempts: 'webhook_attempts', dispatchers: 'webhook_dispatchers' };
  const coll = Object.fromEntries(Object.entries(names).map(([k, name]) => [k, db.collection(`${SCRATCH_PREFIX}${name}`)]));
  const dropAll = () => Promise.all(Object.values(coll).map((c) => c.drop().catch(() => {})));
  await dropAll();
  for (const [k, name] of Object.entries(names)) await createIndexes(coll[k], WEBHOOK_STORE_INDEXES[name]);

  const policy = deliveryPolicyFrom(config);
  const endpointIds = Array.from({ length: endpoints }, () => randomUUID());
  const run = randomUUID();
  await coll.dispatchers.insertMany(endpointIds.map((id) => ({ _id: id, run, active_until: new Date(Date.now() + 60_000) })));
  const { opMs, timed } = opTimer(['insertEvents', 'insertDeliveries', 'findDue', 'sendWindow', 'findEvents', 'insertAttempts', 'updateDeliveries']);
  let delivered = 0;
  let batches = 0;

  /** One endpoint's dispatcher batch: returns how many deliveries it took. */
  const dispatch = async (endpointId, limit) => {
    const now = new Date();
    const due = await timed('findDue', () =>
      coll.deliveries
        .find({ destination_id: endpointId, status: 'pending', next_attempt_at: { $lte: now } })
        .sort({ next_attempt_at: 1 })
        .limit(limit)
        .toArray(),
    );
    if (!due.length) return 0;
    // The send window that keeps a superseded run and its replacement from sending the same delivery twice.
    const window = await timed('sendWindow', () =>
      coll.dispatchers.updateOne({ _id: endpointId, run }, { $set: { [`sending.${run}`]: { picked_at: now, until: new Date(now.getTime() + 45_000) } } }),
    );
    if (window.matchedCount !== 1) throw new Error('raw baseline: the send window was not written');
    const bodies = await timed('findEvents', () => coll.events.find({ _id: { $in: [...new Set(due.map((d) => d.event_id))] } }).toArray());
    if (bodies.length !== due.length) throw new Error(`raw baseline: ${due.length} deliveries but ${bodies.length} events found`);
    const at = new Date();
    const attempts = due.map((d) => ({
      _id: attemptId(d._id, d.attempts + 1),
      team_id: d.team_id,
      event_id: d.event_id,
      destination_id: d.destination_id,
      user_id: d.user_id,
      attempt: d.attempts + 1,
      trigger: d.trigger,
      timestamp: at,
      duration_ms: 1,
      status_code: 200,
      error_class: null,
      response_body: 'ok',
    }));
    await timed('insertAttempts', () => coll.attempts.insertMany(attempts, { ordered: false }));
    await timed('updateDeliveries', () =>
      coll.deliveries.updateMany(
        { _id: { $in: due.map((d) => d._id) }, status: 'pending', attempts: 0 },
        {
          $set: {
            status: 'succeeded',
            next_attempt_at: null,
            finished_at: at,
            updated_at: at,
            last_status_code: 200,
            last_error: null,
            attempts: 1,
            pass_attempts: 1,
          },
        },
      ),
    );
    batches++;
    return due.length;
  };

  try {
    const started = performance.now();
    for (let first = 0; first < events; first += batchSize) {
      const now = new Date();
      const eventDocs = eventDocsOf(
        { from: first, to: Math.min(events, first + batchSize), at: now, teamId, eventType, userOf: () => userId, clientUserId, makeData },
        {
          envelopeOf,
          timeOrderedUuid,
        },
      );
      const deliveryDocs = eventDocs.flatMap((e) => endpointIds.map((id) => newDelivery(e, id, policy, now)));
      await timed('insertEvents', () => coll.events.insertMany(eventDocs, { ordered: false }));
      await timed('insertDeliveries', () => coll.deliveries.insertMany(deliveryDocs, { ordered: false }));
      for (const id of endpointIds) delivered += await dispatch(id, batchSize);
    }
    const seconds = (performance.now() - started) / 1000;
    const expected = events * endpoints;
    const [succeeded, attempts] = await Promise.all([coll.deliveries.countDocuments({ status: 'succeeded' }), coll.attempts.countDocuments({})]);
    if (delivered !== expected || succeeded !== expected || attempts !== expected) {
      throw new Error(`raw baseline: expected ${expected} deliveries, took ${delivered}, ${succeeded} succeeded, ${attempts} attempts`);
    }
    return {
      seconds: round(seconds),
      eventsPerSec: round(events / seconds, 1),
      deliveriesPerSec: round(expected / seconds, 1),
      delivered,
      batches,
      opMs: Object.fromEntries(Object.entries(opMs).map(([k, v]) => [k, Math.round(v)])),
    };
  } finally {
    await dropAll();
  }
}
