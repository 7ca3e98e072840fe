import { request as httpRequest } from 'node:http';
import { AppleHealthImport } from '../schemas/phones';
import { generateExport, zipOf, type ExpectedImport } from './support/apple-health-export';
import { PhoneSimulator } from './support/phone-simulator';
import { createTenant, eventually, expectSchema, startTestApp, teamClient, uniqueId, type HttpClient, type TestApp } from './support/harness';

/**
 * The Apple Health export import (README "Data from phones → The Apple Health export"): the file streamed into the
 * store as it arrives, resumable from its last stored byte, imported by a workflow; the export's traps
 * (test/support/apple-health-export.ts generates them) imported exactly as the generator says, and a second import of
 * the same file storing nothing new.
 */
let app: TestApp;
let api: HttpClient;
let teamKey: string;
let teamId: string;

beforeAll(async () => {
  app = await startTestApp();
  const tenant = await createTenant(app.deps, 'Apple Health imports');
  teamKey = tenant.teamKey;
  teamId = tenant.teamId;
  api = teamClient(app, tenant);
});
afterAll(() => app.close());

const newUser = async (): Promise<string> => (await api.post('/v2/user/', { client_user_id: uniqueId('export') })).body.user_id;
const upload = (userId: string, body: Buffer, headers: Record<string, string>, auth: Record<string, string> = { 'x-service-api-key': teamKey }) =>
  fetch(`${app.url}/v2/user/${userId}/import/apple_health`, { method: 'POST', headers: { ...auth, ...headers }, body });
/** The user's phone's access token, signed in as the SDK does. */
const accessToken = async (userId: string) => (await PhoneSimulator.signIn(app.url, teamKey, userId)).currentAccessToken;
type ImportView = {
  id: string;
  status: string;
  received_bytes: number;
  progress: { records_read: number; samples: Record<string, number>; summaries: Record<string, number>; skipped: Record<string, number> };
  error: string | null;
};
const importOf = async (userId: string, id: string) => (await api.get<ImportView>(`/v2/user/${userId}/import/apple_health/${id}`)).body;
const finished = (userId: string, id: string) =>
  eventually(async () => {
    const view = await importOf(userId, id);
    expect(['completed', 'failed']).toContain(view.status);
    return view;
  }, 120_000);

/** Everything the user has of a resource from apple_health_kit, read from the store. */
const samplesOf = (userId: string, resource: string) =>
  app.deps.repos.wearableData.findSamples({ teamId, userId, resource, from: new Date('2000-01-01'), to: new Date('2100-01-01'), provider: 'apple_health_kit' });

async function expectImported(userId: string, expected: ExpectedImport) {
  const heart = await samplesOf(userId, 'heartrate');
  const expectedHeart = [...expected.points].filter(([k]) => k.startsWith('heartrate|'));
  expect(heart).toHaveLength(expectedHeart.length);
  const byKey = new Map(heart.map((s) => [`heartrate|${s.source_type}|${s.timestamp.toISOString()}`, s]));
  for (const [key, value] of expectedHeart) expect([key, byKey.get(key)?.value]).toEqual([key, value]);
  // HKTimeZone, not the date's written offset, is where the user was.
  for (const [at, offset] of expected.zoned) expect(heart.find((s) => s.timestamp.toISOString() === at)?.timezone_offset).toBe(offset);
  expect(heart.find((s) => !expected.zoned.has(s.timestamp.toISOString()))?.timezone_offset).toBe(-5 * 3600);

  const weight = await samplesOf(userId, 'weight');
  const expectedWeight = [...expected.points].filter(([k]) => k.startsWith('weight|'));
  expect(weight).toHaveLength(expectedWeight.length);
  for (const [key, value] of expectedWeight) expect(weight.find((s) => `weight|phone|${s.timestamp.toISOString()}` === key)?.value).toBeCloseTo(value, 6);

  // One source per hour: the watch's, else the phone's, else the app's (never their sum).
  for (const resource of ['steps', 'calories_active', 'distance']) {
    const hours = await samplesOf(userId, resource);
    const want = [...expected.hourly].filter(([k]) => k.startsWith(`${resource}|`));
    expect([resource, hours.length]).toEqual([resource, want.length]);
    const got = new Map(hours.map((s) => [`${resource}|${s.timestamp.toISOString()}`, s.value as number]));
    for (const [key, value] of want) expect([key, got.get(key)! - value]).toEqual([key, expect.closeTo(0, 2)]);
    expect(hours.every((s) => s.type === 'multiple_sources' && s.end!.getTime() - s.start!.getTime() === 3_600_000)).toBe(true);
  }

  // Blood pressure from its correlations, once each (not again from the top-level halves).
  const pressure = await samplesOf(userId, 'blood_pressure');
  expect(pressure).toHaveLength(expected.bloodPressure.size);
  for (const s of pressure) expect([s.systolic, s.diastolic]).toEqual(expected.bloodPressure.get(s.timestamp.toISOString()));

  const summaries = async (resource: string) =>
    app.deps.repos.wearableData.findSummaries(teamId, userId, resource, new Date('2000-01-01'), new Date('2100-01-01'), 'apple_health_kit');
  const workouts = await summaries('workouts');
  expect(workouts).toHaveLength(expected.workouts.size);
  for (const w of workouts) {
    const want = expected.workouts.get(w.time.toISOString())!;
    const data = w.data as { calories: number; distance: number; average_hr: number; max_hr: number; sport: { slug: string }; time_start: string };
    expect([data.calories, data.distance, data.average_hr, data.max_hr, data.sport.slug]).toEqual([
      want.calories,
      want.distance,
      want.average_hr,
      want.max_hr,
      want.sport,
    ]);
    expect(data.time_start.endsWith('-05:00')).toBe(true);
  }
  const sleeps = await summaries('sleep');
  expect(sleeps).toHaveLength(expected.sleeps.size);
  for (const s of sleeps) {
    const data = s.data as { deep: number; rem: number; light: number; awake: number; total: number; duration: number; bedtime_start: string };
    expect({ at: s.time.toISOString(), ...expected.sleeps.get(s.time.toISOString()) }).toEqual({
      at: s.time.toISOString(),
      deep: data.deep,
      rem: data.rem,
      light: data.light,
      awake: data.awake,
      total: data.total,
      duration: data.duration,
    });
  }
  const activity = await summaries('activity');
  expect(activity).toHaveLength(expected.rings.size);
  for (const a of activity) expect((a.data as { calories_active: number }).calories_active).toBe(expected.rings.get(a.calendar_date));
}

