import { randomUUID } from 'node:crypto';
import type { Collection, Db, Filter } from 'mongodb';
import { ApiError } from '../platform/errors';
import { hashKey, mintKey, sameHash, teamKeyPrefix } from '../platform/keys';
import { isDuplicateKeyError } from '../platform/database/store-errors';
import { createIndexes, type IndexSpec, type QueryShape } from '../platform/database/indexes';
import { Lease } from '../platform/database/leases';
import { ManagementKeyStore } from './management-keys-store';
import {
  FEATURE_FLAG_DEFAULTS,
  TEAM_SETTING_DEFAULTS,
  TeamDeletingError,
  withDefaults,
  type ManagementKeyChanges,
  type ManagementKeyDoc,
  type ManagementRole,
  type OrgDoc,
  type StoredOrg,
  type StoredTeam,
  type TeamApiKeyDoc,
  type TeamChanges,
  type TeamDoc,
  type TeamFeatureFlags,
  type TeamSettings,
} from './model';

/**
 * How long a DELETE's claim on a team holds off other DELETEs of it (renewed before each step; a crashed one's
 * lapses), and how long another DELETE waits for it to end before answering 503 (a deletion takes milliseconds).
 */
const TEAM_DELETION_CLAIM_MS = 15_000;
const TEAM_DELETION_WAIT_MS = 2_000;

type TenancyCollection = 'orgs' | 'teams' | 'team_api_keys' | 'management_keys' | 'system';

/**
 * The indexes of the tenancy collections (one place per collection, created by `ensureIndexes`). Listings
 * sort by `(created_at, _id)`, so `_id` ends their indexes and pages come off the index in order.
 */
export const TENANCY_INDEXES: Record<TenancyCollection, IndexSpec[]> = {
  orgs: [{ key: { 'management_keys.key_hash': 1 } }],
  teams: [{ key: { org_id: 1, created_at: 1, _id: 1 } }],
  team_api_keys: [
    { key: { key_hash: 1 }, unique: true },
    { key: { org_id: 1, created_at: 1, _id: 1 } },
    { key: { org_id: 1, team_id: 1, created_at: 1, _id: 1 } },
  ],
  // Retired: its keys moved into their orgs' documents (start-up migration), and it is dropped.
  management_keys: [],
  system: [],
};

/** Every query TenancyRepository issues (test/indexes.test.ts checks each is served by TENANCY_INDEXES). */
export const TENANCY_QUERY_SHAPES: Record<TenancyCollection, QueryShape[]> = {
  orgs: [
    { name: 'org by id (find, rename; its management keys, each change conditional on their version)', filter: ['_id'], residual: ['management_keys_version'] },
    { name: 'management key by hash (authentication)', filter: ['management_keys.key_hash'] },
    { name: 'orgs still to move their management keys in (migration)', filter: [], residual: ['management_keys'] },
  ],
  teams: [
    {
      name: 'team by id (find, every change: its version, deletion mark or deletion claim in the filter, delete)',
      filter: ['_id'],
      residual: ['org_id', 'version', 'deletion_started_at', 'deletion_claim', 'deletion_claim_until'],
    },
    { name: "an org's teams", filter: ['org_id'], sort: ['created_at', '_id'] },
    // Read off the org's index with the `_id`s checked in its keys; an org has few teams.
    { name: "a team admin's teams", filter: ['org_id'], sort: ['created_at', '_id'], residual: ["_id in the key's teams"] },
  ],
  team_api_keys: [
    { name: 'key by hash (authentication)', filter: ['key_hash'] },
    { name: "an org's keys", filter: ['org_id'], sort: ['created_at', '_id'] },
    { name: "keys of some of an org's teams (list; revoke a deleted team's)", filter: ['org_id', 'team_id'], sort: ['created_at', '_id'] },
    { name: 'keys by id (find, delete)', filter: ['_id'], residual: ['org_id'] },
  ],
  management_keys: [{ name: 'every key of the retired collection (the one-time move into orgs)', filter: [] }],
  system: [{ name: 'bootstrap claim', filter: ['_id'] }],
};

