import { createHash, randomUUID } from 'node:crypto';
import type { ProviderCatalogue } from './provider-catalogue';
import { publicBaseUrl, type Config } from '../platform/config';
import { nameBasedUuid } from '../platform/keys';
import type { Repositories } from '../repositories';
import type { UserDoc } from '../users/store';
import { sampleKey } from './sample-buckets';
import type { SampleDoc, SummaryDoc } from './data-store';
import { localDate, parseInstant, zoneOffsetSeconds } from '../platform/time';
import type { EventPublisher } from '../events/publisher';
import type { ProviderData, SampleInput, SummaryInput } from './model';
import { sampleView, sourceId, sourceView, summaryView, type SourceView } from './views';
import { samplesIngested } from '../platform/metrics';
import { groupBy } from '../platform/group-by';

export interface IngestDeps {
  repos: Repositories;
  config: Config;
  providers: ProviderCatalogue;
  publisher: EventPublisher;
}

export interface IngestRequest {
  teamId: string;
  user: UserDoc;
  provider: string;
  data: ProviderData;
  /** Publish `daily.data.*` events for what changed (history pulls store silently and announce completion instead). */
  announce: boolean;
  /**
   * A digest of what the batch was made from (a phone upload's bytes and path), hashed into its ingest key instead of
   * the batch itself: the same source makes the same batch, and serializing 10,000 samples to hash them cost a tenth
   * of an upload's time.
   */
  contentKey?: string;
}

export interface Counts {
  created: number;
  updated: number;
  unchanged: number;
}

export interface IngestResult {
  summaries: Counts;
  samples: Counts;
  workout_streams: Counts;
  /** Items outside the user's ingestion bounds, not stored. */
  dropped: number;
  /** Local days (YYYY-MM-DD) the stored data covers. */
  days: string[];
  oldest: Date | null;
  newest: Date | null;
  events: number;
}

/** A summary's service id: stable per (team, user, provider, resource, provider's key), so revisions replace it. */
export const summaryId = (teamId: string, userId: string, provider: string, resource: string, sourceKey: string) =>
  nameBasedUuid('summary', teamId, userId, provider, resource, sourceKey);

const DAILY = new Set(['activity', 'body', 'profile']);
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
/** Share of WEBHOOK_MAX_EVENT_BYTES a timeseries event's samples may fill (the rest is envelope and headroom). */
const EVENT_FILL = 0.8;

/**
 * Stores one batch of a provider's data with replacement semantics and publishes what changed.
 *
 * New documents are inserted (unordered; existing `_id`s come back as duplicates), changed ones replaced whole.
 * Every written document carries the batch's content hash (`ingest_key`) and what the batch did to it, so a
 * retried batch (a crash between writing and publishing) publishes the same events again under the same
 * idempotency keys — the publisher answers repeats with the stored event — and a resend of data already held
 * publishes nothing new.
 */
/** A batch for a user whose erasure has begun: everything of theirs goes (it is being erased anyway), nothing is told. */
async function dropForErasure(deps: IngestDeps, teamId: string, userId: string, dropped: number): Promise<IngestResult> {
  await deps.repos.wearableData.eraseAllForUser(teamId, userId);
  const none = { created: 0, updated: 0, unchanged: 0 };
  return { summaries: none, samples: none, workout_streams: none, dropped, days: [], oldest: null, newest: null, events: 0 };
}

