import { Webhook as StandardWebhook } from 'standardwebhooks';
import { LabResultsRaw } from '../schemas/lab-order';
import { AuditLogPage } from '../schemas/management';
import type { LabMarker } from '../schemas/lab-catalogue';
import {
  createTenant,
  eventually,
  expectSchema,
  managementClient,
  startTestApp,
  teamClient,
  type HttpClient,
  type Tenant,
  type TestApp,
  subscribeReceiver,
} from './support/harness';
import { createUser, lowOf, orderBody, orderReaches } from './support/lab';
import { ackOf, mllp, oruMessage, type OruOptions } from './support/hl7';
import { eraseUserOrders } from '../lib/labs/order-erasure';
import { parseOru, unframe } from '../lib/labs/hl7-oru';
import { orderReport } from '../lib/labs/hl7-results';
import { intakeMessageId } from '../lib/labs/hl7-intake-store';
import { labOrderCorrectionWorkflow } from '../workflows/lab-order';
import type { Receiver } from './support/receiver';

let app: TestApp;
let tenant: Tenant;
let client: HttpClient;
let mgmt: HttpClient;
let userId: string;
let rx: Receiver;
let secret: string;

beforeAll(async () => {
  app = await startTestApp();
  tenant = await createTenant(app.deps, 'Lab HL7 intake');
  client = teamClient(app, tenant);
  mgmt = managementClient(app, tenant);
  userId = await createUser(client);
  ({ rx, secret } = await subscribeReceiver(app, tenant, ['labtest.*']));
});
afterAll(async () => {
  await rx.close();
  await app.close();
});

const catalogue = () => app.deps.labCatalogue;
const panels = () => catalogue().markers.filter((m) => m.type === 'panel');
const markersOf = (panel: LabMarker) => catalogue().resultMarkersFor({ marker_ids: [panel.id] });
const post = (message: string) => client.post('/v3/lab/intake/hl7', message, { 'content-type': 'application/hl7-v2' });

/** A dispatched order of a test composed of `markerIds` (the catalogue's panels are not all sold on their own). */
async function orderOf(markerIds: number[]) {
  const lab = catalogue().markerById(markerIds[0])!.lab_id;
  const method = lab === 1 ? 'testkit' : 'walk_in_test';
  const test = await client.post('/v3/lab_tests', {
    name: `HL7 ${markerIds.join('+')} ${Math.random().toString(36).slice(2, 8)}`,
    method,
    description: 'HL7 intake',
    marker_ids: markerIds,
  });
  if (test.status !== 200) throw new Error(`lab test: ${test.status} ${test.text}`);
  const order = (await client.post('/v3/order', orderBody(userId, test.body.id))).body.order;
  await orderReaches(client, order.id, 'requisition_created');
  return order as { id: string; sample_id: string; user_id: string };
}

function panelMessage(order: { id: string; sample_id: string; user_id: string }, panel: LabMarker, extra: Partial<OruOptions> = {}) {
  return oruMessage(order, { lab: catalogue().labById(panel.lab_id)!, groups: [{ panel, markers: markersOf(panel) }], ...extra });
}

async function refusals() {
  const page = (await mgmt.get(`/v1/org/${tenant.orgId}/audit_log?action=lab_intake.hl7.refused&limit=100`)).body;
  expectSchema(AuditLogPage, page);
  return page.data as {
    target: { id: string };
    actor: { team_api_key_id?: string; management_key_id: null };
    error: { status: number; detail: string };
    status: string;
    team_id: string;
  }[];
}

function criticalEvents(orderId: string) {
  const verifier = new StandardWebhook(secret);
  return rx.requests
    .map(
      (r) =>
        verifier.verify(r.body, r.headers as Record<string, string>) as {
          event_type: string;
          data: { order_id?: string; interpretation?: string; status?: string };
        },
    )
    .filter((e) => e.event_type === 'labtest.result.critical' && e.data.order_id === orderId);
}

