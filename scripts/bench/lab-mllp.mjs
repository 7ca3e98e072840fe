// `npm run bench` suite `lab-mllp` (BENCH_SUITES=lab-mllp): a real laboratory over HL7 v2 / MLLP, against the fake
// laboratory of the tests (test/support/fake-lab.ts, a real MLLP server on loopback, in this process), each figure
// against a baseline in the same run:
//  - orders out: closed-loop clients each POST /v3/order for a lab test through a lab account pointing at the fake and
//    wait until the fake has answered that order (its ACK written): orders a second the lab acknowledged, and p99 from
//    the POST to the lab's ACK. Baseline: a raw MLLP client (lib/labs/mllp/client.ts, the transport alone) sending the
//    same messages (the ones the fake received, each under a fresh MSH-10) one after another, waiting for each ACK, as
//    our one connection per account does. Target >= 0.5.
//  - results in: BENCH_LAB_MLLP_SENDERS connections each sending ORU^R01s (fake-lab results, one per order the lab
//    knows nothing about: they go to the review inbox) to the api's listener (LAB_MLLP_PORT) and waiting for each ACK
//    (stored, then acknowledged). Twice: with the worker applying them meanwhile on the same cores (info), and with
//    the worker paused (the intake's own work: target), after which the worker's rate applying the backlog is
//    measured. Baseline: the same messages parsed (@medplum/core) and inserted, as documents of the same fields, into
//    a scratch collection with the same indexes by the raw driver, as many at once, in turns with the paused-worker
//    intake (measureInRounds, BENCH_ROUNDS rounds; the ratio is the median of the rounds'). Target >= 0.5.
//
//   BENCH_LAB_MLLP_SECONDS=20   measurement window of each scenario (after BENCH_WARMUP_SECONDS)
//   BENCH_LAB_MLLP_CLIENTS=16   closed-loop order clients
//   BENCH_LAB_MLLP_SENDERS=4    result connections (and raw inserters)
//   BENCH_LAB_MLLP_ACK_MS=50    the paced lab's time to take each message before it answers
import { createHash, randomUUID } from 'node:crypto';
import { createTenant, distModule } from './environment.mjs';
import { benchDefaults, httpClient, measure, measureInRounds, numberEnv } from './load.mjs';
import pino from 'pino';
import { freePort } from '../stack.mjs';

