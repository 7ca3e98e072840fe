import { StringDecoder } from 'node:string_decoder';
import { canonicalTimeZone, isoLocal, localDate, zoneOffsetSeconds } from '../platform/time';
import type { UserDoc } from '../users/store';
import { ingestProviderData, type IngestDeps } from '../wearables/ingest';
import { NO_WORKOUT_METRICS, type SampleInput, type SummaryInput } from '../wearables/model';
import { humanizeActivity, sportOf } from '../wearables/providers/oura/sports';
import { exportDate, exportElements, type ExportElement } from './export-xml';
import { exportXmlInZip } from './export-zip';
import { emptyProgress, type AppleHealthImportDoc, type ImportProgress } from './imports-store';
import { healthKitConverter, mapRecord, type RawRecord } from './records';

/**
 * The import of one Apple Health export (`export.xml`, or `export.zip` holding it), read as a stream from the stored
 * upload and stored through the ingest path (lib/wearables/ingest.ts) as `apple_health_kit` data, silently (the import's
 * end publishes `historical.data.<resource>.created`). Stored by key, so importing the same file again changes nothing.
 *
 * The traps of the export (phones.md §3), handled here:
 * - Records inside a `Correlation` also stand at the top level: only the top-level ones are read, and a blood
 *   pressure correlation gives one reading of both values (its top-level halves are skipped).
 * - No sample UUIDs: samples are keyed by type, source type and start (and end, for intervals), as every sample is.
 * - Watch, phone and apps write overlapping steps, energy, distance and floors: these are summed per hour and per
 *   source, and each hour takes one source (watch, then phone, then apps; by name within), the hourly statistics
 *   buckets the phone SDKs upload (`multiple_sources`), so an import and a phone's sync agree.
 * - Units (`Cal`, `kJ`, `mi`, `count/min` …) convert as a phone's records do (lib/phones/records.ts); `HKTimeZone`
 *   metadata is the zone a sample was taken in, else the offset its date was written with.
 * - Workouts take their totals from `WorkoutStatistics` (recent exports) or their own attributes (older ones);
 *   `ActivitySummary` rings give the day's active energy, completed by the day's hourly totals.
 */

/** Types summed into hourly buckets, one source per hour. */
const CUMULATIVE = new Set(['steps', 'calories_active', 'calories_basal', 'distance', 'floors_climbed']);
const HOUR_MS = 3_600_000;
/** Samples stored per ingest call. */
const BATCH = 5_000;

type Bucket = { value: number; offset: number };
type SourceHours = { rank: number; name: string; unit: string; hours: Map<number, Bucket> };

const sourceRank = (name: string, device: string) => (/watch/i.test(`${device} ${name}`) ? 0 : /iphone/i.test(`${device} ${name}`) ? 1 : 2);
const sourceTypeOfRank = ['watch', 'phone', 'app'];

const num = (v: string | undefined) => (v === undefined || v === '' ? Number.NaN : Number(v));
const round = (v: number, digits = 3) => Math.round(v * 10 ** digits) / 10 ** digits;

export interface ImportRun {
  /** Bytes of the stored upload, for a zip's central directory and its entry. */
  upload: Parameters<typeof exportXmlInZip>[0];
  /** Called every so often with the progress so far (stored for introspection, and heartbeats). */
  onProgress(progress: ImportProgress): Promise<void>;
}

/** What the import stored, per resource: for the historical events and the history's introspection. */
export interface ImportedResource {
  resource: string;
  oldest: string;
  newest: string;
  days: string[];
  sent: number;
}

