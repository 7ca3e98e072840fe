import { createHash } from 'node:crypto';
import type { Collection, Db } from 'mongodb';
import { isDuplicateKeyError, isWriteConflictError } from '../platform/database/store-errors';
import { isDenseList, keysetFilter, walksIdIndex } from '../platform/database/pages';
import { createIndexes, type IndexSpec, type QueryShape, type Retention } from '../platform/database/indexes';

export type UserStatus = 'active' | 'pending_deletion' | 'erased';

export interface ConnectedSourceDoc {
  created_on: Date;
  source: { name: string; slug: string; logo: string };
}

export interface UserDoc {
  _id: string;
  team_id: string;
  client_user_id: string;
  /**
   * Unique per team (index). Equals client_user_id while the user is active; a deleted user releases it
   * (`deleted:<user_id>`) so a new user may take the id, and undo re-claims it. FerretDB v1 had no partial
   * indexes, so "unique among active users" is encoded in this key.
   */
  client_user_key: string;
  status: UserStatus;
  created_on: Date;
  updated_at: Date;
  fallback_time_zone: { id: string; source_slug: string; updated_at: Date } | null;
  fallback_birth_date: { value: string; source_slug: string; updated_at: Date } | null;
  ingestion_start: string | null;
  ingestion_end: string | null;
  connected_sources: ConnectedSourceDoc[];
  /** Bumped by every rewrite of `connected_sources` (the precondition of the next one); absent before the first. */
  connected_sources_version?: number;
  /** `erasing_at`: when the erasure of the user's data began (from then on no writer keeps what it writes for them). */
  deletion?: { id: string; requested_at: Date; erase_after: Date; erasing_at?: Date };
  erased_at?: Date;
  /** On a tombstone: lets an undo by client_user_id say "erased" instead of "unknown". */
  erased_client_user_id_sha256?: string;
}

export type UserChanges = Partial<Pick<UserDoc, 'client_user_id' | 'fallback_time_zone' | 'fallback_birth_date' | 'ingestion_start' | 'ingestion_end'>>;

export type RestoreOutcome =
  | { outcome: 'restored'; user: UserDoc }
  | { outcome: 'client_user_id_taken'; holder: UserDoc | null }
  | { outcome: 'not_pending' | 'team_deleting' };

const releasedKey = (userId: string) => `deleted:${userId}`;
const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

/** The `users` indexes (one place for the collection, created by `ensureIndexes`). */
export const USER_INDEXES: Record<'users', IndexSpec[]> = {
  users: [
    // Unique among active users per team (the key encodes the status; it predates partial indexes in the dev store).
    { key: { team_id: 1, client_user_key: 1 }, unique: true },
    // The listing pages in `_id` order (time-ordered UUIDv7 ids): DocumentDB reads a sort from an index only on `_id`.
    { key: { team_id: 1, status: 1, _id: 1 } },
    { key: { team_id: 1, client_user_id: 1, status: 1, 'deletion.requested_at': -1 } },
    // Tombstones only carry `erased_at`: they expire USER_TOMBSTONE_RETENTION_DAYS after the erasure.
    { key: { erased_at: 1 }, expireAfter: 'userTombstones' },
    { key: { team_id: 1, client_user_id: 1, created_on: -1 } },
    // Erased users keep only the hash of their client_user_id (the second branch of the latest-user lookup).
    { key: { team_id: 1, erased_client_user_id_sha256: 1, created_on: -1 } },
  ],
};

