// `npm run dev`: install, build, start the embedded stack, worker and API; seed; stay in the foreground.
// A worker or api that dies is restarted (with backoff, logged); the servers keep running.
// Ctrl-C / SIGTERM stops everything it started, in reverse order.
// Logs are shown readable (`HH:MM:SS LEVEL [process] msg key=value`); DEV_LOG_FORMAT=json shows pino's JSON lines.
// DEV_BROKERS=rabbitmq,kafka also starts those brokers (for pipelines) and prints how to send events to them and read them.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { devDataKeys, prepare, repoRoot, run, runOnNode24, startNode, stopChild, waitForHttp } from './setup.mjs';
import { devPorts, ensureBinaries, startStack, stopStack } from './stack.mjs';
import { startKafka } from './stack/kafka.mjs';
import { startRabbitmq } from './stack/rabbitmq.mjs';
import { clock, forwardOutput, supervise } from './supervise.mjs';

// Node 24, fetched when the machine's node is older: the rest of this file runs there.
await runOnNode24();

const stateDir = path.join(repoRoot, '.devstack');
const credentialsFile = path.join(stateDir, 'credentials.json');
// The dev deployment's data encryption key, generated on first start (delete .devstack/ and it goes too).
const dataKeysFile = path.join(stateDir, 'data-encryption-keys');
const log = (msg) => console.log(`dev: ${msg}`);
const rawLogs = process.env.DEV_LOG_FORMAT === 'json';

const children = [];
/** Brokers started for DEV_BROKERS, stopped on the way out. */
const brokers = [];
let stopping = false;

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  log('stopping api, worker and servers...');
  for (const child of [...children].reverse()) await child.stop();
  await Promise.allSettled(brokers.map((b) => b.stop()));
  // Idempotent: also stops servers of a start that was interrupted before it returned.
  await stopStack({ stateDir, log: (m) => console.log(m) }).catch((err) => console.error(`dev: ${err.message}`));
  log('stopped.');
  process.exit(code);
}
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

