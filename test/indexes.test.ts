import { coveredBy, type IndexSpec, type QueryShape } from '../lib/repositories/indexes';
import { IDEMPOTENCY_QUERY_SHAPES, LAB_ORDER_INDEXES, ORDER_QUERY_SHAPES, RESULTS_QUERY_SHAPES } from '../lib/repositories/lab-orders';
import { LAB_TEST_INDEXES, LAB_TEST_QUERY_SHAPES } from '../lib/repositories/lab-tests';
import { SECRET_INDEXES, SECRET_QUERY_SHAPES } from '../lib/repositories/secrets';
import { startTestApp } from './support/harness';

/**
 * Every query shape a repository declares is served by one of its declared indexes (architecture rule 2):
 * FerretDB scans whatever the index, so only this check shows a missing index before production does.
 */
const ID_INDEX: IndexSpec = { key: { _id: 1 }, unique: true };
const collections: Record<string, { shapes: QueryShape[]; indexes: IndexSpec[] }> = {
  lab_orders: { shapes: ORDER_QUERY_SHAPES, indexes: LAB_ORDER_INDEXES.lab_orders },
  lab_results: { shapes: RESULTS_QUERY_SHAPES, indexes: LAB_ORDER_INDEXES.lab_results },
  idempotency_keys: { shapes: IDEMPOTENCY_QUERY_SHAPES, indexes: LAB_ORDER_INDEXES.idempotency_keys },
  lab_tests: { shapes: LAB_TEST_QUERY_SHAPES, indexes: LAB_TEST_INDEXES.lab_tests },
  deployment_secrets: { shapes: SECRET_QUERY_SHAPES, indexes: SECRET_INDEXES },
};

describe('declared query shapes have indexes', () => {
  for (const [name, { shapes, indexes }] of Object.entries(collections)) {
    it.each(shapes.map((s) => [s.name, s]))(`${name}: %s`, (_label, shape) => {
      expect(coveredBy(shape as QueryShape, [ID_INDEX, ...indexes])).toBe(true);
    });
  }

  it('the coverage rule itself rejects a shape without a matching index', () => {
    const indexes: IndexSpec[] = [{ key: { team_id: 1, created_at: -1 } }];
    expect(coveredBy({ name: 'by user', filter: ['team_id', 'user_id'] }, indexes)).toBe(false);
    expect(coveredBy({ name: 'sorted differently', filter: ['team_id'], sort: ['updated_at'] }, indexes)).toBe(false);
    expect(coveredBy({ name: 'ok', filter: ['team_id'], sort: ['created_at'] }, indexes)).toBe(true);
  });

  it('the database holds every declared index after start-up (real MongoDB-wire store)', async () => {
    const app = await startTestApp();
    try {
      for (const [name, { indexes }] of Object.entries(collections)) {
        const present = (await app.deps.db.collection(name).indexes()).map((ix) => JSON.stringify(ix.key));
        for (const index of indexes) expect(present).toContain(JSON.stringify(index.key));
      }
    } finally {
      await app.close();
    }
  });
});
