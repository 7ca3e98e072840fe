import { createHash, randomUUID } from 'node:crypto';
import { ApiError, badRequest } from './errors';
import { timeOrderedUuid } from './keys';
import type { IdempotencyKeyDoc, IdempotencyKeyRepository } from './idempotency-store';

/**
 * How long a request holds its claim on a key: a duplicate within it is a 409; after it, the request is taken to have
 * died and one duplicate (one conditional write) takes over and finishes its work under the same resource id.
 */
export const IDEMPOTENCY_LEASE_MS = 30_000;

export interface IdempotentOutcome {
  status: number;
  body: unknown;
  replayed: boolean;
}

/**
 * Runs `create(resourceId)` at most once per (team, route, X-Idempotency-Key): the same key later replays the stored
 * status and body; a concurrent duplicate gets a 409; a key whose request crashed is resumed after the lease with the
 * same resource id (so it cannot create a second resource). Validation failures and server errors are not stored (the
 * key stays usable), as the reference API does.
 */
export async function withIdempotencyKey(
  deps: { repos: { idempotencyKeys: IdempotencyKeyRepository } },
  teamId: string,
  route: string,
  key: string | undefined,
  requestBody: unknown,
  create: (resourceId: string) => Promise<{ status: number; body: unknown }>,
): Promise<IdempotentOutcome> {
  if (!key) return { ...(await create(timeOrderedUuid())), replayed: false };
  const repo = deps.repos.idempotencyKeys;
  const id = createHash('sha256').update(`${teamId}\u0000${route}\u0000${key}`).digest('hex');
  const requestSha = createHash('sha256').update(JSON.stringify(requestBody)).digest('hex');
  const claim = randomUUID();
  const now = new Date();
  const fresh: IdempotencyKeyDoc = {
    _id: id,
    team_id: teamId,
    route,
    request_sha256: requestSha,
    resource_id: timeOrderedUuid(),
    state: 'pending',
    claim,
    claimed_at: now,
    response_status: null,
    response_body: null,
    created_at: now,
    completed_at: null,
  };
  const claimed = await repo.claim(fresh);
  let resourceId = fresh.resource_id;
  if ('existing' in claimed) {
    const existing = claimed.existing;
    if (existing.request_sha256 !== requestSha) {
      throw badRequest(`X-Idempotency-Key '${key}' was already used with a different request body; use a new key for a new request.`);
    }
    if (existing.state === 'done') return { status: existing.response_status!, body: existing.response_body, replayed: true };
    const inProgress = () => new ApiError(409, `A request with X-Idempotency-Key '${key}' is still in progress; retry after it completes.`);
    if (Date.now() - existing.claimed_at.getTime() < IDEMPOTENCY_LEASE_MS) throw inProgress();
    // The first request died mid-way: one duplicate takes its claim over and finishes its work under its id.
    if (!(await repo.takeOver(id, existing.claim, claim))) throw inProgress();
    resourceId = existing.resource_id;
  }
  try {
    const outcome = await create(resourceId);
    await repo.complete(id, claim, outcome.status, outcome.body);
    return { ...outcome, replayed: false };
  } catch (err) {
    if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 422) {
      await repo.complete(id, claim, err.status, { detail: err.detail });
    } else {
      await repo.release(id, claim);
    }
    throw err;
  }
}
