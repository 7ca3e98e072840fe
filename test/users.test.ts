import { indexBoundFields, indexesUsed, sortsInMemory } from './support/explain';
import { userDeletionStateQuery } from '../workflows/user-deletion';
import { ClientUserIdConflict, PaginatedUsers, User } from '../schemas/user';
import { createTenant, eventually, expectSchema, teamClient, uniqueId, startTestApp, type HttpClient, type Tenant, type TestApp } from './support/harness';

let app: TestApp;
let tenant: Tenant;
let api: HttpClient;

beforeAll(async () => {
  app = await startTestApp();
  tenant = await createTenant(app.deps);
  api = teamClient(app, tenant);
});
afterAll(() => app.close());

const createUser = async (extra: Record<string, unknown> = {}) => {
  const res = await api.post('/v2/user/', { client_user_id: uniqueId(), ...extra });
  expect(res.status).toBe(200);
  return res.body as User;
};

describe('creating a user', () => {
  it('returns the full user object of the spec', async () => {
    const clientUserId = uniqueId();
    const res = await api.post('/v2/user/', {
      client_user_id: clientUserId,
      fallback_time_zone: 'Europe/Berlin',
      fallback_birth_date: '1990-02-28',
      ingestion_start: '2024-01-01',
      ingestion_end: '2024-12-31',
    });
    expect(res.status).toBe(200);
    expectSchema(User, res.body);
    expect(res.body).toMatchObject({
      team_id: tenant.teamId,
      client_user_id: clientUserId,
      connected_sources: [],
      fallback_time_zone: { id: 'Europe/Berlin', source_slug: 'manual' },
      fallback_birth_date: { value: '1990-02-28', source_slug: 'manual' },
      ingestion_start: '2024-01-01',
      ingestion_end: '2024-12-31',
    });
    expect(res.body.created_on).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$/);
    expect(res.body.user_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('works without the trailing slash, and canonicalises the time zone', async () => {
    const res = await api.post('/v2/user', { client_user_id: uniqueId(), fallback_time_zone: 'america/new_york' });
    expect(res.status).toBe(200);
    expect(res.body.fallback_time_zone.id).toBe('America/New_York');
    expect(res.body.fallback_birth_date).toBeNull();
  });

  it('ignores unknown body fields (and stores none of them)', async () => {
    const res = await api.post('/v2/user/', { client_user_id: uniqueId(), favourite_colour: 'blue' });
    expect(res.status).toBe(200);
    const stored = await app.deps.repos.users.find(tenant.teamId, res.body.user_id);
    expect(stored).not.toHaveProperty('favourite_colour');
  });

  it.each([
    ['europe/berlin', 'Europe/Berlin'],
    ['Asia/Kolkata', 'Asia/Kolkata'],
    ['Europe/Kyiv', 'Europe/Kyiv'],
    ['UTC', 'UTC'],
  ])('keeps the IANA id the caller meant: %s → %s', async (given, stored) => {
    const res = await api.post('/v2/user/', { client_user_id: uniqueId(), fallback_time_zone: given });
    expect(res.status).toBe(200);
    expect(res.body.fallback_time_zone.id).toBe(stored);
  });

  it.each([
    [{ client_user_id: undefined }, 'client_user_id', 'missing'],
    [{ client_user_id: '' }, 'client_user_id', 'string_too_short'],
    [{ client_user_id: 42 }, 'client_user_id', 'string_type'],
    [{ client_user_id: 'x'.repeat(256) }, 'client_user_id', 'string_too_long'],
    [{ client_user_id: 'jane.doe@example.com' }, 'client_user_id', 'value_error.personal_data'],
    [{ client_user_id: 'user:jane@example.org' }, 'client_user_id', 'value_error.personal_data'],
    [{ client_user_id: '+49 151 23456789' }, 'client_user_id', 'value_error.personal_data'],
    [{ client_user_id: '(555) 123-4567' }, 'client_user_id', 'value_error.personal_data'],
    [{ fallback_time_zone: 'Mars/Olympus_Mons' }, 'fallback_time_zone', 'value_error.time_zone'],
    [{ fallback_time_zone: '+01:00' }, 'fallback_time_zone', 'value_error.time_zone'],
    [{ fallback_birth_date: '1990-02-30' }, 'fallback_birth_date', 'date_parsing'],
    [{ fallback_birth_date: '01/02/1990' }, 'fallback_birth_date', 'date_parsing'],
    [{ fallback_birth_date: '2999-01-01' }, 'fallback_birth_date', 'value_error.date_in_future'],
    [{ ingestion_start: '2024-13-01' }, 'ingestion_start', 'date_parsing'],
    [{ ingestion_end: 'tomorrow' }, 'ingestion_end', 'date_parsing'],
    [{ ingestion_start: '2024-06-02', ingestion_end: '2024-06-01' }, 'ingestion_end', 'value_error.ingestion_bounds'],
  ])('rejects %j with a 422 located at body.%s', async (fields, field, type) => {
    const body = 'client_user_id' in fields ? fields : { client_user_id: uniqueId(), ...fields };
    const res = await api.post('/v2/user/', body);
    expect(res.status).toBe(422);
    expect(res.body.detail).toEqual(expect.arrayContaining([expect.objectContaining({ loc: ['body', field], type })]));
    for (const item of res.body.detail) expect(typeof item.msg).toBe('string');
  });

  it('explains why personal data is refused', async () => {
    const res = await api.post('/v2/user/', { client_user_id: 'jane.doe@example.com' });
    expect(res.body.detail[0].msg).toMatch(/e-mail address.*Personal data is not allowed/);
  });

  it('accepts plain numeric and opaque ids that only look like numbers', async () => {
    for (const id of [`${Date.now()}`, `2024-${uniqueId()}`]) {
      expect((await api.post('/v2/user/', { client_user_id: id })).status).toBe(200);
    }
  });

  it('answers a repeated client_user_id with the conflict body naming the existing user', async () => {
    const user = await createUser();
    const res = await api.post('/v2/user/', { client_user_id: user.client_user_id });
    expect(res.status).toBe(400);
    expectSchema(ClientUserIdConflict, res.body);
    expect(res.body.detail).toEqual({
      error_type: 'INVALID_REQUEST',
      error_message: expect.any(String),
      user_id: user.user_id,
      created_on: user.created_on,
    });
  });

  it('creates exactly one user when 50 creates of the same client_user_id race; the others get the conflict naming it, never a 500', async () => {
    // On PostgreSQL + DocumentDB the racing inserts deadlock in the unique index (40P01): the store retries them.
    const clientUserId = uniqueId();
    const results = await Promise.all(Array.from({ length: 50 }, () => api.post('/v2/user/', { client_user_id: clientUserId })));
    const created = results.filter((r) => r.status === 200);
    const conflicts = results.filter((r) => r.status === 400);
    expect(results.map((r) => r.status).filter((s) => s !== 200 && s !== 400)).toEqual([]);
    expect(created).toHaveLength(1);
    expect(conflicts).toHaveLength(49);
    for (const c of conflicts) expect(c.body.detail.user_id).toBe(created[0].body.user_id);
    const users = await app.deps.repos.users.users.countDocuments({ team_id: tenant.teamId, client_user_id: clientUserId });
    expect(users).toBe(1);
  });
});

describe('reading users', () => {
  it('gets a user by id and by client_user_id', async () => {
    const user = await createUser();
    const byId = await api.get(`/v2/user/${user.user_id}`);
    expect(byId.status).toBe(200);
    expectSchema(User, byId.body);
    expect(byId.body).toEqual(user);
    const resolved = await api.get(`/v2/user/resolve/${encodeURIComponent(user.client_user_id)}`);
    expect(resolved.status).toBe(200);
    expect(resolved.body).toEqual(user);
  });

  it('answers 422 for a malformed id and 404 for an unknown one', async () => {
    const bad = await api.get('/v2/user/not-a-uuid');
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0]).toMatchObject({ loc: ['path', 'user_id'], type: 'uuid_parsing' });
    expect((await api.get('/v2/user/urn:uuid:00000000-0000-4000-8000-000000000000')).status).toBe(422);
    expect((await api.patch('/v2/user/00000000-0000-4000-8000-000000000000', { fallback_time_zone: 'UTC' })).status).toBe(404);
    expect((await api.del('/v2/user/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    const unknown = await api.get('/v2/user/00000000-0000-4000-8000-000000000000');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ detail: 'User not found.' });
    expect((await api.get('/v2/user/resolve/nobody-has-this-id')).status).toBe(404);
  });

  it('lists users with offset/limit pagination', async () => {
    const own = await startTestApp();
    try {
      const t = await createTenant(own.deps);
      const c = teamClient(own, t);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await c.post('/v2/user/', { client_user_id: uniqueId() })).body.user_id);
      const page = await c.get('/v2/user/?offset=1&limit=2');
      expect(page.status).toBe(200);
      expectSchema(PaginatedUsers, page.body);
      expect(page.body).toMatchObject({ total: 5, offset: 1, limit: 2 });
      expect(page.body.users.map((u: User) => u.user_id)).toEqual(ids.slice(1, 3));
      const defaults = await c.get('/v2/user');
      expect(defaults.body).toMatchObject({ total: 5, offset: 0, limit: 100, next_cursor: null });
      // By cursor: the same users in the same order, the first page's count kept, offsets that add up.
      const walked: string[] = [];
      const offsets: number[] = [];
      let res = await c.get('/v2/user/?limit=2');
      for (;;) {
        expect(res.status).toBe(200);
        expectSchema(PaginatedUsers, res.body);
        expect(res.body.total).toBe(5);
        offsets.push(res.body.offset);
        walked.push(...res.body.users.map((u: User) => u.user_id));
        if (!res.body.next_cursor) break;
        res = await c.get(`/v2/user/?limit=2&next_cursor=${res.body.next_cursor}`);
      }
      expect(walked).toEqual(ids);
      expect(offsets).toEqual([0, 2, 4]);
      // Ids are time-ordered UUIDs (v7): id order is creation order, which the listing follows.
      expect([...ids].sort()).toEqual(ids);
      expect((await c.get('/v2/user/?next_cursor=not-a-cursor')).body.detail[0]).toMatchObject({ loc: ['query', 'next_cursor'], type: 'value_error.cursor' });
      // The store chooses the declared index for the page the product sends (no hint), bounded on team, status and
      // `_id`; the `_id` walk taken for dense lists returns it unsorted.
      const plan = await own.deps.repos.users.listActiveQuery(t.teamId, { after: ids[1], offset: 0, limit: 2 }).explain('queryPlanner');
      expect(indexesUsed(plan)).toEqual(['team_id_1_status_1__id_1']);
      expect(indexBoundFields(plan)).toEqual(expect.arrayContaining(['_id', 'status', 'team_id']));
      const walk = await own.deps.repos.users.listActiveQuery(t.teamId, { after: ids[1], offset: 0, limit: 2 }, true).explain('queryPlanner');
      expect({ used: indexesUsed(walk), sorted: sortsInMemory(walk) }).toEqual({ used: ['_id_'], sorted: false });
      for (const query of ['limit=501', 'limit=0', 'offset=-1', 'limit=abc']) {
        const res = await c.get(`/v2/user/?${query}`);
        expect(res.status).toBe(422);
        expect(res.body.detail[0].loc[0]).toBe('query');
      }
    } finally {
      await own.close();
    }
  });
});

describe('updating a user', () => {
  it('patches fields and answers 204', async () => {
    const user = await createUser({ fallback_time_zone: 'UTC' });
    const res = await api.patch(`/v2/user/${user.user_id}`, {
      fallback_time_zone: 'Asia/Tokyo',
      fallback_birth_date: '1985-05-05',
      ingestion_start: '2023-01-01',
    });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    const after = (await api.get(`/v2/user/${user.user_id}`)).body;
    expect(after.fallback_time_zone.id).toBe('Asia/Tokyo');
    expect(after.fallback_birth_date.value).toBe('1985-05-05');
    expect(after.ingestion_start).toBe('2023-01-01');
    expect((await api.patch(`/v2/user/${user.user_id}`, { fallback_time_zone: null })).status).toBe(204);
    expect((await api.get(`/v2/user/${user.user_id}`)).body.fallback_time_zone).toBeNull();
  });

  it('refuses an empty patch with 400 "Nothing to patch"', async () => {
    const user = await createUser();
    const res = await api.patch(`/v2/user/${user.user_id}`, {});
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: 'Nothing to patch' });
  });

  it('checks ingestion bounds against the stored values', async () => {
    const user = await createUser({ ingestion_start: '2024-05-01' });
    const res = await api.patch(`/v2/user/${user.user_id}`, { ingestion_end: '2024-04-30' });
    expect(res.status).toBe(422);
    expect(res.body.detail[0].loc).toEqual(['body', 'ingestion_end']);
  });

  it('renames client_user_id, with the conflict body if the new id is taken', async () => {
    const a = await createUser();
    const b = await createUser();
    const taken = await api.patch(`/v2/user/${a.user_id}`, { client_user_id: b.client_user_id });
    expect(taken.status).toBe(400);
    expect(taken.body.detail).toMatchObject({ error_type: 'INVALID_REQUEST', user_id: b.user_id });
    const fresh = uniqueId();
    expect((await api.patch(`/v2/user/${a.user_id}`, { client_user_id: fresh })).status).toBe(204);
    expect((await api.get(`/v2/user/resolve/${fresh}`)).body.user_id).toBe(a.user_id);
    // The old id is free again.
    expect((await api.post('/v2/user/', { client_user_id: a.client_user_id })).status).toBe(200);
  });

  it('validates patch fields like creation does', async () => {
    const user = await createUser();
    const res = await api.patch(`/v2/user/${user.user_id}`, { client_user_id: 'someone@example.com', fallback_birth_date: 'x' });
    expect(res.status).toBe(422);
    expect(res.body.detail.map((d: { loc: string[] }) => d.loc[1]).sort()).toEqual(['fallback_birth_date']);
    const pd = await api.patch(`/v2/user/${user.user_id}`, { client_user_id: 'someone@example.com' });
    expect(pd.body.detail[0].type).toBe('value_error.personal_data');
  });
});

