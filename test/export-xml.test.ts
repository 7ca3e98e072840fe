import { type ExportElement, exportDate, exportElements } from '../lib/phones/export-xml';
import { generateExport } from './support/apple-health-export';

/**
 * The export.xml reader (lib/phones/export-xml.ts) against sax, a strict XML parser, on what the export generator
 * writes, and on a document with every attribute shape XML allows, cut into chunks at every position.
 */
type SaxTag = { name: string; attributes: Record<string, string> };
type SaxParser = {
  onopentag: (tag: SaxTag) => void;
  onclosetag: () => void;
  onerror: (err: Error) => void;
  write(text: string): SaxParser;
  close(): void;
};
const sax = require('sax') as { parser(strict: boolean, opts?: Record<string, unknown>): SaxParser };

const FORBIDDEN = /[\x00-\x08\x0b\x0c\x0e-\x1f]/g;

/** The root's children as sax reads them, values without the control characters XML forbids (the reader drops them). */
function bySax(xml: string): ExportElement[] {
  const parser = sax.parser(true);
  const out: ExportElement[] = [];
  const open: ExportElement[] = [];
  let depth = 0;
  parser.onopentag = (tag) => {
    depth++;
    if (depth === 1) return;
    const attrs = Object.fromEntries(Object.entries(tag.attributes).map(([k, v]) => [k, v.replace(FORBIDDEN, '')]));
    const element: ExportElement = { name: tag.name, attrs, children: [] };
    if (open.length) open[open.length - 1].children.push(element);
    else out.push(element);
    open.push(element);
  };
  parser.onclosetag = () => {
    depth--;
    if (depth >= 1) open.pop();
  };
  parser.onerror = (err) => {
    throw err;
  };
  parser.write(xml).close();
  return out;
}

async function byReader(chunks: string[]): Promise<ExportElement[]> {
  async function* text() {
    yield* chunks;
  }
  const out: ExportElement[] = [];
  for await (const elements of exportElements(text())) out.push(...elements);
  return out;
}

/** sax is strict: the export's DTD (malformed since iOS 16, and skipped unread by the reader) is left out for it. */
const withoutDtd = (xml: string) => xml.replace(/<!DOCTYPE[\s\S]*?\]>/, '');

test("a generated export reads as sax reads it (every element, attribute and child), in the file's 64 KB chunks", async () => {
  const { xml } = generateExport({ days: 120, lastDay: '2026-06-30', seed: 11 });
  const chunks: string[] = [];
  for (let at = 0; at < xml.length; at += 65_536) chunks.push(xml.slice(at, at + 65_536));
  const read = await byReader(chunks);
  expect(read.length).toBeGreaterThan(1000);
  expect(read).toEqual(bySax(withoutDtd(xml)));
});

test('attributes in every form XML allows, cut into chunks at every position, read as sax reads them', async () => {
  const xml = [
    '<?xml version="1.0" encoding="UTF-8"?>\n<!-- a comment with <Record type="no"/> in it -->\n',
    '<HealthData locale="en_US">\n',
    ' <Record type="HKQuantityTypeIdentifierHeartRate" sourceName="Ann&apos;s Watch &amp; &lt;Co&gt;" unit="count/min" value="71"/>\n',
    " <Record type='single' sourceName = 'a \"quoted\" name' value\t=\n'1=2'></Record>\n",
    ' <Record type="entities" sourceName="&#65;&#x42;&quot;C" value="x\u000by"/>\n',
    ' <Correlation type="HKCorrelationTypeIdentifierBloodPressure" startDate="2024-09-15 10:07:43 -0500">\n',
    '  <MetadataEntry key="HKTimeZone" value="Asia/Tokyo"/>\n',
    '  <Record type="HKQuantityTypeIdentifierBloodPressureSystolic" value="120"><MetadataEntry key="k" value=""/></Record>\n',
    ' </Correlation>\n',
    ' <Workout workoutActivityType="HKWorkoutActivityTypeRunning"  duration="30" >\n',
    '  <WorkoutStatistics type="HKQuantityTypeIdentifierHeartRate" average="140" maximum="171"/>\n',
    ' </Workout>\n',
    ' <ActivitySummary/>\n',
    '</HealthData>\n',
  ].join('');
  const expected = bySax(xml);
  expect(expected.map((e) => e.name)).toEqual(['Record', 'Record', 'Record', 'Correlation', 'Workout', 'ActivitySummary']);
  expect(expected[0].attrs.sourceName).toBe("Ann's Watch & <Co>");
  expect(expected[1].attrs).toEqual({ type: 'single', sourceName: 'a "quoted" name', value: '1=2' });
  expect(expected[2].attrs).toEqual({ type: 'entities', sourceName: 'AB"C', value: 'xy' });
  expect(await byReader([xml])).toEqual(expected);
  for (let cut = 1; cut < xml.length; cut++) {
    expect([cut, await byReader([xml.slice(0, cut), xml.slice(cut)])]).toEqual([cut, expected]);
  }
});

test('export dates: the usual shape read by characters says what the pattern says, for every character changed', () => {
  const byPattern = (value: string) => {
    const m = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) ?([+-])(\d\d):?(\d\d)$/.exec(value);
    return m && { iso: `${m[1]}T${m[2]}${m[3]}${m[4]}:${m[5]}`, offset: (m[3] === '-' ? -1 : 1) * (Number(m[4]) * 3600 + Number(m[5]) * 60) };
  };
  const seeds = [
    '2024-09-15 10:07:43 -0500',
    '2026-01-01 00:00:00 +0930',
    '1999-12-31 23:59:59 +0000',
    '2024-09-15 10:07:43-05:00',
    '2024-09-15 10:07:43 -05:00',
  ];
  const values = new Set(seeds);
  for (const seed of seeds) {
    for (let i = 0; i < seed.length; i++) {
      for (const c of ['0', '9', '-', '+', ' ', ':', 'x', '']) values.add(seed.slice(0, i) + c + seed.slice(i + 1));
    }
  }
  for (const value of values) expect([value, exportDate(value)]).toEqual([value, byPattern(value)]);
  expect(exportDate('2024-09-15 10:07:43 -0500')).toEqual({ iso: '2024-09-15T10:07:43-05:00', offset: -18_000 });
  expect(exportDate(undefined)).toBeNull();
});