describe('the Apple Health export import', () => {
  test('export.zip of a thousand days imports exactly what it holds, once; imported again it stores nothing new', async () => {
    const userId = await newUser();
    const { xml, expected } = generateExport({ days: 1000, lastDay: '2026-06-30' });
    const zip = zipOf([
      { name: 'apple_health_export/export_cda.xml', data: Buffer.from('<?xml version="1.0"?><ClinicalDocument/>') },
      { name: 'apple_health_export/export.xml', data: Buffer.from(xml) },
    ]);
    const res = await upload(userId, zip, { 'content-type': 'application/zip' });
    expect(res.status).toBe(201);
    const created = (await res.json()) as any;
    expectSchema(AppleHealthImport, created);
    expect([created.status, created.received_bytes, res.headers.get('upload-offset')]).toEqual(['importing', zip.length, String(zip.length)]);

    const done = await finished(userId, created.id);
    expect([done.status, done.error]).toEqual(['completed', null]);
    expect(done.progress.records_read).toBe(expected.elements);
    expect(done.progress.skipped).toEqual(expected.skippedTypes);
    await expectImported(userId, expected);
    // The file's bytes go once imported; the history shows in introspection; one event per resource.
    expect(await app.inspect.collection('apple_health_import_chunks').countDocuments({ import_id: created.id })).toBe(0);
    const pulled = (await api.get(`/v2/introspect/historical_pull?user_id=${userId}`)).body.data[0].provider.apple_health_kit.pulled;
    expect(pulled.steps.status).toBe('success');
    expect(pulled.workouts.status).toBe('success');
    const historical = await app.inspect
      .collection('webhook_events')
      .find({ user_id: userId, event_type: /^historical\.data\./ } as object)
      .toArray();
    expect(historical.map((e) => e.event_type).sort()).toEqual(
      ['activity', 'blood_pressure', 'calories_active', 'distance', 'heartrate', 'sleep', 'steps', 'weight', 'workouts'].map(
        (r) => `historical.data.${r}.created`,
      ),
    );

    // The same file again, this time from the phone (the user's SDK token): all found unchanged.
    const tokens = { access_token: await accessToken(userId) };
    const again = await upload(userId, zip, { 'content-type': 'application/zip' }, { authorization: `Bearer ${tokens.access_token}` });
    expect(again.status).toBe(201);
    const second = await finished(userId, ((await again.json()) as any).id);
    expect(second.status).toBe('completed');
    expect([second.progress.samples.created, second.progress.samples.updated]).toEqual([0, 0]);
    expect([second.progress.summaries.created, second.progress.summaries.updated]).toEqual([0, 0]);
    expect(second.progress.samples.unchanged).toBeGreaterThan(50_000);
    await expectImported(userId, expected);
  });

  test('a broken upload resumes from its last stored byte; a wrong offset is a 409 that says where it stands', async () => {
    const userId = await newUser();
    const { xml, expected } = generateExport({ days: 120, lastDay: '2026-05-31', seed: 11 });
    const file = Buffer.from(xml);
    expect(file.length).toBeGreaterThan(3 << 20);
    // The first request sends 1.5 MiB of the file and ends: the import waits for the rest.
    const first = await upload(userId, file.subarray(0, 1_572_864), { 'content-type': 'application/xml', 'upload-length': String(file.length) });
    expect(first.status).toBe(201);
    const started = (await first.json()) as any;
    expect([started.status, started.received_bytes]).toEqual(['uploading', 1_572_864]);
    const path = `/v2/user/${userId}/import/apple_health/${started.id}`;

    const wrong = await fetch(`${app.url}${path}`, {
      method: 'PATCH',
      headers: { 'x-service-api-key': teamKey, 'upload-offset': '0' },
      body: file.subarray(0, 10),
    });
    expect(wrong.status).toBe(409);
    expect(((await wrong.json()) as any).detail).toContain('1572864');

    // The next request breaks after its first whole chunk (1 MiB) is stored: that chunk counts, the rest is resent.
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(`${app.url}${path}`, {
        method: 'PATCH',
        headers: { 'x-service-api-key': teamKey, 'upload-offset': '1572864', 'content-length': String(file.length - 1_572_864) },
      });
      req.on('error', () => resolve());
      req.on('response', (res) => reject(new Error(`The broken upload was answered ${res.statusCode} before it broke`)));
      req.write(file.subarray(1_572_864, 1_572_864 + (1 << 20) + 200_000));
      eventually(async () => (await importOf(userId, started.id)).received_bytes === 1_572_864 + (1 << 20), 30_000)
        .then(() => {
          req.destroy();
          resolve();
        })
        .catch(reject);
    });
    const broken = await importOf(userId, started.id);
    // HEAD says the same in its header (tus clients ask so).
    const head = await fetch(`${app.url}${path}`, { method: 'HEAD', headers: { 'x-service-api-key': teamKey } });
    expect([head.status, head.headers.get('upload-offset')]).toEqual([200, String(broken.received_bytes)]);
    expect([broken.status, broken.received_bytes]).toEqual(['uploading', 1_572_864 + (1 << 20)]);

    const rest = await fetch(`${app.url}${path}`, {
      method: 'PATCH',
      headers: { 'x-service-api-key': teamKey, 'upload-offset': String(broken.received_bytes), 'content-type': 'application/offset+octet-stream' },
      body: file.subarray(broken.received_bytes),
    });
    expect(rest.status).toBe(200);
    expect(((await rest.json()) as any).status).toBe('importing');
    const done = await finished(userId, started.id);
    expect([done.status, done.error, done.progress.records_read]).toEqual(['completed', null, expected.elements]);
    await expectImported(userId, expected);
    // The list finds it (a client that lost every answer).
    expect((await api.get(`/v2/user/${userId}/import/apple_health`)).body.imports.map((i: { id: string }) => i.id)).toEqual([started.id]);
  });

  test('a file that is not an export fails its import with why; other content types, other users and unknown imports are refused', async () => {
    const userId = await newUser();
    const res = await upload(userId, Buffer.from('<?xml version="1.0"?>\n<HealthData><Record type="x" <<broken'), { 'content-type': 'application/xml' });
    expect(res.status).toBe(201);
    const failed = await finished(userId, ((await res.json()) as any).id);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatch(/not well-formed|cut short/);

    const notZip = await upload(userId, Buffer.from('PK but not really a zip'), { 'content-type': 'application/zip' });
    const notZipDone = await finished(userId, ((await notZip.json()) as any).id);
    expect([notZipDone.status, notZipDone.error]).toEqual(['failed', expect.stringContaining('not a zip')]);

    expect((await upload(userId, Buffer.from('{}'), { 'content-type': 'application/json' })).status).toBe(415);
    expect((await api.get(`/v2/user/${userId}/import/apple_health/00000000-0000-4000-8000-000000000000`)).status).toBe(404);
    const other = await newUser();
    const tokens = { access_token: await accessToken(other) };
    expect(
      (await upload(userId, Buffer.from('<HealthData/>'), { 'content-type': 'application/xml' }, { authorization: `Bearer ${tokens.access_token}` })).status,
    ).toBe(403);
  });
});
