/**
 * The indexes a query plan uses to select documents, from `explain` on either store:
 * - MongoDB: `IXSCAN` stages (`indexName`) anywhere in the winning plan; a collection scan uses none.
 * - DocumentDB (through FerretDB): PostgreSQL plan nodes of an index scan (`Index Name`). Every scan of a
 *   collection also walks its `_id_` index bounded only by the collection's shard key
 *   (`shard_key_value = …`): that is the scan, not an index lookup, so it is not counted.
 */
export function indexesUsed(explain: unknown): string[] {
  const used = new Set<string>();
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(walk);
    if (!node || typeof node !== 'object') return;
    const n = node as Record<string, unknown>;
    if (n.stage === 'IXSCAN' && typeof n.indexName === 'string') used.add(n.indexName);
    const type = n['Node Type'];
    const name = n['Index Name'];
    if (typeof type === 'string' && /Index/.test(type) && typeof name === 'string') {
      const condition = String(n['Index Cond'] ?? '');
      if (!/^\(?shard_key_value\b/.test(condition)) used.add(name);
    }
    Object.values(n).forEach(walk);
  };
  walk(explain);
  return [...used].sort();
}
