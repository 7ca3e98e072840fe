import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import type { TestApp } from './harness';

/** Writes a workflow's history to test/histories/<name>.json, where test/workflow-replay.test.ts replays it. */
export async function saveHistory(app: TestApp, name: string, workflowType: string, workflowId: string): Promise<void> {
  const history = await app.deps.temporal.client.workflow.getHandle(workflowId).fetchHistory();
  // protobufjs's own JSON form (enum names, base64 bytes, int64 as strings), read back with History.fromObject by
  // the replay test (the SDK's historyToJSON/historyFromJSON trip over the two copies of protobufjs it installs).
  const json = { workflowType, workflowId, recordedAt: new Date().toISOString(), history: JSON.parse(JSON.stringify(history)) };
  expect(temporal.api.history.v1.History.fromObject(json.history).events).toHaveLength(history.events?.length ?? -1);
  writeFileSync(path.join(__dirname, '..', 'histories', `${name}.json`), `${JSON.stringify(json, null, 1)}\n`);
}
