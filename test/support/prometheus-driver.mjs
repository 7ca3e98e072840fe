// Starts a Prometheus of its own (scripts/stack/prometheus.mjs) in PROMETHEUS_STATE_DIR, scraping the targets in
// PROMETHEUS_TARGETS (JSON: [{ job, address }]) every 2 s, for test/metrics.test.ts. Prints `ready <url>` once it
// answers; SIGTERM stops it and exits.
import { startPrometheus } from '../../scripts/stack/prometheus.mjs';

const prometheus = await startPrometheus({
  stateDir: process.env.PROMETHEUS_STATE_DIR,
  targets: JSON.parse(process.env.PROMETHEUS_TARGETS),
  log: (l) => console.log(l),
});
console.log(`ready ${prometheus.url}`);
const keepAlive = setInterval(() => undefined, 60_000);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, async () => {
    await prometheus.stop();
    clearInterval(keepAlive);
    console.log('stopped');
    process.exit(0);
  });
}
