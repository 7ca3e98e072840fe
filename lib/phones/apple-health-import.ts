import { StringDecoder } from 'node:string_decoder';
import { groupBy } from '../platform/group-by';
import { canonicalTimeZone, DAY_MS, localDate, parseInstant, zoneOffsetSeconds } from '../platform/time';
import type { UserDoc } from '../users/store';
import { ingestProviderData, type IngestDeps } from '../wearables/ingest';
import type { SampleInput, SummaryInput } from '../wearables/model';
import { detached, exportDate, exportElements, type ExportElement } from './export-xml';
import { exportXmlInZip } from './export-zip';
import { emptyProgress, type AppleHealthImportDoc, type ImportProgress } from './imports-store';
import { healthKitConverter, mapRecord, type RawRecord } from './records';
import { healthKitSleepStage, healthKitSport, type SleepSegment, type SleepStage, sleepSummary, sleepsOf, workoutSummary } from './sleep-and-workouts';

/**
 * The import of one Apple Health export (`export.xml`, or `export.zip` holding it), read as a stream from the stored
 * upload and stored through the ingest path (lib/wearables/ingest.ts) as `apple_health_kit` data, silently (the import's
 * end publishes `historical.data.<resource>.created`). Stored by key, so importing the same file again changes nothing.
 *
 * The traps of the export (phones.md §3), handled here:
 * - Records inside a `Correlation` also stand at the top level: only the top-level ones are read, and a blood
 *   pressure correlation gives one reading of both values (its top-level halves are skipped).
 * - No sample UUIDs: samples are keyed by type, source type and start, as every sample without a platform id is.
 * - Watch, phone and apps write overlapping steps, energy, distance and floors: these are summed per hour and per
 *   source, and each hour takes one source (watch, then phone, then apps; by name within), the hourly statistics
 *   buckets the phone SDKs upload (`multiple_sources`), so an import and a phone's sync agree.
 * - Units (`Cal`, `kJ`, `mi`, `count/min` …) convert as a phone's records do (lib/phones/records.ts); `HKTimeZone`
 *   metadata is the zone a sample was taken in, else the offset its date was written with.
 * - Sleep-analysis samples become sleeps per source (stages as lib/phones/sleep-and-workouts.ts maps them); where a
 *   watch's staged night and the phone's time in bed overlap, the watch's is kept.
 * - Workouts take their totals from `WorkoutStatistics` (recent exports) or their own attributes (older ones);
 *   `ActivitySummary` rings give the day's active energy, completed by the day's hourly totals.
 */

/** Types summed into hourly buckets, one source per hour. */
const CUMULATIVE = new Set(['steps', 'calories_active', 'calories_basal', 'distance', 'floors_climbed']);
const HOUR_MS = 3_600_000;
/** Samples stored per ingest call. */
const BATCH = 5_000;

/** Days of hours per page of an arena. */
const PAGE_DAYS = 128;
const PAGE_HOURS = 24 * PAGE_DAYS;

/** Days per block of an arena's directory. */
const DIRECTORY_DAYS = 128;

/**
 * A source's hourly sums of one resource: a UTC day's 24 hours from `dayAt(day)`, in pages of typed arrays, found
 * through a directory of typed blocks of days (years of hours are a few bytes each, not an object or a map entry per
 * hour or per day; pages, not arrays grown by doubling, so an arena holds what it uses and is never copied: a long
 * export's arenas are its largest memory, and what the thread's heap holds is what its collector walks).
 */
class HourArena {
  private readonly directory = new Map<number, Int32Array>();
  private daysUsed = 0;
  private readonly pages: { value: Float64Array; offset: Int32Array; has: Uint8Array }[] = [];

  /** The index of the day's first hour, or -1 when it has none. */
  baseOf(day: number): number {
    const block = Math.floor(day / DIRECTORY_DAYS);
    return this.directory.get(block)?.[day - block * DIRECTORY_DAYS] ?? -1;
  }

  /** The index of the day's first hour, made on first use. */
  dayAt(day: number): number {
    const block = Math.floor(day / DIRECTORY_DAYS);
    let days = this.directory.get(block);
    if (!days) this.directory.set(block, (days = new Int32Array(DIRECTORY_DAYS).fill(-1)));
    let base = days[day - block * DIRECTORY_DAYS];
    if (base < 0) {
      base = this.daysUsed++ * 24;
      if (base % PAGE_HOURS === 0) {
        this.pages.push({ value: new Float64Array(PAGE_HOURS), offset: new Int32Array(PAGE_HOURS), has: new Uint8Array(PAGE_HOURS) });
      }
      days[day - block * DIRECTORY_DAYS] = base;
    }
    return base;
  }