export async function ingestProviderData(deps: IngestDeps, req: IngestRequest): Promise<IngestResult> {
  const { repos } = deps;
  const { teamId, user, provider } = req;
  const now = new Date();
  const bounds = { start: user.ingestion_start, end: user.ingestion_end };
  const zone = user.fallback_time_zone?.id ?? null;
  const inBounds = (day: string) => (!bounds.start || day >= bounds.start) && (!bounds.end || day <= bounds.end);

  const summaries = req.data.summaries.filter((s) => inBounds(s.calendar_date));
  const sourceType = req.data.source_type || 'unknown';
  // Each sample's instant is read once: its offset, its local day (the bounds) and its document all use it.
  const samples: SampleInput[] = [];
  const sampleDocs: SampleDoc[] = [];
  const days = new Set(summaries.map((s) => s.calendar_date));
  let oldestMs = Number.POSITIVE_INFINITY;
  let newestMs = Number.NEGATIVE_INFINITY;
  for (const input of req.data.samples) {
    const timestamp = new Date(parseInstant(input.timestamp));
    const s = withOffset(input, zone, timestamp);
    const day = localDate(timestamp, s.timezone_offset ?? 0);
    if (!inBounds(day)) continue;
    days.add(day);
    oldestMs = Math.min(oldestMs, timestamp.getTime());
    newestMs = Math.max(newestMs, timestamp.getTime());
    samples.push(s);
    sampleDocs.push(toSampleDoc(teamId, user._id, provider, sourceType, s, timestamp, now));
  }
  const streams = req.data.workout_streams;
  const dropped = req.data.summaries.length - summaries.length + req.data.samples.length - sampleDocs.length;
  // 96 bits of the content hash: ample to tell one user's batches apart, and every stored sample carries it. Made of
  // the caller's content key where it has one (the bounds too: they choose which of its samples the batch keeps).
  const content = req.contentKey ? { contentKey: req.contentKey, bounds, zone, kept: sampleDocs.length } : { samples };
  const ingestKey = sha256(JSON.stringify({ teamId, userId: user._id, provider, sourceType, summaries, streams, ...content })).slice(0, 24);
  for (const doc of sampleDocs) doc.ingest_key = ingestKey;

  const summaryDocs = summaries.map((s) => toSummaryDoc(teamId, user, provider, sourceType, s, ingestKey, now, zone));
  const summaryOutcome = await upsertSummaries(summaryDocs, repos);
  const sampleOutcome = await upsertSamples(sampleDocs, repos);
  // Erased stays erased: asked after the writes, so either they landed before the erasure began (and it removes them)
  // or this sees it begun and removes them itself; nothing is published about such a user.
  if (!(await repos.users.takesData(teamId, user._id))) return dropForErasure(deps, teamId, user._id, dropped);
  for (const group of groupBy(sampleOutcome.announced, (d) => d.resource)) samplesIngested.inc({ resource: group[0].resource }, group.length);

  const source = sourceView(deps.providers, publicBaseUrl(deps.config), provider, sourceType);
  const envelope = { teamId, userId: user._id, clientUserId: user.client_user_id };
  const publishes: Promise<{ duplicate: boolean }>[] = [];
  if (req.announce) {
    for (const doc of summaryOutcome.announced) {
      publishes.push(
        deps.publisher.publish({
          ...envelope,
          eventType: `daily.data.${doc.resource}.${doc.change}`,
          data: summaryView(doc, source),
          idempotencyKey: `wearable:${doc.ingest_key}:${doc._id}:${doc.change}`,
        }),
      );
    }
    for (const event of sampleEvents(sampleOutcome.announced, deps, source, user._id)) {
      publishes.push(deps.publisher.publish({ ...envelope, ...event }));
    }
  }
  const published = (await Promise.all(publishes)) as { duplicate: boolean }[];
  const streamEvents = { count: 0 };
  const streamCounts = await saveStreams(deps, req, sourceType, summaryDocs, source, streamEvents);
  if (!(await repos.users.takesData(teamId, user._id))) return dropForErasure(deps, teamId, user._id, dropped);

  for (const d of summaryDocs) {
    oldestMs = Math.min(oldestMs, d.time.getTime());
    newestMs = Math.max(newestMs, d.time.getTime());
  }
  return {
    summaries: summaryOutcome.counts,
    samples: sampleOutcome.counts,
    workout_streams: streamCounts,
    dropped,
    days: [...days].sort(),
    oldest: Number.isFinite(oldestMs) ? new Date(oldestMs) : null,
    newest: Number.isFinite(newestMs) ? new Date(newestMs) : null,
    events: published.filter((p) => !p.duplicate).length + streamEvents.count,
  };
}