/** Every query UserRepository issues (test/indexes.test.ts checks each is served by USER_INDEXES). */
export const USER_QUERY_SHAPES: Record<'users', QueryShape[]> = {
  users: [
    { name: 'user by id (reads; every locked write, with its status)', filter: ['_id'], residual: ['team_id', 'status'] },
    { name: 'active user by client_user_id (create conflict, patch conflict, restore conflict)', filter: ['team_id', 'client_user_key'], residual: ['status'] },
    { name: 'pending user by client_user_id, latest deletion first', filter: ['team_id', 'client_user_id', 'status'], sort: ['deletion.requested_at'] },
    { name: 'latest user by client_user_id ($or branch: not yet erased)', filter: ['team_id', 'client_user_id'], sort: ['created_on'] },
    { name: 'latest user by client_user_id ($or branch: erased, by hash)', filter: ['team_id', 'erased_client_user_id_sha256'], sort: ['created_on'] },
    { name: 'list active users (a page)', filter: ['team_id', 'status', '_id'], sort: ['_id'] },
    { name: 'list active users (the count)', filter: ['team_id', 'status'] },
  ],
};

const activeIn = (teamId: string) => ({ team_id: teamId, status: 'active' as const });

/**
 * The only code that touches the `users` collection. A user is changed by two parties, the api (PATCH, undo)
 * and its deletion workflow; every change is one conditional write whose filter carries what the change relies
 * on (the status, the deletion's id, the version of `connected_sources`), so racing changes settle in the
 * database (architecture rule 3).
 */
export class UserRepository {
  readonly users: Collection<UserDoc>;

  constructor(db: Db) {
    this.users = db.collection('users');
  }

  async ensureIndexes(retention?: Retention): Promise<void> {
    await createIndexes(this.users, USER_INDEXES.users, retention);
  }

  /**
   * Inserts, or returns the user already holding the client_user_id (the unique index decides races). An insert
   * that still collided with racing ones after its retries (withWriteConflictRetries) lost to the one stored.
   */
  async create(doc: UserDoc): Promise<{ created: UserDoc } | { conflict: UserDoc }> {
    try {
      await this.users.insertOne(doc);
      return { created: doc };
    } catch (err) {
      if (!isDuplicateKeyError(err) && !isWriteConflictError(err)) throw err;
      const existing = await this.findActiveByClientUserId(doc.team_id, doc.client_user_id);
      if (!existing) throw err;
      return { conflict: existing };
    }
  }

  /** Takes back a user just created whose team turned out to be deleted meanwhile (nothing refers to it yet). */
  async withdrawCreated(doc: UserDoc): Promise<void> {
    await this.users.deleteOne({ _id: doc._id });
  }

  /**
   * By `_id`, within the team (another team's user is not found).
   */
  find(teamId: string, userId: string): Promise<UserDoc | null> {
    return this.users.findOne({ _id: userId, team_id: teamId });
  }

  /** Several users by id in one read (whatever their teams: the caller checks); ids not stored are left out. */
  findByIds(userIds: string[]): Promise<UserDoc[]> {
    return this.users.find({ _id: { $in: userIds } }).toArray();
  }

  findActiveByClientUserId(teamId: string, clientUserId: string) {
    return this.users.findOne({ team_id: teamId, client_user_key: clientUserId, status: 'active' });
  }

  /** The most recently deleted, still restorable user with that client_user_id. */
  findPendingByClientUserId(teamId: string, clientUserId: string) {
    return this.users.findOne({ team_id: teamId, client_user_id: clientUserId, status: 'pending_deletion' }, { sort: { 'deletion.requested_at': -1 } });
  }

  /** The newest user that has or had this client_user_id (erased users included). */
  findLatestByClientUserId(teamId: string, clientUserId: string) {
    return this.users.findOne(
      { team_id: teamId, $or: [{ client_user_id: clientUserId }, { erased_client_user_id_sha256: sha256(clientUserId) }] },
      { sort: { created_on: -1 } },
    );
  }

