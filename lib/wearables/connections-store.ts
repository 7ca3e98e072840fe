import type { Collection, Db } from 'mongodb';
import { isDuplicateKeyError } from '../platform/database/store-errors';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';

export type ConnectionStatus = 'connected' | 'error' | 'paused' | 'deregistered';

/** A demo-adapter failure plan (sandbox only): how the provider misbehaves for one resource. */
export interface SandboxFault {
  resource: string;
  /** Fail this many attempts with a retriable error, then succeed. */
  transient_failures?: number;
  /** Fail every attempt with a non-retriable error. */
  permanent?: boolean;
  /** Hang this long at every attempt, then fail with an error of ours (not a provider error). */
  stall_seconds?: number;
  error_type?: string;
}

export interface ConnectionErrorDetails {
  error_type: string;
  error_message: string;
  errored_at: Date;
}

export interface ConnectionDoc {
  _id: string;
  team_id: string;
  user_id: string;
  provider: string;
  /**
   * Unique per (team, user): the provider slug while the connection is live, `deregistered:<_id>` after. So a
   * second live connection to one provider is refused by the unique index (two racing connects: one wins),
   * and a deregistered one stays as history. "unique among live" is this key (it predates partial indexes in the dev store).
   */
  connection_key: string;
  status: ConnectionStatus;
  /**
   * How data arrives: `demo` (sandbox demo adapter, pulled), `sdk` (pushed by the customer's app) or `oauth` (a real
   * provider integration, lib/wearables/providers/<slug>/, pulled with the tokens in `provider_tokens`).
   */
  adapter: 'demo' | 'sdk' | 'oauth';
  /** `oauth`: the client id of the OAuth app the user granted (the team's own, or the deployment's). */
  oauth_client_id?: string;
  /** `oauth`: the scopes the user granted, where the provider lets them untick some (Strava); absent: all asked for. */
  granted_scopes?: string[];
  created_on: Date;
  updated_at: Date;
  external_user_id?: string | null;
  /** `oauth` at a provider with regions (Dexcom): the region of the user's account there (`us`, `eu`, `jp`). */
  provider_region?: string;
  /** Whether retriable pull failures are retried (connections made after HISTORICAL_PULL_RETRYING_SINCE). */
  retrying_enabled?: boolean;
  sandbox_faults?: SandboxFault[];
  deregistered_at?: Date;
  /**
   * Set by the api's connect or deregister together with the write, removed once the steps that follow it are done
   * (lib/wearables/workflow-client.ts finishConnectionSteps). Still set after a grace period: the api crashed in
   * between, and the worker's sweeper finishes them.
   */
  steps_pending_since?: Date;
  /** `sdk` phones: the phone's last progress report (POST /v2/user/{user_id}/sdk_sync_progress/{provider}), as sent. */
  sdk_sync_progress?: { report: Record<string, unknown>; reported_at: Date };
}

/**
 * Why a connection broke (status `error`): a document of its own, `_id` = the connection id, its error written only by
 * the connection's workflow (or a provider's deauthorization). Kept apart from the connection document, so the
 * workflow and the api's deregistration never write the same document; the one field the deregistration writes here,
 * `deregistered_at`, is the connection's, so the error expires with its connection.
 */
export interface ConnectionErrorDoc {
  _id: string;
  team_id: string;
  user_id: string;
  error_details: ConnectionErrorDetails;
  /** The connection's `deregistered_at` once it ended: the error goes with it, CONNECTION_HISTORY_RETENTION_DAYS after. */
  deregistered_at?: Date;
}

/** The `connections` indexes: one live connection per (team, user, provider). */
export const CONNECTION_INDEXES: Record<'connections' | 'connection_errors', IndexSpec[]> = {
  connections: [
    { key: { team_id: 1, user_id: 1, connection_key: 1 }, unique: true },
    { key: { steps_pending_since: 1 } },
    { key: { provider: 1, external_user_id: 1 } },
    { key: { provider: 1, oauth_client_id: 1, connection_key: 1 } },
    // Only an ended connection carries `deregistered_at`: kept as history CONNECTION_HISTORY_RETENTION_DAYS.
    { key: { deregistered_at: 1 }, expireAfter: 'endedConnections' },
  ],
  connection_errors: [
    { key: { team_id: 1, user_id: 1 } },
    // Only the error of an ended connection carries `deregistered_at` (its connection's): they expire together.
    { key: { deregistered_at: 1 }, expireAfter: 'endedConnections' },
  ],
};

/** Every query ConnectionRepository issues (test/indexes.test.ts checks each is served by CONNECTION_INDEXES). */
export const CONNECTION_QUERY_SHAPES: Record<'connections' | 'connection_errors', QueryShape[]> = {
  connection_errors: [{ name: "erase a user's connection errors", filter: ['team_id', 'user_id'] }],
  connections: [
    { name: "a user's connections (list, erase)", filter: ['team_id', 'user_id'] },
    { name: "a user's live connection to a provider", filter: ['team_id', 'user_id', 'connection_key'] },
    { name: 'connections whose steps after a connect or deregister are unfinished (sweeper)', filter: ['steps_pending_since'] },
    { name: "a provider's connections of one of its users (a push names the user)", filter: ['provider', 'external_user_id'] },
    { name: "count of an OAuth app's live connections (Polar's budget grows with its users)", filter: ['provider', 'oauth_client_id', 'connection_key'] },
  ],
};

const deregisteredKey = (id: string) => `deregistered:${id}`;

/**
 * A user's provider connections. Each live connection is owned by its workflow (workflows/wearable-connection.ts);
 * the api creates it (a unique insert) and deregisters it.
 */