async function main() {
  await prepare(log, () => ensureBinaries({ log: (m) => console.log(m) }));
  // Supervised: a database or Temporal server that dies is restarted on its port and data, as the api and worker are.
  const stack = await startStack({ stateDir, ports: devPorts(), supervise: true, log: (m) => log(`${clock()} ${m}`) });
  const env = {
    MONGO_URL: stack.mongoUrl,
    TEMPORAL_ADDRESS: stack.temporalAddress,
    ...(stack.temporalUiUrl ? { TEMPORAL_UI_URL: stack.temporalUiUrl } : {}),
    API_PORT: process.env.API_PORT || '8080',
    // Labs send results here (MLLP; 2575 is HL7's registered port): only peers a lab account's results_from allows.
    LAB_MLLP_PORT: process.env.LAB_MLLP_PORT || '2575',
    DATA_ENCRYPTION_KEYS: devDataKeys(dataKeysFile),
    // Webhook receivers you try the service with run on this machine (README "Configuration").
    WEBHOOK_ALLOW_LOOPBACK: process.env.WEBHOOK_ALLOW_LOOPBACK || 'true',
  };
  const fakeProviders = await startFakeProviders();
  Object.assign(env, fakeProviders.env);
  Object.assign(process.env, env);

  const brokerLines = await startDevBrokers();
  await run(process.execPath, [path.join(repoRoot, 'dist', 'scripts', 'seed-dev.js'), credentialsFile], { env: process.env });
  for (const [entry, name] of [
    ['worker/main.js', 'worker'],
    ['api/main.js', 'api'],
  ]) {
    const start = () => {
      const child = startNode(entry, env, name, { pipe: true });
      forwardOutput(child, name, { raw: rawLogs });
      return child;
    };
    children.push(supervise({ name, start, log: (msg) => log(`${clock()} ${msg}`) }));
  }

  const creds = JSON.parse(readFileSync(credentialsFile, 'utf8'));
  log('waiting for /ready (api, worker, MongoDB, Temporal)...');
  await waitForHttp(`${creds.base_url}/ready`);
  const fakeLabLines = await startDevFakeLab(creds, env);
  console.log(
    [
      '',
      '  Healthbridge is running.',
      `  API:          ${creds.base_url}   (docs: ${creds.base_url}/docs)`,
      `  Temporal UI:  ${creds.temporal_ui_url ?? 'n/a'}`,
      `  Database:     ${stack.mongoUrl}   (${stack.versions.database ?? 'external, MONGO_URL'})`,
      `  Lab results:  mllp://127.0.0.1:${env.LAB_MLLP_PORT}   (MLLP listener, LAB_MLLP_PORT; labs in results_from only)`,
      `  Credentials:  ${path.relative(repoRoot, credentialsFile)}`,
      `    org_id          ${creds.org_id}`,
      `    team_id         ${creds.team_id}`,
      `    team_api_key    ${creds.team_api_key}   (header x-service-api-key)`,
      `    management_key  ${creds.management_key}   (header X-Management-Key)`,
      '',
      `  Try: curl -H "x-service-api-key: ${creds.team_api_key}" ${creds.base_url}/v2/providers/`,
      ...brokerLines(creds),
      ...fakeProviders.lines,
      ...fakeLabLines,
      '  Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );
}

/**
 * DEV_FAKE_PROVIDERS=1: the six provider fakes (scripts/fake-providers.ts), and every real provider pointed at them
 * (PROVIDER_<SLUG>_BASE_URL and the fakes' client ids), so the link page signs in through a real OAuth flow locally.
 */
async function startFakeProviders() {
  if (!['1', 'true'].includes(process.env.DEV_FAKE_PROVIDERS ?? '')) return { env: {}, lines: [] };
  log('starting the provider fakes (DEV_FAKE_PROVIDERS=1)...');
  const child = startNode('scripts/fake-providers.js', {}, 'fake-providers', { pipe: true });
  children.push({ stop: () => stopChild(child) });
  child.stderr.on('data', (d) => process.stderr.write(`fake-providers: ${d}`));
  const firstLine = await new Promise((resolve, reject) => {
    let buffered = '';
    child.stdout.on('data', (d) => {
      buffered += d;
      const nl = buffered.indexOf('\n');
      if (nl >= 0) resolve(buffered.slice(0, nl));
    });
    child.once('exit', (code) => reject(new Error(`the provider fakes exited (${code}) before starting`)));
  });
  const env = JSON.parse(firstLine);
  const urls = Object.entries(env).filter(([k]) => k.endsWith('_BASE_URL'));
  return {
    env,
    lines: [
      '  Provider fakes (DEV_FAKE_PROVIDERS=1): Oura, WHOOP, Polar, Strava, Dexcom and Withings sign in for real against local fakes:',
      ...urls.map(
        ([k, v]) =>
          `    ${k
            .replace(/^PROVIDER_|_BASE_URL$/g, '')
            .toLowerCase()
            .padEnd(10)} ${v}`,
      ),
      '    Connect one from the link page (POST /v2/link/token, open link_web_url); its consent page has Allow and Deny.',
    ],
  };
}

/**
 * DEV_FAKE_LAB=1: the fake laboratory (scripts/fake-lab.ts) once the api is up, with a lab account of the dev org
 * pointing at it and a lab test through that account. Its log lines (the HL7 it receives and sends) are shown with
 * the others. Returns the lines the banner prints about it.
 */
async function startDevFakeLab(creds, env) {
  if (!['1', 'true'].includes(process.env.DEV_FAKE_LAB ?? '')) {
    return ['  Laboratory:   DEV_FAKE_LAB=1 npm run dev also starts a fake laboratory (HL7 over MLLP) to order tests from.'];
  }
  log('starting the fake laboratory (DEV_FAKE_LAB=1)...');
  const listener = env.LAB_MLLP_PORT ?? process.env.LAB_MLLP_PORT;
  const child = startNode(
    'scripts/fake-lab.js',
    {
      DEV_BASE_URL: creds.base_url,
      DEV_ORG_ID: creds.org_id,
      DEV_MANAGEMENT_KEY: creds.management_key,
      DEV_TEAM_API_KEY: creds.team_api_key,
      LAB_MLLP_PORT: listener,
    },
    'fake-lab',
    { pipe: true },
  );
  children.push({ stop: () => stopChild(child) });
  const firstLine = await new Promise((resolve, reject) => {
    let buffered = '';
    const onData = (d) => {
      buffered += d;
      const nl = buffered.indexOf('\n');
      if (nl < 0) return;
      child.stdout.off('data', onData);
      const rest = buffered.slice(nl + 1);
      if (rest) process.stdout.write(rest.replace(/^/gm, 'fake-lab: '));
      child.stdout.on('data', (more) => process.stdout.write(String(more).replace(/^(?=.)/gm, 'fake-lab: ')));
      resolve(buffered.slice(0, nl));
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the fake laboratory exited (${code}) before starting`)));
  });
  child.stderr.on('data', (d) => process.stderr.write(`fake-lab: ${d}`));
  const lab = JSON.parse(firstLine);
  const order = JSON.stringify({
    user_id: lab.user_id,
    lab_test_id: lab.lab_test_id,
    collection_method: 'walk_in_test',
    patient_details: { first_name: 'Ana', last_name: 'Müller', dob: '1988-04-12', gender: 'female', phone_number: '+14155552671', email: 'ana@example.com' },
    patient_address: { first_line: '1 Main St', city: 'San Francisco', state: 'CA', zip: '94105', country: 'US' },
    physician: { first_name: 'Hans', last_name: 'Feller', npi: '1234567893' },
  });
  return [
    `  Fake laboratory (DEV_FAKE_LAB=1): mllp://127.0.0.1:${lab.port}, lab account ${lab.lab_account_id} (Quest's codes), lab test ${lab.lab_test_id}`,
    `    Order it:     curl -X POST -H "x-service-api-key: ${creds.team_api_key}" -H "content-type: application/json" ${creds.base_url}/v3/order -d '${order}'`,
    `    The lab holds: curl ${lab.control_url}/orders   (placer numbers and the OML^O21 it received, also shown here as "fake-lab: received ...")`,
    lab.results_seconds > 0
      ? `    Results:      specimen received after ${lab.results_seconds / 2} s and final results after ${lab.results_seconds} s (DEV_FAKE_LAB_RESULTS_SECONDS), or now:`
      : '    Results:      on command only (DEV_FAKE_LAB_RESULTS_SECONDS=0):',
    `                  curl -X POST "${lab.control_url}/orders/<placer_number>/results?status=F"   (P partial, F final, C corrected, X not done)`,
  ];
}

/**
 * The brokers DEV_BROKERS asks for (rabbitmq, kafka), on loopback with their data in .devstack/brokers/; their
 * addresses go to .devstack/brokers.json for scripts/consume.mjs. Returns the lines the banner prints about them.
 */
async function startDevBrokers() {
  const wanted = (process.env.DEV_BROKERS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = wanted.filter((b) => b !== 'rabbitmq' && b !== 'kafka');
  if (unknown.length) throw new Error(`DEV_BROKERS: unknown broker(s) ${unknown.join(', ')}; known: rabbitmq, kafka`);
  if (!wanted.length) return () => ['  Pipelines:    DEV_BROKERS=rabbitmq,kafka npm run dev also starts a RabbitMQ and a Kafka to send events to.'];
  const brokerLog = (m) => log(`${clock()} ${m}`);
  const dir = path.join(stateDir, 'brokers');
  const started = {};
  if (wanted.includes('rabbitmq')) {
    const r = await startRabbitmq({ stateDir: path.join(dir, 'rabbitmq'), port: Number(process.env.DEV_RABBITMQ_PORT || 5672), log: brokerLog });
    brokers.push(r);
    started.amqpUrl = r.url;
  }
  if (wanted.includes('kafka')) {
    const k = await startKafka({ stateDir: path.join(dir, 'kafka'), port: Number(process.env.DEV_KAFKA_PORT || 9092), autoCreateTopics: true, log: brokerLog });
    brokers.push(k);
    started.kafkaBootstrap = k.bootstrap;
  }
  writeFileSync(path.join(stateDir, 'brokers.json'), `${JSON.stringify(started, null, 2)}\n`);
  return (creds) => {
    const pipelines = `${creds.base_url}/v1/org/${creds.org_id}/team/${creds.team_id}/sandbox/pipeline`;
    const create = (destination, target) =>
      `curl -X POST -H "X-Management-Key: ${creds.management_key}" -H "content-type: application/json" ${pipelines} ` +
      `-d '${JSON.stringify({ destination, routes: [{ event_type_prefix: '', target }] })}'`;
    const lines = ['  Pipelines (DEV_BROKERS):'];
    if (started.amqpUrl) {
      lines.push(
        `    RabbitMQ   ${started.amqpUrl}`,
        `      send:    ${create({ type: 'rabbitmq', url: started.amqpUrl }, 'events')}`,
        '      read:    node scripts/consume.mjs rabbitmq',
      );
    }
    if (started.kafkaBootstrap) {
      lines.push(
        `    Kafka      ${started.kafkaBootstrap}`,
        `      send:    ${create({ type: 'kafka', bootstrap_servers: [started.kafkaBootstrap] }, 'healthbridge-events')}`,
        '      read:    node scripts/consume.mjs kafka healthbridge-events',
      );
    }
    return lines;
  };
}

main().catch(async (err) => {
  console.error(`dev: ${err.message}`);
  await shutdown(1);
});
