import { randomUUID } from 'node:crypto';
import type { Collection, Db, Filter } from 'mongodb';
import { ApiError } from '../errors';
import { isDuplicateKeyError } from './store-errors';
import { createIndexes, type IndexSpec, type QueryShape } from './indexes';
import type { DocumentLocks, LockLease } from './locks';
import { hashKey, MANAGEMENT_KEY_PREFIX, mintKey, sameHash, teamKeyPrefix } from '../keys';

export interface OrgDoc {
  _id: string;
  name: string;
  created_at: Date;
}

export interface BrandInformation {
  company_name: string;
  company_website?: string | null;
  support_email?: string | null;
  support_contact?: string | null;
  company_address?: string | null;
  brand_color?: string | null;
}

/** What a team's owner sets about it besides its name (the reference API's team settings). */
export interface TeamSettings {
  logo_url: string | null;
  brand_information: BrandInformation | null;
  lab_tests_patient_sms_communication_enabled: boolean;
  lab_tests_patient_email_communication_enabled: boolean;
  critical_result_notification_email: string | null;
  reject_duplicate_connection: boolean;
}

/** Features an org admin turns on per team (closed betas). */
export interface TeamFeatureFlags {
  insurance: boolean;
}

/** A change of a team: its name, settings and feature flags (each only if given). */
export type TeamChanges = Partial<TeamSettings> & { name?: string; feature_flags?: Partial<TeamFeatureFlags> };

export interface TeamDoc extends TeamSettings {
  _id: string;
  team_id: string;
  org_id: string;
  name: string;
  environment: string;
  region: string;
  feature_flags: TeamFeatureFlags;
  /** Set when a DELETE began (the deletion then runs to its end, also when repeated after a crash). */
  deletion_started_at: Date | null;
  created_at: Date;
  updated_at: Date;
  /** Bumped by every change of the team's fields: the precondition of the next (absent before the first). */
  version?: number;
}

/** Teams stored by earlier versions lack the settings, flags and deletion mark: read with the defaults. */
type StoredTeam = Omit<TeamDoc, keyof TeamSettings | 'feature_flags' | 'deletion_started_at'> &
  Partial<TeamSettings> & { feature_flags?: Partial<TeamFeatureFlags>; deletion_started_at?: Date | null };

export const TEAM_SETTING_DEFAULTS: TeamSettings = {
  logo_url: null,
  brand_information: null,
  lab_tests_patient_sms_communication_enabled: true,
  lab_tests_patient_email_communication_enabled: true,
  critical_result_notification_email: null,
  reject_duplicate_connection: false,
};
export const FEATURE_FLAG_DEFAULTS: TeamFeatureFlags = { insurance: false };

function withDefaults(doc: StoredTeam): TeamDoc;
function withDefaults(doc: StoredTeam | null): TeamDoc | null;
function withDefaults(doc: StoredTeam | null): TeamDoc | null {
  if (!doc) return null;
  return { ...TEAM_SETTING_DEFAULTS, deletion_started_at: null, ...doc, feature_flags: { ...FEATURE_FLAG_DEFAULTS, ...doc.feature_flags } };
}

export interface TeamApiKeyDoc {
  _id: string;
  team_id: string;
  org_id: string;
  label: string;
  key_hash: string;
  prefix: string;
  environment: string;
  region: string;
  created_at: Date;
}
export type ManagementRole = 'org_admin' | 'team_admin';
export interface ManagementKeyDoc {
  _id: string;
  org_id: string;
  label: string;
  role: ManagementRole;
  team_ids: string[];
  key_hash: string;
  prefix: string;
  created_at: Date;
}
export type ManagementKeyChanges = Partial<Pick<ManagementKeyDoc, 'label' | 'role' | 'team_ids'>>;

/**
 * Why a change of management keys was refused. `actor_not_org_admin`: the key making the request was
 * deleted or demoted by a request that finished first.
 */
export type KeyChangeRefusal = 'not_found' | 'last_org_admin' | 'actor_not_org_admin' | { unknown_team_ids: string[] };
export type KeyChangeOutcome = { key: ManagementKeyDoc } | { refused: KeyChangeRefusal };

/** A team that a DELETE has begun on takes no other change (its deletion is repeated to finish it). */
export class TeamDeletingError extends ApiError {
  constructor(teamId: string) {
    super(409, `Team ${teamId} is being deleted; repeat its DELETE to finish. It takes no other changes.`);
  }
}

