import type { Db } from 'mongodb';
import { insertIgnoringDuplicates } from '../platform/database/bulk';
import { type WebhookStore } from './store';
import { attemptId, deliveryId, envelopeOf, type AttemptDoc, type DeliveryDoc, type DeliveryPolicy, type EventDoc } from './model';

/**
 * One-time rewrite of the previous webhook layout (queue bundles and batch documents holding JSON strings)
 * into one document per delivery and per attempt, so a database from an earlier version keeps its pending
 * deliveries and its delivery log. Idempotent (ids are deterministic), run once per database by `runOnce`.
 */
type Legacy = Record<string, unknown> & { _id: string };
type LegacyItem = Omit<DeliveryDoc, '_id' | 'status' | 'endpoint_id' | 'next_attempt_at' | 'updated_at' | 'finished_at' | 'created_at' | 'policy'> & {
  policy?: DeliveryPolicy;
  created_at: string | Date;
};
type LegacyRecord = Omit<DeliveryDoc, 'created_at' | 'finished_at' | 'updated_at'> & { created_at: string | Date; finished_at: string | Date };

const OLD_COLLECTIONS = ['webhook_queue', 'webhook_queue_items', 'webhook_deliveries_succeeded'];
/** Finished records carried no policy; a finished delivery is only sent again by a resend, which sets its own. */
const FINISHED_POLICY: DeliveryPolicy = { schedule_ms: [0], timeout_ms: 15_000, throttle_floor_ms: 60_000, disable_after_ms: 5 * 24 * 3_600_000 };

export async function migrateLegacyWebhookLayout(db: Db, store: WebhookStore): Promise<void> {
  const policy = FINISHED_POLICY;
  const raw = (name: string) => db.collection<Legacy>(name);
  // Events of the oldest layout kept `data` as a field.
  for (const e of await raw('webhook_events').find({ data: { $exists: true } }).toArray()) {
    await raw('webhook_events').updateOne({ _id: e._id }, { $set: { body: envelopeOf(e as unknown as EventDoc & { data: Record<string, unknown> }) }, $unset: { data: '' } });
  }
  await store.events.dropIndex('team_id_1_idempotency_key_1').catch(() => undefined);
  for (const o of await raw('webhook_outbox').find({ event_ids: { $exists: false } }).toArray()) {
    await raw('webhook_outbox').updateOne({ _id: o._id }, { $set: { event_ids: [o._id] } });
  }

  // Finished records: failures were single documents lacking the new fields; successes were batches.
  for (const d of await raw('webhook_deliveries').find({ next_attempt_at: { $exists: false } }).toArray()) {
    const finished = (d.finished_at as Date) ?? new Date();
    await raw('webhook_deliveries').updateOne(
      { _id: d._id },
      { $set: { next_attempt_at: null, pass_attempts: d.attempts ?? 0, trigger: 'scheduled', policy, updated_at: finished, finished_at: finished } },
    );
  }
  for (const batch of await raw('webhook_deliveries_succeeded').find({}).toArray()) {
    const records = JSON.parse(String(batch.payload)) as LegacyRecord[];
    await insertIgnoringDuplicates(
      store.deliveries,
      records.map((r) => ({ ...r, next_attempt_at: null, pass_attempts: r.attempts, trigger: 'scheduled' as const, policy, created_at: new Date(r.created_at), finished_at: new Date(r.finished_at), updated_at: new Date(r.finished_at) })),
    );
  }

  // Attempt batches become one document per attempt.
  for (const batch of await raw('webhook_attempts').find({ $or: [{ payload: { $exists: true } }, { attempts: { $type: 'array' } }] }).toArray()) {
    const list = (typeof batch.payload === 'string' ? JSON.parse(batch.payload) : batch.attempts) as (Omit<AttemptDoc, 'timestamp'> & { timestamp: string | Date })[];
    await insertIgnoringDuplicates(
      store.attempts,
      list.map((a) => ({ ...a, _id: attemptId(deliveryId(a.event_id, a.endpoint_id), a.attempt), timestamp: new Date(a.timestamp) })),
    );
    await raw('webhook_attempts').deleteOne({ _id: batch._id });
  }

  // Queued deliveries: the active state wins over an older finished record (a resend in progress).
  const itemsDocs = new Map((await raw('webhook_queue_items').find({}).toArray()).map((d) => [d._id, d]));
  for (const entry of await raw('webhook_queue').find({}).toArray()) {
    const doc = itemsDocs.get((entry.items_id as string | undefined) ?? entry._id);
    if (!doc) continue;
    const stored = typeof doc.payload === 'string' ? (JSON.parse(doc.payload) as { policy: DeliveryPolicy; items: LegacyItem[] }) : { policy, items: doc.items as LegacyItem[] };
    const positions = typeof entry.only === 'string' ? entry.only.split(',').map(Number) : stored.items.map((_, i) => i);
    const endpointId = entry.endpoint_id as string;
    for (const item of positions.flatMap((i) => stored.items[i] ?? [])) {
      const created = new Date(item.created_at);
      const delivery: DeliveryDoc = {
        _id: deliveryId(item.event_id, endpointId),
        team_id: item.team_id,
        endpoint_id: endpointId,
        event_id: item.event_id,
        event_type: item.event_type,
        user_id: item.user_id,
        status: 'pending',
        trigger: item.trigger,
        next_attempt_at: entry.next_attempt_at as Date,
        attempts: item.attempts,
        pass_attempts: item.pass_attempts,
        policy: item.policy ?? stored.policy,
        last_status_code: item.last_status_code,
        last_error: item.last_error,
        created_at: created,
        updated_at: new Date(),
        finished_at: null,
      };
      await store.deliveries.replaceOne({ _id: delivery._id }, delivery, { upsert: true });
    }
  }
  for (const name of OLD_COLLECTIONS) await db.dropCollection(name).catch(() => undefined);
}