const SCRATCH_COLLECTION = 'bench_raw_lab_results';
const round = (x, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

const settings = () => ({
  seconds: numberEnv('BENCH_LAB_MLLP_SECONDS', 20, { min: 1 }),
  clients: numberEnv('BENCH_LAB_MLLP_CLIENTS', 16, { integer: true, min: 1 }),
  senders: numberEnv('BENCH_LAB_MLLP_SENDERS', 4, { integer: true, min: 1 }),
  pacedAckMs: numberEnv('BENCH_LAB_MLLP_ACK_MS', 50, { min: 1 }),
});
export const labMllpSettings = () => void settings();

/** The api's MLLP listener, on a port of its own. */
let listenerPort = null;
export async function labMllpEnvironment() {
  listenerPort = await freePort();
  return { LAB_MLLP_PORT: String(listenerPort) };
}
const quiet = pino({ level: 'silent' });

export async function labMllpSuite(env, { log = console.log } = {}) {
  const s = settings();
  const { warmupSeconds } = benchDefaults();
  const [
    { startFakeLab, buildResultMessage },
    { MllpClient },
    { Hl7Message },
    { placerNumberOf },
    { loadLabCatalogue },
    { LAB_INBOUND_INDEXES },
    { createIndexes },
  ] = await Promise.all([
    distModule('test/support/fake-lab.js'),
    distModule('lib/labs/mllp/client.js'),
    import('@medplum/core'),
    distModule('lib/labs/placer-number.js'),
    distModule('lib/labs/catalogue.js'),
    distModule('lib/labs/lab-inbound-store.js'),
    distModule('lib/platform/database/indexes.js'),
  ]);
  const catalogue = loadLabCatalogue();
  const lab = catalogue.labBySlug('labcorp');
  const panel = catalogue.markers.find((m) => m.type === 'panel' && m.slug === 'thyroid_panel' && m.lab_id === lab.id);
  // An organisation of its own: every result no order claims is a review announced to each team of the lab account's
  // organisation, and the bench's has a team (and webhook endpoints, pipelines) per suite that ran before.
  const tenant = await createTenant(env.repos, `Bench lab-mllp ${env.runId}`);
  const api = httpClient(env.apiUrl, { headers: { 'x-service-api-key': tenant.teamKey } });
  /** A lab account of the bench org at a fake lab's port (its own MSH-6, so results name it), and a test through it. */
  const accountAt = async (port, tag) => {
    const now = new Date();
    const accountId = randomUUID();
    await env.repos.labAccounts.create({
      _id: accountId,
      org_id: tenant.orgId,
      environment: 'sandbox',
      region: 'us',
      lab_slug: lab.slug,
      lab_id: lab.id,
      name: `Bench fake lab ${tag} ${env.runId}`,
      account_number: '70012345',
      mllp: { host: '127.0.0.1', port, tls: null },
      msh: { sending_application: 'HEALTHBRIDGE', sending_facility: 'HB-BENCH', receiving_application: 'LAB', receiving_facility: `FAKE-LAB-${tag}` },
      profile: 'LOI_2.5.1',
      ack_mode: 'original',
      charset: 'UNICODE UTF-8',
      results_from: ['127.0.0.1'],
      order_codes: { [String(panel.id)]: { code: '001453', loinc: '24348-5' } },
      bill_types: ['client_bill'],
      labels: 'in_requisition',
      ack_timeout_ms: 30_000,
      created_at: now,
      updated_at: now,
    });
    const test = await api.expect(200, 'POST', '/v3/lab_tests', {
      body: { name: `Thyroid via the bench lab ${tag}`, method: 'walk_in_test', description: 'bench', marker_ids: [panel.id], lab_account_id: accountId },
      json: true,
    });
    return { accountId, labTestId: test.json.id, facility: `FAKE-LAB-${tag}` };
  };
  const users = [];
  for (let i = 0; i < s.clients; i++) {
    users.push((await api.expect(200, 'POST', '/v2/user', { body: { client_user_id: `bench-lab-mllp-${env.runId}-${i}` }, json: true })).json.user_id);
  }

  const orderBody = (userId, labTestId) => ({
    user_id: userId,
    order_set: { lab_test_ids: [labTestId] },
    patient_details: {
      first_name: 'Bench',
      last_name: 'Patient',
      dob: '1985-06-01',
      gender: 'female',
      phone_number: '+14155550100',
      email: 'bench@example.com',
    },
    patient_address: { first_line: '1 Bench St', city: 'San Francisco', state: 'CA', zip: '94105', country: 'US' },
    physician: { first_name: 'Ada', last_name: 'Lovelace', npi: '1234567893' },
    consents: [{ consentType: 'terms-of-use' }],
  });
  // Orders to the lab at each pace: the lab answering at once, and the lab taking `pacedAckMs` to store each message
  // before it answers (as an interface engine committing it does). Each pace has its own fake lab and account.
  const orderRuns = [];
  for (const answerDelayMs of [0, s.pacedAckMs]) {
    const waiting = new Map();
    const done = new Set();
    const fake = await startFakeLab({
      answerDelayMs,
      onAnswered: (controlId) => {
        done.add(controlId);
        waiting.get(controlId)?.();
        waiting.delete(controlId);
      },
    });
    const { labTestId } = await accountAt(fake.port, answerDelayMs);
    const answered = (controlId) => (done.has(controlId) ? Promise.resolve() : new Promise((resolve) => waiting.set(controlId, resolve)));
    const pace = answerDelayMs ? `lab answers in ${answerDelayMs} ms` : 'lab answers at once';
    const ours = await measure({
      name: `lab orders: POST /v3/order to the lab's ACK (${pace})`,
      concurrency: s.clients,
      seconds: s.seconds,
      warmupSeconds: Math.max(warmupSeconds, 3),
      log,
      fn: async ({ worker }) => {
        const created = (await api.expect(200, 'POST', '/v3/order', { body: orderBody(users[worker], labTestId), json: true })).json;
        await answered(`${placerNumberOf(created.order.id)}O`);
      },
    });
    // The same messages, each under a fresh control id, one at a time over one connection.
    const messages = fake.received.filter((m) => m.type.startsWith('OML')).map((m) => m.bytes);
    if (!messages.length) throw new Error('lab-mllp: the fake lab received no order message to replay');
    const raw = new MllpClient({ host: '127.0.0.1', port: fake.port, tls: null }, { log: quiet });
    let n = 0;
    const rawOrders = await measure({
      name: `lab orders: raw MLLP client, same messages, each ACK awaited (${pace})`,
      concurrency: 1,
      seconds: s.seconds,
      warmupSeconds,
      log,
      fn: async () => {
        const controlId = `RAW${(n++).toString(36).toUpperCase().padStart(8, '0')}`;
        const text = messages[n % messages.length].toString('utf8');
        const fields = text.split('\r')[0].split('|');
        fields[9] = controlId;
        const bytes = Buffer.from([fields.join('|'), ...text.split('\r').slice(1)].join('\r'), 'utf8');
        await raw.send(controlId, bytes, { timeoutMs: 30_000, enhanced: false });
      },
    });
    await raw.close();
    await fake.close();
    orderRuns.push({ answerDelayMs, pace, ours, rawOrders });
  }

  // Results in: unsolicited ORUs (no order of ours: they go to the review inbox) to the listener, as the lab of an
  // account of their own (its MSH-5/6 name it), and the raw parse + insert of the same.
  const { accountId, facility } = await accountAt(1, 'results');
  const listener = { host: '127.0.0.1', port: listenerPort, tls: null };
  const oru = (i) =>
    buildResultMessage(
      {
        placerNumber: `BENCH${i}`,
        patient: { family: 'Patient', given: 'Bench', birthDate: '1985-06-01', sex: 'F' },
        tests: [
          {
            code: '001453',
            name: 'Thyroid panel',
            status: 'F',
            observations: [{ loinc: '3016-3', code: '004259', name: 'TSH', value: '2.1', units: 'uIU/mL', range: '0.45-4.5', flags: 'N' }],
          },
        ],
        sender: { application: 'LAB', facility },
        receiver: { application: 'HEALTHBRIDGE', facility: 'HB-BENCH' },
      },
      { controlId: `BR${env.runId}${i}`.replace(/[^A-Za-z0-9]/g, '').slice(-20), fillerNumber: `FL${i}` },
    );
  // The same database work as the intake's: a document of the same fields into a collection with
  // lab_inbound_messages' indexes, after the raw parse.
  log('bench: lab-mllp: 5 s for the orders to settle before the results');
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const scratch = env.db.collection(SCRATCH_COLLECTION);
  await createIndexes(scratch, LAB_INBOUND_INDEXES.lab_inbound_messages);
  let inserted = 0;
  const rawIntakeScenario = {
    name: 'lab results: raw parse (@medplum/core) + insertOne of the same messages',
    fn: async ({ worker }) => {
      const message = oru(`raw${worker}x${inserted++}`);
      const text = message.bytes.toString('utf8');
      const parsed = Hl7Message.parse(text);
      const controlId = parsed.getSegment('MSH').getField(10).toString();
      const hash = createHash('sha256').update(text).digest('hex');
      await scratch.insertOne({
        _id: randomUUID(),
        account_id: accountId,
        control_id: controlId,
        content_sha256: hash,
        control_key: `${accountId}\u0000${controlId}`,
        content_key: `${accountId}\u0000${hash}`,
        raw: message.bytes.toString('base64'),
        text,
        state: 'received',
        applied_to: [],
        received_at: new Date(),
        settled_at: null,
      });
    },
  };
  const senders = Array.from({ length: s.senders }, () => new MllpClient(listener, { log: quiet }));
  let sent = 0;
  const sendScenario = (name) => ({
    name,
    fn: async ({ worker }) => {
      const message = oru(`${worker}x${sent++}`);
      const { reply } = await senders[worker].send(message.controlId, message.bytes, { timeoutMs: 30_000, enhanced: false });
      if (!reply.toString('latin1').includes('MSA|AA')) throw new Error(`not accepted: ${reply.toString('latin1').replace(/\r/g, ' | ')}`);
    },
  });
  const senderLoops = { concurrency: s.senders, seconds: s.seconds, warmupSeconds, log };
  const messages = env.db.collection('lab_inbound_messages');
  const waiting = () => messages.countDocuments({ account_id: accountId, state: 'received' });
  /** Until the worker has applied every message of the account: the messages it applied a second meanwhile. */
  const drain = async (what) => {
    const backlog = await waiting();
    const started = performance.now();
    let last = 0;
    for (let left = backlog; left > 0; left = await waiting()) {
      if (performance.now() - started > 300_000) throw new Error(`lab-mllp: ${left} of ${backlog} messages still unapplied after 5 min (${what})`);
      if (performance.now() - last > 5_000) {
        log(`bench: lab-mllp: ${left} of ${backlog} messages still to apply (${what})`);
        last = performance.now();
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const seconds = (performance.now() - started) / 1000;
    return { backlog, seconds: round(seconds, 1), rate: backlog ? Math.round(backlog / seconds) : null };
  };
  // 1. With the worker applying them as they come, on the same two cores: the intake and the applier share the CPU
  //    and the database (each unsolicited message is also a review filed, an event stored and a settle).
  const intakeApplying = await measure({
    ...sendScenario('lab results: ORU^R01 to the MLLP listener, stored then ACKed, the worker applying them meanwhile'),
    ...senderLoops,
  });
  const drainAfterApplying = await drain('after the intake with the worker applying');
  // 2. The intake's own work, the baseline's counterpart (parse, store, acknowledge): the worker paused (SIGSTOP, as
  //    when the worker fleet runs on other machines and is busy), its signals waiting in Temporal. Then it resumes
  //    and applies the backlog: the applier's own rate, which must exceed the intake's for it to keep up. The raw
  //    parse + insert in turns with it (measureInRounds), the worker paused for both: the ratio is the median of the
  //    rounds' (one run of each, the baseline first, moved the ratio by 10 % between full runs).
  env.children.worker.kill('SIGSTOP');
  let intake;
  let rawIntake;
  let intakeRatio;
  try {
    const inTurns = await measureInRounds({
      scenarios: [sendScenario('lab results: ORU^R01 to the MLLP listener, stored then ACKed (the worker paused)'), rawIntakeScenario],
      ...senderLoops,
    });
    [intake, rawIntake] = inTurns.results;
    intakeRatio = inTurns.ratio(0, 1);
  } finally {
    env.children.worker.kill('SIGCONT');
  }
  await scratch.drop().catch(() => undefined);
  const drained = await drain('the backlog of the intake alone');
  log(
    `bench: lab-mllp: the worker applied ${drained.backlog} waiting messages in ${drained.seconds} s (${drained.rate}/s); ` +
      `after the run with it applying, ${drainAfterApplying.backlog} were left (${drainAfterApplying.seconds} s)`,
  );
  await Promise.all(senders.map((c) => c.close()));
  api.close();

  const ratios = [
    ...orderRuns.map(({ answerDelayMs, pace, ours, rawOrders }) => ({
      name: `lab orders to the lab's ACK / raw MLLP client, ${pace} (orders a second)`,
      value: round(ours.rps / rawOrders.rps),
      // At once, the raw client is bound by loopback alone (thousands a second); the target is the paced lab.
      target: answerDelayMs ? 0.5 : null,
      note: `${ours.rps}/s vs ${rawOrders.rps}/s; p99 POST to ACK ${ours.p99Ms} ms`,
    })),
    {
      name: 'lab results intake via MLLP / raw parse + insert (ORUs a second)',
      value: intakeRatio,
      target: 0.5,
      kind: 'target',
      note: `${intake.rps}/s vs ${rawIntake.rps}/s over ${s.senders} connections; then applied at ${drained.rate}/s`,
    },
    {
      name: 'lab results intake via MLLP, the worker applying on the same cores / raw parse + insert',
      value: round(intakeApplying.rps / rawIntake.rps),
      target: null,
      note: `${intakeApplying.rps}/s vs ${rawIntake.rps}/s; ${drainAfterApplying.backlog} left to apply at the end`,
    },
  ];
  return {
    results: [...orderRuns.flatMap((r) => [r.ours, r.rawOrders]), intakeApplying, intake, rawIntake],
    ratios,
    notes: ['lab-mllp: see the header of scripts/bench/lab-mllp.mjs (the fake lab runs in the bench process)'],
  };
}