/**
 * The document lock of a team: the DELETE's mark and removal, and the creation of what hangs off the team
 * (credentials, webhook endpoints), take it (see `withTeam`); changes of the team's own fields are conditional
 * writes instead (`updateTeam`).
 */
export const teamLockKey = (teamId: string) => `team:${teamId}`;
const orgKeysLockKey = (orgId: string) => `management-keys:${orgId}`;

type TenancyCollection = 'orgs' | 'teams' | 'team_api_keys' | 'management_keys' | 'system';

/**
 * The indexes of the tenancy collections (one place per collection, created by `ensureIndexes`). Listings
 * sort by `(created_at, _id)`, so `_id` ends their indexes and pages come off the index in order.
 */
export const TENANCY_INDEXES: Record<TenancyCollection, IndexSpec[]> = {
  orgs: [],
  teams: [{ key: { org_id: 1, created_at: 1, _id: 1 } }],
  team_api_keys: [
    { key: { key_hash: 1 }, unique: true },
    { key: { org_id: 1, created_at: 1, _id: 1 } },
    { key: { org_id: 1, team_id: 1, created_at: 1, _id: 1 } },
  ],
  management_keys: [
    { key: { key_hash: 1 }, unique: true },
    { key: { org_id: 1, created_at: 1, _id: 1 } },
  ],
  system: [],
};

/** Every query TenancyRepository issues (test/indexes.test.ts checks each is served by TENANCY_INDEXES). */
export const TENANCY_QUERY_SHAPES: Record<TenancyCollection, QueryShape[]> = {
  orgs: [{ name: 'org by id (find, rename)', filter: ['_id'] }],
  teams: [
    { name: 'team by id (find, every change: its version and deletion mark in the filter, delete)', filter: ['_id'], residual: ['org_id', 'version', 'deletion_started_at'] },
    { name: "an org's teams", filter: ['org_id'], sort: ['created_at', '_id'] },
    // Read off the org's index with the `_id`s checked in its keys; an org has few teams.
    { name: "a team admin's teams", filter: ['org_id'], sort: ['created_at', '_id'], residual: ['_id in the key\'s teams'] },
  ],
  team_api_keys: [
    { name: 'key by hash (authentication)', filter: ['key_hash'] },
    { name: "an org's keys", filter: ['org_id'], sort: ['created_at', '_id'] },
    { name: "keys of some of an org's teams (list; revoke a deleted team's)", filter: ['org_id', 'team_id'], sort: ['created_at', '_id'] },
    { name: 'keys by id (find, delete)', filter: ['_id'], residual: ['org_id'] },
  ],
  management_keys: [
    { name: 'key by hash (authentication)', filter: ['key_hash'] },
    // Every change of an org's management keys reads them all under the org's lock (an org has few keys).
    { name: "an org's keys (list; count of org admins; bindings of a deleted team)", filter: ['org_id'], sort: ['created_at', '_id'] },
    { name: 'key by id (update, delete)', filter: ['_id'], residual: ['org_id'] },
  ],
  system: [{ name: 'bootstrap claim', filter: ['_id'] }],
};

/**
 * Orgs, teams, team API keys and management keys. Keys are stored only as SHA-256 hashes.
 *
 * Concurrency: every change of a team, and the creation of what hangs off it, runs under the team's document
 * lock (`teamLockKey`), so nothing is added to a team while it is being deleted (an invariant over several
 * documents: the team and what hangs off it). Every change of an org's management keys runs under the org's keys
 * lock, so "is this the last org_admin key?" (a count over several key documents) and the delete or demotion it
 * allows are one step. Not yet moved to single conditional writes (users, lab tests, webhook endpoints, lab
 * orders and re-encryption have been).
 */
export class TenancyRepository {
  readonly orgs: Collection<OrgDoc>;
  readonly teams: Collection<StoredTeam>;
  readonly teamApiKeys: Collection<TeamApiKeyDoc>;
  readonly managementKeys: Collection<ManagementKeyDoc>;
  private readonly system: Collection<{ _id: string; at: Date }>;
  private readonly revocationListeners = new Set<(keyHashes: string[]) => void>();

