// Shared by the bench's child processes (constant route, webhook receiver, pipeline consumer): report the port to
// the parent, answer its commands, summarise latencies, and stop cleanly when told to or when the parent goes away.
export function serveForParent(server) {
  server.once('listening', () => process.send?.({ port: server.address().port }));
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.once('disconnect', stop);
}

/** p50/p90/p99/max/mean of latencies in ms (nearest rank), or nulls when there are none. */
export function latencySummary(latencies) {
  const sorted = Float64Array.from(latencies ?? []).sort();
  const at = (p) => (sorted.length ? sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1] : null);
  const sum = sorted.reduce((a, b) => a + b, 0);
  return {
    count: sorted.length,
    p50Ms: at(50),
    p90Ms: at(90),
    p99Ms: at(99),
    maxMs: sorted.length ? sorted[sorted.length - 1] : null,
    meanMs: sorted.length ? Math.round((sum / sorted.length) * 100) / 100 : null,
  };
}

/**
 * Answers the parent's `{id, cmd, run}` messages about the runs a child records (`runs`: run -> its record with
 * `latencies`): `stats` (from `statsOf(record | undefined)`), `latency` (latencySummary), `forget` (drops the run).
 * An unknown command or a throw becomes `{error}`; every reply carries the message's id.
 */
export function answerParent(runs, statsOf) {
  const answer = (msg) => {
    const r = runs.get(msg.run);
    if (msg.cmd === 'stats') return statsOf(r);
    if (msg.cmd === 'latency') return latencySummary(r?.latencies);
    if (msg.cmd === 'forget') return (runs.delete(msg.run), { ok: true });
    return { error: `unknown command ${msg.cmd}` };
  };
  process.on('message', (msg) => {
    if (!msg || typeof msg !== 'object' || msg.id === undefined) return;
    let reply;
    try {
      reply = answer(msg);
    } catch (err) {
      reply = { error: err.message };
    }
    process.send?.({ id: msg.id, ...reply });
  });
}
