// `npm run dev`: install, build, start the embedded stack, worker and API; seed; stay in the foreground.
// A worker or api that dies is restarted (with backoff, logged); the servers keep running.
// Ctrl-C / SIGTERM stops everything it started, in reverse order.
// Logs are shown readable (`HH:MM:SS LEVEL [process] msg key=value`); DEV_LOG_FORMAT=json shows pino's JSON lines.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { build, devDataKeys, ensureDependencies, repoRoot, run, startNode, waitForHttp } from './setup.mjs';
import { devPorts, ensureBinaries, startStack, stopStack } from './stack.mjs';
import { clock, forwardOutput, supervise } from './supervise.mjs';

const stateDir = path.join(repoRoot, '.devstack');
const credentialsFile = path.join(stateDir, 'credentials.json');
// The dev deployment's data encryption key, generated on first start (delete .devstack/ and it goes too).
const dataKeysFile = path.join(stateDir, 'data-encryption-keys');
const log = (msg) => console.log(`dev: ${msg}`);
const rawLogs = process.env.DEV_LOG_FORMAT === 'json';

const children = [];
let stopping = false;

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  log('stopping api, worker and servers...');
  for (const child of [...children].reverse()) await child.stop();
  // Idempotent: also stops servers of a start that was interrupted before it returned.
  await stopStack({ stateDir, log: (m) => console.log(m) }).catch((err) => console.error(`dev: ${err.message}`));
  log('stopped.');
  process.exit(code);
}
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

async function main() {
  ensureDependencies(log);
  build(log);
  await ensureBinaries({ log: (m) => console.log(m) });
  // Supervised: a database or Temporal server that dies is restarted on its port and data, as the api and worker are.
  const stack = await startStack({ stateDir, ports: devPorts(), supervise: true, log: (m) => log(`${clock()} ${m}`) });
  const env = {
    MONGO_URL: stack.mongoUrl,
    TEMPORAL_ADDRESS: stack.temporalAddress,
    ...(stack.temporalUiUrl ? { TEMPORAL_UI_URL: stack.temporalUiUrl } : {}),
    API_PORT: process.env.API_PORT || '8080',
    DATA_ENCRYPTION_KEYS: devDataKeys(dataKeysFile),
  };
  Object.assign(process.env, env);

  run(process.execPath, [path.join(repoRoot, 'dist', 'scripts', 'seed-dev.js'), credentialsFile], { env: process.env });
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
  console.log(
    [
      '',
      '  Healthbridge is running.',
      `  API:          ${creds.base_url}   (docs: ${creds.base_url}/docs)`,
      `  Temporal UI:  ${creds.temporal_ui_url ?? 'n/a'}`,
      `  Database:     ${stack.mongoUrl}   (${stack.versions.database ?? 'external, MONGO_URL'})`,
      `  Credentials:  ${path.relative(repoRoot, credentialsFile)}`,
      `    org_id          ${creds.org_id}`,
      `    team_id         ${creds.team_id}`,
      `    team_api_key    ${creds.team_api_key}   (header x-service-api-key)`,
      `    management_key  ${creds.management_key}   (header X-Management-Key)`,
      '',
      `  Try: curl -H "x-service-api-key: ${creds.team_api_key}" ${creds.base_url}/v2/providers/`,
      '  Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );
}

main().catch(async (err) => {
  console.error(`dev: ${err.message}`);
  await shutdown(1);
});
