// Baseline of the pipeline suite (scripts/bench/pipelines.mjs): the database work of a pipeline's per-batch record
// (lib/events/destinations/pipeline/batches.ts), done with the plain MongoDB driver against the same database, for
// the same number of events, batched the way the dispatcher batches (WEBHOOK_BATCH_SIZE). Per batch of B events,
// one after another:
//
//   insertMany of B event documents                 (what a publish flush stores)
//   insertOne of the queued batch, with the bodies   (the fan-out)
//   find the pipeline's due batches, soonest first   (the dispatcher)
//   updateOne of the pipeline's dispatcher document  (the run's send window)
//   insertOne of the batch's log document            (the delivery record: ids, users, types, the attempt)
//   deleteMany of the sent queued batch
//
// Documents have the store's shapes (the same helpers build them: envelopeOf, batchesOf, logOf) and the scratch
// collections the store's indexes (WEBHOOK_STORE_INDEXES, PIPELINE_BATCH_INDEXES); they are dropped before and after.
// Bodies are stored plain (the service encrypts them: its own CPU, not database work). Left out, as the pipeline's
// own cost: the outbox entry, the pipeline read, the broker, Temporal. The pipeline's delivered events/s is reported
// as a ratio to this figure, which the database allows for this work done one step after another.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { distModule } from './environment.mjs';
import { eventDocsOf, opTimer } from './webhook-db-baseline.mjs';

const SCRATCH_PREFIX = 'bench_raw_pipeline_';
const round = (x, digits = 2) => (x === null || x === undefined || !Number.isFinite(x) ? null : Math.round(x * 10 ** digits) / 10 ** digits);

/**
 * Runs the baseline: `events` events through one pipeline in batches of `batchSize`. `makeData(seq)` gives an
 * event's data, `userOf(seq)` its user; `config` the loaded configuration (the delivery policy snapshot). Returns
 * { seconds, eventsPerSec, delivered, batches, opMs } (opMs: time per operation kind, summed over batches).
 */
export async function rawBatchWork(env, { events, batchSize, teamId, eventType, userOf, clientUserId, makeData, config }) {
  const [
    { createIndexes },
    { WEBHOOK_STORE_INDEXES },
    { PIPELINE_BATCH_INDEXES },
    { envelopeOf },
    { deliveryPolicyFrom },
    { batchesOf, logOf },
    { timeOrderedUuid },
  ] = await Promise.all([
    distModule('lib/platform/database/indexes.js'),
    distModule('lib/events/store.js'),
    distModule('lib/events/destinations/pipeline/batches-store.js'),
    distModule('lib/events/model.js'),
    distModule('lib/events/fan-out.js'),
    distModule('lib/events/destinations/pipeline/batches.js'),
    distModule('lib/platform/keys.js'),
  ]);
  const db = env.db;
  const indexes = {
    webhook_events: WEBHOOK_STORE_INDEXES.webhook_events,
    webhook_dispatchers: WEBHOOK_STORE_INDEXES.webhook_dispatchers,
    ...PIPELINE_BATCH_INDEXES,
  };
  const coll = Object.fromEntries(Object.keys(indexes).map((name) => [name, db.collection(`${SCRATCH_PREFIX}${name}`)]));
  const dropAll = () => Promise.all(Object.values(coll).map((c) => c.drop().catch(() => {})));
  await dropAll();
  for (const [name, specs] of Object.entries(indexes)) await createIndexes(coll[name], specs);

  const policy = deliveryPolicyFrom(config);
  const pipeline = { _id: randomUUID(), team_id: teamId, routes: [{ event_type_prefix: '', target: 'bench.raw' }] };
  const run = randomUUID();
  await coll.webhook_dispatchers.insertOne({ _id: pipeline._id, run, active_until: new Date(Date.now() + 60_000) });
  const { opMs, timed } = opTimer(['insertEvents', 'insertBatch', 'findDue', 'sendWindow', 'insertLog', 'deleteBatch']);
  let delivered = 0;
  let batches = 0;
  try {
    const started = performance.now();
    for (let first = 0; first < events; first += batchSize) {
      const now = new Date();
      const eventDocs = eventDocsOf(
        { from: first, to: Math.min(events, first + batchSize), at: now, teamId, eventType, userOf, clientUserId, makeData },
        {
          envelopeOf,
          timeOrderedUuid,
        },
      );
      await timed('insertEvents', () => coll.webhook_events.insertMany(eventDocs, { ordered: false }));
      const [batch] = batchesOf(eventDocs, [pipeline], policy, now);
      await timed('insertBatch', () => coll.pipeline_batches.insertOne(batch));
      const due = await timed('findDue', () =>
        coll.pipeline_batches
          .find({ destination_id: pipeline._id, next_attempt_at: { $lte: new Date() } })
          .sort({ next_attempt_at: 1 })
          .limit(20)
          .toArray(),
      );
      if (due.length !== 1 || due[0].events.length !== eventDocs.length) throw new Error(`raw baseline: expected the one queued batch, found ${due.length}`);
      // The send window that keeps a superseded run and its replacement from sending the same batch twice.
      const window = await timed('sendWindow', () =>
        coll.webhook_dispatchers.updateOne(
          { _id: pipeline._id, run },
          { $set: { [`sending.${run}`]: { picked_at: now, until: new Date(now.getTime() + 45_000) } } },
        ),
      );
      if (window.matchedCount !== 1) throw new Error('raw baseline: the send window was not written');
      const at = new Date();
      const log = logOf(due[0], { timestamp: at, duration_ms: 1, broker: 'confirmed' }, [], new Set(), at);
      await timed('insertLog', () => coll.pipeline_batch_log.insertOne(log));
      await timed('deleteBatch', () => coll.pipeline_batches.deleteMany({ _id: { $in: [due[0]._id] } }));
      delivered += log.events.length;
      batches++;
    }
    const seconds = (performance.now() - started) / 1000;
    const [logged, queued] = await Promise.all([coll.pipeline_batch_log.countDocuments({}), coll.pipeline_batches.countDocuments({})]);
    if (delivered !== events || logged !== batches || queued !== 0) {
      throw new Error(`raw baseline: expected ${events} events logged in ${batches} batches, logged ${delivered} in ${logged}, ${queued} left queued`);
    }
    return {
      seconds: round(seconds),
      eventsPerSec: round(events / seconds, 1),
      delivered,
      batches,
      opMs: Object.fromEntries(Object.entries(opMs).map(([k, v]) => [k, Math.round(v)])),
    };
  } finally {
    await dropAll();
  }
}
