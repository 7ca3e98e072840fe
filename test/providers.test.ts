import { loadProviderCatalogue } from '../lib/wearables/provider-catalogue';
import { ProviderList } from '../schemas/provider';
import providers from '../lib/catalogue/providers.json';
import { createTenant, expectSchema, httpClient, startTestApp, teamClient, type HttpClient, type TestApp } from './support/harness';

let app: TestApp;
let api: HttpClient;

beforeAll(async () => {
  app = await startTestApp();
  api = teamClient(app, await createTenant(app.deps));
});
afterAll(() => app.close());

describe('providers', () => {
  it('lists every catalogued provider, with and without the trailing slash', async () => {
    const res = await api.get('/v2/providers/');
    expect(res.status).toBe(200);
    expectSchema(ProviderList, res.body);
    expect(res.body).toHaveLength(41);
    const oura = res.body.find((p: { slug: string }) => p.slug === 'oura');
    expect(oura).toMatchObject({ name: 'Oura', auth_type: 'oauth', logo: `${app.url}/v2/providers/oura/logo.svg` });
    expect(oura.supported_resources).toEqual(expect.arrayContaining(['sleep']));
    expect((await api.get('/v2/providers')).body).toEqual(res.body);
  });

  it('filters by source_type, and an unknown source_type is a 422', async () => {
    const ble = await api.get('/v2/providers/?source_type=ble');
    expect(ble.status).toBe(200);
    expect(ble.body.length).toBeGreaterThan(0);
    const bleSlugs = providers.filter((p) => p.source_type === 'ble').map((p) => p.slug);
    expect(ble.body.map((p: { slug: string }) => p.slug)).toEqual(bleSlugs);
    const bad = await api.get('/v2/providers/?source_type=satellite');
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0]).toMatchObject({ loc: ['query', 'source_type'], type: 'enum' });
    expect(bad.body.detail[0].msg).toContain('"ble"');
  });

  it('serves each logo as a generated SVG monogram, without a key', async () => {
    const res = await httpClient(app.url).get('/v2/providers/apple_health_kit/logo.svg');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/image\/svg\+xml/);
    expect(res.text).toMatch(/^<svg[^>]*>.*>AH<\/text><\/svg>$/);
    expect((await httpClient(app.url).get('/v2/providers/nope/logo.svg')).status).toBe(404);
  });

  it("marks the legacy password twins deprecated, naming the integrations that replace them; Polar's entry says it brings no history", async () => {
    const res = await api.get('/v2/providers/');
    const twins = res.body.filter((p: { deprecated: boolean }) => p.deprecated);
    expect(twins.map((p: { slug: string; replaced_by: string }) => [p.slug, p.replaced_by])).toEqual([
      ['whoop', 'whoop_v2'],
      ['dexcom', 'dexcom_v3'],
    ]);
    const current = res.body.filter((p: { slug: string }) => ['whoop_v2', 'dexcom_v3'].includes(p.slug));
    expect(current.map((p: { deprecated: boolean; replaced_by: string | null }) => [p.deprecated, p.replaced_by])).toEqual([
      [false, null],
      [false, null],
    ]);
    // Polar shares nothing uploaded before the user connects: the catalogue says so where a customer reads it.
    expect(res.body.find((p: { slug: string }) => p.slug === 'polar').description).toContain('A new connection starts with no history');
  });

  it('refuses to start on an invalid catalogue', () => {
    const broken = structuredClone(providers);
    broken[0].auth_type = 'carrier_pigeon';
    expect(() => loadProviderCatalogue(broken)).toThrow(/catalogue is invalid.*auth_type/);
    const unknownResource = structuredClone(providers);
    unknownResource[1].supported_resources.push('telepathy');
    expect(() => loadProviderCatalogue(unknownResource)).toThrow(/unknown resources: telepathy/);
    const duplicate = [...structuredClone(providers), structuredClone(providers[0])];
    expect(() => loadProviderCatalogue(duplicate)).toThrow(/twice/);
    const replacedByNothing = structuredClone(providers).map((p) => (p.slug === 'whoop' ? { ...p, replaced_by: 'whoop_v9' } : p));
    expect(() => loadProviderCatalogue(replacedByNothing)).toThrow(/replaced_by 'whoop_v9'/);
  });
});
