import { notFound } from '../platform/errors';
import { isoWithOffset } from '../platform/time';
import type { Repositories } from '../repositories';
import type { User } from '../../schemas/user';
import type { UserDoc } from './store';

/** A user as the API shows it, and the lookups of a user that every user-scoped endpoint shares. */

export function toUser(doc: UserDoc): User {
  return {
    user_id: doc._id,
    team_id: doc.team_id,
    client_user_id: doc.client_user_id,
    created_on: isoWithOffset(doc.created_on),
    connected_sources: (doc.connected_sources ?? []).map((c) => ({
      created_on: isoWithOffset(c.created_on),
      source: c.source,
      provider: c.source,
    })),
    fallback_time_zone: doc.fallback_time_zone ? { ...doc.fallback_time_zone, updated_at: isoWithOffset(doc.fallback_time_zone.updated_at) } : null,
    fallback_birth_date: doc.fallback_birth_date ? { ...doc.fallback_birth_date, updated_at: isoWithOffset(doc.fallback_birth_date.updated_at) } : null,
    ingestion_start: doc.ingestion_start ?? null,
    ingestion_end: doc.ingestion_end ?? null,
  };
}

export function readableUser(doc: UserDoc | null, messageIfScheduled: string): UserDoc {
  if (!doc || doc.status === 'erased') throw notFound('User not found.');
  if (doc.status === 'pending_deletion') throw notFound(messageIfScheduled);
  return doc;
}

/** The caller's user if it is active (404 otherwise), for the endpoints that act on a user's data. */
export async function activeUser(deps: { repos: Repositories }, teamId: string, userId: string): Promise<UserDoc> {
  return readableUser(await deps.repos.users.find(teamId, userId), 'The user has been scheduled for deletion.');
}