/**
 * Orgs, teams, team API keys and management keys. Keys are stored only as SHA-256 hashes.
 *
 * Concurrency, with no lock (architecture rule 3):
 * - A team's own fields change by one write conditional on its `version` and on no DELETE having begun.
 * - What hangs off a team (its API keys, custom credentials, webhook endpoints, users) is inserted first and
 *   the team read second (`addToLiveTeam`, `teamAcceptsNewData`); a DELETE marks the team first and looks for
 *   what blocks it second, so of a racing pair one of them sees the other.
 * - A DELETE claims the team in one conditional write (`deletion_claim`, a lease), so one DELETE at a time
 *   decides; its later writes of the team document carry the claim in their filter.
 * - An org's management keys live in its document: every change is one write conditional on their version, so
 *   "the org keeps an org_admin key" and "the acting key is still an org admin" hold under racing requests.
 */
export class TenancyRepository {
  readonly orgs: Collection<StoredOrg>;
  readonly teams: Collection<StoredTeam>;
  private readonly teamApiKeys: Collection<TeamApiKeyDoc>;
  /** Who wants to know when this process deletes team API keys (the api's key cache). */
  private readonly revocationListeners = new Set<(keyHashes: string[]) => void>();
  private readonly system: Collection<{ _id: string; at: Date }>;

  /** The org's management keys, in the org's document. */
  private readonly managementKeys: ManagementKeyStore;
  /** A DELETE's claim on a team. */
  private readonly deletionClaim: Lease<StoredTeam>;