export async function importAppleHealthExport(
  deps: IngestDeps,
  target: { teamId: string; user: UserDoc; doc: AppleHealthImportDoc },
  run: ImportRun,
): Promise<{ progress: ImportProgress; resources: ImportedResource[] }> {
  // A retried import reads the file from its start again: what it stored before is found unchanged, counted afresh.
  const progress = emptyProgress();
  const perResource = new Map<string, { oldest: number; newest: number; days: Set<string>; sent: number }>();
  const pending = new Map<string, SampleInput[]>();
  const summaries: SummaryInput[] = [];
  const cumulative = new Map<string, Map<string, SourceHours>>();
  const rings = new Map<string, number>();
  let pendingCount = 0;

  const note = (resource: string, at: number, offset: number, sent: number) => {
    let r = perResource.get(resource);
    if (!r) perResource.set(resource, (r = { oldest: at, newest: at, days: new Set(), sent: 0 }));
    r.oldest = Math.min(r.oldest, at);
    r.newest = Math.max(r.newest, at);
    r.days.add(localDate(new Date(at), offset));
    r.sent += sent;
  };
  const skip = (type: string) => {
    progress.skipped[type] = (progress.skipped[type] ?? 0) + 1;
  };
  const store = async (sourceType: string, samples: SampleInput[], summaryBatch: SummaryInput[]) => {
    if (!samples.length && !summaryBatch.length) return;
    const result = await ingestProviderData(deps, {
      teamId: target.teamId,
      user: target.user,
      provider: 'apple_health_kit',
      data: { source_type: sourceType, samples, summaries: summaryBatch, workout_streams: [] },
      announce: false,
    });
    for (const k of ['created', 'updated', 'unchanged'] as const) {
      progress.samples[k] += result.samples[k];
      progress.summaries[k] += result.summaries[k];
    }
    progress.dropped += result.dropped;
  };
  const flush = async () => {
    for (const [sourceType, samples] of pending) await store(sourceType, samples, []);
    pending.clear();
    pendingCount = 0;
  };
  const add = async (sourceType: string, sample: SampleInput) => {
    let list = pending.get(sourceType);
    if (!list) pending.set(sourceType, (list = []));
    list.push(sample);
    note(sample.resource, Date.parse(sample.timestamp), sample.timezone_offset ?? 0, 1);
    if (++pendingCount >= BATCH) await flush();
  };

  const zoneOf = (el: ExportElement) => el.children.find((c) => c.name === 'MetadataEntry' && c.attrs.key === 'HKTimeZone')?.attrs.value ?? null;

  async function record(el: ExportElement) {
    const a = el.attrs;
    const start = exportDate(a.startDate);
    const end = exportDate(a.endDate);
    const converter = healthKitConverter(a.type);
    if (!converter || !start) return skip(a.type ?? 'Record');
    const raw: RawRecord = {
      type: a.type,
      value: num(a.value),
      unit: a.unit,
      start_date: start.iso,
      end_date: end?.iso ?? start.iso,
      product_type: `${a.device ?? ''} ${a.sourceName ?? ''}`,
      metadata: { HKTimeZone: zoneOf(el) },
    };
    const outcome = mapRecord('apple_health_kit', raw, null);
    if (!('samples' in outcome)) return skip(a.type);
    const rank = sourceRank(a.sourceName ?? '', a.device ?? '');
    for (const m of outcome.samples) {
      const offset = m.timezoneOffset ?? start.offset;
      if (CUMULATIVE.has(m.resource)) {
        accumulate(m.resource, m.unit, a.sourceName ?? '', rank, Date.parse(m.start), Date.parse(m.end ?? m.start), m.value, offset);
        continue;
      }
      await add(sourceTypeOfRank[rank], {
        resource: m.resource,
        timestamp: m.start,
        ...(m.end ? { start: m.start, end: m.end } : {}),
        value: m.value,
        unit: m.unit,
        timezone_offset: offset,
      });
    }
  }

  /** A cumulative sample's value, spread over the hours it covers in proportion to the time in each. */
  function accumulate(resource: string, unit: string, sourceName: string, rank: number, start: number, end: number, value: number, offset: number) {
    let sources = cumulative.get(resource);
    if (!sources) cumulative.set(resource, (sources = new Map()));
    let source = sources.get(sourceName);
    if (!source) sources.set(sourceName, (source = { rank, name: sourceName, unit, hours: new Map() }));
    const span = end - start;
    for (let hour = Math.floor(start / HOUR_MS) * HOUR_MS; hour < Math.max(end, start + 1); hour += HOUR_MS) {
      const share = span > 0 ? (Math.min(end, hour + HOUR_MS) - Math.max(start, hour)) / span : 1;
      const bucket = source.hours.get(hour);
      if (bucket) {
        bucket.value += value * share;
        bucket.offset = offset;
      } else source.hours.set(hour, { value: value * share, offset });
    }
  }

  async function correlation(el: ExportElement) {
    if (el.attrs.type !== 'HKCorrelationTypeIdentifierBloodPressure') return skip(el.attrs.type ?? 'Correlation');
    const part = (type: string) => num(el.children.find((c) => c.name === 'Record' && c.attrs.type === type)?.attrs.value);
    const systolic = part('HKQuantityTypeIdentifierBloodPressureSystolic');
    const diastolic = part('HKQuantityTypeIdentifierBloodPressureDiastolic');
    const start = exportDate(el.attrs.startDate);
    if (!start || !Number.isFinite(systolic) || !Number.isFinite(diastolic)) return skip(el.attrs.type);
    const zone = zoneOf(el);
    const offset = (zone ? zoneOffset(zone, start.iso) : null) ?? start.offset;
    await add(sourceTypeOfRank[sourceRank(el.attrs.sourceName ?? '', el.attrs.device ?? '')], {
      resource: 'blood_pressure',
      timestamp: new Date(start.iso).toISOString(),
      systolic,
      diastolic,
      unit: 'mmHg',
      timezone_offset: offset,
    });
  }

  function workout(el: ExportElement) {
    const a = el.attrs;
    const start = exportDate(a.startDate);
    const end = exportDate(a.endDate);
    if (!start || !end) return skip('Workout');
    const zone = zoneOf(el);
    const startMs = Date.parse(start.iso);
    const endMs = Date.parse(end.iso);
    const offset = (zone ? zoneOffset(zone, start.iso) : null) ?? start.offset;
    const statistic = (type: string, field: 'sum' | 'average' | 'maximum') => {
      const s = el.children.find((c) => c.name === 'WorkoutStatistics' && c.attrs.type === type);
      const value = num(s?.attrs[field]);
      if (!s || !Number.isFinite(value)) return null;
      const convert = healthKitConverter(type)?.from[s.attrs.unit ?? ''];
      return convert ? convert(value) : null;
    };
    const fromAttr = (valueAttr: string, unitAttr: string, type: string) => {
      const value = num(a[valueAttr]);
      const convert = healthKitConverter(type)?.from[a[unitAttr] ?? ''];
      return Number.isFinite(value) && convert ? convert(value) : null;
    };
    const calories =
      statistic('HKQuantityTypeIdentifierActiveEnergyBurned', 'sum') ??
      fromAttr('totalEnergyBurned', 'totalEnergyBurnedUnit', 'HKQuantityTypeIdentifierActiveEnergyBurned');
    const distance =
      statistic('HKQuantityTypeIdentifierDistanceWalkingRunning', 'sum') ??
      statistic('HKQuantityTypeIdentifierDistanceCycling', 'sum') ??
      fromAttr('totalDistance', 'totalDistanceUnit', 'HKQuantityTypeIdentifierDistanceWalkingRunning');
    const averageHr = statistic('HKQuantityTypeIdentifierHeartRate', 'average');
    const maxHr = statistic('HKQuantityTypeIdentifierHeartRate', 'maximum');
    const steps = statistic('HKQuantityTypeIdentifierStepCount', 'sum');
    const activity = (a.workoutActivityType ?? '').replace(/^HKWorkoutActivityType/, '');
    const snake = activity.replace(/([a-z])([A-Z])/g, '$1_$2').toLowerCase();
    const sport = sportOf(WORKOUT_ALIASES[activity] ?? snake);
    const sourceKey = `${a.sourceName ?? ''}:${start.iso}`;
    const calendarDate = localDate(new Date(startMs), offset);
    summaries.push({
      resource: 'workouts',
      source_key: sourceKey,
      calendar_date: calendarDate,
      time: new Date(startMs).toISOString(),
      fields: {
        ...NO_WORKOUT_METRICS,
        title: sport.id ? sport.name : humanizeActivity(activity),
        timezone_offset: offset,
        calendar_date: calendarDate,
        time_start: isoLocal(startMs, offset),
        time_end: isoLocal(endMs, offset),
        sport,
        provider_id: sourceKey,
        average_hr: averageHr === null ? null : Math.round(averageHr),
        max_hr: maxHr === null ? null : Math.round(maxHr),
        calories: calories === null ? null : round(calories, 1),
        distance: distance === null ? null : round(distance, 1),
        moving_time: Math.round((endMs - startMs) / 1000),
        average_speed: distance !== null && endMs > startMs ? round(distance / ((endMs - startMs) / 1000), 2) : null,
        steps: steps === null ? null : Math.round(steps),
      },
    });
    note('workouts', startMs, offset, 1);
  }

  function activitySummary(el: ExportElement) {
    const day = el.attrs.dateComponents;
    if (!/^\d{4}-\d\d-\d\d$/.test(day ?? '')) return skip('ActivitySummary');
    const convert = healthKitConverter('HKQuantityTypeIdentifierActiveEnergyBurned')?.from[el.attrs.activeEnergyBurnedUnit ?? 'kcal'];
    const active = num(el.attrs.activeEnergyBurned);
    if (convert && Number.isFinite(active)) rings.set(day, convert(active));
  }

  /** Each hour of each cumulative resource, from its best source; and each day's activity (rings + hourly totals). */
  async function storeCumulative() {
    const days = new Map<string, { offset: number; totals: Record<string, number> }>();
    for (const [resource, sources] of cumulative) {
      const ranked = [...sources.values()].sort((x, y) => x.rank - y.rank || (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
      const hours = new Set<number>();
      for (const s of ranked) for (const h of s.hours.keys()) hours.add(h);
      for (const hour of [...hours].sort((x, y) => x - y)) {
        const best = ranked.find((s) => s.hours.has(hour))!;
        const bucket = best.hours.get(hour)!;
        const value = round(bucket.value);
        await add('multiple_sources', {
          resource,
          timestamp: new Date(hour).toISOString(),
          start: new Date(hour).toISOString(),
          end: new Date(hour + HOUR_MS).toISOString(),
          value,
          unit: best.unit,
          type: 'multiple_sources',
          timezone_offset: bucket.offset,
        });
        const day = localDate(new Date(hour), bucket.offset);
        let d = days.get(day);
        if (!d) days.set(day, (d = { offset: bucket.offset, totals: {} }));
        d.totals[resource] = (d.totals[resource] ?? 0) + value;
      }
    }
    for (const day of rings.keys()) if (!days.has(day)) days.set(day, { offset: 0, totals: {} });
    for (const [day, { offset, totals }] of days) {
      const active = rings.get(day) ?? totals.calories_active;
      summaries.push({
        resource: 'activity',
        source_key: day,
        calendar_date: day,
        time: new Date(Date.parse(`${day}T00:00:00Z`) - offset * 1000).toISOString(),
        fields: {
          calendar_date: day,
          calories_active: active === undefined ? null : round(active, 1),
          calories_total: active === undefined && totals.calories_basal === undefined ? null : round((active ?? 0) + (totals.calories_basal ?? 0), 1),
          steps: totals.steps === undefined ? null : Math.round(totals.steps),
          distance: totals.distance === undefined ? null : round(totals.distance, 1),
          daily_movement: totals.distance === undefined ? null : round(totals.distance, 1),
          floors_climbed: totals.floors_climbed === undefined ? null : Math.round(totals.floors_climbed),
          timezone_offset: offset,
        },
      });
      note('activity', Date.parse(`${day}T12:00:00Z`), 0, 1);
    }
  }

  const xml = target.doc.format === 'zip' ? await exportXmlInZip(run.upload) : run.upload.stream(0, run.upload.size);
  const decoder = new StringDecoder('utf8');
  async function* text() {
    for await (const bytes of xml as AsyncIterable<Buffer>) {
      progress.xml_bytes_read += bytes.length;
      yield decoder.write(bytes);
    }
    yield decoder.end();
  }
  let sinceReport = 0;
  for await (const el of exportElements(text())) {
    progress.records_read++;
    if (el.name === 'Record') await record(el);
    else if (el.name === 'Correlation') await correlation(el);
    else if (el.name === 'Workout') workout(el);
    else if (el.name === 'ActivitySummary') activitySummary(el);
    else if (el.name !== 'ExportDate' && el.name !== 'Me') skip(el.name);
    else progress.records_read--;
    if (++sinceReport >= 20_000) {
      sinceReport = 0;
      await run.onProgress(progress);
    }
  }
  await storeCumulative();
  await flush();
  for (let i = 0; i < summaries.length; i += BATCH) {
    const batch = summaries.slice(i, i + BATCH);
    await store('watch', [], batch);
  }
  await run.onProgress(progress);
  const resources = [...perResource].map(([resource, r]) => ({
    resource,
    oldest: new Date(r.oldest).toISOString(),
    newest: new Date(r.newest).toISOString(),
    days: [...r.days].sort(),
    sent: r.sent,
  }));
  return { progress, resources };
}

/** HealthKit names of workouts our sport names spell otherwise. */
const WORKOUT_ALIASES: Record<string, string> = {
  TraditionalStrengthTraining: 'strength_training',
  FunctionalStrengthTraining: 'strength_training',
  HighIntensityIntervalTraining: 'hiit',
  MixedCardio: 'hiit',
  StairClimbing: 'stair_climbing',
  Climbing: 'climbing',
  SocialDance: 'dance',
  CardioDance: 'dance',
  DownhillSkiing: 'skiing',
  CrossCountrySkiing: 'cross_country_skiing',
  PaddleSports: 'stand_up_paddling',
};

/** The offset of a sample's `HKTimeZone` at its time, when that names a zone. */
function zoneOffset(zone: string, iso: string): number | null {
  const canonical = canonicalTimeZone(zone);
  return canonical ? zoneOffsetSeconds(canonical, new Date(iso)) : null;
}
