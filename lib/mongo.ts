import { MongoClient, type Db } from 'mongodb';

export interface Mongo {
  client: MongoClient;
  db: Db;
  close(): Promise<void>;
}

export async function connectMongo(url: string, dbName: string): Promise<Mongo> {
  const client = new MongoClient(url, { serverSelectionTimeoutMS: 10_000, maxPoolSize: 50, ignoreUndefined: true });
  try {
    await client.connect();
  } catch (err) {
    throw new Error(`Cannot reach MongoDB at ${url} (${(err as Error).message}). Start the dev stack (npm run dev) or set MONGO_URL.`);
  }
  const db = client.db(dbName);
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