describe('HL7 v2 result intake', () => {
  it('takes an ORU^R01 for every catalogue panel: each marker with its LOINC, value, units, range and interpretation', async () => {
    expect(panels().length).toBeGreaterThanOrEqual(4);
    await Promise.all(
      panels().map(async (panel) => {
        const order = await orderOf([panel.id]);
        const message = panelMessage(order, panel);
        const res = await post(mllp(message));
        expect(res.headers.get('content-type')).toContain('application/hl7-v2');
        expect(ackOf(res.text)).toMatchObject({ code: 'AA', controlId: message.split('|')[9] });
        expect(res.status).toBe(200);
        const done = await orderReaches(client, order.id, 'completed');
        expect(done.events.map((e: { status: string }) => lowOf(e.status)).at(-1)).toBe('completed');
        const result = (await client.get(`/v3/order/${order.id}/result`)).body;
        expectSchema(LabResultsRaw, result);
        const expected = markersOf(panel);
        expect(result.results.map((r: { slug: string }) => r.slug)).toEqual(expected.map((m) => m.slug));
        expect(result.missing_results).toEqual([]);
        expect(result.metadata).toMatchObject({ status: 'final', interpretation: 'normal', specimen_number: order.sample_id });
        for (const [i, m] of expected.entries()) {
          const r = result.results[i];
          expect(r).toMatchObject({
            loinc: m.loinc ?? null,
            provider_id: m.provider_id,
            interpretation: 'normal',
            performing_laboratory: catalogue().labById(panel.lab_id)!.name,
            source_sample_id: order.sample_id,
          });
          if (m.result_type === 'numeric') {
            const range = m.reference_range!;
            expect(r).toMatchObject({ type: 'numeric', unit: m.unit, reference_range: range.text, min_range_value: range.low, max_range_value: range.high });
            expect([r.is_above_max_range, r.is_below_min_range]).toEqual([range.high === null ? null : false, range.low === null ? null : false]);
            expect(r.value).toBeGreaterThan(0);
          } else {
            expect(r.value).toBe(-1);
            expect(r.type).toBe(m.result_type);
          }
        }
      }),
    );
  }, 180000);

  it('refuses a malformed message or one of another type with an ACK AR and an audit entry naming the control id and why', async () => {
    const panel = panels()[0];
    const order = await orderOf([panel.id]);
    const good = panelMessage(order, panel, { controlId: 'MSGGOOD1' });
    const cases: { name: string; message: string; reason: RegExp }[] = [
      { name: 'not HL7', message: 'hello, these are results', reason: /does not start with an MSH segment/ },
      { name: 'wrong type', message: good.replace('ORU^R01^ORU_R01|MSGGOOD1', 'ADT^A01^ADT_A01|MSGBAD-TYPE'), reason: /MSH-9.*ADT\^A01.*ORU\^R01/ },
      {
        name: 'no OBR',
        message: good
          .split('\r')
          .filter((s) => !/^(ORC|OBR|OBX|SPM)\|/.test(s))
          .join('\r')
          .replace('MSGGOOD1', 'MSGBAD-NOOBR'),
        reason: /no OBR segment/,
      },
      { name: 'bad segment', message: good.replace('MSGGOOD1', 'MSGBAD-SEG').replace('\rPID|', '\rP@|'), reason: /is not an HL7 segment/ },
      {
        name: 'OBX before OBR',
        message: good.replace('MSGGOOD1', 'MSGBAD-ORDER').replace(/\rORC\|[^\r]*\rOBR\|[^\r]*/, ''),
        reason: /OBX segment comes before any OBR/,
      },
      {
        name: 'non-numeric NM',
        message: good.replace('MSGGOOD1', 'MSGBAD-NM').replace(/(\rOBX\|1\|NM\|[^|]*\|1\|)[^|]*/, '$1high'),
        reason: /'high' is not a number/,
      },
    ];
    for (const c of cases) {
      const res = await post(c.message);
      const ack = ackOf(res.text);
      expect({ name: c.name, status: res.status, code: ack.code }).toEqual({ name: c.name, status: 400, code: 'AR' });
      expect(ack.text.replace(/\\S\\/g, '^')).toMatch(c.reason);
    }
    const entries = await refusals();
    for (const controlId of ['MSGBAD-TYPE', 'MSGBAD-NOOBR', 'MSGBAD-SEG', 'MSGBAD-ORDER', 'MSGBAD-NM', '(no MSH-10)']) {
      const entry = entries.find((e) => e.target.id === controlId);
      expect(entry).toMatchObject({
        status: 'failed',
        team_id: tenant.teamId,
        actor: { management_key_id: null, team_api_key_id: expect.any(String) },
        error: { status: 400 },
      });
      expect(entry!.error.detail).toMatch(/^AR: /);
    }
    // Nothing was applied: the order still waits for its results.
    expect(lowOf((await client.get(`/v3/order/${order.id}`)).body.last_event.status)).toBe('requisition_created');
  }, 60000);

  it('refuses an unknown order (404, AE), a foreign specimen and an unknown code (422, AE), each audited', async () => {
    const panel = panels()[0];
    const order = await orderOf([panel.id]);
    const unknown = await post(panelMessage(order, panel, { controlId: 'MSGUNKNOWN', placerOrderNumber: '00000000-0000-4000-8000-000000000000' }));
    expect(unknown.status).toBe(404);
    expect(ackOf(unknown.text)).toMatchObject({ code: 'AE', controlId: 'MSGUNKNOWN' });
    expect(ackOf(unknown.text).text).toContain('is not an order of this team');
    const otherTeam = await createTenant(app.deps, 'Another lab customer');
    const foreign = await teamClient(app, otherTeam).post('/v3/lab/intake/hl7', panelMessage(order, panel, { controlId: 'MSGFOREIGN' }), {
      'content-type': 'text/plain',
    });
    expect(foreign.status).toBe(404);
    const specimen = await post(panelMessage(order, panel, { controlId: 'MSGSPECIMEN', specimenId: 'SOMEONE-ELSE' }));
    expect(specimen.status).toBe(422);
    expect(ackOf(specimen.text).text).toContain('is not the sample id');
    const code = await post(panelMessage(order, panel, { controlId: 'MSGCODE' }).replace(/(\rOBX\|1\|NM\|)[^|]*/, '$199999-9^Mystery analyte^LN'));
    expect(code.status).toBe(422);
    expect(ackOf(code.text).text).toContain('LOINC 99999-9');
    const entries = await refusals();
    expect(entries.find((e) => e.target.id === 'MSGUNKNOWN')).toMatchObject({
      error: { status: 404, detail: expect.stringMatching(/^AE: Order '0{8}-.*is not an order of this team/) },
    });
    expect(entries.find((e) => e.target.id === 'MSGSPECIMEN')?.error.status).toBe(422);
    expect(entries.find((e) => e.target.id === 'MSGCODE')?.error.status).toBe(422);
    expect((await client.post('/v3/lab/intake/hl7', 'MSH|', { 'x-service-api-key': 'sk_us_wrong' })).status).toBe(401);
  }, 60000);

  it('applies a message once: a resend with the same MSH-10 gets the first ACK and changes nothing; another message under it is refused', async () => {
    const panel = panels()[0];
    const order = await orderOf([panel.id]);
    const message = panelMessage(order, panel, { controlId: `RESEND-${order.id.slice(0, 8)}` });
    const first = await post(message);
    expect(first.status).toBe(200);
    const done = await orderReaches(client, order.id, 'completed');
    const results = (await client.get(`/v3/order/${order.id}/result`)).body;
    const again = await post(message);
    expect(again.status).toBe(200);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const after = (await client.get(`/v3/order/${order.id}`)).body;
    expect(after.events).toEqual(done.events);
    expect((await client.get(`/v3/order/${order.id}/result`)).body.metadata.date_reported).toBe(results.metadata.date_reported);
    const reused = await post(message.replace(/\|N\|\|\|F\|/, '|H|||F|'));
    expect(reused.status).toBe(409);
    expect(ackOf(reused.text).text).toContain('was already used for a different message');
  }, 60000);

  it('a critical value (HH) makes the order critical and raises labtest.result.critical at the receiver', async () => {
    const cmp = panels().find((p) => p.slug === 'cmp')!;
    const order = await orderOf([cmp.id]);
    const res = await post(
      panelMessage(order, cmp, { overrides: { potassium: { value: '7.2', flags: 'HH', note: 'Critical value called to Dr. House at 10:42 by J. Doe.' } } }),
    );
    expect(res.status).toBe(200);
    expect((await orderReaches(client, order.id, 'completed')).interpretation).toBe('critical');
    const result = (await client.get(`/v3/order/${order.id}/result`)).body;
    expect(result.results.find((r: { slug: string }) => r.slug === 'potassium')).toMatchObject({
      value: 7.2,
      interpretation: 'critical',
      is_above_max_range: true,
      notes: expect.stringContaining('Critical value called'),
    });
    const event = await eventually(async () => criticalEvents(order.id)[0], 20000, 'labtest.result.critical');
    expect(event.data).toMatchObject({ order_id: order.id, interpretation: 'critical', status: 'final' });
  }, 60000);

  it('a corrected result after the final one moves the order to corrected with the corrected values', async () => {
    const thyroid = panels().find((p) => p.slug === 'thyroid_panel')!;
    const order = await orderOf([thyroid.id]);
    expect((await post(panelMessage(order, thyroid))).status).toBe(200);
    await orderReaches(client, order.id, 'completed');
    const corrected = panelMessage(order, thyroid, {
      reportStatus: 'C',
      overrides: { tsh: { value: '7.9', flags: 'H', status: 'C', note: 'Corrected result: specimen re-assayed.' } },
    });
    const res = await post(corrected);
    expect(ackOf(res.text).code).toBe('AA');
    const done = await orderReaches(client, order.id, 'corrected');
    expect(done.events.map((e: { status: string }) => lowOf(e.status)).slice(-2)).toEqual(['completed', 'corrected']);
    expect(done.interpretation).toBe('abnormal');
    const result = (await client.get(`/v3/order/${order.id}/result`)).body;
    expect(result.results.find((r: { slug: string }) => r.slug === 'tsh')).toMatchObject({
      value: 7.9,
      interpretation: 'abnormal',
      notes: 'Corrected result: specimen re-assayed.',
    });
    // A final report cannot follow: the order is done.
    const late = await post(panelMessage(order, thyroid));
    expect(late.status).toBe(409);
    expect(ackOf(late.text).text).toContain('only a correction');
  }, 60000);
});

describe('erased stays erased: nothing of an order whose patient data was erased is taken or readable again', () => {
  /** A completed order of a user of its own, whose orders are then erased as the user's deletion erases them. */
  async function erasedCompletedOrder() {
    const thyroid = panels().find((p) => p.slug === 'thyroid_panel')!;
    const order = await orderOf([thyroid.id]);
    expect((await post(panelMessage(order, thyroid))).status).toBe(200);
    const done = await orderReaches(client, order.id, 'completed');
    await eraseUserOrders(app.deps, tenant.teamId, order.user_id);
    const erased = await app.deps.repos.labOrders.findById(order.id);
    expect(erased?.patient_data_erased_at).toBeInstanceOf(Date);
    return { order, thyroid, events: done.events as unknown[] };
  }
  const eventsAbout = (orderId: string) => rx.requests.filter((r) => r.body.includes(orderId)).length;

  it('an HL7 correction for an erased order is answered as for an unknown order, audited, and writes nothing back', async () => {
    const { order, thyroid, events } = await erasedCompletedOrder();
    const publishedBefore = eventsAbout(order.id);
    const controlId = `ERASED-${order.id.slice(0, 8)}`;
    const res = await post(panelMessage(order, thyroid, { controlId, reportStatus: 'C', overrides: { tsh: { value: '7.9', flags: 'H', status: 'C' } } }));
    const unknownId = '00000000-0000-4000-8000-0000000000e1';
    const unknown = await post(panelMessage({ ...order, id: unknownId }, thyroid, { controlId: `UNKNOWN-${order.id.slice(0, 8)}` }));
    expect(res.status).toBe(unknown.status);
    expect(ackOf(res.text).code).toBe(ackOf(unknown.text).code);
    expect(ackOf(res.text).text).toBe(ackOf(unknown.text).text.replace(unknownId, order.id));
    expect((await refusals()).find((r) => r.target.id === controlId)).toMatchObject({ status: 'failed', error: { status: 404 } });
    // Nothing came back: no results, no new event, no webhook.
    expect(await app.deps.repos.labOrders.findResults(tenant.teamId, order.id)).toBeNull();
    expect((await app.deps.repos.labOrders.findById(order.id))?.events).toHaveLength(events.length);
    expect((await client.get(`/v3/order/${order.id}/result`)).status).not.toBe(200);
    expect(eventsAbout(order.id)).toBe(publishedBefore);
  }, 60000);

  it('a correction run that passed the check just before the erasure records nothing: no results, no event, no webhook', async () => {
    const { order, events } = await erasedCompletedOrder();
    const publishedBefore = eventsAbout(order.id);
    const { client: temporal, taskQueue } = app.deps.temporal;
    const method = (await app.deps.repos.labOrders.findById(order.id))!.method;
    const run = await temporal.workflow.execute(labOrderCorrectionWorkflow, {
      workflowId: `test-correction-${order.id}`,
      taskQueue,
      args: [
        {
          orderId: order.id,
          method,
          lastEventId: events.length,
          results: { finalStatus: 'corrected', delaySeconds: 0, interpretation: 'critical', hasMissingResults: false },
        },
      ],
    });
    expect(run.final).toMatch(/corrected$/);
    expect(await app.deps.repos.labOrders.findResults(tenant.teamId, order.id)).toBeNull();
    expect((await app.deps.repos.labOrders.findById(order.id))?.events).toHaveLength(events.length);
    expect(eventsAbout(order.id)).toBe(publishedBefore);
  }, 60000);

  it('results written after the erasure are removed by the writer itself; an event is appended once however often it is sent', async () => {
    const { order } = await erasedCompletedOrder();
    const repo = app.deps.repos.labOrders;
    const now = new Date();
    const results = {
      _id: order.id,
      team_id: tenant.teamId,
      user_id: order.user_id,
      status: 'corrected' as const,
      interpretation: 'normal' as const,
      date_collected: now,
      date_received: now,
      date_reported: now,
      results: [],
      missing_results: [],
      sample_information: {},
      created_at: now,
      updated_at: now,
    };
    expect(await repo.saveResults(results)).toBe(false);
    expect(await repo.findResults(tenant.teamId, order.id)).toBeNull();
    const erased = (await repo.findById(order.id))!;
    expect(
      await repo.appendEvent(
        erased,
        { id: 99, created_at: now, status: `${erased.method}.completed.corrected`, status_detail: null },
        'completed',
        'corrected',
      ),
    ).toBeNull();
    expect((await repo.findById(order.id))!.events.some((e) => e.id === 99)).toBe(false);

    // Two overlapping attempts of the same append (a retried activity beside a slow first one): one event.
    const live = await orderOf([panels()[0].id]);
    const doc = (await repo.findById(live.id))!;
    const event = { id: 1000, created_at: now, status: doc.events.at(-1)!.status, status_detail: null };
    await Promise.all([1, 2, 3].map(() => repo.appendEvent(doc, event, doc.status, doc.low_level_status)));
    expect((await repo.findById(live.id))!.events.filter((e) => e.id === 1000)).toHaveLength(1);
  }, 60000);
});

describe('a message whose first delivery stalled', () => {
  it('is taken over by exactly one of two concurrent resends after the lease; the other is told it is in progress', async () => {
    const { createHash } = await import('node:crypto');
    const panel = panels()[0];
    const order = await orderOf([panel.id]);
    const controlId = `STALLED-${order.id.slice(0, 8)}`;
    const message = panelMessage(order, panel, { controlId });
    // The first delivery claimed the message a minute ago and stopped before applying it.
    const doc = (await app.deps.repos.labOrders.findById(order.id))!;
    const { report } = orderReport(parseOru(unframe(message)), doc, catalogue());
    const long = new Date(Date.now() - 60_000);
    await app.deps.repos.hl7Intake.claim({
      _id: intakeMessageId(tenant.teamId, controlId),
      team_id: tenant.teamId,
      control_id: controlId,
      message_sha256: createHash('sha256').update(unframe(message)).digest('hex'),
      order_id: order.id,
      state: 'pending',
      claim: 'the-stalled-delivery',
      claimed_at: long,
      report,
      ack: null,
      created_at: long,
      applied_at: null,
    });
    const answers = await Promise.all([post(message), post(message)]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
    expect(ackOf(answers.find((a) => a.status === 409)!.text).text).toContain('is still being applied');
    await orderReaches(client, order.id, 'completed');
    // The stalled delivery, resuming, cannot mark what its successor applied.
    expect(await app.deps.repos.hl7Intake.markApplied(intakeMessageId(tenant.teamId, controlId), 'the-stalled-delivery', 'stale ACK')).toBe(false);
    const again = await post(message);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(answers.find((a) => a.status === 200)!.text);
  }, 60000);
});