/**
 * Removes the samples of one resource a phone deleted in [from, to) (`sourceType` null: every source type of the
 * provider) and says so with one `daily.data.<resource>.updated` per source type, its `data` empty and `deleted`
 * naming each removed sample's timestamp. A deletion repeated removes nothing and publishes nothing. Nothing is
 * published about a user whose erasure has begun.
 */
export async function deleteProviderSamples(
  deps: IngestDeps,
  req: {
    teamId: string;
    user: UserDoc;
    provider: string;
    resource: string;
    /** A time range of one source type (null: every one), or the platform ids of the samples. */
    which: { sourceType: string | null; from: Date; to: Date } | { ids: string[] };
  },
): Promise<number> {
  const { teamId, user, provider, resource, which } = req;
  const removed =
    'ids' in which
      ? await deps.repos.wearableData.deleteSampleIds({ team_id: teamId, user_id: user._id, resource, provider }, which.ids)
      : await deps.repos.wearableData.deleteSamples(
          { team_id: teamId, user_id: user._id, resource, provider, source_type: which.sourceType },
          which.from,
          which.to,
        );
  if (!removed.length || !(await deps.repos.users.takesData(teamId, user._id))) return removed.length;
  const deletionId = randomUUID();
  for (const group of groupBy(removed, (r) => r.source_type)) {
    const sourceType = group[0].source_type;
    const source = sourceView(deps.providers, publicBaseUrl(deps.config), provider, sourceType);
    const deleted = group.map((r) => ({ timestamp: r.timestamp.toISOString(), type: sourceType }));
    await deps.publisher.publish({
      teamId,
      userId: user._id,
      clientUserId: user.client_user_id,
      eventType: `daily.data.${resource}.updated`,
      data: { data: [], deleted, source_id: sourceId(deps.providers, provider), source, user_id: user._id },
      // One deletion, one event: a retried call removes nothing and publishes nothing (a crash between the removal
      // and this publish loses the event, not data).
      idempotencyKey: `wearable-deleted:${deletionId}:${sourceType}`,
    });
  }
  return removed.length;
}

function withOffset(s: SampleInput, zone: string | null, timestamp: Date): SampleInput {
  if (s.timezone_offset !== undefined && s.timezone_offset !== null) return s;
  return { ...s, timezone_offset: zoneOffsetSeconds(zone, timestamp) };
}

function toSummaryDoc(
  teamId: string,
  user: UserDoc,
  provider: string,
  sourceType: string,
  s: SummaryInput,
  ingestKey: string,
  now: Date,
  zone: string | null,
): SummaryDoc {
  // Daily summaries are anchored at their calendar date (UTC midnight), so date-range reads select them by day.
  const time = DAILY.has(s.resource) ? new Date(`${s.calendar_date}T00:00:00Z`) : new Date(s.time);
  const fields = { ...s.fields };
  if (fields.timezone_offset === undefined || fields.timezone_offset === null) fields.timezone_offset = zoneOffsetSeconds(zone, time);
  return {
    _id: summaryId(teamId, user._id, provider, s.resource, s.source_key),
    team_id: teamId,
    user_id: user._id,
    resource: s.resource,
    provider,
    source_type: sourceType,
    source_key: s.source_key,
    calendar_date: s.calendar_date,
    time,
    data: fields,
    ingest_key: ingestKey,
    change: 'created',
    created_at: now,
    updated_at: now,
  };
}

/** A sample's document, its ingest key set once the batch's is known. */
function toSampleDoc(teamId: string, userId: string, provider: string, sourceType: string, s: SampleInput, timestamp: Date, now: Date): SampleDoc {
  const doc: SampleDoc = {
    _id: sampleKey(userId, s.resource, provider, sourceType, timestamp),
    team_id: teamId,
    user_id: userId,
    resource: s.resource,
    provider,
    source_type: sourceType,
    timestamp,
    unit: s.unit,
    type: s.type ?? null,
    timezone_offset: s.timezone_offset ?? null,
    ingest_key: '',
    change: 'created',
    created_at: now,
    updated_at: now,
  };
  if (s.value !== undefined) doc.value = s.value;
  if (s.systolic !== undefined) doc.systolic = s.systolic;
  if (s.diastolic !== undefined) doc.diastolic = s.diastolic;
  if (s.platform_id) doc.platform_id = s.platform_id;
  if (s.start) {
    doc.start = new Date(s.start);
    doc.end = new Date(s.end ?? s.start);
  }
  return doc;
}

