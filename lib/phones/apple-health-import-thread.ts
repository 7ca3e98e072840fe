import path from 'node:path';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { EventPublisher } from '../events/publisher';
import { type Config, dataCipher } from '../platform/config';
import { connectMongo } from '../platform/database/mongo';
import { createRepositories } from '../repositories';
import { loadProviderCatalogue } from '../wearables/provider-catalogue';
import { importAppleHealthExport, type ImportedResource } from './apple-health-import';
import { ExportFileError } from './export-xml';
import type { ImportProgress } from './imports-store';

/**
 * The reading and storing of an Apple Health export, in a thread of the worker with a heap of its own, capped
 * (APPLE_HEALTH_IMPORT_HEAP_MB): a multi-gigabyte file's parse makes garbage faster than V8 collects it, and in the
 * worker's own heap (uncapped: it runs every other activity) that garbage grew the process by 600-800 MB. The thread's
 * live set is small (a batch, hourly sums, nights), so its cap bounds what an import adds to the worker, however long
 * the file. lib/phones/apple-health-import-run.ts starts it and does the rest (the histories, the events, the end).
 */

interface ThreadInput {
  config: Config;
  importId: string;
}
type ThreadMessage =
  | { type: 'progress'; progress: ImportProgress }
  | { type: 'done'; result: { progress: ImportProgress; resources: ImportedResource[] } }
  | { type: 'error'; error: { notAnExport: boolean; message: string; code?: string } };

/** The import never announces (its end does, in the worker): a publish from the thread would be a bug, said loudly. */
const noPublishing = {
  publish() {
    throw new Error('The Apple Health import thread publishes nothing: the import ends (and announces) in the worker.');
  },
} as unknown as EventPublisher;

/** Runs in the thread: reads the import's stored file and stores its data, posting progress and then the result. */
async function runInThread({ config, importId }: ThreadInput): Promise<void> {
  const port = parentPort!;
  // A few connections: the import has one batch in flight (each connection keeps buffers the size of its largest reply).
  const mongo = await connectMongo(config.MONGO_URL, config.MONGO_DB, { queryShapeLog: config.MONGO_QUERY_SHAPE_LOG, maxPoolSize: 8 });
  try {
    const repos = createRepositories(mongo.db, dataCipher(config));
    const imports = repos.appleHealthImports;
    const doc = await imports.get(importId);
    const user = doc && (await repos.users.find(doc.team_id, doc.user_id));
    if (!doc || !user) throw new Error(`import ${importId} or its user is gone`);
    const result = await importAppleHealthExport(
      { repos, config, providers: loadProviderCatalogue(), publisher: noPublishing },
      { teamId: doc.team_id, user, doc },
      {
        upload: {
          size: doc.received_bytes,
          read: (start, end) => imports.read(importId, start, end),
          stream: (start, end) => imports.stream(importId, start, end),
        },
        onProgress: async (progress) => {
          port.postMessage({ type: 'progress', progress } satisfies ThreadMessage);
          await imports.recordProgress(importId, progress, new Date());
        },
      },
    );
    port.postMessage({ type: 'done', result } satisfies ThreadMessage);
  } finally {
    await mongo.close();
  }
}

if (!isMainThread && (workerData as { appleHealthImport?: ThreadInput } | null)?.appleHealthImport) {
  runInThread((workerData as { appleHealthImport: ThreadInput }).appleHealthImport).catch((err: Error & { code?: string }) => {
    const error = { notAnExport: err instanceof ExportFileError, message: err.message, code: err.code };
    parentPort!.postMessage({ type: 'error', error } satisfies ThreadMessage);
  });
}

/**
 * Imports the stored export `importId` in a thread with its old generation capped at `heapMb`; `onProgress` hears its
 * progress. Rejects as the thread failed (an ExportFileError for a file that is not an export, an error with the zlib
 * code for a broken zip); `signal` ends the thread (the activity cancelled: a retry starts the import again).
 */
export function importInThread(
  config: Config,
  importId: string,
  onProgress: (progress: ImportProgress) => void,
  signal?: AbortSignal,
): Promise<{ progress: ImportProgress; resources: ImportedResource[] }> {
  return new Promise((resolve, reject) => {
    const thread = new Worker(path.join(__dirname, 'apple-health-import-thread.js'), {
      workerData: { appleHealthImport: { config, importId } satisfies ThreadInput },
      // A young generation of 32 MB. Measured on a 256 MB export (README, Benchmarks "Phones"): 16 MB promotes a batch's
      // samples while it is stored; 64 MB leaves the old generation too little room to promote into, so V8 collects
      // it whole instead of the young one every few tenths of a second (60% of the thread's time went to collecting).
      resourceLimits: { maxOldGenerationSizeMb: config.APPLE_HEALTH_IMPORT_HEAP_MB, maxYoungGenerationSizeMb: 32 },
    });
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', abort);
      fn();
    };
    const abort = () => settle(() => void thread.terminate().then(() => reject(signal?.reason ?? new Error('import cancelled'))));
    signal?.addEventListener('abort', abort, { once: true });
    thread.on('message', (message: ThreadMessage) => {
      if (message.type === 'progress') onProgress(message.progress);
      else if (message.type === 'done') settle(() => resolve(message.result));
      else {
        const { notAnExport, message: text, code } = message.error;
        const err = notAnExport ? new ExportFileError(text) : Object.assign(new Error(text), { code });
        settle(() => reject(err));
      }
    });
    thread.on('error', (err: Error & { code?: string }) => {
      const heap =
        err.code === 'ERR_WORKER_OUT_OF_MEMORY' ? ` (its heap is capped at APPLE_HEALTH_IMPORT_HEAP_MB=${config.APPLE_HEALTH_IMPORT_HEAP_MB}: raise it)` : '';
      settle(() => reject(new Error(`The Apple Health import thread failed: ${err.message}${heap}`)));
    });
    thread.on('exit', (code) => settle(() => reject(new Error(`The Apple Health import thread exited (${code}) before it finished.`))));
  });
}