  /** The days with hours, in no order. */
  *days(): Generator<number> {
    for (const [block, days] of this.directory) {
      for (let i = 0; i < DIRECTORY_DAYS; i++) if (days[i] >= 0) yield block * DIRECTORY_DAYS + i;
    }
  }

  /** Adds to hour `at`'s sum, its offset the last one given. */
  add(at: number, value: number, offset: number): void {
    const page = this.pages[Math.floor(at / PAGE_HOURS)];
    const i = at % PAGE_HOURS;
    page.value[i] += value;
    page.offset[i] = offset;
    page.has[i] = 1;
  }

  /** Hour `at`'s sum and offset, or null when nothing fell in it. */
  hour(at: number): { value: number; offset: number } | null {
    const page = this.pages[Math.floor(at / PAGE_HOURS)];
    const i = at % PAGE_HOURS;
    return page?.has[i] === 1 ? { value: page.value[i], offset: page.offset[i] } : null;
  }
}
const SLEEP_STAGES: readonly SleepStage[] = ['in_bed', 'asleep', 'awake', 'light', 'deep', 'rem', 'out_of_bed'];

/**
 * A source's sleep stages, kept to the end as columns: two instants and a stage number each in typed arrays, not an
 * object with two boxed numbers (a long export has hundreds of thousands, which the thread's collector would walk).
 */
class SleepColumns {
  private starts = new Float64Array(256);
  private ends = new Float64Array(256);
  private stages = new Uint8Array(256);
  private length = 0;

  push(start: number, end: number, stage: SleepStage): void {
    if (this.length === this.starts.length) {
      const grown = (from: Float64Array) => {
        const to = new Float64Array(from.length * 2);
        to.set(from);
        return to;
      };
      this.starts = grown(this.starts);
      this.ends = grown(this.ends);
      const stages = new Uint8Array(this.stages.length * 2);
      stages.set(this.stages);
      this.stages = stages;
    }
    this.starts[this.length] = start;
    this.ends[this.length] = end;
    this.stages[this.length] = SLEEP_STAGES.indexOf(stage);
    this.length++;
  }