const sameSummary = (a: SummaryDoc, b: SummaryDoc) =>
  a.time.getTime() === b.time.getTime() && a.calendar_date === b.calendar_date && a.source_type === b.source_type && canonical(a.data) === canonical(b.data);

const sameSample = (a: SampleDoc, b: SampleDoc) =>
  a.value === b.value &&
  a.systolic === b.systolic &&
  a.diastolic === b.diastolic &&
  a.unit === b.unit &&
  a.type === b.type &&
  a.timezone_offset === b.timezone_offset &&
  (a.platform_id ?? null) === (b.platform_id ?? null) &&
  a.start?.getTime() === b.start?.getTime() &&
  a.end?.getTime() === b.end?.getTime();

/** JSON with sorted keys: stored subdocuments may come back with their keys in another order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * Inserts the new summaries, replaces the changed ones and returns what to announce: the created and updated
 * documents, plus those this same batch wrote on an earlier try (found by their `ingest_key`).
 */
async function upsertSummaries(docs: SummaryDoc[], repos: Repositories): Promise<{ counts: Counts; announced: SummaryDoc[] }> {
  const data = repos.wearableData;
  const counts: Counts = { created: 0, updated: 0, unchanged: 0 };
  const unique = [...new Map(docs.map((d) => [d._id, d])).values()]; // the same key twice in a batch: the last one
  const existingIds = await data.insertNew(data.summaries, unique);
  const announced = unique.filter((d) => !existingIds.has(d._id));
  counts.created = announced.length;
  if (!existingIds.size) return { counts, announced };

  const stored = new Map((await data.getByIds(data.summaries, [...existingIds])).map((d) => [d._id, d]));
  const replacements: SummaryDoc[] = [];
  for (const doc of unique) {
    if (!existingIds.has(doc._id)) continue;
    const old = stored.get(doc._id);
    if (old && sameSummary(old, doc)) {
      // Written by this same batch before (a retry after a crash, or a resend): announced again under the same
      // idempotency keys, so an announcement lost in a crash is made and a repeat publishes nothing new.
      if (old.ingest_key === doc.ingest_key) announced.push(old);
      counts.unchanged += 1;
      continue;
    }
    replacements.push({ ...doc, change: 'updated', created_at: old?.created_at ?? doc.created_at });
  }
  await data.replaceAll(data.summaries, replacements);
  counts.updated += replacements.length;
  announced.push(...replacements);
  return { counts, announced };
}

/**
 * Writes samples into their day buckets (one conditional write per bucket: a changed value replaces the stored one)
 * and returns what to announce, as upsertSummaries does: created and updated samples, plus those this same
 * batch wrote on an earlier try.
 */
async function upsertSamples(docs: SampleDoc[], repos: Repositories): Promise<{ counts: Counts; announced: SampleDoc[] }> {
  const counts: Counts = { created: 0, updated: 0, unchanged: 0 };
  const announced: SampleDoc[] = [];
  const batchKey = docs[0]?.ingest_key; // one content hash per batch
  const writes = await repos.wearableData.writeSamples(docs, (stored, incoming) =>
    sameSample(stored, incoming) ? null : { ...incoming, change: 'updated', created_at: stored.created_at },
  );
  for (const write of writes) {
    counts[write.outcome] += 1;
    if (write.outcome !== 'unchanged') announced.push(write.sample);
    // Written by this same batch before (a retry after a crash, or a resend): announced again under the same keys.
    else if (write.stored!.ingest_key === batchKey) announced.push(write.stored!);
  }
  return { counts, announced };
}