describe('connected_sources', () => {
  it('two rewrites racing each other leave the newer list, not a stale one (a version in the write, no lock)', async () => {
    const user = await createUser();
    const users = app.deps.repos.users;
    const source = (slug: string) => ({ created_on: new Date(), source: { name: slug, slug, logo: `https://example.com/${slug}.png` } });
    let truth = [source('oura')];
    // The slow rewrite computes its list from the state when it starts, and writes after the fast one has.
    const slow = users.setConnectedSources(tenant.teamId, user.user_id, async () => {
      const snapshot = truth;
      await new Promise((r) => setTimeout(r, 300));
      return snapshot;
    });
    await new Promise((r) => setTimeout(r, 50));
    truth = [source('oura'), source('fitbit')];
    await users.setConnectedSources(tenant.teamId, user.user_id, async () => truth);
    await slow;
    const stored = await app.inspect.collection('users').findOne({ _id: user.user_id as never });
    expect(stored?.connected_sources.map((s: { source: { slug: string } }) => s.source.slug)).toEqual(['oura', 'fitbit']);
    expect(stored?.connected_sources_version).toBe(2); // the fast rewrite, then the slow one's second try (its first lost)
  });
});

describe('deleting a user', () => {
  it('hides the user at once, deregisters its connections, and undo restores it', async () => {
    const user = await createUser();
    await app.deps.repos.connections.connections.insertOne({
      _id: uniqueId('conn'),
      team_id: tenant.teamId,
      user_id: user.user_id,
      provider: 'oura',
      connection_key: 'oura',
      adapter: 'demo',
      status: 'connected',
      created_on: new Date(),
      updated_at: new Date(),
    });

    const del = await api.del(`/v2/user/${user.user_id}`, { 'x-request-id': `del-${user.user_id}` });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ success: true });
    const started = await app.deps.temporal.client.workflow.getHandle(`user-deletion:${user.user_id}`).describe();
    expect(started.memo).toMatchObject({ request_id: `del-${user.user_id}`, team_id: tenant.teamId });

    const hidden = await api.get(`/v2/user/${user.user_id}`);
    expect(hidden.status).toBe(404);
    expect(hidden.body.detail).toMatch(/scheduled this user for deletion/);
    expect((await api.get(`/v2/user/resolve/${user.client_user_id}`)).body.detail).toMatch(/scheduled this user for deletion/);
    expect((await api.patch(`/v2/user/${user.user_id}`, { fallback_time_zone: 'UTC' })).body.detail).toMatch(/scheduled for deletion/);
    expect((await api.del(`/v2/user/${user.user_id}`)).status).toBe(404);
    const listed = await api.get('/v2/user/?limit=500');
    expect(listed.body.users.map((u: User) => u.user_id)).not.toContain(user.user_id);

    await eventually(
      async () => {
        const conns = await app.deps.repos.connections.listForUser(tenant.teamId, user.user_id);
        return conns.length === 1 && conns[0].status === 'deregistered';
      },
      30000,
      'connections deregistered',
    );

    const handle = app.deps.temporal.client.workflow.getHandle(`user-deletion:${user.user_id}`);
    expect((await handle.describe()).status.name).toBe('RUNNING');

    const undo = await api.post(`/v2/user/undo_delete?user_id=${user.user_id}`);
    expect(undo.status).toBe(200);
    expect(undo.body).toEqual({ success: true });
    const back = await api.get(`/v2/user/${user.user_id}`);
    expect(back.status).toBe(200);
    expect(back.body.client_user_id).toBe(user.client_user_id);
    expect(await handle.result()).toEqual({ outcome: 'restored' });
    // Undo does not restore connections.
    const conns = await app.deps.repos.connections.listForUser(tenant.teamId, user.user_id);
    expect(conns[0].status).toBe('deregistered');
  });

  it('two concurrent deletes schedule one deletion', async () => {
    const user = await createUser();
    const results = await Promise.all([api.del(`/v2/user/${user.user_id}`), api.del(`/v2/user/${user.user_id}`)]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 404]);
    const handle = app.deps.temporal.client.workflow.getHandle(`user-deletion:${user.user_id}`);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect((await api.post(`/v2/user/undo_delete?user_id=${user.user_id}`)).status).toBe(200);
  });

  it('a DELETE adopts a pending deletion that has no running workflow (e.g. written by an earlier release)', async () => {
    const user = await createUser();
    // Earlier releases hid the user in the api, then started the workflow: a crash in between left this.
    const now = new Date();
    await app.deps.repos.users.markPendingDeletion(tenant.teamId, user.user_id, {
      id: 'crashed-deletion',
      requested_at: now,
      erase_after: new Date(now.getTime() + 3600_000),
    });
    const handle = app.deps.temporal.client.workflow.getHandle(`user-deletion:${user.user_id}`);
    await expect(handle.describe()).rejects.toThrow();
    const retry = await api.del(`/v2/user/${user.user_id}`);
    expect(retry.status).toBe(404);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect((await api.post(`/v2/user/undo_delete?user_id=${user.user_id}`)).status).toBe(200);
    expect((await api.get(`/v2/user/${user.user_id}`)).status).toBe(200);
  });

  it("a late attempt of a deletion's write does not hide the user again once an undo restored it", async () => {
    const user = await createUser();
    const handle = app.deps.temporal.client.workflow.getHandle(`user-deletion:${user.user_id}`);
    expect((await api.del(`/v2/user/${user.user_id}`)).status).toBe(200);
    const { deletionId } = await handle.query(userDeletionStateQuery);
    const stored = (await app.deps.repos.users.find(tenant.teamId, user.user_id))!.deletion!;
    expect((await api.post(`/v2/user/undo_delete?user_id=${user.user_id}`)).status).toBe(200);
    // The write of that deletion again, as an attempt that timed out and ran after its retry would.
    expect(await app.deps.repos.users.markPendingDeletion(tenant.teamId, user.user_id, stored)).toBeNull();
    expect(stored.id).toBe(deletionId);
    expect((await api.get(`/v2/user/${user.user_id}`)).status).toBe(200);
  });

  it('a user deleted again right after an undo gets a fresh deletion, timed by the running workflow', async () => {
    const user = await createUser();
    const handle = app.deps.temporal.client.workflow.getHandle(`user-deletion:${user.user_id}`);
    expect((await api.del(`/v2/user/${user.user_id}`)).status).toBe(200);
    const first = await handle.query(userDeletionStateQuery);
    expect(first.phase).toBe('grace');
    expect((await app.deps.repos.users.find(tenant.teamId, user.user_id))?.deletion?.id).toBe(first.deletionId);
    expect((await api.post(`/v2/user/undo_delete?user_id=${user.user_id}`)).status).toBe(200);
    expect((await api.del(`/v2/user/${user.user_id}`)).status).toBe(200);
    const second = await handle.query(userDeletionStateQuery);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect(second.phase).toBe('grace');
    expect(second.deletionId).not.toBe(first.deletionId);
    const stored = await app.deps.repos.users.find(tenant.teamId, user.user_id);
    expect(stored?.deletion?.id).toBe(second.deletionId);
    expect(stored?.deletion?.erase_after.toISOString()).toBe(second.eraseAfter);
  });

  it('undoes by client_user_id, and a second undo says there is nothing to undo', async () => {
    const user = await createUser();
    expect((await api.del(`/v2/user/${user.user_id}`)).status).toBe(200);
    const undo = await api.post(`/v2/user/undo_delete?client_user_id=${encodeURIComponent(user.client_user_id)}`);
    expect(undo.status).toBe(200);
    const again = await api.post(`/v2/user/undo_delete?user_id=${user.user_id}`);
    expect(again.status).toBe(400);
    expect(again.body.detail).toMatch(/not scheduled for deletion/);
  });

  it('cannot undo once a new user holds the client_user_id', async () => {
    const user = await createUser();
    await api.del(`/v2/user/${user.user_id}`);
    const successor = await api.post('/v2/user/', { client_user_id: user.client_user_id });
    expect(successor.status).toBe(200);
    const undo = await api.post(`/v2/user/undo_delete?user_id=${user.user_id}`);
    expect(undo.status).toBe(400);
    expect(undo.body.detail).toContain(successor.body.user_id);
    expect(undo.body.detail).toMatch(/now holds client_user_id/);
    // The deletion carries on: the old user stays hidden, the new one is untouched.
    expect((await api.get(`/v2/user/${user.user_id}`)).status).toBe(404);
    expect((await api.get(`/v2/user/${successor.body.user_id}`)).status).toBe(200);
  });

  it('requires exactly one of user_id and client_user_id to undo', async () => {
    const none = await api.post('/v2/user/undo_delete');
    expect(none.status).toBe(422);
    const both = await api.post(`/v2/user/undo_delete?user_id=00000000-0000-4000-8000-000000000000&client_user_id=x`);
    expect(both.status).toBe(422);
    const unknown = await api.post('/v2/user/undo_delete?user_id=00000000-0000-4000-8000-000000000000');
    expect(unknown.status).toBe(404);
  });
  // Erasure once the 7 days are over: test/time-skipping.test.ts, at the real duration.
});