  /**
   * Active users oldest first (`_id` order: creation order for UUIDv7 ids), after the user `after` if given,
   * else skipping `offset`; `total` counts them when asked (an index count, beside the page). How dense they are
   * picks the plan (pages.ts `isDenseList`, or `walksIdIndex` of the first page's count, `knownTotal`).
   */
  async listActive(
    teamId: string,
    page: { after?: string; offset: number; limit: number; countTotal: boolean; knownTotal?: number },
  ): Promise<{ users: UserDoc[]; more: boolean; total: number | null }> {
    // With a count, the page goes beside it: its plan needs only whether the matches are dense (isDenseList).
    const [total, docs] = page.countTotal
      ? await Promise.all([
          this.countActive(teamId),
          isDenseList(this.users, activeIn(teamId)).then((walkId) => this.listActiveQuery(teamId, page, walkId).toArray()),
        ])
      : [null, await this.listActiveQuery(teamId, page, await walksIdIndex(this.users, page.knownTotal)).toArray()];
    return { users: docs.slice(0, page.limit), more: docs.length > page.limit, total };
  }

  /** The page query of `listActive` (one more than the page, to know if another follows); tests `explain` it. */
  listActiveQuery(teamId: string, page: { after?: string; offset: number; limit: number }, walkId = false) {
    const query = this.users
      .find(keysetFilter(activeIn(teamId), 1, page.after))
      .sort({ _id: 1 })
      .skip(page.offset)
      .limit(page.limit + 1);
    return walkId ? query.hint({ _id: 1 }) : query;
  }

  countActive(teamId: string): Promise<number> {
    return this.users.countDocuments(activeIn(teamId));
  }

  /** Applies changes to an active user. `conflict` when the new client_user_id is taken. */
  async patchActive(teamId: string, userId: string, changes: UserChanges): Promise<{ updated: UserDoc } | { conflict: UserDoc } | null> {
    const set: Record<string, unknown> = { ...changes, updated_at: new Date() };
    if (changes.client_user_id !== undefined) set.client_user_key = changes.client_user_id;
    try {
      const updated = await this.users.findOneAndUpdate({ _id: userId, team_id: teamId, status: 'active' }, { $set: set }, { returnDocument: 'after' });
      return updated ? { updated } : null;
    } catch (err) {
      if (!isDuplicateKeyError(err) || changes.client_user_id === undefined) throw err;
      const holder = await this.findActiveByClientUserId(teamId, changes.client_user_id);
      if (!holder) throw err;
      return { conflict: holder };
    }
  }

  /**
   * Hides an active user and releases its client_user_id. Null if the user was not active. Called only by
   * the user's deletion workflow (the single owner of the deletion state), with its deletion id. A deletion id
   * hides the user once: a late attempt of this write (timed out, retried, then finally run) cannot hide a
   * user that an undo of the same deletion has restored since.
   */
  markPendingDeletion(teamId: string, userId: string, deletion: NonNullable<UserDoc['deletion']>): Promise<UserDoc | null> {
    return this.users.findOneAndUpdate(
      { _id: userId, team_id: teamId, status: 'active', 'deletion.id': { $ne: deletion.id } },
      { $set: { status: 'pending_deletion', client_user_key: releasedKey(userId), deletion, updated_at: new Date() } },
      { returnDocument: 'after' },
    );
  }

  /**
   * Undo: re-claims the client_user_id for this deletion's user. Safe to repeat. `teamAccepts` is read after the
   * write (a racing team DELETE marks before it counts users, see TenancyRepository.beginTeamDeletion); on false
   * the user goes back to pending (the write's filter names this deletion: a PATCH in between changes neither)
   * and the undo is refused.
   */
  async restore(teamId: string, userId: string, deletionId: string, teamAccepts: () => Promise<boolean>): Promise<RestoreOutcome> {
    const user = await this.find(teamId, userId);
    if (!user || user.deletion?.id !== deletionId) return { outcome: 'not_pending' };
    if (user.status === 'active') return { outcome: 'restored', user };
    if (user.status !== 'pending_deletion') return { outcome: 'not_pending' };
    const thisDeletion = { _id: userId, team_id: teamId, 'deletion.id': deletionId };
    try {
      const restored = await this.users.findOneAndUpdate(
        { ...thisDeletion, status: 'pending_deletion', 'deletion.erasing_at': { $exists: false } },
        { $set: { status: 'active', client_user_key: user.client_user_id, updated_at: new Date() } },
        { returnDocument: 'after' },
      );
      if (!restored) return { outcome: 'not_pending' };
      if (!(await teamAccepts())) {
        await this.users.updateOne(
          { ...thisDeletion, status: 'active' },
          { $set: { status: 'pending_deletion', client_user_key: releasedKey(userId), updated_at: new Date() } },
        );
        return { outcome: 'team_deleting' };
      }
      return { outcome: 'restored', user: restored };
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      return { outcome: 'client_user_id_taken', holder: await this.findActiveByClientUserId(teamId, user.client_user_id) };
    }
  }

