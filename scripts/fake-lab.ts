import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadLabCatalogue } from '../lib/labs/catalogue';
import type { LabMarker } from '../schemas/lab-catalogue';
import { type FakeLab, type FakeObservation, type FakeResultTest, startFakeLab } from '../test/support/fake-lab';

/**
 * `DEV_FAKE_LAB=1 npm run dev` starts this after the api is ready: the fake laboratory of the tests
 * (test/support/fake-lab.ts, a real MLLP server following LOI/LRI) on loopback, a lab account of the dev org pointing
 * at it (Quest's catalogue, an order code for every Quest marker) and a team lab test through that account, so a
 * newcomer orders a test, sees the HL7 message arrive at the fake, and gets results back over MLLP to our listener.
 *
 * Environment (set by scripts/dev.mjs): DEV_BASE_URL, DEV_ORG_ID, DEV_MANAGEMENT_KEY, DEV_TEAM_API_KEY, LAB_MLLP_PORT
 * (our listener), DEV_FAKE_LAB_CONTROL_PORT (default 9480, 0 for any free one: the fake's HTTP control port; its MLLP port is any free one,
 * written into the account at each start), DEV_FAKE_LAB_RESULTS_SECONDS (default 60; 0 = never: results only on command).
 * Prints one JSON line ({port, control_url, lab_account_id, lab_test_id, user_id, results_seconds}), then logs what the lab
 * receives and sends, one line each, until stopped.
 */

const LAB_SLUG = 'quest';
const ACCOUNT_NAME = 'Fake laboratory (DEV_FAKE_LAB)';
const TEST_NAME = 'Comprehensive metabolic panel at the fake lab';

