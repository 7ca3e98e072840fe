// `npm run bench:compare -- <earlier results.json> <later results.json>`: the summary table of the later run of
// `npm run bench` against the earlier one, and how many of their ratios agree within 10% (the line `npm run bench`
// prints against the run before it, for any two runs kept, e.g. copies of .devstack/bench-results.json).
import { formatSummary, previousResults, targetSummary } from './bench/report.mjs';

const [earlierFile, laterFile] = process.argv.slice(2);
const [earlier, later] = [earlierFile, laterFile].map((f) => (f ? previousResults(f) : null));
if (!earlier || !later) {
  console.error('usage: npm run bench:compare -- <earlier bench-results.json> <later bench-results.json> (both readable JSON files of `npm run bench`)');
  process.exit(2);
}
const summary = { ...targetSummary(later.ratios, earlier), ...(later.failedSuites?.length ? { failedSuites: later.failedSuites } : {}) };
console.log(`later run ${later.runId} (finished ${later.finishedAt}) against ${earlier.runId} (finished ${earlier.finishedAt})`);
console.log(formatSummary(summary));
