import { Type } from '@sinclair/typebox';
import { fullFormats } from 'ajv-formats/dist/formats';
import { validatorFor } from '../schemas/validator';
import { addDays, DAY_MS, daysBetween, isoLocal, isoWithOffset, offsetSuffix, parseInstant } from '../lib/platform/time';

/** isoWithOffset writes the time of day itself (a timeseries read formats 43,200 instants): it must say what toISOString says. */
const reference = (d: Date) => d.toISOString().replace('Z', '+00:00');

test('isoWithOffset is toISOString with +00:00, at the edges of days, years and the Date range', () => {
  const edges = [
    0,
    -1,
    1,
    86_399_999,
    86_400_000,
    Date.UTC(2026, 2, 10, 23, 59, 59, 999),
    -62_198_755_200_000,
    -62_198_755_200_001,
    253_402_300_799_999,
    253_402_300_800_000,
    8.64e15,
    -8.64e15,
  ];
  for (const ms of edges) expect(isoWithOffset(new Date(ms))).toBe(reference(new Date(ms)));
  // Days in any order (the date part is kept from the previous call), and every ms of a day's last second.
  for (let i = 0; i < 20_000; i++) {
    const d = new Date(Math.floor((Math.random() * 2 - 1) * 8.64e15));
    expect(isoWithOffset(d)).toBe(reference(d));
  }
  for (let ms = 0; ms < 1000; ms++)
    expect(isoWithOffset(new Date(Date.UTC(2026, 0, 1, 23, 59, 59, ms)))).toBe(`2026-01-01T23:59:59.${String(ms).padStart(3, '0')}+00:00`);
  expect(() => isoWithOffset(new Date(NaN))).toThrow(RangeError);
});

test('isoLocal writes an instant as local wall-clock time with its offset, on whichever side of midnight it falls', () => {
  const instant = Date.UTC(2026, 10, 1, 22, 10, 0, 999); // 2026-11-01T22:10:00.999Z
  expect(isoLocal(instant, 3600)).toBe('2026-11-01T23:10:00+01:00');
  expect(isoLocal(instant, 2 * 3600)).toBe('2026-11-02T00:10:00+02:00');
  expect(isoLocal(instant, -(4 * 3600))).toBe('2026-11-01T18:10:00-04:00');
  expect(isoLocal(instant, 5 * 3600 + 45 * 60)).toBe('2026-11-02T03:55:00+05:45');
  expect(isoLocal(instant, -(9 * 3600 + 30 * 60))).toBe('2026-11-01T12:40:00-09:30');
  expect(isoLocal(instant, 0)).toBe('2026-11-01T22:10:00+00:00');
  expect(offsetSuffix(-(3 * 3600 + 30 * 60))).toBe('-03:30');
  expect(offsetSuffix(14 * 3600)).toBe('+14:00');
});

test('calendar arithmetic on dates crosses months, leap days and years, and counts days either way', () => {
  expect(DAY_MS).toBe(24 * 60 * 60 * 1000);
  expect(addDays('2028-02-28', 1)).toBe('2028-02-29');
  expect(addDays('2027-02-28', 1)).toBe('2027-03-01');
  expect(addDays('2026-01-01', -1)).toBe('2025-12-31');
  expect(daysBetween('2025-12-31', '2026-03-01')).toBe(60);
  expect(daysBetween('2026-03-01', '2025-12-31')).toBe(-60);
  expect(daysBetween('2026-03-29', '2026-03-29')).toBe(0);
});

test("the date-time format accepts exactly what ajv-formats' RFC 3339 check accepts, read fast or not", () => {
  const isDateTime = validatorFor(Type.String({ format: 'date-time' }));
  const reference = (fullFormats['date-time'] as { validate: (s: string) => boolean }).validate;
  const seeds = [
    '2026-01-02T03:04:05Z',
    '2026-01-02T03:04:05.123Z',
    '2026-01-02T03:04:05.123456789+05:30',
    '2026-12-31T23:59:59-12:00',
    '2024-02-29T10:00:00Z',
    '2026-01-31T10:00:00Z',
    '2026-04-30T10:00:00Z',
    '2026-04-31T10:00:00Z',
    '2026-02-28T10:00:00Z',
    '2023-02-29T10:00:00Z',
    '2026-01-02 03:04:05+01:00',
    '2026-01-02t03:04:05z',
    '2026-01-02T23:59:60Z',
    '2026-01-02T22:59:60-01:00',
    '2026-01-02T03:04:05',
    '2026-01-02T03:04:05+0100',
    '2026-01-02T03:04:05+01',
    '2026-01-02T03:04:05.+01:00',
    '2026-01-02T24:00:00Z',
    '2026-13-02T03:04:05Z',
    '2026-01-02T03:04:05+24:00',
    '2026-01-02T03:04:05+23:60',
    '2026-01-02',
  ];
  const cases = [...seeds];
  // Every seed mutated: a character replaced, dropped or added, at every position.
  const alphabet = '0123456789-:TZ.+tz 9';
  for (const seed of seeds) {
    for (let i = 0; i <= seed.length; i++) {
      for (const c of alphabet) {
        cases.push(seed.slice(0, i) + c + seed.slice(i + 1), seed.slice(0, i) + seed.slice(i + 1), seed.slice(0, i) + c + seed.slice(i));
      }
    }
  }
  const disagreements = cases.filter((s) => isDateTime(s) !== reference(s));
  expect(disagreements).toEqual([]);
  expect(cases.filter((s) => isDateTime(s)).length).toBeGreaterThan(seeds.length); // both accept and refuse happen
});

test('parseInstant is Date.parse, read fast or not', () => {
  const seeds = [
    '2026-01-02T03:04:05Z',
    '2026-01-02T03:04:05.1Z',
    '2026-01-02T03:04:05.123456789Z',
    '2026-01-02T03:04:05.999999999+05:30',
    '2026-01-02T03:04:05-23:59',
    '2026-01-28T23:59:59.999-00:00',
    '1969-12-31T23:59:59.999Z',
    '0099-01-01T00:00:00Z',
    '2400-02-28T12:00:00+14:00',
    '2026-02-30T03:04:05Z',
    '2026-01-02T03:04:05',
    '2026-01-02',
    'yesterday',
  ];
  const cases = [...seeds];
  for (let k = 0; k < 2000; k++) cases.push(new Date(Math.floor((k / 2000 - 0.4) * 1e13) + k).toISOString());
  const alphabet = '0123456789-:TZ.+ ';
  for (const seed of seeds.slice(0, 6)) {
    for (let i = 0; i <= seed.length; i++) {
      for (const c of alphabet) cases.push(seed.slice(0, i) + c + seed.slice(i + 1), seed.slice(0, i) + seed.slice(i + 1));
    }
  }
  const disagreements = cases.filter((s) => !Object.is(parseInstant(s), Date.parse(s)));
  expect(disagreements).toEqual([]);
});