const env = (name: string, fallback?: string) => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is not set (scripts/dev.mjs sets it for DEV_FAKE_LAB=1)`);
  return value;
};

const catalogue = loadLabCatalogue();
const lab = catalogue.labBySlug(LAB_SLUG)!;
const labMarkers = catalogue.markers.filter((m) => m.lab_id === lab.id);
/** The lab's own code of a marker (its `provider_id`, as Quest's compendium numbers them). */
const orderCodeOf = (m: LabMarker) => m.provider_id ?? `HB${m.id}`;
const byOrderCode = new Map(labMarkers.map((m) => [orderCodeOf(m), m]));

async function api(method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<any> {
  const res = await fetch(`${env('DEV_BASE_URL')}${path}`, {
    method,
    headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** The dev org's account with the fake (created once, pointed at the fake's port on every start) and its lab test. */
async function ensureAccountAndTest(fakePort: number): Promise<{ accountId: string; labTestId: string; userId: string }> {
  const management = { 'X-Management-Key': env('DEV_MANAGEMENT_KEY') };
  const base = `/v1/org/${env('DEV_ORG_ID')}/lab_account/sandbox/us`;
  const account = {
    name: ACCOUNT_NAME,
    account_number: 'FAKE-0001',
    mllp: { host: '127.0.0.1', port: fakePort },
    msh: { sending_application: 'HEALTHBRIDGE', sending_facility: 'HEALTHBRIDGE-DEV', receiving_application: 'FAKELAB', receiving_facility: 'FAKELAB' },
    profile: 'LOI_2.5.1',
    ack_mode: 'original',
    results_from: ['127.0.0.1', '::1'],
    order_codes: Object.fromEntries(labMarkers.map((m) => [String(m.id), { code: orderCodeOf(m), loinc: m.loinc ?? null }])),
    bill_types: ['client_bill', 'commercial_insurance', 'patient_bill'],
  };
  const listed = await api('GET', base, management);
  const existing = (listed.data ?? listed).find((a: { name: string }) => a.name === ACCOUNT_NAME);
  const accountId: string = existing
    ? (await api('PATCH', `${base}/${existing.id}`, management, { mllp: account.mllp, order_codes: account.order_codes })).id
    : (await api('POST', base, management, { lab_slug: LAB_SLUG, ...account })).id;

  const team = { 'x-service-api-key': env('DEV_TEAM_API_KEY') };
  const cmp = labMarkers.find((m) => m.slug === 'cmp') ?? labMarkers[0];
  const tests = await api('GET', '/v3/lab_tests', team);
  const known = (tests.data ?? tests).find((t: { name: string; lab_account_id?: string }) => t.name === TEST_NAME && t.lab_account_id === accountId);
  const labTestId: string = known
    ? known.id
    : (
        await api('POST', '/v3/lab_tests', team, {
          name: TEST_NAME,
          method: 'walk_in_test',
          description: 'A comprehensive metabolic panel, ordered over HL7 from the fake laboratory of DEV_FAKE_LAB=1.',
          marker_ids: [cmp.id],
          lab_account_id: accountId,
          lab_slug: LAB_SLUG,
        })
      ).id;
  // A patient to order for (POST /v2/user is safely repeatable: a second call's 400 names the existing user).
  const userRes = await fetch(`${env('DEV_BASE_URL')}/v2/user`, {
    method: 'POST',
    headers: { ...team, 'content-type': 'application/json' },
    body: JSON.stringify({ client_user_id: 'fake-lab-patient' }),
  });
  const user = (await userRes.json()) as { user_id?: string; detail?: { user_id?: string } };
  const userId = user.user_id ?? user.detail?.user_id;
  if (!userId) throw new Error(`POST /v2/user: ${userRes.status} ${JSON.stringify(user)}`);
  return { accountId, labTestId, userId };
}

/** A plausible value inside the marker's reference range (the fake's lab reports a healthy patient). */
function observationOf(m: LabMarker): FakeObservation {
  const r = m.reference_range;
  if (m.result_type === 'numeric') {
    const value = r?.low != null && r?.high != null ? (r.low + r.high) / 2 : r?.high != null ? r.high * 0.6 : r?.low != null ? r.low * 1.3 : 10;
    return {
      loinc: m.loinc,
      code: orderCodeOf(m),
      name: m.name,
      value: String(Math.round(value * 10) / 10),
      valueType: 'NM',
      units: m.unit,
      range: r?.text ?? null,
      flags: 'N',
    };
  }
  const text = m.coded_values?.[0] ?? r?.text ?? 'No abnormal findings';
  return { loinc: m.loinc, code: orderCodeOf(m), name: m.name, value: text, valueType: 'ST', units: m.unit ?? null, flags: null };
}

/** The order's tests as the lab reports them: each ordered code's result markers, in `status`. */
function resultTests(tests: { code: string; name: string }[], status: FakeResultTest['status']): FakeResultTest[] {
  return tests.map((t) => {
    const ordered = byOrderCode.get(t.code);
    const observations = status === 'X' || status === 'I' || !ordered ? [] : catalogue.resultMarkersFor({ marker_ids: [ordered.id] }).map(observationOf);
    return { code: t.code, name: t.name, status, observations, ...(status === 'X' ? { specimenRejectReason: { code: 'RB', text: 'Broken container' } } : {}) };
  });
}

async function sendResults(fake: FakeLab, placer: string, status: FakeResultTest['status']) {
  const order = fake.orders().get(placer);
  if (!order) throw Object.assign(new Error(`The fake lab holds no order ${placer} (GET /orders lists what it holds).`), { status: 404 });
  const answer = await fake.sendResults(
    { host: '127.0.0.1', port: Number(env('LAB_MLLP_PORT')) },
    { placerNumber: placer, tests: resultTests(order.tests, status) },
  );
  console.log(`sent ORU^R01 ${answer.controlId} (OBR-25 ${status}) for ${placer} to our listener: ACK ${answer.code}`);
  return answer;
}

function control(fake: FakeLab) {
  return async (req: IncomingMessage, res: ServerResponse) => {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(`${JSON.stringify(body, null, 2)}\n`);
    };
    try {
      const url = new URL(req.url ?? '/', 'http://fake-lab');
      if (req.method === 'GET' && url.pathname === '/orders') {
        return reply(
          200,
          [...fake.orders()].map(([placer, o]) => ({
            placer_number: placer,
            type: o.type,
            control_ids: o.controlIds,
            sends: o.sends,
            cancelled: o.cancelled,
            patient: o.patient,
            tests: o.tests,
            message: o.text.split('\r'),
          })),
        );
      }
      const results = /^\/orders\/([^/]+)\/(results|specimen-received|specimen-problem)$/.exec(url.pathname);
      if (req.method === 'POST' && results) {
        const status =
          results[2] === 'specimen-received'
            ? 'I'
            : results[2] === 'specimen-problem'
              ? 'X'
              : ((url.searchParams.get('status') ?? 'F').toUpperCase() as FakeResultTest['status']);
        if (!['P', 'F', 'C', 'X', 'I'].includes(status)) return reply(422, { detail: 'status must be P, F, C or X' });
        const answer = await sendResults(fake, decodeURIComponent(results[1]), status);
        return reply(200, { sent: answer.controlId, ack: answer.code });
      }
      return reply(404, { detail: 'GET /orders, POST /orders/{placer}/results?status=P|F|C|X, POST /orders/{placer}/specimen-received|specimen-problem' });
    } catch (err) {
      reply((err as { status?: number }).status ?? 502, { detail: (err as Error).message });
    }
  };
}

async function main(): Promise<void> {
  const fake = await startFakeLab();
  const { accountId, labTestId, userId } = await ensureAccountAndTest(fake.port);
  const server = createServer((req, res) => void control(fake)(req, res));
  await new Promise<void>((resolve) => server.listen(Number(env('DEV_FAKE_LAB_CONTROL_PORT', '9480')), '127.0.0.1', resolve));
  // 0 asks for any free port (the banner says which): a port chosen beforehand may be taken by the time the fake starts.
  const controlPort = (server.address() as AddressInfo).port;
  const resultsSeconds = Number(env('DEV_FAKE_LAB_RESULTS_SECONDS', '60'));
  process.stdout.write(
    `${JSON.stringify({ port: fake.port, control_url: `http://127.0.0.1:${controlPort}`, lab_account_id: accountId, lab_test_id: labTestId, user_id: userId, results_seconds: resultsSeconds })}\n`,
  );

  // What arrives, as it arrives; and final results `resultsSeconds` after each new order (specimen received halfway).
  let seen = 0;
  const scheduled = new Set<string>();
  const watch = setInterval(() => {
    for (const message of fake.received.slice(seen)) {
      console.log(`received ${message.type} ${message.controlId}:\n  ${message.text.split('\r').filter(Boolean).join('\n  ')}`);
    }
    seen = fake.received.length;
    if (resultsSeconds <= 0) return;
    for (const [placer, order] of fake.orders()) {
      if (scheduled.has(placer) || order.cancelled) continue;
      scheduled.add(placer);
      const later = (ms: number, status: FakeResultTest['status']) =>
        setTimeout(() => {
          if (!fake.orders().get(placer)?.cancelled)
            sendResults(fake, placer, status).catch((err) => console.error(`results for ${placer}: ${(err as Error).message}`));
        }, ms).unref();
      later((resultsSeconds * 1000) / 2, 'I');
      later(resultsSeconds * 1000, 'F');
    }
  }, 500);
  const stop = async () => {
    clearInterval(watch);
    server.close();
    await fake.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
}

main().catch((err) => {
  console.error(`fake lab failed: ${(err as Error).message}`);
  process.exit(1);
});
