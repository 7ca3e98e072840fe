import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { startLabListener, type LabListener } from '../lib/labs/lab-listener';
import type { LabOrderDoc } from '../lib/labs/model';
import type { LabMarker } from '../schemas/lab-catalogue';
import { LabResultReview, LabResultReviewPage } from '../schemas/lab-result-reviews';
import {
  createTenant,
  eventually,
  expectSchema,
  managementClient,
  startTestApp,
  subscribeReceiver,
  teamClient,
  type HttpClient,
  type Tenant,
  type TestApp,
} from './support/harness';
import { createUser, labTestIds, lowOf, orderBody, orderReaches, orderWorkflowIdle } from './support/lab';
import { buildResultMessage, specimenReceived, startFakeLab, type FakeLab, type FakeObservation, type FakeResult } from './support/fake-lab';
import { frame } from '../lib/labs/mllp/framing';
import { eraseUserOrders } from '../lib/labs/order-erasure';
import type { Receiver } from './support/receiver';
import { makeTestAuthority, type TestAuthority } from './support/tls-certificates';
import { storeReceivedMessage } from './support/lab-inbound';
import { privateDeployment, startWorker as startPrivateWorker, stopWorker } from './support/worker';

/**
 * Results in over MLLP, end to end: the fake laboratory (test/support/fake-lab.ts) sends ORU^R01 to the api's
 * listener (lib/labs/lab-listener.ts) as a lab would; the listener stores each message before its ACK, the account's
 * applier workflow applies it to its order through the path the HTTP intake uses, and what a customer sees (the
 * order's status and events, its results and result PDF, the review inbox) is read through the public API. This file
 * runs its own worker on a private deployment, so it can stop it while a result arrives.
 */
const deployment = privateDeployment('lab-mllp');
let worker: ChildProcess | null = null;
let app: TestApp;
let tenant: Tenant;
let client: HttpClient;
let mgmt: HttpClient;
let rx: Receiver;
let fake: FakeLab;
let listener: LabListener;
let tlsListener: LabListener;
let authority: TestAuthority;
let accountId: string;
let tests: Awaited<ReturnType<typeof labTestIds>>;
let userId: string;

const startWorker = () => startPrivateWorker(deployment, { WEBHOOK_SWEEP_INTERVAL_MS: '1000', WEBHOOK_SWEEP_GRACE_MS: '2000' });
const target = () => ({ host: '127.0.0.1', port: listener.port });
const accountsPath = () => `/v1/org/${tenant.orgId}/lab_account/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/${app.deps.config.DEPLOYMENT_REGION}`;
const reviewsPath = () => `/v1/org/${tenant.orgId}/lab_result_review/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/${app.deps.config.DEPLOYMENT_REGION}`;

beforeAll(async () => {
  app = await startTestApp(deployment);
  worker = startWorker();
  tenant = await createTenant(app.deps, 'Lab results over MLLP');
  client = teamClient(app, tenant);
  mgmt = managementClient(app, tenant);
  ({ rx } = await subscribeReceiver(app, tenant, ['labtest.*']));
  tests = await labTestIds(client);
  userId = await createUser(client);
  fake = await startFakeLab();
  authority = makeTestAuthority('MLLP results test CA');
  // The allow-list is read on every connection (no cache), so a change of results_from applies at once.
  listener = await startLabListener(app.deps, { port: 0, host: '127.0.0.1', accountCacheMs: 0 });
  tlsListener = await startLabListener(app.deps, {
    port: 0,
    host: '127.0.0.1',
    tls: { cert: authority.server.cert, key: authority.server.key },
    accountCacheMs: 0,
  });
  const walkIn = (await client.get(`/v3/lab_tests/${tests.walk_in_test}`)).body;
  const account = await mgmt.post(accountsPath(), {
    lab_slug: walkIn.lab.slug,
    name: 'Fake laboratory',
    account_number: 'ACC-123',
    mllp: { host: '127.0.0.1', port: fake.port },
    msh: { sending_application: 'HEALTHBRIDGE', sending_facility: 'HEALTHBRIDGE', receiving_application: 'FAKELAB', receiving_facility: 'FAKELAB' },
    profile: 'LOI_2.5.1',
    // Latin-1: a message without MSH-18 is read in it (UTF-8 ones from the fake say so in MSH-18).
    charset: '8859/1',
    results_from: ['127.0.0.1'],
    order_codes: Object.fromEntries(walkIn.markers.map((m: { id: number }) => [String(m.id), { code: `FL${m.id}` }])),
  });
  expect(account.status).toBe(200);
  accountId = account.body.id;
}, 120_000);

