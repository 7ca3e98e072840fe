import http from 'node:http';
import type { CommandFailedEvent, CommandStartedEvent, CommandSucceededEvent } from 'mongodb';
import { createLogger } from '../lib/platform/logger';
import type { SampleBucketDoc } from '../lib/wearables/sample-buckets';
import { TimeseriesList } from '../schemas/wearables';
import { createTenant, expectSchema, httpClient, startTestApp, teamClient, type TestApp } from './support/harness';

/**
 * GET /v2/timeseries/{user_id}/{resource} writes its JSON array while it reads the day buckets from one cursor in
 * batches (api/json-stream.ts, SampleBuckets.readByDay), so a year of minute samples never sits in the api's memory.
 * These tests hold it to: the same bytes the whole array would be, across many cursor batches and two sources;
 * a client that goes away closes the cursor on the server; a database error after the first byte cuts the
 * response off instead of ending a shorter array that parses.
 */
let app: TestApp;
let userId: string;
let teamId: string;
let teamKey: string;
const logLines: { msg?: string; level?: number; code?: string; path?: string; complete?: boolean; latency_ms?: number }[] = [];

const DAY_MS = 86_400_000;
const FIRST_DAY = Date.parse('2025-01-01T00:00:00Z');
/** 120 days of minute heart rate from a watch (172,800 samples, ~16 MB of JSON: far more than a socket buffers)... */
const DAYS = 120;
/** ...and a ring's every 5 minutes on days 10-49, at the same instants as the watch's (ties ordered by key). */
const RING_DAYS = { from: 10, to: 49 };

/** Every cursor command the api's own client sends for this user's buckets: finds, their cursor ids, getMores and kills. */
const commands: { name: string; cursorId?: string; killed?: string[] }[] = [];
const findIds = new Set<number>();
/** The api's getMores of the buckets sent and not yet answered, and when the last was sent. */
const getMoresInFlight = new Set<number>();
let lastGetMoreAt = 0;

function bucket(day: number, provider: string, sourceType: string, stepMs: number, extra: Partial<SampleBucketDoc>): SampleBucketDoc {
  const offsets: number[] = [];
  const value: number[] = [];
  for (let offset = 0; offset < DAY_MS; offset += stepMs) {
    offsets.push(offset);
    value.push(50 + ((day * 7 + offset / stepMs) % 90));
  }
  const date = new Date(FIRST_DAY + day * DAY_MS);
  const now = new Date();
  return {
    _id: `${userId}:heartrate:${provider}:${sourceType}:${date.toISOString().slice(0, 10)}`,
    team_id: teamId,
    user_id: userId,
    resource: 'heartrate',
    provider,
    source_type: sourceType,
    day: date,
    offsets,
    value,
    unit: 'bpm',
    ...extra,
    ingest_key: 'seed',
    change: 'created' as const,
    version: 1,
    created_at: now,
    updated_at: now,
  };
}

beforeAll(async () => {
  const logger = createLogger('info', 'api-test', { write: (line: string) => void logLines.push(JSON.parse(line)) });
  app = await startTestApp({}, { logger });
  const tenant = await createTenant(app.deps, 'Timeseries stream');
  teamId = tenant.teamId;
  teamKey = tenant.teamKey;
  userId = (await teamClient(app, tenant).post('/v2/user/', { client_user_id: 'stream-reader' })).body.user_id;
  const docs = [];
  for (let d = 0; d < DAYS; d++) {
    docs.push(bucket(d, 'apple_health_kit', 'watch', 60_000, { timezone_offset: 3600 }));
    if (d >= RING_DAYS.from && d <= RING_DAYS.to) docs.push(bucket(d, 'oura', 'ring', 300_000, { type: 'resting', timezone_offset: 0 }));
  }
  await app.inspect.collection<SampleBucketDoc>('sample_buckets').insertMany(docs);

  const client = app.deps.db.client;
  client.on('commandStarted', (e: CommandStartedEvent) => {
    const c = e.command;
    if (e.commandName === 'find' && c.find === 'sample_buckets' && c.filter?.user_id === userId) {
      findIds.add(e.requestId);
      commands.push({ name: 'find' });
    }
    if (e.commandName === 'getMore' && c.collection === 'sample_buckets') {
      commands.push({ name: 'getMore', cursorId: String(c.getMore) });
      getMoresInFlight.add(e.requestId);
      lastGetMoreAt = Date.now();
    }
    if (e.commandName === 'killCursors' && c.killCursors === 'sample_buckets') commands.push({ name: 'killCursors', killed: c.cursors.map(String) });
  });
  client.on('commandSucceeded', (e: CommandSucceededEvent) => {
    getMoresInFlight.delete(e.requestId);
    if (findIds.has(e.requestId)) commands.push({ name: 'find reply', cursorId: String((e.reply as { cursor: { id: unknown } }).cursor.id) });
  });
  client.on('commandFailed', (e: CommandFailedEvent) => void getMoresInFlight.delete(e.requestId));
});
afterAll(() => app.close());