  constructor(
    db: Db,
    private readonly locks: DocumentLocks,
  ) {
    this.orgs = db.collection('orgs');
    this.teams = db.collection('teams');
    this.teamApiKeys = db.collection('team_api_keys');
    this.managementKeys = db.collection('management_keys');
    this.system = db.collection('system');
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.orgs, TENANCY_INDEXES.orgs);
    await createIndexes(this.teams, TENANCY_INDEXES.teams);
    await createIndexes(this.teamApiKeys, TENANCY_INDEXES.team_api_keys);
    await createIndexes(this.managementKeys, TENANCY_INDEXES.management_keys);
    await createIndexes(this.system, TENANCY_INDEXES.system);
    // Superseded by the longer indexes above (same leading fields); dropped so writes do not maintain them.
    await this.teams.dropIndex('org_id_1_created_at_1').catch(() => undefined);
    await this.teamApiKeys.dropIndex('org_id_1_team_id_1').catch(() => undefined);
    await this.managementKeys.dropIndex('org_id_1').catch(() => undefined);
  }

  // ---------------------------------------------------------------- orgs

  async createOrg(name: string, id: string = randomUUID()): Promise<OrgDoc> {
    const org = { _id: id, name, created_at: new Date() };
    await this.orgs.insertOne(org);
    return org;
  }

  findOrg(orgId: string) {
    return this.orgs.findOne({ _id: orgId });
  }

  /** One field set by one kind of request: concurrent renames end with one of the names, nothing to lock. */
  renameOrg(orgId: string, name: string) {
    return this.orgs.findOneAndUpdate({ _id: orgId }, { $set: { name } }, { returnDocument: 'after' });
  }

  /** Claims the one-time production bootstrap (a fixed `_id` makes concurrent runs race safely). */
  async claimBootstrap(): Promise<boolean> {
    try {
      await this.system.insertOne({ _id: 'bootstrap', at: new Date() });
      return true;
    } catch (err) {
      if (isDuplicateKeyError(err)) return false;
      throw err;
    }
  }

  /** Gives the claim back when bootstrapping failed half-way, so it can be run again. */
  async releaseBootstrap(): Promise<void> {
    await this.system.deleteOne({ _id: 'bootstrap' });
  }

  // ---------------------------------------------------------------- teams

  async createTeam(
    orgId: string,
    name: string,
    environment: string,
    region: string,
    settings: Partial<TeamSettings> = {},
    id: string = randomUUID(),
  ): Promise<TeamDoc> {
    const now = new Date();
    const team: TeamDoc = {
      ...TEAM_SETTING_DEFAULTS,
      ...settings,
      _id: id,
      team_id: id,
      org_id: orgId,
      name,
      environment,
      region,
      feature_flags: { ...FEATURE_FLAG_DEFAULTS },
      deletion_started_at: null,
      created_at: now,
      updated_at: now,
    };
    await this.teams.insertOne(team);
    return team;
  }

  /** By `_id`, the org checked here (the team with its defaults filled in comes from findTeamById). */
  async findTeam(orgId: string, teamId: string): Promise<TeamDoc | null> {
    const team = await this.findTeamById(teamId);
    return team?.org_id === orgId ? team : null;
  }

  /** The team with its settings and `feature_flags` (defaults filled in), whatever its org. */
  async findTeamById(teamId: string): Promise<TeamDoc | null> {
    return withDefaults(await this.teams.findOne({ _id: teamId }));
  }

  async listTeams(orgId: string, onlyTeamIds?: string[]): Promise<TeamDoc[]> {
    const filter = onlyTeamIds ? { org_id: orgId, _id: { $in: onlyTeamIds } } : { org_id: orgId };
    return (await this.teams.find(filter).sort({ created_at: 1, _id: 1 }).toArray()).map((t) => withDefaults(t));
  }

  /**
   * Runs `fn` under the team's lock with the team as it is then: null when the org has no such team (`orgId`
   * null: any org). A team being deleted refuses (TeamDeletingError) unless `deleting` is allowed.
   */
  private withTeam<T>(
    orgId: string | null,
    teamId: string,
    fn: (team: TeamDoc, lease: LockLease) => Promise<T>,
    opts: { deleting?: 'allow' } = {},
  ): Promise<T | null> {
    return this.locks.withLock(teamLockKey(teamId), async (lease) => {
      const team = await this.findTeamById(teamId);
      if (!team || (orgId !== null && team.org_id !== orgId)) return null;
      if (team.deletion_started_at && opts.deleting !== 'allow') throw new TeamDeletingError(teamId);
      return fn(team, lease);
    });
  }

  /** Runs `fn` under the team's lock (for documents that hang off the team, e.g. custom credentials). */
  withLiveTeam<T>(orgId: string, teamId: string, fn: (team: TeamDoc, lease: LockLease) => Promise<T>): Promise<T | null> {
    return this.withTeam(orgId, teamId, fn);
  }

  /**
   * Applies `changes` (fields not given keep their value; `feature_flags` are merged flag by flag); `check`
   * sees the merged team first and throws to refuse (rules that span fields, such as a logo for brand
   * information). `orgId` null: a team of any org (scripts). Null when there is no such team.
   *
   * One conditional write, no lock: the filter holds the version read and "not being deleted", so a change
   * or a DELETE that landed in between makes this one read the team again and decide again (rule 3).
   */
  async updateTeam(
    orgId: string | null,
    teamId: string,
    changes: TeamChanges,
    check: (merged: TeamDoc) => void = () => undefined,
  ): Promise<TeamDoc | null> {
    for (let attempt = 1; ; attempt++) {
      const team = await this.findTeamById(teamId);
      if (!team || (orgId !== null && team.org_id !== orgId)) return null;
      if (team.deletion_started_at) throw new TeamDeletingError(teamId);
      const { feature_flags: flags, ...fields } = changes;
      const version = (team.version ?? 0) + 1;
      const set = { ...fields, ...(flags ? { feature_flags: { ...team.feature_flags, ...flags } } : {}), updated_at: new Date(), version };
      const merged = { ...team, ...set };
      check(merged);
      const { matchedCount } = await this.teams.updateOne(
        { _id: teamId, version: team.version ?? null, deletion_started_at: null } as Filter<StoredTeam>,
        { $set: set },
      );
      if (matchedCount) return merged;
      if (attempt === 20) throw new ApiError(503, 'The team kept changing under this request; retry it.', { 'Retry-After': '1' });
    }
  }

  /** For scripts (dev seed): sets the given flags of a team of any org; throws if there is no such team. */
  async setFeatureFlags(teamId: string, flags: Partial<TeamFeatureFlags>): Promise<void> {
    if (!(await this.updateTeam(null, teamId, { feature_flags: flags }))) throw new Error(`setFeatureFlags: no team ${teamId}`);
  }

  /**
   * Step 1 of deleting a team: marks it (from then on it takes no changes, and a repeated DELETE goes on
   * where a crashed one stopped), then asks `blockers` what must go before the team may (e.g. its users).
   * Anything it returns refuses the deletion and the mark is removed again.
   *
   * Mark first, check second: writers that take no team lock (user creation) insert first and read the mark
   * second (`teamAcceptsNewData`), so of a racing pair either the check sees the new document (refused here)
   * or the writer sees the mark (and takes its document back); nothing is left behind in a deleted team.
   */
  beginTeamDeletion(orgId: string, teamId: string, blockers: () => Promise<string[]>): Promise<{ team: TeamDoc } | { blocked: string[] } | null> {
    return this.withTeam(
      orgId,
      teamId,
      async (team, lease) => {
        const marked = { ...team, deletion_started_at: team.deletion_started_at ?? new Date() };
        if (!team.deletion_started_at) {
          await lease.assertHeld();
          await this.teams.updateOne({ _id: teamId }, { $set: { deletion_started_at: marked.deletion_started_at } });
        }
        const blocked = await blockers();
        if (!blocked.length) return { team: marked };
        await lease.assertHeld();
        await this.teams.updateOne({ _id: teamId }, { $set: { deletion_started_at: null } });
        return { blocked };
      },
      { deleting: 'allow' },
    );
  }

  /**
   * Whether the team still takes new documents: false once a DELETE has marked it (or it is gone). Writers that
   * take no team lock call it after their insert and take the document back on false (see `beginTeamDeletion`).
   */
  async teamAcceptsNewData(teamId: string): Promise<boolean> {
    const team = await this.findTeamById(teamId);
    return team !== null && !team.deletion_started_at;
  }

  /** Last step of deleting a team (everything hanging off it is gone by then). */
  async deleteMarkedTeam(orgId: string, teamId: string): Promise<void> {
    await this.withTeam(
      orgId,
      teamId,
      async (team, lease) => {
        if (!team.deletion_started_at) throw new Error(`team ${teamId} is not marked for deletion`);
        await lease.assertHeld();
        await this.teams.deleteOne({ _id: teamId });
      },
      { deleting: 'allow' },
    );
  }

  // ---------------------------------------------------------------- team API keys

  /** Under the team's lock, so a key is never added to a team being deleted (404 / 409 from the lock's read). */
  async createTeamApiKey(team: TeamDoc, label: string, id: string = randomUUID()): Promise<{ doc: TeamApiKeyDoc; value: string }> {
    const created = await this.withTeam(team.org_id, team._id, async (current, lease) => {
      const key = mintKey(teamKeyPrefix(current.environment, current.region));
      const doc: TeamApiKeyDoc = {
        _id: id,
        team_id: current._id,
        org_id: current.org_id,
        label,
        key_hash: key.hash,
        prefix: key.display,
        environment: current.environment,
        region: current.region,
        created_at: new Date(),
      };
      await lease.assertHeld();
      await this.teamApiKeys.insertOne(doc);
      return { doc, value: key.value };
    });
    if (!created) throw new ApiError(404, `Team ${team._id} not found in this organisation.`);
    return created;
  }

  listTeamApiKeys(orgId: string, teamIds?: string[]) {
    const filter = teamIds ? { org_id: orgId, team_id: { $in: teamIds } } : { org_id: orgId };
    return this.teamApiKeys.find(filter).sort({ created_at: 1, _id: 1 }).toArray();
  }

  findTeamApiKeys(orgId: string, ids: string[]) {
    return this.teamApiKeys.find({ org_id: orgId, _id: { $in: ids } }).toArray();
  }

  /**
   * Calls `listener` with the hashes of team API keys as they are deleted by this process (the api's key
   * cache drops them at once). Returns the unsubscribe function.
   */
  onTeamKeysRevoked(listener: (keyHashes: string[]) => void): () => void {
    this.revocationListeners.add(listener);
    return () => this.revocationListeners.delete(listener);
  }

  private async revoke(keys: TeamApiKeyDoc[]): Promise<number> {
    if (!keys.length) return 0;
    const res = await this.teamApiKeys.deleteMany({ _id: { $in: keys.map((k) => k._id) } });
    const hashes = keys.map((k) => k.key_hash);
    for (const listener of this.revocationListeners) listener(hashes);
    return res.deletedCount;
  }

  /** Deletes the given keys of the org; how many were deleted. */
  async deleteTeamApiKeys(orgId: string, ids: string[]): Promise<number> {
    return this.revoke(await this.findTeamApiKeys(orgId, ids));
  }

  /** Every key of a team (its deletion). */
  async deleteTeamApiKeysOfTeam(orgId: string, teamId: string): Promise<number> {
    return this.revoke(await this.listTeamApiKeys(orgId, [teamId]));
  }

  async verifyTeamApiKey(value: string): Promise<TeamApiKeyDoc | null> {
    const hash = hashKey(value);
    const doc = await this.teamApiKeys.findOne({ key_hash: hash });
    return doc && sameHash(doc.key_hash, hash) ? doc : null;
  }

  // ---------------------------------------------------------------- management keys

  /** Mints a key without checks (bootstrap, tests); the API goes through `createBoundManagementKey`. */
  async createManagementKey(
    orgId: string,
    label: string,
    role: ManagementRole,
    teamIds: string[],
    id: string = randomUUID(),
  ): Promise<{ doc: ManagementKeyDoc; value: string }> {
    const key = mintKey(MANAGEMENT_KEY_PREFIX);
    const doc: ManagementKeyDoc = {
      _id: id,
      org_id: orgId,
      label,
      role,
      team_ids: role === 'org_admin' ? [] : teamIds,
      key_hash: key.hash,
      prefix: key.display,
      created_at: new Date(),
    };
    await this.managementKeys.insertOne(doc);
    return { doc, value: key.value };
  }

  /** The org's live teams among `teamIds` (not those being deleted), under the org's keys lock. */
  private async unknownTeams(orgId: string, teamIds: string[]): Promise<string[]> {
    if (!teamIds.length) return [];
    const live = (await this.listTeams(orgId, teamIds)).filter((t) => !t.deletion_started_at).map((t) => t._id);
    return teamIds.filter((id) => !live.includes(id));
  }

  /**
   * Mints a key whose bindings name live teams of the org. Under the org's keys lock: a team deletion unbinds
   * its team under the same lock after marking it, so no key ends up bound to a deleted team.
   */
  createBoundManagementKey(
    orgId: string,
    label: string,
    role: ManagementRole,
    teamIds: string[],
    id: string,
  ): Promise<{ key: ManagementKeyDoc; value: string } | { refused: KeyChangeRefusal }> {
    return this.locks.withLock(orgKeysLockKey(orgId), async (lease) => {
      const unknown = await this.unknownTeams(orgId, teamIds);
      if (unknown.length) return { refused: { unknown_team_ids: unknown } };
      await lease.assertHeld();
      const { doc, value } = await this.createManagementKey(orgId, label, role, teamIds, id);
      return { key: doc, value };
    });
  }

  listManagementKeys(orgId: string) {
    return this.managementKeys.find({ org_id: orgId }).sort({ created_at: 1, _id: 1 }).toArray();
  }

  /**
   * Runs a change of one key under the org's keys lock, with the refusals every change shares: the target
   * exists, the acting key is still an org_admin (a racing request may have deleted or demoted it), and the org
   * keeps an org_admin key when `after` (the target after the change, null for deleted) is not one.
   */
  private changeManagementKey(
    orgId: string,
    keyId: string,
    actorKeyId: string,
    after: (target: ManagementKeyDoc) => ManagementKeyDoc | null,
    write: (target: ManagementKeyDoc) => Promise<void>,
  ): Promise<KeyChangeOutcome> {
    return this.locks.withLock(orgKeysLockKey(orgId), async (lease): Promise<KeyChangeOutcome> => {
      const keys = await this.listManagementKeys(orgId);
      const target = keys.find((k) => k._id === keyId);
      if (!target) return { refused: 'not_found' };
      if (!keys.some((k) => k._id === actorKeyId && k.role === 'org_admin')) return { refused: 'actor_not_org_admin' };
      const changed = after(target);
      const adminsAfter = keys.filter((k) => (k._id === keyId ? changed?.role === 'org_admin' : k.role === 'org_admin')).length;
      if (adminsAfter === 0) return { refused: 'last_org_admin' };
      if (changed) {
        const unknown = await this.unknownTeams(orgId, changed.team_ids.filter((id) => !target.team_ids.includes(id)));
        if (unknown.length) return { refused: { unknown_team_ids: unknown } };
      }
      await lease.assertHeld();
      await write(target);
      return { key: changed ?? target };
    });
  }

  /**
   * Applies `changes` (an org_admin key holds no bindings); `check` sees the merged key first and throws to
   * refuse (the role rules). Refusals as `changeManagementKey` says.
   */
  updateManagementKey(
    orgId: string,
    keyId: string,
    actorKeyId: string,
    changes: ManagementKeyChanges,
    check: (merged: ManagementKeyDoc) => void = () => undefined,
  ): Promise<KeyChangeOutcome> {
    const set = { ...changes, ...(changes.role === 'org_admin' ? { team_ids: [] } : {}) };
    return this.changeManagementKey(
      orgId,
      keyId,
      actorKeyId,
      (target) => {
        const merged = { ...target, ...set };
        check(merged);
        return merged;
      },
      async () => void (await this.managementKeys.updateOne({ _id: keyId }, { $set: set })),
    );
  }

  deleteManagementKey(orgId: string, keyId: string, actorKeyId: string): Promise<KeyChangeOutcome> {
    return this.changeManagementKey(
      orgId,
      keyId,
      actorKeyId,
      () => null,
      async () => void (await this.managementKeys.deleteOne({ _id: keyId })),
    );
  }

  /** Removes a deleted team from the bindings of the org's keys (a key left with none can do nothing). */
  async unbindTeam(orgId: string, teamId: string): Promise<void> {
    await this.locks.withLock(orgKeysLockKey(orgId), async (lease) => {
      for (const key of await this.listManagementKeys(orgId)) {
        if (!key.team_ids.includes(teamId)) continue;
        await lease.assertHeld();
        await this.managementKeys.updateOne({ _id: key._id }, { $set: { team_ids: key.team_ids.filter((id) => id !== teamId) } });
      }
    });
  }

  async verifyManagementKey(value: string): Promise<ManagementKeyDoc | null> {
    const hash = hashKey(value);
    const doc = await this.managementKeys.findOne({ key_hash: hash });
    return doc && sameHash(doc.key_hash, hash) ? doc : null;
  }
}
