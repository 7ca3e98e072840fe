import type { Collection, Db } from 'mongodb';
import { isDuplicateKeyError } from '../platform/database/store-errors';
import { createIndexes, type IndexSpec, type QueryShape } from '../platform/database/indexes';

/** A lab test a team composed from catalogue markers (`POST /v3/lab_tests`). */
export interface TeamLabTestDoc {
  _id: string;
  team_id: string;
  slug: string;
  name: string;
  description: string;
  method: 'testkit' | 'walk_in_test' | 'at_home_phlebotomy';
  sample_type: string;
  lab_id: number;
  marker_ids: number[];
  /** The organisation's lab account its orders go to (lab-accounts.ts); null (or absent, before accounts existed): the sandbox lab. */
  lab_account_id?: string | null;
  fasting: boolean;
  status: 'active' | 'inactive';
  price: number;
  common_tat_days: number;
  worst_case_tat_days: number;
  created_at: Date;
  updated_at: Date;
}

const INDEXES: IndexSpec[] = [{ key: { team_id: 1, slug: 1 }, unique: true }, { key: { team_id: 1, created_at: 1 } }, { key: { lab_account_id: 1 } }];
export const LAB_TEST_QUERY_SHAPES: QueryShape[] = [
  { name: 'test by id', filter: ['_id'] },
  { name: "a team's tests, oldest first", filter: ['team_id'], sort: ['created_at'] },
  { name: 'tests naming a lab account (its deletion)', filter: ['lab_account_id'] },
];
export const LAB_TEST_INDEXES = { lab_tests: INDEXES };

export class LabTestRepository {
  readonly tests: Collection<TeamLabTestDoc>;

  constructor(db: Db) {
    this.tests = db.collection('lab_tests');
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.tests, INDEXES);
  }

  /** `slug_taken` when the team already has a test of that name (the unique index decides races). */
  async create(doc: TeamLabTestDoc): Promise<{ created: TeamLabTestDoc } | { slug_taken: true }> {
    try {
      await this.tests.insertOne(doc);
      return { created: doc };
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      return { slug_taken: true };
    }
  }

  find(teamId: string, id: string): Promise<TeamLabTestDoc | null> {
    return this.tests.findOne({ _id: id, team_id: teamId });
  }

  listForTeam(teamId: string): Promise<TeamLabTestDoc[]> {
    return this.tests.find({ team_id: teamId }).sort({ created_at: 1 }).toArray();
  }

  /** Up to `limit` tests (of any team) that name the lab account. */
  namingLabAccount(labAccountId: string, limit: number): Promise<Pick<TeamLabTestDoc, '_id' | 'team_id'>[]> {
    return this.tests
      .find({ lab_account_id: labAccountId }, { projection: { _id: 1, team_id: 1 } })
      .limit(limit)
      .toArray();
  }

  /**
   * Renames or (de)activates; the slug follows the name. One update of only the fields given: a rename racing a
   * deactivation changes different fields of the one document, atomically each, so neither is lost; the unique
   * slug index settles two renames to the same name.
   */
  async update(teamId: string, id: string, changes: Partial<Pick<TeamLabTestDoc, 'name' | 'slug' | 'status'>>): Promise<TeamLabTestDoc | 'slug_taken' | null> {
    try {
      return await this.tests.findOneAndUpdate({ _id: id, team_id: teamId }, { $set: { ...changes, updated_at: new Date() } }, { returnDocument: 'after' });
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      return 'slug_taken';
    }
  }
}
