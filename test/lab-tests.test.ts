import { createTenant, startTestApp, teamClient, type HttpClient, type TestApp } from './support/harness';

let app: TestApp;
let client: HttpClient;

beforeAll(async () => {
  app = await startTestApp();
  client = teamClient(app, await createTenant(app.deps, 'Lab tests'));
});
afterAll(() => app.close());

describe('lab test catalogue endpoints', () => {
  it('pages GET /v3/lab_test with lab_test_limit and next_cursor until null', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: { status: number; body: any } = await client.get(`/v3/lab_test?lab_test_limit=5${cursor ? `&next_cursor=${cursor}` : ''}`);
      expect(res.status).toBe(200);
      expect(res.body.data.length).toBeLessThanOrEqual(5);
      seen.push(...res.body.data.map((t: { id: string }) => t.id));
      cursor = res.body.next_cursor;
    } while (cursor);
    const all = await client.get('/v3/lab_tests');
    expect(seen).toEqual(all.body.map((t: { id: string }) => t.id));
    expect(new Set(seen).size).toBe(seen.length);
    expect(all.headers.get('deprecation')).toBe('true');
    const first = all.body[0];
    expect(first).toMatchObject({
      id: expect.any(String),
      slug: expect.any(String),
      method: expect.any(String),
      status: 'active',
      lab: { slug: expect.any(String) },
    });
    expect(first.markers[0]).toMatchObject({ id: expect.any(Number), type: expect.stringMatching(/biomarker|panel/) });
    expect((await client.get('/v3/lab_test?next_cursor=garbage')).status).toBe(422);
  });

  it('filters by collection method, lab, status and name, and sorts by price', async () => {
    const kits = (await client.get('/v3/lab_tests?collection_method=testkit')).body;
    expect(kits.length).toBeGreaterThan(0);
    expect(kits.every((t: { method: string }) => t.method === 'testkit')).toBe(true);
    const quest = (await client.get('/v3/lab_test?lab_slug=quest')).body.data;
    expect(quest.every((t: { lab: { slug: string } }) => t.lab.slug === 'quest')).toBe(true);
    const inactive = (await client.get('/v3/lab_tests?status=inactive')).body;
    expect(inactive.map((t: { status: string }) => t.status)).toEqual(inactive.map(() => 'inactive'));
    const lipid = (await client.get('/v3/lab_tests?name=LIPID')).body;
    expect(lipid.length).toBeGreaterThan(0);
    const prices = (await client.get('/v3/lab_tests?order_key=price&order_direction=desc')).body.map((t: { price: number }) => t.price);
    expect(prices).toEqual([...prices].sort((a, b) => b - a));
    expect((await client.get('/v3/lab_tests?collection_method=drone')).status).toBe(422);
  });

  it('gets one test, its markers, the markers list (paged) and the labs', async () => {
    const test = (await client.get('/v3/lab_tests')).body[0];
    expect((await client.get(`/v3/lab_tests/${test.id}`)).body.id).toBe(test.id);
    expect((await client.get('/v3/lab_tests/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await client.get(`/v3/lab_tests/${test.id}/markers`)).body.markers.length).toBe(test.markers.length);
    const page = (await client.get('/v3/lab_tests/markers?size=10&page=2')).body;
    expect(page).toMatchObject({ page: 2, size: 10, total: expect.any(Number) });
    expect(page.markers).toHaveLength(10);
    expect(page.pages).toBe(Math.ceil(page.total / 10));
    const panel = (await client.get('/v3/lab_tests/markers?name=lipid panel&lab_slug=quest')).body.markers[0];
    expect(panel.type).toBe('panel');
    expect(panel.expected_results.map((r: { slug: string }) => r.slug)).toContain('hdl_cholesterol');
    const labs = (await client.get('/v3/lab_tests/labs')).body;
    expect(labs.map((l: { slug: string }) => l.slug)).toEqual(expect.arrayContaining(['quest', 'labcorp']));
  });

  it('lets a team compose, rename and deactivate its own test, which then cannot be ordered', async () => {
    const markers = (await client.get('/v3/lab_tests/markers?lab_slug=labcorp&size=100')).body.markers;
    const ids = markers.filter((m: { slug: string }) => ['tsh', 'vitamin_d_25oh'].includes(m.slug)).map((m: { id: number }) => m.id);
    const created = await client.post('/v3/lab_tests', { name: 'Energy check', method: 'walk_in_test', description: 'TSH and vitamin D', marker_ids: ids });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ name: 'Energy check', method: 'walk_in_test', status: 'active', lab: { slug: 'labcorp' } });
    expect((await client.post('/v3/lab_tests', { name: 'Energy check', method: 'walk_in_test', description: 'again', marker_ids: ids })).status).toBe(400);
    const mixed = await client.post('/v3/lab_tests', { name: 'Mixed', method: 'walk_in_test', description: 'x', marker_ids: [ids[0], 2001] });
    expect(mixed.status).toBe(422);
    expect(mixed.body.detail[0].loc).toEqual(['body', 'marker_ids']);

    const renamed = await client.patch(`/v3/lab_tests/${created.body.id}`, { name: 'Energy panel' });
    expect(renamed.body.name).toBe('Energy panel');
    const own = (await client.get('/v3/lab_test?generation_method=manual')).body.data;
    expect(own.map((t: { id: string }) => t.id)).toEqual([created.body.id]);
    const other = teamClient(app, await createTenant(app.deps, 'Other lab tests'));
    expect((await other.get(`/v3/lab_tests/${created.body.id}`)).status).toBe(404);

    const catalogueTest = (await client.get('/v3/lab_tests')).body[0];
    expect((await client.patch(`/v3/lab_tests/${catalogueTest.id}`, { active: false })).status).toBe(400);

    // A rename racing a deactivation: both land (each is one atomic update of its own fields).
    const [, raced] = await Promise.all([
      client.patch(`/v3/lab_tests/${created.body.id}`, { name: 'Energy panel v2' }),
      client.patch(`/v3/lab_tests/${created.body.id}`, { active: false }),
    ]);
    expect(raced.status).toBe(200);
    const deactivated = await client.get(`/v3/lab_tests/${created.body.id}`);
    expect(deactivated.body).toMatchObject({ status: 'inactive', name: 'Energy panel v2' });
    const user = (await client.post('/v2/user/', { client_user_id: `lt-${Date.now()}` })).body.user_id;
    const order = await client.post('/v3/order', {
      user_id: user,
      order_set: { lab_test_ids: [created.body.id] },
      patient_details: { first_name: 'Jo', last_name: 'Doe', dob: '1990-01-01', gender: 'male', phone_number: '+14155550101', email: 'jo@example.com' },
      patient_address: { first_line: '1 A St', city: 'Austin', state: 'TX', zip: '78701', country: 'US' },
    });
    expect(order.status).toBe(422);
    expect(order.body.detail[0]).toMatchObject({ loc: ['body', 'order_set', 'lab_test_ids', 0], type: 'value_error.lab_test_inactive' });
  });
});
