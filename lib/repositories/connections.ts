import type { Collection, Db } from 'mongodb';

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
    await this.connections.createIndex({ team_id: 1, user_id: 1, provider: 1 }, { unique: true });
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
