import { createHash, randomUUID } from 'node:crypto';
import { ApiError, badRequest } from './errors';
import { timeOrderedUuid } from './keys';
import type { IdempotencyKeyDoc, IdempotencyKeyRepository } from './idempotency-store';

export { IDEMPOTENCY_LEASE_MS } from './idempotency-store';

export interface IdempotentOutcome {
  status: number;
  body: unknown;
  replayed: boolean;
}

/**
 * Runs `create(resourceId)` at most once per (team, route, X-Idempotency-Key): the same key later replays the stored
 * status and body; a concurrent duplicate gets a 409. The resource id is chosen and stored on the key before `create`
 * runs, and the key keeps it through any failure: a key whose request crashed is resumed after the lease, and one whose
 * request failed (a 5xx, maybe after its resource was stored) is resumed by the next retry at once, both under the same
 * resource id. `create` must therefore be repeatable under one id: a repeat answers the resource stored before (lab
 * orders: a unique `_id` insert), so a retry never makes a second resource. Only a validation failure (422) of a
 * request's first attempt gives the key back for a corrected request, as the reference API does: validation runs
 * before anything is stored.
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
  let resumed = false;
  if ('existing' in claimed) {
    const existing = claimed.existing;
    if (existing.request_sha256 !== requestSha) {
      throw badRequest(`X-Idempotency-Key '${key}' was already used with a different request body; use a new key for a new request.`);
    }
    if (existing.state === 'done') return { status: existing.response_status!, body: existing.response_body, replayed: true };
    const inProgress = () => new ApiError(409, `A request with X-Idempotency-Key '${key}' is still in progress; retry after it completes.`);
    // Its claim still live: in progress. Else the first request failed or died mid-way: one duplicate takes its claim
    // over (IDEMPOTENCY_LEASE_MS) and finishes its work under its id.
    if (!(await repo.takeOver(id, claim))) throw inProgress();
    resourceId = existing.resource_id;
    resumed = true;
  }
  try {
    const outcome = await create(resourceId);
    await repo.complete(id, claim, outcome.status, outcome.body);
    return { ...outcome, replayed: false };
  } catch (err) {
    if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 422) {
      await repo.complete(id, claim, err.status, { detail: err.detail });
    } else if (err instanceof ApiError && err.status === 422 && !resumed) {
      await repo.release(id, claim);
    } else {
      // The resource may be stored (the failure came after its insert, or an earlier attempt stored it): the key keeps
      // its id, and the retry resumes under it.
      await repo.letGo(id, claim);
    }
    throw err;
  }
}