afterAll(async () => {
  if (worker) await stopWorker(worker, 'SIGKILL');
  await listener?.close();
  await tlsListener?.close();
  await fake?.close();
  await rx?.close();
  await app.close();
});

/** An order of `user` (a walk-in test by default: it has partial_results), dispatched to the lab, and the markers its results report. */
async function dispatchedOrder(
  user = userId,
  method: 'walk_in_test' | 'testkit' = 'walk_in_test',
): Promise<{ id: string; doc: LabOrderDoc; markers: LabMarker[] }> {
  const created = await client.post('/v3/order', orderBody(user, tests[method]));
  expect(created.status).toBe(200);
  const id = created.body.order.id;
  await orderReaches(client, id, 'requisition_created');
  const doc = (await app.deps.repos.labOrders.findById(id))!;
  return { id, doc, markers: app.deps.labCatalogue.resultMarkersFor(doc) };
}

/** An observation the catalogue calls normal for `m` (the fake escapes `value`; `rawValue` goes as written). */
function observationOf(m: LabMarker, override: Partial<FakeObservation> = {}): FakeObservation {
  const base = { loinc: m.loinc ?? null, code: m.provider_id ?? m.slug, name: m.name, units: m.unit ?? null, range: m.reference_range?.text ?? null };
  if (m.result_type === 'numeric') {
    const r = m.reference_range!;
    const v = r.low != null && r.high != null ? (r.low + r.high) / 2 : r.high != null ? r.high * 0.6 : r.low! * 1.3;
    return { ...base, valueType: 'NM', value: String(Math.round(v * 100) / 100), ...override };
  }
  if (m.result_type === 'range') return { ...base, valueType: 'SN', rawValue: '>^60', ...override };
  if (m.result_type === 'coded_value') return { ...base, valueType: 'CWE', rawValue: `NR^${m.coded_values![0]}^L`, ...override };
  return { ...base, valueType: 'TX', value: 'Normocytic, normochromic red cells.', ...override };
}

const resultOf = (order: { doc: LabOrderDoc }, status: 'P' | 'F' | 'C', observations: FakeObservation[], extra: Partial<FakeResult> = {}): FakeResult => ({
  placerNumber: order.doc.placer_number,
  tests: [{ code: 'PANEL', name: 'Ordered panel', status, observations }],
  ...extra,
});

/** Webhook events the receiver got about `orderId`, by event id (a retried delivery counts once). */
function orderEvents(orderId: string): { type: string; low: string; statusDetail: string | null }[] {
  const byId = new Map<string, { type: string; low: string; statusDetail: string | null }>();
  for (const r of rx.requests) {
    const body = JSON.parse(r.body);
    if (body.data?.id !== orderId) continue;
    byId.set(String(r.headers['webhook-id']), {
      type: body.event_type,
      low: lowOf(body.data.last_event.status),
      statusDetail: body.data.last_event.status_detail,
    });
  }
  return [...byId.values()];
}

const fakePdf = (label: string) => Buffer.from(`%PDF-1.4\n% ${label}\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n`, 'latin1');

