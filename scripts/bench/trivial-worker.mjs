// A worker process that runs the trivial workflow of the order-creation baseline on its own task queue
// (TEMPORAL_ADDRESS, TRIVIAL_TASK_QUEUE). Sends 'ready' over IPC once it polls; SIGTERM stops it.
import { createRequire } from 'node:module';
import { NativeConnection, Worker } from '@temporalio/worker';

const require = createRequire(import.meta.url);
const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
const worker = await Worker.create({
  connection,
  taskQueue: process.env.TRIVIAL_TASK_QUEUE,
  workflowsPath: require.resolve('./trivial-workflow.cjs'),
});
process.once('SIGTERM', () => worker.shutdown());
const running = worker.run();
process.send?.('ready');
await running;
await connection.close();
