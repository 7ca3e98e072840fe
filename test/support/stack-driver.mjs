// Starts a database stack of its own, supervised as `npm run dev` supervises the suite's servers, for
// test/database-crash.test.ts: PostgreSQL + DocumentDB and FerretDB in STACK_STATE_DIR (Temporal is the suite's,
// through TEMPORAL_ADDRESS). Prints `ready <stack.json>` once the database answers, then every stack log line;
// SIGTERM stops the stack and exits.
import { startStack, stopStack } from '../../scripts/stack.mjs';

const stateDir = process.env.STACK_STATE_DIR;
const log = (line) => console.log(line);
const info = await startStack({
  stateDir,
  ui: false,
  persist: false,
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