  segments(): SleepSegment[] {
    return Array.from({ length: this.length }, (_, i) => ({ start: this.starts[i], end: this.ends[i], stage: SLEEP_STAGES[this.stages[i]] }));
  }
}
type SourceHours = { rank: number; name: string; unit: string; hours: HourArena };

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
  /** Per resource: its oldest and newest instants, its local days (day numbers: no string per day held), how many. */
  const perResource = new Map<string, { oldest: number; newest: number; days: Set<number>; sent: number }>();
  const pending = new Map<string, SampleInput[]>();
  /** Summaries waiting to be stored, with their source type (workouts go as they come; the rest at the end). */
  let summaries: { sourceType: string; summary: SummaryInput }[] = [];
  const cumulative = new Map<string, Map<string, SourceHours>>();
  const rings = new Map<string, number>();
  const sleepSources = new Map<string, { rank: number; name: string; segments: SleepColumns; offset: number }>();
  let pendingCount = 0;

  const note = (resource: string, at: number, offset: number, sent: number) => {
    let r = perResource.get(resource);
    if (!r) perResource.set(resource, (r = { oldest: at, newest: at, days: new Set(), sent: 0 }));
    r.oldest = Math.min(r.oldest, at);
    r.newest = Math.max(r.newest, at);
    r.days.add(Math.floor((at + offset * 1000) / DAY_MS));
    r.sent += sent;
  };
  const skip = (type: string) => {
    progress.skipped[type] = (progress.skipped[type] ?? 0) + 1;
  };
  // Batches are numbered in the order the file makes them (a retry reads the same file the same way): with the import's
  // id, the number is the batch's content key.
  let batches = 0;
  const store = async (sourceType: string, samples: SampleInput[], summaryBatch: SummaryInput[]) => {
    if (!samples.length && !summaryBatch.length) return;
    const result = await ingestProviderData(deps, {
      teamId: target.teamId,
      user: target.user,
      provider: 'apple_health_kit',
      data: { source_type: sourceType, samples, summaries: summaryBatch, workout_streams: [] },
      announce: false,
      contentKey: `apple-health-import:${target.doc._id}:${batches++}`,
    });
    for (const k of ['created', 'updated', 'unchanged'] as const) {
      progress.samples[k] += result.samples[k];
      progress.summaries[k] += result.summaries[k];
    }
    progress.dropped += result.dropped;
  };
  // One batch is stored while the next is read: the database works on one core while the parse goes on on the other.
  // Batches are stored in the order they were read (the next waits for the last), and a failure surfaces at the next
  // flush or the end.
  let storing: Promise<void> = Promise.resolve();
  const flush = async () => {
    const ready = [...pending];
    pending.clear();
    pendingCount = 0;
    await storing;
    storing = (async () => {
      for (const [sourceType, samples] of ready) await store(sourceType, samples, []);
    })();
    storing.catch(() => {}); // observed when awaited; not an unhandled rejection meanwhile
  };
  const flushSummaries = async () => {
    const batch = summaries;
    summaries = [];
    for (const group of groupBy(batch, (x) => x.sourceType)) {
      for (let i = 0; i < group.length; i += BATCH) {
        await store(
          group[0].sourceType,
          [],
          group.slice(i, i + BATCH).map((x) => x.summary),
        );
      }
    }
  };
  // What an element adds is kept, and stored by storeFull between elements once a batch is full: reading an element
  // is then plain code, not a promise per element.
  const addSummary = (sourceType: string, summary: SummaryInput) => {
    summaries.push({ sourceType, summary });
  };
  const add = (sourceType: string, sample: SampleInput) => {
    let list = pending.get(sourceType);
    if (!list) pending.set(sourceType, (list = []));
    list.push(sample);
    note(sample.resource, parseInstant(sample.timestamp), sample.timezone_offset ?? 0, 1);
    pendingCount++;
  };
  const storeFull = async () => {
    if (pendingCount >= BATCH) await flush();
    if (summaries.length >= BATCH) await flushSummaries();
  };

  // A source's name, once per distinct name as a string of its own: an attribute value is a slice of the text it was
  // read from, and a slice kept (a workout's key) would keep that whole stretch of the file in memory.
  const names = new Map<string, string>();
  const nameOf = (a: Record<string, string>) => {
    const raw = a.sourceName ?? '';
    let name = names.get(raw);
    if (name === undefined) names.set((name = detached(raw)), name);
    return name;
  };
  const zoneOf = (el: ExportElement) => el.children.find((c) => c.name === 'MetadataEntry' && c.attrs.key === 'HKTimeZone')?.attrs.value ?? null;
  /** The offset at `start` of the zone the element's `HKTimeZone` names, else the one its date was written with. */
  const offsetOf = (el: ExportElement, start: { iso: string; offset: number }) => {
    const zone = canonicalTimeZone(zoneOf(el) ?? '');
    return zone ? zoneOffsetSeconds(zone, new Date(start.iso)) : start.offset;
  };
  // Each record names its source and device (a long `<<HKDevice: …>>` text): their rank, once per pair.
  const ranks = new Map<string, Map<string, number>>();
  const rankOf = (a: Record<string, string>) => {
    const device = a.device ?? '';
    const name = a.sourceName ?? '';
    let byName = ranks.get(device);
    if (!byName) ranks.set(detached(device), (byName = new Map()));
    let rank = byName.get(name);
    if (rank === undefined) byName.set(detached(name), (rank = sourceRank(name, device)));
    return rank;
  };

  function record(el: ExportElement) {
    const a = el.attrs;
    if (a.type === 'HKCategoryTypeIdentifierSleepAnalysis') return sleepStage(el);
    const start = exportDate(a.startDate);
    if (!start) return skip(a.type ?? 'Record');
    const end = exportDate(a.endDate);
    const rank = rankOf(a);
    const raw: RawRecord = {
      type: a.type,
      value: num(a.value),
      unit: a.unit,
      start_date: start.iso,
      end_date: end?.iso ?? start.iso,
      // What the mapping reads of the device: a watch's or not (the rank's own test, on the same text).
      product_type: rank === 0 ? 'watch' : '',
      metadata: { HKTimeZone: zoneOf(el) },
    };
    // The mapping of a phone's raw records (types not mapped are skipped); the date's own offset where no HKTimeZone.
    const outcome = mapRecord('apple_health_kit', raw, null);
    if (!('samples' in outcome)) return skip(a.type);
    for (const m of outcome.samples) {
      const offset = m.timezoneOffset ?? start.offset;
      if (CUMULATIVE.has(m.resource)) {
        accumulate(m.resource, m.unit, nameOf(a), rank, parseInstant(m.start), parseInstant(m.end ?? m.start), m.value, offset);
        continue;
      }
      add(sourceTypeOfRank[rank], {
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
    if (!source) sources.set(sourceName, (source = { rank, name: sourceName, unit, hours: new HourArena() }));
    const span = end - start;
    for (let hour = Math.floor(start / HOUR_MS) * HOUR_MS; hour < Math.max(end, start + 1); hour += HOUR_MS) {
      const share = span > 0 ? (Math.min(end, hour + HOUR_MS) - Math.max(start, hour)) / span : 1;
      const index = hour / HOUR_MS;
      const dayNumber = Math.floor(index / 24);
      source.hours.add(source.hours.dayAt(dayNumber) + (index - dayNumber * 24), value * share, offset);
    }
  }

  function correlation(el: ExportElement) {
    if (el.attrs.type !== 'HKCorrelationTypeIdentifierBloodPressure') return skip(el.attrs.type ?? 'Correlation');
    const part = (type: string) => num(el.children.find((c) => c.name === 'Record' && c.attrs.type === type)?.attrs.value);
    const systolic = part('HKQuantityTypeIdentifierBloodPressureSystolic');
    const diastolic = part('HKQuantityTypeIdentifierBloodPressureDiastolic');
    const start = exportDate(el.attrs.startDate);
    if (!start || !Number.isFinite(systolic) || !Number.isFinite(diastolic)) return skip(el.attrs.type);
    add(sourceTypeOfRank[rankOf(el.attrs)], {
      resource: 'blood_pressure',
      timestamp: new Date(start.iso).toISOString(),
      systolic,
      diastolic,
      unit: 'mmHg',
      timezone_offset: offsetOf(el, start),
    });
  }

  function workout(el: ExportElement) {
    const a = el.attrs;
    const start = exportDate(a.startDate);
    const end = exportDate(a.endDate);
    if (!start || !end) return skip('Workout');
    const startMs = parseInstant(start.iso);
    const offset = offsetOf(el, start);
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
    const sourceKey = `${nameOf(a)}:${start.iso}`;
    addSummary(
      sourceTypeOfRank[rankOf(a)],
      workoutSummary({
        sourceKey,
        start: startMs,
        end: parseInstant(end.iso),
        offset,
        sport: healthKitSport(a.workoutActivityType),
        // Recent exports keep totals in WorkoutStatistics; older ones in the workout's own attributes.
        calories:
          statistic('HKQuantityTypeIdentifierActiveEnergyBurned', 'sum') ??
          fromAttr('totalEnergyBurned', 'totalEnergyBurnedUnit', 'HKQuantityTypeIdentifierActiveEnergyBurned'),
        distance:
          statistic('HKQuantityTypeIdentifierDistanceWalkingRunning', 'sum') ??
          statistic('HKQuantityTypeIdentifierDistanceCycling', 'sum') ??
          fromAttr('totalDistance', 'totalDistanceUnit', 'HKQuantityTypeIdentifierDistanceWalkingRunning'),
        averageHr: statistic('HKQuantityTypeIdentifierHeartRate', 'average'),
        maxHr: statistic('HKQuantityTypeIdentifierHeartRate', 'maximum'),
        steps: statistic('HKQuantityTypeIdentifierStepCount', 'sum'),
      }),
    );
    note('workouts', startMs, offset, 1);
  }

  /** A sleep-analysis sample: kept with its source until the end, when each source's stages become sleeps. */
  function sleepStage(el: ExportElement) {
    const a = el.attrs;
    const start = exportDate(a.startDate);
    const end = exportDate(a.endDate);
    const stage = healthKitSleepStage(a.value);
    if (!start || !end || !stage) return skip(a.type);
    const name = nameOf(a);
    let source = sleepSources.get(name);
    if (!source) sleepSources.set(name, (source = { rank: rankOf(a), name, segments: new SleepColumns(), offset: start.offset }));
    source.segments.push(parseInstant(start.iso), parseInstant(end.iso), stage);
    source.offset = offsetOf(el, start);
  }

  /** Each source's sleeps; where sources overlap (a watch's staged night, the phone's time in bed) the better one only. */
  async function storeSleeps() {
    // The nights kept from the sources before this one: disjoint, by start (so by end too): an overlap is found by
    // bisection (a long export has tens of thousands of nights per source: comparing each with each took minutes).
    let kept: { start: number; end: number }[] = [];
    const overlapsKept = (start: number, end: number) => {
      let low = 0;
      let high = kept.length;
      while (low < high) {
        const mid = (low + high) >> 1;
        if (kept[mid].end <= start) low = mid + 1;
        else high = mid;
      }
      return low < kept.length && kept[low].start < end;
    };
    const ranked = [...sleepSources.values()].sort((x, y) => x.rank - y.rank || (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
    for (const source of ranked) {
      // A source's own nights never overlap one another (sleepsOf parts them at gaps).
      const added: { start: number; end: number }[] = [];
      for (const night of sleepsOf(source.segments.segments())) {
        const start = Math.min(...night.map((s) => s.start));
        const end = Math.max(...night.map((s) => s.end));
        if (overlapsKept(start, end)) continue;
        added.push({ start, end });
        const sourceType = sourceTypeOfRank[source.rank];
        summaries.push({
          sourceType,
          summary: sleepSummary(night, source.offset, { sourceKey: `${source.name}:${new Date(start).toISOString()}`, sourceType }),
        });
        note('sleep', start, source.offset, 1);
        if (summaries.length >= BATCH) await flushSummaries();
      }
      kept = [...kept, ...added].sort((x, y) => x.start - y.start);
    }
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
      const dayNumbers = new Set<number>();
      for (const s of ranked) for (const d of s.hours.days()) dayNumbers.add(d);
      for (const dayNumber of [...dayNumbers].sort((x, y) => x - y)) {
        for (let slot = 0; slot < 24; slot++) {
          let best: SourceHours | undefined;
          let sum: { value: number; offset: number } | null = null;
          for (const x of ranked) {
            const base = x.hours.baseOf(dayNumber);
            sum = base < 0 ? null : x.hours.hour(base + slot);
            if (sum) {
              best = x;
              break;
            }
          }
          if (!best || !sum) continue;
          const hour = (dayNumber * 24 + slot) * HOUR_MS;
          const offset = sum.offset;
          const value = round(sum.value);
          const at = new Date(hour).toISOString();
          add('multiple_sources', {
            resource,
            timestamp: at,
            start: at,
            end: new Date(hour + HOUR_MS).toISOString(),
            value,
            unit: best.unit,
            type: 'multiple_sources',
            timezone_offset: offset,
          });
          if (pendingCount >= BATCH) await flush();
          const day = localDate(new Date(hour), offset);
          let d = days.get(day);
          if (!d) days.set(day, (d = { offset, totals: {} }));
          d.totals[resource] = (d.totals[resource] ?? 0) + value;
        }
      }
    }
    for (const day of rings.keys()) if (!days.has(day)) days.set(day, { offset: 0, totals: {} });
    for (const [day, { offset, totals }] of days) {
      const active = rings.get(day) ?? totals.calories_active;
      const summary: SummaryInput = {
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
      };
      summaries.push({ sourceType: 'multiple_sources', summary });
      note('activity', Date.parse(`${day}T12:00:00Z`), 0, 1);
      if (summaries.length >= BATCH) await flushSummaries();
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
  try {
    for await (const elements of exportElements(text())) {
      for (const el of elements) {
        if (el.name === 'ExportDate' || el.name === 'Me') continue;
        progress.records_read++;
        if (el.name === 'Record') record(el);
        else if (el.name === 'Correlation') correlation(el);
        else if (el.name === 'Workout') workout(el);
        else if (el.name === 'ActivitySummary') activitySummary(el);
        else skip(el.name);
        if (pendingCount >= BATCH || summaries.length >= BATCH) await storeFull();
        if (++sinceReport >= 20_000) {
          sinceReport = 0;
          await run.onProgress(progress);
        }
      }
    }
  } catch (err) {
    await storing.catch(() => {}); // a file that turns out unreadable ends after the batch in flight, not beside it
    throw err;
  }
  await storeCumulative();
  await storeSleeps();
  await flush();
  await storing;
  await flushSummaries();
  await run.onProgress(progress);
  const resources = [...perResource].map(([resource, r]) => ({
    resource,
    oldest: new Date(r.oldest).toISOString(),
    newest: new Date(r.newest).toISOString(),
    days: [...r.days].sort((x, y) => x - y).map((day) => localDate(new Date(day * DAY_MS), 0)),
    sent: r.sent,
  }));
  return { progress, resources };
}
