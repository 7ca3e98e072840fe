import { MongoBulkWriteError } from 'mongodb';
import { createLogger } from '../lib/platform/logger';
import { sdkLogBridge } from '../worker/worker';

/** Log lines stay one bounded line per event: errors cut to size, the Temporal SDK's messages tamed. */
function capture() {
  const lines: Record<string, any>[] = [];
  const logger = createLogger('debug', 'test', { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines };
}

describe('logged errors', () => {
  it('keep type, message, code and stack, and summarise what would make a line huge (a bulk write error lists every id)', () => {
    const { logger, lines } = capture();
    const insertedIds = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [i, `id-${i}-${'x'.repeat(8)}`]));
    const writeErrors = Array.from({ length: 50 }, (_, i) => ({ index: i, code: 11000, errmsg: `E11000 duplicate key ${i}` }));
    const err = new MongoBulkWriteError(
      { message: 'E11000 duplicate key error', code: 11000, writeErrors } as never,
      { insertedCount: 0, insertedIds } as never,
    );
    logger.error({ err }, 'bulk insert failed');
    const line = JSON.stringify(lines[0]);
    expect(line.length).toBeLessThan(10_000);
    expect(lines[0].err).toMatchObject({
      type: 'MongoBulkWriteError',
      message: expect.stringContaining('E11000'),
      code: 11000,
      stack: expect.stringContaining('at '),
    });
    expect(line).not.toContain('id-4999');
  });

  it('cut a very long message, and apply to `error` (the key the Temporal SDK logs failures under)', () => {
    const { logger, lines } = capture();
    logger.warn({ error: new Error('y'.repeat(5_000)) }, 'activity failed');
    expect(lines[0].error.message).toMatch(/^y{1000}…\(\+4000 chars\)$/);
  });
});

describe('the Temporal SDK log bridge', () => {
  it('logs a multi-line message (webpack) as its first line, strips colours, and holds back repeats within 30 s', () => {
    const { logger, lines } = capture();
    let now = 0;
    const bridge = sdkLogBridge(logger, () => now);
    bridge({ level: 'INFO', message: 'asset workflow-bundle.js 1.2 MiB [emitted]\norphan modules 900 KiB\nruntime modules 1 KiB', meta: {} });
    const info = lines.filter((l) => l.level === 30);
    expect(info).toEqual([expect.objectContaining({ msg: 'asset workflow-bundle.js 1.2 MiB [emitted]', more_lines: 2 })]);
    expect(lines.find((l) => l.level === 20)?.text).toContain('runtime modules'); // the whole report at debug

    for (let i = 0; i < 40; i++) {
      now += 1_000;
      bridge({ level: 'WARN', message: '\u001b[33mFailed to poll: transport error\u001b[0m', meta: { taskQueue: 'q' } });
    }
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings.map((w) => w.msg)).toEqual(['Failed to poll: transport error', 'Failed to poll: transport error']);
    expect(warnings[1]).toMatchObject({ repeated: 29, taskQueue: 'q' });
  });
});