const iso = (ms: number) => new Date(ms).toISOString().replace('Z', '+00:00');

/** What the read must return: every stored sample in [from, to] by time then key, as a direct query of the buckets finds them. */
async function expectedJson(from: number, to: number): Promise<{ text: string; count: number }> {
  const buckets = await app.inspect.collection('sample_buckets').find({ user_id: userId }).toArray();
  const samples: { t: number; key: string; view: unknown }[] = [];
  for (const b of buckets) {
    b.offsets.forEach((offset: number, i: number) => {
      const t = b.day.getTime() + offset;
      if (t < from || t > to) return;
      const view = { timestamp: iso(t), timezone_offset: b.timezone_offset, type: b.type ?? null, unit: b.unit, value: b.value[i] };
      samples.push({ t, key: `${b.user_id}:heartrate:${b.provider}:${b.source_type}:${t}`, view });
    });
  }
  samples.sort((a, b) => a.t - b.t || (a.key < b.key ? -1 : 1));
  return { text: JSON.stringify(samples.map((s) => s.view)), count: samples.length };
}

/** Where two long strings first differ (null: equal), with some context, instead of a diff of megabytes. */
function firstDifference(got: string, want: string) {
  if (got === want) return null;
  let at = 0;
  while (got[at] === want[at]) at++;
  return { at, lengths: [got.length, want.length], got: got.slice(at - 80, at + 80), want: want.slice(at - 80, at + 80) };
}

/** GET through node:http, handing the response to `use` once its headers are in. */
function request(path: string, use: (res: http.IncomingMessage, req: http.ClientRequest) => void): http.ClientRequest {
  const req = http.get(app.url + path, { headers: { 'x-service-api-key': teamKey } }, (res) => use(res, req));
  return req;
}

/** Once no getMore of the api's is in flight and none was sent for 300 ms (a paused reply holds the api back). */
async function getMoresSettled(): Promise<void> {
  for (let wait = 0; wait < 1000; wait++) {
    if (!getMoresInFlight.size && Date.now() - lastGetMoreAt > 300) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`the api kept reading the buckets of a paused reply (${getMoresInFlight.size} getMore in flight)`);
}

