// Runs scripts/supervise.mjs the way scripts/dev.mjs does, on a small real child process instead of the api
// (test/dev-supervisor.test.ts): the child logs pino-style JSON lines, a plain line and an error, then idles.
import { spawn } from 'node:child_process';
import { clock, forwardOutput, supervise } from '../../scripts/supervise.mjs';

const child = `
const line = (o) => process.stdout.write(JSON.stringify({ pid: process.pid, hostname: 'h', service: 'demo', time: Date.now(), ...o }) + '\\n');
line({ level: 30, msg: 'demo running', child_pid: process.pid, port: 1234 });
process.stdout.write('a plain line\\n');
const err = new Error('boom');
line({ level: 50, msg: 'demo failed once', err: { type: 'Error', message: err.message, stack: err.stack } });
line({ level: 40, msg: 'a long line', ids: 'x'.repeat(70000) });
process.stdout.write('\\u001b[33mWARN\\u001b[0m a coloured plain line\\n');
setInterval(() => {}, 1000);
`;
const log = (msg) => console.log(`dev: ${clock()} ${msg}`);
const supervised = supervise({
  name: 'demo',
  start: () => {
    const c = spawn(process.execPath, ['-e', child], { stdio: ['ignore', 'pipe', 'pipe'] });
    forwardOutput(c, 'demo');
    return c;
  },
  log,
  initialDelayMs: Number(process.env.DRIVER_INITIAL_DELAY_MS || 200),
});
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, async () => {
    await supervised.stop();
    log('stopped');
    process.exit(0);
  });
}
