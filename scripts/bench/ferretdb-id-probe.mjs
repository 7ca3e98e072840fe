// What the FerretDB build's _id-index patch (scripts/stack.mjs patchSqliteIdLookups) changes: `_id` lookups and
// `_id`-filtered updates on a collection of N documents, against any MongoDB-wire server.
//
//   node scripts/bench/ferretdb-id-probe.mjs mongodb://127.0.0.1:<port>/ [N=5000]
//
// Run it against a FerretDB started from each build (unpatched and patched) on an empty state dir; it uses
// the database `probe` and drops its collection first.
import { MongoClient } from 'mongodb';

const url = process.argv[2];
const n = Number(process.argv[3] ?? 5000);
const LOOKUPS = 50;
const client = new MongoClient(url);
await client.connect();
const docs = client.db('probe').collection('docs');
await docs.drop().catch(() => {});
for (let i = 0; i < n; i += 1000) {
  await docs.insertMany(Array.from({ length: Math.min(1000, n - i) }, (_, j) => ({ _id: `d${i + j}`, status: 'pending', seq: i + j, pad: 'x'.repeat(200) })));
}
const timed = async (fn) => {
  const t = performance.now();
  await fn();
  return performance.now() - t;
};
const findMs = await timed(async () => {
  for (let i = 0; i < LOOKUPS; i++) await docs.findOne({ _id: `d${(i * 97) % n}` });
});
const updateMs = await timed(async () => {
  for (let i = 0; i < LOOKUPS; i++) await docs.updateOne({ _id: `d${(i * 89) % n}` }, { $set: { status: 'done' } });
});
const ids = Array.from({ length: 200 }, (_, i) => `d${(i * 83) % n}`);
const updateManyMs = await timed(() => docs.updateMany({ _id: { $in: ids } }, { $set: { status: 'again' } }));
console.log(
  `${n} documents: findOne by _id ${(findMs / LOOKUPS).toFixed(2)} ms, updateOne by _id ${(updateMs / LOOKUPS).toFixed(2)} ms, ` +
    `updateMany of 200 by _id $in ${updateManyMs.toFixed(0)} ms`,
);
await docs.drop();
await client.close();
