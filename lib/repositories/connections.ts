import type { Collection, Db } from 'mongodb';
import { createIndexes, type IndexSpec, type QueryShape } from './indexes';

export type ConnectionStatus = 'connected' | 'error' | 'paused' | 'deregistered';

export interface ConnectionDoc {
  _id: string;
  team_id: string;
  user_id: string;
  provider: string;
  status: ConnectionStatus;
  created_on: Date;
  updated_at: Date;
  deregistered_at?: Date;
}

/** The `connections` indexes: one connection per (team, user, provider). */
export const CONNECTION_INDEXES: Record<'connections', IndexSpec[]> = {
  connections: [{ key: { team_id: 1, user_id: 1, provider: 1 }, unique: true }],
};

/** Every query ConnectionRepository issues (test/indexes.test.ts checks each is served by CONNECTION_INDEXES). */
export const CONNECTION_QUERY_SHAPES: Record<'connections', QueryShape[]> = {
  connections: [
    { name: "a user's connections (list, erase)", filter: ['team_id', 'user_id'] },
    { name: "deregister a user's connections", filter: ['team_id', 'user_id'], residual: ['status'] },
  ],
};

/**
 * A user's provider connections. The connection flows (link, historical pull) arrive with the
 * connections issue; user deletion already deregisters and erases them through this repository.
 */
export class ConnectionRepository {
  readonly connections: Collection<ConnectionDoc>;

  constructor(db: Db) {
    this.connections = db.collection('connections');
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.connections, CONNECTION_INDEXES.connections);
  }

  async deregisterAllForUser(teamId: string, userId: string): Promise<number> {
    const now = new Date();
    const res = await this.connections.updateMany(
      { team_id: teamId, user_id: userId, status: { $ne: 'deregistered' } },
      { $set: { status: 'deregistered', deregistered_at: now, updated_at: now } },
    );
    return res.modifiedCount;
  }

  async eraseAllForUser(teamId: string, userId: string): Promise<number> {
    const res = await this.connections.deleteMany({ team_id: teamId, user_id: userId });
    return res.deletedCount;
  }

  listForUser(teamId: string, userId: string) {
    return this.connections.find({ team_id: teamId, user_id: userId }).toArray();
  }
}
