import { MongoClient, type Db } from 'mongodb';
import { recordQueryShapes } from './query-shapes';
import { observeDatabaseCommands } from '../metrics';
import { detectStore, useStore } from './store-strategy';
import { withWriteConflictRetries } from './write-conflicts';

export interface Mongo {
  client: MongoClient;
  db: Db;
  close(): Promise<void>;
}

export interface MongoOptions {
  /** MONGO_QUERY_SHAPE_LOG: record every query's shape into this directory (lib/platform/database/query-shapes.ts). */
  queryShapeLog?: string;
  /** Connections at most (50: an api or worker process; fewer for a thread doing one thing). */
  maxPoolSize?: number;
}

export async function connectMongo(url: string, dbName: string, options: MongoOptions = {}): Promise<Mongo> {
  // Commands are monitored for the latency metric (lib/platform/metrics.ts) and, in tests, the query-shape log.
  // A request waits at most 1 s for a reachable server, then fails (answered 503 with Retry-After, api/middleware/errors.ts).
  const client = new MongoClient(url, {
    serverSelectionTimeoutMS: 1_000,
    maxPoolSize: options.maxPoolSize ?? 50,
    ignoreUndefined: true,
    monitorCommands: true,
  });
  observeDatabaseCommands(client);
  if (options.queryShapeLog) recordQueryShapes(client, options.queryShapeLog);
  try {
    await client.connect();
  } catch (err) {
    throw new Error(`Cannot reach MongoDB at ${url} (${(err as Error).message}). Start the dev stack (npm run dev) or set MONGO_URL.`);
  }
  const db = withWriteConflictRetries(client.db(dbName));
  useStore(await detectStore(db));
  return { client, db, close: () => client.close() };
}

export async function pingMongo(db: Db): Promise<boolean> {
  try {
    await db.command({ ping: 1 });
    return true;
  } catch {
    return false;
  }
}