async function resultPdf(orderId: string): Promise<Buffer> {
  const res = await fetch(`${app.url}/v3/order/${orderId}/result/pdf`, { headers: { 'x-service-api-key': tenant.teamKey } });
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

describe('results over MLLP through their life', () => {
  it('P, then F, then C: partial results, the final ones with the lab PDF served, then corrected ones with the earlier version kept', async () => {
    const order = await dispatchedOrder();
    const observations = order.markers.map((m) => observationOf(m));

    const partial = await fake.sendResults(target(), resultOf(order, 'P', observations.slice(0, 1)));
    expect(partial.code).toBe('AA');
    await orderReaches(client, order.id, 'partial_results');
    const partialResults = (await client.get(`/v3/order/${order.id}/result`)).body;
    expect(partialResults.metadata.status).toBe('partial');
    expect(partialResults.results.map((r: { slug: string }) => r.slug)).toEqual([order.markers[0].slug]);

    const finalPdf = fakePdf('final report');
    expect((await fake.sendResults(target(), resultOf(order, 'F', observations, { pdf: finalPdf }))).code).toBe('AA');
    await orderReaches(client, order.id, 'completed');
    const final = (await client.get(`/v3/order/${order.id}/result`)).body;
    expect(final.metadata.status).toBe('final');
    expect(final.results.map((r: { slug: string }) => r.slug).sort()).toEqual(order.markers.map((m) => m.slug).sort());
    expect(final.missing_results).toEqual([]);
    // The lab's own report is served instead of ours.
    expect((await resultPdf(order.id)).equals(finalPdf)).toBe(true);

    const numeric = order.markers.find((m) => m.result_type === 'numeric')!;
    const correctedValue = String(numeric.reference_range!.high! * 3);
    const corrected = order.markers.map((m) => observationOf(m, m.id === numeric.id ? { value: correctedValue, flags: 'HH' } : {}));
    const correctedPdf = fakePdf('corrected report');
    expect((await fake.sendResults(target(), resultOf(order, 'C', corrected, { pdf: correctedPdf }))).code).toBe('AA');
    await orderReaches(client, order.id, 'corrected');
    const after = (await client.get(`/v3/order/${order.id}/result`)).body;
    expect(after.results.find((r: { slug: string }) => r.slug === numeric.slug).result).toBe(String(Number(correctedValue)));
    expect((await resultPdf(order.id)).equals(correctedPdf)).toBe(true);
    // The earlier (final) version is kept beside the corrected one.
    const versions = await app.deps.repos.labOrders.earlierResults(tenant.teamId, order.id);
    expect(versions.map((v) => v.status)).toEqual(['final']);
    expect(versions[0].results.find((r) => r.slug === numeric.slug)?.result).toBe(final.results.find((r: { slug: string }) => r.slug === numeric.slug).result);
    expect(versions[0].lab_pdf).toBe(finalPdf.toString('base64'));

    // One event per status, in order.
    const lows = await eventually(async () => {
      const seen = orderEvents(order.id).map((e) => e.low);
      return seen.includes('corrected') ? seen : null;
    });
    for (const low of ['partial_results', 'completed', 'corrected']) expect(lows.filter((l) => l === low)).toHaveLength(1);
  });

  it('the same ORU twice, and again under a new control id: acknowledged each time, applied once, one result event', async () => {
    const order = await dispatchedOrder();
    const at = new Date();
    const message = resultOf(
      order,
      'F',
      order.markers.map((m) => observationOf(m)),
      { controlId: `DUP${Date.now()}`, at },
    );
    const first = await fake.sendResults(target(), message);
    const again = await fake.sendResults(target(), message);
    const copy = await fake.sendResults(target(), { ...message, controlId: `COPY${Date.now()}` });
    expect([first.code, again.code, copy.code]).toEqual(['AA', 'AA', 'AA']);
    // Each ACK names the message it answers.
    expect(copy.ack).toContain(`|COPY`);
    await orderReaches(client, order.id, 'completed');
    await orderWorkflowIdle(app, order.id);
    await eventually(async () => orderEvents(order.id).some((e) => e.low === 'completed'));
    // One message stored for the three deliveries (settled a moment after the order recorded its results).
    const messages = app.inspect.collection('lab_inbound_messages');
    const stored = await eventually(async () => {
      const doc = await messages.findOne({ account_id: accountId, control_id: first.controlId });
      return doc?.state === 'applied' ? doc : null;
    });
    expect(stored.applied_to).toEqual([{ order_id: order.id, outcome: 'completed' }]);
    expect(stored.duplicates).toBe(2);
    expect(await messages.countDocuments({ account_id: accountId, content_sha256: stored.content_sha256 })).toBe(1);
    expect(orderEvents(order.id).filter((e) => e.low === 'completed')).toHaveLength(1);
    const detail = (await client.get(`/v3/order/${order.id}`)).body;
    expect(detail.events.filter((e: { status: string }) => lowOf(e.status) === 'completed')).toHaveLength(1);

    // Another message under a control id already used is not taken for a resend: it is kept, and (a second final
    // report for a completed order) filed for review rather than dropped.
    const other = order.markers.map((m, i) => observationOf(m, i === 0 ? { notes: ['Amended comment.'] } : {}));
    expect((await fake.sendResults(target(), { ...message, tests: [{ ...message.tests[0], observations: other }] })).code).toBe('AA');
    const review = await eventually(async () => {
      const page = await mgmt.get(`${reviewsPath()}?status=pending`);
      return page.body.data.find((r: { control_id: string }) => r.control_id === first.controlId);
    });
    expect(review).toMatchObject({ reason: 'not_applicable', placer_numbers: [order.doc.placer_number] });
    expect(await messages.countDocuments({ account_id: accountId, control_id: first.controlId })).toBe(2);
  });

  it('X: a result the lab could not obtain is a missing result with its reason; a rejected specimen fails the order with its status detail', async () => {
    const order = await dispatchedOrder();
    const [lost, ...rest] = order.markers;
    const observations = [observationOf(lost, { status: 'X', notes: ['Specimen hemolyzed; recollection advised.'] }), ...rest.map((m) => observationOf(m))];
    expect((await fake.sendResults(target(), resultOf(order, 'F', observations))).code).toBe('AA');
    await orderReaches(client, order.id, 'completed');
    const results = (await client.get(`/v3/order/${order.id}/result`)).body;
    expect(results.missing_results).toEqual([expect.objectContaining({ slug: lost.slug, note: 'Specimen hemolyzed; recollection advised.' })]);
    expect((await client.get(`/v3/order/${order.id}`)).body.has_missing_results).toBe(true);

    const rejected = await dispatchedOrder();
    const problem: FakeResult = {
      placerNumber: rejected.doc.placer_number,
      tests: [{ code: 'PANEL', name: 'Ordered panel', status: 'X', specimenRejectReason: { code: 'RH', text: 'Hemolysis' } }],
    };
    expect((await fake.sendResults(target(), problem)).code).toBe('AA');
    const failed = await orderReaches(client, rejected.id, 'sample_error');
    // The reference's status detail for SPM-21 RH (hemolysis), on the failed status's event only.
    expect(failed.last_event).toMatchObject({ status: 'failed.walk_in_test.sample_error', status_detail: 'sample_hemolyzed' });
    expect(failed.events.filter((e: { status_detail: string | null }) => e.status_detail !== null)).toHaveLength(1);
  });

  it("several OBRs in one message: each test's results go to the order", async () => {
    const order = await dispatchedOrder();
    const observations = order.markers.map((m) => observationOf(m));
    const half = Math.ceil(observations.length / 2);
    const message: FakeResult = {
      placerNumber: order.doc.placer_number,
      tests: [
        { code: 'PART1', name: 'First test', status: 'F', observations: observations.slice(0, half) },
        { code: 'PART2', name: 'Second test', status: 'F', observations: observations.slice(half) },
      ],
    };
    expect((await fake.sendResults(target(), message)).code).toBe('AA');
    await orderReaches(client, order.id, 'completed');
    const results = (await client.get(`/v3/order/${order.id}/result`)).body;
    expect(results.results.map((r: { slug: string }) => r.slug).sort()).toEqual(order.markers.map((m) => m.slug).sort());
    expect(results.missing_results).toEqual([]);
  });

  it('specimen received (OBR-25 I): a kit moves to delivered_to_lab; a walk-in order has no such status and stays where it is', async () => {
    const kit = await dispatchedOrder(userId, 'testkit');
    expect((await fake.sendResults(target(), specimenReceived(kit.doc.placer_number, [{ code: 'PANEL', name: 'Kit panel' }]))).code).toBe('AA');
    const delivered = await orderReaches(client, kit.id, 'delivered_to_lab');
    expect(delivered.last_event.status).toBe('sample_with_lab.testkit.delivered_to_lab');

    const walkIn = await dispatchedOrder();
    const sent = await fake.sendResults(target(), specimenReceived(walkIn.doc.placer_number, [{ code: 'PANEL', name: 'Walk-in panel' }]));
    expect(sent.code).toBe('AA');
    const settled = await eventually(async () => {
      const doc = await app.inspect.collection('lab_inbound_messages').findOne({ control_id: sent.controlId });
      return doc?.state === 'applied' ? doc : null;
    });
    expect(settled.applied_to).toEqual([{ order_id: walkIn.id, outcome: expect.stringMatching(/^nothing to change: specimen received/) }]);
    expect(lowOf((await client.get(`/v3/order/${walkIn.id}`)).body.last_event.status)).toBe('requisition_created');
  });

  it('a lab in enhanced acknowledgement mode (MSH-15 AL) gets the accept acknowledgement CA once its message is stored', async () => {
    const order = await dispatchedOrder();
    const built = buildResultMessage(
      resultOf(
        order,
        'F',
        order.markers.map((m) => observationOf(m)),
      ),
      { controlId: `ENH${Date.now()}`, fillerNumber: 'FL-ENH' },
    );
    const [msh, ...rest] = built.text.split('\r');
    const fields = msh.split('|');
    fields[14] = 'AL'; // MSH-15 (fields[0] is 'MSH', MSH-1 the separator itself)
    const { code } = await fake.sendMessage(target(), built.controlId, Buffer.from([fields.join('|'), ...rest].join('\r'), 'utf8'));
    expect(code).toBe('CA');
    await orderReaches(client, order.id, 'completed');
  });

  it('a Latin-1 message without MSH-18 is read in the account character set, with its escapes resolved', async () => {
    const order = await dispatchedOrder();
    const note = 'Befund geprüft: Müller & Söhne | Zürich';
    const observations = order.markers.map((m, i) => observationOf(m, i === 0 ? { notes: [note] } : {}));
    const sent = await fake.sendResults(
      target(),
      resultOf(order, 'F', observations, { charset: '8859/1', declareCharset: false, patient: { family: 'Müller', given: 'Jürgen', birthDate: '19800101' } }),
    );
    expect(sent.code).toBe('AA');
    // What went over the wire: Latin-1 bytes, MSH-18 empty, '&' and '|' escaped.
    expect(sent.text).toContain('Müller \\T\\ Söhne \\F\\ Zürich');
    expect(sent.text.split('\r')[0].split('|')[17]).toBe('');
    await orderReaches(client, order.id, 'completed');
    const results = (await client.get(`/v3/order/${order.id}/result`)).body;
    expect(results.results.find((r: { slug: string }) => r.slug === order.markers[0].slug).notes).toBe(note);
    const stored = await app.inspect.collection('lab_inbound_messages').findOne({ control_id: sent.controlId });
    expect(stored?.charset).toMatch(/8859-1|latin1/);
  });
});

describe('a result arriving while the worker is down', () => {
  it('is acknowledged once stored, and applied when the worker is back', async () => {
    const order = await dispatchedOrder();
    await orderWorkflowIdle(app, order.id);
    await stopWorker(worker!, 'SIGKILL');
    worker = null;
    const sent = await fake.sendResults(
      target(),
      resultOf(
        order,
        'F',
        order.markers.map((m) => observationOf(m)),
      ),
    );
    expect(sent.code).toBe('AA');
    // Acknowledged: stored, and nothing applied yet.
    const stored = await app.inspect.collection('lab_inbound_messages').findOne({ control_id: sent.controlId });
    expect(stored?.state).toBe('received');
    expect(lowOf((await client.get(`/v3/order/${order.id}`)).body.last_event.status)).toBe('requisition_created');

    worker = startWorker();
    await orderReaches(client, order.id, 'completed', 60_000);
    await eventually(async () => (await app.inspect.collection('lab_inbound_messages').findOne({ control_id: sent.controlId }))?.state === 'applied');
  });
});

describe('a message stored whose applier was never told (the api died between the store and the signal)', () => {
  it('is applied by the stranded-work sweep', async () => {
    const order = await dispatchedOrder();
    // What the listener stores, as it stores it, but with no signal after it; received two minutes ago (past the grace).
    const text = buildResultMessage(
      resultOf(
        order,
        'F',
        order.markers.map((m) => observationOf(m)),
      ),
      {
        controlId: `STRANDED${Date.now()}`,
        fillerNumber: 'FL-STRANDED',
      },
    ).text.replace(/\r$/, '');
    const messageId = await storeReceivedMessage(app, {
      accountId,
      orgId: tenant.orgId,
      labSlug: 'fake',
      text,
      receivedAt: new Date(Date.now() - 120_000),
    });
    await orderReaches(client, order.id, 'completed', 60_000);
    await eventually(async () => (await app.deps.repos.labInbound.find(messageId))?.state === 'applied', 30_000, 'the stranded message applied');
  });
});

describe('the review inbox', () => {
  const unsolicited = (order: { markers: LabMarker[] }, filler: string): FakeResult => ({
    placerNumber: null,
    fillerNumber: filler,
    patient: { id: 'LAB-PAT-1', family: 'Doe', given: 'Jane', birthDate: '19800101' },
    tests: [{ code: 'PANEL', name: 'Paper order panel', status: 'F', observations: order.markers.map((m) => observationOf(m)) }],
  });

  async function pendingReview(filler: string) {
    return eventually(async () => {
      const page = await mgmt.get(`${reviewsPath()}?status=pending`);
      expect(page.status).toBe(200);
      expectSchema(LabResultReviewPage, page.body);
      return page.body.data.find((r: { filler_numbers: string[] }) => r.filler_numbers.includes(filler));
    });
  }

  const reviewEvents = (reviewId: string) =>
    rx.requests
      .map((r) => JSON.parse(r.body) as { event_type: string; data: { id: string; status: string } })
      .filter((e) => e.event_type.startsWith('labtest.match_review.') && e.data.id === reviewId);

  it('an unsolicited result lands in the inbox; matched by an operator, the order completes', async () => {
    const order = await dispatchedOrder();
    const filler = `UNSOL${Date.now()}`;
    expect((await fake.sendResults(target(), unsolicited(order, filler))).code).toBe('AA');
    const review = await pendingReview(filler);
    expect(review).toMatchObject({ reason: 'no_matching_order', lab_account_id: accountId, patient: { name: 'Jane Doe', dob: '19800101' } });
    await eventually(async () => reviewEvents(review.id).some((e) => e.event_type === 'labtest.match_review.created'));
    // Nothing was guessed onto the order.
    expect(lowOf((await client.get(`/v3/order/${order.id}`)).body.last_event.status)).toBe('requisition_created');

    const matched = await mgmt.post(`${reviewsPath()}/${review.id}/match`, { order_id: order.id });
    expect(matched.status).toBe(200);
    expectSchema(LabResultReview, matched.body);
    expect(matched.body).toMatchObject({ status: 'matched', matched_order_id: order.id, matched_team_id: tenant.teamId });
    await orderReaches(client, order.id, 'completed');
    expect((await client.get(`/v3/order/${order.id}/result`)).body.results).toHaveLength(order.markers.length);
    await eventually(async () => reviewEvents(review.id).some((e) => e.event_type === 'labtest.match_review.updated' && e.data.status === 'matched'));
    // Matching it again elsewhere is refused; the audit log names the operator's key.
    const other = await dispatchedOrder();
    expect((await mgmt.post(`${reviewsPath()}/${review.id}/match`, { order_id: other.id })).status).toBe(409);
    const audit = await mgmt.get(`/v1/org/${tenant.orgId}/audit_log?action=lab_result_review.match`);
    expect(
      audit.body.data
        .filter((e: { target: { id: string }; status: string }) => e.target.id === review.id)
        .map((e: { status: string }) => e.status)
        .sort(),
    ).toEqual(['failed', 'succeeded']);
  });

  it('rejected by an operator, nothing changes', async () => {
    const order = await dispatchedOrder();
    const filler = `UNSOL${Date.now()}R`;
    expect((await fake.sendResults(target(), unsolicited(order, filler))).code).toBe('AA');
    const review = await pendingReview(filler);
    const before = (await client.get(`/v3/order/${order.id}`)).body;
    const rejected = await mgmt.post(`${reviewsPath()}/${review.id}/reject`);
    expect(rejected.status).toBe(200);
    expect(rejected.body).toMatchObject({ status: 'rejected', matched_order_id: null });
    expect((await mgmt.get(`${reviewsPath()}/${review.id}`)).body.status).toBe('rejected');
    expect((await mgmt.post(`${reviewsPath()}/${review.id}/match`, { order_id: order.id })).status).toBe(409);
    await eventually(async () => reviewEvents(review.id).some((e) => e.event_type === 'labtest.match_review.updated' && e.data.status === 'rejected'));
    await orderWorkflowIdle(app, order.id);
    expect((await client.get(`/v3/order/${order.id}`)).body.events).toEqual(before.events);
    expect((await client.get(`/v3/order/${order.id}/result`)).status).toBe(404);
  });
});

describe('an erased order', () => {
  it("takes no result again: a correction for it is filed for review as an unknown order's, and audited", async () => {
    // A user of its own: erasure takes every order of the user.
    const order = await dispatchedOrder(await createUser(client));
    const observations = order.markers.map((m) => observationOf(m));
    const final = await fake.sendResults(target(), resultOf(order, 'F', observations));
    await orderReaches(client, order.id, 'completed');
    await eraseUserOrders(app.deps, tenant.teamId, order.doc.user_id);
    const erased = (await app.deps.repos.labOrders.findById(order.id))!;
    expect(erased.patient_data_erased_at).toBeInstanceOf(Date);
    // The lab's message about it keeps no patient data.
    const message = await app.inspect.collection('lab_inbound_messages').findOne({ control_id: final.controlId });
    expect([message?.text, message?.raw]).toEqual(['', '']);

    const correction = await fake.sendResults(target(), resultOf(order, 'C', observations));
    expect(correction.code).toBe('AA');
    const review = await eventually(async () => {
      const page = await mgmt.get(`${reviewsPath()}?status=pending`);
      return page.body.data.find((r: { control_id: string }) => r.control_id === correction.controlId);
    });
    expect(review).toMatchObject({ reason: 'no_matching_order', placer_numbers: [order.doc.placer_number] });
    expect(review.detail).not.toMatch(/erased/);
    const audit = await mgmt.get(`/v1/org/${tenant.orgId}/audit_log?action=lab_results.erased_order`);
    expect(audit.body.data).toEqual([
      expect.objectContaining({ team_id: tenant.teamId, status: 'failed', target: { type: 'hl7_message', id: correction.controlId } }),
    ]);
    // Nothing came back to the order.
    expect((await app.deps.repos.labOrders.findById(order.id))?.events).toEqual(erased.events);
    expect(await app.deps.repos.labOrders.findResults(tenant.teamId, order.id)).toBeNull();
    // Matching it to the erased order is refused as for an unknown order.
    expect((await mgmt.post(`${reviewsPath()}/${review.id}/match`, { order_id: order.id })).status).toBe(404);
  });
});

describe('who may send results', () => {
  /** A connection that sends one frame: the ACK text, or null when the listener closed it without one. */
  const sendRaw = (port: number, bytes: Buffer) =>
    new Promise<string | null>((resolve, reject) => {
      const socket = net.connect({ host: '127.0.0.1', port }, () => socket.write(frame(bytes)));
      let reply = '';
      socket.on('data', (d) => {
        reply += d.toString('latin1');
        if (reply.includes('\u001c\r')) socket.end();
      });
      socket.on('close', () => resolve(reply || null));
      socket.on('error', (err) => ((err as NodeJS.ErrnoException).code === 'ECONNRESET' ? resolve(null) : reject(err)));
    });

  it('a connection from an address no account lists is refused; over TLS a client certificate listed by fingerprint is admitted, another refused', async () => {
    const message = Buffer.from(`MSH|^~\\&|FAKELAB|FAKELAB|HEALTHBRIDGE|HEALTHBRIDGE|20260101000000||ORU^R01|PROBE${Date.now()}|P|2.5.1\r`, 'latin1');
    // Listed: admitted (a message that cannot be applied is still stored and answered).
    expect(await sendRaw(listener.port, message)).toContain('MSA|');

    // Only the client certificate is listed now: loopback is an unknown address.
    const changed = await mgmt.patch(`${accountsPath()}/${accountId}`, { results_from: [authority.client.fingerprint256] });
    expect(changed.status).toBe(200);
    expect(await sendRaw(listener.port, message)).toBeNull();

    const order = await dispatchedOrder();
    const tlsTarget = (cert: { cert: string; key: string }) => ({
      host: '127.0.0.1',
      port: tlsListener.port,
      tls: { ca: authority.ca, cert: cert.cert, key: cert.key },
    });
    const admitted = await fake.sendResults(
      tlsTarget(authority.client),
      resultOf(
        order,
        'F',
        order.markers.map((m) => observationOf(m)),
      ),
    );
    expect(admitted.code).toBe('AA');
    await orderReaches(client, order.id, 'completed');
    const stored = await app.inspect.collection('lab_inbound_messages').findOne({ control_id: admitted.controlId });
    expect(stored?.peer.certificate).toBe(authority.client.fingerprint256);

    const stranger = makeTestAuthority('Another laboratory CA');
    await expect(
      fake.sendResults(
        tlsTarget(stranger.client),
        resultOf(
          order,
          'F',
          order.markers.map((m) => observationOf(m)),
          { controlId: `STRANGER${Date.now()}` },
        ),
      ),
    ).rejects.toThrow();
    expect(await app.inspect.collection('lab_inbound_messages').countDocuments({ control_id: { $regex: '^STRANGER' } })).toBe(0);
  });
});
