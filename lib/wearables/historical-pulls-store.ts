import type { Collection, Db } from 'mongodb';
import { nameBasedUuid } from '../platform/keys';
import { createIndexes, type IndexSpec, type QueryShape } from '../platform/database/indexes';
import { isDuplicateKeyError } from '../platform/database/store-errors';

export type PullStatus = 'scheduled' | 'in_progress' | 'success' | 'retrying' | 'failure';

export interface PullErrorDetails {
  error_type: string;
  error_message: string;
  errored_at: Date;
}

/**
 * The pull state of one resource of one user's provider (introspection's unit). Written only by the
 * connection's workflow (workflows/wearable-connection.ts), its single owner; kept across reconnects so a
 * new connection pulls only the days without data (`data_days`).
 */
export interface HistoricalPullDoc {
  _id: string;
  team_id: string;
  user_id: string;
  provider: string;
  resource: string;
  connection_id: string;
  status: PullStatus;
  range_start: Date | null;
  range_end: Date | null;
  timeline: { scheduled_at: Date | null; started_at: Date | null; ended_at: Date | null };
  /** Days (YYYY-MM-DD) the history pull asked for last time: the gap of a re-backfill. */
  days_requested: string[];
  /** The local days (YYYY-MM-DD) with data inside the provider's history window (older days are dropped: bounded). */
  data_days: string[];
  attempts: number;
  error_details: PullErrorDetails | null;
  trace_id: string | null;
  /** Resource statistics (GET /v2/introspect/resources), from history pulls and later syncs. */
  last_attempt: { status: 'success' | 'failure'; timestamp: Date } | null;
  oldest_data: Date | null;
  newest_data: Date | null;
  sent_count: number;
  /**
   * When Temporal scheduled the activity attempt that wrote this state (ms, the server's clock): a write is taken
   * only from an attempt scheduled no earlier, so an attempt Temporal superseded (still running after its retry
   * began) or a pull of an earlier connection never overwrites a newer state.
   */
  fence: number;
  updated_at: Date;
}

export const HISTORICAL_PULL_INDEXES: Record<'historical_pulls', IndexSpec[]> = {
  historical_pulls: [{ key: { team_id: 1, user_id: 1, provider: 1, resource: 1 } }],
};

export const HISTORICAL_PULL_QUERY_SHAPES: Record<'historical_pulls', QueryShape[]> = {
  historical_pulls: [
    { name: "a team's pull states, page of users (introspection)", filter: ['team_id', 'user_id'], sort: ['user_id', 'provider', 'resource'] },
    { name: 'a pull state by id; its write fenced by the writing attempt (conditional upsert)', filter: ['_id'], residual: ['fence'] },
    {
      name: "a team's pull states from the first user (introspection)",
      filter: ['team_id'],
      sort: ['user_id', 'provider', 'resource'],
      residual: ['provider'],
    },
  ],
};

export const historicalPullId = (teamId: string, userId: string, provider: string, resource: string) =>
  nameBasedUuid('historical-pull', teamId, userId, provider, resource);

export class HistoricalPullRepository {
  readonly pulls: Collection<HistoricalPullDoc>;

  constructor(db: Db) {
    this.pulls = db.collection('historical_pulls');
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.pulls, HISTORICAL_PULL_INDEXES.historical_pulls);
  }

  get(id: string) {
    return this.pulls.findOne({ _id: id });
  }

  /**
   * A phone's historical stage of one resource begins (POST …/sdk_start_historical_stage/…): its state is the phone's,
   * written by the api as the phone reports (no workflow owns it), `in_progress` over the window it reads. A stage
   * begun again (the phone restarted it) begins anew.
   */
  async startPhoneStage(
    doc: Pick<HistoricalPullDoc, '_id' | 'team_id' | 'user_id' | 'provider' | 'resource' | 'connection_id' | 'range_start' | 'range_end' | 'days_requested'>,
    now: Date,
  ) {
    // The oldest and newest data are kept by $min / $max as chunks come, which a null would hold: absent until the first.
    const { _id, ...fields } = doc;
    const before = await this.get(_id);
    const unset = (['oldest_data', 'newest_data'] as const).filter((f) => before && before[f] === null);
    await this.pulls.updateOne(
      { _id },
      {
        $set: {
          ...fields,
          status: 'in_progress',
          timeline: { scheduled_at: now, started_at: now, ended_at: null },
          error_details: null,
          updated_at: now,
        },
        $inc: { attempts: 1 },
        $setOnInsert: { data_days: [], trace_id: null, last_attempt: null, sent_count: 0, fence: 0 },
        ...(unset.length ? { $unset: Object.fromEntries(unset.map((f) => [f, ''])) } : {}),
      },
      { upsert: true },
    );
  }

  /** A chunk of a phone's historical stage stored: counted in one atomic update (chunks may come in parallel); the final one ends the stage. */
  async recordPhoneChunk(id: string, chunk: { sent: number; days: string[]; oldest: Date | null; newest: Date | null; final: boolean }, now: Date) {
    await this.pulls.updateOne(
      { _id: id },
      {
        $inc: { sent_count: chunk.sent },
        $addToSet: { data_days: { $each: chunk.days } },
        ...(chunk.oldest ? { $min: { oldest_data: chunk.oldest } } : {}),
        ...(chunk.newest ? { $max: { newest_data: chunk.newest } } : {}),
        $set: {
          last_attempt: { status: 'success', timestamp: now },
          updated_at: now,
          ...(chunk.final ? { status: 'success', 'timeline.ended_at': now } : {}),
        },
      },
    );
  }

  /**
   * Upserts the whole state (the owning workflow's activities compute it; idempotent), written by the activity attempt
   * Temporal scheduled at `attemptScheduledAt`: only if no attempt scheduled later has written it (one conditional
   * write; a newer state makes the upsert's insert collide on `_id`). False: superseded, nothing written.
   */
  async save(attemptScheduledAt: number, doc: Omit<HistoricalPullDoc, 'fence'>): Promise<boolean> {
    try {
      await this.pulls.replaceOne({ _id: doc._id, fence: { $lte: attemptScheduledAt } }, { ...doc, fence: attemptScheduledAt }, { upsert: true });
      return true;
    } catch (err) {
      if (isDuplicateKeyError(err)) return false;
      throw err;
    }
  }

  /**
   * A page of the team's pull states: documents of at most `userLimit` users after `afterUserId`, optionally
   * one user or one provider. Returns the documents and the last user id when more users follow.
   */
  async page(q: { teamId: string; userId?: string; provider?: string; afterUserId?: string; userLimit: number }) {
    const filter: Record<string, unknown> = { team_id: q.teamId };
    if (q.userId) filter.user_id = q.userId;
    else if (q.afterUserId) filter.user_id = { $gt: q.afterUserId };
    if (q.provider) filter.provider = q.provider;
    const docs: HistoricalPullDoc[] = [];
    const users: string[] = [];
    let more = false;
    for await (const doc of this.pulls.find(filter).sort({ user_id: 1, provider: 1, resource: 1 })) {
      if (users[users.length - 1] !== doc.user_id) {
        if (users.length === q.userLimit) {
          more = true;
          break;
        }
        users.push(doc.user_id);
      }
      docs.push(doc);
    }
    return { docs, nextUserId: more ? users[users.length - 1] : null };
  }

  async eraseAllForUser(teamId: string, userId: string): Promise<number> {
    return (await this.pulls.deleteMany({ team_id: teamId, user_id: userId })).deletedCount;
  }
}