/** Timeseries events per resource and change, split so each stays under the event size limit. */
function sampleEvents(docs: SampleDoc[], deps: IngestDeps, source: SourceView, userId: string) {
  const limit = deps.config.WEBHOOK_MAX_EVENT_BYTES * EVENT_FILL;
  const groups = new Map<string, SampleDoc[]>();
  for (const doc of docs) {
    const key = `${doc.resource}.${doc.change}`;
    groups.set(key, [...(groups.get(key) ?? []), doc]);
  }
  const events: { eventType: string; data: Record<string, unknown>; idempotencyKey: string }[] = [];
  // Keys are numbered in a fixed order (by resource and change), so a retried batch publishes under the same keys.
  for (const [key, group] of [...groups].sort(([a], [b]) => (a < b ? -1 : 1))) {
    group.sort((a, b) => a.timestamp.getTime() - b.timestamp.getTime() || (a._id < b._id ? -1 : 1));
    let chunk: Record<string, unknown>[] = [];
    let bytes = 0;
    const flush = () => {
      if (!chunk.length) return;
      events.push({
        eventType: `daily.data.${key}`,
        data: { data: chunk, source_id: sourceId(deps.providers, source.provider), source, user_id: userId },
        idempotencyKey: `wearable:${group[0].ingest_key}:${key}:${events.length}`,
      });
      chunk = [];
      bytes = 0;
    };
    for (const doc of group) {
      const view = sampleView(doc);
      const size = JSON.stringify(view).length + 1;
      if (bytes + size > limit) flush();
      chunk.push(view);
      bytes += size;
    }
    flush();
  }
  return events;
}

/** Stores each workout stream (whole, replaced when it changed) and announces it shallowly. */
async function saveStreams(
  deps: IngestDeps,
  req: IngestRequest,
  sourceType: string,
  batchSummaries: SummaryDoc[],
  source: SourceView,
  events: { count: number },
): Promise<Counts> {
  const counts: Counts = { created: 0, updated: 0, unchanged: 0 };
  if (!req.data.workout_streams.length) return counts;
  const { teamId, user, provider } = req;
  const ids = req.data.workout_streams.map((s) => summaryId(teamId, user._id, provider, 'workouts', s.workout_source_key));
  const hashes = await deps.repos.wearableData.findStreamHashes(ids);
  const now = new Date();
  for (const [i, input] of req.data.workout_streams.entries()) {
    const workoutId = ids[i];
    const hash = sha256(canonical(input.stream));
    const previous = hashes.get(workoutId);
    const change = previous === undefined ? 'created' : previous === hash ? null : 'updated';
    if (change === null) {
      counts.unchanged += 1;
      continue;
    }
    counts[change] += 1;
    // Announced before it is saved: a crash in between finds the stream still changed and publishes again
    // under the same key (a repeat the publisher answers with the stored event), so no announcement is lost.
    if (req.announce) {
      const workout =
        batchSummaries.find((s) => s._id === workoutId) ?? (await deps.repos.wearableData.getByIds(deps.repos.wearableData.summaries, [workoutId]))[0];
      const event = await deps.publisher.publish({
        teamId,
        userId: user._id,
        clientUserId: user.client_user_id,
        eventType: `daily.data.workout_stream.${change}`,
        data: {
          message: 'The workout stream is available: GET /v2/timeseries/workouts/{workout_id}/stream.',
          provider_id: String(workout?.data.provider_id ?? input.workout_source_key),
          sport: workout?.data.sport ?? { id: 0, name: 'Unknown', slug: 'unknown' },
          workout_id: workoutId,
          source: { ...source, type: sourceType },
          user_id: user._id,
        },
        idempotencyKey: `wearable:stream:${workoutId}:${hash}`,
      });
      if (!event.duplicate) events.count += 1;
    }
    await deps.repos.wearableData.saveStream({
      _id: workoutId,
      team_id: teamId,
      user_id: user._id,
      provider,
      content_hash: hash,
      stream: input.stream as unknown as Record<string, (number | null)[]>,
      created_at: now,
      updated_at: now,
    });
  }
  return counts;
}
