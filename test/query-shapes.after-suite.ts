import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { indexServes } from '../lib/platform/database/indexes';
import { shapesOf, type ObservedQueryShape } from '../lib/platform/database/query-shapes';
import { ID_INDEX, INDEX_TABLE } from './support/index-table';

/**
 * Runs after the whole suite (scripts/test.mjs, second jest phase): every query the api and the worker sent
 * to the database while the suite ran — recorded by lib/platform/database/query-shapes.ts through MONGO_QUERY_SHAPE_LOG — is
 * served by an index its repository declares (architecture rule 2). The declared query shapes of
 * test/indexes.test.ts are the documentation; this is the check that nothing issues a query they forgot.
 */

/**
 * Queries that read a whole collection on purpose: maintenance passes an operator runs (npm run reencrypt).
 * `collection filter-fields` (as `label` prints them) -> where and why.
 */
const ONE_TIME_SCANS: Record<string, string> = {
  // lib/events/destinations/webhook/endpoints-store.ts: the re-encryption pass visits every endpoint.
  'webhook_endpoints {}': 'webhooks.ts reencrypt: visits every endpoint by design (npm run reencrypt)',
};

const dir = process.env.MONGO_QUERY_SHAPE_LOG;

function observedShapes(): { shapes: ObservedQueryShape[]; files: number } {
  if (!dir) throw new Error('MONGO_QUERY_SHAPE_LOG is not set: run the whole suite with `npm test` (this check runs after it).');
  const files = readdirSync(dir).filter((f) => f.endsWith('.jsonl'));
  const lines = new Set(files.flatMap((f) => readFileSync(path.join(dir, f), 'utf8').split('\n').filter(Boolean)));
  return { shapes: [...lines].map((l) => JSON.parse(l) as ObservedQueryShape), files: files.length };
}

const label = (s: ObservedQueryShape) => `${s.collection}.${s.op} filter {${s.filter.join(', ')}}${s.sort.length ? ` sort {${s.sort.join(', ')}}` : ''}`;

/** The `_id` index counts like any other: it serves a filter on `_id` with no sort, or sorted by `_id` alone. */
export function servedByDeclaredIndex(shape: ObservedQueryShape): boolean {
  const declared = INDEX_TABLE[shape.collection];
  return [ID_INDEX, ...(declared?.indexes ?? [])].some((index) => indexServes(index, shape.filter, shape.sort));
}

const { shapes, files } = observedShapes();
const scanKey = (s: ObservedQueryShape) => `${s.collection} {${s.filter.join(', ')}}`;
const product = shapes.filter((s) => !ONE_TIME_SCANS[scanKey(s)]);

describe('every query the api and the worker issued during the suite is served by a declared index', () => {
  test('queries were recorded by the api and worker processes of the suite', () => {
    expect(files).toBeGreaterThanOrEqual(2); // the worker and at least one jest worker (the api runs in it)
    expect(new Set(product.map((s) => s.collection)).size).toBeGreaterThanOrEqual(10);
  });

  test('every collection queried has declared indexes', () => {
    expect([...new Set(product.map((s) => s.collection))].filter((c) => !INDEX_TABLE[c])).toEqual([]);
  });

  test.each(product.map((s) => [label(s), s]))('%s', (_label, shape) => {
    expect(servedByDeclaredIndex(shape as ObservedQueryShape)).toBe(true);
  });

  test('the check itself rejects a query no declared index serves', () => {
    expect(servedByDeclaredIndex({ collection: 'webhook_deliveries', op: 'find', filter: ['event_id'], sort: [] })).toBe(false);
    expect(servedByDeclaredIndex({ collection: 'webhook_deliveries', op: 'find', filter: ['team_id', 'destination_id'], sort: ['updated_at'] })).toBe(false);
    expect(servedByDeclaredIndex({ collection: 'webhook_deliveries', op: 'find', filter: [], sort: [] })).toBe(false);
    expect(
      servedByDeclaredIndex({
        collection: 'webhook_deliveries',
        op: 'find',
        filter: ['destination_id', 'status', 'next_attempt_at'],
        sort: ['next_attempt_at'],
      }),
    ).toBe(true);
    // A filter naming `_id` is served by the `_id` index only without a sort on another field.
    expect(servedByDeclaredIndex({ collection: 'webhook_deliveries', op: 'find', filter: ['_id'], sort: [] })).toBe(true);
    expect(servedByDeclaredIndex({ collection: 'webhook_deliveries', op: 'find', filter: ['_id', 'team_id'], sort: ['updated_at'] })).toBe(false);
  });

  test('a count without a query (estimatedDocumentCount, collection metadata) is no query shape; a count with one is', () => {
    expect(shapesOf({ count: 'lab_orders' })).toEqual([]);
    expect(shapesOf({ count: 'lab_orders', query: { team_id: 't' } })).toEqual([{ collection: 'lab_orders', op: 'count', filter: ['team_id'], sort: [] }]);
  });

  test('the recorder sees the sort the driver sends (a Map) in its order', () => {
    const command = {
      find: 'lab_orders',
      filter: { team_id: 't', _id: { $lt: 'x' } },
      sort: new Map([
        ['created_at', -1],
        ['_id', -1],
      ]),
    };
    expect(shapesOf(command)).toEqual([{ collection: 'lab_orders', op: 'find', filter: ['_id', 'team_id'], sort: ['created_at', '_id'] }]);
  });
});