describe('DELETE racing undo_delete on the same user', () => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const USERS = 10;
  const ROUNDS = 10;

  /** Rounds of DELETE, then undo 0–150 ms later, on each of 10 users at once; every response is collected. */
  async function race(c: HttpClient) {
    const users = await Promise.all(Array.from({ length: USERS }, async () => (await c.post('/v2/user/', { client_user_id: uniqueId('race') })).body as User));
    const statuses: { user: string; op: string; status: number; detail: unknown }[] = [];
    await Promise.all(
      users.map(async (user) => {
        // A pair every 200 ms: a pair may start before the previous one has been answered.
        const pairs = Array.from({ length: ROUNDS }, async (_, round) => {
          await sleep(round * 200);
          const del = c.del(`/v2/user/${user.user_id}`);
          await sleep(Math.floor(Math.random() * 151));
          const undo = c.post(`/v2/user/undo_delete?user_id=${user.user_id}`);
          const [d, u] = await Promise.all([del, undo]);
          statuses.push({ user: user.user_id, op: 'delete', status: d.status, detail: d.body?.detail });
          statuses.push({ user: user.user_id, op: 'undo', status: u.status, detail: u.body?.detail });
        });
        await Promise.all(pairs);
      }),
    );
    return { users, statuses };
  }

  it('leaves every user either visible or pending with a working undo (no 503s)', async () => {
    const { users, statuses } = await race(api);
    const stuck = [];
    for (const user of users) {
      const got = await api.get(`/v2/user/${user.user_id}`);
      if (got.status === 200) continue;
      expect(got.body.detail).toMatch(/scheduled this user for deletion/);
      const undo = await api.post(`/v2/user/undo_delete?user_id=${user.user_id}`);
      const after = await api.get(`/v2/user/${user.user_id}`);
      if (undo.status !== 200 || after.status !== 200) stuck.push({ user: user.user_id, undo: undo.status, detail: undo.body.detail, after: after.status });
    }
    expect(stuck).toEqual([]);
    // Each response is one of the documented outcomes of some order of the two requests.
    expect(statuses.filter((s) => ![200, 400, 404].includes(s.status))).toEqual([]);
    for (const s of statuses.filter((x) => x.status === 400)) expect(s.detail).toMatch(/not scheduled for deletion/);
  }, 180_000);

  it('erases a user that the race left deleted once the grace period ends', async () => {
    const shortGrace = await startTestApp({ USER_DELETION_GRACE_SECONDS: 4 });
    try {
      const c = teamClient(shortGrace, tenant);
      const { users, statuses } = await race(c);
      expect(statuses.filter((s) => ![200, 400, 404].includes(s.status))).toEqual([]);
      const left = await Promise.all(users.map(async (u) => ({ user: u, status: (await c.get(`/v2/user/${u.user_id}`)).status })));
      // Each user ends pending with a chance of about one half: the test is not vacuous.
      expect(left.some((l) => l.status !== 200)).toBe(true);
      // The erasures run at once; the wait allows for a full suite loading the same worker and database.
      await Promise.all(
        left
          .filter(({ status }) => status !== 200)
          .map(async ({ user }) => {
            await eventually(
              async () => (await shortGrace.deps.repos.users.find(tenant.teamId, user.user_id))?.status === 'erased',
              120_000,
              `user ${user.user_id} erased after the grace period`,
            );
            expect((await c.get(`/v2/user/${user.user_id}`)).body).toEqual({ detail: 'User not found.' });
          }),
      );
      // A visible user stays visible (no erasure of a restored user).
      for (const { user, status } of left) {
        if (status === 200) expect((await shortGrace.deps.repos.users.find(tenant.teamId, user.user_id))?.status).toBe('active');
      }
    } finally {
      await shortGrace.close();
    }
  }, 180_000);
});

