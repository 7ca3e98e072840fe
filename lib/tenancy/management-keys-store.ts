import { randomUUID } from 'node:crypto';
import type { Collection, Filter } from 'mongodb';
import { ApiError } from '../platform/errors';
import { hashKey, MANAGEMENT_KEY_PREFIX, mintKey, sameHash } from '../platform/keys';
import {
  MAX_MANAGEMENT_KEYS_PER_ORG,
  type KeyChangeOutcome,
  type KeyChangeRefusal,
  type ManagementKeyChanges,
  type ManagementKeyDoc,
  type ManagementRole,
  type StoredManagementKey,
  type StoredOrg,
  type TeamDoc,
} from './model';

/**
 * An org's management keys, kept in the org's own document (`management_keys`, at most
 * MAX_MANAGEMENT_KEYS_PER_ORG): every change is one write conditional on `management_keys_version`, so "the org
 * keeps an org_admin key" and "the acting key is still an org admin" are decided on one document, with no lock.
 * Part of the tenancy store (TenancyRepository holds one and answers for it).
 */
export class ManagementKeyStore {
  constructor(
    private readonly orgs: Collection<StoredOrg>,
    /** The org's teams among `teamIds` (the tenancy store's read). */
    private readonly teamsOf: (orgId: string, teamIds: string[]) => Promise<TeamDoc[]>,
  ) {}

  /** The org's keys and their version (the precondition of the next change); null when there is no such org. */
  private async keyRing(orgId: string): Promise<{ keys: ManagementKeyDoc[]; version: number | null } | null> {
    const org = await this.orgs.findOne({ _id: orgId }, { projection: { management_keys: 1, management_keys_version: 1 } });
    if (!org) return null;
    return { keys: (org.management_keys ?? []).map((k) => ({ ...k, org_id: orgId })), version: org.management_keys_version ?? null };
  }

  /**
   * Changes an org's keys in one write conditional on the version read: `decide` sees the keys as they are and
   * returns them as they should be (or a refusal, or null for "nothing to write"); a change that landed first
   * makes it decide again on the keys as they are then.
   */
  private async changeKeyRing<T>(
    orgId: string,
    decide: (keys: ManagementKeyDoc[]) => Promise<{ keys: ManagementKeyDoc[]; result: T } | { refused: KeyChangeRefusal }>,
  ): Promise<T | { refused: KeyChangeRefusal }> {
    for (let attempt = 1; ; attempt++) {
      const ring = await this.keyRing(orgId);
      if (!ring) return { refused: 'not_found' };
      const decision = await decide(ring.keys);
      if ('refused' in decision) return decision;
      if (decision.keys.length > MAX_MANAGEMENT_KEYS_PER_ORG && decision.keys.length > ring.keys.length) return { refused: 'too_many_keys' };
      const stored: StoredManagementKey[] = decision.keys.map(({ org_id: _org, ...key }) => key);
      const { matchedCount } = await this.orgs.updateOne({ _id: orgId, management_keys_version: ring.version } as Filter<StoredOrg>, {
        $set: { management_keys: stored, management_keys_version: (ring.version ?? 0) + 1 },
      });
      if (matchedCount) return decision.result;
      if (attempt === 20) throw new ApiError(503, "The organisation's keys kept changing under this request; retry it.", { 'Retry-After': '1' });
    }
  }

  /** Mints a key without checks (bootstrap, tests); the API goes through `createBoundManagementKey`. */
  async createManagementKey(
    orgId: string,
    label: string,
    role: ManagementRole,
    teamIds: string[],
    id: string = randomUUID(),
  ): Promise<{ doc: ManagementKeyDoc; value: string }> {
    const minted = newManagementKey(orgId, label, role, teamIds, id);
    const added = await this.changeKeyRing(orgId, async (keys) => ({ keys: [...keys, minted.key], result: minted }));
    if ('refused' in added) throw new Error(`createManagementKey: ${JSON.stringify(added.refused)} (org ${orgId})`);
    return { doc: added.key, value: added.value };
  }

  /**
   * The ones among `teamIds` that are not live teams of the org (missing or being deleted). Read after the keys'
   * version: a team deletion marks its team before it unbinds it (`unbindTeam`, which always moves the version),
   * so a change that saw the team live either lands before the unbinding (which removes it) or not at all.
   */
  private async unknownTeams(orgId: string, teamIds: string[]): Promise<string[]> {
    if (!teamIds.length) return [];
    const live = (await this.teamsOf(orgId, teamIds)).filter((t) => !t.deletion_started_at).map((t) => t._id);
    return teamIds.filter((id) => !live.includes(id));
  }

