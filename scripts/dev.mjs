// `npm run dev`: install, build, start the embedded stack, worker and API; seed; stay in the foreground.
// Ctrl-C / SIGTERM stops everything it started, in reverse order.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { build, ensureDependencies, repoRoot, run, startNode, stopChild, waitForHttp } from './setup.mjs';
import { ensureBinaries, startStack, stopStack } from './stack.mjs';

const stateDir = path.join(repoRoot, '.devstack');
const credentialsFile = path.join(stateDir, 'credentials.json');
const log = (msg) => console.log(`dev: ${msg}`);

const children = [];
let stopping = false;

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  log('stopping api, worker and servers...');
  for (const child of [...children].reverse()) await stopChild(child);
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
  const stack = await startStack({
    stateDir,
    ports: {
      mongo: Number(process.env.DEV_MONGO_PORT || 27017),
      temporal: Number(process.env.DEV_TEMPORAL_PORT || 7233),
      temporalUi: Number(process.env.DEV_TEMPORAL_UI_PORT || 8233),
    },
    log: (m) => console.log(m),
  });
  const env = {
    MONGO_URL: stack.mongoUrl,
    TEMPORAL_ADDRESS: stack.temporalAddress,
    ...(stack.temporalUiUrl ? { TEMPORAL_UI_URL: stack.temporalUiUrl } : {}),
    API_PORT: process.env.API_PORT || '8080',
  };
  Object.assign(process.env, env);

  run(process.execPath, [path.join(repoRoot, 'dist', 'scripts', 'seed-dev.js'), credentialsFile], { env: process.env });
  for (const [entry, name] of [
    ['worker/main.js', 'worker'],
    ['api/main.js', 'api'],
  ]) {
    const child = startNode(entry, env, name);
    child.once('exit', (code, signal) => {
      if (!stopping) {
        log(`${name} exited unexpectedly (${code ?? signal}); stopping everything.`);
        void shutdown(1);
      }
    });
    children.push(child);
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
