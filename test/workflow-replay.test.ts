import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import * as workflows from '../workflows';

/**
 * Recorded histories of every workflow type (test/histories/, written by test/workflow-histories.recorder.ts from
 * real runs on the test stack) replayed against the current workflow code: a change that would make a workflow
 * in flight take a different path than its history fails here, before it reaches a worker with running
 * workflows. The versioning policy that keeps this green is in the README ("Changing a workflow").
 */
const dir = path.join(__dirname, 'histories');
const recorded = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .map((file) => {
    const json = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as { workflowType: string; workflowId: string; history: unknown };
    return { file, ...json };
  });

test('a recorded history exists for every workflow type', () => {
  const exported = Object.entries(workflows)
    .filter(([name, fn]) => typeof fn === 'function' && name.endsWith('Workflow'))
    .map(([name]) => name)
    .sort();
  expect([...new Set(recorded.map((r) => r.workflowType))].sort()).toEqual(exported);
});

test('every recorded history replays against the current workflow code', async () => {
  const results = Worker.runReplayHistories(
    { workflowsPath: require.resolve('../workflows'), replayName: 'healthbridge-replay' },
    recorded.map((r) => ({ workflowId: r.workflowId, history: temporal.api.history.v1.History.fromObject(r.history as object) })),
  );
  const failures: string[] = [];
  let replayed = 0;
  for await (const result of results) {
    replayed++;
    if (result.error) failures.push(`${result.workflowId}: ${result.error.message.split('\n')[0]}`);
  }
  expect(failures).toEqual([]);
  expect(replayed).toBe(recorded.length);
}, 120_000);
