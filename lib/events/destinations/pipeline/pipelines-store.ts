import type { Collection, Db } from 'mongodb';
import type { FieldCipher } from '../../../platform/field-encryption';
import { EncryptedFields, type Sealed } from '../../../platform/database/encrypted-fields';
import { createIndexes, type IndexSpec, type QueryShape } from '../../../platform/database/indexes';
import { pageById, type Page } from '../../../platform/database/pages';
import type { PipelineDoc } from './model';

/**
 * Pipelines: the only code that touches `pipelines`. The broker password (`credentials`) is sealed with the
 * field cipher, bound to its pipeline; every other field is plain. Changes are single-document writes: a PATCH
 * sets the fields given, the dispatcher's health writes carry their own condition, and each bumps `version`
 * (the sender reconnects with the new settings when it moves).
 */
export type StoredPipeline = Sealed<PipelineDoc, 'credentials'>;

export const PIPELINE_INDEXES: Record<'pipelines', IndexSpec[]> = {
  pipelines: [{ key: { team_id: 1, _id: 1 } }],
};

export const PIPELINE_QUERY_SHAPES: Record<'pipelines', QueryShape[]> = {
  pipelines: [
    { name: 'pipeline by id (reads, dispatcher)', filter: ['_id'], residual: ['team_id'] },
    { name: "a team's pipelines, oldest first (cursor page)", filter: ['team_id', '_id'], sort: ['_id'] },
    // A team has few pipelines; `disabled` is checked on each of them.
    { name: "a team's enabled pipelines (publish)", filter: ['team_id'], residual: ['disabled'] },
    { name: "a team's pipeline ids (erasure, team deletion)", filter: ['team_id'] },
  ],
};

export class PipelineRepository {
  readonly pipelines: Collection<StoredPipeline>;
  private readonly sealed: EncryptedFields<PipelineDoc, 'credentials'>;

  constructor(db: Db, cipher: FieldCipher) {
    this.pipelines = db.collection('pipelines');
    this.sealed = new EncryptedFields<PipelineDoc, 'credentials'>(cipher, 'pipelines', ['credentials']);
  }

  async ensureIndexes(): Promise<void> {
    await createIndexes(this.pipelines, PIPELINE_INDEXES.pipelines);
  }

  private open(doc: StoredPipeline): PipelineDoc;
  private open(doc: StoredPipeline | null): PipelineDoc | null;
  private open(doc: StoredPipeline | null): PipelineDoc | null {
    return doc && (this.sealed.open(doc) as PipelineDoc);
  }

  async createPipeline(doc: PipelineDoc): Promise<PipelineDoc> {
    await this.pipelines.insertOne(this.sealed.seal(doc._id, doc));
    return doc;
  }

  async findPipeline(teamId: string, id: string): Promise<PipelineDoc | null> {
    return this.open(await this.pipelines.findOne({ _id: id, team_id: teamId }));
  }

  /** By id alone (the dispatcher, which is keyed by destination id). */
  async getPipeline(id: string): Promise<PipelineDoc | null> {
    return this.open(await this.pipelines.findOne({ _id: id }));
  }

  async listPipelines(teamId: string, after: string | null, limit: number): Promise<Page<PipelineDoc>> {
    const page = await pageById(this.pipelines, { team_id: teamId }, 1, after, limit);
    return { items: page.items.map((d) => this.open(d)), more: page.more };
  }

  async listEnabledPipelines(teamId: string): Promise<PipelineDoc[]> {
    return (await this.pipelines.find({ team_id: teamId, disabled: false }).toArray()).map((d) => this.open(d));
  }

  async pipelineIdsOfTeam(teamId: string): Promise<string[]> {
    return (await this.pipelines.find({ team_id: teamId }, { projection: { _id: 1 } }).toArray()).map((d) => d._id);
  }

  /** A PATCH: the fields given (credentials sealed), whatever the rest holds. */
  async updatePipeline(teamId: string, id: string, set: Partial<PipelineDoc>): Promise<PipelineDoc | null> {
    return this.open(
      await this.pipelines.findOneAndUpdate(
        { _id: id, team_id: teamId },
        { $set: { ...this.sealed.seal(id, set), updated_at: new Date() }, $inc: { version: 1 } },
        { returnDocument: 'after' },
      ),
    );
  }

  async deletePipeline(teamId: string, id: string): Promise<boolean> {
    return (await this.pipelines.deleteOne({ _id: id, team_id: teamId })).deletedCount === 1;
  }

  /** Health after a batch: a success resets the failure clock; a failure starts it if not running (one conditional write each). */
  async recordHealth(id: string, outcome: { succeeded: boolean; at: Date }): Promise<void> {
    if (outcome.succeeded) await this.pipelines.updateOne({ _id: id, failing_since: { $ne: null } }, { $set: { failing_since: null }, $inc: { version: 1 } });
    else await this.pipelines.updateOne({ _id: id, failing_since: null }, { $set: { failing_since: outcome.at }, $inc: { version: 1 } });
  }

  /** Disables a pipeline failing since `failingSince` (a racing PATCH that re-enabled or fixed it resets the clock, so nothing is written). */
  async disableFailing(id: string, failingSince: Date): Promise<boolean> {
    const { modifiedCount } = await this.pipelines.updateOne(
      { _id: id, disabled: false, failing_since: failingSince },
      { $set: { disabled: true, disabled_reason: 'failing', updated_at: new Date() }, $inc: { version: 1 } },
    );
    return modifiedCount === 1;
  }

  /** Re-encrypts credentials under a retired data key (`npm run reencrypt`). */
  reencrypt(): Promise<number> {
    return this.sealed.rewriteStale(this.pipelines);
  }
}