/** The id of the cursor of the latest find of this user's buckets, once the api has it. */
async function latestCursorId(): Promise<string> {
  for (let wait = 0; wait < 1000; wait++) {
    const reply = commands.filter((c) => c.name === 'find reply').at(-1);
    if (reply) return reply.cursorId!;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('the api sent no find of the buckets');
}

test('a streamed read is byte for byte the whole array: two sources merged by time, ends clipped, over many cursor batches', async () => {
  const from = FIRST_DAY + 3 * DAY_MS + 6.5 * 3_600_000;
  const to = FIRST_DAY + 100 * DAY_MS + 17.75 * 3_600_000;
  commands.length = 0;
  const logged = logLines.length;
  const res = await fetch(`${app.url}/v2/timeseries/${userId}/heartrate?start_date=${encodeURIComponent(iso(from))}&end_date=${encodeURIComponent(iso(to))}`, {
    headers: { 'x-service-api-key': teamKey },
  });
  const text = await res.text();
  // Its access log line comes once the last byte is written, so its latency covers the whole stream.
  const accessLine = async () => logLines.slice(logged).find((l) => l.msg === 'request' && l.path === `/v2/timeseries/${userId}/heartrate`);
  for (let i = 0; i < 100 && !(await accessLine()); i++) await new Promise((r) => setTimeout(r, 20));
  expect(await accessLine()).not.toHaveProperty('complete');

  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
  expect(res.headers.get('content-length')).toBeNull();
  expect(res.headers.get('transfer-encoding')).toBe('chunked');
  const expected = await expectedJson(from, to);
  expect(expected.count).toBeGreaterThan(140_000);
  expect(firstDifference(text, expected.text)).toBeNull();
  expectSchema(TimeseriesList, JSON.parse(text));
  // 98 days of buckets plus 40 of the ring's: one find and several getMores of one cursor, which ran to its end.
  expect(commands.filter((c) => c.name === 'find')).toHaveLength(1);
  const cursorId = await latestCursorId();
  expect(commands.filter((c) => c.name === 'getMore' && c.cursorId === cursorId).length).toBeGreaterThanOrEqual(5);
});

test('an empty range is an empty array; errors before the first byte are ordinary JSON errors', async () => {
  const client = httpClient(app.url, { 'x-service-api-key': teamKey });
  const empty = await client.get(`/v2/timeseries/${userId}/heartrate?start_date=2024-01-01&end_date=2024-01-31`);
  expect(empty.status).toBe(200);
  expect(empty.text).toBe('[]');
  const unknown = await client.get(`/v2/timeseries/00000000-0000-4000-8000-000000000000/heartrate?start_date=2025-01-01`);
  expect(unknown.status).toBe(404);
  expect(unknown.headers.get('content-length')).toBe(String(Buffer.byteLength(unknown.text)));
  expect(unknown.body.detail).toMatch(/user/i);
});

test('a client that goes away mid-stream leaves no cursor open: the api kills it on the server', async () => {
  commands.length = 0;
  let received = 0;
  await new Promise<void>((resolve, reject) => {
    const req = request(`/v2/timeseries/${userId}/heartrate?start_date=2025-01-01&end_date=2025-04-30`, (res) => {
      expect(res.statusCode).toBe(200);
      res.once('data', (chunk: Buffer) => {
        received = chunk.length;
        req.destroy(); // gone after the first chunk, with ~16 MB still to come
        resolve();
      });
    });
    req.on('error', () => undefined); // the destroy above
    req.setTimeout(30_000, () => reject(new Error('no first chunk')));
  });
  const cursorId = await latestCursorId();
  expect(cursorId).not.toBe('0'); // the cursor was open on the server when the client left
  const killed = async () => commands.some((c) => c.name === 'killCursors' && c.killed!.includes(cursorId));
  for (let i = 0; i < 300 && !(await killed()); i++) await new Promise((r) => setTimeout(r, 50));
  expect(await killed()).toBe(true);
  expect(received).toBeGreaterThan(0);
  expect(received).toBeLessThan((await expectedJson(FIRST_DAY, FIRST_DAY + DAYS * DAY_MS)).text.length);
  expect(logLines.some((l) => l.msg === 'client closed the connection before the response ended')).toBe(true);
  // The access log line is written when the connection closes, and says the response was cut short.
  const cut = async () => logLines.find((l) => l.msg === 'request' && l.path === `/v2/timeseries/${userId}/heartrate` && l.complete === false);
  for (let i = 0; i < 100 && !(await cut()); i++) await new Promise((r) => setTimeout(r, 50));
  expect(await cut()).toMatchObject({ complete: false, latency_ms: expect.any(Number) });
});

test('a HEAD request, whose body is never read, closes its cursor too', async () => {
  commands.length = 0;
  const res = await fetch(`${app.url}/v2/timeseries/${userId}/heartrate?start_date=2025-01-01&end_date=2025-04-30`, {
    method: 'HEAD',
    headers: { 'x-service-api-key': teamKey },
  });
  expect(res.status).toBe(200);
  expect(await res.text()).toBe('');
  const cursorId = await latestCursorId();
  expect(cursorId).not.toBe('0');
  const killed = () => commands.some((c) => c.name === 'killCursors' && c.killed!.includes(cursorId));
  for (let i = 0; i < 300 && !killed(); i++) await new Promise((r) => setTimeout(r, 50));
  expect(killed()).toBe(true);
  expect(commands.filter((c) => c.name === 'getMore')).toHaveLength(0);
});

test('a database error after the first byte cuts the response off: the client never gets a shorter array that parses', async () => {
  commands.length = 0;
  const outcome = await new Promise<{ text: string; complete: boolean; error: boolean }>((resolve, reject) => {
    const req = request(`/v2/timeseries/${userId}/heartrate?start_date=2025-01-01&end_date=2025-04-30`, (res) => {
      const chunks: Buffer[] = [];
      let error = false;
      res.once('data', (chunk: Buffer) => {
        chunks.push(chunk);
        res.pause(); // the api stops once the socket is full, with the rest of its cursor on the server
        void (async () => {
          const cursorId = await latestCursorId();
          // Killed only between the api's getMores: FerretDB 2.7 crashes when a killCursors meets a getMore of the
          // same cursor in flight (a nil pointer in its PostgreSQL connection). The paused reply stops them soon.
          await getMoresSettled();
          // The cursor disappears on the server (as when it times out): the api's next getMore fails.
          const { Long } = await import('mongodb');
          await app.inspect.command({ killCursors: 'sample_buckets', cursors: [Long.fromString(cursorId)] });
          res.on('data', (c: Buffer) => chunks.push(c));
          res.resume();
        })().catch(reject);
      });
      res.on('error', () => (error = true));
      res.on('close', () => resolve({ text: Buffer.concat(chunks).toString(), complete: res.complete, error }));
    });
    req.on('error', () => undefined);
    req.setTimeout(60_000, () => reject(new Error('the response neither ended nor broke off')));
  });
  expect(outcome.complete).toBe(false);
  expect(outcome.text.startsWith('[{"timestamp":')).toBe(true);
  expect(() => JSON.parse(outcome.text)).toThrow();
  expect(logLines.some((l) => l.msg === 'response cut off after it started' && l.level === 50)).toBe(true);
  // The api goes on serving reads.
  const after = await fetch(`${app.url}/v2/timeseries/${userId}/heartrate?start_date=2025-01-02&end_date=2025-01-02`, {
    headers: { 'x-service-api-key': teamKey },
  });
  expect(JSON.parse(await after.text())).toHaveLength(1440);
});