  /** Mints a key whose bindings name live teams of the org (no key ends up bound to a deleted team). */
  createBoundManagementKey(
    orgId: string,
    label: string,
    role: ManagementRole,
    teamIds: string[],
    id: string,
  ): Promise<{ key: ManagementKeyDoc; value: string } | { refused: KeyChangeRefusal }> {
    const minted = newManagementKey(orgId, label, role, teamIds, id);
    return this.changeKeyRing<{ key: ManagementKeyDoc; value: string }>(orgId, async (keys) => {
      const unknown = await this.unknownTeams(orgId, minted.key.team_ids);
      if (unknown.length) return { refused: { unknown_team_ids: unknown } };
      return { keys: [...keys, minted.key], result: minted };
    });
  }

  async listManagementKeys(orgId: string): Promise<ManagementKeyDoc[]> {
    return (await this.keyRing(orgId))?.keys ?? [];
  }

  /**
   * A change of one key, with the refusals every change shares: the target exists, the acting key is still an
   * org_admin (a racing request may have deleted or demoted it), and the org keeps an org_admin key when `after`
   * (the target after the change, null for deleted) is not one. All decided on the keys the write is conditional on.
   */
  private changeManagementKey(
    orgId: string,
    keyId: string,
    actorKeyId: string,
    after: (target: ManagementKeyDoc) => ManagementKeyDoc | null,
  ): Promise<KeyChangeOutcome> {
    return this.changeKeyRing<KeyChangeOutcome>(orgId, async (keys) => {
      const target = keys.find((k) => k._id === keyId);
      if (!target) return { refused: 'not_found' };
      if (!keys.some((k) => k._id === actorKeyId && k.role === 'org_admin')) return { refused: 'actor_not_org_admin' };
      const changed = after(target);
      const next = changed ? keys.map((k) => (k._id === keyId ? changed : k)) : keys.filter((k) => k._id !== keyId);
      if (!next.some((k) => k.role === 'org_admin')) return { refused: 'last_org_admin' };
      if (changed) {
        const unknown = await this.unknownTeams(
          orgId,
          changed.team_ids.filter((id) => !target.team_ids.includes(id)),
        );
        if (unknown.length) return { refused: { unknown_team_ids: unknown } };
      }
      return { keys: next, result: { key: changed ?? target } };
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
    return this.changeManagementKey(orgId, keyId, actorKeyId, (target) => {
      const merged = { ...target, ...set };
      check(merged);
      return merged;
    });
  }

  deleteManagementKey(orgId: string, keyId: string, actorKeyId: string): Promise<KeyChangeOutcome> {
    return this.changeManagementKey(orgId, keyId, actorKeyId, () => null);
  }

  /**
   * Removes a deleted team from the bindings of the org's keys (a key left with none can do nothing). Always
   * writes, moving the version even when no key names the team, so a key change that read the team as live
   * before its DELETE marked it cannot land afterwards (see `unknownTeams`).
   */
  async unbindTeam(orgId: string, teamId: string): Promise<void> {
    await this.changeKeyRing(orgId, async (keys) => ({
      keys: keys.map((k) => (k.team_ids.includes(teamId) ? { ...k, team_ids: k.team_ids.filter((id) => id !== teamId) } : k)),
      result: undefined,
    }));
  }

  async verifyManagementKey(value: string): Promise<ManagementKeyDoc | null> {
    const hash = hashKey(value);
    const org = await this.orgs.findOne({ 'management_keys.key_hash': hash }, { projection: { management_keys: 1 } });
    const key = org?.management_keys?.find((k) => sameHash(k.key_hash, hash));
    return org && key ? { ...key, org_id: org._id } : null;
  }
}

/** A new management key (an org_admin key holds no bindings) and its value, shown once. */
function newManagementKey(orgId: string, label: string, role: ManagementRole, teamIds: string[], id: string): { key: ManagementKeyDoc; value: string } {
  const minted = mintKey(MANAGEMENT_KEY_PREFIX);
  const key: ManagementKeyDoc = {
    _id: id,
    org_id: orgId,
    label,
    role,
    team_ids: role === 'org_admin' ? [] : teamIds,
    key_hash: minted.hash,
    prefix: minted.display,
    created_at: new Date(),
  };
  return { key, value: minted.value };
}
