import { randomUUID } from 'node:crypto';
import type { Collection, Db } from 'mongodb';
import { isDuplicateKeyError } from '../errors';
import { createIndexes, type IndexSpec, type QueryShape } from './indexes';
import { hashKey, MANAGEMENT_KEY_PREFIX, mintKey, sameHash, teamKeyPrefix } from '../keys';

export interface OrgDoc {
  _id: string;
  name: string;
  created_at: Date;
}
export interface TeamDoc {
  _id: string;
  team_id: string;
  org_id: string;
  name: string;
  environment: string;
  region: string;
  created_at: Date;
  updated_at: Date;
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
  orgs: [{ name: 'org by id', filter: ['_id'] }],
  teams: [
    { name: 'team by id (find, rename)', filter: ['_id'], residual: ['org_id'] },
    { name: "an org's teams", filter: ['org_id'], sort: ['created_at', '_id'] },
    // Read off the org's index with the `_id`s checked in its keys; an org has few teams.
    { name: "a team admin's teams", filter: ['org_id'], sort: ['created_at', '_id'], residual: ['_id in the key\'s teams'] },
  ],
  team_api_keys: [
    { name: 'key by hash (authentication)', filter: ['key_hash'] },
    { name: "an org's keys", filter: ['org_id'], sort: ['created_at', '_id'] },
    { name: "keys of some of an org's teams", filter: ['org_id', 'team_id'], sort: ['created_at', '_id'] },
    { name: 'keys by id (find, delete)', filter: ['_id'], residual: ['org_id'] },
  ],
  management_keys: [
    { name: 'key by hash (authentication)', filter: ['key_hash'] },
    { name: "an org's keys", filter: ['org_id'], sort: ['created_at', '_id'] },
    { name: 'key by id (delete)', filter: ['_id'], residual: ['org_id'] },
  ],
  system: [{ name: 'bootstrap claim', filter: ['_id'] }],
};

/** Orgs, teams, team API keys and management keys. Keys are stored only as SHA-256 hashes. */
export class TenancyRepository {
  readonly orgs: Collection<OrgDoc>;
  readonly teams: Collection<TeamDoc>;
  readonly teamApiKeys: Collection<TeamApiKeyDoc>;
  readonly managementKeys: Collection<ManagementKeyDoc>;
  private readonly system: Collection<{ _id: string; at: Date }>;

  constructor(db: Db) {
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

  async createOrg(name: string, id: string = randomUUID()): Promise<OrgDoc> {
    const org = { _id: id, name, created_at: new Date() };
    await this.orgs.insertOne(org);
    return org;
  }

  findOrg(orgId: string) {
    return this.orgs.findOne({ _id: orgId });
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

  async createTeam(orgId: string, name: string, environment: string, region: string): Promise<TeamDoc> {
    const id = randomUUID();
    const now = new Date();
    const team = { _id: id, team_id: id, org_id: orgId, name, environment, region, created_at: now, updated_at: now };
    await this.teams.insertOne(team);
    return team;
  }

  findTeam(orgId: string, teamId: string) {
    return this.teams.findOne({ _id: teamId, org_id: orgId });
  }

  /** For documents that print the ordering team's name (the caller has checked the team already). */
  findTeamById(teamId: string) {
    return this.teams.findOne({ _id: teamId });
  }

  listTeams(orgId: string, onlyTeamIds?: string[]) {
    const filter = onlyTeamIds ? { org_id: orgId, _id: { $in: onlyTeamIds } } : { org_id: orgId };
    return this.teams.find(filter).sort({ created_at: 1, _id: 1 }).toArray();
  }

  async renameTeam(orgId: string, teamId: string, name: string) {
    return this.teams.findOneAndUpdate(
      { _id: teamId, org_id: orgId },
      { $set: { name, updated_at: new Date() } },
      { returnDocument: 'after' },
    );
  }

  async createTeamApiKey(team: TeamDoc, label: string): Promise<{ doc: TeamApiKeyDoc; value: string }> {
    const key = mintKey(teamKeyPrefix(team.environment, team.region));
    const doc: TeamApiKeyDoc = {
      _id: randomUUID(),
      team_id: team._id,
      org_id: team.org_id,
      label,
      key_hash: key.hash,
      prefix: key.display,
      environment: team.environment,
      region: team.region,
      created_at: new Date(),
    };
    await this.teamApiKeys.insertOne(doc);
    return { doc, value: key.value };
  }

  listTeamApiKeys(orgId: string, teamIds?: string[]) {
    const filter = teamIds ? { org_id: orgId, team_id: { $in: teamIds } } : { org_id: orgId };
    return this.teamApiKeys.find(filter).sort({ created_at: 1, _id: 1 }).toArray();
  }

  findTeamApiKeys(orgId: string, ids: string[]) {
    return this.teamApiKeys.find({ org_id: orgId, _id: { $in: ids } }).toArray();
  }

  async deleteTeamApiKeys(orgId: string, ids: string[]): Promise<number> {
    const res = await this.teamApiKeys.deleteMany({ org_id: orgId, _id: { $in: ids } });
    return res.deletedCount;
  }

  async verifyTeamApiKey(value: string): Promise<TeamApiKeyDoc | null> {
    const hash = hashKey(value);
    const doc = await this.teamApiKeys.findOne({ key_hash: hash });
    return doc && sameHash(doc.key_hash, hash) ? doc : null;
  }

  async createManagementKey(
    orgId: string,
    label: string,
    role: ManagementRole,
    teamIds: string[],
  ): Promise<{ doc: ManagementKeyDoc; value: string }> {
    const key = mintKey(MANAGEMENT_KEY_PREFIX);
    const doc: ManagementKeyDoc = {
      _id: randomUUID(),
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

  listManagementKeys(orgId: string) {
    return this.managementKeys.find({ org_id: orgId }).sort({ created_at: 1, _id: 1 }).toArray();
  }

  async deleteManagementKey(orgId: string, keyId: string): Promise<boolean> {
    const res = await this.managementKeys.deleteOne({ org_id: orgId, _id: keyId });
    return res.deletedCount === 1;
  }

  async verifyManagementKey(value: string): Promise<ManagementKeyDoc | null> {
    const hash = hashKey(value);
    const doc = await this.managementKeys.findOne({ key_hash: hash });
    return doc && sameHash(doc.key_hash, hash) ? doc : null;
  }
}
