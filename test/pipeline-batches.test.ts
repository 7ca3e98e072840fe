import { deliveryPolicyFrom } from '../lib/events/fan-out';
import { mergePage } from '../lib/events/destinations/pipeline/batch-log';
import { batchesOf, batchedDeliveries, deliveriesOfLogged, logOf, type PipelineBatchDoc } from '../lib/events/destinations/pipeline/batches';
import { deliveryId, type EventDoc } from '../lib/events/model';
import type { PipelineDoc } from '../lib/events/destinations/pipeline/model';
import { timeOrderedUuid } from '../lib/platform/keys';
import { loadConfig } from '../lib/platform/config';

/**
 * A pipeline's batches (lib/events/destinations/pipeline/batches.ts) and the delivery log's merge of their views with
 * delivery documents (batch-log.ts): pure, no database (test/pipelines.test.ts runs them on the real stack).
 */
const policy = deliveryPolicyFrom(loadConfig({}));
const at = new Date('2026-12-03T08:00:00Z');

const event = (eventType: string, userId: string | null): EventDoc => {
  const id = timeOrderedUuid();
  return {
    _id: id,
    team_id: 't',
    idempotency_key: id,
    event_type: eventType,
    user_id: userId,
    client_user_id: null,
    body: `{"n":"${id}"}`,
    created_at: at,
    only_destination_id: null,
  };
};
const pipeline = (id: string, routes: PipelineDoc['routes']) => ({ _id: id, team_id: 't', routes }) as PipelineDoc;

test("a flush's events make one batch per pipeline with a route for any of them, in event order, each with its route's target", () => {
  const events = [event('labtest.order.updated', 'u1'), event('daily.data.steps.created', 'u2'), event('daily.data.sleep.created', 'u1')];
  const batches = batchesOf(
    [...events].reverse(),
    [
      pipeline('p-lab', [{ event_type_prefix: 'labtest.', target: 'lab' }]),
      pipeline('p-none', [{ event_type_prefix: 'x.', target: 'x' }]),
      pipeline('p-all', [
        { event_type_prefix: 'daily.', target: 'daily' },
        { event_type_prefix: '', target: 'rest' },
      ]),
    ],
    policy,
    at,
  );
  expect(batches.map((b) => [b._id, b.events.map((e) => [e.id, e.target])])).toEqual([
    [`${events[0]._id}:p-lab`, [[events[0]._id, 'lab']]],
    [
      `${events[0]._id}:p-all`,
      [
        [events[0]._id, 'rest'],
        [events[1]._id, 'daily'],
        [events[2]._id, 'daily'],
      ],
    ],
  ]);
  expect(batches.every((b) => b.recheck === undefined)).toBe(true);
  expect(batchesOf(events, [pipeline('p', [{ event_type_prefix: '', target: 'all' }])], policy, at, true)[0].recheck).toBe(true);
});

test('the events of several batches come in event order, each as the delivery document it stands for', () => {
  const [a, b, c, d] = [event('e.x', 'u'), event('e.x', 'u'), event('e.x', 'v'), event('e.x', null)];
  const p = pipeline('p', [{ event_type_prefix: '', target: 'all' }]);
  const first = batchesOf([a, c], [p], policy, at)[0];
  const second = batchesOf([b, d], [p], policy, at)[0];
  const merged = batchedDeliveries([second, first]);
  expect(merged.map((m) => m.event.id)).toEqual([a._id, b._id, c._id, d._id]);
  expect(merged[1].delivery).toMatchObject({ _id: deliveryId(b._id, 'p'), destination_id: 'p', target: 'all', status: 'pending', attempts: 0, user_id: 'u' });
  expect(merged[1].batch).toBe(second);
});

test('a log document holds the events it delivered; skipped ones are only named; split ones are shown by their own documents', () => {
  const p = pipeline('p', [{ event_type_prefix: '', target: 'all' }]);
  const events = [event('e.x', 'u'), event('e.x', 'u'), event('e.x', 'v')];
  const batch: PipelineBatchDoc = batchesOf(events, [p], policy, at)[0];
  const attempt = { timestamp: at, duration_ms: 12, broker: null };
  const log = logOf(batch, attempt, [events[2]._id], new Set([events[0]._id]), at)!;
  expect(log.events.map((e) => e.id)).toEqual([events[1]._id, events[2]._id]);
  expect(log.skipped).toEqual([events[0]._id]);
  expect(log.last_event_id).toBe(events[2]._id);
  expect(deliveriesOfLogged(log, policy).map((d) => [d.event_id, d.status, d.attempts])).toEqual([[events[1]._id, 'succeeded', 1]]);
  expect(logOf(batch, attempt, [], new Set(events.map((e) => e._id)), at)).toBeNull();
});

describe('mergePage: delivery documents and batch views, newest first, each id once, pages that join up', () => {
  const ids = Array.from({ length: 40 }, () => timeOrderedUuid()).sort();
  const doc = (id: string, kind: string) => ({ _id: id, kind });
  // Every 4th id has a document of its own (split off); every id has a batch view.
  const documents = ids.filter((_, i) => i % 4 === 0).map((id) => doc(id, 'document'));
  const views = ids.map((id) => doc(id, 'view'));
  const documentPage = (after: string | null, limit: number) => {
    const below = documents.filter((d) => after === null || d._id < after).sort((a, b) => (a._id < b._id ? 1 : -1));
    return { items: below.slice(0, limit), more: below.length > limit };
  };

  test.each([1, 3, 7, 50])('pages of %i walk every id once, newest first, the document winning over the view', (limit) => {
    const seen: { _id: string; kind: string }[] = [];
    let after: string | null = null;
    for (let pages = 0; pages < 100; pages++) {
      const page: { items: { _id: string; kind: string }[]; more: boolean } = mergePage(documentPage(after, limit), views, after, limit);
      expect(page.items.length).toBeLessThanOrEqual(limit);
      seen.push(...page.items);
      if (!page.more) break;
      after = page.items[page.items.length - 1]._id;
    }
    expect(seen.map((x) => x._id)).toEqual([...ids].reverse());
    expect(seen.filter((x) => x.kind === 'document').map((x) => x._id)).toEqual(documents.map((d) => d._id).reverse());
  });
});
