import { randomUUID } from 'node:crypto';
import { createRepositories, ensureIndexes } from '../lib/repositories';
import { FieldCipher } from '../lib/platform/field-encryption';
import { indexesUsed, sortsInMemory } from './support/explain';
import { logPage, pageById, pageByTimeWindows, pageQuery } from '../lib/platform/database/pages';
import { hashKey, idPrefixAt, mintKey, timeOrderedNameBasedUuid, timeOrderedUuid } from '../lib/platform/keys';
import { ownDatabase, startTestApp, uniqueId, type OwnDatabase, type TestApp } from './support/harness';

/**
 * What the code relies on from the database the suite runs on (the embedded PostgreSQL + DocumentDB behind
 * FerretDB v2, or MONGO_URL's MongoDB): single-document updates are atomic, a conditional update has one
 * winner, and a filter on an indexed field is answered from its index. Each fails on a store without them.
 */
describe('the database under the suite', () => {
  let app: TestApp;
  let own: OwnDatabase;

  beforeAll(async () => {
    app = await startTestApp();
    own = await ownDatabase(app, 'store');
  });
  afterAll(async () => {
    await own.drop();
    await app.close();
  });

  it('applies 20 concurrent $inc of one document: it ends at 20', async () => {
    const counters = app.inspect.collection<{ _id: string; n: number }>(`store_${uniqueId('inc').replace(/-/g, '_')}`);
    await counters.insertOne({ _id: 'c', n: 0 });
    await Promise.all(Array.from({ length: 20 }, () => counters.updateOne({ _id: 'c' }, { $inc: { n: 1 } })));
    expect((await counters.findOne({ _id: 'c' }))?.n).toBe(20);
    await counters.drop();
  });

  it('gives 10 concurrent claims of one document exactly one winner', async () => {
    const jobs = app.inspect.collection<{ _id: string; claimed_by: number | null }>(`store_${uniqueId('claim').replace(/-/g, '_')}`);
    for (let round = 0; round < 5; round++) {
      await jobs.insertOne({ _id: `job-${round}`, claimed_by: null });
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, claimant) =>
          jobs.findOneAndUpdate({ _id: `job-${round}`, claimed_by: null }, { $set: { claimed_by: claimant } }, { returnDocument: 'after' }),
        ),
      );
      const winners = results.filter((doc) => doc !== null);
      expect(winners).toHaveLength(1);
      expect((await jobs.findOne({ _id: `job-${round}` }))?.claimed_by).toBe(winners[0]!.claimed_by);
    }
    await jobs.drop();
  });

  it("pages a log by walking the `_id` index when its matches are dense, and by the list's index when they are not", async () => {
    type LogDoc = { _id: string; team_id: string; n: number };
    const log = own.db.collection<LogDoc>('log_pages');
    await log.createIndex({ team_id: 1, _id: -1 });
    // 'rare' has 10 old entries under 40,000 newer ones of 'busy': walking `_id` from the newest reaches them last.
    const at = Date.now() - 3_600_000;
    const docs: LogDoc[] = [];
    for (let n = 0; n < 10; n++) docs.push({ _id: timeOrderedUuid(at + n), team_id: 'rare', n });
    for (let n = 0; n < 40_000; n++) docs.push({ _id: timeOrderedUuid(at + 1000 + n), team_id: 'busy', n });
    for (let i = 0; i < docs.length; i += 5000) await log.insertMany(docs.slice(i, i + 5000));
    const newestFirst = (team: string) => docs.filter((d) => d.team_id === team).reverse();

    // The walk of a dense log: `_id_` in order, nothing sorted.
    const walk = await pageQuery(log, { team_id: 'busy' }, -1, null, 20).hint({ _id: 1 }).explain('queryPlanner');
    expect({ used: indexesUsed(walk), sorted: sortsInMemory(walk) }).toEqual({ used: ['_id_'], sorted: false });
    const busy = await logPage(log, { team_id: 'busy' }, -1, null, 20);
    expect(busy.items.map((d) => d.n)).toEqual(
      newestFirst('busy')
        .slice(0, 20)
        .map((d) => d.n),
    );
    expect(busy.more).toBe(true);
    const next = await logPage(log, { team_id: 'busy' }, -1, busy.items[19]._id, 20);
    expect(next.items.map((d) => d.n)).toEqual(
      newestFirst('busy')
        .slice(20, 40)
        .map((d) => d.n),
    );

    // A sparse log whose walk runs out of its budget (1 ms here: the store stops it, code 50) is read off the
    // list's index instead: the same page.
    await expect(pageQuery(log, { team_id: 'rare' }, -1, null, 4).hint({ _id: 1 }).maxTimeMS(1).toArray()).rejects.toMatchObject({ code: 50 });
    const rare = await logPage(log, { team_id: 'rare' }, -1, null, 4, 1);
    expect(rare.items.map((d) => d.n)).toEqual([9, 8, 7, 6]);
    expect(rare).toEqual(await pageById(log, { team_id: 'rare' }, -1, null, 4));
    const rest = await logPage(log, { team_id: 'rare' }, -1, rare.items[3]._id, 10, 1);
    expect({ ns: rest.items.map((d) => d.n), more: rest.more }).toEqual({ ns: [5, 4, 3, 2, 1, 0], more: false });

    // A quiet team's entries spread over two years (and one id of another form) read window of time by window, newest
    // window first: page after page, the same pages as one read of every match sorted.
    const now = Date.now();
    const quietAt = [10, 40, 300, 2_000, 20_000, 200_000, 1_000_000].map((minutesAgo) => now - minutesAgo * 60_000);
    const quiet: LogDoc[] = quietAt.flatMap((ms, i) =>
      [0, 1].map((k) => ({ _id: timeOrderedNameBasedUuid(ms, ['quiet', String(i)], k), team_id: 'quiet', n: i * 2 + k })),
    );
    quiet.push({ _id: randomUUID(), team_id: 'quiet', n: 100 });
    await log.insertMany(quiet);
    const pagesOf = async (read: (after: string | null) => Promise<{ items: LogDoc[]; more: boolean }>) => {
      const pages: number[][] = [];
      for (let after: string | null = null, more = true; more; ) {
        const page = await read(after);
        pages.push(page.items.map((d) => d.n));
        more = page.more;
        after = page.items.at(-1)?._id ?? null;
      }
      return pages;
    };
    const windowed = await pagesOf((after) => pageByTimeWindows(log, { team_id: 'quiet' }, after, 3));
    expect(windowed).toEqual(await pagesOf((after) => pageById(log, { team_id: 'quiet' }, -1, after, 3)));
    expect(windowed.flat()).toHaveLength(quiet.length);
    // A window is a range of the list's index, sorted alone (not the `_id` walk through the busy team's entries).
    const window = await pageQuery(log, { team_id: 'quiet', _id: { $gte: idPrefixAt(now - 3_600_000) } }, -1, null, 3).explain('queryPlanner');
    expect(indexesUsed(window)).toEqual(['team_id_1__id_-1']);
  });

  it('answers the API key lookup of every request from the key_hash index, not a scan', async () => {
    const repos = createRepositories(own.db, FieldCipher.fromSpec(process.env.DATA_ENCRYPTION_KEYS!));
    await ensureIndexes(repos); // the indexes the api and worker declare and create at start-up
    const keys = own.db.collection('team_api_keys');
    const now = Date.now();
    await keys.insertMany(
      Array.from({ length: 3_000 }, (_, i) => ({
        _id: randomUUID(),
        key_hash: mintKey('sk_us_').hash,
        org_id: `org-${i % 30}`,
        team_id: `team-${i % 300}`,
        created_at: new Date(now - i * 1_000),
      })) as never[],
    );
    const key = mintKey('sk_us_');
    await keys.insertOne({ _id: randomUUID(), key_hash: key.hash, org_id: 'org-x', team_id: 'team-x', created_at: new Date() } as never);
    // The repository finds it by the filter explained below.
    expect((await repos.tenancy.verifyTeamApiKey(key.value))?.team_id).toBe('team-x');

    const plan = await keys.find({ key_hash: hashKey(key.value) }).explain('queryPlanner');
    expect(indexesUsed(plan)).toEqual(['key_hash_1']);
    // The helper tells a scan apart: an unindexed filter uses no declared index.
    expect(indexesUsed(await keys.find({ label: 'nobody filters on this' }).explain('queryPlanner'))).toEqual([]);
  });

  it("answers a management key lookup from the index on its org document's key hashes", async () => {
    const repos = createRepositories(own.db, FieldCipher.fromSpec(process.env.DATA_ENCRYPTION_KEYS!));
    await ensureIndexes(repos);
    for (let i = 0; i < 300; i++) {
      const org = await repos.tenancy.createOrg(`Org ${i}`);
      for (let k = 0; k < 3; k++) await repos.tenancy.createManagementKey(org._id, `k${k}`, 'org_admin', []);
    }
    const org = await repos.tenancy.createOrg('Wanted');
    const { value } = await repos.tenancy.createManagementKey(org._id, 'wanted', 'org_admin', []);
    expect(await repos.tenancy.verifyManagementKey(value)).toMatchObject({ org_id: org._id, label: 'wanted' });
    const plan = await own.db
      .collection('orgs')
      .find({ 'management_keys.key_hash': hashKey(value) })
      .explain('queryPlanner');
    expect(indexesUsed(plan)).toEqual(['management_keys.key_hash_1']);
  });
});