export class ConnectionRepository {
  readonly connections: Collection<ConnectionDoc>;
  readonly errors: Collection<ConnectionErrorDoc>;

  constructor(db: Db) {
    this.connections = db.collection('connections');
    this.errors = db.collection('connection_errors');
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.connections, CONNECTION_INDEXES.connections, retention);
    await createIndexes(this.errors, CONNECTION_INDEXES.connection_errors, retention);
  }

  /** Inserts a live connection; `conflict` when the user already has one to this provider. */
  async create(doc: Omit<ConnectionDoc, 'connection_key'>): Promise<{ created: ConnectionDoc } | { conflict: ConnectionDoc }> {
    const full: ConnectionDoc = { ...doc, connection_key: doc.provider };
    try {
      await this.connections.insertOne(full);
      return { created: full };
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      const existing = await this.findLive(doc.team_id, doc.user_id, doc.provider);
      if (!existing) throw err; // deregistered in between: the caller may try again
      return { conflict: existing };
    }
  }

  findLive(teamId: string, userId: string, provider: string) {
    return this.connections.findOne({ team_id: teamId, user_id: userId, connection_key: provider });
  }

  /** How many live connections were made with one OAuth app (a live connection's key is its provider). */
  countLiveForApp(provider: string, clientId: string): Promise<number> {
    return this.connections.countDocuments({ provider, oauth_client_id: clientId, connection_key: provider });
  }

  /** By `_id`; the caller checks the owner. */
  async find(connectionId: string): Promise<ConnectionDoc | null> {
    return this.connections.findOne({ _id: connectionId });
  }

  listForUser(teamId: string, userId: string) {
    return this.connections.find({ team_id: teamId, user_id: userId }).toArray();
  }

  async listLiveForUser(teamId: string, userId: string): Promise<ConnectionDoc[]> {
    return (await this.listForUser(teamId, userId)).filter((c) => c.status !== 'deregistered');
  }

  /**
   * Ends a live connection (idempotent: repeating it sets the same values). `stepsPendingSince` marks the steps the
   * caller runs next as pending (see `steps_pending_since`); a caller that is itself retried until done passes none.
   */
  async deregister(connectionId: string, stepsPendingSince?: Date): Promise<void> {
    const now = new Date();
    const marker = stepsPendingSince ? { steps_pending_since: stepsPendingSince } : {};
    await this.connections.updateOne(
      { _id: connectionId },
      { $set: { status: 'deregistered', connection_key: deregisteredKey(connectionId), deregistered_at: now, updated_at: now, ...marker } },
    );
    // After the connection's write: an error recorded since reads the connection ended and marks itself (recordError).
    await this.errors.updateOne({ _id: connectionId }, { $set: { deregistered_at: now } });
  }

  /** The live connections (any team) of the provider's user `externalUserId`: whom a push is about. */
  liveByExternalUser(provider: string, externalUserId: string): Promise<ConnectionDoc[]> {
    return this.connections
      .find({ provider, external_user_id: externalUserId, status: { $ne: 'deregistered' } })
      .limit(100)
      .toArray();
  }

  /** Connections whose pending steps are older than `cutoff`: their api crashed before finishing them. */
  withStepsPendingBefore(cutoff: Date, limit: number): Promise<ConnectionDoc[]> {
    return this.connections
      .find({ steps_pending_since: { $lt: cutoff } })
      .limit(limit)
      .toArray();
  }

  /** Clears the marker the steps were run for; a newer one (a later deregister) stays for its own steps. */
  async stepsDone(connectionId: string, stepsPendingSince: Date): Promise<void> {
    await this.connections.updateOne({ _id: connectionId, steps_pending_since: stepsPendingSince }, { $unset: { steps_pending_since: '' } });
  }

  /**
   * Marks the connection broken; written only by the connection's workflow (its single owner). Idempotent. The error
   * goes with its connection: one that ended before this write (its deregistration found no error to mark) gives the
   * error its end date; one erased (or expired) takes the error with it. Read after the write, so whichever of the
   * deregistration and this comes second marks the error.
   */
  /** A phone's progress report replaces its last (one write; the connection's own workflow never writes this field). */
  async recordSyncProgress(connectionId: string, report: Record<string, unknown>, now: Date): Promise<void> {
    await this.connections.updateOne({ _id: connectionId }, { $set: { sdk_sync_progress: { report, reported_at: now } } });
  }

  async recordError(connection: ConnectionDoc, details: ConnectionErrorDetails): Promise<void> {
    const { _id, team_id, user_id } = connection;
    await this.errors.updateOne({ _id }, { $set: { team_id, user_id, error_details: details } }, { upsert: true });
    const current = await this.connections.findOne({ _id }, { projection: { deregistered_at: 1 } });
    if (!current) await this.errors.deleteOne({ _id });
    else if (current.deregistered_at) await this.errors.updateOne({ _id }, { $set: { deregistered_at: current.deregistered_at } });
  }

  /** The error of each connection that has one (one `_id $in` read). */
  async errorsOf(connectionIds: string[]): Promise<Map<string, ConnectionErrorDetails>> {
    const found = new Map<string, ConnectionErrorDetails>();
    if (!connectionIds.length) return found;
    for (const doc of await this.errors.find({ _id: { $in: connectionIds } }).toArray()) found.set(doc._id, doc.error_details);
    return found;
  }

  /** Connections first: an error recorded meanwhile then finds its connection gone and deletes itself (recordError). */
  async eraseAllForUser(teamId: string, userId: string): Promise<number> {
    const res = await this.connections.deleteMany({ team_id: teamId, user_id: userId });
    await this.errors.deleteMany({ team_id: teamId, user_id: userId });
    return res.deletedCount;
  }
}
