import { crc32, deflateRawSync } from 'node:zlib';

/**
 * A generator of realistic Apple Health exports (`export.xml`, and `export.zip` around it) with the traps of
 * ../shared/reference/phones.md §3, and what an import of it must store (`expected`), computed here independently of
 * the importer:
 * - an Apple Watch, the iPhone and a third-party app writing overlapping steps, energy and distance (one source per
 *   hour wins: watch, then phone, then the app), some samples crossing an hour;
 * - blood-pressure `Correlation`s whose two records also stand at the top level (counted once);
 * - the malformed DTD iOS 16 wrote, and a stray `\x0b` in a source name;
 * - units `Cal`, `kcal`, `kJ`, `km`, `mi`, `lb`, `count/min`; dates written at -0500 while `HKTimeZone` says the
 *   user was in Tokyo for a stretch;
 * - workouts with `WorkoutStatistics`, `ActivitySummary` rings, records of types not imported.
 */

export interface ExportPlan {
  days: number;
  /** The last day (YYYY-MM-DD). */
  lastDay: string;
  seed?: number;
}

type ExpectedSleep = { deep: number; rem: number; light: number; awake: number };

export interface ExpectedImport {
  /** `resource|sourceType|startIso` → value (point samples: heartrate, weight, blood oxygen). */
  points: Map<string, number>;
  /** Blood pressure: startIso → [systolic, diastolic]. */
  bloodPressure: Map<string, [number, number]>;
  /** `resource|hourIso` → the winning source's value in that hour. */
  hourly: Map<string, number>;
  /** Workouts: startIso → { calories, distance, average_hr, max_hr, sport }. */
  workouts: Map<string, { calories: number; distance: number; average_hr: number; max_hr: number; sport: string }>;
  /** Sleeps (the watch's staged nights; the phone's overlapping time in bed is not another sleep): bedtime start → seconds. */
  sleeps: Map<string, { deep: number; rem: number; light: number; awake: number; total: number; duration: number }>;
  /** Activity rings: day → active kcal. */
  rings: Map<string, number>;
  /** HKTimeZone-marked heart-rate samples: startIso → offset seconds (Tokyo, +09:00). */
  zoned: Map<string, number>;
  /** Top-level elements that are imported or skipped (what progress.records_read counts). */
  elements: number;
  skippedTypes: Record<string, number>;
}

const HOUR = 3_600_000;
const WATCH = {
  sourceName: 'Ana\u000b’s Apple Watch',
  device: '&lt;&lt;HKDevice: 0x2837c1e00&gt;, name:Apple Watch, manufacturer:Apple Inc., model:Watch, hardware:Watch6,2, software:10.1&gt;',
};
const PHONE = {
  sourceName: 'Ana’s iPhone',
  device: '&lt;&lt;HKDevice: 0x2837c2a80&gt;, name:iPhone, manufacturer:Apple Inc., model:iPhone, hardware:iPhone14,2, software:17.1&gt;',
};
const APP = { sourceName: 'Pedometer++', device: '' };

/** iOS 16's inline DTD, with the malformations that broke strict parsers (an ATTLIST never closed, a stray `]`). */
const DTD = `<!DOCTYPE HealthData [
<!-- HealthKit Export Version: 14 -->
<!ELEMENT HealthData (ExportDate,Me,(Record|Correlation|Workout|ActivitySummary|ClinicalRecord|Audiogram|VisionPrescription)*)>
<!ATTLIST HealthData
  locale CDATA #REQUIRED
>
<!ELEMENT ExportDate EMPTY>
<!ATTLIST ExportDate
  value CDATA #REQUIRED
>
<!ELEMENT Record ((MetadataEntry|HeartRateVariabilityMetadataList)*)>
<!ATTLIST Record
  type          CDATA #REQUIRED
  unit          CDATA #IMPLIED
  value         CDATA #IMPLIED
  sourceName    CDATA #REQUIRED
  startDate     CDATA #REQUIRED
  endDate       CDATA #REQUIRED
<!ELEMENT Correlation ((MetadataEntry|Record)*)>
<!ATTLIST Correlation
  type          CDATA #REQUIRED
  startDate     CDATA #REQUIRED
  endDate       CDATA #REQUIRED
  startDate     CDATA #REQUIRED
>
<!ELEMENT Workout ((MetadataEntry|WorkoutEvent|WorkoutRoute|WorkoutStatistics)*)>
<!ATTLIST WorkoutActivity
  uuid CDATA #REQUIRED ]
>
]>
`;

