// The fast local webhook receiver of `npm run bench` (webhook suite), in its own process so it never shares an
// event loop with the publisher. Started with fork(): reports { port } over IPC, exits on SIGTERM/SIGINT or
// when the parent goes away.
//
// Every POST is answered 200 at once. Requests are grouped by run: the `bench_run` field of the event data
// (the envelope is `{event_type, data: {..., bench_run, sent_at}, ...}`). Within a run a delivery is the pair
// (path, webhook-id) -- each endpoint has its own path, and the same event reaches 10 endpoints under one
// webhook-id. For each delivery the first arrival time (Date.now(), the same machine clock as the publisher)
// is kept, and latency = first arrival - data.sent_at (stamped just before publishing); later arrivals of
// the same delivery count as duplicates.
//
// IPC requests { id, cmd: 'stats' | 'latency' | 'forget', run } are answered with { id, ...result }.
import http from 'node:http';
import { answerParent, serveForParent } from './child-server.mjs';

const runs = new Map();
const SENT_AT = /"sent_at":(\d+)/;
const RUN = /"bench_run":"([^"]+)"/;

function runState(name) {
  let r = runs.get(name);
  if (!r) {
    r = { requests: 0, duplicates: 0, noId: 0, first: new Map(), latencies: [], firstAt: null, lastAt: null };
    runs.set(name, r);
  }
  return r;
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const at = Date.now();
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 });
    res.end('ok');
    const body = Buffer.concat(chunks).toString('utf8');
    const r = runState(RUN.exec(body)?.[1] ?? '(untagged)');
    r.requests++;
    const webhookId = req.headers['webhook-id'];
    if (!webhookId) {
      r.noId++;
      return;
    }
    const key = `${req.url} ${webhookId}`;
    if (r.first.has(key)) {
      r.duplicates++;
      return;
    }
    r.first.set(key, at);
    r.firstAt = r.firstAt === null ? at : Math.min(r.firstAt, at);
    r.lastAt = r.lastAt === null ? at : Math.max(r.lastAt, at);
    const sentAt = Number(SENT_AT.exec(body)?.[1]);
    if (Number.isFinite(sentAt)) r.latencies.push(at - sentAt);
  });
});
// Longer than any pause between batches: the sender's keep-alive sockets are not closed under it (a socket the
// server closes just as the client reuses it is a connection error, i.e. a failed first attempt).
server.keepAliveTimeout = 120_000;
server.headersTimeout = 125_000;
server.requestTimeout = 0;

answerParent(runs, (r) =>
  r
    ? { requests: r.requests, unique: r.first.size, duplicates: r.duplicates, noId: r.noId, firstAt: r.firstAt, lastAt: r.lastAt }
    : { requests: 0, unique: 0, duplicates: 0, noId: 0, firstAt: null, lastAt: null },
);

serveForParent(server);
server.listen(0, '127.0.0.1');
