// Starts a stack of its own, supervised as `npm run dev` supervises its servers, for tests that kill servers:
// PostgreSQL + DocumentDB and FerretDB in STACK_STATE_DIR, and Temporal too unless TEMPORAL_ADDRESS names one
// (test/database-crash.test.ts uses the suite's; test/recovery.scenario.ts its own, kept on disk with
// STACK_PERSIST=1 so a restarted server has its workflows). Prints `ready <stack.json>` once the servers answer,
// then every stack log line; SIGTERM stops the stack and exits.
import { startStack, stopStack } from '../../scripts/stack.mjs';

const stateDir = process.env.STACK_STATE_DIR;
const log = (line) => console.log(line);
const info = await startStack({
  stateDir,
  ui: false,
  persist: process.env.STACK_PERSIST === '1',
  supervise: { initialDelayMs: Number(process.env.STACK_RESTART_DELAY_MS || 500) },
  log,
});
console.log(`ready ${JSON.stringify(info)}`);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, async () => {
    await stopStack({ stateDir, log });
    console.log('stopped');
    process.exit(0);
  });
}
