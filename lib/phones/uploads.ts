import { ValidationError } from '../platform/errors';
import { groupBy } from '../platform/group-by';
import type { UserDoc } from '../users/store';
import { ingestProviderData, type IngestDeps } from '../wearables/ingest';
import { checkIngestBatch } from '../wearables/ingest-batch';
import type { ProviderCatalogue } from '../wearables/provider-catalogue';
import type { FieldError } from '../../schemas/validator';

/** A phone's samples, from its uploads and its raw records, stored through the ingest path (lib/wearables/ingest.ts). */

export type UploadSampleInput = {
  resource: string;
  timestamp: string;
  start?: string;
  end?: string;
  value: number;
  unit: string;
  timezone_offset: number | null;
};

/**
 * Checks and stores samples of one upload through the ingest path, one batch per source type (a sample's key holds
 * it): every batch is checked before any is stored, and a problem names the upload's own index (`at`).
 */
export async function storeUpload(
  deps: IngestDeps & { providers: ProviderCatalogue },
  target: { teamId: string; user: UserDoc; provider: string; announce: boolean },
  items: { sourceType: string; sample: UploadSampleInput; at: (string | number)[] }[],
) {
  const problems: FieldError[] = [];
  const batches = groupBy(items, (item) => item.sourceType).flatMap((group) => {
    try {
      const batch = { provider: target.provider, source_type: group[0].sourceType, samples: group.map((g) => g.sample) };
      return [checkIngestBatch(deps, batch, target.teamId, target.user._id)];
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      for (const e of err.errors) problems.push({ ...e, loc: ['body', ...group[Number(e.loc[2])].at, ...e.loc.slice(3)] });
      return [];
    }
  });
  if (problems.length) throw new ValidationError(problems);
  const counts = { created: 0, updated: 0, unchanged: 0 };
  const days = new Set<string>();
  let dropped = 0;
  let events = 0;
  let oldest: Date | null = null;
  let newest: Date | null = null;
  for (const data of batches) {
    const result = await ingestProviderData(deps, { teamId: target.teamId, user: target.user, provider: target.provider, data, announce: target.announce });
    for (const k of ['created', 'updated', 'unchanged'] as const) counts[k] += result.samples[k];
    dropped += result.dropped;
    events += result.events;
    for (const d of result.days) days.add(d);
    if (result.oldest && (!oldest || result.oldest < oldest)) oldest = result.oldest;
    if (result.newest && (!newest || result.newest > newest)) newest = result.newest;
  }
  return { counts, dropped, events, days: [...days], oldest, newest };
}