  /**
   * The erasure of a pending user's data begins (the deletion workflow, before it erases any domain): from then on a
   * writer that finds the mark after its write removes what it wrote (`takesData`). Idempotent.
   */
  async markErasing(teamId: string, userId: string): Promise<void> {
    await this.users.updateOne(
      { _id: userId, team_id: teamId, status: 'pending_deletion', 'deletion.erasing_at': { $exists: false } },
      { $set: { 'deletion.erasing_at': new Date() } },
    );
  }

  /**
   * Whether data written for the user now is kept: an active user, or one pending deletion whose erasure has not begun
   * (what it gets then is erased with the rest). A writer asks after its write: if the answer is no, the erasure may
   * have run before the write landed, and the writer removes the data itself.
   */
  async takesData(teamId: string, userId: string): Promise<boolean> {
    const user = await this.users.findOne({ _id: userId, team_id: teamId }, { projection: { status: 1, 'deletion.erasing_at': 1 } });
    return user?.status === 'active' || (user?.status === 'pending_deletion' && !user.deletion?.erasing_at);
  }

  /** Drops everything but a tombstone (ids, status, when) once the grace period has passed. */
  async markErased(teamId: string, userId: string, deletionId: string): Promise<boolean> {
    const user = await this.find(teamId, userId);
    if (user?.status !== 'pending_deletion' || user.deletion?.id !== deletionId) return false;
    // client_user_id cannot change while pending (PATCH needs an active user): the hash below stays right.
    const res = await this.users.updateOne(
      { _id: userId, team_id: teamId, status: 'pending_deletion', 'deletion.id': deletionId },
      {
        $set: {
          status: 'erased',
          erased_at: new Date(),
          erased_client_user_id_sha256: sha256(user.client_user_id),
          client_user_key: `erased:${userId}`,
          updated_at: new Date(),
        },
        $unset: {
          client_user_id: '',
          fallback_time_zone: '',
          fallback_birth_date: '',
          ingestion_start: '',
          ingestion_end: '',
          connected_sources: '',
        },
      },
    );
    return res.modifiedCount === 1;
  }

  async clearConnectedSources(teamId: string, userId: string): Promise<void> {
    await this.setConnectedSources(teamId, userId, async () => []);
  }

  /**
   * Rewrites the user's `connected_sources` from `current()` (the live connections). Optimistic: the list is
   * computed after reading the user's version and written only if no other rewrite came in between (the version
   * in the filter); otherwise it is computed again. So two connection changes racing each other cannot leave a
   * stale list behind: the last write always follows a computation made after every earlier write.
   */
  async setConnectedSources(teamId: string, userId: string, current: () => Promise<ConnectedSourceDoc[]>): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const user = await this.users.findOne({ _id: userId, team_id: teamId }, { projection: { connected_sources_version: 1 } });
      if (!user) return;
      const version = user.connected_sources_version;
      const sources = await current();
      const { matchedCount } = await this.users.updateOne(
        { _id: userId, team_id: teamId, connected_sources_version: version === undefined ? { $exists: false } : version },
        { $set: { connected_sources: sources, connected_sources_version: (version ?? 0) + 1 } },
      );
      if (matchedCount === 1) return;
      if (attempt >= 50) throw new Error(`connected_sources of user ${userId}: 50 rewrites in a row lost to others; giving up`);
    }
  }
}
