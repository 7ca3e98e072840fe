import { publishEvent } from '../events/publisher';
import { ValidationError } from '../platform/errors';
import { historicalPullId } from '../wearables/historical-pulls-store';
import { groupBy } from '../platform/group-by';
import type { UserDoc } from '../users/store';
import { ingestProviderData, type IngestDeps } from '../wearables/ingest';
import { checkIngestBatch } from '../wearables/ingest-batch';
import type { SummaryInput } from '../wearables/model';
import type { ProviderCatalogue } from '../wearables/provider-catalogue';
import type { FieldError } from '../../schemas/validator';

/** A phone's samples and summaries, from its uploads and its raw records, stored through the ingest path (lib/wearables/ingest.ts). */

export type UploadSampleInput = {
  resource: string;
  timestamp: string;
  start?: string;
  end?: string;
  value: number;
  unit: string;
  timezone_offset: number | null;
  platform_id?: string | null;
};

/**
 * Checks and stores samples of one upload through the ingest path, one batch per source type (a sample's key holds
 * it): every batch is checked before any is stored, and a problem names the upload's own place (`at` in the body's
 * list `target.itemsAt`: `data`, `records`).
 */
export async function storeUpload(
  deps: IngestDeps & { providers: ProviderCatalogue },
  target: { teamId: string; user: UserDoc; provider: string; announce: boolean; contentKey?: string; itemsAt?: string },
  items: { sourceType: string; sample: UploadSampleInput; at: number }[],
  summaries: { sourceType: string; summary: SummaryInput }[] = [],
) {
  const problems: FieldError[] = [];
  const batches = groupBy(items, (item) => item.sourceType).flatMap((group) => {
    try {
      const batch = { provider: target.provider, source_type: group[0].sourceType, samples: group.map((g) => g.sample) };
      return [checkIngestBatch(deps, batch, target.teamId, target.user._id)];
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      for (const e of err.errors) problems.push({ ...e, loc: ['body', target.itemsAt ?? 'data', group[Number(e.loc[2])].at, ...e.loc.slice(3)] });
      return [];
    }
  });
  if (problems.length) throw new ValidationError(problems);
  // Summaries the server built from the phone's records (sleeps, workouts): already in the stored shape.
  for (const group of groupBy(summaries, (s) => s.sourceType)) {
    batches.push({ source_type: group[0].sourceType, samples: [], summaries: group.map((g) => g.summary), workout_streams: [] });
  }
  const counts = { created: 0, updated: 0, unchanged: 0 };
  const summaryCounts = { created: 0, updated: 0, unchanged: 0 };
  const days = new Set<string>();
  let dropped = 0;
  let events = 0;
  let oldest: Date | null = null;
  let newest: Date | null = null;
  for (const data of batches) {
    const { teamId, user, provider, announce, contentKey } = target;
    const result = await ingestProviderData(deps, { teamId, user, provider, data, announce, contentKey });
    for (const k of ['created', 'updated', 'unchanged'] as const) {
      counts[k] += result.samples[k];
      summaryCounts[k] += result.summaries[k];
    }
    dropped += result.dropped;
    events += result.events;
    for (const d of result.days) days.add(d);
    if (result.oldest && (!oldest || result.oldest < oldest)) oldest = result.oldest;
    if (result.newest && (!newest || result.newest > newest)) newest = result.newest;
  }
  return { counts, summaryCounts, dropped, events, days: [...days], oldest, newest };
}

/**
 * What a chunk means for its resource's history: a `historical` chunk counts in the stage's progress (GET
 * /v2/introspect/historical_pull, begun by sdk_start_historical_stage), and its final chunk publishes
 * `historical.data.<resource>.created`, once per connection, resource and window (sent again: nothing more). True when
 * this chunk published it.
 */
export async function recordStage(
  deps: { repos: IngestDeps['repos']; publisher: IngestDeps['publisher'] },
  target: { teamId: string; user: UserDoc; connectionId: string; resource: string },
  envelope: { stage: 'daily' | 'historical'; provider: string; start_date: string; end_date?: string | null; is_final_chunk?: boolean },
  stored: { sent: number; days: string[]; oldest: Date | null; newest: Date | null },
): Promise<boolean> {
  if (envelope.stage !== 'historical') return false;
  const { teamId, user, resource } = target;
  const final = envelope.is_final_chunk === true;
  await deps.repos.historicalPulls.recordPhoneChunk(
    historicalPullId(teamId, user._id, envelope.provider, resource),
    { sent: stored.sent, days: stored.days, oldest: stored.oldest, newest: stored.newest, final },
    new Date(),
  );
  if (!final) return false;
  const published = await publishEvent(deps, {
    teamId,
    userId: user._id,
    clientUserId: user.client_user_id,
    eventType: `historical.data.${resource}.created`,
    data: {
      user_id: user._id,
      start_date: envelope.start_date,
      end_date: envelope.end_date ?? new Date().toISOString(),
      is_final: true,
      provider: envelope.provider,
    },
    idempotencyKey: `phone-historical:${target.connectionId}:${resource}:${envelope.start_date}`,
  });
  return !published.duplicate;
}