/** mulberry32: a small seeded generator, so an export and its expectations are the same on every run. */
function random(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An instant as the export writes it, at a fixed offset (seconds). */
function exportDate(ms: number, offset: number): string {
  const local = new Date(ms + offset * 1000).toISOString();
  const sign = offset < 0 ? '-' : '+';
  const abs = Math.abs(offset);
  return `${local.slice(0, 10)} ${local.slice(11, 19)} ${sign}${String(Math.floor(abs / 3600)).padStart(2, '0')}${String((abs % 3600) / 60).padStart(2, '0')}`;
}

const iso = (ms: number) => new Date(ms).toISOString();
const round3 = (v: number) => Math.round(v * 1000) / 1000;

export function generateExport(plan: ExportPlan): { xml: string; expected: ExpectedImport } {
  const r = random(plan.seed ?? 7);
  const offset = -5 * 3600;
  const tokyo = 9 * 3600;
  const out: string[] = ['<?xml version="1.0" encoding="UTF-8"?>\n', DTD, '<HealthData locale="en_US">\n'];
  out.push(` <ExportDate value="${exportDate(Date.parse(`${plan.lastDay}T23:00:00Z`), offset)}"/>\n`);
  out.push(' <Me HKCharacteristicTypeIdentifierDateOfBirth="1988-04-12" HKCharacteristicTypeIdentifierBiologicalSex="HKBiologicalSexFemale"/>\n');
  const expected: ExpectedImport = {
    points: new Map(),
    bloodPressure: new Map(),
    hourly: new Map(),
    workouts: new Map(),
    sleeps: new Map(),
    rings: new Map(),
    zoned: new Map(),
    elements: 0,
    skippedTypes: {},
  };
  // Per resource, per source, per hour: the sum the source wrote there (spread by time over the hours it covers).
  const hours = new Map<string, Map<string, Map<number, number>>>();
  const spread = (resource: string, source: string, start: number, end: number, value: number) => {
    let bySource = hours.get(resource);
    if (!bySource) hours.set(resource, (bySource = new Map()));
    let byHour = bySource.get(source);
    if (!byHour) bySource.set(source, (byHour = new Map()));
    for (let h = Math.floor(start / HOUR) * HOUR; h < end; h += HOUR) {
      const share = (Math.min(end, h + HOUR) - Math.max(start, h)) / (end - start);
      byHour.set(h, (byHour.get(h) ?? 0) + value * share);
    }
  };
  const record = (
    src: { sourceName: string; device: string },
    type: string,
    unit: string,
    value: number | string,
    start: number,
    end: number,
    opts: { zone?: string; at?: number; indent?: string } = {},
  ) => {
    const at = opts.at ?? offset;
    const device = src.device ? ` device="${src.device}"` : '';
    const meta = opts.zone ? `>\n  <MetadataEntry key="HKTimeZone" value="${opts.zone}"/>\n </Record>` : '/>';
    return `${opts.indent ?? ' '}<Record type="${type}" sourceName="${src.sourceName}" sourceVersion="10.1"${device} unit="${unit}" creationDate="${exportDate(end, at)}" startDate="${exportDate(start, at)}" endDate="${exportDate(end, at)}" value="${value}"${meta}\n`;
  };
  const skipped = (type: string) => {
    expected.skippedTypes[type] = (expected.skippedTypes[type] ?? 0) + 1;
  };

  const first = Date.parse(`${plan.lastDay}T00:00:00Z`) - (plan.days - 1) * 86_400_000;
  for (let d = 0; d < plan.days; d++) {
    // Local midnight at -05:00.
    const dayStart = first + d * 86_400_000 - offset * 1000;
    const inTokyo = d % 100 >= 40 && d % 100 < 45;
    // Heart rate from the watch, a few a day; some days the watch says the user was in Tokyo (dates still -0500).
    for (let k = 0; k < 6; k++) {
      const t = dayStart + (k * 4 + 1) * HOUR + Math.floor(r() * 50) * 60_000 + k * 1000;
      const bpm = 50 + Math.floor(r() * 90);
      out.push(record(WATCH, 'HKQuantityTypeIdentifierHeartRate', 'count/min', bpm, t, t, { zone: inTokyo ? 'Asia/Tokyo' : undefined }));
      expected.points.set(`heartrate|watch|${iso(t)}`, bpm);
      if (inTokyo) expected.zoned.set(iso(t), tokyo);
      expected.elements++;
    }
    // Steps: the watch in some hours, the phone in overlapping hours, the app where neither is; some cross an hour.
    for (let h = 7; h < 22; h++) {
      const hourStart = dayStart + h * HOUR;
      const crossing = h % 5 === 0;
      const start = hourStart + (crossing ? 45 : 10) * 60_000;
      const end = start + (crossing ? 30 : 20) * 60_000;
      const watchSteps = 100 + Math.floor(r() * 900);
      if (h % 3 !== 2) {
        out.push(record(WATCH, 'HKQuantityTypeIdentifierStepCount', 'count', watchSteps, start, end));
        spread('steps', 'watch', start, end, watchSteps);
        expected.elements++;
      }
      const phoneSteps = 80 + Math.floor(r() * 800);
      out.push(record(PHONE, 'HKQuantityTypeIdentifierStepCount', 'count', phoneSteps, start + 60_000, end));
      spread('steps', 'phone', start + 60_000, end, phoneSteps);
      expected.elements++;
      if (h % 4 === 0) {
        const appSteps = 50 + Math.floor(r() * 500);
        out.push(record(APP, 'HKQuantityTypeIdentifierStepCount', 'count', appSteps, start, end));
        spread('steps', 'app', start, end, appSteps);
        expected.elements++;
      }
      // Active energy: the watch in kcal, the app in Cal (the same unit by another name).
      const kcal = Math.round(r() * 800) / 10;
      out.push(record(WATCH, 'HKQuantityTypeIdentifierActiveEnergyBurned', 'kcal', kcal, start, end));
      spread('calories_active', 'watch', start, end, kcal);
      const cal = Math.round(r() * 600) / 10;
      out.push(record(APP, 'HKQuantityTypeIdentifierActiveEnergyBurned', 'Cal', cal, start, end));
      spread('calories_active', 'app', start, end, cal);
      expected.elements += 2;
      // Distance: the phone in miles, the watch in km on even hours.
      const miles = Math.round(r() * 100) / 100;
      out.push(record(PHONE, 'HKQuantityTypeIdentifierDistanceWalkingRunning', 'mi', miles, start, end));
      spread('distance', 'phone', start, end, miles * 1609.344);
      expected.elements++;
      if (h % 2 === 0) {
        const km = Math.round(r() * 200) / 100;
        out.push(record(WATCH, 'HKQuantityTypeIdentifierDistanceWalkingRunning', 'km', km, start, end));
        spread('distance', 'watch', start, end, km * 1000);
        expected.elements++;
      }
    }
    // Blood pressure every 7th day: a correlation, and its two records at the top level too.
    if (d % 7 === 3) {
      const t = dayStart + 8 * HOUR;
      const sys = 110 + Math.floor(r() * 30);
      const dia = 70 + Math.floor(r() * 15);
      out.push(record(PHONE, 'HKQuantityTypeIdentifierBloodPressureSystolic', 'mmHg', sys, t, t));
      out.push(record(PHONE, 'HKQuantityTypeIdentifierBloodPressureDiastolic', 'mmHg', dia, t, t));
      out.push(
        ` <Correlation type="HKCorrelationTypeIdentifierBloodPressure" sourceName="${PHONE.sourceName}" sourceVersion="17.1" creationDate="${exportDate(t, offset)}" startDate="${exportDate(t, offset)}" endDate="${exportDate(t, offset)}">\n`,
        record(PHONE, 'HKQuantityTypeIdentifierBloodPressureDiastolic', 'mmHg', dia, t, t, { indent: '  ' }),
        record(PHONE, 'HKQuantityTypeIdentifierBloodPressureSystolic', 'mmHg', sys, t, t, { indent: '  ' }),
        ' </Correlation>\n',
      );
      expected.bloodPressure.set(iso(t), [sys, dia]);
      skipped('HKQuantityTypeIdentifierBloodPressureSystolic');
      skipped('HKQuantityTypeIdentifierBloodPressureDiastolic');
      expected.elements += 3;
    }
    // Weight in pounds every 10th day; a type not imported (dietary water) every day.
    if (d % 10 === 0) {
      const t = dayStart + 7 * HOUR;
      const lb = Math.round((140 + r() * 20) * 10) / 10;
      out.push(record(PHONE, 'HKQuantityTypeIdentifierBodyMass', 'lb', lb, t, t));
      expected.points.set(`weight|phone|${iso(t)}`, lb * 0.45359237);
      expected.elements++;
    }
    const water = dayStart + 12 * HOUR;
    out.push(record(APP, 'HKQuantityTypeIdentifierDietaryWater', 'mL', 250, water, water));
    skipped('HKQuantityTypeIdentifierDietaryWater');
    expected.elements++;
    // A workout every third day, its totals in WorkoutStatistics.
    if (d % 3 === 0) {
      const start = dayStart + 18 * HOUR;
      const end = start + 40 * 60_000;
      const kcal = Math.round((250 + r() * 200) * 10) / 10;
      const km = Math.round((4 + r() * 6) * 100) / 100;
      const avg = 130 + Math.floor(r() * 30);
      const max = avg + 20;
      const running = d % 2 === 0;
      out.push(
        ` <Workout workoutActivityType="HKWorkoutActivityType${running ? 'Running' : 'TraditionalStrengthTraining'}" duration="40" durationUnit="min" sourceName="${WATCH.sourceName}" sourceVersion="10.1" device="${WATCH.device}" creationDate="${exportDate(end, offset)}" startDate="${exportDate(start, offset)}" endDate="${exportDate(end, offset)}">\n`,
        '  <MetadataEntry key="HKIndoorWorkout" value="0"/>\n',
        `  <WorkoutEvent type="HKWorkoutEventTypeSegment" date="${exportDate(start, offset)}" duration="20" durationUnit="min"/>\n`,
        `  <WorkoutStatistics type="HKQuantityTypeIdentifierActiveEnergyBurned" startDate="${exportDate(start, offset)}" endDate="${exportDate(end, offset)}" sum="${kcal}" unit="Cal"/>\n`,
        `  <WorkoutStatistics type="HKQuantityTypeIdentifierDistanceWalkingRunning" startDate="${exportDate(start, offset)}" endDate="${exportDate(end, offset)}" sum="${km}" unit="km"/>\n`,
        `  <WorkoutStatistics type="HKQuantityTypeIdentifierHeartRate" startDate="${exportDate(start, offset)}" endDate="${exportDate(end, offset)}" average="${avg}" minimum="${avg - 30}" maximum="${max}" unit="count/min"/>\n`,
        '  <WorkoutRoute sourceName="Ana’s Apple Watch" sourceVersion="10.1"><FileReference path="/workout-routes/route_1.gpx"/></WorkoutRoute>\n',
        ' </Workout>\n',
      );
      expected.workouts.set(iso(start), {
        calories: kcal,
        distance: Math.round(km * 1000 * 10) / 10,
        average_hr: avg,
        max_hr: max,
        sport: running ? 'running' : 'strength_training',
      });
      expected.elements++;
    }
    // The night from this day's evening: the watch's stages, and the phone's time in bed around them.
    if (d % 2 === 0) {
      const bed = dayStart + 23 * HOUR;
      const stages: [string, keyof ExpectedSleep][] = [
        ['AsleepCore', 'light'],
        ['AsleepDeep', 'deep'],
        ['AsleepCore', 'light'],
        ['AsleepREM', 'rem'],
        ['Awake', 'awake'],
        ['AsleepCore', 'light'],
        ['AsleepDeep', 'deep'],
        ['AsleepREM', 'rem'],
      ];
      const night = { deep: 0, rem: 0, light: 0, awake: 0, total: 0, duration: 0 };
      let t = bed;
      for (const [value, stage] of stages) {
        const minutes = 20 + Math.floor(r() * 60);
        out.push(
          record(WATCH, 'HKCategoryTypeIdentifierSleepAnalysis', '', `HKCategoryValueSleepAnalysis${value}`, t, t + minutes * 60_000).replace(' unit=""', ''),
        );
        night[stage] += minutes * 60;
        t += minutes * 60_000;
        expected.elements++;
      }
      night.total = night.deep + night.rem + night.light;
      night.duration = (t - bed) / 1000;
      out.push(
        record(PHONE, 'HKCategoryTypeIdentifierSleepAnalysis', '', 'HKCategoryValueSleepAnalysisInBed', bed - 15 * 60_000, t + 10 * 60_000).replace(
          ' unit=""',
          '',
        ),
      );
      expected.elements++;
      expected.sleeps.set(iso(bed), night);
    }
    // The day's rings, in Cal or kcal.
    const day = new Date(dayStart + offset * 1000).toISOString().slice(0, 10);
    const ring = Math.round(r() * 9000) / 10;
    out.push(
      ` <ActivitySummary dateComponents="${day}" activeEnergyBurned="${ring}" activeEnergyBurnedGoal="500" activeEnergyBurnedUnit="${d % 2 ? 'Cal' : 'kcal'}" appleMoveTime="0" appleMoveTimeGoal="0" appleExerciseTime="${Math.floor(r() * 60)}" appleExerciseTimeGoal="30" appleStandHours="${Math.floor(r() * 14)}" appleStandHoursGoal="12"/>\n`,
    );
    expected.rings.set(day, ring);
    expected.elements++;
  }
  out.push('</HealthData>\n');

  const rank = ['watch', 'phone', 'app'];
  for (const [resource, bySource] of hours) {
    const all = new Set<number>();
    for (const byHour of bySource.values()) for (const h of byHour.keys()) all.add(h);
    for (const h of all) {
      const source = rank.find((s) => bySource.get(s)?.has(h))!;
      expected.hourly.set(`${resource}|${iso(h)}`, round3(bySource.get(source)!.get(h)!));
    }
  }
  return { xml: out.join(''), expected };
}

/** A zip of `files` (deflated), as the Health app writes export.zip: a folder, the export and its CDA sibling. */
export function zipOf(files: { name: string; data: Buffer }[]): Buffer {
  const parts: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const file of files) {
    const name = Buffer.from(file.name);
    const packed = deflateRawSync(file.data);
    const crc = crc32(file.data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6);
    local.writeUInt16LE(8, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(packed.length, 18);
    local.writeUInt32LE(file.data.length, 22);
    local.writeUInt16LE(name.length, 26);
    const entry = Buffer.alloc(46);
    entry.writeUInt32LE(0x02014b50, 0);
    entry.writeUInt16LE(20, 4);
    entry.writeUInt16LE(20, 6);
    entry.writeUInt16LE(0x0800, 8);
    entry.writeUInt16LE(8, 10);
    entry.writeUInt32LE(crc, 16);
    entry.writeUInt32LE(packed.length, 20);
    entry.writeUInt32LE(file.data.length, 24);
    entry.writeUInt16LE(name.length, 28);
    entry.writeUInt32LE(offset, 42);
    parts.push(local, name, packed);
    central.push(entry, name);
    offset += local.length + name.length + packed.length;
  }
  const directory = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(files.length, 8);
  end.writeUInt16LE(files.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...parts, directory, end]);
}