describe('erased stays erased: wearable data racing the erasure', () => {
  test('a batch written after the erasure began is removed by its writer and announced to nobody; undo is refused from then on', async () => {
    const { ingestProviderData } = await import('../lib/wearables/ingest');
    const { subscribeReceiver } = await import('./support/harness');
    const { rx } = await subscribeReceiver(app, tenant, ['daily.data.*']);
    try {
      const userId = (await api.post('/v2/user/', { client_user_id: uniqueId('erasing') })).body.user_id as string;
      expect(userId).toBeTruthy();
      const batch = (minute: number) => ({
        source_type: 'watch',
        summaries: [],
        samples: [{ resource: 'heartrate', timestamp: `2026-11-20T08:${String(minute).padStart(2, '0')}:00+00:00`, value: 60 + minute, unit: 'bpm' }],
        workout_streams: [],
      });
      const ingest = async (minute: number) =>
        ingestProviderData(app.deps, {
          teamId: tenant.teamId,
          user: (await app.deps.repos.users.find(tenant.teamId, userId))!,
          provider: 'oura',
          data: batch(minute),
          announce: true,
        });
      const samples = () => app.inspect.collection('sample_buckets').countDocuments({ user_id: userId });

      // Pending deletion, erasure not begun: data is still taken (the erasure removes it with the rest).
      expect((await api.del(`/v2/user/${userId}`)).status).toBe(200);
      expect((await ingest(1)).events).toBe(1);
      // The erasure begins (its first step marks it); a pull page or push that lands now is not kept and not told.
      await app.deps.repos.users.markErasing(tenant.teamId, userId);
      const late = await ingest(2);
      expect(late.events).toBe(0);
      expect(await samples()).toBe(0);
      expect((await api.post(`/v2/user/undo_delete?user_id=${userId}`)).status).not.toBe(200);
      await eventually(async () => rx.requests.some((r) => r.body.includes(userId)), 20_000, 'the first batch announced');
      await new Promise((r) => setTimeout(r, 1000)); // nothing more may come: the late batch published nothing
      expect(rx.requests.filter((r) => r.body.includes(userId))).toHaveLength(1);
    } finally {
      await rx.close();
    }
  });
});
