import { randomUUID } from 'node:crypto';
import type { Collection } from 'mongodb';
import { ApiError } from '../platform/errors';
import { hashKey, mintKey, sameHash, teamKeyPrefix } from '../platform/keys';
import type { TeamApiKeyDoc, TeamDoc } from './model';

/**
 * Team API keys (`team_api_keys`), stored only as SHA-256 hashes. Part of the tenancy store: TenancyRepository
 * holds one and answers for it, and gives it `addToLiveTeam` (a key is never left in a team being deleted).
 */
export class TeamApiKeyStore {
  private readonly revocationListeners = new Set<(keyHashes: string[]) => void>();

  constructor(
    readonly teamApiKeys: Collection<TeamApiKeyDoc>,
    private readonly addToLiveTeam: <T>(orgId: string, teamId: string, insert: (team: TeamDoc) => Promise<T>, takeBack: (added: T) => Promise<unknown>) => Promise<T | null>,
  ) {}

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
}
