type PlanNode = Record<string, unknown>;

/** Visits every object of an `explain` answer (plan nodes of either store, and whatever they hold). */
function eachNode(explain: unknown, visit: (node: PlanNode) => void): void {
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) {
      node.forEach(walk);
      return;
    }
    if (!node || typeof node !== 'object') return;
    visit(node as PlanNode);
    Object.values(node as PlanNode).forEach(walk);
  };
  walk(explain);
}

/**
 * The indexes a query plan uses to select documents, from `explain` on either store:
 * - MongoDB: `IXSCAN` stages (`indexName`) anywhere in the winning plan; a collection scan uses none.
 * - DocumentDB (through FerretDB): PostgreSQL plan nodes of an index scan (`Index Name`). Every scan of a
 *   collection also walks its `_id_` index bounded only by the collection's shard key
 *   (`shard_key_value = …`): that is the scan, not an index lookup, so it is not counted.
 */
export function indexesUsed(explain: unknown): string[] {
  const used = new Set<string>();
  eachNode(explain, (n) => {
    if (n.stage === 'IXSCAN' && typeof n.indexName === 'string') used.add(n.indexName);
    const type = n['Node Type'];
    const name = n['Index Name'];
    if (typeof type === 'string' && /Index/.test(type) && typeof name === 'string') {
      const condition = String(n['Index Cond'] ?? '');
      if (!/^\(?shard_key_value\b/.test(condition)) used.add(name);
    }
  });
  return [...used].sort();
}

/** True when the plan sorts documents after reading them (MongoDB `SORT` stage, PostgreSQL `Sort` node): the index did not give the order. */
export function sortsInMemory(explain: unknown): boolean {
  let sorted = false;
  eachNode(explain, (n) => {
    if (n.stage === 'SORT' || n['Node Type'] === 'Sort' || n['Node Type'] === 'Incremental Sort') sorted = true;
  });
  return sorted;
}

/**
 * The fields an index scan of the plan bounds (MongoDB: `indexBounds` other than [MinKey, MaxKey]; DocumentDB:
 * the fields named in `IndexDetails.indexBounds`), so a test can see that a page starts at its `_id` bound.
 */
export function indexBoundFields(explain: unknown): string[] {
  const fields = new Set<string>();
  eachNode(explain, (n) => {
    if (n.stage === 'IXSCAN' && n.indexBounds && typeof n.indexBounds === 'object') {
      for (const [field, bounds] of Object.entries(n.indexBounds as Record<string, string[]>)) {
        if (!(bounds.length === 1 && /MinKey, MaxKey|MaxKey, MinKey/.test(bounds[0]))) fields.add(field);
      }
    }
    if (Array.isArray(n.indexBounds) && typeof n.indexName === 'string') {
      for (const text of n.indexBounds as string[]) for (const m of String(text).matchAll(/"([^"]+)": (?:DESC|ASC)?[[(]/g)) fields.add(m[1]);
    }
  });
  return [...fields].sort();
}
