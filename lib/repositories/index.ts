import type { Db } from 'mongodb';
import { ConnectionRepository } from './connections';
import { TenancyRepository } from './tenancy';
import { UserRepository } from './users';

export interface Repositories {
  tenancy: TenancyRepository;
  users: UserRepository;
  connections: ConnectionRepository;
}

export function createRepositories(db: Db): Repositories {
  return {
    tenancy: new TenancyRepository(db),
    users: new UserRepository(db),
    connections: new ConnectionRepository(db),
  };
}

/** Idempotent; run by api and worker at start-up. */
export async function ensureIndexes(repos: Repositories): Promise<void> {
  for (const repo of Object.values(repos)) await repo.ensureIndexes();
}

export { TenancyRepository, UserRepository, ConnectionRepository };