  constructor(db: Db) {
    this.orgs = db.collection('orgs');
    this.teams = db.collection('teams');
    this.deletionClaim = new Lease(this.teams, { token: 'deletion_claim', until: 'deletion_claim_until', ms: TEAM_DELETION_CLAIM_MS, released: 'null' });
    this.teamApiKeys = db.collection('team_api_keys');
    this.system = db.collection('system');
    this.managementKeys = new ManagementKeyStore(this.orgs, (orgId, teamIds) => this.listTeams(orgId, teamIds));
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.orgs, TENANCY_INDEXES.orgs);
    await createIndexes(this.teams, TENANCY_INDEXES.teams);
    await createIndexes(this.teamApiKeys, TENANCY_INDEXES.team_api_keys);
    await createIndexes(this.system, TENANCY_INDEXES.system);
  }

  // ---------------------------------------------------------------- orgs

  async createOrg(name: string, id: string = randomUUID()): Promise<OrgDoc> {
    const org = { _id: id, name, created_at: new Date() };
    await this.orgs.insertOne({ ...org, management_keys: [], management_keys_version: 0 });
    return org;
  }

  findOrg(orgId: string): Promise<OrgDoc | null> {
    return this.orgs.findOne({ _id: orgId }, { projection: { management_keys: 0, management_keys_version: 0 } });
  }

  /** One field set by one kind of request: concurrent renames end with one of the names, nothing to lock. */
  renameOrg(orgId: string, name: string) {
    return this.orgs.findOneAndUpdate(
      { _id: orgId },
      { $set: { name } },
      { returnDocument: 'after', projection: { management_keys: 0, management_keys_version: 0 } },
    );
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

  /** The org's team that still takes changes: null when the org has no such team; refuses one being deleted. */
  async findLiveTeam(orgId: string, teamId: string): Promise<TeamDoc | null> {
    const team = await this.findTeam(orgId, teamId);
    if (team?.deletion_started_at) throw new TeamDeletingError(teamId);
    return team;
  }

  /**
   * Adds something that hangs off a team (a key, credentials, a webhook endpoint): `insert` writes it, then the
   * team is read again; if a DELETE has marked it meanwhile, `takeBack` removes what was written and the request
   * is refused (409), so nothing is left in a deleted team (see `beginTeamDeletion`). Null when the org has no
   * such team.
   */
  async addToLiveTeam<T>(orgId: string, teamId: string, insert: (team: TeamDoc) => Promise<T>, takeBack: (added: T) => Promise<unknown>): Promise<T | null> {
    const team = await this.findLiveTeam(orgId, teamId);
    if (!team) return null;
    const added = await insert(team);
    if (!(await this.teamAcceptsNewData(teamId))) {
      await takeBack(added);
      throw new TeamDeletingError(teamId);
    }
    return added;
  }

  /**
   * Applies `changes` (fields not given keep their value; `feature_flags` are merged flag by flag); `check`
   * sees the merged team first and throws to refuse (rules that span fields, such as a logo for brand
   * information). `orgId` null: a team of any org (scripts). Null when there is no such team.
   *
   * One conditional write: the filter holds the version read and "not being deleted", so a change or a DELETE
   * that landed in between makes this one read the team again and decide again (rule 3).
   */
  async updateTeam(orgId: string | null, teamId: string, changes: TeamChanges, check: (merged: TeamDoc) => void = () => undefined): Promise<TeamDoc | null> {
    for (let attempt = 1; ; attempt++) {
      const team = await this.findTeamById(teamId);
      if (!team || (orgId !== null && team.org_id !== orgId)) return null;
      if (team.deletion_started_at) throw new TeamDeletingError(teamId);
      const { feature_flags: flags, ...fields } = changes;
      const version = (team.version ?? 0) + 1;
      const set = { ...fields, ...(flags ? { feature_flags: { ...team.feature_flags, ...flags } } : {}), updated_at: new Date(), version };
      const merged = { ...team, ...set };
      check(merged);
      const { matchedCount } = await this.teams.updateOne({ _id: teamId, version: team.version ?? null, deletion_started_at: null } as Filter<StoredTeam>, {
        $set: set,
      });
      if (matchedCount) return merged;
      if (attempt === 20) throw new ApiError(503, 'The team kept changing under this request; retry it.', { 'Retry-After': '1' });
    }
  }

  /** For scripts (dev seed): sets the given flags of a team of any org; throws if there is no such team. */
  async setFeatureFlags(teamId: string, flags: Partial<TeamFeatureFlags>): Promise<void> {
    if (!(await this.updateTeam(null, teamId, { feature_flags: flags }))) throw new Error(`setFeatureFlags: no team ${teamId}`);
  }

  /**
   * Step 1 of deleting a team. Claims the team for this DELETE and marks it, in one write that matches only
   * while no live claim holds it (none, or one that lapsed: a crashed DELETE's), then asks `blockers` what must go before the
   * team may (e.g. its users). Anything it returns refuses the deletion and the mark is removed again, in a write
   * conditional on this claim. A DELETE finding another's live claim waits briefly for it to end, then answers 503.
   * The claim (returned) goes into the filter of the deletion's last write (`deleteMarkedTeam`).
   *
   * Mark first, check second: writers of what hangs off a team insert first and read the mark second
   * (`addToLiveTeam`, `teamAcceptsNewData`), so of a racing pair either the check sees the new document (refused
   * here) or the writer sees the mark (and takes its document back); nothing is left behind in a deleted team.
   */
  async beginTeamDeletion(
    orgId: string,
    teamId: string,
    blockers: () => Promise<string[]>,
  ): Promise<{ team: TeamDoc; claim: string } | { blocked: string[] } | null> {
    const claim = randomUUID();
    const waitUntil = Date.now() + TEAM_DELETION_WAIT_MS;
    for (;;) {
      const team = await this.findTeam(orgId, teamId);
      if (!team) return null;
      const heldFor = team.deletion_claim && team.deletion_claim_until ? team.deletion_claim_until.getTime() - Date.now() : 0;
      if (heldFor > 0) {
        if (Date.now() > waitUntil) {
          const retryAfter = String(Math.ceil(heldFor / 1000));
          throw new ApiError(503, `Another DELETE of team ${teamId} is under way (or crashed: its claim lapses in ${retryAfter} s); retry it then.`, {
            'Retry-After': retryAfter,
          });
        }
        await sleep(50);
        continue;
      }
      const marked = { ...team, deletion_started_at: team.deletion_started_at ?? new Date() };
      // Another DELETE claimed it since the read: the next round sees its claim and waits for it.
      if (!(await this.deletionClaim.claim({ _id: teamId }, { token: claim, also: { $set: { deletion_started_at: marked.deletion_started_at } } }))) continue;
      const blocked = await blockers();
      if (!blocked.length) return { team: marked, claim };
      await this.deletionClaim.release({ _id: teamId }, claim, { also: { $set: { deletion_started_at: null } } });
      return { blocked };
    }
  }

  /**
   * Whether the team still takes new documents: false once a DELETE has marked it (or it is gone). Writers of
   * what hangs off a team call it after their insert and take the document back on false (see `beginTeamDeletion`).
   */
  async teamAcceptsNewData(teamId: string): Promise<boolean> {
    const team = await this.findTeamById(teamId);
    return team !== null && !team.deletion_started_at;
  }

  /**
   * Last step of deleting a team (everything hanging off it is gone by then), conditional on the DELETE's claim:
   * false when another DELETE took the team over (this one's claim lapsed), which then finishes it.
   */
  async deleteMarkedTeam(teamId: string, claim: string): Promise<boolean> {
    const { deletedCount } = await this.teams.deleteOne({ _id: teamId, ...this.deletionClaim.heldBy(claim) });
    return deletedCount === 1;
  }

  /**
   * Extends a DELETE's claim before each of its steps; false when another DELETE took the team over (this one's
   * claim lapsed while it stalled), which then finishes the deletion and this one stops.
   */
  async renewDeletionClaim(teamId: string, claim: string): Promise<boolean> {
    return this.deletionClaim.extend({ _id: teamId }, claim);
  }

  // ---------------------------------------------------------------- team API keys (stored only as SHA-256 hashes)

  /** A key is never left in a team being deleted (404 / 409, `addToLiveTeam`). */
  async createTeamApiKey(team: TeamDoc, label: string, id: string = randomUUID()): Promise<{ doc: TeamApiKeyDoc; value: string }> {
    const created = await this.addToLiveTeam(
      team.org_id,
      team._id,
      async (current) => {
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
        await this.teamApiKeys.insertOne(doc);
        return { doc, value: key.value };
      },
      ({ doc }) => this.revoke([doc]),
    );
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

  // ---------------------------------------------------------------- management keys (management-keys-store.ts)

  createManagementKey(orgId: string, label: string, role: ManagementRole, teamIds: string[], id: string = randomUUID()) {
    return this.managementKeys.createManagementKey(orgId, label, role, teamIds, id);
  }
  createBoundManagementKey(orgId: string, label: string, role: ManagementRole, teamIds: string[], id: string) {
    return this.managementKeys.createBoundManagementKey(orgId, label, role, teamIds, id);
  }
  listManagementKeys(orgId: string) {
    return this.managementKeys.listManagementKeys(orgId);
  }
  updateManagementKey(orgId: string, keyId: string, actorKeyId: string, changes: ManagementKeyChanges, check?: (merged: ManagementKeyDoc) => void) {
    return this.managementKeys.updateManagementKey(orgId, keyId, actorKeyId, changes, check);
  }
  deleteManagementKey(orgId: string, keyId: string, actorKeyId: string) {
    return this.managementKeys.deleteManagementKey(orgId, keyId, actorKeyId);
  }
  unbindTeam(orgId: string, teamId: string) {
    return this.managementKeys.unbindTeam(orgId, teamId);
  }
  verifyManagementKey(value: string) {
    return this.managementKeys.verifyManagementKey(value);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
